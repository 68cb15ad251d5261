// Containers: Sequential (a chain of tensor -> tensor modules), ModuleList and ModuleDict.
#pragma once

#include "weft/nn/Module.h"

#include <functional>
#include <string>

namespace weft::nn {

/// Runs its modules one after another; each takes and returns one tensor.
class SequentialImpl : public Module {
public:
  SequentialImpl() = default;
  template <typename... Holders> explicit SequentialImpl(Holders&&... modules) {
    (push_back(std::forward<Holders>(modules)), ...);
  }
  /// Appends a module (a holder such as nn::Linear) named by its position.
  template <typename H> void push_back(const H& holder) {
    push_back(std::to_string(steps_.size()), holder);
  }
  template <typename H> void push_back(std::string name, const H& holder) {
    register_module(std::move(name), holder);
    steps_.push_back([holder](const Tensor& x) { return holder(x); });
  }
  Tensor forward(const Tensor& x);
  size_t size() const { return steps_.size(); }
  /// The i-th module.
  std::shared_ptr<Module> operator[](size_t i) const;
  /// The i-th module as its implementation type (null if it is another type).
  template <typename T> std::shared_ptr<T> ptr(size_t i) const {
    return std::dynamic_pointer_cast<T>((*this)[i]);
  }

private:
  std::vector<std::function<Tensor(const Tensor&)>> steps_;
};
WEFT_MODULE(Sequential);

/// A list of modules whose parameters are registered; indexing and iteration as a vector.
class ModuleListImpl : public Module {
public:
  ModuleListImpl() = default;
  template <typename... Holders> explicit ModuleListImpl(Holders&&... modules) {
    (push_back(std::forward<Holders>(modules)), ...);
  }
  template <typename H> void push_back(const H& holder) {
    register_module(std::to_string(items_.size()), holder);
    items_.push_back(holder.ptr());
  }
  size_t size() const { return items_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <typename T> std::shared_ptr<T> ptr(size_t i) const {
    return std::dynamic_pointer_cast<T>((*this)[i]);
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

private:
  std::vector<std::shared_ptr<Module>> items_;
};
WEFT_MODULE(ModuleList);

/// Modules by name, in insertion order.
class ModuleDictImpl : public Module {
public:
  template <typename H> void insert(std::string key, const H& holder) {
    register_module(key, holder);
  }
  bool contains(const std::string& key) const;
  std::shared_ptr<Module> operator[](const std::string& key) const;
  template <typename T> std::shared_ptr<T> ptr(const std::string& key) const {
    return std::dynamic_pointer_cast<T>((*this)[key]);
  }
  std::vector<std::string> keys() const;
  size_t size() const { return named_children().size(); }
};
WEFT_MODULE(ModuleDict);

} // namespace weft::nn
