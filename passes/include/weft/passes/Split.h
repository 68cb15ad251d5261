// Splitting a graph that holds a forward computation and its gradients into a forward graph and a
// backward graph, joined by the values the backward reads (what eager autograd would save).
#pragma once

#include "weft/ir/Graph.h"

#include <vector>

namespace weft::passes {

struct ForwardBackward {
  /// The joint graph's arguments other than the seeds, and its state; outputs: the joint graph's
  /// outputs, then each saved value that a node computes (in `saved` order, inputs skipped).
  ir::Graph forward;
  /// Arguments: every saved value (in `saved` order), then the seeds; outputs: the gradients
  /// (those that are not kNoValue, in order). No state: what it reads of state is saved.
  ir::Graph backward;
  /// Values of the joint graph the backward reads: inputs of the joint graph, or forward results.
  std::vector<ir::ValueId> saved;
  /// The forward graph's id of each joint-graph value it holds (kNoValue otherwise).
  std::vector<ir::ValueId> forwardMap;
};

/// Splits `joint`, whose arguments end with `seeds` (the gradients of its outputs, used only by
/// gradient nodes) and which computes `grads` from them. A node belongs to the backward when it
/// depends on a seed; every other node runs in the forward, including ones only the backward needs,
/// except constants (computed from no input), which the backward computes itself.
ir::Result<ForwardBackward> splitForwardBackward(const ir::Graph& joint,
                                                 const std::vector<ir::ValueId>& seeds,
                                                 const std::vector<ir::ValueId>& grads);

} // namespace weft::passes
