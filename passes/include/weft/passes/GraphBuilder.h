// Graph values with the tensor vocabulary the vjp rules use, so the op table's rules build graph
// nodes exactly as they compute eager gradients.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Vocabulary.h"

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
// What makes a graph value tensor-like for weft/runtime/Vocabulary.h (reshape, reduce_op, matmul,
// gather, ... are written there once for graph values and eager tensors alike).
/// One node of `op` (operands from one builder), its type inferred.
GValue dispatch(OpCode op, const std::vector<GValue>& operands, const Attrs& attrs = {});
/// A constant of `shape`, `dtype` and `value`, built by like's builder.
GValue filled(const GValue& like, const Shape& shape, DType dtype, double value);
Shape shape_of(const GValue& x);
DType dtype_of(const GValue& x);
/// Graph values have no memory layout: never column-major (see vjp_matmul).
inline bool is_column_major(const GValue&) {
  return false;
}

} // namespace weft::passes
