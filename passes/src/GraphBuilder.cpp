// Graph values: each function appends one primitive node (or reuses its input when it is a no-op).
#include "weft/passes/GraphBuilder.h"

#include "weft/ir/ShapeInference.h"

namespace weft::passes {

GValue GraphBuilder::emit(OpCode op, const std::vector<GValue>& operands, Attrs attrs) {
  if (error_) return GValue{this, ir::kNoValue};
  std::vector<ir::ValueId> ids;
  std::vector<ir::TensorType> types;
  for (const GValue& v : operands) {
    if (!v.defined() || v.id == ir::kNoValue) {
      error_ = ir::diag(ErrorKind::Internal, opName(op), ": operand is not a value");
      return GValue{this, ir::kNoValue};
    }
    ids.push_back(v.id);
    types.push_back(g_.type(v.id));
  }
  auto t = ir::inferType(op, types, attrs);
  if (!t) {
    error_ = t.diagnostic();
    return GValue{this, ir::kNoValue};
  }
  return GValue{this, g_.addNode(op, std::move(ids), std::move(attrs), t.value(), loc_)};
}

GValue GraphBuilder::full(const Shape& shape, DType dtype, double v) {
  return emit(OpCode::Full, {}, Attrs{{"shape", shape}, {"dtype", dtype}, {"value", v}});
}

const ir::TensorType& GraphBuilder::type(const GValue& v) const {
  static const ir::TensorType kPoison{};
  return v.id == ir::kNoValue ? kPoison : g_.type(v.id);
}

namespace {
GValue scalarLike(const GValue& x, double v) {
  return x.b->full({}, dtype_of(x), v);
}
GValue binary(OpCode op, const GValue& a, const GValue& b) {
  return a.b->emit(op, {a, b});
}
} // namespace

GValue operator-(const GValue& a) {
  return a.b->emit(OpCode::Neg, {a});
}
GValue operator+(const GValue& a, const GValue& b) {
  return binary(OpCode::Add, a, b);
}
GValue operator-(const GValue& a, const GValue& b) {
  return binary(OpCode::Sub, a, b);
}
GValue operator*(const GValue& a, const GValue& b) {
  return binary(OpCode::Mul, a, b);
}
GValue operator/(const GValue& a, const GValue& b) {
  return binary(OpCode::Div, a, b);
}
GValue operator+(const GValue& a, double b) {
  return a + scalarLike(a, b);
}
GValue operator-(const GValue& a, double b) {
  return a - scalarLike(a, b);
}
GValue operator*(const GValue& a, double b) {
  return a * scalarLike(a, b);
}
GValue operator-(double a, const GValue& b) {
  return scalarLike(b, a) - b;
}
GValue operator==(const GValue& a, const GValue& b) {
  return binary(OpCode::Eq, a, b);
}
GValue operator==(const GValue& a, double b) {
  return a == scalarLike(a, b);
}
GValue operator!=(const GValue& a, const GValue& b) {
  return binary(OpCode::Ne, a, b);
}
GValue operator<(const GValue& a, const GValue& b) {
  return binary(OpCode::Lt, a, b);
}
GValue operator>(const GValue& a, const GValue& b) {
  return binary(OpCode::Gt, a, b);
}
GValue operator<=(const GValue& a, double b) {
  return binary(OpCode::Le, a, scalarLike(a, b));
}
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  GValue s(const GValue& x) {                                                                      \
    return x.b->emit(OpCode::N, {x});                                                              \
  }
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_BINARY_GRAPH_##api(N, s)
#define WEFT_BINARY_GRAPH_Method(N, s)                                                             \
  GValue s(const GValue& a, const GValue& b) {                                                     \
    return binary(OpCode::N, a, b);                                                                \
  }
#define WEFT_BINARY_GRAPH_Custom(N, s)
#define WEFT_OP(N, s, kind, n, v)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_BINARY_GRAPH_Method
#undef WEFT_BINARY_GRAPH_Custom
#undef WEFT_OP
GValue dispatch(OpCode op, const std::vector<GValue>& operands, const Attrs& attrs) {
  return operands.front().b->emit(op, operands, attrs);
}
GValue filled(const GValue& like, const Shape& shape, DType dtype, double value) {
  return like.b->full(shape, dtype, value);
}
Shape shape_of(const GValue& x) {
  return x.b->type(x).shape;
}
DType dtype_of(const GValue& x) {
  return x.b->type(x).dtype;
}

} // namespace weft::passes
