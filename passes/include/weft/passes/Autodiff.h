// Reverse-mode autodiff over the graph, built from the op table's vjp rules (the same rules eager
// autograd runs).
#pragma once

#include "weft/ir/Graph.h"
#include "weft/passes/Pass.h"

#include <functional>
#include <vector>

namespace weft::passes {

/// A region of the graph with a gradient of its own (a user-defined autograd function): `outputs`
/// computed from `inputs`. `backward` gets one gradient per output (kNoValue for none), appends
/// nodes to the graph and returns one gradient per input (kNoValue for none).
struct CustomRule {
  std::vector<ir::ValueId> inputs, outputs;
  std::function<std::vector<ir::ValueId>(const std::vector<ir::ValueId>& outputGrads)> backward;
};

/// Per value of `g`: whether a gradient flows to some `wrt` value from it (floating values reached
/// through differentiable ops, or through the custom regions' own backward).
std::vector<bool> differentiablyDependsOn(const ir::Graph& g, const std::vector<ir::ValueId>& wrt,
                                          const std::vector<CustomRule>& custom = {});

/// Appends to `g` the gradient of `loss` with respect to each value in `wrt` (seeded with `seed`,
/// or ones of loss's shape when kNoValue). Returns one gradient value per `wrt` entry, kNoValue
/// where `loss` does not depend on it. Backward nodes carry their forward node's location. Regions
/// in `custom` are differentiated by their own backward instead of through their nodes.
ir::Result<std::vector<ir::ValueId>> appendGradients(ir::Graph& g, ir::ValueId loss,
                                                     const std::vector<ir::ValueId>& wrt,
                                                     ir::ValueId seed = ir::kNoValue,
                                                     const std::vector<CustomRule>& custom = {});

/// The "autodiff" pass: differentiates output 0 with respect to every floating state input and
/// appends the gradients as outputs, in state order (zeros where output 0 does not depend on it).
std::unique_ptr<Pass> createAutodiff();

} // namespace weft::passes
