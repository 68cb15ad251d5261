// Generated CPU code for fused elementwise groups, behind a header with no MLIR or LLVM types.
#pragma once

#include "weft/ir/Lower.h"

#include <memory>
#include <span>
#include <vector>

namespace weft::codegen {

/// Compiles each group of `g` (see passes::findElementwiseGroups) into a loop nest in one MLIR
/// module (func/scf/memref/arith/math), lowers it to LLVM and JIT-compiles it for this CPU. The
/// kernels take contiguous inputs and write fresh contiguous outputs; the runtime splits their
/// outer loop over its threads. A group it cannot lower fails the whole call with a diagnostic
/// (the caller keeps the interpreter for that graph).
ir::Result<std::vector<std::shared_ptr<const CompiledKernel>>>
compileElementwise(const ir::Graph& g, std::span<const ir::FusionGroup> groups);

} // namespace weft::codegen
