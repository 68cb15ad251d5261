// Lowering a verified graph to a runtime Plan: one step per node (or per fused group), each
// buffer released after its last use.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Plan.h"

#include <memory>
#include <span>
#include <vector>

namespace weft::ir {

/// A group and the kernel of the plan's table that computes it.
struct FusedKernel {
  FusionGroup group;
  int32_t kernel = -1;
};

/// The plan that runs `g` step by step, each group in `fused` as one launch of its kernel in
/// `kernels` (the plan keeps the table). `g` must verify.
Plan lowerToPlan(const Graph& g, std::span<const FusedKernel> fused = {}, KernelTable kernels = {});

} // namespace weft::ir
