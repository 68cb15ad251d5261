// The geometry of movement ops: how a view's shape, strides and offset follow from its input's.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/TensorRef.h"

#include <optional>

namespace weft {

/// Shape, strides (elements) and offset (elements, relative to the input's first element).
struct ViewGeometry {
  Shape shape;
  Shape strides;
  int64_t offset = 0;
};

/// True for ops that are views of their input (no copy when the strides allow it): reshape,
/// permute, expand, slice and stop_gradient.
bool isViewOp(OpCode op);

/// The view a movement op (reshape, permute, expand, slice, flip) makes of an input with
/// `shape`/`strides`, or nullopt when it needs a copy (a reshape of incompatible strides). Flip
/// gives negative strides, which only kernels see. Attributes must already be valid.
std::optional<ViewGeometry> computeView(OpCode op, const Shape& shape, const Shape& strides,
                                        const Attrs& at);

/// `ref` seen through a view geometry (same dtype and memory).
TensorRef applyView(const TensorRef& ref, const ViewGeometry& view);

} // namespace weft
