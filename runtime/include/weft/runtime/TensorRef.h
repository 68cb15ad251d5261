// A non-owning strided view of memory: what kernels read and write.
#pragma once

#include "weft/runtime/DType.h"
#include "weft/runtime/Shape.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {

class Storage;

/// Number of elements of `shape` (1 for a scalar). Unchecked: for shapes of existing tensors, whose
/// sizes were checked with byteSize() when their type was made.
int64_t numel(const Shape& shape);
/// The number of bytes a contiguous tensor of `shape` and `dtype` takes, or nullopt when a size is
/// negative or the bytes do not fit in int64 (sizes of 0 counting as 1). Every tensor type weft
/// makes is checked this way, so element counts, strides and offsets never overflow.
std::optional<int64_t> byteSize(const Shape& shape, DType dtype);
/// `a + b`, or nullopt when the sum does not fit in int64.
std::optional<int64_t> checkedAdd(int64_t a, int64_t b);
/// `a * b`, or nullopt when the product does not fit in int64.
std::optional<int64_t> checkedMul(int64_t a, int64_t b);
/// The length of the range [start, end) taken every `step` (> 0) elements, without overflow.
int64_t sliceLength(int64_t start, int64_t end, int64_t step);
/// Row-major strides (in elements) of a contiguous tensor of `shape`.
Shape contiguousStrides(const Shape& shape);
/// "[2, 3]".
std::string shapeString(const Shape& shape);

/// Where one kernel operand is, its dtype, shape and strides (in elements). Does not own memory.
/// `buffer` and `byteOffset` place it on any device; `data` is its first element as the CPU sees
/// it (null where its device's memory is not host-visible): what CPU kernels read and write.
/// Kernels' own scratch views of host memory have no buffer.
struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;
  const Storage* buffer = nullptr;
  int64_t byteOffset = 0;

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return weft::numel(shape); }
  bool isContiguous() const;
  /// Typed pointer to the first element.
  template <typename T> T* ptr() const { return static_cast<T*>(data); }
  /// Whether both start at the same byte of the same memory.
  bool sameStart(const TensorRef& other) const;
};

/// The operand `byteOffset` bytes into `buffer` (its data set where the buffer is host-visible).
TensorRef refInto(const Storage& buffer, int64_t byteOffset, DType dtype, Shape shape,
                  Shape strides);

} // namespace weft
