// Dead-code elimination: keep what the outputs and state updates need, drop the rest.
#include "weft/passes/Pass.h"

namespace weft::passes {
namespace {

class DeadCodeElimination : public Pass {
public:
  std::string_view name() const override { return "dce"; }
  ir::Result<bool> run(ir::Graph& g) override {
    std::vector<bool> live = g.returnedValues();
    // Nodes are in topological order: one backward sweep finds everything live.
    std::vector<bool> dead(g.nodes().size(), false);
    bool any = false;
    for (size_t i = g.nodes().size(); i-- > 0;) {
      const ir::Node& n = g.nodes()[i];
      if (!live[static_cast<size_t>(n.result)]) {
        dead[i] = any = true;
        continue;
      }
      for (ir::ValueId v : n.operands)
        live[static_cast<size_t>(v)] = true;
    }
    if (any) g.eraseNodes(dead);
    return any;
  }
};

} // namespace

std::unique_ptr<Pass> createDeadCodeElimination() {
  return std::make_unique<DeadCodeElimination>();
}

} // namespace weft::passes
