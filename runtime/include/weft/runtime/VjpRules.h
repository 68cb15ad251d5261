// The vector-Jacobian rules of the op table as templates over a tensor-like type T, so one rule
// serves eager autograd (T = weft::Tensor) and graph autodiff (T = a graph value).
//
// T is tensor-like as weft/runtime/Vocabulary.h says (which gives the rules reshape, reduce_op,
// matmul, gather, conv_input_grad, ... for it) and provides besides, as free functions found by
// argument-dependent lookup: the arithmetic operators and ==, !=, <, >, <= (with T and double
// operands where the rules use them), a function per unary op and per binary op with a plain API
// named as in the op table (exp, cos, pow, ...), and is_column_major; and it is
// default-constructible as "no gradient".
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/DType.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/TensorRef.h"
#include "weft/runtime/Vocabulary.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace weft::rules {

/// `shape` with the reduced dims of `at` set to 1 (the keepdim shape).
inline Shape keptShape(const Shape& shape, const Attrs& at) {
  const auto& dims = at.ints("dims");
  Shape k = shape;
  for (size_t d = 0; d < k.size(); ++d)
    if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end())
      k[d] = 1;
  return k;
}

inline Shape inverse_permutation(const Shape& dims) {
  Shape inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inv[static_cast<size_t>(dims[i])] = static_cast<int64_t>(i);
  return inv;
}

inline Shape negated(const Shape& v) {
  Shape r;
  for (int64_t x : v)
    r.push_back(-x);
  return r;
}

/// Sums `g` down to `shape`: undoes broadcasting (the gradient of an input that was broadcast).
template <typename T> T sum_to(const T& g, const Shape& shape) {
  Shape s = shape_of(g);
  if (s == shape) return g;
  size_t lead = s.size() - shape.size();
  Shape dims;
  for (size_t d = 0; d < s.size(); ++d)
    if (d < lead || (shape[d - lead] == 1 && s[d] != 1)) dims.push_back(static_cast<int64_t>(d));
  T r = dims.empty() ? g : reduce_op(OpCode::Sum, g, dims, true);
  return shape_of(r) == shape ? r : reshape(r, shape);
}

/// matmul: g @ b^T for a, a^T @ g for b, each summed over the batch dims it was broadcast along.
/// A 2-D b shared by every batch of a (a linear layer on [batch, ..., features]) gets its gradient
/// from one product with the batch folded into the rows, instead of one product per batch and a
/// sum over them.
template <typename T> T vjp_matmul(const T& g, const T& a, const T& b, size_t i) {
  Shape as = shape_of(a), bs = shape_of(b);
  if (i == 0) return sum_to(matmul(g, mT(b)), as);
  // A column-major b (w.t() of a weight, as linear() makes) gets its gradient computed as
  // (g^T a)^T: the transpose of a contiguous matrix, which reaches the weight through the
  // transpose's backward contiguous, so the gradient accumulator keeps it rather than copying it
  // (PyTorch's mm backward matches the operand's layout the same way). Graph values have no
  // layout: never column-major.
  if (bs.size() == 2 && as.size() >= 2 && as.back() > 0) {
    int64_t k = as.back(), rows = numel(as) / k;
    T a2 = reshape(a, Shape{rows, k}), g2 = reshape(g, Shape{rows, bs.back()});
    if (is_column_major(b)) return mT(matmul(mT(g2), a2));
    if (as.size() > 2) return matmul(mT(a2), g2);
  }
  return sum_to(matmul(mT(a), g), bs);
}

/// inverse's gradient: -(A^-1)^T g (A^-1)^T, from the output alone.
template <typename T> T vjp_inverse(const T& g, const T& y) {
  return -matmul(matmul(mT(y), g), mT(y));
}
/// log|det|'s gradient: g (A^-1)^T, each matrix's g broadcast over its elements; det's is that
/// of g det(A).
template <typename T> T vjp_logabsdet(const T& g, const T& x) {
  Shape s = shape_of(g);
  s.push_back(1);
  s.push_back(1);
  return reshape(g, s) * mT(inverse(x));
}
template <typename T> T vjp_det(const T& g, const T& x, const T& y) {
  return vjp_logabsdet(g * y, x);
}

/// Bool [n, n] masks of the strictly lower triangle and of the diagonal (`like` gives the
/// builder and a floating dtype to count in).
template <typename T> std::pair<T, T> lower_and_diagonal(const T& like, int64_t n) {
  T ones = ones_like(zeros_shaped(like, Shape{n}));
  T index = cumsum(ones, 0) - ones; // 0, 1, ..., n - 1
  T rows = reshape(index, Shape{n, 1}), cols = reshape(index, Shape{1, n});
  return {rows > cols, rows == cols};
}
/// Cholesky's gradient (A = L L^T), as PyTorch computes it: M = tril(L^T g) made symmetric with
/// its lower triangle halved (0.5 (M + tril(M, -1)^T)), then L^-T M L^-1.
template <typename T> T vjp_cholesky(const T& g, const T& l) {
  const Shape s = shape_of(l);
  auto [lower, diagonal] = lower_and_diagonal(l, s.back());
  T zero = zeros_shaped(g, Shape{});
  T m = matmul(mT(l), g);
  T strict = where(lower, m, zero);
  T sym = (strict + where(diagonal, m, zero) + mT(strict)) * 0.5;
  T inv = inverse(l);
  return matmul(matmul(mT(inv), sym), inv);
}
/// The eigenvalues' gradient: V diag(g) V^T, V the eigenvectors.
template <typename T> T vjp_eigvalsh(const T& g, const T& x) {
  T v = matrix_op(OpCode::EighVectors, x);
  Shape row = shape_of(g);
  row.insert(row.end() - 1, 1); // [..., 1, n]: scales V's columns
  return matmul(v * reshape(g, row), mT(v));
}
/// The eigenvectors' gradient, as PyTorch's for a Hermitian matrix: V^T g projected onto the
/// skew-symmetric matrices, divided elementwise by w_j - w_i (0 on the diagonal), between V and
/// V^T.
template <typename T> T vjp_eigh_vectors(const T& g, const T& x, const T& v) {
  T w = matrix_op(OpCode::EighValues, x);
  Shape col = shape_of(w), row = shape_of(w);
  col.push_back(1);
  row.insert(row.end() - 1, 1);
  T gap = reshape(w, row) - reshape(w, col); // [i][j] = w_j - w_i
  const T diagonal = lower_and_diagonal(g, shape_of(w).back()).second;
  T vg = matmul(mT(v), g);
  T skew = (vg - mT(vg)) * 0.5;
  T scaled = where(diagonal, zeros_shaped(g, Shape{}), skew / where(diagonal, ones_like(gap), gap));
  return matmul(matmul(v, scaled), mT(v));
}

/// `m` made symmetric from its lower triangle (the diagonal kept once): tril(m) + tril(m, -1)^T.
template <typename T> T copy_lower_to_upper(const T& m) {
  auto [lower, diagonal] = lower_and_diagonal(m, shape_of(m).back());
  T zero = zeros_shaped(m, Shape{});
  T strict = where(lower, m, zero);
  return strict + mT(strict) + where(diagonal, m, zero);
}
/// QR's gradient (reduced: Q [m, k], R [k, n]) for the gradient g of factor `which` (0: Q, 1: R;
/// the other's is zero; y is that factor, the other is factored again), as PyTorch computes it. m
/// >= n: (gq + Q copyltu(R gr^T - gq^T Q)) R^-T. m < n: A = [X Y] with X = Q U square and Y = Q V;
/// X's gradient is the square case's with gq + Y gV^T and gU, Y's is Q gV.
template <typename T> T vjp_qr(const T& g, const T& x, const T& y, int which) {
  const T q = which == 0 ? y : matrix_op(OpCode::QrQ, x);
  const T r = which == 1 ? y : matrix_op(OpCode::QrR, x);
  const T gq = which == 0 ? g : zeros_shaped(g, shape_of(q));
  const T gr = which == 1 ? g : zeros_shaped(g, shape_of(r));
  const Shape qs = shape_of(q), rs = shape_of(r);
  const auto rank = static_cast<int64_t>(rs.size());
  const int64_t m = qs[qs.size() - 2], n = rs.back();
  auto square = [](const T& gQ, const T& gR, const T& Q, const T& R) {
    T rhs = gQ + matmul(Q, copy_lower_to_upper(matmul(R, mT(gR)) - matmul(mT(gQ), Q)));
    return matmul(rhs, mT(inverse(R)));
  };
  if (m >= n) return square(gq, gr, q, r);
  T u = slice_dim(r, rank - 1, 0, m, 1), v = slice_dim(r, rank - 1, m, n, 1);
  T gu = slice_dim(gr, rank - 1, 0, m, 1), gv = slice_dim(gr, rank - 1, m, n, 1);
  T gx = square(gq + matmul(matmul(q, v), mT(gv)), gu, q, u);
  T gy = matmul(q, gv);
  Shape right(static_cast<size_t>(2 * rank), 0), left(static_cast<size_t>(2 * rank), 0);
  right.back() = n - m; // [gx | 0] + [0 | gy]
  left[left.size() - 2] = m;
  return pad_dims(gx, right, 0.0) + pad_dims(gy, left, 0.0);
}
/// The SVD's gradient (reduced: U [m, k], S [k], Vh [k, n]) for the gradient g of factor `which`
/// (0: U, 1: S, 2: Vh; the others' are zero), as PyTorch computes it:
/// U [(skew(U^T gU) S + S skew(V^T gV)) / (S_j^2 - S_i^2) + diag(gS)] Vh
/// + (I - U U^T) gU S^-1 Vh + U S^-1 gV^T (I - V V^T), skew(X) = X - X^T.
template <typename T> T vjp_svd(const T& g, const T& x, int which) {
  T u = matrix_op(OpCode::SvdU, x), s = matrix_op(OpCode::SvdS, x),
    vh = matrix_op(OpCode::SvdVh, x);
  const Shape us = shape_of(u), vs = shape_of(vh);
  const int64_t m = us[us.size() - 2], k = us.back(), n = vs.back();
  Shape col = shape_of(s), row = shape_of(s);
  col.push_back(1);
  row.insert(row.end() - 1, 1);
  T sRow = reshape(s, row), sCol = reshape(s, col); // [..., 1, k] and [..., k, 1]
  T zero = zeros_shaped(g, Shape{});
  const T diagonal = lower_and_diagonal(g, k).second;
  if (which == 1) // diag(gS) alone
    return matmul(matmul(u, where(diagonal, reshape(g, row) + zeros_shaped(g, {k, k}), zero)), vh);
  if (which == 0) {
    T utg = matmul(mT(u), g);
    T skew = utg - mT(utg);
    T gap = sRow * sRow - sCol * sCol;
    T inner = where(diagonal, zero, skew * sRow / where(diagonal, ones_like(gap), gap));
    T ga = matmul(matmul(u, inner), vh);
    if (m > k) ga = ga + matmul((g - matmul(u, utg)) / sRow, vh);
    return ga;
  }
  T v = mT(vh), gv = mT(g);
  T vtg = matmul(mT(v), gv);
  T skew = vtg - mT(vtg);
  T gap = sRow * sRow - sCol * sCol;
  T inner = where(diagonal, zero, sCol * skew / where(diagonal, ones_like(gap), gap));
  T ga = matmul(matmul(u, inner), vh);
  if (n > k) ga = ga + matmul(u, mT((gv - matmul(v, vtg)) / sRow));
  return ga;
}

/// gather's gradient for x: g added at the gathered positions. Where the index picks one position
/// per line along `dim` and matches x elsewhere (cross-entropy's target, take_along_dim of an
/// argmax), it is where(position == index, g, 0), an elementwise expression that fuses into its
/// readers, instead of a tensor of zeros the size of x with g scattered in (a compiled step's
/// largest buffer for a large vocabulary). The forward gather has checked the index (in [0, size),
/// as PyTorch's).
template <typename T> T vjp_gather(const T& g, const Shape& xs, const T& index, int64_t dim) {
  const Shape is = shape_of(index);
  const auto d = static_cast<size_t>(dim < 0 ? dim + static_cast<int64_t>(xs.size()) : dim);
  bool oneHot = d < xs.size() && is.size() == xs.size() && is[d] == 1 && xs[d] > 0;
  for (size_t k = 0; oneHot && k < xs.size(); ++k)
    oneHot = k == d || is[k] == xs[k];
  if (!oneHot) return scatter_add(zeros_shaped(g, xs), dim, index, g); // g has x's dtype
  T ones = ones_like(zeros_shaped(index, Shape{xs[d]}));
  Shape lineShape(xs.size(), 1);
  lineShape[d] = xs[d];
  T position = reshape(cumsum(ones, 0) - ones, lineShape); // 0, 1, ... along dim
  return where(position == index, g, zeros_shaped(g, Shape{}));
}

/// scatter_amax's and scatter_amin's gradient for self (i == 0) or src (i == 2), as PyTorch's: each
/// output's gradient split evenly among the elements equal to it that reached it.
template <typename T>
T vjp_scatter_extremum(const T& g, const T& x, const T& index, const T& src, const T& y,
                       int64_t dim, size_t i) {
  T selfIs = cast(x == y, dtype_of(g)), srcIs = cast(src == gather(y, dim, index), dtype_of(g));
  T share = g / scatter_add(selfIs, dim, index, srcIs);
  return i == 0 ? selfIs * share : srcIs * gather(share, dim, index);
}

/// scatter_prod's gradient for self (i == 0) or src (i == 2), as PyTorch's: each element's
/// gradient is the output's times the product of everything else that reached its output. For
/// self that is the product with self's zeros taken as 1; for a source, the output over it, or
/// where it is its output's only zero source, the product with it taken as 1.
template <typename T>
T vjp_scatter_prod(const T& g, const T& x, const T& index, const T& src, const T& y, int64_t dim,
                   size_t i) {
  T zero = zeros_shaped(g, Shape{}), one = zero + 1.0;
  if (i == 0) {
    T masked = where(x == zero, one, x);
    return g * scatter_op(OpCode::ScatterProd, masked, dim, index, src) / masked;
  }
  T srcZero = src == zero;
  T zerosThere =
      gather(scatter_add(zeros_like(y), dim, index, cast(srcZero, dtype_of(g))), dim, index);
  T onlyZero = logical_and(srcZero, zerosThere == one);
  T others = scatter_op(OpCode::ScatterProd, x, dim, index, where(onlyZero, one, src));
  return where(onlyZero, gather(g * others, dim, index),
               gather(g * y, dim, index) / where(srcZero, one, src));
}

/// Gradient of a reduction: the output gradient broadcast back over the reduced dims.
template <typename T> T expand_reduced(const T& g, const Shape& shape, const Attrs& at) {
  return expand(reshape(g, keptShape(shape, at)), shape);
}

/// amax/amin: ties share the gradient evenly, as torch.amax does. A NaN extremum came from the
/// NaN elements of its slice (they propagate), so those share it, as torch.max() routes it.
template <typename T> T vjp_extremum(const T& g, const T& x, const T& y, const Attrs& at) {
  Shape k = keptShape(shape_of(x), at);
  T mask = cast(x == reshape(y, k), dtype_of(x)) + cast(x != x, dtype_of(x));
  T count = reduce_op(OpCode::Sum, mask, at.ints("dims"), true);
  return reshape(g, k) * mask / count;
}

/// cumprod along `d`: dy_j / dx_i is the product of x_0..x_j without x_i (j >= i). Before a
/// line's first zero that is y_j / x_i, so the gradient is the reversed cumsum of g * y (up to
/// the zero) over x_i, PyTorch's formula; at the first zero it is the reversed cumsum of g times
/// the products with that zero left out, up to the second zero; after it, every product holds the
/// zero: 0. Terms past those zeros are masked out before they are summed (an inf there would make
/// 0 * inf = NaN). A line of one element passes g on, as in PyTorch (a NaN included).
template <typename T> T vjp_cumprod(const T& g, const T& x, const T& y, int64_t d) {
  const Shape shape = shape_of(x);
  if (numel(shape) <= 1 || shape[static_cast<size_t>(d)] == 1) return g;
  const Shape dims{d};
  auto reversedCumsum = [&](const T& v) { return flip(cumsum(flip(v, dims), d), dims); };
  T zero = cast(x == 0.0, dtype_of(x));
  T seen = cumsum(zero, d); // zeros at or before each element
  T before = seen == 0.0, between = seen == 1.0, first = seen * zero == 1.0;
  T beforeFirst =
      reversedCumsum(where(before, g * y, zeros_like(g))) / where(before, x, ones_like(x));
  T withoutFirst = cumprod(where(first, ones_like(x), x), d);
  T atFirst = reversedCumsum(where(between, g * withoutFirst, zeros_like(g)));
  return where(before, beforeFirst, where(first, atFirst, zeros_like(g)));
}

/// logcumsumexp along `d`: dy_j / dx_i = exp(x_i - y_j) for j >= i. The sum over j of g_j times
/// that is taken apart into g's positive and negative parts, each summed in log space (a reversed
/// logcumsumexp of log|g| - y) so nothing overflows; a part's absent terms are the lowest finite
/// value, whose exp is 0 (PyTorch's and TensorFlow's formula). One element passes g on (PyTorch
/// does so for a 0-d tensor; a one-element line holding NaN gets g here, NaN there).
template <typename T> T vjp_logcumsumexp(const T& g, const T& x, const T& y, int64_t d) {
  if (numel(shape_of(x)) <= 1) return g;
  const Shape dims{d};
  auto reversed = [&](const T& v) { return flip(logcumsumexp(flip(v, dims), d), dims); };
  T none = zeros_like(g) - largestFinite(dtype_of(g));
  T logAbs = log(abs(g));
  T zero = zeros_like(g);
  T positive = exp(reversed(where(zero < g, logAbs, none) - y) + x);
  T negative = exp(reversed(where(g < zero, logAbs, none) - y) + x);
  return positive - negative;
}

/// prod: d prod / d x_i is the product of the others. A slice of one element passes g on; a slice
/// without zeros gives prod / x_i (as PyTorch); with one zero, the zero gets the product of the
/// rest and the others 0; with more zeros, all get 0 (as PyTorch's full reduction). So no
/// division by zero, and NaN/inf elements only spread where PyTorch's rule spreads them.
template <typename T> T vjp_prod(const T& g, const T& x, const T& y, const Attrs& at) {
  Shape k = keptShape(shape_of(x), at);
  if (numel(k) == numel(shape_of(x))) return expand(reshape(g, k), shape_of(x));
  const auto& dims = at.ints("dims");
  T isZero = x == 0.0;
  T nonzero = where(isZero, ones_like(x), x);
  T prodNonzero = reduce_op(OpCode::Prod, nonzero, dims, true);
  T zeroCount = reduce_op(OpCode::Sum, cast(isZero, dtype_of(x)), dims, true);
  T atZero = where(zeroCount == 1.0, prodNonzero, zeros_like(prodNonzero));
  T noZero = expand(zeroCount == 0.0, shape_of(x));
  T others = where(isZero, expand(atZero, shape_of(x)),
                   where(noZero, reshape(y, k) / nonzero, zeros_like(x)));
  return reshape(g, k) * others;
}

/// slice with a step: the gradient spread back, zeros between and around.
template <typename T> T vjp_slice(const T& g, const Shape& shape, const Attrs& at) {
  int64_t dim = at.i("dim"), start = at.i("start"), step = at.i("step");
  Shape gs = shape_of(g);
  int64_t n = shape[static_cast<size_t>(dim)], len = gs[static_cast<size_t>(dim)];
  T spread = g;
  if (step > 1) { // interleave step-1 zeros after every element
    Shape u = gs;
    u.insert(u.begin() + dim + 1, 1);
    Shape pads(2 * u.size(), 0);
    pads[static_cast<size_t>(2 * (dim + 1) + 1)] = step - 1;
    Shape merged = gs;
    merged[static_cast<size_t>(dim)] = len * step;
    spread = reshape(pad_dims(reshape(g, u), pads, 0.0), merged);
  }
  Shape pads(2 * gs.size(), 0);
  pads[static_cast<size_t>(2 * dim)] = start;
  pads[static_cast<size_t>(2 * dim + 1)] =
      n - start - shape_of(spread)[static_cast<size_t>(dim)]; // < 0 crops
  return pad_dims(spread, pads, 0.0);
}

/// cat: each input's gradient is its slice of the output gradient.
template <typename T>
T vjp_cat(const T& g, const std::vector<Shape>& shapes, const Attrs& at, size_t i) {
  int64_t dim = at.i("dim"), offset = 0;
  size_t rank = shape_of(g).size();
  auto legacyEmpty = [&](const Shape& s) { return s.size() == 1 && s[0] == 0 && rank != 1; };
  for (size_t j = 0; j < i; ++j)
    if (!legacyEmpty(shapes[j])) offset += shapes[j][static_cast<size_t>(dim)];
  if (legacyEmpty(shapes[i])) return zeros_shaped(g, shapes[i]);
  return slice_dim(g, dim, offset, offset + shapes[i][static_cast<size_t>(dim)], 1);
}

/// The gradient of input `i` of `op` given the output gradient `g`, the inputs and the output.
template <typename T>
T apply(OpCode op, const T& g, const std::vector<T>& in, const T& y, const Attrs& at, size_t i) {
  static const T kNone{};
  const T nograd{};
  const T& x = in.empty() ? kNone : in[0];
  const T& a = x;
  const T& b = in.size() > 1 ? in[1] : kNone;
  (void)a;
  (void)b;
  (void)y;
  switch (op) {
#define NONDIFF nograd
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  case OpCode::N:                                                                                  \
    return v;
#define WEFT_BINARY(N, s, r, api, low, k, va, vb)                                                  \
  case OpCode::N:                                                                                  \
    return i == 0 ? T(va) : T(vb);
#define WEFT_OP(N, s, kind, n, v)                                                                  \
  case OpCode::N:                                                                                  \
    return v;
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
#undef NONDIFF
  }
  return nograd;
}

} // namespace weft::rules
