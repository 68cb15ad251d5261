// Math ops: PyTorch type promotion, scalars, elementwise, reductions, contractions and in-place
// ops. Kept as one file past 1,000 lines: the operators, the methods generated from the op table's
// rows and their in-place forms all go through the type-promotion, scalar-wrapping and
// in-place-dispatch helpers at its top, which are private to it (only the two halves of a
// written-back in-place op are shared, through InPlace.h, with InPlace.cpp's methods).
#include "InPlace.h"
#include "TensorImpl.h"
#include "Trace.h"
#include "Vjp.h"
#include "weft/Functions.h"
#include "weft/ir/Types.h"
#include "weft/runtime/Kernels.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace weft {

// ---- type promotion ----

namespace {

struct PromotionState {
  std::optional<DType> dims, zeroDim, wrapped;
};

void promoteInto(std::optional<DType>& slot, DType t) {
  slot = slot ? promoteTypes(*slot, t) : t;
}

void update(PromotionState& s, const Tensor& t) {
  // A wrapped number is already in the dtype its op computed in (wrapScalar): a vjp rule reading
  // it again (pow's `b - 1.0`) computes there too, not in the default float.
  if (t.impl()->wrappedNumber)
    promoteInto(s.wrapped, t.dtype());
  else if (t.dim() == 0)
    promoteInto(s.zeroDim, t.dtype());
  else
    promoteInto(s.dims, t.dtype());
}

/// PyTorch's combine_categories: a lower-priority operand only matters if it is of a higher
/// category (bool < integral < floating).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower || isFloating(*higher)) return higher;
  if (*higher == DType::Bool || isFloating(*lower)) return promoteTypes(*higher, *lower);
  return higher;
}

DType resolve(const PromotionState& s) {
  return *combine(s.dims, combine(s.zeroDim, s.wrapped));
}

/// A 0-dim tensor for a number the user wrote, already in the dtype the op computes in.
Tensor wrapScalar(Scalar v, DType t) {
  Tensor r = fullOf({}, v, t);
  r.impl()->wrappedNumber = true;
  return r;
}

bool canCast(DType from, DType to) {
  if (isFloating(from) && !isFloating(to)) return false;
  if (from != DType::Bool && to == DType::Bool) return false;
  return true;
}

Tensor unaryOp(OpCode op, const Tensor& x) {
  WEFT_CHECK(x.defined(), Value, opName(op), ": called on an undefined tensor");
  if (opInfo(op).unaryDomain == UnaryDomain::Float && !isFloating(x.dtype()))
    return dispatch(op, {cast(x, kDefaultFloat)});
  return dispatch(op, {x});
}

/// The dtype binary `op` computes in for operands promoting to `t`: the default float type for
/// integral ones where the op's result is always floating (div).
DType computeType(OpCode op, DType t) {
  return opInfo(op).binaryResult == BinaryResult::Float && !isFloating(t) ? kDefaultFloat : t;
}

/// The op computing binary `op` on operands of dtype `t`: on bools, add and maximum are logical
/// or, mul and minimum logical and, as in PyTorch.
OpCode boolForm(OpCode op, DType t) {
  if (t != DType::Bool) return op;
  if (op == OpCode::Add || op == OpCode::Maximum) return OpCode::LogicalOr;
  if (op == OpCode::Mul || op == OpCode::Minimum) return OpCode::LogicalAnd;
  return op;
}

Tensor binaryOp(OpCode op, const Tensor& a, const Tensor& b) {
  WEFT_CHECK(a.defined() && b.defined(), Value, opName(op), ": called with an undefined tensor");
  DType t = computeType(op, result_type(a, b));
  return dispatch(boolForm(op, t),
                  {a.dtype() == t ? a : cast(a, t), b.dtype() == t ? b : cast(b, t)});
}

Tensor binaryOp(OpCode op, const Tensor& a, Scalar b) {
  WEFT_CHECK(a.defined(), Value, opName(op), ": called with an undefined tensor");
  DType t = computeType(op, result_type(a, b));
  return dispatch(boolForm(op, t), {a.dtype() == t ? a : cast(a, t), wrapScalar(b, t)});
}

Tensor binaryOp(OpCode op, Scalar a, const Tensor& b) {
  WEFT_CHECK(b.defined(), Value, opName(op), ": called with an undefined tensor");
  DType t = computeType(op, result_type(b, a));
  return dispatch(boolForm(op, t), {wrapScalar(a, t), b.dtype() == t ? b : cast(b, t)});
}

} // namespace

bool isExpanded(const Tensor& t) {
  const Shape &sizes = t.sizes(), &strides = t.strides();
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] > 1 && strides[d] == 0) return true;
  return false;
}

void checkWritable(const Tensor& self, const char* op) {
  WEFT_CHECK(!isExpanded(self), Value, op,
             ": unsupported operation: more than one element of the written-to tensor refers to "
             "a single memory location (an expanded tensor). Please clone() the tensor before "
             "performing the operation.");
  if (!is_grad_enabled()) return;
  // An argument of a compiled function stands in for the caller's tensor: a leaf as eager says,
  // or a non-leaf whose history compiled code cannot extend.
  if (TraceContext* tc = currentTrace(); tc != nullptr && self.requires_grad()) {
    const TensorImpl* target =
        self.impl()->viewBase ? self.impl()->viewBase.get() : self.impl().get();
    for (size_t i = 0; i < tc->arguments.size() && i < tc->realArgs.size(); ++i)
      WEFT_CHECK(tc->arguments[i].impl().get() != target || tc->realArgs[i].is_leaf(), Value, op,
                 ": argument ", i,
                 " of the compiled function requires grad and is written in "
                 "place; compiled code cannot record the write in its history (eager autograd "
                 "would). Write to a clone() of it, or return the result");
  }
  WEFT_CHECK(!(self.is_leaf() && self.requires_grad()), Value, op,
             ": a leaf Variable that requires grad is being used in an in-place operation.");
  // A view that carries no history (detach() of a leaf) may be written, as in PyTorch.
  const TensorImpl* base = self.impl()->viewBase.get();
  const bool history = self.requires_grad() || self.impl()->trace != nullptr; // traced: it may
  WEFT_CHECK(!(base && base->gradFn == nullptr && base->requiresGrad && history), Value, op,
             ": a view of a leaf Variable that requires grad is being used in an in-place "
             "operation.");
}

Tensor& assignInPlace(Tensor& self, Tensor result, const char* op) {
  WEFT_CHECK(result.sizes() == self.sizes(), Shape, op, ": output with shape ",
             shapeString(self.sizes()), " doesn't match the broadcast shape ",
             shapeString(result.sizes()));
  WEFT_CHECK(canCast(result.dtype(), self.dtype()), DType, op, ": result type ",
             dtypeName(result.dtype()), " can't be cast to the desired output type ",
             dtypeName(self.dtype()));
  checkWritable(self, op);
  if (TraceContext* tc = currentTrace()) {
    tc->assign(self, result, op);
    return self;
  }
  WEFT_CHECK(result.device() == self.device(), Device, op, ": the result is on ",
             result.device().str(), " and the tensor written is on ", self.device().str());
  bool grad = is_grad_enabled();
  if (grad && result.requires_grad()) {
    WEFT_CHECK(!self.impl()->viewBase, Value, op,
               ": in-place operations on views of tensors that require grad are not supported; "
               "apply the op out "
               "of place, or to the base tensor");
    if (result.dtype() != self.dtype()) result = cast(result, self.dtype());
  }
  self.impl()->storage->device().kernels().copyCast(result.ref(), self.ref());
  self.impl()->storage->bumpVersion();
  if (grad && !(self.is_leaf() && self.requires_grad())) {
    self.impl()->gradFn = result.requires_grad() ? result.impl()->gradFn : nullptr;
    self.impl()->outputNr = result.requires_grad() ? result.impl()->outputNr : 0;
  }
  return self;
}

Tensor inPlaceSource(const Tensor& self, const Tensor& other, std::optional<OpCode> op) {
  bool record =
      is_grad_enabled() && (self.requires_grad() || (other.defined() && other.requires_grad()));
  if (op) {
    bool reads = usesInput(vjpUses(*op, 0), 0);
    if (opInfo(*op).kind == OpKind::Binary) reads = reads || usesInput(vjpUses(*op, 1), 0);
    record = record && reads;
  }
  return record ? self.clone() : self;
}

namespace {

/// Whether an in-place op of self and `other` may write self directly: not tracing, and no
/// autograd to record.
bool mayRunInPlace(const Tensor& self, const Tensor& other = {}) {
  return currentTrace() == nullptr &&
         !(is_grad_enabled() &&
           (self.requires_grad() || (other.defined() && other.requires_grad())));
}

/// self = op(self, b) straight into self's memory (dispatchInPlace), where the type the op
/// computes in is self's own; false where it is not or dispatchInPlace declines.
bool binaryInPlace(Tensor& self, OpCode op, const Tensor& b, const char* name) {
  DType t = computeType(op, result_type(self, b));
  if (t != self.dtype()) return false;
  checkWritable(self, name);
  return dispatchInPlace(boolForm(op, t), {self, b.dtype() == t ? b : cast(b, t)}, {}, self);
}
bool binaryInPlace(Tensor& self, OpCode op, Scalar b, const char* name) {
  return computeType(op, result_type(self, b)) == self.dtype() &&
         binaryInPlace(self, op, wrapScalar(b, self.dtype()), name);
}

/// self = op(self): straight into self's memory where nothing is recorded and the op computes in
/// self's dtype, else out of place and assigned (an integral self of a float op is an error there,
/// as in PyTorch).
Tensor& unaryInPlace(Tensor& self, OpCode op, const char* name) {
  WEFT_CHECK(self.defined(), Value, name, ": called on an undefined tensor");
  checkWritable(self, name);
  const UnaryDomain domain = opInfo(op).unaryDomain;
  if (mayRunInPlace(self) && domain != UnaryDomain::Logical &&
      !(domain == UnaryDomain::Float && !isFloating(self.dtype())) &&
      dispatchInPlace(op, {self}, {}, self))
    return self;
  return assignInPlace(self, unaryOp(op, inPlaceSource(self, {}, op)), name);
}

} // namespace

Tensor fullOf(const Shape& shape, Scalar value, DType dtype, Device device) {
  if (!device.is_cpu() && currentTrace() == nullptr &&
      hal::device(device).kernels().find(OpCode::Full) == nullptr)
    return fullOf(shape, value, dtype).to(device); // made on the CPU, moved
  bool exactInt = !value.isFloatingPoint() && !isFloating(dtype) && dtype != DType::Bool;
  AttrValue v = exactInt ? AttrValue(value.toLong()) : AttrValue(value.toDouble());
  return dispatch(OpCode::Full, {}, Attrs{{"shape", shape}, {"dtype", dtype}, {"value", v}},
                  device);
}

DType result_type(const Tensor& a, const Tensor& b) {
  PromotionState s;
  update(s, a);
  update(s, b);
  return resolve(s);
}

DType result_type(const Tensor& a, Scalar b) {
  PromotionState s;
  update(s, a);
  promoteInto(s.wrapped, b.isFloatingPoint() ? kDefaultFloat : b.dtype());
  return resolve(s);
}

Tensor cast(const Tensor& x, DType dtype, std::source_location loc) {
  CallSite cs(loc);
  return dispatch(OpCode::Cast, {x}, Attrs{{"dtype", dtype}});
}

Tensor scalar_tensor(Scalar value, std::optional<DType> dtype, std::source_location loc) {
  CallSite cs(loc);
  Tensor r =
      wrapScalar(value, dtype.value_or(value.isFloatingPoint() ? kDefaultFloat : value.dtype()));
  r.impl()->wrappedNumber = false;
  return r;
}

// ---- elementwise: methods and free functions ----

namespace {
/// x ** e for a number e: the exponents PyTorch computes as other ops are computed as those ops
/// here too (so pow(-inf, 0.5) is sqrt's NaN, as in PyTorch, not C's pow's inf), and faster.
Tensor powScalar(const Tensor& x, Scalar e) {
  WEFT_CHECK(x.defined(), Value, "pow: called with an undefined tensor");
  if (x.is_floating_point()) {
    double v = e.toDouble();
    if (v == 0.5) return x.sqrt();
    if (v == -0.5) return x.rsqrt();
    if (v == 1) return x.clone();
    if (v == 2) return x * x;
    if (v == 3) return x * x * x;
    if (v == -1) return x.reciprocal();
    if (v == -2) return (x * x).reciprocal();
  }
  return binaryOp(OpCode::Pow, x, e);
}

/// op(a, b) for a number b, as PyTorch promotes a wrapped number; pow's special exponents as
/// powScalar computes them.
Tensor scalarBinary(OpCode op, const Tensor& a, Scalar b) {
  if (op != OpCode::Pow) return binaryOp(op, a, b);
  return autograd::name_grad_fn(powScalar(a, b), "PowBackward0", a); // x * x, sqrt(x), ...
}
} // namespace

// One method and one free function per unary op and per binary op with a plain API, from their
// rows in the op table.
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  Tensor Tensor::s(std::source_location loc) const {                                               \
    CallSite cs(loc);                                                                              \
    return unaryOp(OpCode::N, *this);                                                              \
  }                                                                                                \
  Tensor& Tensor::s##_(std::source_location loc) {                                                 \
    CallSite cs(loc);                                                                              \
    return unaryInPlace(*this, OpCode::N, #s "_");                                                 \
  }                                                                                                \
  Tensor s(const Tensor& x, std::source_location loc) {                                            \
    CallSite cs(loc);                                                                              \
    return unaryOp(OpCode::N, x);                                                                  \
  }
namespace {
/// The grad_fn names PyTorch gives an op of two tensors where it differs from the op of a tensor
/// and a number (pow's exponent: PowBackward1, not PowBackward0).
Tensor namedOfTwoTensors(OpCode op, Tensor r) {
  if (op == OpCode::Pow) autograd::name_grad_fn(r, "PowBackward1");
  return r;
}
} // namespace
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_BINARY_API_##api(N, s)
#define WEFT_BINARY_API_Method(N, s)                                                               \
  Tensor Tensor::s(const Tensor& other, std::source_location loc) const {                          \
    CallSite cs(loc);                                                                              \
    return namedOfTwoTensors(OpCode::N, binaryOp(OpCode::N, *this, other));                        \
  }                                                                                                \
  Tensor Tensor::s(Scalar other, std::source_location loc) const {                                 \
    CallSite cs(loc);                                                                              \
    return scalarBinary(OpCode::N, *this, other);                                                  \
  }                                                                                                \
  Tensor s(const Tensor& a, const Tensor& b, std::source_location loc) {                           \
    CallSite cs(loc);                                                                              \
    return binaryOp(OpCode::N, a, b);                                                              \
  }                                                                                                \
  Tensor s(const Tensor& a, Scalar b, std::source_location loc) {                                  \
    CallSite cs(loc);                                                                              \
    return scalarBinary(OpCode::N, a, b);                                                          \
  }
#define WEFT_BINARY_API_Custom(N, s)
#define WEFT_OP(N, s, kind, n, v)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_BINARY_API_Method
#undef WEFT_BINARY_API_Custom
#undef WEFT_OP

namespace {
/// alpha of add/sub (result dtype `t`) must not be of a higher category than the result, as in
/// PyTorch.
void checkAlpha(DType t, Scalar alpha, const char* op) {
  WEFT_CHECK(isFloating(t) || !alpha.isFloatingPoint(), DType, op,
             ": for integral input tensors, argument alpha must not be a floating point number "
             "(result ",
             dtypeName(t), ", alpha ", alpha.toDouble(), ")");
  WEFT_CHECK(t == DType::Bool || alpha.dtype() != DType::Bool, DType, op,
             ": boolean alpha only supported for boolean results");
}
void checkAlpha(const Tensor& a, const Tensor& b, Scalar alpha, const char* op) {
  WEFT_CHECK(a.defined() && b.defined(), Value, op, ": called with an undefined tensor");
  checkAlpha(result_type(a, b), alpha, op);
}

/// alpha * b, the operand add/sub add or subtract: b itself where alpha is 1.
Tensor scaled(const Tensor& b, Scalar alpha) {
  return alpha.toDouble() == 1.0 ? b : binaryOp(OpCode::Mul, b, alpha);
}

/// Subtraction with a bool operand is an error, as in PyTorch (which points to the op meant).
void checkSubtractable(DType a, DType b) {
  WEFT_CHECK(a != DType::Bool || b != DType::Bool, DType,
             "sub: subtraction with two bool tensors is not supported; use logical_xor() (or ^) "
             "instead");
  WEFT_CHECK(a != DType::Bool && b != DType::Bool, DType,
             "sub: subtraction with a bool tensor is not supported; to invert a mask, use "
             "logical_not() (or ~) instead");
}
} // namespace

Tensor Tensor::add(const Tensor& other, Scalar alpha, std::source_location loc) const {
  CallSite cs(loc);
  checkAlpha(*this, other, alpha, "add");
  return binaryOp(OpCode::Add, *this, scaled(other, alpha));
}
Tensor Tensor::sub(const Tensor& other, Scalar alpha, std::source_location loc) const {
  CallSite cs(loc);
  checkAlpha(*this, other, alpha, "sub");
  checkSubtractable(dtype(), other.dtype());
  return binaryOp(OpCode::Sub, *this, scaled(other, alpha));
}
namespace {
/// a + alpha * b (a - alpha * b) for a number b: b wrapped in the result's dtype and multiplied
/// by alpha there, as the tensor form multiplies (and as PyTorch computes it).
Tensor addScalar(OpCode op, const Tensor& a, Scalar b, Scalar alpha, const char* name) {
  WEFT_CHECK(a.defined(), Value, name, ": called with an undefined tensor");
  if (op == OpCode::Sub) checkSubtractable(a.dtype(), b.dtype());
  const DType t = result_type(a, b);
  checkAlpha(t, alpha, name);
  return binaryOp(op, a, scaled(wrapScalar(b, t), alpha));
}
} // namespace
Tensor Tensor::add(Scalar other, Scalar alpha, std::source_location loc) const {
  CallSite cs(loc);
  return addScalar(OpCode::Add, *this, other, alpha, "add");
}
Tensor Tensor::sub(Scalar other, Scalar alpha, std::source_location loc) const {
  CallSite cs(loc);
  return addScalar(OpCode::Sub, *this, other, alpha, "sub");
}
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha, std::source_location loc) {
  return a.add(b, alpha, loc);
}
Tensor add(const Tensor& a, Scalar b, Scalar alpha, std::source_location loc) {
  return a.add(b, alpha, loc);
}
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha, std::source_location loc) {
  return a.sub(b, alpha, loc);
}
Tensor sub(const Tensor& a, Scalar b, Scalar alpha, std::source_location loc) {
  return a.sub(b, alpha, loc);
}

namespace {
/// a / b rounded by `mode` ("trunc" or "floor"), as torch.div with that rounding_mode.
Tensor roundedDivision(const Tensor& a, const Tensor& b, std::string_view mode) {
  WEFT_CHECK(mode == "trunc" || mode == "floor", Value,
             "div: expected rounding_mode to be 'trunc' or 'floor', got '", mode, "'");
  if (mode == "floor") return binaryOp(OpCode::FloorDivide, a, b);
  if (isFloating(result_type(a, b))) return binaryOp(OpCode::Div, a, b).trunc();
  // Integers: the floor quotient, one up where the remainder is nonzero and the signs differ.
  Tensor q = binaryOp(OpCode::FloorDivide, a, b);
  Tensor up = binaryOp(OpCode::Fmod, a, b).ne(0).logical_and(a.lt(0).logical_xor(b.lt(0)));
  return where(up, q + 1, q);
}
} // namespace
Tensor Tensor::div(const Tensor& other, std::string_view rounding_mode,
                   std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(defined() && other.defined(), Value, "div: called with an undefined tensor");
  return roundedDivision(*this, other, rounding_mode);
}
Tensor Tensor::div(Scalar other, std::string_view rounding_mode, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "div: called with an undefined tensor");
  return roundedDivision(*this, wrapScalar(other, result_type(*this, other)), rounding_mode);
}
Tensor Tensor::remainder(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  Tensor r = binaryOp(OpCode::Fmod, *this, other);
  // r and the divisor differ in sign where exactly one of them is below 0 (r == 0 never does).
  Tensor adjust = r.ne(0).logical_and(r.lt(0).logical_xor(other.lt(0)));
  return where(adjust, r + other, r);
}
Tensor Tensor::remainder(Scalar other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "remainder: called with an undefined tensor");
  // The divisor in the dtype the op computes in first, as every wrapped number.
  return remainder(wrapScalar(other, computeType(OpCode::Fmod, result_type(*this, other))));
}
Tensor operator%(LocatedTensor a, const Tensor& b) {
  return a.tensor.remainder(b, a.loc);
}
Tensor operator%(LocatedTensor a, Scalar b) {
  return a.tensor.remainder(b, a.loc);
}
Tensor operator%(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  WEFT_CHECK(b.tensor.defined(), Value, "remainder: called with an undefined tensor");
  return wrapScalar(a, computeType(OpCode::Fmod, result_type(b.tensor, a))).remainder(b.tensor);
}

Tensor operator-(LocatedTensor a) {
  CallSite cs(a.loc);
  return unaryOp(OpCode::Neg, a.tensor);
}
Tensor operator~(LocatedTensor a) {
  CallSite cs(a.loc);
  return unaryOp(OpCode::BitwiseNot, a.tensor);
}
Tensor operator+(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Add, a.tensor, b);
}
Tensor operator-(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.sub(b);
}
Tensor operator*(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Mul, a.tensor, b);
}
Tensor operator/(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Div, a.tensor, b);
}
Tensor operator==(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Eq, a.tensor, b);
}
Tensor operator!=(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Ne, a.tensor, b);
}
Tensor operator<(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Lt, a.tensor, b);
}
Tensor operator<=(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Le, a.tensor, b);
}
Tensor operator>(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Gt, a.tensor, b);
}
Tensor operator>=(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Ge, a.tensor, b);
}
Tensor operator&(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseAnd, a.tensor, b);
}
Tensor operator|(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseOr, a.tensor, b);
}
Tensor operator^(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseXor, a.tensor, b);
}
Tensor operator<<(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseLeftShift, a.tensor, b);
}
Tensor operator>>(LocatedTensor a, const Tensor& b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseRightShift, a.tensor, b);
}
Tensor operator&(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseAnd, a.tensor, b);
}
Tensor operator|(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseOr, a.tensor, b);
}
Tensor operator^(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseXor, a.tensor, b);
}
Tensor operator<<(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseLeftShift, a.tensor, b);
}
Tensor operator>>(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::BitwiseRightShift, a.tensor, b);
}
Tensor operator&(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::BitwiseAnd, a, b.tensor);
}
Tensor operator|(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::BitwiseOr, a, b.tensor);
}
Tensor operator^(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::BitwiseXor, a, b.tensor);
}
Tensor operator<<(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::BitwiseLeftShift, a, b.tensor);
}
Tensor operator>>(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::BitwiseRightShift, a, b.tensor);
}
Tensor operator+(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Add, a.tensor, b);
}
Tensor operator-(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.sub(b);
}
Tensor operator*(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Mul, a.tensor, b);
}
Tensor operator/(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Div, a.tensor, b);
}
Tensor operator==(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Eq, a.tensor, b);
}
Tensor operator!=(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Ne, a.tensor, b);
}
Tensor operator<(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Lt, a.tensor, b);
}
Tensor operator<=(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Le, a.tensor, b);
}
Tensor operator>(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Gt, a.tensor, b);
}
Tensor operator>=(LocatedTensor a, Scalar b) {
  CallSite cs(a.loc);
  return binaryOp(OpCode::Ge, a.tensor, b);
}
Tensor operator+(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::Add, a, b.tensor);
}
Tensor operator-(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  WEFT_CHECK(b.tensor.defined(), Value, "sub: called with an undefined tensor");
  checkSubtractable(a.dtype(), b.tensor.dtype());
  return autograd::name_grad_fn(binaryOp(OpCode::Sub, a, b.tensor), "RsubBackward1");
}
Tensor operator*(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::Mul, a, b.tensor);
}
Tensor operator/(Scalar a, LocatedTensor b) {
  CallSite cs(b.loc);
  return binaryOp(OpCode::Div, a, b.tensor);
}
Tensor& operator+=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.add_(b);
}
Tensor& operator-=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.sub_(b);
}
Tensor& operator*=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.mul_(b);
}
Tensor& operator/=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.div_(b);
}
Tensor& operator+=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.add_(b);
}
Tensor& operator-=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.sub_(b);
}
Tensor& operator*=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.mul_(b);
}
Tensor& operator/=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.div_(b);
}
Tensor& operator%=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.remainder_(b);
}
Tensor& operator%=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.remainder_(b);
}
Tensor& operator&=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_and_(b);
}
Tensor& operator|=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_or_(b);
}
Tensor& operator^=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_xor_(b);
}
Tensor& operator<<=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_left_shift_(b);
}
Tensor& operator>>=(LocatedTarget a, const Tensor& b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_right_shift_(b);
}
Tensor& operator&=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_and_(b);
}
Tensor& operator|=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_or_(b);
}
Tensor& operator^=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_xor_(b);
}
Tensor& operator<<=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_left_shift_(b);
}
Tensor& operator>>=(LocatedTarget a, Scalar b) {
  CallSite cs(a.loc);
  return a.tensor.bitwise_right_shift_(b);
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(c.defined() && a.defined() && b.defined(), Value,
             "where: called with an undefined tensor");
  WEFT_CHECK(c.dtype() == DType::Bool, DType, "where: expected condition to be a bool tensor, got ",
             dtypeName(c.dtype()));
  DType t = result_type(a, b);
  return dispatch(OpCode::Where,
                  {c, a.dtype() == t ? a : cast(a, t), b.dtype() == t ? b : cast(b, t)});
}
Tensor where(const Tensor& c, Scalar a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  return where(c, wrapScalar(a, result_type(b, a)), b);
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b, std::source_location loc) {
  CallSite cs(loc);
  return where(c, a, wrapScalar(b, result_type(a, b)));
}

Tensor Tensor::masked_fill(const Tensor& mask, Scalar value, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(mask.defined() && mask.dtype() == DType::Bool, DType,
             "masked_fill: expected a bool mask, got ",
             mask.defined() ? dtypeName(mask.dtype()) : "an undefined tensor");
  Tensor r = where(mask, wrapScalar(value, dtype()), *this);
  WEFT_CHECK(r.sizes() == sizes(), Shape, "masked_fill: mask ", shapeString(mask.sizes()),
             " is not broadcastable to the tensor's shape ", shapeString(sizes()));
  return autograd::name_grad_fn(r, "MaskedFillBackward0", *this);
}

namespace {
/// Keeps the elements of the last two dimensions where column - row compares with `diagonal` as
/// `upper` says, zeroes the rest.
Tensor triangle(const Tensor& x, int64_t diagonal, bool upper) {
  WEFT_CHECK(x.defined() && x.dim() >= 2, Shape, upper ? "triu" : "tril",
             ": expected a tensor of at least 2 dimensions, got ",
             x.defined() ? shapeString(x.sizes()) : "an undefined tensor");
  const TensorOptions on = TensorOptions(kInt64).device(x.device());
  Tensor offset = arange(x.size(-1), on).unsqueeze(0) - arange(x.size(-2), on).unsqueeze(1);
  Tensor outside = upper ? offset < diagonal : offset > diagonal;
  return x.masked_fill(outside, 0);
}
} // namespace

Tensor Tensor::triu(int64_t diagonal, std::source_location loc) const {
  CallSite cs(loc);
  return triangle(*this, diagonal, true);
}
Tensor Tensor::tril(int64_t diagonal, std::source_location loc) const {
  CallSite cs(loc);
  return triangle(*this, diagonal, false);
}
Tensor triu(const Tensor& x, int64_t diagonal, std::source_location loc) {
  CallSite cs(loc);
  return triangle(x, diagonal, true);
}
Tensor tril(const Tensor& x, int64_t diagonal, std::source_location loc) {
  CallSite cs(loc);
  return triangle(x, diagonal, false);
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi,
             std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(lo || hi, Value, "clamp: at least one of 'min' or 'max' must not be None");
  // where() keeps the gradient 1 inside [min, max] including the boundaries, as torch.clamp; a
  // NaN stays NaN and, as in torch.clamp, gets no gradient.
  bool grad = is_grad_enabled() && (x.requires_grad() || autograd::tracing(x));
  Tensor r = grad ? where(x == x, x, x.detach()) : x;
  if (lo) r = where(r < *lo, wrapScalar(*lo, result_type(x, *lo)), r);
  if (hi) r = where(r > *hi, wrapScalar(*hi, result_type(r, *hi)), r);
  return autograd::name_grad_fn(r, "ClampBackward1", x);
}

// ---- in-place ----

Tensor& Tensor::add_(const Tensor& other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  if (mayRunInPlace(*this, other)) {
    checkAlpha(*this, other, alpha, "add");
    Tensor b = scaled(other, alpha);
    if (binaryInPlace(*this, OpCode::Add, b, "add_")) return *this;
  }
  return assignInPlace(*this, inPlaceSource(*this, other, OpCode::Add).add(other, alpha), "add_");
}
Tensor& Tensor::add_(Scalar other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  if (alpha.isFloatingPoint() || alpha.toLong() != 1)
    return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Add).add(other, alpha), "add_");
  if (binaryInPlace(*this, OpCode::Add, other, "add_")) return *this;
  return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Add) + other, "add_");
}
Tensor& Tensor::sub_(const Tensor& other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  if (mayRunInPlace(*this, other) && dtype() != DType::Bool && other.dtype() != DType::Bool) {
    checkAlpha(*this, other, alpha, "sub");
    Tensor b = scaled(other, alpha);
    if (binaryInPlace(*this, OpCode::Sub, b, "sub_")) return *this;
  }
  return assignInPlace(*this, inPlaceSource(*this, other, OpCode::Sub).sub(other, alpha), "sub_");
}
Tensor& Tensor::sub_(Scalar other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "sub_: called on an undefined tensor");
  if (alpha.isFloatingPoint() || alpha.toLong() != 1)
    return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Sub).sub(other, alpha), "sub_");
  checkSubtractable(dtype(), other.dtype());
  if (binaryInPlace(*this, OpCode::Sub, other, "sub_")) return *this;
  return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Sub) - other, "sub_");
}
namespace {
/// self = op(self, other) for a binary op (mul_, div_, fmod_, floor_divide_): straight into
/// self's memory where the op computes in self's dtype and nothing is recorded, else out of place
/// and assigned (an integral self of a float result is an error there, as in PyTorch).
Tensor& binaryAssign(Tensor& self, OpCode op, const Tensor& other, const char* name) {
  if (binaryInPlace(self, op, other, name)) return self;
  return assignInPlace(self, binaryOp(op, inPlaceSource(self, other), other), name);
}
Tensor& binaryAssign(Tensor& self, OpCode op, Scalar other, const char* name) {
  if (binaryInPlace(self, op, other, name)) return self;
  return assignInPlace(self, binaryOp(op, inPlaceSource(self), other), name);
}
} // namespace
// The in-place forms of ops that are one primitive each, for a tensor and for a number.
#define WEFT_BINARY_ASSIGN(method, Op)                                                             \
  Tensor& Tensor::method(const Tensor& other, std::source_location loc) {                          \
    CallSite cs(loc);                                                                              \
    return binaryAssign(*this, OpCode::Op, other, #method);                                        \
  }                                                                                                \
  Tensor& Tensor::method(Scalar other, std::source_location loc) {                                 \
    CallSite cs(loc);                                                                              \
    return binaryAssign(*this, OpCode::Op, other, #method);                                        \
  }
WEFT_BINARY_ASSIGN(mul_, Mul)
WEFT_BINARY_ASSIGN(div_, Div)
WEFT_BINARY_ASSIGN(fmod_, Fmod)
WEFT_BINARY_ASSIGN(floor_divide_, FloorDivide)
WEFT_BINARY_ASSIGN(bitwise_and_, BitwiseAnd)
WEFT_BINARY_ASSIGN(bitwise_or_, BitwiseOr)
WEFT_BINARY_ASSIGN(bitwise_xor_, BitwiseXor)
WEFT_BINARY_ASSIGN(bitwise_left_shift_, BitwiseLeftShift)
WEFT_BINARY_ASSIGN(bitwise_right_shift_, BitwiseRightShift)
WEFT_BINARY_ASSIGN(gcd_, Gcd)
WEFT_BINARY_ASSIGN(lcm_, Lcm)
#undef WEFT_BINARY_ASSIGN
Tensor& Tensor::zero_(std::source_location loc) {
  CallSite cs(loc);
  return fill_(0);
}
Tensor& Tensor::fill_(Scalar value, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("fill_");
  checkWritable(*this, "fill_");
  if (TraceContext* tc = currentTrace()) {
    tc->assign(*this, fullOf(sizes(), value, dtype()), "fill_");
    return *this;
  }
  // Checks that the value fits.
  Tensor filler = fullOf({}, value, dtype(), device()).expand(sizes());
  impl_->storage->device().kernels().copyCast(filler.ref(), ref());
  impl_->storage->bumpVersion();
  if (is_grad_enabled())
    impl_->gradFn = nullptr; // a constant now: no gradient flows to what it was
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("copy_");
  WEFT_CHECK(src.defined(), Value, "copy_: the source is an undefined tensor");
  // The one in-place op that reads another device, as PyTorch's copy_.
  Tensor moved = currentTrace() == nullptr ? src.to(device()) : src;
  Tensor s = moved.dtype() == dtype() ? moved : cast(moved, dtype());
  WEFT_CHECK(static_cast<bool>(ir::broadcastShapes(s.sizes(), sizes(), "copy_")) &&
                 s.dim() <= dim(),
             Shape, "copy_: source ", shapeString(src.sizes()), " is not broadcastable to ",
             shapeString(sizes()));
  return assignInPlace(*this, s.expand(sizes()), "copy_");
}

// ---- contractions and indexing ----

Tensor matmul(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "matmul: called with an undefined tensor");
  WEFT_CHECK(a.dim() >= 1 && b.dim() >= 1, Shape,
             "matmul: both arguments need to be at least 1D, but they are ", a.dim(), "D and ",
             b.dim(), "D");
  if (a.dim() == 1 && b.dim() == 1) {
    WEFT_CHECK(a.size(0) == b.size(0), Shape, "matmul: inconsistent tensor size, expected tensor [",
               a.size(0), "] and src [", b.size(0), "] to have the same number of elements");
    return autograd::name_grad_fn(
        weft::reshape(dispatch(OpCode::MatMul, {a.unsqueeze(0), b.unsqueeze(1)}), {}),
        "DotBackward0");
  }
  if (a.dim() == 1) return dispatch(OpCode::MatMul, {a.unsqueeze(0), b}).squeeze(-2);
  if (b.dim() == 1)
    return autograd::name_grad_fn(dispatch(OpCode::MatMul, {a, b.unsqueeze(1)}).squeeze(-1),
                                  a.dim() == 2 ? "MvBackward0" : "UnsafeViewBackward0");
  // PyTorch's names: a matrix product is mm; batched ones end in a reshape of bmm's result.
  return autograd::name_grad_fn(dispatch(OpCode::MatMul, {a, b}), a.dim() == 2 && b.dim() == 2
                                                                      ? "MmBackward0"
                                                                      : "UnsafeViewBackward0");
}
Tensor Tensor::mm(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(dim() == 2 && other.dim() == 2, Shape, "mm: expected 2-D tensors, got ",
             shapeString(sizes()), " and ", shapeString(other.sizes()));
  return autograd::name_grad_fn(dispatch(OpCode::MatMul, {*this, other}), "MmBackward0");
}
Tensor Tensor::bmm(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(dim() == 3 && other.dim() == 3, Shape, "bmm: expected 3-D tensors, got ",
             shapeString(sizes()), " and ", shapeString(other.sizes()));
  WEFT_CHECK(size(0) == other.size(0), Shape, "bmm: batch sizes differ: ", shapeString(sizes()),
             " and ", shapeString(other.sizes()));
  return autograd::name_grad_fn(dispatch(OpCode::MatMul, {*this, other}), "BmmBackward0");
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index, std::source_location loc) {
  CallSite cs(loc);
  return dispatch(OpCode::Gather, {x, index}, Attrs{{"dim", wrapDim(dim, x.dim(), "gather")}});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
               std::source_location loc) {
  CallSite cs(loc);
  return dispatch(OpCode::Scatter, {x, index, src},
                  Attrs{{"dim", wrapDim(dim, x.dim(), "scatter")}});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                   std::source_location loc) {
  CallSite cs(loc);
  return dispatch(OpCode::ScatterAdd, {x, index, src},
                  Attrs{{"dim", wrapDim(dim, x.dim(), "scatter_add")}});
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(index.defined() && (index.dtype() == DType::Int64 || index.dtype() == DType::Int32),
             DType, "index_select: expected an int64 or int32 index");
  return dispatch(OpCode::IndexSelect, {x, index.to(DType::Int64)},
                  Attrs{{"dim", wrapDim(dim, x.dim(), "index_select")}});
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(index.defined() && (index.dtype() == DType::Int64 || index.dtype() == DType::Int32),
             DType, "index_add: expected an int64 or int32 index");
  return dispatch(OpCode::IndexAdd, {x, index.to(DType::Int64), source},
                  Attrs{{"dim", wrapDim(dim, x.dim(), "index_add")}});
}

Tensor& Tensor::pow_(const Tensor& exponent, std::source_location loc) {
  CallSite cs(loc);
  return binaryAssign(*this, OpCode::Pow, exponent, "pow_");
}
Tensor& Tensor::pow_(Scalar exponent, std::source_location loc) {
  CallSite cs(loc);
  return assignInPlace(*this, inPlaceSource(*this).pow(exponent), "pow_");
}
Tensor& Tensor::addcmul_(const Tensor& t1, const Tensor& t2, Scalar value,
                         std::source_location loc) {
  CallSite cs(loc);
  return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Add).addcmul(t1, t2, value),
                       "addcmul_");
}
Tensor& Tensor::addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value,
                         std::source_location loc) {
  CallSite cs(loc);
  return assignInPlace(*this, inPlaceSource(*this, {}, OpCode::Add).addcdiv(t1, t2, value),
                       "addcdiv_");
}

// ---- helpers for the vjp rules ----

Shape shape_of(const Tensor& t) {
  return t.sizes();
}
DType dtype_of(const Tensor& t) {
  return t.dtype();
}
bool is_column_major(const Tensor& t) {
  if (t.dim() != 2 || t.size(0) < 2 || t.size(1) < 2) return false;
  const Shape& st = t.impl()->strides;
  return st[0] == 1 && st[1] == t.size(0);
}

} // namespace weft
