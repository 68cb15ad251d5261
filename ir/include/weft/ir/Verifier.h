// Checks that a graph is well formed, reporting every problem at its location.
#pragma once

#include "weft/ir/Graph.h"

#include <vector>

namespace weft::ir {

/// Every problem in `g`: operands used before they are defined or never defined, wrong operand
/// counts, attributes and result types that disagree with the op's shape inference, bad outputs
/// and state updates. Empty when the graph is valid. Each message starts with the node's source
/// location when known, and names the value ("%3 = matmul: ...").
std::vector<Diagnostic> verify(const Graph& g);

} // namespace weft::ir
