// LibTorch-style index objects for Tensor::index and index_put_.
#pragma once

#include "weft/Tensor.h"

#include <optional>
#include <variant>

namespace weft::indexing {

/// A slice start:stop:step; missing bounds mean the whole dimension.
struct Slice {
  Slice(std::optional<int64_t> start = std::nullopt, std::optional<int64_t> stop = std::nullopt,
        int64_t step = 1)
      : start(start), stop(stop), step(step) {}
  std::optional<int64_t> start, stop;
  int64_t step;
};
/// Inserts a new dimension of size 1.
struct NoneIndex {};
/// Stands for as many full slices as needed.
struct EllipsisIndex {};
inline constexpr NoneIndex None{};
inline constexpr EllipsisIndex Ellipsis{};

/// One entry of an index list.
struct TensorIndex {
  TensorIndex(int64_t i) : value(i) {}           // NOLINT: implicit, as in LibTorch
  TensorIndex(int i) : value(int64_t{i}) {}      // NOLINT
  TensorIndex(bool b) : value(b) {}              // NOLINT
  TensorIndex(Slice s) : value(s) {}             // NOLINT
  TensorIndex(NoneIndex n) : value(n) {}         // NOLINT
  TensorIndex(EllipsisIndex e) : value(e) {}     // NOLINT
  TensorIndex(const char* s, WEFT_LOC);          // NOLINT: "..." means Ellipsis
  TensorIndex(Tensor t) : value(std::move(t)) {} // NOLINT
  std::variant<int64_t, bool, Slice, NoneIndex, EllipsisIndex, Tensor> value;
};

} // namespace weft::indexing
