// The op table expanded into the runtime's columns: op codes, names, kinds and elementwise rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace weft {

/// Every primitive op.
enum class OpCode : uint16_t {
#define WEFT_UNARY(N, s, d, low, k, v) N,
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) N,
#define WEFT_OP(N, s, kind, n, v) N,
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
};

/// The shape-inference family of an op: one rule per kind, written once in ir/.
enum class OpKind : uint8_t {
  Unary,
  Binary,
  Cast,
  Identity,
  Where,
  Reduce,
  ArgReduce,
  Scan,
  ArgScan,   // along `dim`, an int64 index per element
  Normalize, // along `dim` of a floating input, each element depends on (some of) its line
  Sort,
  Reshape,
  Permute,
  Expand,
  Slice,
  Flip,
  Pad,
  Cat,
  MatMul,
  Conv,
  ConvInputGrad,
  ConvWeightGrad,
  Gather,
  Scatter,
  IndexSelect,
  IndexAdd,
  CheckIndex, // an int64 index checked (and maybe wrapped) against a dimension's size
  Matrix, // a batch of matrices [..., m, n] (float32/float64; square but for qr and svd): linear
          // algebra
  Pool,
  Full,
  Random
};

/// Which dtypes a unary op accepts and what it returns. Bitwise: integers and bool, result of the
/// input's dtype.
enum class UnaryDomain : uint8_t { Float, Numeric, Logical, Bitwise };
/// What a binary op returns for its (promoted) input dtype. Bitwise: integers and bool, Integer:
/// integers only, both of the inputs' dtype.
enum class BinaryResult : uint8_t { Same, Float, Bool, Bitwise, Integer };

/// The static facts about one op.
struct OpInfo {
  OpCode code;
  std::string_view name;
  OpKind kind;
  int numInputs;       ///< -1 for variadic
  bool differentiable; ///< false when the table's vjp column is NONDIFF
  UnaryDomain unaryDomain = UnaryDomain::Numeric;
  BinaryResult binaryResult = BinaryResult::Same;
  /// Unary and binary ops: the MLIR operation generated kernels compute the op with (operands
  /// converted to the result's element type), or empty where codegen builds it by hand.
  std::string_view lowering = {};
};

/// The number of primitive ops.
inline constexpr int kNumOps = 0
#define WEFT_UNARY(N, s, d, low, k, v) +1
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) +1
#define WEFT_OP(N, s, kind, n, v) +1
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
    ;

/// The facts about `op`.
const OpInfo& opInfo(OpCode op);

/// True for ops computing each output element from the same element of their (broadcast) inputs:
/// unary, binary, cast, identity (stop_gradient) and where.
bool isElementwise(OpCode op);
/// True for ops whose kernel checks the values of an index input (gather, the scatters,
/// index_select, index_add, check_index): they run even where their output is empty, so that an
/// index out of bounds fails there too, as PyTorch's.
bool readsIndexValues(OpCode op);
/// The op's name as the text IR spells it ("matmul").
inline std::string_view opName(OpCode op) {
  return opInfo(op).name;
}
/// The op with `name`, if any.
std::optional<OpCode> opFromName(std::string_view name);

} // namespace weft
