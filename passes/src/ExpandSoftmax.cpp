// The expand-softmax pass: softmax and log_softmax along the last dim become the primitives they
// compute (a row maximum, exp of the difference, a row sum, a division or a log), which the fuse
// pass then puts in one row kernel with the elementwise work around them (an attention's scale
// and causal mask): one kernel passing over each row three times instead of a mask kernel and the
// interpreter's softmax. The backward reads only the softmax's value, which the kernel stores.
#include "weft/passes/Pass.h"

namespace weft::passes {
namespace {

/// Whether `n` is a softmax or log_softmax a row kernel can compute: float32 or float64, along the
/// last dim (of 2 or more elements) of a value of rank 2 or more.
bool expands(const ir::Graph& g, const ir::Node& n) {
  if ((n.op != OpCode::Softmax && n.op != OpCode::LogSoftmax) || n.operands.size() != 1)
    return false;
  const ir::TensorType& t = g.type(n.operands[0]);
  const int64_t* dim = n.attrs.tryGet<int64_t>("dim");
  const auto rank = static_cast<int64_t>(t.shape.size());
  return (t.dtype == DType::Float32 || t.dtype == DType::Float64) && g.type(n.result) == t &&
         rank >= 2 && dim != nullptr && (*dim == rank - 1 || *dim == -1) && t.shape.back() >= 2;
}

class ExpandSoftmax : public Pass {
public:
  std::string_view name() const override { return "expand-softmax"; }
  ir::Result<bool> run(ir::Graph& g) override {
    std::vector<size_t> todo;
    for (size_t i = 0; i < g.nodes().size(); ++i)
      if (expands(g, g.nodes()[i])) todo.push_back(i);
    if (todo.empty()) return false;
    const size_t before = g.nodes().size();
    std::vector<size_t> added; // per expanded node, how many nodes replace it
    for (size_t i : todo) {
      const ir::Node n = g.nodes()[i]; // addNode may move the nodes
      const ir::TensorType t = g.type(n.operands[0]);
      ir::TensorType rows = t;
      rows.shape.back() = 1;
      const auto last = static_cast<int64_t>(t.shape.size()) - 1;
      const Attrs along = Attrs().set("dims", Shape{last}).set("keepdim", true);
      const size_t first = g.nodes().size();
      auto add = [&](OpCode op, std::vector<ir::ValueId> operands, Attrs attrs,
                     const ir::TensorType& type) {
        return g.addNode(op, std::move(operands), std::move(attrs), type, n.loc);
      };
      const ir::ValueId x = n.operands[0];
      const ir::ValueId max = add(OpCode::AMax, {x}, along, rows);
      const ir::ValueId shifted = add(OpCode::Sub, {x, max}, {}, t);
      const ir::ValueId e = add(OpCode::Exp, {shifted}, {}, t);
      const ir::ValueId sum = add(OpCode::Sum, {e}, along, rows);
      const ir::ValueId y =
          n.op == OpCode::Softmax
              ? add(OpCode::Div, {e, sum}, {}, t)
              : add(OpCode::Sub, {shifted, add(OpCode::Log, {sum}, {}, rows)}, {}, t);
      g.replaceAllUses(n.result, y);
      added.push_back(g.nodes().size() - first);
    }
    // Each expansion stands where the node it replaces stood, which is dropped.
    std::vector<int32_t> order;
    std::vector<bool> dead;
    size_t next = 0, at = before;
    for (size_t i = 0; i < before; ++i) {
      if (next < todo.size() && todo[next] == i) {
        for (size_t k = 0; k < added[next]; ++k) {
          order.push_back(static_cast<int32_t>(at++));
          dead.push_back(false);
        }
        ++next;
        dead.push_back(true);
      } else {
        dead.push_back(false);
      }
      order.push_back(static_cast<int32_t>(i));
    }
    g.reorderNodes(order);
    g.eraseNodes(dead);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createExpandSoftmax() {
  return std::make_unique<ExpandSoftmax>();
}

} // namespace weft::passes
