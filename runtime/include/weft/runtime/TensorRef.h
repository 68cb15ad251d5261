// A non-owning strided view of memory: what kernels read and write.
#pragma once

#include "weft/runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// Shape or strides: one entry per dimension.
using Shape = std::vector<int64_t>;

/// Number of elements of `shape` (1 for a scalar).
int64_t numel(const Shape& shape);
/// Row-major strides (in elements) of a contiguous tensor of `shape`.
Shape contiguousStrides(const Shape& shape);
/// "[2, 3]".
std::string shapeString(const Shape& shape);

/// Pointer, dtype, shape and strides (in elements) of one kernel operand. Does not own memory.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return weft::numel(shape); }
  bool isContiguous() const;
  /// Typed pointer to the first element.
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
};

} // namespace weft
