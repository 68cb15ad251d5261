// The op table's vjp rules instantiated for eager tensors, and what those rules read.
#include "Vjp.h"

#include "TensorImpl.h"
#include "weft/Functions.h"
#include "weft/runtime/VjpRules.h"

#include <array>

namespace weft {
namespace {

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
static_assert(kUses[static_cast<size_t>(OpCode::Gather)] == 2u);

} // namespace

uint32_t vjpUses(OpCode op) {
  return kUses[static_cast<size_t>(op)];
}

std::vector<Shape> shapes_of(const std::vector<Tensor>& ts) {
  std::vector<Shape> s;
  for (const Tensor& t : ts)
    s.push_back(t.sizes());
  return s;
}

Tensor zeros_shaped(const Tensor& like, const Shape& shape) {
  return zeros(shape, like.dtype());
}

Tensor expand(const Tensor& t, const Shape& shape) {
  return t.expand(shape);
}

Tensor vjp(OpCode op, const Tensor& g, const std::vector<Tensor>& in, const Tensor& y,
           const Attrs& at, size_t i) {
  return rules::apply<Tensor>(op, g, in, y, at, i);
}

} // namespace weft
