// The plan interpreter.
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Timeline.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>

namespace weft {

Buffer allocateBuffer(hal::Device& device, const Shape& shape, DType dtype) {
  auto storage = device.allocate(static_cast<size_t>(numel(shape)) * elementSize(dtype));
  return Buffer{storage, refInto(*storage, 0, dtype, shape, contiguousStrides(shape))};
}

namespace {

/// With WEFT_PROFILE=1: the time plan steps took, by op and result shape (generated kernels as
/// "kernel" with their first output's shape), summed over every run in the process but each plan's
/// first, and printed at exit, largest first.
class StepProfile {
public:
  static StepProfile* get() {
    static StepProfile* p =
        debugFlag("WEFT_PROFILE").value_or("0") == "1" ? new StepProfile : nullptr;
    return p;
  }
  /// True the first time `plan` (by address) runs: that run's times are not counted, which
  /// charged several milliseconds to whichever steps ran first.
  bool firstRun(const Plan* plan) {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_.insert(plan).second;
  }
  void add(std::string_view what, double ms) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[std::string(what)];
    e.ms += ms;
    ++e.count;
  }
  /// A step that raised the process's peak tensor memory (memoryStats) to `bytes`: the last one
  /// is where the peak was reached, kernel workspaces included.
  void processPeak(int64_t bytes, std::string_view what) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= processPeakBytes_) return;
    processPeakBytes_ = bytes;
    processPeakAt_ = what;
  }
  /// The buffers a plan holds after a step (bytes, what made them), kept if their total is the
  /// largest seen.
  void memory(std::vector<std::pair<int64_t, std::string>> live) {
    int64_t total = 0;
    for (const auto& b : live)
      total += b.first;
    std::lock_guard<std::mutex> lock(mutex_);
    if (total <= peakBytes_) return;
    peakBytes_ = total;
    peak_ = std::move(live);
  }

private:
  struct Entry {
    double ms = 0;
    int64_t count = 0;
  };
  StepProfile() {
    std::atexit([] { get()->print(); });
  }
  void print() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, Entry>> rows(entries_.begin(), entries_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0;
    for (const auto& r : rows)
      total += r.second.ms;
    std::fprintf(stderr, "[weft] plan steps by op (WEFT_PROFILE), %.1f ms in all\n", total);
    std::fprintf(stderr, "  %-30s %10s %6s %10s %10s\n", "op", "ms", "%", "calls", "us/call");
    for (const auto& [name, e] : rows)
      std::fprintf(stderr, "  %-30s %10.2f %6.1f %10lld %10.1f\n", name.c_str(), e.ms,
                   total > 0 ? 100 * e.ms / total : 0.0, static_cast<long long>(e.count),
                   1000 * e.ms / static_cast<double>(e.count));
    // Buffers of one kind summed, largest first.
    std::map<std::string, std::pair<int64_t, int64_t>> byKind; // bytes, count
    for (const auto& [bytes, what] : peak_) {
      byKind[what].first += bytes;
      ++byKind[what].second;
    }
    std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> kinds(byKind.begin(),
                                                                           byKind.end());
    std::sort(kinds.begin(), kinds.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    std::fprintf(stderr,
                 "[weft] buffers held at a plan's peak (not counting arguments and state): "
                 "%.2f MB\n",
                 static_cast<double>(peakBytes_) / 1e6);
    std::fprintf(stderr, "  %-30s %10s %6s\n", "made by", "MB", "count");
    for (const auto& [what, e] : kinds)
      std::fprintf(stderr, "  %-30s %10.2f %6lld\n", what.c_str(),
                   static_cast<double>(e.first) / 1e6, static_cast<long long>(e.second));
    if (!processPeakAt_.empty())
      std::fprintf(stderr,
                   "[weft] the process's tensor memory peaked at %.2f MB (arguments, state and "
                   "kernel workspaces included) in step: %s\n",
                   static_cast<double>(processPeakBytes_) / 1e6, processPeakAt_.c_str());
  }
  std::mutex mutex_;
  std::set<const Plan*> seen_;
  std::map<std::string, Entry> entries_;
  int64_t peakBytes_ = 0, processPeakBytes_ = 0;
  std::vector<std::pair<int64_t, std::string>> peak_;
  std::string processPeakAt_;
};

/// Where a step's output `slot` goes: its place in the call's arena where the memory plan has
/// one, else a buffer of its own.
class SlotMemory {
public:
  SlotMemory(hal::Device& device, const Plan& plan)
      : device_(device), plan_(plan),
        arena_(plan.arenaBytes > 0 && plan.arenaOffset.size() == static_cast<size_t>(plan.numSlots)
                   ? device.allocate(static_cast<size_t>(plan.arenaBytes))
                   : nullptr) {}
  Buffer operator()(int32_t slot, DType dtype, const Shape& shape) const {
    int64_t at = arena_ != nullptr ? plan_.arenaOffset[static_cast<size_t>(slot)] : -1;
    if (at < 0) return allocateBuffer(device_, shape, dtype);
    return Buffer{arena_, refInto(*arena_, at, dtype, shape, contiguousStrides(shape))};
  }
  const Storage* arena() const { return arena_.get(); }
  hal::Device& device() const { return device_; }

private:
  hal::Device& device_;
  const Plan& plan_;
  std::shared_ptr<Storage> arena_;
};

/// `refs` becomes the views of the slots `step` reads (its memory reused step after step).
void refsOf(const PlanStep& step, const std::vector<Buffer>& slots, std::vector<TensorRef>& refs) {
  refs.clear();
  for (int32_t s : step.inputs) {
    const Buffer& b = slots[static_cast<size_t>(s)];
    WEFT_INTERNAL_ASSERT(b.storage != nullptr, "plan reads slot ", s,
                         " before it is written or after it is freed");
    refs.push_back(b.ref);
  }
}

/// A fused step bound to its operands: its input `refs` made contiguous (in place) where they are
/// views, outputs where `memory` puts them (or over an input the kernel writes over: its own
/// memory where `writable` says no one else sees it, else a private copy).
struct BoundKernel {
  std::vector<Buffer> inputs; // the buffers behind the refs; contiguous copies live for the call
  std::vector<TensorRef> outs;
};

BoundKernel bindKernelStep(const PlanStep& step, std::vector<TensorRef>& refs,
                           std::vector<Buffer>& slots, const std::vector<bool>& writable,
                           const SlotMemory& memory) {
  BoundKernel k;
  for (size_t j = 0; j < refs.size(); ++j) {
    k.inputs.push_back(slots[static_cast<size_t>(step.inputs[j])]);
    bool overwritten = std::find(step.kernelInPlace.begin(), step.kernelInPlace.end(),
                                 static_cast<int32_t>(j)) != step.kernelInPlace.end();
    if (refs[j].isContiguous() && (!overwritten || writable[static_cast<size_t>(step.inputs[j])]))
      continue;
    k.inputs[j] = allocateBuffer(memory.device(), refs[j].shape, refs[j].dtype);
    memory.device().kernels().copyCast(refs[j], k.inputs[j].ref);
    refs[j] = k.inputs[j].ref;
  }
  for (size_t i = 0; i < step.kernelOutputs.size(); ++i) {
    int32_t over = i < step.kernelInPlace.size() ? step.kernelInPlace[i] : -1;
    Buffer b = over >= 0 ? k.inputs[static_cast<size_t>(over)]
                         : memory(step.kernelOutputs[i], step.kernelTypes[i].first,
                                  step.kernelTypes[i].second);
    k.outs.push_back(b.ref);
    slots[static_cast<size_t>(step.kernelOutputs[i])] = std::move(b);
  }
  return k;
}

const hal::LoadedCode& loadedKernel(const Plan& plan, const PlanStep& step) {
  const KernelTable& table = plan.kernels;
  WEFT_INTERNAL_ASSERT(table.loaded != nullptr &&
                           static_cast<size_t>(step.kernel) < table.kernels.size(),
                       "a kernel step without loaded code");
  return *table.loaded;
}

/// An input of `step` its output can be written over (canWriteOverInput): read here for the last
/// time, held by no one else (not an argument, state, the arena or another slot's view),
/// contiguous with the output's type. -1 if none. (The memory plan does this for arena buffers.)
int32_t reusableInput(const PlanStep& step, const std::vector<Buffer>& slots) {
  for (size_t j = 0; j < step.inputs.size(); ++j) {
    if (!canWriteOverInput(step, j)) continue;
    const int32_t s = step.inputs[j];
    const Buffer& b = slots[static_cast<size_t>(s)];
    if (std::find(step.release.begin(), step.release.end(), s) == step.release.end()) continue;
    if (b.storage.use_count() != 1 || b.ref.dtype != step.dtype || b.ref.shape != step.shape ||
        !b.ref.isContiguous())
      continue;
    // Another input of an index op must not be the same memory (it is a distinct slot, and the
    // storage has one owner, so it is not).
    return s;
  }
  return -1;
}

} // namespace

void KernelTable::load(hal::Device& device) {
  if (kernels.empty() || loadedOn == &device) return;
  std::string refusals;
  for (const hal::CodeObject& c : code) {
    std::string why = device.cannotRun(c);
    if (why.empty()) {
      std::vector<hal::KernelInfo> named = kernels; // as this object names them
      for (size_t i = 0; i < c.symbols.size() && i < named.size(); ++i)
        named[i].symbol = c.symbols[i];
      loaded = device.load(c, named);
      loadedOn = &device;
      return;
    }
    refusals += "; " + c.format + " for '" + c.target + "': " + why;
  }
  WEFT_FAIL(Device, "the plan's generated code has no code object ", device.id().str(),
            " can run (", code.size(), " built", refusals, ")");
}

void checkKernelsOn(const Plan& plan, hal::Device& device) {
  const hal::KernelRegistry& registry = device.kernels();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    WEFT_CHECK(step.kernel >= 0 || registry.find(step.op) != nullptr, Device, "the device ",
               device.id().str(), " has no kernel for ", opName(step.op), " (step ", i,
               " of the plan): this plan cannot run there");
  }
}

std::vector<Buffer> runPlan(hal::Device& device, const Plan& plan, std::span<const Buffer> args,
                            std::span<const Buffer> state) {
  WEFT_CHECK(args.size() == plan.argumentSlots.size(), Value, "run: expected ",
             plan.argumentSlots.size(), " arguments, got ", args.size());
  WEFT_CHECK(state.size() == plan.stateSlots.size(), Value, "run: expected ",
             plan.stateSlots.size(), " state tensors, got ", state.size());
  auto onDevice = [&](const char* what, std::span<const Buffer> values) {
    for (size_t i = 0; i < values.size(); ++i)
      WEFT_CHECK(values[i].storage != nullptr && &values[i].storage->device() == &device, Device,
                 "run: ", what, " ", i, " is on ",
                 values[i].storage != nullptr ? values[i].storage->device().id().str() : "nothing",
                 "; the plan runs on ", device.id().str());
  };
  onDevice("argument", args);
  onDevice("state tensor", state);
  std::vector<Buffer> slots(static_cast<size_t>(plan.numSlots));
  for (size_t i = 0; i < args.size(); ++i)
    slots[static_cast<size_t>(plan.argumentSlots[i])] = args[i];
  for (size_t i = 0; i < state.size(); ++i)
    slots[static_cast<size_t>(plan.stateSlots[i])] = state[i];
  // What a kernel may write over in place: every value the plan computes (the fuse pass proved
  // no one reads it later), and state that is contiguous and shares memory with no other argument
  // or state tensor (which would see the new values too early).
  std::vector<bool> writable(static_cast<size_t>(plan.numSlots), true);
  for (int32_t s : plan.argumentSlots)
    writable[static_cast<size_t>(s)] = false;
  for (size_t i = 0; i < state.size(); ++i) {
    bool alone = state[i].ref.isContiguous();
    auto shares = [&](const Buffer& b) { return &b != &state[i] && b.storage == state[i].storage; };
    for (const Buffer& b : args)
      alone = alone && !shares(b);
    for (const Buffer& b : state)
      alone = alone && !shares(b);
    writable[static_cast<size_t>(plan.stateSlots[i])] = alone;
  }

  const SlotMemory memory(device, plan);
  const hal::KernelRegistry& registry = device.kernels();
  // Only the CPU runs a conv's epilogue inside the conv; other devices run it after.
  const bool epiloguesInside = &device == &hal::cpu();
  std::vector<TensorRef> refs;
  StepProfile* profile = StepProfile::get();
  // Each plan's first run touches its arena's pages for the first time, loads its kernels and
  // allocates workspaces: not counted in the times (its memory is).
  const bool timeSteps = profile != nullptr && !profile->firstRun(&plan);
  auto started = std::chrono::steady_clock::now();
  std::vector<std::string> madeBy; // per slot, with WEFT_PROFILE
  if (profile != nullptr) madeBy.resize(slots.size());
  int64_t processPeak = profile != nullptr ? memoryStats().peakBytes : 0;
  auto timed = [&](std::string_view what) {
    if (profile == nullptr) return;
    auto now = std::chrono::steady_clock::now();
    if (timeSteps)
      profile->add(what, std::chrono::duration<double, std::milli>(now - started).count());
    if (int64_t p = memoryStats().peakBytes; p > processPeak) {
      processPeak = p;
      profile->processPeak(p, what);
    }
    std::vector<std::pair<int64_t, std::string>> live;
    std::vector<const Storage*> counted;
    if (memory.arena() != nullptr) {
      counted.push_back(memory.arena());
      live.emplace_back(static_cast<int64_t>(memory.arena()->nbytes()), "arena (planned)");
    }
    for (const Buffer& b : args)
      counted.push_back(b.storage.get());
    for (const Buffer& b : state)
      counted.push_back(b.storage.get());
    for (size_t s = 0; s < slots.size(); ++s) {
      const Storage* st = slots[s].storage.get();
      if (st == nullptr || std::find(counted.begin(), counted.end(), st) != counted.end()) continue;
      counted.push_back(st);
      live.emplace_back(static_cast<int64_t>(st->nbytes()), madeBy[s]);
    }
    profile->memory(std::move(live));
    started = std::chrono::steady_clock::now();
  };
  const bool onTimeline = timeline::enabled();
  for (size_t index = 0; index < plan.steps.size(); ++index) {
    const PlanStep& step = plan.steps[index];
    const Attrs& attrs = step.attrs;
    std::optional<timeline::Scope> timedStep; // WEFT_PROFILE=trace.json
    if (onTimeline)
      timedStep.emplace("step", step.kernel >= 0 ? "kernel " + shapeString(step.shape)
                                                 : std::string(opName(step.op)));
    refsOf(step, slots, refs);
    if (step.kernel >= 0) {
      WEFT_INTERNAL_ASSERT(!step.afterEachSample, "a conv epilogue with no conv before it");
      BoundKernel k = bindKernelStep(step, refs, slots, writable, memory);
      device.launch(loadedKernel(plan, step), static_cast<size_t>(step.kernel), refs, k.outs);
      for (int32_t s : step.release)
        slots[static_cast<size_t>(s)] = Buffer{};
      if (profile != nullptr)
        for (size_t i = 0; i < step.kernelOutputs.size(); ++i)
          madeBy[static_cast<size_t>(step.kernelOutputs[i])] =
              "kernel " + shapeString(step.kernelTypes[i].second);
      timed(profile != nullptr ? "kernel " + shapeString(step.kernelTypes.at(0).second) : "");
      continue;
    }
    // A conv whose epilogue (the next step, a kernel) runs inside it, sample by sample.
    const PlanStep* epilogue =
        index + 1 < plan.steps.size() && plan.steps[index + 1].afterEachSample
            ? &plan.steps[index + 1]
            : nullptr;
    WEFT_INTERNAL_ASSERT(epilogue == nullptr || step.op == OpCode::Conv, "a conv epilogue after a ",
                         opName(step.op), " step");
    Buffer out;
    if (isViewOp(step.op)) {
      const Buffer& in = slots[static_cast<size_t>(step.inputs[0])];
      if (auto view = computeView(step.op, in.ref.shape, in.ref.strides, attrs))
        out = Buffer{in.storage, applyView(in.ref, *view)};
    }
    const bool copied = out.storage == nullptr;
    if (copied) {
      int32_t over = step.outputStrides.empty() ? reusableInput(step, slots) : -1;
      if (over >= 0) {
        out = slots[static_cast<size_t>(over)]; // released below: `out` becomes its one owner
      } else {
        out = memory(step.output, step.dtype, step.shape);
        if (!step.outputStrides.empty()) out.ref.strides = step.outputStrides; // dense: same bytes
      }
      if (epilogue != nullptr) {
        // The conv's epilogue kernel, bound to the conv's output before it is written, runs over
        // each sample as the conv writes it. The conv's inputs stay held while it reads them.
        std::vector<Buffer> held;
        for (int32_t s : step.inputs)
          held.push_back(slots[static_cast<size_t>(s)]);
        slots[static_cast<size_t>(step.output)] = out;
        std::vector<TensorRef> epilogueRefs;
        refsOf(*epilogue, slots, epilogueRefs);
        BoundKernel k = bindKernelStep(*epilogue, epilogueRefs, slots, writable, memory);
        const hal::LoadedCode& code = loadedKernel(plan, *epilogue);
        const auto kernel = static_cast<size_t>(epilogue->kernel);
        if (out.ref.numel() > 0 && epiloguesInside) {
          kernels::convThen(refs, out.ref, attrs, [&](int64_t n0, int64_t n1) {
            hal::cpuLaunchRows(code, kernel, epilogueRefs, k.outs, n0, n1);
          });
        } else { // after the conv (with nothing to convolve, the kernel's other outputs need it)
          if (out.ref.numel() > 0) registry.run(step.op, refs, out.ref, attrs);
          device.launch(code, kernel, epilogueRefs, k.outs);
        }
      } else if (out.ref.numel() > 0 || readsIndexValues(step.op)) {
        registry.run(step.op, refs, out.ref, attrs);
      }
    }
    slots[static_cast<size_t>(step.output)] = std::move(out);
    for (int32_t s : step.release)
      slots[static_cast<size_t>(s)] = Buffer{};
    if (epilogue != nullptr) {
      for (int32_t s : epilogue->release)
        slots[static_cast<size_t>(s)] = Buffer{};
      if (profile != nullptr)
        for (int32_t s : epilogue->kernelOutputs)
          madeBy[static_cast<size_t>(s)] = "conv epilogue " + shapeString(step.shape);
      ++index; // ran inside this step
    }
    if (profile != nullptr) // a view op that had to copy says so
      madeBy[static_cast<size_t>(step.output)] = std::string(opName(step.op)) +
                                                 (isViewOp(step.op) && copied ? " (copy) " : " ") +
                                                 shapeString(step.shape);
    timed(profile != nullptr ? madeBy[static_cast<size_t>(step.output)] +
                                   (epilogue != nullptr ? " + epilogue" : "")
                             : "");
  }

  std::vector<Buffer> outputs;
  for (int32_t s : plan.outputSlots)
    outputs.push_back(slots[static_cast<size_t>(s)]);
  // Outputs that look into state memory keep the values from before the update.
  for (Buffer& o : outputs)
    for (const auto& [stateIndex, slot] : plan.stateUpdates)
      if (o.storage == state[static_cast<size_t>(stateIndex)].storage) {
        Buffer copy = allocateBuffer(device, o.ref.shape, o.ref.dtype);
        registry.copyCast(o.ref, copy.ref);
        o = copy;
      }
  // New state values are staged before any is written: one update may read another's old value.
  std::vector<Buffer> staged;
  for (const auto& [stateIndex, slot] : plan.stateUpdates) {
    const Buffer& v = slots[static_cast<size_t>(slot)];
    if (v.ref.sameStart(state[static_cast<size_t>(stateIndex)].ref) &&
        v.ref.strides == state[static_cast<size_t>(stateIndex)].ref.strides) {
      staged.push_back(Buffer{}); // written in place by its kernel
      continue;
    }
    bool aliasesState = false;
    for (const Buffer& s : state)
      aliasesState = aliasesState || v.storage == s.storage;
    if (aliasesState) {
      Buffer copy = allocateBuffer(device, v.ref.shape, v.ref.dtype);
      registry.copyCast(v.ref, copy.ref);
      staged.push_back(copy);
    } else {
      staged.push_back(v);
    }
  }
  for (size_t i = 0; i < plan.stateUpdates.size(); ++i) {
    const Buffer& target = state[static_cast<size_t>(plan.stateUpdates[i].first)];
    if (staged[i].storage != nullptr) registry.copyCast(staged[i].ref, target.ref);
    target.storage->bumpVersion();
  }
  timed("(outputs, state writes)");
  return outputs;
}

} // namespace weft
