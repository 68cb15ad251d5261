// Lowering a verified graph to a runtime Plan: one step per node, each buffer released after its
// last use.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Plan.h"

namespace weft::ir {

/// The plan that runs `g` step by step. `g` must verify.
Plan lowerToPlan(const Graph& g);

} // namespace weft::ir
