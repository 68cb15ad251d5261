// The plan interpreter.
#include "weft/runtime/Interpreter.h"

#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

namespace weft {

Buffer allocateBuffer(const Shape& shape, DType dtype) {
  auto storage = hal::cpu().allocate(static_cast<size_t>(numel(shape)) * elementSize(dtype));
  return Buffer{storage, TensorRef{storage->data(), dtype, shape, contiguousStrides(shape)}};
}

namespace {

/// A fused step: inputs made contiguous where they are views, fresh outputs, the generated code.
void runKernelStep(const Plan& plan, const PlanStep& step, std::vector<TensorRef>& refs,
                   std::vector<Buffer>& slots) {
  std::vector<Buffer> copies; // keeps contiguous copies alive for the call
  for (TensorRef& r : refs)
    if (!r.isContiguous()) {
      copies.push_back(allocateBuffer(r.shape, r.dtype));
      copyCast(r, copies.back().ref);
      r = copies.back().ref;
    }
  std::vector<TensorRef> outs;
  for (size_t i = 0; i < step.kernelOutputs.size(); ++i) {
    Buffer b = allocateBuffer(step.kernelTypes[i].second, step.kernelTypes[i].first);
    outs.push_back(b.ref);
    slots[static_cast<size_t>(step.kernelOutputs[i])] = std::move(b);
  }
  const KernelTable& table = plan.kernels;
  WEFT_INTERNAL_ASSERT(table.loaded != nullptr &&
                           static_cast<size_t>(step.kernel) < table.kernels.size(),
                       "a kernel step without loaded code");
  hal::cpu().launch(*table.loaded, static_cast<size_t>(step.kernel), refs, outs);
  for (int32_t s : step.release)
    slots[static_cast<size_t>(s)] = Buffer{};
}

} // namespace

std::vector<Buffer> runPlan(const Plan& plan, std::span<const Buffer> args,
                            std::span<const Buffer> state,
                            std::span<const Attrs* const> attrOverrides) {
  WEFT_CHECK(args.size() == plan.argumentSlots.size(), Value, "run: expected ",
             plan.argumentSlots.size(), " arguments, got ", args.size());
  WEFT_CHECK(state.size() == plan.stateSlots.size(), Value, "run: expected ",
             plan.stateSlots.size(), " state tensors, got ", state.size());
  std::vector<Buffer> slots(static_cast<size_t>(plan.numSlots));
  for (size_t i = 0; i < args.size(); ++i)
    slots[static_cast<size_t>(plan.argumentSlots[i])] = args[i];
  for (size_t i = 0; i < state.size(); ++i)
    slots[static_cast<size_t>(plan.stateSlots[i])] = state[i];

  std::vector<TensorRef> refs;
  for (size_t index = 0; index < plan.steps.size(); ++index) {
    const PlanStep& step = plan.steps[index];
    const Attrs& attrs =
        index < attrOverrides.size() && attrOverrides[index] ? *attrOverrides[index] : step.attrs;
    refs.clear();
    for (int32_t s : step.inputs) {
      const Buffer& b = slots[static_cast<size_t>(s)];
      WEFT_INTERNAL_ASSERT(b.storage != nullptr, "plan reads slot ", s,
                           " before it is written or after it is freed");
      refs.push_back(b.ref);
    }
    if (step.kernel >= 0) {
      runKernelStep(plan, step, refs, slots);
      continue;
    }
    Buffer out;
    if (isViewOp(step.op)) {
      const Buffer& in = slots[static_cast<size_t>(step.inputs[0])];
      if (auto view = computeView(step.op, in.ref.shape, in.ref.strides, attrs))
        out = Buffer{in.storage, applyView(in.ref, *view)};
    }
    if (out.storage == nullptr) {
      out = allocateBuffer(step.shape, step.dtype);
      if (out.ref.numel() > 0) runKernel(step.op, refs, out.ref, attrs);
    }
    slots[static_cast<size_t>(step.output)] = std::move(out);
    for (int32_t s : step.release)
      slots[static_cast<size_t>(s)] = Buffer{};
  }

  std::vector<Buffer> outputs;
  for (int32_t s : plan.outputSlots)
    outputs.push_back(slots[static_cast<size_t>(s)]);
  // Outputs that look into state memory keep the values from before the update.
  for (Buffer& o : outputs)
    for (const auto& [stateIndex, slot] : plan.stateUpdates)
      if (o.storage == state[static_cast<size_t>(stateIndex)].storage) {
        Buffer copy = allocateBuffer(o.ref.shape, o.ref.dtype);
        copyCast(o.ref, copy.ref);
        o = copy;
      }
  // New state values are staged before any is written: one update may read another's old value.
  std::vector<Buffer> staged;
  for (const auto& [stateIndex, slot] : plan.stateUpdates) {
    const Buffer& v = slots[static_cast<size_t>(slot)];
    bool aliasesState = false;
    for (const Buffer& s : state)
      aliasesState = aliasesState || v.storage == s.storage;
    if (aliasesState) {
      Buffer copy = allocateBuffer(v.ref.shape, v.ref.dtype);
      copyCast(v.ref, copy.ref);
      staged.push_back(copy);
    } else {
      staged.push_back(v);
    }
  }
  for (size_t i = 0; i < plan.stateUpdates.size(); ++i) {
    const Buffer& target = state[static_cast<size_t>(plan.stateUpdates[i].first)];
    copyCast(staged[i].ref, target.ref);
    target.storage->bumpVersion();
  }
  return outputs;
}

} // namespace weft
