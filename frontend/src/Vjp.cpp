// The op table's vjp rules instantiated for eager tensors, and what those rules read.
#include "Vjp.h"

#include "TensorImpl.h"
#include "weft/Functions.h"
#include "weft/runtime/VjpRules.h"

#include <array>

namespace weft {
namespace {

/// Per op: what the rules for the gradients of inputs 0 and 1 read (other ops: one rule for all).
constexpr std::array<std::array<uint32_t, 2>, kNumOps> kUses = {{
#define WEFT_UNARY(N, s, d, low, k, v) {detail::scanUses(#v), detail::scanUses(#v)},
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) {detail::scanUses(#va), detail::scanUses(#vb)},
#define WEFT_OP(N, s, kind, n, v) {detail::scanUses(#v), detail::scanUses(#v)},
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
}};

constexpr uint32_t uses(OpCode op, size_t input) {
  return kUses[static_cast<size_t>(op)][input];
}
// The scan must see through metadata helpers and member calls: spot-check a few rules.
static_assert(uses(OpCode::Add, 0) == 0 && uses(OpCode::Add, 1) == 0);
static_assert(uses(OpCode::Exp, 0) == kUsesOutput);
static_assert(uses(OpCode::Mul, 0) == 2u && uses(OpCode::Mul, 1) == 1u); // x * w saves only w
static_assert(uses(OpCode::Sum, 0) == 0);
static_assert(uses(OpCode::Cast, 0) == 0);
static_assert(uses(OpCode::MatMul, 0) == 3u);
static_assert(uses(OpCode::Gather, 0) == 2u);

} // namespace

uint32_t vjpUses(OpCode op, size_t input) {
  return uses(op, opInfo(op).kind == OpKind::Binary ? input : 0);
}

Tensor filled(const Tensor& like, const Shape& shape, DType dtype, double value) {
  return fullOf(shape, value, dtype, like.defined() ? like.device() : Device::cpu());
}

Tensor vjp(OpCode op, const Tensor& g, const std::vector<Tensor>& in, const Tensor& y,
           const Attrs& at, size_t i) {
  return rules::apply<Tensor>(op, g, in, y, at, i);
}

} // namespace weft
