// Generated SPIR-V for the fused groups of programs compiled for a GPU device (Vulkan), behind a
// header with no MLIR types: what the device's code generator can do, as the passes ask it, and
// the kernels it makes.
#pragma once

#include "weft/codegen/Elementwise.h"
#include "weft/passes/Target.h"

#include <cstdint>
#include <span>
#include <string>

namespace weft::codegen {

/// A Vulkan device as its code generator sees it: the SPIR-V it may use (the device's
/// CodeObject target, hal::Limits::codeTarget) and its workgroup size.
struct SpirvTarget : passes::Target {
  std::string code;             ///< "spirv1.3 caps=Shader,Int64,... exts=..."
  uint32_t storageBuffers = 32; ///< the most storage buffers one shader binds
  uint32_t workgroupSize = 256; ///< invocations of one workgroup along x

  SpirvTarget(std::string code, uint32_t storageBuffers, uint32_t workgroupSize = 256)
      : code(std::move(code)), storageBuffers(storageBuffers), workgroupSize(workgroupSize) {}
  /// "spirv spirv1.3 caps=... buffers=32": what the fuse pass's groups depend on.
  std::string name() const override {
    return "spirv " + code + " buffers=" + std::to_string(storageBuffers);
  }
  /// The ops kernelsCompute says in the dtypes the device's shaders hold:
  /// no float64 (Vulkan's exp, log, sin and the like are 32-bit: such nodes run as per-op
  /// shaders), int64 with the Int64 capability, float16 with Float16, bfloat16 with Int16.
  bool computes(const ir::Graph& g, const ir::Node& n) const override;
  /// Not yet: reductions run as the op table's shaders between kernels.
  bool reducesInKernels() const override { return false; }
  /// Not yet: matmuls run as the op table's tiled GEMM shaders.
  bool generatesGemm(const ir::Graph&, const ir::Node&) const override { return false; }
  /// No: a kernel's inputs are contiguous (views are copied first).
  bool readsViews() const override { return false; }
  /// One buffer fewer than a shader binds: binding 0 holds the kernel's parameters.
  size_t maxOperands() const override { return storageBuffers > 0 ? storageBuffers - 1 : 0; }
  /// Whether the target lists SPIR-V capability `capability`.
  bool has(const std::string& capability) const;
};

/// Compiles each group of `g` (its elementwise nodes, every input broadcast to the group's shape)
/// into a SPIR-V kernel for `target`: one invocation per element of the group's shape (its sizes
/// built in), reading its inputs and writing its outputs at the offsets its parameters give. Each
/// is read from the disk cache or compiled (in parallel on the thread pool); all go into one
/// "spirv-kernels" code object (hal::packSpirvKernels). A group codegen cannot lower is left out
/// alone, its failure said.
ir::Result<GroupKernels> compileSpirvKernels(const ir::Graph& g,
                                             std::span<const ir::FusionGroup> groups,
                                             const SpirvTarget& target);

} // namespace weft::codegen
