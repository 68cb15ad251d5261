// Type printing and broadcasting.
#include "weft/runtime/ValueTypes.h"

namespace weft {

std::string typeString(const TensorType& t) {
  return std::string(dtypeName(t.dtype)) + shapeString(t.shape);
}

Result<Shape> broadcastShapes(const Shape& a, const Shape& b, std::string_view op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      return diag(ErrorKind::Shape, op, ": shapes ", shapeString(a), " and ", shapeString(b),
                  " cannot be broadcast together (dimension ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace weft
