// Hoisting: an elementwise node that is the last reader of larger values than it makes is moved
// up to just after their last other reader, so they die there instead of staying alive until it
// runs. The case it exists for: a gradient rule's mask (relu's x <= 0, read by the backward) sits
// among the backward nodes; at the forward's end of the graph it keeps a bool per element alive
// instead of the float it reads. Runs after remat (which moves reads the other way, where that
// keeps fewer bytes) and before fusion (which then puts the mask into its neighbour's kernel).
#include "weft/passes/Pass.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <utility>

namespace weft::passes {
namespace {

using ir::ValueId;

class Hoist : public Pass {
public:
  std::string_view name() const override { return "hoist"; }
  ir::Result<bool> run(ir::Graph& g) override;
};

/// A position in the new order: (the original node it follows or is, original index of a hoisted
/// node or -1 for the node itself). Pairs compare in execution order.
using Slot = std::pair<int32_t, int32_t>;

/// A node that makes a one-element constant from nothing: free to run anywhere.
bool isScalarConstant(const ir::Graph& g, const ir::Node& n) {
  return n.op == OpCode::Full && n.operands.empty() && numel(g.type(n.result).shape) == 1;
}

int64_t bytesOf(const ir::Graph& g, ValueId v) {
  const ir::TensorType& t = g.type(v);
  return numel(t.shape) * static_cast<int64_t>(elementSize(t.dtype));
}

ir::Result<bool> Hoist::run(ir::Graph& g) {
  const std::vector<ir::Node>& nodes = g.nodes();
  const size_t numValues = g.values().size();
  // Values that stay alive to the end whatever the order: inputs, outputs, state updates.
  std::vector<bool> pinned(numValues, false);
  for (size_t v = 0; v < numValues; ++v)
    pinned[v] = g.isInput(static_cast<ValueId>(v));
  for (ValueId v : g.outputs())
    pinned[static_cast<size_t>(v)] = true;
  for (const ir::StateUpdate& u : g.stateUpdates())
    pinned[static_cast<size_t>(u.newValue)] = true;
  // Readers of each value, by original position.
  std::vector<std::vector<int32_t>> readers(numValues);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].operands)
      if (readers[static_cast<size_t>(o)].empty() ||
          readers[static_cast<size_t>(o)].back() != static_cast<int32_t>(i))
        readers[static_cast<size_t>(o)].push_back(static_cast<int32_t>(i));

  std::vector<Slot> slot(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    const auto self = static_cast<int32_t>(i);
    slot[i] = {self, -1};
    if (!isElementwise(n.op) || n.operands.empty()) continue;
    // The earliest slot: after every operand's producer. The slot that frees the operands n reads
    // last: after their other readers. Gain: the bytes those free, less the bytes n makes.
    Slot earliest{-1, -1}, freeing{-1, -1};
    int64_t freed = 0;
    std::vector<ValueId> operands = n.operands;
    std::sort(operands.begin(), operands.end());
    operands.erase(std::unique(operands.begin(), operands.end()), operands.end());
    std::vector<int32_t> constants; // scalar constants n reads: they move up with it
    for (ValueId o : operands) {
      int32_t p = g.value(o).producer;
      if (p >= 0 && isScalarConstant(g, nodes[static_cast<size_t>(p)])) {
        constants.push_back(p);
        continue;
      }
      if (p >= 0) earliest = std::max(earliest, slot[static_cast<size_t>(p)]);
      const std::vector<int32_t>& r = readers[static_cast<size_t>(o)];
      // A view's bytes are its base's, which this read does not free.
      if (pinned[static_cast<size_t>(o)] || r.back() != self ||
          isViewOp(nodes[static_cast<size_t>(p)].op))
        continue;
      freed += bytesOf(g, o);
      freeing = std::max(freeing, slot[static_cast<size_t>(p)]);
      for (int32_t reader : r)
        if (reader != self) freeing = std::max(freeing, slot[static_cast<size_t>(reader)]);
    }
    if (freed <= bytesOf(g, n.result)) continue;
    const int32_t after = std::max(earliest, freeing).first;
    slot[i] = {after, self};
    for (int32_t c : constants)
      slot[static_cast<size_t>(c)] = std::min(slot[static_cast<size_t>(c)], Slot{after, c});
  }
  std::vector<int32_t> order(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return slot[static_cast<size_t>(a)] < slot[static_cast<size_t>(b)];
  });
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i] != static_cast<int32_t>(i)) {
      g.reorderNodes(order);
      return true;
    }
  return false;
}

} // namespace

std::unique_ptr<Pass> createHoist() {
  return std::make_unique<Hoist>();
}

} // namespace weft::passes
