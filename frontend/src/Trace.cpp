// The tracer: records ops as graph nodes, functionalizes in-place writes to real tensors, and
// turns backward() into graph autodiff.
#include "Trace.h"

#include "weft/Autograd.h"
#include "weft/ir/Lower.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

#include <algorithm>

namespace weft {
namespace {
thread_local TraceContext* tTrace = nullptr;

ir::Location callerLocation() {
  const std::source_location* loc = CallSite::current();
  if (loc == nullptr || loc->line() == 0) return {};
  return ir::Location{loc->file_name(), static_cast<int>(loc->line())};
}
/// The flat positions of `view`'s elements in its contiguous `base`, as an int64 constant of the
/// view's shape: the view's strides applied to 0, 1, 2, ... `write`: no two elements may share a
/// position (an expanded view).
Tensor viewPositions(const TensorImpl& view, const TensorImpl& base, const char* op, bool write) {
  WEFT_CHECK(base.strides == contiguousStrides(base.shape), Value, op,
             ": inside a traced function, views of a non-contiguous tensor cannot be written or "
             "read after a write; make the tensor contiguous first");
  TraceScope paused(nullptr); // a real constant
  Tensor positions = arange(numel(base.shape));
  Tensor pos =
      Tensor(std::make_shared<TensorImpl>(positions.impl()->storage, view.shape, view.strides,
                                          view.offset - base.offset, DType::Int64))
          .clone();
  if (write) {
    std::vector<int64_t> sorted = pos.to_vector<int64_t>();
    std::sort(sorted.begin(), sorted.end());
    WEFT_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), Value, op,
               ": unsupported operation: more than one element of the written-to tensor refers to "
               "a single memory location. Please clone() the tensor before performing the "
               "operation.");
  }
  return pos;
}

} // namespace

TraceContext* currentTrace() {
  return tTrace;
}

namespace {
/// How many scopes with a trace are open on this thread (pausing ones do not count).
thread_local int tTracingDepth = 0;
} // namespace

bool inTracedFunction() {
  return tTracingDepth > 0;
}

TraceScope::TraceScope(TraceContext* tc) : prev_(tTrace), records_(tc != nullptr) {
  tTrace = tc;
  if (records_) ++tTracingDepth;
}
TraceScope::~TraceScope() {
  tTrace = prev_;
  if (records_) --tTracingDepth;
}

void checkNotTraced(const Tensor& t, const char* what) {
  if (!t.defined() || t.impl()->trace == nullptr) return;
  t.impl()->trace->readValues = true;
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
    tc->readValues = true;
    WEFT_FAIL(Value, what,
              ": reading a tensor's value inside a traced or compiled function bakes it into the "
              "compiled program. Move the read out of the function, or compile with "
              "CompileOptions().specialize_on_values() to guard on it");
  }
  return tc->evaluate(t, what);
}

namespace {
/// Whether value `v` is computed from random numbers.
bool drawnFromRandom(const ir::Graph& g, ir::ValueId v) {
  std::vector<ir::ValueId> stack{v};
  std::vector<bool> seen(g.values().size(), false);
  while (!stack.empty()) {
    ir::ValueId u = stack.back();
    stack.pop_back();
    int32_t producer = g.value(u).producer;
    if (producer < 0 || seen[static_cast<size_t>(u)]) continue;
    seen[static_cast<size_t>(u)] = true;
    const ir::Node& n = g.nodes()[static_cast<size_t>(producer)];
    if (opInfo(n.op).kind == OpKind::Random) return true;
    stack.insert(stack.end(), n.operands.begin(), n.operands.end());
  }
  return false;
}
} // namespace

Tensor TraceContext::evaluate(const Tensor& t, const char* what) {
  ir::ValueId v = valueOf(t);
  WEFT_CHECK(!drawnFromRandom(graph, v), Value, what,
             ": reading a value computed from random numbers inside a compiled function would "
             "freeze the numbers drawn when it was traced; read it outside the function");
  // The graph so far, with just this value as output; state is read, not written.
  ir::Graph g = graph;
  g.mutableOutputs() = {v};
  g.mutableStateUpdates().clear();
  passes::PassManager pm;
  pm.add(passes::createPass("dce"));
  auto r = pm.run(g);
  WEFT_INTERNAL_ASSERT(static_cast<bool>(r), r ? "" : r.diagnostic().message);
  hal::Device& on = hal::device(device);
  Buffer out = runPlan(on, ir::lowerToPlan(g), buffersOf(realArgs), buffersOf(state))[0];
  TraceScope paused(nullptr); // the value is real, not another node
  Tensor value = zeros(out.ref.shape, TensorOptions(out.ref.dtype).device(device));
  on.kernels().copyCast(out.ref, value.ref());
  std::string source = std::string(what) + "()";
  if (ir::Location loc = callerLocation(); loc.known()) source += " at " + loc.text();
  guards.push_back({v, value, source});
  return value;
}

uint64_t TraceContext::writesTo(const TensorImpl* base) const {
  auto it = writes.find(base);
  return it == writes.end() ? 0 : it->second;
}

ir::ValueId TraceContext::readView(const std::shared_ptr<TensorImpl>& view) {
  TraceScope scope(this); // also when reached after the traced function returned
  Tensor idx = viewPositions(*view, *view->viewBase.get(), "reading a view", false);
  Tensor base(view->viewBase.shared());
  return valueOf(base.reshape({-1}).index_select(0, idx.reshape({-1})).reshape(view->shape));
}

void TraceContext::writeView(const std::shared_ptr<TensorImpl>& view, const Tensor& value,
                             const char* op) {
  TraceScope scope(this);
  std::shared_ptr<TensorImpl> baseImpl = view->viewBase.shared();
  Tensor idx = viewPositions(*view, *baseImpl, op, true);
  Tensor base(baseImpl);
  Tensor updated = base.reshape({-1})
                       .scatter(0, idx.reshape({-1}), value.expand(view->shape).reshape({-1}))
                       .reshape(baseImpl->shape);
  ir::ValueId v = valueOf(updated);
  if (baseImpl->trace == this) {
    baseImpl->traceValue = v;
  } else {
    valueOf(base); // capture it, so its new value is written back after each call
    current[stateIndex.at(baseImpl.get())] = v;
  }
  ++writes[baseImpl.get()];
}

ir::ValueId TraceContext::valueOf(const Tensor& t) {
  TensorImpl* impl = t.impl().get();
  if (impl->trace == this) {
    if (impl->viewBase && impl->traceVersion != writesTo(impl->viewBase.get())) {
      impl->traceValue = readView(t.impl()); // its base was written since
      impl->traceVersion = writesTo(impl->viewBase.get());
    }
    return impl->traceValue;
  }
  WEFT_CHECK(impl->trace == nullptr, Value, "a tensor from another trace was used inside this one");
  if (impl->viewBase && writesTo(impl->viewBase.get()) > 0) {
    // A real view whose base the trace wrote: read it from the base's new value. (Until then it
    // is state of its own, so a leaf that happens to be a view is differentiated like any other.)
    uint64_t seen = writesTo(impl->viewBase.get());
    auto it = realViews.find(impl);
    if (it != realViews.end() && it->second.second == seen) return it->second.first;
    ir::ValueId v = readView(t.impl());
    realViews[impl] = {v, seen};
    return v;
  }
  if (auto it = stateIndex.find(impl); it != stateIndex.end()) return current[it->second];
  WEFT_CHECK(impl->storage != nullptr, Value,
             "a metadata-only tensor was used inside a traced function");
  size_t index = state.size();
  ir::ValueId v = graph.addState({impl->dtype, impl->shape}, "s" + std::to_string(index));
  state.push_back(t);
  current.push_back(v);
  stateIndex[impl] = index;
  gradBefore.push_back(t.grad());
  requiresGradBefore.push_back(t.requires_grad());
  return v;
}

Tensor TraceContext::traced(ir::ValueId v) {
  const ir::TensorType& type = graph.type(v);
  auto impl = std::make_shared<TensorImpl>(nullptr, type.shape, contiguousStrides(type.shape), 0,
                                           type.dtype);
  impl->trace = this;
  impl->traceValue = v;
  impl->device = device; // every value of the graph is computed where it runs
  made.push_back(impl);
  viewOrigins.erase(impl.get()); // an earlier tensor's, at the same address
  return Tensor(impl);
}

ViewOrigin TraceContext::originOf(const Tensor& t) const {
  const TensorImpl* impl = t.impl().get();
  ViewOrigin o;
  if (impl->trace != this) { // a real tensor; one the function made is computed on every call
    if (impl->madeInTrace) {
      o.computed = impl;
    } else {
      o.real = t.impl();
      if (auto it = stateIndex.find(impl); it != stateIndex.end())
        o.state = static_cast<int32_t>(it->second);
    }
    return o;
  }
  if (auto it = viewOrigins.find(impl); it != viewOrigins.end()) return it->second;
  for (size_t i = 0; i < arguments.size(); ++i)
    if (arguments[i].impl().get() == impl) {
      o.argument = static_cast<int32_t>(i);
      return o;
    }
  o.computed = impl;
  return o;
}

Tensor TraceContext::record(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs,
                            const ir::TensorType& type) {
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : inputs)
    ids.push_back(valueOf(t));
  ir::Location loc = callerLocation();
  ir::ValueId v = graph.addNode(op, std::move(ids), attrs, type, loc);
  if (!is_grad_enabled() && isFloating(type.dtype) &&
      opInfo(op).differentiable) // no_grad: a constant for autodiff
    v = graph.addNode(OpCode::StopGradient, {v}, {}, type, loc);
  Tensor out = traced(v);
  if (isViewOp(op)) { // a view exactly where eager makes one, so writes through it reach its base
    const TensorImpl& in = *inputs[0].impl();
    if (auto view = computeView(op, in.shape, in.strides, attrs)) {
      TensorImpl& o = *out.impl();
      o.strides = view->strides;
      o.offset = in.offset + view->offset;
      o.viewBase = in.viewBase ? in.viewBase : inputs[0].impl();
      o.traceVersion = writesTo(o.viewBase.get());
      ViewOrigin origin = originOf(inputs[0]);
      if (origin.real.expired() && origin.argument < 0 && origin.computed == nullptr)
        origin.computed = inputs[0].impl().get(); // a real tensor gone since: compute it
      origin.views.emplace_back(op, attrs);
      viewOrigins[out.impl().get()] = std::move(origin);
    }
  }
  return out;
}

void TraceContext::assign(Tensor& self, const Tensor& result, const char* op) {
  TensorImpl* impl = self.impl().get();
  Tensor r = result.dtype() == self.dtype() ? result : cast(result, self.dtype());
  if (impl->viewBase) { // functionalized: the base takes the new elements
    writeView(self.impl(), r, op);
    uint64_t seen = writesTo(impl->viewBase.get());
    ir::ValueId v = valueOf(r);
    if (impl->trace == this) {
      impl->traceValue = v;
      impl->traceVersion = seen;
    } else {
      realViews[impl] = {v, seen};
      if (auto it = stateIndex.find(impl); it != stateIndex.end())
        current[it->second] = v; // also state of its own: written back consistently
    }
    return;
  }
  ir::ValueId v = valueOf(r);
  if (impl->trace == this) {
    impl->traceValue = v;
  } else {
    valueOf(self); // capture it, so its new value is written back after each call
    current[stateIndex.at(impl)] = v;
  }
  ++writes[impl]; // its views re-read it
}

void TraceContext::backward(const Tensor& root, const Tensor& gradient) {
  usedAutodiff = true;
  WEFT_CHECK(root.numel() == 1 || gradient.defined(), Value,
             "grad can be implicitly created only for scalar outputs "
             "(output has shape ",
             shapeString(root.sizes()), ")");
  // Differentiate with respect to every leaf that requires grad, captured or an argument, at the
  // value it has now.
  std::vector<Tensor> leaves;
  std::vector<ir::ValueId> wrt;
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].impl()->requiresGrad) {
      leaves.push_back(state[i]);
      wrt.push_back(current[i]);
    }
  for (const Tensor& a : arguments)
    if (a.impl()->requiresGrad) {
      leaves.push_back(a);
      wrt.push_back(a.impl()->traceValue);
    }
  ir::ValueId seed = gradient.defined() ? valueOf(gradient) : ir::kNoValue;
  checkRequiresGrad(root, wrt);
  auto grads = passes::appendGradients(graph, valueOf(root), wrt, seed, customRules());
  if (!grads) throwError(grads.diagnostic().kind, grads.diagnostic().message);
  for (size_t k = 0; k < leaves.size(); ++k) {
    ir::ValueId g = grads.value()[k];
    if (g == ir::kNoValue) continue;
    Tensor prev = leaves[k].grad();
    Tensor add = traced(g);
    leaves[k].set_grad(prev.defined() ? prev + add : add); // accumulates, as eager backward does
  }
}

void TraceContext::checkRequiresGrad(const Tensor& root, const std::vector<ir::ValueId>& wrt) {
  const bool differentiable =
      root.impl()->trace != this
          ? root.requires_grad()
          : passes::differentiablyDependsOn(graph, wrt,
                                            customRules())[static_cast<size_t>(valueOf(root))];
  WEFT_CHECK(differentiable, Value,
             "element 0 of tensors does not require grad and does not have a grad_fn");
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

void TraceContext::rememberGenerator(const Generator& g) {
  for (const auto& [gen, seed, offset] : generatorsBefore)
    if (gen == g) return;
  generatorsBefore.emplace_back(g, g.seed(), g.offset());
}

void TraceContext::recordGenerator(GeneratorEvent e) {
  rememberGenerator(e.generator);
  generatorEvents.push_back(std::move(e));
}

void TraceContext::keepEscapedTensors(bool failed) {
  std::unordered_map<const TensorImpl*, long> ownRefs; // references the trace itself holds
  for (const Tensor& a : arguments) {
    ++ownRefs[a.impl().get()];
    if (a.impl()->grad.defined()) ++ownRefs[a.impl()->grad.impl().get()];
  }
  for (const Tensor& t : state)
    ++ownRefs[t.impl().get()];
  auto kept = [&](const std::shared_ptr<TensorImpl>& p) { // not counting `p`
    return p.use_count() - 1 - p->internalRefs.load() - ownRefs[p.get()] > 0;
  };
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].impl()->madeInTrace && kept(state[i].impl())) {
      state[i].impl()->madeInTrace = false; // the user's now: its writes are kept
      keptTensors = !failed;
    }
  for (const std::weak_ptr<TensorImpl>& w : made) {
    std::shared_ptr<TensorImpl> p = w.lock();
    if (!p || p->trace != this || !kept(p)) continue;
    ir::ValueId v = ir::kNoValue;
    if (!failed) {
      TraceScope scope(this);
      v = valueOf(Tensor(p));
    }
    p->trace = nullptr;
    p->traceValue = -1;
    p->viewBase = {};
    p->strides = contiguousStrides(p->shape);
    p->offset = 0;
    if (failed) { // no value: an eager op on it is an error, a later trace rejects it
      keptAfterFailure = true;
      continue;
    }
    p->storage = hal::device(device).allocate(
        static_cast<size_t>(checkedByteSize(p->shape, p->dtype, "keep")), true);
    ir::ValueId s = valueOf(Tensor(p)); // a new state tensor; its value comes from the graph
    current[stateIndex.at(p.get())] = v;
    keptTensors = true;
    (void)s;
  }
}

std::vector<GradEffect> TraceContext::finish(bool failed) {
  // Tracing ran nothing: give the generators back the draws and seeds it took.
  for (auto& [gen, seed, offset] : generatorsBefore)
    gen.setState(seed, offset);
  std::vector<GradEffect> effects;
  for (size_t i = 0; i < state.size(); ++i) {
    Tensor now = state[i].grad();
    Tensor before = gradBefore[i]; // a handle: valueOf below may grow gradBefore
    if (now.is_same(before) || (!now.defined() && !before.defined())) continue;
    if (now.defined()) {
      graph.addOutput(valueOf(now));
      effects.push_back(
          {GradEffect::Of::State, i, static_cast<int32_t>(graph.outputs().size() - 1)});
    } else {
      effects.push_back({GradEffect::Of::State, i, -1});
    }
    state[i].set_grad(before); // tracing leaves real tensors as they were
  }
  for (size_t i = 0; i < arguments.size(); ++i) // what backward adds to the caller's tensors
    if (Tensor g = arguments[i].grad(); g.defined()) {
      graph.addOutput(valueOf(g));
      effects.push_back(
          {GradEffect::Of::Argument, i, static_cast<int32_t>(graph.outputs().size() - 1)});
    }
  for (size_t i = 0; i < arguments.size(); ++i) // arguments written in place: their new values
    if (ir::ValueId now = valueOf(arguments[i]); now != graph.arguments()[i]) {
      graph.addOutput(now);
      argumentWrites.push_back({i, static_cast<int32_t>(graph.outputs().size() - 1)});
    }
  keepEscapedTensors(failed);
  // Every real tensor written in place gets its new value back after each call.
  for (size_t i = 0; i < state.size(); ++i)
    if (current[i] != graph.state()[i]) graph.addStateUpdate(graph.state()[i], current[i]);
  return effects;
}

} // namespace weft
