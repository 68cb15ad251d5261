// The expand-softmax pass: softmax and log_softmax along the last dim become the primitives they
// compute (a row maximum, exp of the difference, a row sum, a division or a log), which the fuse
// pass then puts in one row kernel with the elementwise work around them (an attention's scale
// and causal mask): one kernel passing over each row three times instead of a mask kernel and the
// interpreter's softmax. The backward reads only the softmax's value, which the kernel stores.
#include "Rewrite.h"
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
    // Each expansion stands where the node it replaces stood, which is dropped.
    const size_t before = g.nodes().size();
    std::vector<std::vector<int32_t>> placed(before + 1);
    std::vector<bool> expanded(before, false);
    for (size_t i : todo) {
      const ir::Node n = g.nodes()[i]; // addNode may move the nodes
      const ir::TensorType t = g.type(n.operands[0]);
      ir::TensorType rows = t;
      rows.shape.back() = 1;
      const auto last = static_cast<int64_t>(t.shape.size()) - 1;
      const Attrs along = Attrs().set("dims", Shape{last}).set("keepdim", true);
      auto add = [&](OpCode op, std::vector<ir::ValueId> operands, Attrs attrs,
                     const ir::TensorType& type) {
        placed[i].push_back(static_cast<int32_t>(g.nodes().size()));
        return g.addNode(op, std::move(operands), std::move(attrs), type, n.loc);
      };
      const ir::ValueId x = n.operands[0];
      const ir::ValueId max = add(OpCode::AMax, {x}, along, rows);
      const ir::ValueId shifted = add(OpCode::Sub, {x, max}, {}, t);
      const ir::ValueId e = add(OpCode::Exp, {shifted}, {}, t);
      const ir::ValueId sum = add(OpCode::Sum, {e}, along, rows);
      ir::ValueId y;
      if (n.op == OpCode::Softmax) {
        y = add(OpCode::Div, {e, sum}, {}, t);
      } else {
        const ir::ValueId lse = add(OpCode::Log, {sum}, {}, rows);
        y = add(OpCode::Sub, {shifted, lse}, {}, t);
      }
      g.replaceAllUses(n.result, y);
      expanded[i] = true;
    }
    placeAppended(g, before, placed, expanded);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createExpandSoftmax() {
  return std::make_unique<ExpandSoftmax>();
}

} // namespace weft::passes
