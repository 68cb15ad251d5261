// Graph values with the tensor vocabulary the vjp rules use, so the op table's rules build graph
// nodes exactly as they compute eager gradients.
#pragma once

#include "weft/ir/Graph.h"

#include <optional>
#include <vector>

namespace weft::passes {

class GraphBuilder;

/// A value of the graph being built. Default-constructed means "no gradient".
struct GValue {
  GraphBuilder* b = nullptr;
  ir::ValueId id = ir::kNoValue;
  bool defined() const { return b != nullptr; }
};

/// Appends nodes to a graph, inferring each result's type. The first failure is kept (later
/// nodes become no-ops) and reported by error().
class GraphBuilder {
public:
  explicit GraphBuilder(ir::Graph& g) : g_(g) {}
  GValue value(ir::ValueId id) { return GValue{this, id}; }
  GValue emit(OpCode op, const std::vector<GValue>& operands, Attrs attrs = {});
  /// A tensor of `shape` filled with `v`.
  GValue full(const Shape& shape, DType dtype, double v);
  const ir::TensorType& type(const GValue& v) const;
  /// Location given to the nodes emitted from now on.
  void setLocation(ir::Location loc) { loc_ = std::move(loc); }
  const std::optional<ir::Diagnostic>& error() const { return error_; }
  ir::Graph& graph() { return g_; }

private:
  ir::Graph& g_;
  ir::Location loc_;
  std::optional<ir::Diagnostic> error_;
};

// The vocabulary of VjpRules.h for graph values.
GValue operator-(const GValue& a);
GValue operator+(const GValue& a, const GValue& b);
GValue operator-(const GValue& a, const GValue& b);
GValue operator*(const GValue& a, const GValue& b);
GValue operator/(const GValue& a, const GValue& b);
GValue operator+(const GValue& a, double b);
GValue operator-(const GValue& a, double b);
GValue operator*(const GValue& a, double b);
GValue operator-(double a, const GValue& b);
GValue operator==(const GValue& a, const GValue& b);
GValue operator==(const GValue& a, double b);
GValue operator!=(const GValue& a, const GValue& b);
GValue operator<(const GValue& a, const GValue& b);
GValue operator>(const GValue& a, const GValue& b);
GValue operator<=(const GValue& a, double b);
// Every unary op, and every binary op with a plain API, by its name in the op table (as the eager
// functions of weft/Functions.h), so a vjp rule may call any of them on either side.
#define WEFT_UNARY(N, s, d, low, k, v) GValue s(const GValue& x);
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_BINARY_GRAPH_##api(s)
#define WEFT_BINARY_GRAPH_Method(s) GValue s(const GValue& a, const GValue& b);
#define WEFT_BINARY_GRAPH_Custom(s)
#define WEFT_OP(N, s, kind, n, v)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_BINARY_GRAPH_Method
#undef WEFT_BINARY_GRAPH_Custom
#undef WEFT_OP
GValue where(const GValue& c, const GValue& a, const GValue& b);
GValue zeros_like(const GValue& x);
GValue ones_like(const GValue& x);
GValue zeros_shaped(const GValue& like, const Shape& shape);
GValue cast(const GValue& x, DType dtype);
Shape shape_of(const GValue& x);
/// Graph values have no memory layout: never column-major (see vjp_matmul).
inline bool is_column_major(const GValue&) {
  return false;
}
std::vector<Shape> shapes_of(const std::vector<GValue>& xs);
DType dtype_of(const GValue& x);
bool is_floating(const GValue& x);
GValue reshape(const GValue& x, const Shape& shape);
GValue permute(const GValue& x, const Shape& dims);
GValue expand(const GValue& x, const Shape& shape);
GValue flip(const GValue& x, const Shape& dims);
GValue cumsum(const GValue& x, int64_t dim);
GValue cumprod(const GValue& x, int64_t dim);
GValue logcumsumexp(const GValue& x, int64_t dim);
GValue pad_dims(const GValue& x, const Shape& pads, double value);
GValue slice_dim(const GValue& x, int64_t dim, int64_t start, int64_t end, int64_t step);
GValue reduce_op(OpCode op, const GValue& x, const Shape& dims, bool keepdim);
GValue matmul(const GValue& a, const GValue& b);
GValue inverse(const GValue& x);
/// The factor `op` (a linear-algebra row of the op table taking one matrix and no attributes:
/// eigvalsh, qr_q, svd_u, ...) of x.
GValue matrix_op(OpCode op, const GValue& x);
GValue scatter_op(OpCode op, const GValue& x, int64_t dim, const GValue& index, const GValue& src);
GValue mT(const GValue& x);
GValue conv(const GValue& x, const GValue& w, const Attrs& at);
GValue conv_input_grad(const GValue& gy, const GValue& w, const Attrs& at, const Shape& inputShape);
GValue conv_weight_grad(const GValue& x, const GValue& gy, const Attrs& at,
                        const Shape& weightShape);
GValue gather(const GValue& x, int64_t dim, const GValue& index);
GValue scatter(const GValue& x, int64_t dim, const GValue& index, const GValue& src);
GValue scatter_add(const GValue& x, int64_t dim, const GValue& index, const GValue& src);
GValue index_select(const GValue& x, int64_t dim, const GValue& index);
GValue index_add(const GValue& x, int64_t dim, const GValue& index, const GValue& src);

} // namespace weft::passes
