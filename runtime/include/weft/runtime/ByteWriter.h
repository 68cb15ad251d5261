// Little-endian fields appended to a byte vector, lengths before sequences: what the executable
// format and cache keys are written with.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/DType.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace weft {

class ByteWriter {
public:
  std::vector<uint8_t> bytes;
  template <typename T> void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void u64(uint64_t v) { pod(v); }
  void i64(int64_t v) { pod(v); }
  void str(std::string_view s) {
    u64(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void blob(std::span<const uint8_t> b) {
    u64(b.size());
    bytes.insert(bytes.end(), b.begin(), b.end());
  }
  void ints(std::span<const int64_t> v) {
    u64(v.size());
    for (int64_t x : v)
      i64(x);
  }
  void slots(std::span<const int32_t> v) {
    u64(v.size());
    for (int32_t x : v)
      pod(x);
  }
  /// By name, so that reordering the dtype table does not change the meaning of old bytes.
  void dtype(DType t) { str(dtypeName(t)); }
  void attrs(const Attrs& a) {
    u64(a.items().size());
    for (const auto& [name, value] : a.items()) {
      str(name);
      pod(static_cast<uint8_t>(value.index()));
      std::visit(
          [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, int64_t>)
              i64(v);
            else if constexpr (std::is_same_v<T, double>)
              pod(v);
            else if constexpr (std::is_same_v<T, bool>)
              pod(static_cast<uint8_t>(v));
            else if constexpr (std::is_same_v<T, Shape>)
              ints(v);
            else if constexpr (std::is_same_v<T, DType>)
              dtype(v);
            else
              str(v);
          },
          value);
    }
  }
};

} // namespace weft
