// Lowering a verified graph to a runtime Plan: one step per node (or per fused group), each
// buffer released after its last use.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Executable.h"
#include "weft/runtime/Plan.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::ir {

/// A group and the kernel of the plan's table that computes it; -1 where codegen could not build
/// one: then its leaves and nodes run in the interpreter one by one, in order, where the group
/// runs (at its first node), which is where the fuse pass placed it and what the other kernels'
/// in-place writes assume.
struct FusedKernel {
  FusionGroup group;
  int32_t kernel = -1;
};

/// The plan that runs `g` step by step, each group in `fused` as one launch of its kernel in
/// `kernels` (the plan keeps the table), or as interpreter steps where it has none. `g` must
/// verify.
Plan lowerToPlan(const Graph& g, std::span<const FusedKernel> fused = {}, KernelTable kernels = {});
/// lowerToPlan's steps without the memory plan (planMemory makes it; the plan runs without, each
/// buffer allocated on its own): what the "lower" pass makes, "plan-memory" planning it.
/// A kernel that reads a conv's result right after it runs inside the conv, over each sample as
/// it is written (PlanStep::afterEachSample), where that is safe.
Plan lowerSteps(const Graph& g, std::span<const FusedKernel> fused = {}, KernelTable kernels = {});

/// The executable that runs `plan`, lowered from `g`: its signature is g's, each value named as
/// in `g` (or a0, s0, out0, ... where unnamed).
Executable executableOf(const Graph& g, Plan plan);

/// The steps of `plan`, lowered from `g`, one per line, with the memory plan: where each buffer a
/// step writes lies in the arena ("at 128"; none for buffers allocated apart: outputs, state,
/// views), which input a kernel writes over ("over %3"; an interpreter step writing over its input
/// shows as the same offset), a conv's epilogue kernel running inside it ("per sample inside step
/// 4"), and what each step releases. For weft-opt --lower and
/// WEFT_PRINT_PLAN.
std::string printPlan(const Graph& g, const Plan& plan);

} // namespace weft::ir
