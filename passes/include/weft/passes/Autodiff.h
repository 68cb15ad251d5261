// Reverse-mode autodiff over the graph, built from the op table's vjp rules (the same rules eager
// autograd runs).
#pragma once

#include "weft/ir/Graph.h"
#include "weft/passes/Pass.h"

#include <vector>

namespace weft::passes {

/// Appends to `g` the gradient of `loss` with respect to each value in `wrt` (seeded with `seed`,
/// or ones of loss's shape when kNoValue). Returns one gradient value per `wrt` entry, kNoValue
/// where `loss` does not depend on it. Backward nodes carry their forward node's location.
ir::Result<std::vector<ir::ValueId>> appendGradients(ir::Graph& g, ir::ValueId loss, const std::vector<ir::ValueId>& wrt,
                                                     ir::ValueId seed = ir::kNoValue);

/// The "autodiff" pass: differentiates output 0 with respect to every floating state input and
/// appends the gradients as outputs, in state order (zeros where output 0 does not depend on it).
std::unique_ptr<Pass> createAutodiff();

} // namespace weft::passes
