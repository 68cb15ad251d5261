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
Attrs convAttrs(const Attrs& at) {
  return Attrs{{"stride", at.ints("stride")},
               {"padding", at.ints("padding")},
               {"dilation", at.ints("dilation")},
               {"groups", at.i("groups")}};
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
GValue where(const GValue& c, const GValue& a, const GValue& b) {
  return c.b->emit(OpCode::Where, {c, a, b});
}
GValue zeros_like(const GValue& x) {
  return x.b->full(shape_of(x), dtype_of(x), 0.0);
}
GValue ones_like(const GValue& x) {
  return x.b->full(shape_of(x), dtype_of(x), 1.0);
}
GValue zeros_shaped(const GValue& like, const Shape& shape) {
  return like.b->full(shape, dtype_of(like), 0.0);
}
GValue cast(const GValue& x, DType dtype) {
  return dtype_of(x) == dtype ? x : x.b->emit(OpCode::Cast, {x}, Attrs{{"dtype", dtype}});
}
Shape shape_of(const GValue& x) {
  return x.b->type(x).shape;
}
std::vector<Shape> shapes_of(const std::vector<GValue>& xs) {
  std::vector<Shape> s;
  for (const GValue& x : xs)
    s.push_back(shape_of(x));
  return s;
}
DType dtype_of(const GValue& x) {
  return x.b->type(x).dtype;
}
bool is_floating(const GValue& x) {
  return isFloating(dtype_of(x));
}

GValue reshape(const GValue& x, const Shape& shape) {
  return shape_of(x) == shape ? x : x.b->emit(OpCode::Reshape, {x}, Attrs{{"shape", shape}});
}
GValue permute(const GValue& x, const Shape& dims) {
  return x.b->emit(OpCode::Permute, {x}, Attrs{{"dims", dims}});
}
GValue expand(const GValue& x, const Shape& shape) {
  return shape_of(x) == shape ? x : x.b->emit(OpCode::Expand, {x}, Attrs{{"shape", shape}});
}
GValue flip(const GValue& x, const Shape& dims) {
  return x.b->emit(OpCode::Flip, {x}, Attrs{{"dims", dims}});
}
GValue cumsum(const GValue& x, int64_t dim) {
  return x.b->emit(OpCode::CumSum, {x}, Attrs{{"dim", dim}});
}
GValue cumprod(const GValue& x, int64_t dim) {
  return x.b->emit(OpCode::CumProd, {x}, Attrs{{"dim", dim}});
}
GValue inverse(const GValue& x) {
  return x.b->emit(OpCode::Inverse, {x});
}
GValue matrix_op(OpCode op, const GValue& x) {
  return x.b->emit(op, {x});
}
GValue logcumsumexp(const GValue& x, int64_t dim) {
  return x.b->emit(OpCode::LogCumSumExp, {x}, Attrs{{"dim", dim}});
}
GValue pad_dims(const GValue& x, const Shape& pads, double value) {
  return x.b->emit(OpCode::Pad, {x}, Attrs{{"pads", pads}, {"value", value}});
}
GValue slice_dim(const GValue& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  return x.b->emit(OpCode::Slice, {x},
                   Attrs{{"dim", dim}, {"start", start}, {"end", end}, {"step", step}});
}
GValue reduce_op(OpCode op, const GValue& x, const Shape& dims, bool keepdim) {
  return x.b->emit(op, {x}, Attrs{{"dims", dims}, {"keepdim", keepdim}});
}
GValue matmul(const GValue& a, const GValue& b) {
  return binary(OpCode::MatMul, a, b);
}
GValue mT(const GValue& x) {
  Shape dims(shape_of(x).size());
  for (size_t d = 0; d < dims.size(); ++d)
    dims[d] = static_cast<int64_t>(d);
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return permute(x, dims);
}
GValue conv(const GValue& x, const GValue& w, const Attrs& at) {
  return x.b->emit(OpCode::Conv, {x, w}, convAttrs(at));
}
GValue conv_input_grad(const GValue& gy, const GValue& w, const Attrs& at,
                       const Shape& inputShape) {
  Attrs a = convAttrs(at);
  a.set("input_shape", inputShape);
  return gy.b->emit(OpCode::ConvInputGrad, {gy, w}, a);
}
GValue conv_weight_grad(const GValue& x, const GValue& gy, const Attrs& at,
                        const Shape& weightShape) {
  Attrs a = convAttrs(at);
  a.set("weight_shape", weightShape);
  return x.b->emit(OpCode::ConvWeightGrad, {x, gy}, a);
}
GValue gather(const GValue& x, int64_t dim, const GValue& index) {
  return x.b->emit(OpCode::Gather, {x, index}, Attrs{{"dim", dim}});
}
GValue scatter_op(OpCode op, const GValue& x, int64_t dim, const GValue& index, const GValue& src) {
  return x.b->emit(op, {x, index, src}, Attrs{{"dim", dim}});
}
GValue scatter(const GValue& x, int64_t dim, const GValue& index, const GValue& src) {
  return scatter_op(OpCode::Scatter, x, dim, index, src);
}
GValue scatter_add(const GValue& x, int64_t dim, const GValue& index, const GValue& src) {
  return scatter_op(OpCode::ScatterAdd, x, dim, index, src);
}
GValue index_select(const GValue& x, int64_t dim, const GValue& index) {
  return x.b->emit(OpCode::IndexSelect, {x, index}, Attrs{{"dim", dim}});
}
GValue index_add(const GValue& x, int64_t dim, const GValue& index, const GValue& src) {
  return x.b->emit(OpCode::IndexAdd, {x, index, src}, Attrs{{"dim", dim}});
}

} // namespace weft::passes
