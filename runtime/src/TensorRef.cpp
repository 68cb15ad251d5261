// Shape helpers shared by every room.
#include "weft/runtime/TensorRef.h"

#include "weft/runtime/Storage.h"

#include <algorithm>
#include <sstream>

namespace weft {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<int64_t> byteSize(const Shape& shape, DType dtype) {
  // Sizes of 0 count as 1, as in contiguous strides: then no stride, offset or element count of
  // the type (empty or not) can overflow either.
  int64_t n = static_cast<int64_t>(elementSize(dtype));
  bool empty = false;
  for (int64_t s : shape) {
    auto m = s < 0 ? std::nullopt : checkedMul(n, std::max<int64_t>(s, 1));
    if (!m) return std::nullopt;
    n = *m;
    empty = empty || s == 0;
  }
  return empty ? 0 : n;
}

int64_t sliceLength(int64_t start, int64_t end, int64_t step) {
  // (end - start + step - 1) / step overflows for steps near INT64_MAX; this form cannot.
  return end > start ? (end - start - 1) / step + 1 : 0;
}

Shape contiguousStrides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d] > 1 ? shape[d] : 1;
  }
  return strides;
}

std::string shapeString(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

bool TensorRef::sameStart(const TensorRef& other) const {
  if (buffer != nullptr || other.buffer != nullptr)
    return buffer == other.buffer && byteOffset == other.byteOffset;
  return data == other.data;
}

TensorRef refInto(const Storage& buffer, int64_t byteOffset, DType dtype, Shape shape,
                  Shape strides) {
  void* host = buffer.data() != nullptr ? static_cast<char*>(buffer.data()) + byteOffset : nullptr;
  return TensorRef{host, dtype, std::move(shape), std::move(strides), &buffer, byteOffset};
}

bool TensorRef::isContiguous() const {
  if (numel() == 0) return true; // as PyTorch: no element is out of place
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

} // namespace weft
