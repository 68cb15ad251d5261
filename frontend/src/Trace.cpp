// The tracer: records ops as graph nodes, functionalizes in-place writes to real tensors, and
// turns backward() into graph autodiff.
#include "Trace.h"

#include "weft/Autograd.h"
#include "weft/ir/Lower.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Kernels.h"

namespace weft {
namespace {
thread_local TraceContext* tTrace = nullptr;

ir::Location callerLocation() {
  const std::source_location* loc = CallSite::current();
  if (loc == nullptr || loc->line() == 0) return {};
  return ir::Location{loc->file_name(), static_cast<int>(loc->line())};
}
} // namespace

TraceContext* currentTrace() {
  return tTrace;
}

TraceScope::TraceScope(TraceContext* tc) : prev_(tTrace) {
  tTrace = tc;
}
TraceScope::~TraceScope() {
  tTrace = prev_;
}

void checkNotTraced(const Tensor& t, const char* what) {
  if (t.defined() && t.impl()->trace != nullptr)
    WEFT_FAIL(
        Value, what,
        ": cannot read the value of a tensor inside a traced or compiled function: the ops are "
        "recorded, not run, so values are unknown there. Move this read (and any branch on it) out "
        "of the "
        "compiled function, or compile with CompileOptions().specialize_on_values()");
}

std::vector<Buffer> buffersOf(const std::vector<Tensor>& tensors) {
  std::vector<Buffer> buffers;
  for (const Tensor& t : tensors)
    buffers.push_back(Buffer{t.impl()->storage, t.ref()}); // ref() rejects traced tensors
  return buffers;
}

Tensor readValue(const Tensor& t, const char* what) {
  TraceContext* tc = currentTrace();
  if (tc == nullptr || !t.defined()) return t;
  // Inside a trace every read is of the value at this point of the function, for this call: a real
  // tensor may have been written by the trace, and any value read becomes part of the program.
  if (!tc->specialize) {
    checkNotTraced(t, what);
    WEFT_FAIL(Value, what,
              ": reading a tensor's value inside a traced or compiled function bakes it into the "
              "compiled program. Move the read out of the function, or compile with "
              "CompileOptions().specialize_on_values() to guard on it");
  }
  return tc->evaluate(t);
}

Tensor TraceContext::evaluate(const Tensor& t) {
  ir::ValueId v = valueOf(t);
  // The graph so far, with just this value as output; state is read, not written.
  ir::Graph g = graph;
  g.mutableOutputs() = {v};
  g.mutableStateUpdates().clear();
  passes::PassManager pm;
  pm.add(passes::createPass("dce"));
  auto r = pm.run(g);
  WEFT_INTERNAL_ASSERT(static_cast<bool>(r), r ? "" : r.diagnostic().message);
  Buffer out = runPlan(ir::lowerToPlan(g), buffersOf(realArgs), buffersOf(state))[0];
  TraceScope paused(nullptr); // the value is real, not another node
  Tensor value = zeros(out.ref.shape, out.ref.dtype);
  copyCast(out.ref, value.ref());
  guards.emplace_back(v, value);
  return value;
}

ir::ValueId TraceContext::valueOf(const Tensor& t) {
  const TensorImpl* impl = t.impl().get();
  if (impl->trace == this) return impl->traceValue;
  WEFT_CHECK(impl->trace == nullptr, Value, "a tensor from another trace was used inside this one");
  if (auto it = stateIndex.find(impl); it != stateIndex.end()) return current[it->second];
  WEFT_CHECK(impl->storage != nullptr, Value,
             "a metadata-only tensor was used inside a traced function");
  size_t index = state.size();
  ir::ValueId v = graph.addState({impl->dtype, impl->shape}, "s" + std::to_string(index));
  state.push_back(t);
  current.push_back(v);
  stateIndex[impl] = index;
  gradBefore.push_back(t.grad());
  return v;
}

Tensor TraceContext::traced(ir::ValueId v) {
  const ir::TensorType& type = graph.type(v);
  auto impl = std::make_shared<TensorImpl>(nullptr, type.shape, contiguousStrides(type.shape), 0,
                                           type.dtype);
  impl->trace = this;
  impl->traceValue = v;
  return Tensor(impl);
}

Tensor TraceContext::record(OpCode op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                            const ir::TensorType& type) {
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : inputs)
    ids.push_back(valueOf(t));
  ir::Location loc = callerLocation();
  ir::ValueId v = graph.addNode(op, std::move(ids), attrs, type, loc);
  if (!is_grad_enabled() && isFloating(type.dtype) &&
      opInfo(op).differentiable) // no_grad: a constant for autodiff
    v = graph.addNode(OpCode::StopGradient, {v}, {}, type, loc);
  return traced(v);
}

void TraceContext::assign(Tensor& self, const Tensor& result, const char* op) {
  WEFT_CHECK(self.impl()->viewBase == nullptr || self.impl()->trace == this, Value, op,
             ": in-place writes to a view of a real tensor are not supported inside a traced "
             "function; write to "
             "the tensor itself");
  Tensor r = result.dtype() == self.dtype() ? result : cast(result, self.dtype());
  ir::ValueId v = valueOf(r);
  if (self.impl()->trace == this) {
    self.impl()->traceValue = v;
    return;
  }
  valueOf(self); // capture it, so its new value is written back after each call
  current[stateIndex.at(self.impl().get())] = v;
}

void TraceContext::backward(const Tensor& root, const Tensor& gradient) {
  usedAutodiff = true;
  WEFT_CHECK(root.numel() == 1 || gradient.defined(), Value,
             "grad can be implicitly created only for scalar outputs "
             "(output has shape ",
             shapeString(root.sizes()), ")");
  // Differentiate with respect to every captured leaf that requires grad, at the value it has now.
  std::vector<size_t> leaves;
  std::vector<ir::ValueId> wrt;
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].impl()->requiresGrad) {
      leaves.push_back(i);
      wrt.push_back(current[i]);
    }
  ir::ValueId seed = gradient.defined() ? valueOf(gradient) : ir::kNoValue;
  auto grads = passes::appendGradients(graph, valueOf(root), wrt, seed, customRules());
  if (!grads) throwError(grads.diagnostic().kind, grads.diagnostic().message);
  for (size_t k = 0; k < leaves.size(); ++k) {
    ir::ValueId g = grads.value()[k];
    if (g == ir::kNoValue) continue;
    Tensor leaf = state[leaves[k]]; // a handle: capturing `prev` below may grow `state`
    Tensor prev = leaf.grad();
    Tensor add = traced(g);
    leaf.set_grad(prev.defined() ? prev + add : add); // accumulates, as eager backward does
  }
}

std::vector<Tensor> TraceContext::grad(const Tensor& output, const std::vector<Tensor>& inputs,
                                       const Tensor& gradOutput) {
  usedAutodiff = true;
  std::vector<ir::ValueId> wrt;
  for (const Tensor& t : inputs)
    wrt.push_back(valueOf(t));
  ir::ValueId seed = gradOutput.defined() ? valueOf(gradOutput) : ir::kNoValue;
  auto grads = passes::appendGradients(graph, valueOf(output), wrt, seed, customRules());
  if (!grads) throwError(grads.diagnostic().kind, grads.diagnostic().message);
  std::vector<Tensor> out;
  for (ir::ValueId g : grads.value())
    out.push_back(g == ir::kNoValue ? Tensor() : traced(g));
  return out;
}

std::vector<passes::CustomRule> TraceContext::customRules() {
  std::vector<passes::CustomRule> rules;
  for (const CustomRegion& r : customRegions)
    rules.push_back(
        {r.inputs, r.outputs, [this, node = r.node](const std::vector<ir::ValueId>& outGrads) {
           std::vector<Tensor> grads;
           for (ir::ValueId g : outGrads)
             grads.push_back(g == ir::kNoValue ? Tensor() : traced(g));
           std::vector<Tensor> in = node->apply(std::move(grads)); // the user's backward, traced
           std::vector<ir::ValueId> ids;
           for (const Tensor& t : in)
             ids.push_back(t.defined() ? valueOf(t) : ir::kNoValue);
           return ids;
         }});
  return rules;
}

std::vector<GradEffect> TraceContext::finish() {
  // Tracing ran nothing: give back the random draws it reserved (the earliest per generator).
  for (auto it = randoms.rbegin(); it != randoms.rend(); ++it) {
    const Attrs& at = graph.nodes()[static_cast<size_t>(graph.value(it->first).producer)].attrs;
    it->second.set_offset(static_cast<uint64_t>(at.i("offset")));
  }
  std::vector<GradEffect> effects;
  for (size_t i = 0; i < state.size(); ++i) {
    Tensor now = state[i].grad();
    Tensor before = gradBefore[i]; // a handle: valueOf below may grow gradBefore
    if (now.is_same(before) || (!now.defined() && !before.defined())) continue;
    if (now.defined()) {
      graph.addOutput(valueOf(now));
      effects.push_back({state[i], static_cast<int32_t>(graph.outputs().size() - 1)});
    } else {
      effects.push_back({state[i], -1});
    }
    state[i].set_grad(before); // tracing leaves real tensors as they were
  }
  // Every real tensor written in place gets its new value back after each call.
  for (size_t i = 0; i < state.size(); ++i)
    if (current[i] != graph.state()[i]) graph.addStateUpdate(graph.state()[i], current[i]);
  return effects;
}

} // namespace weft
