// The op table's static facts, expanded once into an array indexed by op code.
#include "weft/runtime/OpTable.h"

#include <array>

namespace weft {
namespace {

constexpr bool differentiableColumn(std::string_view vjp) {
  return vjp != "NONDIFF";
}

constexpr std::array<OpInfo, kNumOps> kInfos = {{
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  OpInfo{OpCode::N,          #s, OpKind::Unary, 1, differentiableColumn(#v), UnaryDomain::d,       \
         BinaryResult::Same, low},
#define WEFT_BINARY(N, s, r, api, low, k, va, vb)                                                  \
  OpInfo{OpCode::N,       #s, OpKind::Binary, 2, differentiableColumn(#va), UnaryDomain::Numeric,  \
         BinaryResult::r, low},
#define WEFT_OP(N, s, kind, n, v) OpInfo{OpCode::N, #s, OpKind::kind, n, differentiableColumn(#v)},
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
}};

} // namespace

const OpInfo& opInfo(OpCode op) {
  return kInfos[static_cast<size_t>(op)];
}

std::optional<OpCode> opFromName(std::string_view name) {
  for (const OpInfo& info : kInfos)
    if (info.name == name) return info.code;
  return std::nullopt;
}

bool isElementwise(OpCode op) {
  switch (opInfo(op).kind) {
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Cast:
  case OpKind::Identity:
  case OpKind::Where:
    return true;
  default:
    return false;
  }
}

bool readsIndexValues(OpCode op) {
  switch (opInfo(op).kind) {
  case OpKind::Gather:
  case OpKind::Scatter:
  case OpKind::IndexSelect:
  case OpKind::IndexAdd:
  case OpKind::CheckIndex:
    return true;
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Cast:
  case OpKind::Identity:
  case OpKind::Where:
  case OpKind::Reduce:
  case OpKind::ArgReduce:
  case OpKind::Scan:
  case OpKind::ArgScan:
  case OpKind::Normalize:
  case OpKind::Sort:
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Flip:
  case OpKind::Pad:
  case OpKind::Cat:
  case OpKind::MatMul:
  case OpKind::Matrix:
  case OpKind::Conv:
  case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad:
  case OpKind::Pool:
  case OpKind::Full:
  case OpKind::Random:
    return false;
  }
  return false;
}

} // namespace weft
