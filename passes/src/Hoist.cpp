// Hoisting: an elementwise node that is the last reader of larger buffers than it makes is moved
// up to just after their last other reader (views of them included), so they die there instead of
// staying alive until it runs. The case it exists for: a gradient rule's mask (relu's y <= 0, read
// by the backward) sits among the backward nodes; moved up to the forward, it keeps a bool per
// element alive instead of the float it reads. Where such a buffer is an elementwise node's value
// and the node's result is at most a quarter of the bytes it frees, it goes right after that node
// instead, into its kernel (reading the value from registers, not memory again). Runs after remat
// (which moves reads the other way, where that keeps fewer bytes) and before fusion (which then
// puts the mask into its neighbour's kernel).
#include "weft/passes/Fusion.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <cstdint>
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

ir::Result<bool> Hoist::run(ir::Graph& g) {
  const std::vector<ir::Node>& nodes = g.nodes();
  const size_t numValues = g.values().size();
  // A view lives in its input's buffer (see the memory planner): each value's buffer is that of
  // its base, the value at the end of its chain of views.
  std::vector<ValueId> base(numValues);
  for (size_t v = 0; v < numValues; ++v) {
    int32_t p = g.value(static_cast<ValueId>(v)).producer;
    base[v] = p >= 0 && isViewOp(nodes[static_cast<size_t>(p)].op)
                  ? base[static_cast<size_t>(nodes[static_cast<size_t>(p)].operands[0])]
                  : static_cast<ValueId>(v);
  }
  // Buffers that stay alive to the end whatever the order: inputs, outputs, state updates (and
  // what they view).
  std::vector<bool> pinned(numValues, false);
  for (size_t v = 0; v < numValues; ++v)
    if (g.isInput(static_cast<ValueId>(v))) pinned[static_cast<size_t>(base[v])] = true;
  for (ValueId v : g.outputs())
    pinned[static_cast<size_t>(base[static_cast<size_t>(v)])] = true;
  for (const ir::StateUpdate& u : g.stateUpdates())
    pinned[static_cast<size_t>(base[static_cast<size_t>(u.newValue)])] = true;
  // Readers of each buffer (of its base or any view of it), by original position.
  std::vector<std::vector<int32_t>> readers(numValues);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].operands) {
      std::vector<int32_t>& r = readers[static_cast<size_t>(base[static_cast<size_t>(o)])];
      if (r.empty() || r.back() != static_cast<int32_t>(i)) r.push_back(static_cast<int32_t>(i));
    }

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
    std::vector<ValueId> buffers;   // the buffers n reads, once each
    std::vector<int32_t> constants; // scalar constants n reads: they move up with it
    for (ValueId o : n.operands) {
      int32_t p = g.value(o).producer;
      if (p >= 0 && isScalarConstant(g, nodes[static_cast<size_t>(p)])) {
        constants.push_back(p);
        continue;
      }
      if (p >= 0) earliest = std::max(earliest, slot[static_cast<size_t>(p)]);
      buffers.push_back(base[static_cast<size_t>(o)]);
    }
    std::sort(buffers.begin(), buffers.end());
    buffers.erase(std::unique(buffers.begin(), buffers.end()), buffers.end());
    std::vector<ValueId> frees; // the buffers n reads last
    for (ValueId b : buffers) {
      const std::vector<int32_t>& r = readers[static_cast<size_t>(b)];
      if (pinned[static_cast<size_t>(b)] || r.back() != self) continue; // n does not free it
      frees.push_back(b);
      if (__builtin_add_overflow(freed, valueBytes(g, b), &freed)) freed = INT64_MAX;
      freeing = std::max(freeing, slot[static_cast<size_t>(g.value(b).producer)]);
      for (int32_t reader : r)
        if (reader != self) freeing = std::max(freeing, slot[static_cast<size_t>(reader)]);
    }
    const int64_t made = valueBytes(g, n.result);
    if (freed <= made) continue;
    int32_t after = std::max(earliest, freeing).first;
    // Where what n reads last is computed by an elementwise node of n's shape, n goes right after
    // it instead, into its kernel: the value is still in registers there, where the slot that
    // frees it would read it again from memory, after a heavy op (relu's mask after the max-pool
    // that reads y: 0.4 ms of the CNN step). That keeps n's result alive from there; only for a
    // result of at most a quarter of the bytes it frees (a bool mask of a float).
    if (earliest.first >= 0 && earliest.second < 0 && made <= freed / 4) {
      const ir::Node& producer = nodes[static_cast<size_t>(earliest.first)];
      if (isElementwise(producer.op) && g.type(producer.result).shape == g.type(n.result).shape &&
          std::find(frees.begin(), frees.end(), base[static_cast<size_t>(producer.result)]) !=
              frees.end())
        after = earliest.first;
    }
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
