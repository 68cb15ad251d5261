// Graph -> Plan: slots are value ids; a step releases the values it reads for the last time.
#include "weft/ir/Lower.h"

#include <algorithm>

namespace weft::ir {

Plan lowerToPlan(const Graph& g) {
  Plan plan;
  plan.numSlots = static_cast<int32_t>(g.values().size());
  plan.argumentSlots.assign(g.arguments().begin(), g.arguments().end());
  plan.stateSlots.assign(g.state().begin(), g.state().end());
  plan.outputSlots.assign(g.outputs().begin(), g.outputs().end());
  for (const StateUpdate& u : g.stateUpdates()) {
    auto index = std::find(g.state().begin(), g.state().end(), u.state) - g.state().begin();
    plan.stateUpdates.emplace_back(static_cast<int32_t>(index), u.newValue);
  }
  // Last reader of each value; values the caller receives are never released.
  std::vector<int64_t> lastUse(g.values().size(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (ValueId v : g.nodes()[i].operands)
      lastUse[static_cast<size_t>(v)] = static_cast<int64_t>(i);
  std::vector<bool> keep(g.values().size(), false);
  for (ValueId v : g.outputs())
    keep[static_cast<size_t>(v)] = true;
  for (const StateUpdate& u : g.stateUpdates())
    keep[static_cast<size_t>(u.newValue)] = true;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    PlanStep step{n.op,
                  {n.operands.begin(), n.operands.end()},
                  n.result,
                  n.attrs,
                  g.type(n.result).dtype,
                  g.type(n.result).shape,
                  {}};
    for (ValueId v : n.operands)
      if (lastUse[static_cast<size_t>(v)] == static_cast<int64_t>(i) &&
          !keep[static_cast<size_t>(v)] &&
          std::find(step.release.begin(), step.release.end(), v) == step.release.end())
        step.release.push_back(v);
    if (lastUse[static_cast<size_t>(n.result)] < 0 && !keep[static_cast<size_t>(n.result)])
      step.release.push_back(n.result); // never read: free at once
    plan.steps.push_back(std::move(step));
  }
  return plan;
}

} // namespace weft::ir
