// Placing nodes a pass appended where they belong: shared by the passes that replace nodes with
// several (expand-softmax, split-sums).
#pragma once

#include "weft/ir/Graph.h"

#include <vector>

namespace weft::passes {

/// Puts the nodes appended after the graph's first `before` ones where `placed` says, and drops
/// the nodes among the first `before` that `drop` marks: placed[i] lists appended nodes (their
/// positions now) that go right before node i, in that order (placed[before]: at the end). Every
/// appended node must be listed once, after what it reads.
inline void placeAppended(ir::Graph& g, size_t before,
                          const std::vector<std::vector<int32_t>>& placed,
                          const std::vector<bool>& drop) {
  std::vector<int32_t> order;
  std::vector<bool> dead;
  for (size_t i = 0; i <= before; ++i) {
    for (int32_t k : placed[i]) {
      order.push_back(k);
      dead.push_back(false);
    }
    if (i == before) break;
    order.push_back(static_cast<int32_t>(i));
    dead.push_back(drop[i]);
  }
  g.reorderNodes(order);
  g.eraseNodes(dead);
}

} // namespace weft::passes
