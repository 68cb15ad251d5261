// Generated CPU code for fused elementwise groups, behind a header with no MLIR or LLVM types.
#pragma once

#include "weft/codegen/Jit.h"
#include "weft/ir/Lower.h"

#include <memory>
#include <span>
#include <vector>

namespace weft::codegen {

/// Compiles each group of `g` (see passes::findElementwiseGroups) into a loop nest (func, scf,
/// memref, arith, math), one MLIR module per kernel, and from there into machine code for
/// `target`: each kernel is read from the disk cache or compiled (in parallel on the thread pool),
/// and all are linked into one shared object. Kernel k of the table computes group k; it takes
/// contiguous inputs and writes fresh contiguous outputs, its outer loop split over the threads.
/// A group it cannot lower fails the whole call with a diagnostic (the caller keeps the
/// interpreter for that graph).
ir::Result<KernelTable> compileElementwise(const ir::Graph& g,
                                           std::span<const ir::FusionGroup> groups,
                                           const CpuTarget& target = CpuTarget::host());

} // namespace weft::codegen
