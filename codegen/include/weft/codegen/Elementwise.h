// Generated CPU code for fused elementwise groups, behind a header with no MLIR or LLVM types.
#pragma once

#include "weft/codegen/Jit.h"
#include "weft/ir/Lower.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::codegen {

/// The kernels of a graph's groups: `table` holds one per group that lowered (groups computing
/// the same kernel share its code); kernelOf[k] is group k's kernel in it, or -1 where codegen
/// could not lower the group, and failures[k] then says why (its nodes run in the interpreter).
struct GroupKernels {
  KernelTable table;
  std::vector<int32_t> kernelOf;
  std::vector<std::string> failures;
};

/// Compiles each group of `g` (see passes::findElementwiseGroups) into linalg generics on tensors
/// over strided views of its memrefs (a row kernel: one per pass along each row), or, for a group
/// whose first node is a float32 matmul, a GEMM with the
/// group's other nodes as its epilogue (register tiles in the vector dialect: MatmulKernel.h), one
/// MLIR module per kernel, and from there into machine code for
/// `target`: each kernel is read from the disk cache or compiled (in parallel on the thread pool),
/// and all are linked into one shared object. A group's kernel takes contiguous inputs and writes
/// fresh contiguous outputs (or over the inputs its group marks), its outer loop split over the
/// threads. A group codegen cannot lower (or LLVM fails on) is left out alone; a failure of the
/// whole set (linking) is a diagnostic.
ir::Result<GroupKernels> compileElementwise(const ir::Graph& g,
                                            std::span<const ir::FusionGroup> groups,
                                            const CpuTarget& target = CpuTarget::host());

} // namespace weft::codegen
