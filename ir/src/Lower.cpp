// Graph -> Plan: slots are value ids; a step releases the values it reads for the last time.
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <sstream>

namespace weft::ir {
namespace {

/// One step to emit: a node, or a fused group (at its first node).
struct Unit {
  int32_t node = -1;
  const FusedKernel* fused = nullptr;
  std::vector<ValueId> reads, writes;
  bool afterEachSample = false; // runs inside the conv before it (PlanStep::afterEachSample)
};

std::vector<Unit> unitsOf(const Graph& g, std::span<const FusedKernel> fused) {
  size_t n = g.nodes().size();
  std::vector<const FusedKernel*> coreOf(n, nullptr);
  std::vector<bool> inlinedSomewhere(n, false);
  for (const FusedKernel& f : fused) {
    for (int32_t i : f.group.nodes)
      coreOf[static_cast<size_t>(i)] = &f;
    if (f.kernel >= 0)
      for (int32_t i : f.group.leaves)
        inlinedSomewhere[static_cast<size_t>(i)] = true;
  }
  // A leaf runs on its own only if something outside the groups that inline it reads it.
  std::vector<bool> standalone(n, true);
  for (size_t i = 0; i < n; ++i)
    if (inlinedSomewhere[i]) standalone[i] = false;
  auto needed = [&](ValueId v) {
    int32_t p = g.value(v).producer;
    if (p >= 0) standalone[static_cast<size_t>(p)] = true;
  };
  for (ValueId v : g.outputs())
    needed(v);
  for (const StateUpdate& u : g.stateUpdates())
    needed(u.newValue);
  for (size_t j = 0; j < n; ++j) {
    const FusedKernel* f = coreOf[j];
    for (ValueId v : g.nodes()[j].operands) {
      int32_t p = g.value(v).producer;
      if (p < 0 || !inlinedSomewhere[static_cast<size_t>(p)]) continue;
      bool inlinedHere =
          f != nullptr && f->kernel >= 0 &&
          std::find(f->group.leaves.begin(), f->group.leaves.end(), p) != f->group.leaves.end();
      if (!inlinedHere) standalone[static_cast<size_t>(p)] = true;
    }
  }
  std::vector<Unit> units;
  std::vector<bool> emitted(n, false);
  auto emitNode = [&](size_t i) {
    if (emitted[i]) return;
    emitted[i] = true;
    const Node& node = g.nodes()[i];
    units.push_back(Unit{static_cast<int32_t>(i), nullptr, node.operands, {node.result}});
  };
  for (size_t i = 0; i < n; ++i) {
    const FusedKernel* f = coreOf[i];
    if (f != nullptr) {
      if (static_cast<int32_t>(i) != f->group.nodes.front()) continue;
      if (f->kernel >= 0) {
        units.push_back(Unit{-1, f, f->group.inputs, f->group.outputs});
        continue;
      }
      // No kernel: its leaves (computed from values ready here) and nodes, here, in order.
      for (int32_t j : f->group.leaves)
        emitNode(static_cast<size_t>(j));
      for (int32_t j : f->group.nodes)
        emitNode(static_cast<size_t>(j));
      continue;
    }
    if (standalone[i]) emitNode(i);
  }
  return units;
}

/// Runs a kernel inside the conv before it, sample by sample (PlanStep::afterEachSample: the conv's
/// bias and activation while each sample is in cache), where the kernel is over the conv's result
/// shape (its rows the samples; not a GEMM's, whose rows are tiles, nor a horizontal kernel),
/// reads that result as it is (through no view leaf, which could read other samples), writes over
/// no memory the conv reads (through views too), and reads nothing else computed after the conv
/// but views of values ready before it, which move before the conv.
void markConvEpilogues(const Graph& g, std::vector<Unit>& units) {
  auto reads = [](const Unit& u, ValueId v) {
    return std::find(u.reads.begin(), u.reads.end(), v) != u.reads.end();
  };
  for (size_t i = 0; i < units.size(); ++i) {
    if (units[i].node < 0) continue;
    const Node& conv = g.nodes()[static_cast<size_t>(units[i].node)];
    const ValueId y = conv.result;
    const TensorType& type = g.type(y);
    if (conv.op != OpCode::Conv || type.shape.empty() ||
        (type.dtype != DType::Float32 && type.dtype != DType::Float64))
      continue;
    size_t j = i + 1;
    while (j < units.size() && units[j].node >= 0 &&
           isViewOp(g.nodes()[static_cast<size_t>(units[j].node)].op) && !reads(units[j], y))
      ++j;
    if (j == units.size() || units[j].fused == nullptr || units[j].fused->kernel < 0) continue;
    const FusionGroup& grp = units[j].fused->group;
    if (grp.shape != type.shape || !grp.parts.empty() ||
        g.nodes()[static_cast<size_t>(grp.nodes.front())].op == OpCode::MatMul ||
        !reads(units[j], y))
      continue;
    bool ok = true;
    for (int32_t leaf : grp.leaves) {
      const auto& operands = g.nodes()[static_cast<size_t>(leaf)].operands;
      ok = ok && std::find(operands.begin(), operands.end(), y) == operands.end();
    }
    // The memory a value views (through view nodes) must not be what the kernel writes over.
    auto root = [&](ValueId v) {
      for (int32_t p = g.value(v).producer;
           p >= 0 && isViewOp(g.nodes()[static_cast<size_t>(p)].op); p = g.value(v).producer)
        v = g.nodes()[static_cast<size_t>(p)].operands[0];
      return v;
    };
    for (int32_t k : grp.inPlace)
      for (ValueId operand : conv.operands)
        ok = ok && (k < 0 || root(grp.inputs[static_cast<size_t>(k)]) != root(operand));
    if (!ok) continue;
    // The views between move before the conv (none reads its result), the kernel runs inside it.
    std::rotate(units.begin() + static_cast<std::ptrdiff_t>(i),
                units.begin() + static_cast<std::ptrdiff_t>(i + 1),
                units.begin() + static_cast<std::ptrdiff_t>(j));
    units[j].afterEachSample = true;
    i = j;
  }
}

/// Gives a float matmul whose only reader is a permute (not an output or a state's new value) the
/// layout that makes the permute's result contiguous, where BLAS can write it there (the permute
/// puts the product's columns or rows innermost, so each product's rows or columns are
/// contiguous): the permute is then a contiguous view, and a reshape of it (an attention's head
/// merge) a view instead of a copy.
void assignMatMulLayouts(Plan& plan, const std::vector<bool>& keep) {
  const auto numSlots = static_cast<size_t>(plan.numSlots);
  std::vector<int32_t> readers(numSlots, 0);
  std::vector<size_t> readBy(numSlots, 0);
  for (size_t i = 0; i < plan.steps.size(); ++i)
    for (int32_t v : plan.steps[i].inputs) {
      ++readers[static_cast<size_t>(v)];
      readBy[static_cast<size_t>(v)] = i;
    }
  for (PlanStep& step : plan.steps) {
    const auto out = static_cast<size_t>(step.output);
    if (step.kernel >= 0 || step.op != OpCode::MatMul || step.output < 0 || keep[out] ||
        readers[out] != 1 || (step.dtype != DType::Float32 && step.dtype != DType::Float64))
      continue;
    const PlanStep& reader = plan.steps[readBy[out]];
    const Shape* dims = reader.attrs.tryGet<Shape>("dims"); // a permutation: the graph verified
    const auto rank = static_cast<int64_t>(step.shape.size());
    if (reader.kernel >= 0 || reader.op != OpCode::Permute || dims == nullptr ||
        (dims->back() != rank - 1 && dims->back() != rank - 2))
      continue;
    Shape permuted;
    for (int64_t d : *dims)
      permuted.push_back(step.shape[static_cast<size_t>(d)]);
    const Shape dense = contiguousStrides(permuted);
    TensorRef laid{nullptr, step.dtype, step.shape, Shape(step.shape.size(), 0)};
    for (size_t k = 0; k < dims->size(); ++k)
      laid.strides[static_cast<size_t>((*dims)[k])] = dense[k];
    if (!laid.isContiguous()) step.outputStrides = laid.strides;
  }
}

} // namespace

Plan lowerToPlan(const Graph& g, std::span<const FusedKernel> fused, KernelTable kernels) {
  Plan plan = lowerSteps(g, fused, std::move(kernels));
  planMemory(plan);
  return plan;
}

Executable executableOf(const Graph& g, Plan plan) {
  auto describe = [&](const std::vector<ValueId>& values, const char* prefix) {
    std::vector<ExecutableValue> r;
    for (size_t i = 0; i < values.size(); ++i) {
      const Value& v = g.value(values[i]);
      r.push_back(
          {v.name.empty() ? prefix + std::to_string(i) : v.name, v.type.dtype, v.type.shape});
    }
    return r;
  };
  Executable e;
  e.arguments = describe(g.arguments(), "a");
  e.state = describe(g.state(), "s");
  e.outputs = describe(g.outputs(), "out");
  e.plan = std::move(plan);
  return e;
}

Plan lowerSteps(const Graph& g, std::span<const FusedKernel> fused, KernelTable kernels) {
  Plan plan;
  plan.kernels = std::move(kernels);
  plan.numSlots = static_cast<int32_t>(g.values().size());
  plan.argumentSlots.assign(g.arguments().begin(), g.arguments().end());
  plan.stateSlots.assign(g.state().begin(), g.state().end());
  plan.outputSlots.assign(g.outputs().begin(), g.outputs().end());
  for (const StateUpdate& u : g.stateUpdates()) {
    auto index = std::find(g.state().begin(), g.state().end(), u.state) - g.state().begin();
    plan.stateUpdates.emplace_back(static_cast<int32_t>(index), u.newValue);
  }
  std::vector<Unit> units = unitsOf(g, fused);
  markConvEpilogues(g, units);
  // Last reader of each value; values the caller receives are never released.
  std::vector<int64_t> lastUse(g.values().size(), -1);
  for (size_t i = 0; i < units.size(); ++i)
    for (ValueId v : units[i].reads)
      lastUse[static_cast<size_t>(v)] = static_cast<int64_t>(i);
  const std::vector<bool> keep = g.returnedValues();
  for (size_t i = 0; i < units.size(); ++i) {
    const Unit& u = units[i];
    PlanStep step;
    step.inputs.assign(u.reads.begin(), u.reads.end());
    if (u.fused != nullptr) {
      step.op = g.nodes()[static_cast<size_t>(u.fused->group.nodes.front())].op;
      step.kernel = u.fused->kernel;
      for (ValueId v : u.writes) {
        step.kernelOutputs.push_back(v);
        step.kernelTypes.emplace_back(g.type(v).dtype, g.type(v).shape);
      }
      step.kernelInPlace = u.fused->group.inPlace;
      step.kernelInPlace.resize(step.kernelOutputs.size(), -1);
      step.afterEachSample = u.afterEachSample;
    } else {
      const Node& n = g.nodes()[static_cast<size_t>(u.node)];
      step.op = n.op;
      step.output = n.result;
      step.attrs = n.attrs;
      step.dtype = g.type(n.result).dtype;
      step.shape = g.type(n.result).shape;
    }
    for (ValueId v : u.reads)
      if (lastUse[static_cast<size_t>(v)] == static_cast<int64_t>(i) &&
          !keep[static_cast<size_t>(v)] &&
          std::find(step.release.begin(), step.release.end(), v) == step.release.end())
        step.release.push_back(v);
    for (ValueId v : u.writes)
      if (lastUse[static_cast<size_t>(v)] < 0 && !keep[static_cast<size_t>(v)])
        step.release.push_back(v); // never read: free at once
    plan.steps.push_back(std::move(step));
  }
  assignMatMulLayouts(plan, keep);
  return plan;
}

std::string printPlan(const Graph& g, const Plan& plan) {
  const std::vector<std::string> names = valueNames(g);
  auto name = [&](int32_t slot) {
    return slot >= 0 && static_cast<size_t>(slot) < names.size()
               ? "%" + names[static_cast<size_t>(slot)]
               : "%<slot " + std::to_string(slot) + ">";
  };
  auto placed = [&](int32_t slot) {
    std::string s = name(slot);
    if (static_cast<size_t>(slot) < plan.arenaOffset.size() &&
        plan.arenaOffset[static_cast<size_t>(slot)] >= 0)
      s += " at " + std::to_string(plan.arenaOffset[static_cast<size_t>(slot)]);
    return s;
  };
  auto list = [&](std::ostream& os, const std::vector<int32_t>& slots) {
    for (size_t i = 0; i < slots.size(); ++i)
      os << (i ? ", " : "") << name(slots[i]);
  };
  std::ostringstream os;
  os << "plan @" << g.name() << ": " << plan.steps.size() << " steps, arena " << plan.arenaBytes
     << " bytes\n";
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    os << "  " << i << ": ";
    if (s.kernel >= 0) {
      os << "kernel " << s.kernel << "(";
      list(os, s.inputs);
      os << ") -> ";
      for (size_t o = 0; o < s.kernelOutputs.size(); ++o) {
        os << (o ? ", " : "") << placed(s.kernelOutputs[o]);
        int32_t over = o < s.kernelInPlace.size() ? s.kernelInPlace[o] : -1;
        if (over >= 0) os << " over " << name(s.inputs[static_cast<size_t>(over)]);
      }
      if (s.afterEachSample) os << " per sample inside step " << i - 1;
    } else {
      os << opName(s.op) << "(";
      list(os, s.inputs);
      os << ") -> " << placed(s.output);
      if (!s.outputStrides.empty()) os << " strides " << shapeString(s.outputStrides);
    }
    if (!s.release.empty()) {
      os << " release(";
      list(os, s.release);
      os << ")";
    }
    os << "\n";
  }
  return os.str();
}

} // namespace weft::ir
