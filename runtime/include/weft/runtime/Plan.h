// An executable plan in runtime terms: steps over numbered buffer slots. This is what the
// interpreter runs and what an exported artifact stores; it needs neither ir/ nor MLIR.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/TensorRef.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace weft {

/// The generated kernels a plan launches: one code object holding them all, and each kernel's
/// entry. `loaded` is the code loaded on the device that runs the plan (not part of what is saved).
struct KernelTable {
  hal::CodeObject code;
  std::vector<hal::KernelInfo> kernels;
  std::shared_ptr<const hal::LoadedCode> loaded;
};

/// One op over slots: reads `inputs`, writes `output` (a fresh buffer, or a view for movement
/// ops), then releases the slots in `release` (their last use).
struct PlanStep {
  OpCode op;
  std::vector<int32_t> inputs;
  int32_t output = -1;
  Attrs attrs;
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<int32_t> release;
  /// A fused step: kernel `kernel` of the plan's table runs instead of `op`'s kernel and writes
  /// each slot of `kernelOutputs` (fresh buffers of `kernelTypes`); `output`, `dtype` and `shape`
  /// are unused. -1 for an interpreter step.
  int32_t kernel = -1;
  std::vector<int32_t> kernelOutputs;
  std::vector<std::pair<DType, Shape>> kernelTypes;
  /// Per kernel output: the index in `inputs` of the input the kernel writes it over (a state
  /// tensor's update; the runtime passes a private copy where the state's memory is shared or
  /// strided), or -1 for a fresh buffer.
  std::vector<int32_t> kernelInPlace;
};

/// A whole program: which slots hold the arguments and state on entry, the steps, which slots
/// are the outputs, and which slot's value each updated state input takes after the call.
struct Plan {
  int32_t numSlots = 0;
  std::vector<int32_t> argumentSlots;
  std::vector<int32_t> stateSlots;
  std::vector<PlanStep> steps;
  std::vector<int32_t> outputSlots;
  /// (index into stateSlots, slot holding the new value)
  std::vector<std::pair<int32_t, int32_t>> stateUpdates;
  KernelTable kernels;
};

} // namespace weft
