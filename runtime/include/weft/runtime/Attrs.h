// Named op attributes (dims, strides, dtypes, scalars) shared by kernels, the IR and autograd.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Shape.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace weft {

/// One attribute value. Integer lists are Shapes: up to 6 values inline, so an op's dims or
/// target shape cost no allocation.
using AttrValue = std::variant<int64_t, double, bool, Shape, DType, std::string>;

/// A small ordered map from attribute name to value; lookups are linear (ops have few attributes).
class Attrs {
public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  /// Sets (or replaces) `name`.
  Attrs& set(const std::string& name, AttrValue value) {
    for (auto& [k, v] : items_)
      if (k == name) {
        v = std::move(value);
        return *this;
      }
    items_.emplace_back(name, std::move(value));
    return *this;
  }
  /// True if `name` is present.
  bool has(const std::string& name) const { return find(name) != nullptr; }
  /// The attribute's value as `T`; a missing or mistyped attribute is an internal error.
  template <typename T> const T& get(const std::string& name) const {
    const AttrValue* v = find(name);
    WEFT_INTERNAL_ASSERT(v != nullptr, "missing attribute '", name, "'");
    const T* t = std::get_if<T>(v);
    WEFT_INTERNAL_ASSERT(t != nullptr, "attribute '", name, "' has another type");
    return *t;
  }
  /// The attribute's value whatever its type; a missing attribute is an internal error.
  const AttrValue& raw(const std::string& name) const {
    const AttrValue* v = find(name);
    WEFT_INTERNAL_ASSERT(v != nullptr, "missing attribute '", name, "'");
    return *v;
  }
  /// Shorthands for the common attribute types.
  int64_t i(const std::string& name) const { return get<int64_t>(name); }
  double f(const std::string& name) const { return get<double>(name); }
  bool b(const std::string& name) const { return get<bool>(name); }
  const Shape& ints(const std::string& name) const { return get<Shape>(name); }
  DType dtype(const std::string& name) const { return get<DType>(name); }
  /// A Number attribute (integer or floating) as a double.
  double number(const std::string& name) const {
    const AttrValue& v = raw(name);
    if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    return get<double>(name);
  }
  /// A Number attribute as a double, or nullopt where it is missing or not a number (for code
  /// that must not throw, such as codegen).
  std::optional<double> tryNumber(const std::string& name) const {
    const AttrValue* v = find(name);
    if (v == nullptr) return std::nullopt;
    if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(v)) return *d;
    return std::nullopt;
  }
  /// The attribute's value as `T`, or null where it is missing or of another type (for code that
  /// must not throw, such as codegen).
  template <typename T> const T* tryGet(const std::string& name) const {
    const AttrValue* v = find(name);
    return v == nullptr ? nullptr : std::get_if<T>(v);
  }
  /// All attributes in insertion order.
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& other) const = default;

private:
  const AttrValue* find(const std::string& name) const {
    for (const auto& [k, v] : items_)
      if (k == name) return &v;
    return nullptr;
  }
  std::vector<std::pair<std::string, AttrValue>> items_;
};

} // namespace weft
