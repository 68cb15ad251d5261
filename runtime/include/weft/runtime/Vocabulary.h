// The primitive-making functions the vector-Jacobian rules call, written once for any tensor-like
// type: eager tensors (weft::Tensor) and graph values (weft::passes::GValue) alike.
//
// A tensor-like T supplies, as free functions found by argument-dependent lookup, four primitives:
// dispatch(op, std::vector<T> operands, attrs) makes one op-table node (eagerly: runs it),
// filled(like, shape, dtype, value) a constant, and shape_of / dtype_of read metadata. Everything
// below is built on them, so a new primitive's gradient rule can name its op (node(OpCode::X,
// attrs, operands...)) without a helper on either side. Where a side has a function of the same
// name (the eager API's gather, matmul, cumsum, ...), overload resolution prefers it: it is the
// same primitive, checked.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/DType.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/TensorRef.h"

#include <concepts>
#include <initializer_list>
#include <numeric>
#include <utility>
#include <vector>

namespace weft {

/// A type the vocabulary serves (see the file comment).
template <typename T>
concept TensorLike = requires(const T& t) {
  { shape_of(t) } -> std::same_as<Shape>;
  { dtype_of(t) } -> std::same_as<DType>;
  { dispatch(OpCode::Neg, std::vector<T>{t}, Attrs{}) } -> std::same_as<T>;
};

/// One node of `op` over the operands (eagerly: the op run on them).
template <TensorLike T, typename... Rest>
T node(OpCode op, const Attrs& attrs, const T& first, const Rest&... rest) {
  return dispatch(op, std::vector<T>{first, rest...}, attrs);
}

template <TensorLike T> bool is_floating(const T& x) {
  return isFloating(dtype_of(x));
}
template <TensorLike T> std::vector<Shape> shapes_of(const std::vector<T>& xs) {
  std::vector<Shape> s;
  for (const T& x : xs)
    s.push_back(shape_of(x));
  return s;
}
/// Zeros of `shape` in like's dtype; zeros and ones of x's shape and dtype.
template <TensorLike T> T zeros_shaped(const T& like, const Shape& shape) {
  return filled(like, shape, dtype_of(like), 0.0);
}
template <TensorLike T> T zeros_like(const T& x) {
  return filled(x, shape_of(x), dtype_of(x), 0.0);
}
template <TensorLike T> T ones_like(const T& x) {
  return filled(x, shape_of(x), dtype_of(x), 1.0);
}
template <TensorLike T> T cast(const T& x, DType dtype) {
  return dtype_of(x) == dtype ? x : node(OpCode::Cast, Attrs{{"dtype", dtype}}, x);
}
template <TensorLike T> T where(const T& c, const T& a, const T& b) {
  return node(OpCode::Where, Attrs{}, c, a, b);
}

// ---- movement (x itself where the op would change nothing) ----
template <TensorLike T> T reshape(const T& x, const Shape& shape) {
  return shape_of(x) == shape ? x : node(OpCode::Reshape, Attrs{{"shape", shape}}, x);
}
template <TensorLike T> T expand(const T& x, const Shape& shape) {
  return shape_of(x) == shape ? x : node(OpCode::Expand, Attrs{{"shape", shape}}, x);
}
template <TensorLike T> T permute(const T& x, const Shape& dims) {
  return node(OpCode::Permute, Attrs{{"dims", dims}}, x);
}
/// The last two dims swapped.
template <TensorLike T> T mT(const T& x) {
  Shape dims(shape_of(x).size());
  std::iota(dims.begin(), dims.end(), int64_t{0});
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return permute(x, dims);
}
template <TensorLike T> T flip(const T& x, const Shape& dims) {
  return node(OpCode::Flip, Attrs{{"dims", dims}}, x);
}
/// Constant pad with pads in dim order [lo0, hi0, lo1, hi1, ...] (negative values crop).
template <TensorLike T> T pad_dims(const T& x, const Shape& pads, double value) {
  return node(OpCode::Pad, Attrs{{"pads", pads}, {"value", value}}, x);
}
template <TensorLike T>
T slice_dim(const T& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return node(OpCode::Slice, Attrs{{"dim", dim}, {"start", start}, {"end", end}, {"step", step}},
              x);
}

// ---- reductions and scans ----
template <TensorLike T> T reduce_op(OpCode op, const T& x, const Shape& dims, bool keepdim) {
  return node(op, Attrs{{"dims", dims}, {"keepdim", keepdim}}, x);
}
template <TensorLike T> T cumsum(const T& x, int64_t dim) {
  return node(OpCode::CumSum, Attrs{{"dim", dim}}, x);
}
template <TensorLike T> T cumprod(const T& x, int64_t dim) {
  return node(OpCode::CumProd, Attrs{{"dim", dim}}, x);
}
template <TensorLike T> T logcumsumexp(const T& x, int64_t dim) {
  return node(OpCode::LogCumSumExp, Attrs{{"dim", dim}}, x);
}

// ---- linear algebra and convolution ----
template <TensorLike T> T matmul(const T& a, const T& b) {
  return node(OpCode::MatMul, Attrs{}, a, b);
}
template <TensorLike T> T inverse(const T& x) {
  return node(OpCode::Inverse, Attrs{}, x);
}
/// The factor `op` (a linear-algebra row of the op table taking one matrix and no attributes:
/// eigvalsh, qr_q, svd_u, ...) of x.
template <TensorLike T> T matrix_op(OpCode op, const T& x) {
  return node(op, Attrs{}, x);
}
/// The attributes of a convolution, from another conv-family node's.
inline Attrs convAttrs(const Attrs& at) {
  return Attrs{{"stride", at.ints("stride")},
               {"padding", at.ints("padding")},
               {"dilation", at.ints("dilation")},
               {"groups", at.i("groups")}};
}
template <TensorLike T> T conv(const T& x, const T& w, const Attrs& at) {
  return node(OpCode::Conv, convAttrs(at), x, w);
}
template <TensorLike T>
T conv_input_grad(const T& gy, const T& w, const Attrs& at, const Shape& inputShape) {
  Attrs a = convAttrs(at);
  a.set("input_shape", inputShape);
  return node(OpCode::ConvInputGrad, a, gy, w);
}
template <TensorLike T>
T conv_weight_grad(const T& x, const T& gy, const Attrs& at, const Shape& weightShape) {
  Attrs a = convAttrs(at);
  a.set("weight_shape", weightShape);
  return node(OpCode::ConvWeightGrad, a, x, gy);
}

// ---- indexing ----
template <TensorLike T> T gather(const T& x, int64_t dim, const T& index) {
  return node(OpCode::Gather, Attrs{{"dim", dim}}, x, index);
}
/// x with src scattered in along `dim` by `op` (a row of the Scatter kind: scatter, scatter_add,
/// scatter_prod, ...).
template <TensorLike T>
T scatter_op(OpCode op, const T& x, int64_t dim, const T& index, const T& src) {
  return node(op, Attrs{{"dim", dim}}, x, index, src);
}
template <TensorLike T> T scatter(const T& x, int64_t dim, const T& index, const T& src) {
  return scatter_op(OpCode::Scatter, x, dim, index, src);
}
template <TensorLike T> T scatter_add(const T& x, int64_t dim, const T& index, const T& src) {
  return scatter_op(OpCode::ScatterAdd, x, dim, index, src);
}
template <TensorLike T> T index_select(const T& x, int64_t dim, const T& index) {
  return node(OpCode::IndexSelect, Attrs{{"dim", dim}}, x, index);
}
template <TensorLike T> T index_add(const T& x, int64_t dim, const T& index, const T& src) {
  return node(OpCode::IndexAdd, Attrs{{"dim", dim}}, x, index, src);
}

} // namespace weft
