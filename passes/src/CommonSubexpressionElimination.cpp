// Common-subexpression elimination: one node per distinct (op, operands, attributes).
#include "weft/passes/Pass.h"

#include "weft/ir/TextFormat.h"

#include <unordered_map>

namespace weft::passes {
namespace {

/// A key that is equal exactly for nodes that compute the same value. Ops are pure (random ops
/// carry their seed and offset), so equal keys mean equal results.
std::string keyOf(const ir::Node& n) {
  std::string k(opName(n.op));
  for (ir::ValueId v : n.operands)
    k += " " + std::to_string(v);
  for (const auto& [name, value] : n.attrs.items())
    k += " " + name + "=" + ir::printAttr(value);
  return k;
}

class CommonSubexpressionElimination : public Pass {
public:
  std::string_view name() const override { return "cse"; }
  ir::Result<bool> run(ir::Graph& g) override {
    // One forward sweep: operands are rewritten to their representative before a node is keyed.
    std::vector<ir::ValueId> rep(g.values().size());
    for (size_t v = 0; v < rep.size(); ++v)
      rep[v] = static_cast<ir::ValueId>(v);
    std::unordered_map<std::string, ir::ValueId> seen;
    std::vector<bool> dead(g.nodes().size(), false);
    bool any = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      ir::Node& n = g.mutableNodes()[i];
      for (ir::ValueId& v : n.operands)
        v = rep[static_cast<size_t>(v)];
      auto [it, fresh] = seen.emplace(keyOf(n), n.result);
      if (!fresh) {
        rep[static_cast<size_t>(n.result)] = it->second;
        dead[i] = any = true;
      }
    }
    if (!any) return false;
    for (ir::ValueId& v : g.mutableOutputs())
      v = rep[static_cast<size_t>(v)];
    for (ir::StateUpdate& u : g.mutableStateUpdates())
      u.newValue = rep[static_cast<size_t>(u.newValue)];
    g.eraseNodes(dead);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> createCommonSubexpressionElimination() {
  return std::make_unique<CommonSubexpressionElimination>();
}

} // namespace weft::passes
