// The scalar computation of a fused kernel's innermost loop body: each dtype's memory and register
// types, constants and conversions as the eager kernels make them, and one MLIR value per graph
// node. Included only by Elementwise.cpp (every file including MLIR headers costs a gigabyte and
// seconds to compile); split from it to keep each file one subject.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/OpTable.h"

#include "SpecialFunctions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Builders.h"

#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace weft::codegen {

/// The element type a value has in memory (bool: one byte; bfloat16: its bits) and in registers
/// (bool: i1; the 16-bit floats: float, each value rounded to its type as the eager kernels round
/// each op's result).
inline mlir::Type memoryType(mlir::OpBuilder& b, DType t) {
  switch (t) {
  case DType::Float64:
    return b.getF64Type();
  case DType::Float32:
    return b.getF32Type();
  case DType::Float16:
    return b.getF16Type();
  case DType::BFloat16:
    return b.getI16Type();
  case DType::Int64:
    return b.getI64Type();
  case DType::Int32:
    return b.getI32Type();
  case DType::Bool:
  case DType::UInt8:
    return b.getI8Type();
  }
  return b.getI8Type(); // unreachable: every dtype is handled above
}
inline mlir::Type registerType(mlir::OpBuilder& b, DType t) {
  if (t == DType::Bool) return b.getI1Type();
  if (t == DType::Float16 || t == DType::BFloat16) return b.getF32Type();
  return memoryType(b, t);
}

/// The float `v` (an f32 register) rounded to bfloat16 and back, as BFloat16::fromFloat rounds:
/// to nearest even; NaN stays NaN, made quiet.
inline mlir::Value roundToBFloat16(mlir::OpBuilder& b, mlir::Location loc, mlir::Value v) {
  auto i32 = [&](int64_t c) {
    return mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI32Type(), c));
  };
  mlir::Value x = mlir::arith::BitcastOp::create(b, loc, b.getI32Type(), v);
  mlir::Value lsb =
      mlir::arith::AndIOp::create(b, loc, mlir::arith::ShRUIOp::create(b, loc, x, i32(16)), i32(1));
  mlir::Value up =
      mlir::arith::AddIOp::create(b, loc, x, mlir::arith::AddIOp::create(b, loc, lsb, i32(0x7fff)));
  mlir::Value quiet = mlir::arith::OrIOp::create(b, loc, x, i32(0x400000));
  mlir::Value isNan = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, v, v);
  mlir::Value bits =
      mlir::arith::AndIOp::create(b, loc, mlir::arith::SelectOp::create(b, loc, isNan, quiet, up),
                                  i32(static_cast<int32_t>(0xffff0000u)));
  return mlir::arith::BitcastOp::create(b, loc, b.getF32Type(), bits);
}

/// `v`, a register of dtype `t`'s register type, rounded to `t` (only the 16-bit floats round).
inline mlir::Value roundTo(mlir::OpBuilder& b, mlir::Location loc, mlir::Value v, DType t) {
  if (t == DType::BFloat16) return roundToBFloat16(b, loc, v);
  if (t != DType::Float16) return v;
  return mlir::arith::ExtFOp::create(
      b, loc, b.getF32Type(), mlir::arith::TruncFOp::create(b, loc, b.getF16Type(), v).getResult());
}

/// Integers compare, widen and convert as signed except uint8 (and bool, an unsigned bit).
inline bool isUnsigned(DType t) {
  return t == DType::UInt8 || t == DType::Bool;
}

/// `v` stored into integer dtype `t` by the eager kernels' own conversion (copyCast: truncated,
/// NaN and out of range giving the minimum, integers wrapping), read back as an int64.
template <typename S> int64_t storedInteger(DType t, S v) {
  alignas(8) unsigned char stored[8] = {};
  int64_t back = 0;
  copyCast(TensorRef{&v, DTypeOf<S>::value, {}, {}}, TensorRef{stored, t, {}, {}});
  copyCast(TensorRef{stored, t, {}, {}}, TensorRef{&back, DType::Int64, {}, {}});
  return back;
}

/// Builds the scalar computation of one group inside the innermost loop.
class BodyBuilder {
public:
  BodyBuilder(mlir::OpBuilder& b, mlir::Location loc, const ir::Graph& g)
      : b_(b), loc_(loc), g_(g) {}

  mlir::Value constantFloat(DType t, double v) {
    if (t == DType::Bool || isFloating(t)) return constant(t, v);
    return integerConstant(t, storedInteger(t, v));
  }
  /// `i` stored into dtype `t` as the eager kernels store an int64 (copyCast).
  mlir::Value constantInteger(DType t, int64_t i) {
    if (t == DType::Float64) return constant(t, static_cast<double>(i));
    if (isFloating(t)) return constant(t, static_cast<float>(i)); // 16-bit: rounded by node()
    if (t == DType::Bool) return constant(t, i != 0 ? 1.0 : 0.0);
    return integerConstant(t, storedInteger(t, i));
  }

  /// `v` (of dtype `from`) as dtype `to`, as the eager kernels convert (kernels::convert): bool
  /// means != 0, integers wrap, floats go to integers as x86 converts them (NaN and values out
  /// of range: the minimum).
  mlir::Value convert(mlir::Value v, DType from, DType to) {
    if (from == to) return v;
    mlir::Type ty = registerType(b_, to);
    if (to == DType::Bool) {
      if (isFloating(from))
        return mlir::arith::CmpFOp::create(b_, loc_, mlir::arith::CmpFPredicate::UNE, v,
                                           constantFloat(from, 0.0));
      return mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::ne, v,
                                         constantFloat(from, 0.0));
    }
    if (!isFloating(from)) {
      if (isFloating(to))
        return roundTo(b_, loc_,
                       isUnsigned(from)
                           ? mlir::arith::UIToFPOp::create(b_, loc_, ty, v).getResult()
                           : mlir::arith::SIToFPOp::create(b_, loc_, ty, v).getResult(),
                       to);
      const unsigned fw = v.getType().getIntOrFloatBitWidth(), tw = ty.getIntOrFloatBitWidth();
      if (tw < fw) return mlir::arith::TruncIOp::create(b_, loc_, ty, v);
      if (tw == fw) return v; // uint8 <-> int8 bits (no int8 dtype today)
      return isUnsigned(from) ? mlir::arith::ExtUIOp::create(b_, loc_, ty, v).getResult()
                              : mlir::arith::ExtSIOp::create(b_, loc_, ty, v).getResult();
    }
    if (isFloating(to)) { // float64 to a 16-bit float through float, as the eager kernels
      const unsigned fw = v.getType().getIntOrFloatBitWidth(), tw = ty.getIntOrFloatBitWidth();
      mlir::Value r = fw < tw   ? mlir::arith::ExtFOp::create(b_, loc_, ty, v).getResult()
                      : fw > tw ? mlir::arith::TruncFOp::create(b_, loc_, ty, v).getResult()
                                : v;
      return roundTo(b_, loc_, r, to);
    }
    // Float to integer: to int32 first for uint8 (which then wraps), as kernels::floatToInt.
    const DType via = to == DType::Int64 ? DType::Int64 : DType::Int32;
    mlir::Type viaTy = registerType(b_, via);
    const double lo = -std::ldexp(1.0, viaTy.getIntOrFloatBitWidth() - 1);
    mlir::Value inRange = mlir::arith::AndIOp::create(
        b_, loc_,
        mlir::arith::CmpFOp::create(b_, loc_, mlir::arith::CmpFPredicate::OGE, v,
                                    constantFloat(from, lo)),
        mlir::arith::CmpFOp::create(b_, loc_, mlir::arith::CmpFPredicate::OLT, v,
                                    constantFloat(from, -lo)));
    mlir::Value i = mlir::arith::SelectOp::create(b_, loc_, inRange,
                                                  mlir::arith::FPToSIOp::create(b_, loc_, viaTy, v),
                                                  constantFloat(via, lo));
    return via == to ? i : mlir::arith::TruncIOp::create(b_, loc_, ty, i).getResult();
  }

  /// `v != 0`, as the kernels' ktruth().
  mlir::Value truth(mlir::Value v, DType t) { return convert(v, t, DType::Bool); }

  mlir::Value compare(OpCode op, mlir::Value a, mlir::Value c, DType t) {
    using P = mlir::arith::CmpFPredicate;
    using I = mlir::arith::CmpIPredicate;
    if (!isFloating(t)) {
      const bool u = isUnsigned(t);
      I p = op == OpCode::Eq   ? I::eq
            : op == OpCode::Ne ? I::ne
            : op == OpCode::Lt ? (u ? I::ult : I::slt)
            : op == OpCode::Le ? (u ? I::ule : I::sle)
            : op == OpCode::Gt ? (u ? I::ugt : I::sgt)
                               : (u ? I::uge : I::sge);
      return mlir::arith::CmpIOp::create(b_, loc_, p, a, c);
    }
    P p = op == OpCode::Eq   ? P::OEQ
          : op == OpCode::Ne ? P::UNE
          : op == OpCode::Lt ? P::OLT
          : op == OpCode::Le ? P::OLE
          : op == OpCode::Gt ? P::OGT
                             : P::OGE;
    return mlir::arith::CmpFOp::create(b_, loc_, p, a, c);
  }

  /// An op whose result is an integer dtype (the table's lowerings are float operations), or a
  /// bitwise op on bool: wrapping arithmetic as the eager kernels' kadd/ksub/kmul, rounding ops
  /// are the identity.
  /// Null where generated code does not compute it. (Pow, fmod, floor_divide, gcd and lcm are
  /// built for the GPU's shaders; the CPU's leaves them to the eager kernels. A zero divisor is
  /// the shader's to report: here it divides by 1.)
  mlir::Value integerNode(OpCode op, const std::vector<mlir::Value>& in, DType t) {
    mlir::OpBuilder& b = b_;
    const bool u = isUnsigned(t);
    IntegerMath im(b, loc_, registerType(b, t), u);
    switch (op) {
    case OpCode::Pow:
      return im.pow(in[0], in[1]);
    case OpCode::Fmod:
      return im.fmod(in[0], in[1]);
    case OpCode::FloorDivide:
      return im.floorDivide(in[0], in[1]);
    case OpCode::Gcd:
      return im.gcd(in[0], in[1]);
    case OpCode::Lcm:
      return im.lcm(in[0], in[1]);
    case OpCode::Neg:
      return mlir::arith::SubIOp::create(b, loc_, constantFloat(t, 0.0), in[0]);
    case OpCode::Abs: { // abs(INT_MIN) wraps to itself, as the eager kernel's
      if (u) return in[0];
      mlir::Value zero = constantFloat(t, 0.0);
      return mlir::arith::SelectOp::create(b, loc_, compare(OpCode::Lt, in[0], zero, t),
                                           mlir::arith::SubIOp::create(b, loc_, zero, in[0]),
                                           in[0]);
    }
    case OpCode::Floor:
    case OpCode::Ceil:
    case OpCode::Trunc:
    case OpCode::Round:
      return in[0];
    case OpCode::Add:
      return mlir::arith::AddIOp::create(b, loc_, in[0], in[1]);
    case OpCode::Sub:
      return mlir::arith::SubIOp::create(b, loc_, in[0], in[1]);
    case OpCode::Mul:
      return mlir::arith::MulIOp::create(b, loc_, in[0], in[1]);
    case OpCode::BitwiseNot: // xor with every bit set
      return mlir::arith::XOrIOp::create(b, loc_, in[0], constantInteger(t, -1));
    case OpCode::BitwiseAnd:
      return mlir::arith::AndIOp::create(b, loc_, in[0], in[1]);
    case OpCode::BitwiseOr:
      return mlir::arith::OrIOp::create(b, loc_, in[0], in[1]);
    case OpCode::BitwiseXor:
      return mlir::arith::XOrIOp::create(b, loc_, in[0], in[1]);
    case OpCode::BitwiseLeftShift:
    case OpCode::BitwiseRightShift: {
      // As the eager kshl/kshr: an amount outside [0, width) (negative ones are huge unsigned)
      // gives 0, or the sign bits for a signed right shift. The amount shifted by stays in range,
      // as LLVM's shifts past the width are poison.
      const int64_t width = static_cast<int64_t>(elementSize(t)) * 8;
      const bool left = op == OpCode::BitwiseLeftShift;
      const int64_t widest = left || u ? width : width - 1;
      mlir::Value inRange = mlir::arith::CmpIOp::create(b, loc_, mlir::arith::CmpIPredicate::ult,
                                                        in[1], integerConstant(t, widest));
      mlir::Value zero = constantInteger(t, 0);
      if (!left && !u) // out of range: by width - 1, every bit the sign's
        return mlir::arith::ShRSIOp::create(
            b, loc_, in[0],
            mlir::arith::SelectOp::create(b, loc_, inRange, in[1], integerConstant(t, widest)));
      mlir::Value amount = mlir::arith::SelectOp::create(b, loc_, inRange, in[1], zero);
      mlir::Value shifted = left ? mlir::arith::ShLIOp::create(b, loc_, in[0], amount).getResult()
                                 : mlir::arith::ShRUIOp::create(b, loc_, in[0], amount).getResult();
      return mlir::arith::SelectOp::create(b, loc_, inRange, shifted, zero);
    }
    case OpCode::Maximum:
      return u ? mlir::arith::MaxUIOp::create(b, loc_, in[0], in[1]).getResult()
               : mlir::arith::MaxSIOp::create(b, loc_, in[0], in[1]).getResult();
    case OpCode::Minimum:
      return u ? mlir::arith::MinUIOp::create(b, loc_, in[0], in[1]).getResult()
               : mlir::arith::MinSIOp::create(b, loc_, in[0], in[1]).getResult();
    default:
      return {};
    }
  }

  /// The value node `n` computes from its operands' values, rounded to its dtype; null if the op
  /// is not supported.
  mlir::Value node(const ir::Node& n, const std::vector<mlir::Value>& in) {
    mlir::Value r = compute(n, in);
    return r ? roundTo(b_, loc_, r, g_.type(n.result).dtype) : r;
  }

private:
  /// node()'s value before rounding.
  mlir::Value compute(const ir::Node& n, const std::vector<mlir::Value>& in) {
    DType rt = g_.type(n.result).dtype;
    DType it = n.operands.empty() ? rt : g_.type(n.operands[0]).dtype;
    mlir::OpBuilder& b = b_;
    mlir::Location l = loc_;
    auto x = [&]() { return convert(in[0], it, rt); }; // unary Float-domain ops compute in rt
    auto one = [&]() { return constantFloat(rt, 1.0); };
    // Bitwise ops on bool are the same i1 operations as on integers (all bits set is true).
    const bool bitwise = opInfo(n.op).unaryDomain == UnaryDomain::Bitwise ||
                         opInfo(n.op).binaryResult == BinaryResult::Bitwise;
    if (!isFloating(rt) && (rt != DType::Bool || bitwise) && n.operands.size() == in.size() &&
        (opInfo(n.op).kind == OpKind::Unary || opInfo(n.op).kind == OpKind::Binary) &&
        n.op != OpCode::Sign && n.op != OpCode::Relu)
      return integerNode(n.op, in, rt);
    // An op its table row lowers to one MLIR operation: the operands converted to the result's
    // element type (the domain's promotion), one result. The ops below are built by hand.
    if (std::string_view lowering = opInfo(n.op).lowering; !lowering.empty()) {
      if (in.size() != n.operands.size()) return {};
      mlir::OperationState state(l, llvm::StringRef(lowering.data(), lowering.size()));
      for (size_t i = 0; i < in.size(); ++i)
        state.addOperands(convert(in[i], g_.type(n.operands[i]).dtype, rt));
      state.addTypes(registerType(b, rt));
      return b.create(state)->getResult(0);
    }
    switch (n.op) {
    case OpCode::Sign: { // sign(NaN) is 0, as the eager kernel's
      mlir::Value zero = constantFloat(rt, 0.0);
      mlir::Value pos = compare(OpCode::Gt, in[0], zero, rt),
                  neg = compare(OpCode::Lt, in[0], zero, rt);
      return mlir::arith::SelectOp::create(
          b, l, pos, one(),
          mlir::arith::SelectOp::create(b, l, neg, constantFloat(rt, -1.0), zero));
    }
    case OpCode::Relu: { // as the eager kernel: NaN stays, -0 becomes 0
      mlir::Value zero = constantFloat(rt, 0.0);
      return mlir::arith::SelectOp::create(b, l, compare(OpCode::Le, in[0], zero, rt), zero, in[0]);
    }
    case OpCode::Exp: {
      // exp(-inf) is 0, but libmvec computes it on its slow scalar path, and for the whole
      // vector: a softmax's masked -inf lanes made a causal attention's row kernel 6x slower. They
      // go in as 0 and come out as 0.
      mlir::Value v = x();
      mlir::Value ninf = constantFloat(rt, -std::numeric_limits<double>::infinity());
      mlir::Value masked =
          mlir::arith::CmpFOp::create(b, l, mlir::arith::CmpFPredicate::OEQ, v, ninf);
      mlir::Value zero = constantFloat(rt, 0.0);
      mlir::Value e =
          mlir::math::ExpOp::create(b, l, mlir::arith::SelectOp::create(b, l, masked, zero, v));
      return mlir::arith::SelectOp::create(b, l, masked, zero, e);
    }
    case OpCode::Rsqrt:
      return mlir::arith::DivFOp::create(b, l, one(), mlir::math::SqrtOp::create(b, l, x()));
    case OpCode::Sigmoid: { // as the eager kernel: never exponentiates a large positive number
      mlir::Value v = x();
      mlir::Value en = mlir::math::ExpOp::create(b, l, mlir::arith::NegFOp::create(b, l, v));
      mlir::Value ep = mlir::math::ExpOp::create(b, l, v);
      mlir::Value pos =
          mlir::arith::DivFOp::create(b, l, one(), mlir::arith::AddFOp::create(b, l, one(), en));
      mlir::Value neg =
          mlir::arith::DivFOp::create(b, l, ep, mlir::arith::AddFOp::create(b, l, one(), ep));
      return mlir::arith::SelectOp::create(b, l, compare(OpCode::Ge, v, constantFloat(rt, 0.0), rt),
                                           pos, neg);
    }
    case OpCode::FloorDivide: { // as the eager kernel (kfloordiv): from fmod, then floor
      using P = mlir::arith::CmpFPredicate;
      mlir::Value a = in[0], d = in[1], zero = constantFloat(rt, 0.0);
      mlir::Value mod = mlir::arith::RemFOp::create(b, l, a, d);
      mlir::Value quotient = mlir::arith::DivFOp::create(b, l, a, d);
      mlir::Value div =
          mlir::arith::DivFOp::create(b, l, mlir::arith::SubFOp::create(b, l, a, mod), d);
      mlir::Value signsDiffer =
          mlir::arith::XOrIOp::create(b, l, mlir::arith::CmpFOp::create(b, l, P::OLT, d, zero),
                                      mlir::arith::CmpFOp::create(b, l, P::OLT, mod, zero));
      mlir::Value down = mlir::arith::AndIOp::create(
          b, l, mlir::arith::CmpFOp::create(b, l, P::UNE, mod, zero), signsDiffer);
      div = mlir::arith::SelectOp::create(b, l, down, mlir::arith::SubFOp::create(b, l, div, one()),
                                          div);
      mlir::Value floor = mlir::math::FloorOp::create(b, l, div);
      mlir::Value up = mlir::arith::CmpFOp::create(
          b, l, P::OGT, mlir::arith::SubFOp::create(b, l, div, floor), constantFloat(rt, 0.5));
      floor = mlir::arith::SelectOp::create(b, l, up,
                                            mlir::arith::AddFOp::create(b, l, floor, one()), floor);
      // copysign(0, a / b): the quotient is finite there (|a| < |b|), so times 0 keeps its sign.
      mlir::Value signedZero = mlir::arith::MulFOp::create(b, l, quotient, zero);
      mlir::Value r = mlir::arith::SelectOp::create(
          b, l, mlir::arith::CmpFOp::create(b, l, P::OEQ, div, zero), signedZero, floor);
      return mlir::arith::SelectOp::create(b, l, mlir::arith::CmpFOp::create(b, l, P::OEQ, d, zero),
                                           quotient, r);
    }
    case OpCode::Reciprocal:
      return mlir::arith::DivFOp::create(b, l, one(), x());
    case OpCode::Lgamma:
    case OpCode::Digamma:
    case OpCode::Erfinv: {
      FloatMath m(b, l, registerType(b, rt));
      return n.op == OpCode::Lgamma    ? lgammaOf(m, x())
             : n.op == OpCode::Digamma ? digammaOf(m, x())
                                       : erfinvOf(m, x());
    }
    case OpCode::Zeta: {
      FloatMath m(b, l, registerType(b, rt));
      return zetaOf(m, convert(in[0], it, rt), convert(in[1], g_.type(n.operands[1]).dtype, rt));
    }
    case OpCode::LogicalNot:
      return mlir::arith::XOrIOp::create(b, l, truth(in[0], it), constantFloat(DType::Bool, 1.0));
    case OpCode::Eq:
    case OpCode::Ne:
    case OpCode::Lt:
    case OpCode::Le:
    case OpCode::Gt:
    case OpCode::Ge:
      return compare(n.op, in[0], in[1], it);
    case OpCode::LogicalAnd:
      return mlir::arith::AndIOp::create(b, l, truth(in[0], it), truth(in[1], it));
    case OpCode::LogicalOr:
      return mlir::arith::OrIOp::create(b, l, truth(in[0], it), truth(in[1], it));
    case OpCode::LogicalXor:
      return mlir::arith::XOrIOp::create(b, l, truth(in[0], it), truth(in[1], it));
    case OpCode::Cast:
      return convert(in[0], it, rt);
    case OpCode::StopGradient:
      return in[0];
    case OpCode::Where:
      return mlir::arith::SelectOp::create(b, l, in[0], in[1], in[2]);
    case OpCode::Expand: // a broadcast reads its operand at this index
      return in.empty() ? mlir::Value{} : in[0];
    case OpCode::Full: { // an integer value fills exactly, as the eager kernel's
      if (const int64_t* i = n.attrs.tryGet<int64_t>("value")) return constantInteger(rt, *i);
      std::optional<double> value = n.attrs.tryNumber("value"); // codegen never throws
      return value ? constantFloat(rt, *value) : mlir::Value{};
    }
    default:
      return {};
    }
  }

  /// An integer constant of dtype `t` holding the low bits of `stored`.
  mlir::Value integerConstant(DType t, int64_t stored) {
    mlir::Type ty = registerType(b_, t);
    const unsigned shift = 64 - ty.getIntOrFloatBitWidth(); // the low bits, sign-extended
    const auto bits = static_cast<int64_t>(static_cast<uint64_t>(stored) << shift) >> shift;
    return mlir::arith::ConstantOp::create(b_, loc_, b_.getIntegerAttr(ty, bits));
  }
  /// A float or bool constant.
  mlir::Value constant(DType t, double v) {
    mlir::Type ty = registerType(b_, t);
    if (t == DType::Bool)
      return mlir::arith::ConstantOp::create(b_, loc_, b_.getIntegerAttr(ty, v != 0.0));
    return mlir::arith::ConstantOp::create(b_, loc_, b_.getFloatAttr(ty, v));
  }

  mlir::OpBuilder& b_;
  mlir::Location loc_;
  const ir::Graph& g_;
};

} // namespace weft::codegen
