// View geometry for movement ops, shared by eager views and the copying kernels.
#include "weft/runtime/View.h"

#include "weft/runtime/Error.h"

namespace weft {
namespace {

/// Strides for viewing (shape, strides) as `newShape` without a copy, as PyTorch's view() does:
/// each run of input dims that is contiguous in memory may be re-split freely.
std::optional<Shape> reshapeStrides(const Shape& shape, const Shape& strides,
                                    const Shape& newShape) {
  if (numel(shape) == 0 || shape.empty()) return contiguousStrides(newShape);
  Shape out(newShape.size());
  int64_t viewD = static_cast<int64_t>(newShape.size()) - 1;
  int64_t chunkBaseStride = strides.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensorNumel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensorNumel * chunkBaseStride)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1)) {
        out[viewD] = viewNumel * chunkBaseStride;
        viewNumel *= newShape[viewD];
        --viewD;
      }
      if (viewNumel != tensorNumel) return std::nullopt;
      if (d > 0) {
        chunkBaseStride = strides[d - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD != -1) return std::nullopt;
  return out;
}

} // namespace

bool isViewOp(OpCode op) {
  switch (opInfo(op).kind) {
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Identity:
    return true;
  default:
    return false;
  }
}

std::optional<ViewGeometry> computeView(OpCode op, const Shape& shape, const Shape& strides,
                                        const Attrs& at) {
  ViewGeometry v;
  switch (op) {
  case OpCode::Reshape: {
    v.shape = at.ints("shape");
    auto s = reshapeStrides(shape, strides, v.shape);
    if (!s) return std::nullopt;
    v.strides = *s;
    return v;
  }
  case OpCode::Permute:
    for (int64_t d : at.ints("dims")) {
      v.shape.push_back(shape[d]);
      v.strides.push_back(strides[d]);
    }
    return v;
  case OpCode::Expand: {
    v.shape = at.ints("shape");
    v.strides.assign(v.shape.size(), 0);
    size_t lead = v.shape.size() - shape.size();
    for (size_t d = 0; d < shape.size(); ++d)
      v.strides[lead + d] = shape[d] == v.shape[lead + d] ? strides[d] : 0;
    return v;
  }
  case OpCode::Slice: {
    int64_t dim = at.i("dim"), start = at.i("start"), end = at.i("end"), step = at.i("step");
    v.shape = shape;
    v.strides = strides;
    v.shape[dim] = sliceLength(start, end, step);
    v.strides[dim] = strides[dim] * step;
    v.offset = start * strides[dim];
    return v;
  }
  case OpCode::StopGradient:
    v.shape = shape;
    v.strides = strides;
    return v;
  case OpCode::Flip:
    v.shape = shape;
    v.strides = strides;
    for (int64_t d : at.ints("dims")) {
      if (shape[d] > 0) v.offset += (shape[d] - 1) * strides[d];
      v.strides[d] = -strides[d];
    }
    return v;
  default:
    WEFT_INTERNAL_ASSERT(false, "computeView called for ", opName(op));
  }
  return std::nullopt;
}

TensorRef applyView(const TensorRef& ref, const ViewGeometry& view) {
  TensorRef r;
  r.dtype = ref.dtype;
  const int64_t bytes = view.offset * static_cast<int64_t>(elementSize(ref.dtype));
  r.data = ref.data != nullptr ? static_cast<char*>(ref.data) + bytes : nullptr;
  r.buffer = ref.buffer;
  r.byteOffset = ref.byteOffset + bytes;
  r.shape = view.shape;
  r.strides = view.strides;
  return r;
}

} // namespace weft
