// Algebraic rewrites: identities (x*1, x+0, no-op reshapes, casts, permutes and expands),
// double negation, permute/reshape/expand chains, and expands that broadcasting makes redundant.
#include "weft/passes/Pass.h"

#include "weft/ir/ShapeInference.h"

#include <numeric>
#include <optional>

namespace weft::passes {
namespace {

class AlgebraicSimplification : public Pass {
public:
  std::string_view name() const override { return "simplify"; }

  ir::Result<bool> run(ir::Graph& g) override {
    bool changed = false;
    for (int round = 0; round < 8; ++round) {
      const bool swept = sweep(g);
      if (!transposeProducts(g) && !swept) break;
      changed = true;
    }
    return changed;
  }

private:
  /// The node that defines `v`, or null for an input.
  static const ir::Node* producer(const ir::Graph& g, ir::ValueId v) {
    int32_t p = g.value(v).producer;
    return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
  }

  /// The value of a `full` constant.
  static std::optional<double> constant(const ir::Graph& g, ir::ValueId v) {
    const ir::Node* n = producer(g, v);
    if (n == nullptr || n->op != OpCode::Full) return std::nullopt;
    return n->attrs.tryNumber("value");
  }

  /// What `n` can be replaced by, if it is an identity: one of its operands.
  static std::optional<ir::ValueId> identityOf(const ir::Graph& g, const ir::Node& n) {
    const ir::TensorType& out = g.type(n.result);
    auto sameAs = [&](ir::ValueId v) {
      return g.type(v) == out ? std::optional<ir::ValueId>(v) : std::nullopt;
    };
    switch (n.op) {
    case OpCode::Reshape:
    case OpCode::Expand:
    case OpCode::Cast:
      return sameAs(n.operands[0]);
    case OpCode::Permute: {
      const auto& d = n.attrs.ints("dims");
      Shape iota(d.size());
      std::iota(iota.begin(), iota.end(), 0);
      return d == iota ? sameAs(n.operands[0]) : std::nullopt;
    }
    case OpCode::Slice:
      return n.attrs.i("step") == 1 ? sameAs(n.operands[0]) : std::nullopt;
    case OpCode::Mul: // x * 1, 1 * x
      if (constant(g, n.operands[1]) == 1.0) return sameAs(n.operands[0]);
      if (constant(g, n.operands[0]) == 1.0) return sameAs(n.operands[1]);
      return std::nullopt;
    case OpCode::Add: // x + 0, 0 + x
      if (constant(g, n.operands[1]) == 0.0) return sameAs(n.operands[0]);
      if (constant(g, n.operands[0]) == 0.0) return sameAs(n.operands[1]);
      return std::nullopt;
    case OpCode::Sub:
      return constant(g, n.operands[1]) == 0.0 ? sameAs(n.operands[0]) : std::nullopt;
    case OpCode::Div:
      return constant(g, n.operands[1]) == 1.0 ? sameAs(n.operands[0]) : std::nullopt;
    case OpCode::Neg: { // -(-x)
      const ir::Node* p = producer(g, n.operands[0]);
      return p && p->op == OpCode::Neg ? sameAs(p->operands[0]) : std::nullopt;
    }
    default:
      return std::nullopt;
    }
  }

  /// Folds a chain (permute of permute, reshape of reshape, expand of expand, stop_gradient of
  /// stop_gradient) into one node, in place. True if it did.
  static bool foldChain(ir::Graph& g, ir::Node& n) {
    if (n.operands.empty()) return false;
    const ir::Node* p = producer(g, n.operands[0]);
    if (p == nullptr || p->op != n.op) return false;
    switch (n.op) {
    case OpCode::Permute: {
      const auto &inner = p->attrs.ints("dims"), &outer = n.attrs.ints("dims");
      Shape composed;
      for (int64_t d : outer)
        composed.push_back(inner[static_cast<size_t>(d)]);
      n.attrs.set("dims", composed);
      break;
    }
    case OpCode::Reshape:
    case OpCode::Expand:
    case OpCode::StopGradient:
      break; // the outer shape (or the identity) already says everything
    default:
      return false;
    }
    n.operands[0] = p->operands[0];
    return true;
  }

  /// Drops an expand feeding an elementwise op when broadcasting gives the same result anyway.
  static bool foldBroadcast(ir::Graph& g, ir::Node& n) {
    OpKind kind = opInfo(n.op).kind;
    if (kind != OpKind::Binary && kind != OpKind::Where) return false;
    for (size_t k = 0; k < n.operands.size(); ++k) {
      const ir::Node* p = producer(g, n.operands[k]);
      if (p == nullptr || p->op != OpCode::Expand) continue;
      std::vector<ir::TensorType> types;
      for (size_t j = 0; j < n.operands.size(); ++j)
        types.push_back(g.type(j == k ? p->operands[0] : n.operands[j]));
      auto t = ir::inferType(n.op, types, n.attrs);
      if (t && t.value() == g.type(n.result)) {
        n.operands[k] = p->operands[0];
        return true;
      }
    }
    return false;
  }

  /// The permute of a rank-`rank` value that swaps its last two dims.
  static Shape swapLastTwo(size_t rank) {
    Shape dims(rank);
    std::iota(dims.begin(), dims.end(), 0);
    std::swap(dims[rank - 2], dims[rank - 1]);
    return dims;
  }

  /// permute(matmul(a, b)) swapping the last two dims, where nothing else reads the product,
  /// becomes matmul(permute(b), permute(a)) ((AB)^T = B^T A^T): its result is contiguous (BLAS
  /// reads the transposed operands in place) where the permute's is a transposed view that a
  /// kernel reading it copies first (a linear layer's weight gradient). True if any did.
  static bool transposeProducts(ir::Graph& g) {
    std::vector<int32_t> uses(g.values().size(), 0);
    for (const ir::Node& n : g.nodes())
      for (ir::ValueId v : n.operands)
        ++uses[static_cast<size_t>(v)];
    for (ir::ValueId v : g.outputs())
      ++uses[static_cast<size_t>(v)];
    for (const ir::StateUpdate& u : g.stateUpdates())
      ++uses[static_cast<size_t>(u.newValue)];
    struct Rewrite {
      size_t at; // the permute's position
      ir::ValueId a, b, result;
    };
    std::vector<Rewrite> todo;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const ir::Node& n = g.nodes()[i];
      if (n.op != OpCode::Permute || uses[static_cast<size_t>(n.operands[0])] != 1 ||
          uses[static_cast<size_t>(n.result)] == 0) // one rewritten before, dead now
        continue;
      const ir::Node* m = producer(g, n.operands[0]);
      const size_t rank = g.type(n.result).shape.size();
      if (m == nullptr || m->op != OpCode::MatMul || rank < 2 ||
          n.attrs.ints("dims") != swapLastTwo(rank) || g.type(m->operands[0]).shape.size() < 2 ||
          g.type(m->operands[1]).shape.size() < 2)
        continue;
      todo.push_back({i, m->operands[0], m->operands[1], n.result});
    }
    if (todo.empty()) return false;
    const size_t before = g.nodes().size();
    auto transposed = [&](ir::ValueId v, const ir::Location& loc) {
      ir::TensorType t = g.type(v);
      const Shape dims = swapLastTwo(t.shape.size());
      std::swap(t.shape[t.shape.size() - 2], t.shape[t.shape.size() - 1]);
      return g.addNode(OpCode::Permute, {v}, Attrs{{"dims", dims}}, t, loc);
    };
    for (const Rewrite& r : todo) {
      const ir::Location loc = g.nodes()[r.at].loc;
      ir::ValueId tb = transposed(r.b, loc);
      ir::ValueId ta = transposed(r.a, loc);
      g.replaceAllUses(r.result, g.addNode(OpCode::MatMul, {tb, ta}, {}, g.type(r.result), loc));
    }
    // Each rewrite's three nodes go right before the permute they replace (dce drops it).
    std::vector<int32_t> order;
    for (size_t i = 0, next = 0; i < before; ++i) {
      if (next < todo.size() && todo[next].at == i) {
        for (size_t k = 0; k < 3; ++k)
          order.push_back(static_cast<int32_t>(before + 3 * next + k));
        ++next;
      }
      order.push_back(static_cast<int32_t>(i));
    }
    g.reorderNodes(order);
    return true;
  }

  /// One forward sweep; true if anything changed.
  bool sweep(ir::Graph& g) {
    std::vector<ir::ValueId> rep(g.values().size());
    std::iota(rep.begin(), rep.end(), 0);
    bool changed = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      ir::Node& n = g.mutableNodes()[i];
      for (ir::ValueId& v : n.operands)
        v = rep[static_cast<size_t>(v)];
      if (auto same = identityOf(g, n)) {
        rep[static_cast<size_t>(n.result)] = *same;
        changed = true;
        continue;
      }
      changed = foldChain(g, n) || changed;
      changed = foldBroadcast(g, n) || changed;
    }
    for (ir::ValueId& v : g.mutableOutputs())
      v = rep[static_cast<size_t>(v)];
    for (ir::StateUpdate& u : g.mutableStateUpdates())
      u.newValue = rep[static_cast<size_t>(u.newValue)];
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createAlgebraicSimplification() {
  return std::make_unique<AlgebraicSimplification>();
}

} // namespace weft::passes
