// The op table's vjp column expanded for eager tensors, and the helpers those rules call.
#include "Vjp.h"

#include "TensorImpl.h"
#include "weft/Functions.h"

#include <algorithm>
#include <array>

namespace weft {
namespace {

/// `shape` with the reduced dims of `at` set to 1 (the keepdim shape).
Shape keptShape(const Shape& shape, const Attrs& at) {
  const auto& dims = at.ints("dims");
  Shape k = shape;
  for (size_t d = 0; d < k.size(); ++d)
    if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end())
      k[d] = 1;
  return k;
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> s;
  for (const Tensor& t : ts)
    s.push_back(t.sizes());
  return s;
}

Tensor expand_reduced(const Tensor& g, const Shape& shape, const Attrs& at) {
  return g.reshape(keptShape(shape, at)).expand(shape);
}

Tensor vjp_extremum(const Tensor& g, const Tensor& x, const Tensor& y, const Attrs& at) {
  Shape k = keptShape(x.sizes(), at);
  Tensor mask = cast(x == y.reshape(k), x.dtype());
  Tensor count = reduce_op(OpCode::Sum, mask, at.ints("dims"), true);
  return g.reshape(k) * mask / count; // ties share the gradient evenly, as torch.amax does
}

Tensor vjp_prod(const Tensor& g, const Tensor& x, const Tensor& y, const Attrs& at) {
  // d prod / d x_i = product of the others; computed without dividing by zero.
  Shape k = keptShape(x.sizes(), at);
  const auto& dims = at.ints("dims");
  Tensor isZero = x == 0;
  Tensor nonzero = where(isZero, ones_like(x), x);
  Tensor prodNonzero = reduce_op(OpCode::Prod, nonzero, dims, true);
  Tensor zeroCount = reduce_op(OpCode::Sum, cast(isZero, x.dtype()), dims, true);
  Tensor atZero = where(zeroCount == 1, prodNonzero, zeros_like(prodNonzero));
  Tensor others = where(isZero, atZero.expand(x.sizes()), y.reshape(k) / nonzero);
  return g.reshape(k) * others;
}

Tensor vjp_slice(const Tensor& g, const Shape& shape, const Attrs& at) {
  int64_t dim = at.i("dim"), start = at.i("start"), step = at.i("step");
  int64_t n = shape[dim], len = g.size(dim);
  Tensor spread = g;
  if (step > 1) { // interleave step-1 zeros after every element
    Tensor u = g.unsqueeze(dim + 1);
    Shape pads(2 * static_cast<size_t>(u.dim()), 0);
    pads[2 * (dim + 1) + 1] = step - 1;
    Shape merged = g.sizes();
    merged[dim] = len * step;
    spread = pad_dims(u, pads, 0.0).reshape(merged);
  }
  Shape pads(2 * static_cast<size_t>(g.dim()), 0);
  pads[2 * dim] = start;
  pads[2 * dim + 1] = n - start - spread.size(dim); // negative: crop the trailing zeros
  return pad_dims(spread, pads, 0.0);
}

Tensor vjp_cat(const Tensor& g, const std::vector<Shape>& shapes, const Attrs& at, size_t i) {
  int64_t dim = at.i("dim"), offset = 0;
  auto legacyEmpty = [&](const Shape& s) { return s.size() == 1 && s[0] == 0 && g.dim() != 1; };
  for (size_t j = 0; j < i; ++j)
    if (!legacyEmpty(shapes[j]))
      offset += shapes[j][dim];
  if (legacyEmpty(shapes[i]))
    return zeros(shapes[i], g.dtype());
  return slice_dim(g, dim, offset, offset + shapes[i][dim], 1);
}

constexpr std::array<uint32_t, kNumOps> kUses = {{
#define WEFT_UNARY(N, s, d, k, v) detail::scanUses(#v),
#define WEFT_BINARY(N, s, r, k, va, vb) detail::scanUses(#va " " #vb),
#define WEFT_OP(N, s, kind, n, v) detail::scanUses(#v),
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
}};

// The scan must see through metadata helpers and member calls: spot-check a few rules.
static_assert(kUses[static_cast<size_t>(OpCode::Add)] == 0);
static_assert(kUses[static_cast<size_t>(OpCode::Exp)] == kUsesOutput);
static_assert(kUses[static_cast<size_t>(OpCode::Mul)] == 3u);
static_assert(kUses[static_cast<size_t>(OpCode::Sum)] == 0);
static_assert(kUses[static_cast<size_t>(OpCode::Cast)] == 0);
static_assert(kUses[static_cast<size_t>(OpCode::MatMul)] == 3u);

} // namespace

uint32_t vjpUses(OpCode op) { return kUses[static_cast<size_t>(op)]; }

Tensor vjp(OpCode op, const Tensor& g, const std::vector<Tensor>& in, const Tensor& y, const Attrs& at, size_t i) {
  static const Tensor kNone;
  const Tensor nograd;
  const Tensor& x = in.empty() ? kNone : in[0];
  const Tensor& a = x;
  const Tensor& b = in.size() > 1 ? in[1] : kNone;
  (void)a;
  (void)b;
  (void)y;
  switch (op) {
#define NONDIFF nograd
#define WEFT_UNARY(N, s, d, k, v)                                                                  \
  case OpCode::N:                                                                                  \
    return v;
#define WEFT_BINARY(N, s, r, k, va, vb)                                                            \
  case OpCode::N:                                                                                  \
    return i == 0 ? Tensor(va) : Tensor(vb);
#define WEFT_OP(N, s, kind, n, v)                                                                  \
  case OpCode::N:                                                                                  \
    return v;
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
#undef NONDIFF
  }
  WEFT_INTERNAL_ASSERT(false, "no vjp for ", opName(op));
  return {};
}

} // namespace weft
