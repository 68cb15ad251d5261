// Fusion: which elementwise nodes one generated loop nest computes.
#pragma once

#include "weft/ir/Lower.h"

#include <vector>

namespace weft::passes {

/// Whether codegen can compute `dtype` inside a fused kernel.
bool fusibleDType(DType dtype);

/// Groups of elementwise nodes (unary, binary, where, cast, stop_gradient) of one result shape and
/// fusible dtypes, with scalar constants and broadcasts of values computed outside inlined as
/// leaves. A node joins the group of an operand's producer when each of its other operands is in
/// the group, an input, or computed before the group's first node, so the group can run as one
/// step there. Groups with fewer than `minNodes` nodes are left out.
std::vector<ir::FusionGroup> findElementwiseGroups(const ir::Graph& g, size_t minNodes = 2);

} // namespace weft::passes
