// Shape helpers shared by every room.
#include "weft/runtime/TensorRef.h"

#include <sstream>

namespace weft {

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
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

bool TensorRef::isContiguous() const {
  int64_t expected = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

} // namespace weft
