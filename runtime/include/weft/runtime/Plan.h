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

/// The generated kernels a plan launches: their code for each target it was built for, side by
/// side (CPU object code, SPIR-V; each code object holds every kernel), and each kernel's entry.
/// `loaded` is the code loaded on the device that runs the plan (not part of what is saved).
struct KernelTable {
  std::vector<hal::CodeObject> code;
  std::vector<hal::KernelInfo> kernels;
  std::shared_ptr<const hal::LoadedCode> loaded;
  /// The device `loaded` is loaded on.
  hal::Device* loadedOn = nullptr;

  /// Loads the code object `device` runs (the first it accepts) there, unless it is loaded there
  /// already; a DeviceError naming each target the table has and why the device refuses it.
  void load(hal::Device& device);
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
  /// A kernel step that runs inside the step before it, a convolution whose output it reads: the
  /// convolution launches rows [n, n + 1) of the kernel (its rows are dim 0, the samples) on the
  /// thread that has just written sample n, while that sample is still in the core's cache (a
  /// conv's bias and activation as its epilogue). Everything else the kernel reads is computed
  /// before the convolution, and it writes over nothing the convolution reads.
  bool afterEachSample = false;
  /// An interpreter step's output laid out in its fresh buffer with these strides (a permutation
  /// of its dims, dense), or empty for row-major: a matmul whose only reader is a permute gets the
  /// layout that makes the permute's result contiguous, so a reshape of it (an attention's head
  /// merge) is a view instead of a copy.
  Shape outputStrides;
};

/// Whether `strides` lay out `shape` densely: some order of the dims is row-major with them.
bool isDenseLayout(const Shape& shape, const Shape& strides);

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
  /// The memory plan (planMemory(); derived from the above, so not saved): every call allocates
  /// one arena of `arenaBytes` and each planned slot's buffer lies at `arenaOffset[slot]` in it;
  /// -1 for slots the runtime allocates on their own (arguments, state, views, outputs and what
  /// they view, kernel outputs written over state).
  int64_t arenaBytes = 0;
  std::vector<int64_t> arenaOffset;
};

/// Checks that `device` has a kernel for every interpreter step of `plan`: a DeviceError naming
/// the first op it lacks and the step, before anything runs.
void checkKernelsOn(const Plan& plan, hal::Device& device);

/// Whether step `i` of `plan` can run inside step i - 1 (PlanStep::afterEachSample): a kernel
/// whose rows are the samples of the output of a float32/float64 conv before it, an input of the
/// kernel, which writes over no memory the conv reads (views followed) and into no slot the conv
/// or it reads.
bool isConvEpilogue(const Plan& plan, size_t i);

/// Whether interpreter step `step` may write its output over input `j` of the same shape once
/// nothing else reads that: elementwise ops read each element before writing it; scatter_add,
/// scatter and index_add start from a copy of input 0. (Generated kernels write over an input
/// only where the fuse pass marked it: PlanStep::kernelInPlace.)
bool canWriteOverInput(const PlanStep& step, size_t j);

/// Fills plan.arenaBytes and plan.arenaOffset: the buffers steps write (and the views of them)
/// live from the step that writes them to the last step that reads them; buffers whose lives do
/// not overlap share memory, and a step's output takes the memory of an input it reads for the
/// last time where canWriteOverInput allows (or a kernel's kernelInPlace says). Lifetimes are
/// packed by a few greedy orders and fits; the smallest arena wins.
void planMemory(Plan& plan);

} // namespace weft
