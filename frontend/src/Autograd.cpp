// The autograd engine: grad mode, saved tensors, gradient accumulation and the backward pass.
#include "weft/Autograd.h"
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/runtime/VjpRules.h"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

namespace weft {
namespace {
thread_local bool tGradEnabled = true;
thread_local bool tInference = false;
std::atomic<uint64_t> gNextSequenceNr{0};
} // namespace

NoGradGuard::NoGradGuard() : prev_(tGradEnabled) {
  tGradEnabled = false;
}
NoGradGuard::~NoGradGuard() {
  tGradEnabled = prev_;
}
EnableGradGuard::EnableGradGuard() : prev_(tGradEnabled) {
  tGradEnabled = true;
}
EnableGradGuard::~EnableGradGuard() {
  tGradEnabled = prev_;
}
InferenceMode::InferenceMode(bool enabled) : prevGrad_(tGradEnabled), prevInference_(tInference) {
  tGradEnabled = !enabled; // as c10::InferenceMode: disabled, it records again
  tInference = enabled;
}
InferenceMode::~InferenceMode() {
  tGradEnabled = prevGrad_;
  tInference = prevInference_;
}
bool InferenceMode::is_enabled() {
  return tInference;
}
bool is_grad_enabled() {
  return tGradEnabled;
}

Tensor fitGradient(Tensor g, const Shape& shape, DType dtype) {
  if (g.sizes() != shape) g = rules::sum_to(g, shape);
  return g.dtype() == dtype ? g : cast(g, dtype);
}

namespace autograd {
namespace {

/// Sets grad mode for the duration of a backward pass.
class GradModeScope {
public:
  explicit GradModeScope(bool on) : prev_(tGradEnabled) { tGradEnabled = on; }
  ~GradModeScope() { tGradEnabled = prev_; }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

private:
  bool prev_;
};

/// The sink of a leaf's gradient: runs the leaf's hooks, then adds the gradient to .grad.
class AccumulateGrad : public Node {
public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    Tensor g = std::move(grads[0]);
    if (!g.defined()) return {};
    std::vector<RegisteredHook> hooks;
    {
      std::lock_guard<std::mutex> lock(leaf_->mutex);
      hooks = leaf_->hooks;
    }
    for (const RegisteredHook& h : hooks)
      g = h(g);
    // create_graph=false: the stored gradient has no history; one only this call holds is kept
    // as it is (a new handle to its memory), any other is copied.
    const bool steal = !is_grad_enabled() && stealable(g);
    if (steal)
      g = Tensor(g.impl()->shallowCopy());
    else if (!is_grad_enabled())
      g = g.detach();
    std::lock_guard<std::mutex> lock(leaf_->mutex);
    if (!leaf_->grad.defined())
      leaf_->grad = is_grad_enabled() || steal ? g : g.clone();
    else if (is_grad_enabled())
      leaf_->grad = leaf_->grad + g;
    else {
      NoGradGuard guard;
      leaf_->grad.add_(g);
    }
    return {};
  }

private:
  /// Whether the first gradient can become .grad as it is, as PyTorch's AccumulateGrad steals it:
  /// this handle is the only one to it and, through it, to its memory (a view counts when nothing
  /// but the view holds its base), so a later in-place accumulation into .grad writes no other
  /// tensor; and it is laid out as the leaf (contiguous, same shape and dtype).
  bool stealable(const Tensor& g) const {
    const TensorImpl& impl = *g.impl();
    if (g.impl().use_count() != 1 || impl.storage == nullptr || impl.trace != nullptr ||
        !g.is_contiguous() || impl.shape != leaf_->shape || impl.dtype != leaf_->dtype)
      return false;
    const TensorImpl* base = impl.viewBase.get();
    if (base == nullptr) return impl.storage.use_count() == 1;
    return impl.viewBase.shared().use_count() == 1 && !base->viewBase &&
           base->storage == impl.storage && impl.storage.use_count() == 2;
  }

  detail::InternalRef leaf_;
};

std::shared_ptr<Node> gradAccumulator(const Tensor& leaf) {
  TensorImpl& impl = *leaf.impl();
  std::lock_guard<std::mutex> lock(impl.mutex);
  if (auto acc = impl.gradAccumulator.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf.impl());
  impl.gradAccumulator = acc;
  return acc;
}

/// Gradients arriving at one node, one slot per node output.
using InputBuffer = std::vector<Tensor>;

/// Runs the hooks registered on the node's outputs on their gradients.
void runHooks(Node& node, InputBuffer& grads) {
  std::vector<RegisteredHook> hooks;
  {
    std::lock_guard<std::mutex> lock(node.mutex);
    hooks = node.pre_hooks;
  }
  for (const RegisteredHook& hook : hooks)
    if (grads[hook.output].defined()) grads[hook.output] = hook(grads[hook.output]);
}

void accumulate(InputBuffer& buf, uint32_t slot, const Tensor& g) {
  if (buf.size() <= slot) buf.resize(slot + 1);
  buf[slot] = buf[slot].defined() ? buf[slot] + g : g;
}

/// The part of the graph one backward call reaches.
struct Reached {
  std::unordered_map<Node*, int> deps; ///< edges inside the reached graph pointing at each node
  std::vector<Node*> order;            ///< discovery order
  /// With captures (autograd::grad): the nodes that lead to a captured edge, and where each
  /// captured gradient is read.
  std::unordered_set<Node*> needed;
  std::unordered_map<Node*, std::vector<std::pair<uint32_t, size_t>>> captureAt;
  bool runs(Node* n, bool capturing) const { return !capturing || needed.count(n) > 0; }
};

Reached reach(const std::vector<Edge>& rootEdges, const std::vector<Edge>* captures) {
  Reached r;
  std::unordered_set<Node*> seen;
  std::vector<Node*> stack;
  for (const Edge& e : rootEdges)
    if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    r.order.push_back(n);
    for (const Edge& e : n->next_edges) {
      if (!e.valid()) continue;
      ++r.deps[e.fn.get()];
      if (seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
  }
  if (!captures) return r;
  for (size_t i = 0; i < captures->size(); ++i)
    r.captureAt[(*captures)[i].fn.get()].emplace_back((*captures)[i].input_nr, i);
  bool changed = true;
  while (changed) { // fixed point; graphs are small relative to the work per node
    changed = false;
    for (Node* n : r.order) {
      if (r.needed.count(n)) continue;
      for (const Edge& e : n->next_edges)
        if (e.valid() && (r.needed.count(e.fn.get()) || r.captureAt.count(e.fn.get()))) {
          r.needed.insert(n);
          changed = true;
          break;
        }
    }
  }
  return r;
}

/// Claims, before anything runs, every node a backward without retain_graph will free: in one
/// order for all threads, so of several backward calls through one graph exactly one gets them
/// and the others fail before changing anything. Claims on nodes that did not run are given back.
class Claims {
public:
  Claims(const Reached& r, bool capturing) {
    for (Node* n : r.order)
      if (r.runs(n, capturing)) nodes_.push_back(n);
    std::sort(nodes_.begin(), nodes_.end(),
              [](Node* a, Node* b) { return a->sequence_nr > b->sequence_nr; });
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (!nodes_[i]->claim()) { // give back what this call claimed: it runs nothing
        std::string name = nodes_[i]->name();
        for (size_t k = 0; k < i; ++k)
          nodes_[k]->unclaim();
        nodes_.clear();
        failSecondBackward(name);
      }
  }
  ~Claims() {
    for (Node* n : nodes_)
      n->unclaim();
  }
  Claims(const Claims&) = delete;
  Claims& operator=(const Claims&) = delete;

private:
  std::vector<Node*> nodes_;
};

/// Runs the backward graph from `rootEdges` with `rootGrads`. When `captures` is given, gradients
/// reaching those edges are returned instead of accumulated, and only nodes leading there run.
std::vector<Tensor> runEngine(const std::vector<Edge>& rootEdges,
                              const std::vector<Tensor>& rootGrads, bool keepGraph,
                              bool createGraph, const std::vector<Edge>* captures) {
  Reached r = reach(rootEdges, captures);
  std::optional<Claims> claims; // given back on return: after the nodes that ran are spent
  if (!keepGraph) claims.emplace(r, captures != nullptr);
  std::vector<Tensor> captured(captures ? captures->size() : 0);

  auto later = [](Node* a, Node* b) { return a->sequence_nr < b->sequence_nr; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(later)> ready(later);
  std::unordered_map<Node*, InputBuffer> buffers;
  std::unordered_map<Node*, std::shared_ptr<Node>> alive; // keeps nodes alive while pending
  for (size_t i = 0; i < rootEdges.size(); ++i) {
    accumulate(buffers[rootEdges[i].fn.get()], rootEdges[i].input_nr, rootGrads[i]);
    alive[rootEdges[i].fn.get()] = rootEdges[i].fn;
  }
  for (auto& [node, holder] : alive)
    if (r.deps[node] == 0) ready.push(node);

  GradModeScope mode(createGraph);
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::shared_ptr<Node> hold = alive[node];
    alive.erase(node);
    InputBuffer grads = std::move(buffers[node]);
    buffers.erase(node);
    grads.resize(node->num_outputs);
    std::vector<Tensor> out;
    if (std::any_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); })) {
      runHooks(*node, grads);
      if (auto it = r.captureAt.find(node); it != r.captureAt.end())
        for (auto [slot, i] : it->second)
          captured[i] = grads[slot];
      // Nothing captured lies beyond nodes that are not needed.
      if (r.runs(node, captures != nullptr)) out = node->run(std::move(grads), keepGraph);
    }
    // Every successor hears from every predecessor, with or without a gradient, so that
    // dependency counts reach zero in topological order.
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      Node* next = e.fn.get();
      if (i < out.size() && out[i].defined()) accumulate(buffers[next], e.input_nr, out[i]);
      alive[next] = e.fn;
      if (--r.deps[next] == 0) ready.push(next);
    }
  }
  return captured;
}

std::vector<Tensor> rootGradients(const std::vector<Tensor>& roots,
                                  const std::vector<Tensor>& given) {
  WEFT_CHECK(given.empty() || given.size() == roots.size(), Value, "backward: got ", given.size(),
             " gradients for ", roots.size(), " outputs");
  std::vector<Tensor> grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    WEFT_CHECK(r.defined(), Value, "backward: output ", i, " is an undefined tensor");
    WEFT_CHECK(r.requires_grad(), Value, "element ", i,
               " of tensors does not require grad and does not have a grad_fn");
    if (!given.empty() && given[i].defined()) {
      WEFT_CHECK(given[i].sizes() == r.sizes(), Shape, "backward: mismatch in shape: grad_output[",
                 i, "] has a shape of ", shapeString(given[i].sizes()), " and output[", i,
                 "] has a shape of ", shapeString(r.sizes()));
      grads.push_back(given[i]);
    } else {
      WEFT_CHECK(r.numel() == 1, Value,
                 "grad can be implicitly created only for scalar outputs (output ", i,
                 " has shape ", shapeString(r.sizes()), ")");
      grads.push_back(ones_like(r));
    }
  }
  return grads;
}

} // namespace

Node::Node() : sequence_nr(gNextSequenceNr.fetch_add(1)) {}

namespace {
/// The nodes the outermost ~Node() on this thread is dropping (null when none is running). A
/// plain pointer, so it is usable while thread_local and static objects are destroyed at exit.
thread_local std::vector<std::shared_ptr<Node>>* tReleasing = nullptr;
} // namespace

Node::~Node() {
  // Hand the edges to the outermost ~Node() on this thread, which drops them one at a time: a
  // node freed there queues its own edges instead of freeing them from inside its destructor.
  // (Derived members are already gone: a node's saved inputs' grad_fns are also its edges.)
  std::vector<std::shared_ptr<Node>> queue;
  bool outermost = tReleasing == nullptr;
  if (outermost) tReleasing = &queue;
  try {
    for (Edge& e : next_edges)
      if (e.fn) tReleasing->push_back(std::move(e.fn));
  } catch (...) { // out of memory: the remaining edges are freed recursively, as plain members
  }
  if (!outermost) return;
  while (!queue.empty()) {
    std::shared_ptr<Node> last = std::move(queue.back());
    queue.pop_back();
  }
  tReleasing = nullptr;
}

bool Node::claim() {
  Claim free = Claim::Free;
  return !saves_tensors || claim_.compare_exchange_strong(free, Claim::Claimed);
}

void Node::unclaim() {
  Claim claimed = Claim::Claimed;
  claim_.compare_exchange_strong(claimed, Claim::Free);
}

void failSecondBackward(const std::string& name) {
  WEFT_FAIL(Value, name,
            ": trying to backward through the graph a second time (or to read saved tensors after "
            "they were freed). Saved values of the graph are freed when you call backward() or "
            "autograd::grad(); specify retain_graph=true to backward through the graph again.");
}

std::vector<Tensor> Node::run(std::vector<Tensor>&& grads, bool keepGraph) {
  std::vector<Tensor> out = apply(std::move(grads));
  if (!keepGraph) {
    release_saved();
    claim_.store(Claim::Spent);
  }
  return out;
}

Tensor RegisteredHook::operator()(const Tensor& g) const {
  Tensor r = fn(g);
  if (!r.defined()) return g;
  WEFT_CHECK(r.sizes() == g.sizes(), Shape, "the gradient hook registered at ", where.file_name(),
             ":", where.line(), " returned a gradient of shape ", shapeString(r.sizes()),
             ", but the gradient it was given (and the tensor it is registered on) has shape ",
             shapeString(g.sizes()));
  WEFT_CHECK(r.dtype() == g.dtype(), DType, "the gradient hook registered at ", where.file_name(),
             ":", where.line(), " returned a ", dtypeName(r.dtype()),
             " gradient, but the gradient it was given is ", dtypeName(g.dtype()));
  return r;
}

Edge gradient_edge(const Tensor& t) {
  if (t.grad_fn()) return Edge{t.grad_fn(), t.output_nr()};
  if (t.requires_grad()) return Edge{gradAccumulator(t), 0};
  return Edge{};
}

namespace detail {
InternalRef::InternalRef(std::shared_ptr<TensorImpl> p) : p_(std::move(p)) {
  if (p_) p_->internalRefs.fetch_add(1, std::memory_order_relaxed);
}
InternalRef::InternalRef(const InternalRef& other) : p_(other.p_) {
  if (p_) p_->internalRefs.fetch_add(1, std::memory_order_relaxed);
}
InternalRef::~InternalRef() {
  if (p_) p_->internalRefs.fetch_sub(1, std::memory_order_relaxed);
}
} // namespace detail

SavedTensor::SavedTensor(const Tensor& t, bool isOutput)
    : outputNr_(t.output_nr()), version_(t._version()), isOutput_(isOutput) {
  if (isOutput) { // break the cycle output -> grad_fn -> saved output
    auto copy = t.impl()->shallowCopy();
    copy->requiresGrad = t.impl()->requiresGrad;
    data_ = std::move(copy);
    weakGradFn_ = t.grad_fn();
  } else {
    data_ = t.impl();
  }
}

Tensor SavedTensor::unpack(const char* nodeName) const {
  WEFT_INTERNAL_ASSERT(defined(), "unpacking an empty saved tensor");
  uint64_t now = data_->storage ? data_->storage->version() : 0;
  WEFT_CHECK(now == version_, Value,
             "one of the variables needed for gradient computation has been modified by an inplace "
             "operation: [",
             dtypeName(data_->dtype), " ", shapeString(data_->shape), "], which is output 0 of ",
             nodeName, ", is at version ", now, "; expected version ", version_, " instead.");
  if (!isOutput_) return Tensor(data_.shared());
  auto impl = data_->shallowCopy();
  impl->requiresGrad = data_->requiresGrad;
  impl->gradFn = weakGradFn_.lock();
  impl->outputNr = outputNr_;
  return Tensor(impl);
}

void SavedTensor::reset() {
  data_ = detail::InternalRef();
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradRoots,
              std::optional<bool> retainGraph, bool createGraph, std::source_location loc) {
  CallSite cs(loc);
  if (TraceContext* tc = currentTrace()) {
    WEFT_CHECK(roots.size() == 1, Value,
               "backward: inside a traced function, backward takes one output");
    tc->backward(roots[0], gradRoots.empty() ? Tensor() : gradRoots[0]);
    return;
  }
  std::vector<Tensor> grads = rootGradients(roots, gradRoots);
  std::vector<Edge> edges;
  for (const Tensor& r : roots)
    edges.push_back(gradient_edge(r));
  runEngine(edges, grads, retainGraph.value_or(createGraph), createGraph, nullptr);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& gradOutputs, std::optional<bool> retainGraph,
                         bool createGraph, bool allowUnused, std::source_location loc) {
  CallSite cs(loc);
  if (TraceContext* tc = currentTrace()) {
    WEFT_CHECK(outputs.size() == 1, Value, "grad: inside a traced function, grad takes one output");
    std::vector<Tensor> r =
        tc->grad(outputs[0], inputs, gradOutputs.empty() ? Tensor() : gradOutputs[0]);
    for (size_t i = 0; i < r.size(); ++i)
      WEFT_CHECK(r[i].defined() || allowUnused, Value, "grad: input ", i,
                 " was not used in the graph (set "
                 "allow_unused=true if this is the desired behavior)");
    return r;
  }
  std::vector<Tensor> grads = rootGradients(outputs, gradOutputs);
  std::vector<Edge> edges, captures;
  for (const Tensor& o : outputs)
    edges.push_back(gradient_edge(o));
  for (size_t i = 0; i < inputs.size(); ++i) {
    WEFT_CHECK(inputs[i].defined() && inputs[i].requires_grad(), Value, "grad: input ", i,
               " does not require grad (One of the differentiated Tensors does not require grad)");
    captures.push_back(gradient_edge(inputs[i]));
  }
  std::vector<Tensor> result =
      runEngine(edges, grads, retainGraph.value_or(createGraph), createGraph, &captures);
  for (size_t i = 0; i < result.size(); ++i)
    WEFT_CHECK(result[i].defined() || allowUnused, Value, "grad: input ", i,
               " was not used in the graph (One of the differentiated Tensors appears to not have "
               "been used in the "
               "graph. Set allow_unused=true if this is the desired behavior.)");
  return result;
}

// ---- custom functions ----

void AutogradContext::save_for_backward(std::vector<Tensor> tensors) {
  toSave_ = std::move(tensors);
}

std::vector<Tensor> AutogradContext::get_saved_variables() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (released_) failSecondBackward("a custom function");
  std::vector<Tensor> out;
  for (const SavedTensor& s : saved_)
    out.push_back(s.defined() ? s.unpack("a custom function") : Tensor());
  return out;
}

bool AutogradContext::needs_input_grad(size_t i) const {
  return i < needsInputGrad_.size() && needsInputGrad_[i];
}

void AutogradContext::finishForward(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : toSave_) {
    bool isOutput = false;
    for (const Tensor& o : outputs)
      isOutput = isOutput || (t.defined() && t.is_same(o));
    saved_.push_back(t.defined() ? SavedTensor(t, isOutput) : SavedTensor());
  }
  toSave_.clear();
}

namespace {
/// "MyFunctionBackward" for the type name typeid gives `MyFunction` (namespaces kept).
std::string backwardName(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return std::string(status == 0 && plain ? plain.get() : mangled) + "Backward";
}

/// Shape and dtype of a custom function's input or output (an undefined input has none).
std::pair<Shape, DType> metaOf(const Tensor& t) {
  if (!t.defined()) return {Shape{}, kDefaultFloat};
  return {t.sizes(), t.dtype()};
}
} // namespace

CustomNode::CustomNode(const char* typeName, Backward backward)
    : name_(backwardName(typeName)), backward_(std::move(backward)) {}

std::vector<Tensor> CustomNode::perTensorInput(std::vector<Tensor> result) const {
  const size_t tensors = next_edges.size(), args = argIsTensor.size();
  if (args == tensors) { // every argument a tensor: one gradient each, trailing ones left out
    WEFT_CHECK(result.size() <= tensors ||
                   std::none_of(result.begin() + tensors, result.end(),
                                [](const Tensor& g) { return g.defined(); }),
               Value, name(), ": backward returned ", result.size(), " gradients, but forward has ",
               tensors, " tensor inputs");
    result.resize(tensors);
    return result;
  }
  // LibTorch's rule: one gradient per argument of forward, an undefined one for an argument that
  // is not a tensor; trailing undefined ones may be left out (or given past the last argument).
  std::vector<Tensor> perTensor;
  for (size_t k = 0; k < std::max(args, result.size()); ++k) {
    Tensor g = k < result.size() ? result[k] : Tensor();
    if (k < args && argIsTensor[k]) {
      perTensor.push_back(std::move(g));
      continue;
    }
    WEFT_CHECK(!g.defined(), Value, name(), ": backward returned a defined gradient ",
               k < args ? "for argument " : "past the last argument, at ", k,
               " of forward, which is not a tensor; return one gradient per argument of forward ",
               "(", args, ", ", tensors,
               " of them tensors), an undefined Tensor() for each that is not a tensor");
  }
  return perTensor;
}

std::vector<Tensor> CustomNode::apply(std::vector<Tensor>&& grads) {
  for (size_t i = 0; i < grads.size(); ++i) // backward gets zeros rather than undefined gradients
    if (!grads[i].defined()) grads[i] = zeros(outputTypes[i].first, outputTypes[i].second);
  std::vector<Tensor> result = perTensorInput(backward_(&ctx, std::move(grads)));
  for (size_t i = 0; i < result.size(); ++i) {
    Tensor& r = result[i];
    if (!ctx.needs_input_grad(i)) r = Tensor(); // as PyTorch: ignored where none is needed
    if (!r.defined()) continue;
    const auto& [shape, dtype] = inputTypes[i];
    WEFT_CHECK(r.is_floating_point(), DType, name(), ": backward returned a ", dtypeName(r.dtype()),
               " gradient for input ", i, " (", dtypeName(dtype), " ", shapeString(shape),
               "); gradients must be floating point");
    // As PyTorch: a gradient that broadcasts to the input's shape is summed down to it, and a
    // floating gradient of another precision is converted.
    auto b = ir::broadcastShapes(shape, r.sizes(), "backward");
    WEFT_CHECK(b && b.value() == r.sizes(), Shape, name(),
               ": backward returned a gradient of shape ", shapeString(r.sizes()), " for input ", i,
               " of shape ", shapeString(shape));
    r = fitGradient(r, shape, dtype);
  }
  return result;
}

bool tracing(const Tensor& t) {
  return t.defined() && t.impl()->trace != nullptr;
}

void CustomNode::release_saved() {
  std::lock_guard<std::mutex> lock(ctx.mutex_);
  for (auto& s : ctx.saved_)
    s.reset();
  ctx.released_ = true;
}

namespace {
/// Inside a trace: the function's outputs (recorded under no_grad, so autodiff cannot see through
/// them) become a region that graph autodiff differentiates with the user's backward.
std::vector<Tensor> traceCustomOutputs(TraceContext& tc, const std::shared_ptr<CustomNode>& node,
                                       const std::vector<Tensor>& inputs,
                                       std::vector<Tensor> outputs) {
  TraceContext::CustomRegion region;
  region.node = node;
  for (const Tensor& t : inputs) {
    region.inputs.push_back(t.defined() ? tc.valueOf(t) : ir::kNoValue);
    node->inputTypes.push_back(metaOf(t));
  }
  for (Tensor& o : outputs) {
    if (o.impl()->trace != &tc) // a real tensor returned as is: give it a graph value
      o = tc.traced(tc.valueOf(o));
    region.outputs.push_back(tc.valueOf(o));
    node->outputTypes.push_back(metaOf(o));
  }
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  node->next_edges.resize(inputs.size());
  node->ctx.finishForward(outputs);
  tc.customRegions.push_back(std::move(region));
  return outputs;
}
} // namespace

std::vector<Tensor> wrapCustomOutputs(const std::shared_ptr<CustomNode>& node,
                                      const std::vector<Tensor>& inputs,
                                      std::vector<Tensor> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i)
    WEFT_CHECK(outputs[i].defined(), Value, node->name(),
               ": forward returned an undefined tensor as output ", i,
               "; a custom function's outputs must be tensors");
  if (TraceContext* tc = currentTrace())
    return traceCustomOutputs(*tc, node, inputs, std::move(outputs));
  bool any = false;
  for (const Tensor& t : inputs)
    any = any || (t.defined() && t.requires_grad());
  for (Tensor& o : outputs)
    for (const Tensor& in : inputs)
      if (o.defined() && o.is_same(in)) // an input returned as is: give the output its own handle
        o = Tensor(in.impl()->shallowCopy());
  if (any && is_grad_enabled()) {
    for (const Tensor& t : inputs) {
      node->next_edges.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
      node->inputTypes.push_back(metaOf(t));
    }
    node->num_outputs = static_cast<uint32_t>(outputs.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      node->outputTypes.push_back(metaOf(outputs[i]));
      if (outputs[i].is_floating_point()) {
        outputs[i].impl()->gradFn = node;
        outputs[i].impl()->outputNr = static_cast<uint32_t>(i);
      }
    }
  }
  node->ctx.finishForward(outputs); // after grad_fn is set: saved outputs refer to it weakly
  node->saves_tensors = !node->ctx.saved_.empty();
  return outputs;
}

} // namespace autograd

void Tensor::backward(const Tensor& gradient, std::optional<bool> retainGraph, bool createGraph,
                      std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("backward");
  autograd::backward({*this},
                     gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                     retainGraph, createGraph);
}

} // namespace weft
