// The memory planner: buffer lifetimes over a plan's steps, and one arena they share.
#include "weft/runtime/Plan.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

namespace weft {

bool canWriteOverInput(const PlanStep& step, size_t j) {
  // Generated kernels write over an input only where the fuse pass marked it (kernelInPlace):
  // their code stores through that input's memref.
  if (step.kernel >= 0) return false;
  if (isElementwise(step.op) && opInfo(step.op).kind != OpKind::Identity) return true;
  return j == 0 && (opInfo(step.op).kind == OpKind::Scatter || step.op == OpCode::IndexAdd);
}

bool isConvEpilogue(const Plan& plan, size_t i) {
  if (i == 0 || i >= plan.steps.size()) return false;
  const PlanStep &conv = plan.steps[i - 1], &k = plan.steps[i];
  if (conv.kernel >= 0 || conv.op != OpCode::Conv || !conv.outputStrides.empty() ||
      (conv.dtype != DType::Float32 && conv.dtype != DType::Float64) || conv.shape.empty() ||
      k.kernel < 0 || static_cast<size_t>(k.kernel) >= plan.kernels.kernels.size() ||
      plan.kernels.kernels[static_cast<size_t>(k.kernel)].rows != conv.shape[0] ||
      std::find(k.inputs.begin(), k.inputs.end(), conv.output) == k.inputs.end())
    return false;
  // The slot whose memory `slot` views, following view steps back from the conv.
  auto root = [&](int32_t slot) {
    for (size_t j = i - 1; j-- > 0;) {
      const PlanStep& s = plan.steps[j];
      if (s.kernel < 0 && s.output == slot && isViewOp(s.op) && !s.inputs.empty())
        slot = s.inputs[0];
    }
    return slot;
  };
  auto among = [](const std::vector<int32_t>& slots, int32_t s) {
    return std::find(slots.begin(), slots.end(), s) != slots.end();
  };
  std::vector<int32_t> read; // the memory the conv reads
  for (int32_t s : conv.inputs)
    read.push_back(root(s));
  // The kernel writes fresh slots, or over its inputs but for memory the conv reads.
  for (size_t o = 0; o < k.kernelOutputs.size(); ++o) {
    const int32_t out = k.kernelOutputs[o],
                  over = o < k.kernelInPlace.size() ? k.kernelInPlace[o] : -1;
    if (over >= 0 && static_cast<size_t>(over) < k.inputs.size()) {
      if (among(read, root(k.inputs[static_cast<size_t>(over)]))) return false;
    } else if (among(conv.inputs, out) || among(k.inputs, out) || out == conv.output) {
      return false;
    }
  }
  return true;
}

bool isDenseLayout(const Shape& shape, const Shape& strides) {
  if (strides.size() != shape.size()) return false;
  if (numel(shape) == 0) return true; // nothing is written
  std::vector<size_t> order(shape.size());
  std::iota(order.begin(), order.end(), size_t{0});
  // Innermost first; dims of one element may hold any stride but go first.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if ((shape[a] == 1) != (shape[b] == 1)) return shape[a] == 1;
    return strides[a] != strides[b] ? strides[a] < strides[b] : a < b;
  });
  int64_t expected = 1;
  for (size_t d : order) {
    if (shape[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

namespace {

constexpr int64_t kAlign = 64;

int64_t alignedBytes(DType dtype, const Shape& shape) {
  int64_t bytes = numel(shape) * static_cast<int64_t>(elementSize(dtype));
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

} // namespace

void planMemory(Plan& plan) {
  const auto numSlots = static_cast<size_t>(plan.numSlots);
  const auto end = static_cast<int64_t>(plan.steps.size()); // after the last step
  // Per slot: the buffer (unit) it lives in, -1 for unplanned; per unit: bytes and lifetime.
  std::vector<int32_t> unitOf(numSlots, -1);
  struct Unit {
    int64_t bytes = 0, first = 0, last = 0;
    bool escapes = false;
    Shape shape; // as written, with elements of `elementBytes`
    size_t elementBytes = 0;
    bool laidOut = false; // written with PlanStep::outputStrides: not row-major
  };
  std::vector<Unit> units;
  std::vector<bool> written(numSlots, false); // slots a step writes (a whole buffer, not a view)
  auto use = [&](int32_t slot, int64_t at) {
    if (slot < 0 || static_cast<size_t>(slot) >= numSlots) return;
    int32_t u = unitOf[static_cast<size_t>(slot)];
    if (u >= 0)
      units[static_cast<size_t>(u)].last = std::max(units[static_cast<size_t>(u)].last, at);
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    // A conv's epilogue runs inside the conv (the step before it): what it writes lives from
    // there, clear of the memory the conv reads.
    const auto at = static_cast<int64_t>(step.afterEachSample && i > 0 ? i - 1 : i);
    for (int32_t s : step.inputs)
      use(s, at);
    auto fresh = [&](int32_t slot, DType dtype, const Shape& shape) {
      if (slot < 0 || static_cast<size_t>(slot) >= numSlots) return;
      written[static_cast<size_t>(slot)] = true;
      unitOf[static_cast<size_t>(slot)] = static_cast<int32_t>(units.size());
      units.push_back({alignedBytes(dtype, shape), at, at, false, shape, elementSize(dtype)});
    };
    if (step.kernel >= 0) {
      for (size_t k = 0; k < step.kernelOutputs.size() && k < step.kernelTypes.size(); ++k) {
        const int32_t over = k < step.kernelInPlace.size() ? step.kernelInPlace[k] : -1;
        const int32_t s = step.kernelOutputs[k];
        if (over < 0) {
          fresh(s, step.kernelTypes[k].first, step.kernelTypes[k].second);
        } else if (s >= 0 && static_cast<size_t>(s) < numSlots &&
                   static_cast<size_t>(over) < step.inputs.size()) {
          // written over input `over` (a state's memory, or a planned buffer it continues)
          const int32_t in = step.inputs[static_cast<size_t>(over)];
          unitOf[static_cast<size_t>(s)] =
              in >= 0 && static_cast<size_t>(in) < numSlots ? unitOf[static_cast<size_t>(in)] : -1;
        }
      }
      continue;
    }
    if (step.output < 0 || static_cast<size_t>(step.output) >= numSlots) continue;
    if (isViewOp(step.op)) { // a view lives in its input's buffer and keeps it alive
      if (!step.inputs.empty() && step.inputs[0] >= 0 &&
          static_cast<size_t>(step.inputs[0]) < numSlots)
        unitOf[static_cast<size_t>(step.output)] = unitOf[static_cast<size_t>(step.inputs[0])];
      continue;
    }
    // A buffer of its own; whether it continues an input's (in place) is decided below, once
    // every reader is known.
    fresh(step.output, step.dtype, step.shape);
    units.back().laidOut = !step.outputStrides.empty();
  }
  for (int32_t s : plan.outputSlots)
    if (s >= 0 && static_cast<size_t>(s) < numSlots && unitOf[static_cast<size_t>(s)] >= 0)
      units[static_cast<size_t>(unitOf[static_cast<size_t>(s)])].escapes = true;
  for (const auto& [index, slot] : plan.stateUpdates)
    use(slot, end); // copied into the state after the last step

  // In place: a step's output shares the buffer of an input whose unit ends at this step, has the
  // same shape and element size and is planned (units merged: the input's unit takes the output's
  // lifetime).
  std::vector<int32_t> mergedInto(units.size());
  std::iota(mergedInto.begin(), mergedInto.end(), 0);
  auto rootOf = [&](int32_t u) {
    while (mergedInto[static_cast<size_t>(u)] != u)
      u = mergedInto[static_cast<size_t>(u)];
    return u;
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& step = plan.steps[i];
    std::vector<int32_t> outs; // the buffers this step writes
    if (step.kernel >= 0) {
      for (size_t k = 0; k < step.kernelOutputs.size(); ++k)
        if (k >= step.kernelInPlace.size() || step.kernelInPlace[k] < 0)
          outs.push_back(step.kernelOutputs[k]);
    } else if (!isViewOp(step.op)) {
      outs.push_back(step.output);
    }
    for (int32_t slot : outs) {
      if (slot < 0 || static_cast<size_t>(slot) >= numSlots) continue;
      const int32_t out = unitOf[static_cast<size_t>(slot)];
      if (out < 0 || rootOf(out) != out) continue;
      for (size_t j = 0; j < step.inputs.size(); ++j) {
        const int32_t s = step.inputs[j];
        if (s < 0 || static_cast<size_t>(s) >= numSlots || !canWriteOverInput(step, j)) continue;
        const int32_t in = unitOf[static_cast<size_t>(s)];
        if (in < 0 || units[static_cast<size_t>(in)].laidOut) continue; // not element i at i
        const int32_t r = rootOf(in);
        Unit& u = units[static_cast<size_t>(r)];
        // Ends here (read by nothing later, no other input of this step is the same buffer).
        bool alone = true;
        for (size_t k = 0; k < step.inputs.size(); ++k)
          if (k != j && step.inputs[k] >= 0 && static_cast<size_t>(step.inputs[k]) < numSlots &&
              unitOf[static_cast<size_t>(step.inputs[k])] >= 0 &&
              rootOf(unitOf[static_cast<size_t>(step.inputs[k])]) == r)
            alone = false;
        // Element i of the output is written where element i of the input was read: the same
        // shape (no broadcast) and element size, the input's own buffer (not a view into it).
        const Unit& in0 = units[static_cast<size_t>(in)];
        const Unit& o = units[static_cast<size_t>(out)];
        if (!alone || u.escapes || u.last != static_cast<int64_t>(i) || in0.shape != o.shape ||
            in0.elementBytes != o.elementBytes || !written[static_cast<size_t>(s)])
          continue;
        if (o.escapes) {
          // The output leaves the call: the chain ending in it gets memory of its own (outside
          // the arena), which the interpreter hands on step to step and finally to the caller.
          if (step.kernel < 0) u.escapes = true;
          break;
        }
        u.last = o.last;
        mergedInto[static_cast<size_t>(out)] = r;
        break;
      }
    }
  }

  // Place the roots in some order, each where it fits clear of every placed root whose life
  // overlaps its own: at the lowest such offset, or in the smallest gap it fits. Orders and rules
  // tried: largest first (first fit, best fit), earliest first (as a running allocator would),
  // largest size x life first (best fit); the smallest arena wins.
  std::vector<int32_t> roots;
  for (size_t u = 0; u < units.size(); ++u)
    if (rootOf(static_cast<int32_t>(u)) == static_cast<int32_t>(u) && !units[u].escapes)
      roots.push_back(static_cast<int32_t>(u));
  auto place = [&](std::vector<int32_t> order, auto before, bool bestFit,
                   std::vector<int64_t>& offset) {
    std::stable_sort(order.begin(), order.end(), before);
    offset.assign(units.size(), -1);
    std::vector<int32_t> placed;
    int64_t arena = 0;
    for (int32_t r : order) {
      const Unit& u = units[static_cast<size_t>(r)];
      std::vector<std::pair<int64_t, int64_t>> taken; // [begin, end) of overlapping lives
      for (int32_t p : placed) {
        const Unit& q = units[static_cast<size_t>(p)];
        if (q.first <= u.last && u.first <= q.last)
          taken.emplace_back(offset[static_cast<size_t>(p)],
                             offset[static_cast<size_t>(p)] + q.bytes);
      }
      std::sort(taken.begin(), taken.end());
      int64_t at = -1, gap = INT64_MAX, clear = 0; // `clear`: the end of what is taken so far
      for (const auto& [b, e] : taken) {
        if (b - clear >= u.bytes && (!bestFit || b - clear < gap)) {
          at = clear;
          gap = b - clear;
          if (!bestFit) break;
        }
        clear = std::max(clear, e);
      }
      if (at < 0) at = clear; // after everything
      offset[static_cast<size_t>(r)] = at;
      arena = std::max(arena, at + u.bytes);
      placed.push_back(r);
    }
    return arena;
  };
  auto bySize = [&](int32_t a, int32_t b) {
    return units[static_cast<size_t>(a)].bytes > units[static_cast<size_t>(b)].bytes;
  };
  auto byStart = [&](int32_t a, int32_t b) {
    return units[static_cast<size_t>(a)].first < units[static_cast<size_t>(b)].first;
  };
  auto byArea = [&](int32_t a, int32_t b) {
    const Unit &x = units[static_cast<size_t>(a)], &y = units[static_cast<size_t>(b)];
    return x.bytes * (x.last - x.first + 1) > y.bytes * (y.last - y.first + 1);
  };
  std::vector<int64_t> offset, candidate;
  int64_t arena = place(roots, bySize, false, offset);
  auto tryOrder = [&](auto before, bool bestFit) {
    int64_t size = place(roots, before, bestFit, candidate);
    if (size < arena) {
      arena = size;
      offset.swap(candidate);
    }
  };
  // Each placement is quadratic in the buffers: the alternatives only where that stays cheap.
  if (roots.size() <= 4096) {
    tryOrder(bySize, true);
    tryOrder(byStart, false);
    tryOrder(byStart, true);
    tryOrder(byArea, true);
  }
  plan.arenaBytes = arena;
  plan.arenaOffset.assign(numSlots, -1);
  for (size_t s = 0; s < numSlots; ++s) {       // the buffers steps write (views follow their base)
    if (!written[s] || unitOf[s] < 0) continue; // (a crafted plan may write a slot twice)
    const int32_t u = unitOf[s], r = rootOf(u);
    if (!units[static_cast<size_t>(r)].escapes && !units[static_cast<size_t>(u)].escapes)
      plan.arenaOffset[s] = offset[static_cast<size_t>(r)];
  }
}

} // namespace weft
