// Define-by-run autograd: the graph nodes, grad-mode guards, autograd::grad and custom functions.
#pragma once

#include "weft/Tensor.h"
#include "weft/runtime/Attrs.h"

#include <any>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace weft {

/// Disables recording for its lifetime on this thread (like torch::NoGradGuard).
class NoGradGuard {
public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
  bool prev_;
};

/// Enables recording for its lifetime on this thread, even inside a NoGradGuard.
class EnableGradGuard {
public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

private:
  bool prev_;
};

/// LibTorch's c10::InferenceMode: while one is alive and enabled, nothing on this thread is
/// recorded for autograd (as NoGradGuard); `InferenceMode(false)` records again inside one.
class InferenceMode {
public:
  /// Enters inference mode (or, with false, leaves it: recording again) until destroyed.
  explicit InferenceMode(bool enabled = true);
  /// Restores the grad mode and inference mode from before.
  ~InferenceMode();
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;
  /// Whether an enabled InferenceMode is alive on this thread.
  static bool is_enabled();

private:
  bool prevGrad_, prevInference_;
};

/// True when operations on this thread are recorded for autograd.
bool is_grad_enabled();

namespace autograd {

class Node;
class CustomNode;

/// Where a gradient goes: input `input_nr` of node `fn`.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

namespace detail {
/// A reference weft holds to a tensor for its own bookkeeping (a view's base, a saved tensor, a
/// gradient accumulator's leaf), counted apart from the references users hold: compile() watches
/// those to tell when a captured tensor's handle moved on.
class InternalRef {
public:
  InternalRef() = default;
  InternalRef(std::shared_ptr<TensorImpl> p); // NOLINT: as a shared_ptr converts
  InternalRef(const InternalRef& other);
  InternalRef(InternalRef&& other) noexcept : p_(std::move(other.p_)) {}
  InternalRef& operator=(InternalRef other) noexcept {
    std::swap(p_, other.p_);
    return *this;
  }
  ~InternalRef();
  /// The tensor, or null.
  TensorImpl* get() const { return p_.get(); }
  TensorImpl* operator->() const { return p_.get(); }
  /// The tensor as the shared pointer a Tensor handle holds.
  const std::shared_ptr<TensorImpl>& shared() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

private:
  std::shared_ptr<TensorImpl> p_;
};
} // namespace detail

/// A tensor kept for backward, with the version it had when saved.
class SavedTensor {
public:
  SavedTensor() = default;
  /// `isOutput` must be true for the output of the node that saves it (avoids a reference cycle).
  SavedTensor(const Tensor& t, bool isOutput);
  /// The saved tensor; throws if it was modified in place since it was saved.
  Tensor unpack(const char* nodeName) const;
  void reset();
  bool defined() const { return static_cast<bool>(data_); }

private:
  detail::InternalRef data_;
  std::weak_ptr<Node> weakGradFn_;
  uint32_t outputNr_ = 0;
  uint64_t version_ = 0;
  bool isOutput_ = false;
};

/// A gradient hook and the line that registered it (its errors name that line).
struct RegisteredHook {
  uint32_t output = 0;        ///< which output of the node (hooks on non-leaf tensors)
  GradHook fn;                ///< the user's hook
  std::source_location where; ///< the register_hook call

  /// Runs the hook on `g`: its result if defined (it must keep g's shape and dtype), else `g`.
  Tensor operator()(const Tensor& g) const;
};

/// One step of the backward graph: maps gradients of its outputs to gradients of its inputs.
class Node : public std::enable_shared_from_this<Node> {
public:
  Node();
  /// Releases the nodes this one leads to without recursing, so freeing a long graph (200,000
  /// recorded ops) does not need a stack frame per node.
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  /// "MulBackward0"-style name.
  virtual std::string name() const = 0;
  /// Gradients for each input (next_edges order) from gradients of each output.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  /// Frees saved tensors once the graph is no longer needed (retain_graph=false).
  virtual void release_saved() {}
  /// What the engine calls: apply() and, unless `keepGraph`, release_saved(). Nodes read what they
  /// saved under `mutex`, so a release on another thread never frees it mid-read.
  std::vector<Tensor> run(std::vector<Tensor>&& grads, bool keepGraph);
  /// Claims the node for a backward that will free what it saved: false if another backward
  /// already did, or ran it and freed them. The engine claims every such node before running any,
  /// so of several threads running backward through one graph without retain_graph, one runs and
  /// the others change nothing.
  bool claim();
  /// Gives back a claim on a node that did not run (a run without retain_graph keeps it).
  void unclaim();
  /// Whether the node saved tensors that release_saved() frees; set when it is made.
  bool saves_tensors = false;
  /// Where each input's gradient goes (invalid edges for inputs that need none).
  std::vector<Edge> next_edges;
  /// Creation order; later nodes run first.
  uint64_t sequence_nr;
  uint32_t num_outputs = 1;
  /// Hooks on the gradients of its outputs, run before apply().
  std::vector<RegisteredHook> pre_hooks;
  /// Guards pre_hooks and what the node saved (never held while user code runs).
  std::mutex mutex;

private:
  enum class Claim : uint8_t { Free, Claimed, Spent };
  std::atomic<Claim> claim_{Claim::Free};
};

/// The gradient edge of `t`: its grad_fn, or its gradient accumulator if it is a leaf.
Edge gradient_edge(const Tensor& t);

/// Gradients of `outputs` with respect to `inputs` (like torch.autograd.grad). With
/// `create_graph`, the result is itself differentiable (double backward).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                         bool allow_unused = false, WEFT_LOC);

/// Gives t's grad_fn the name PyTorch gives the op that made t (`mean()` ends in a division, and
/// its grad_fn shows "MeanBackward0"), unless that node is `input`'s own (the op returned its input
/// as it is). For composites, weft's own and users'; `name` must outlive the graph (a string
/// literal: it is kept, not copied). Returns t.
const Tensor& name_grad_fn(const Tensor& t, const char* name, const Tensor& input = {});

/// Runs backward from `roots` into the leaves' .grad (what Tensor::backward calls).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false, WEFT_LOC);

/// State a custom function's forward passes to its backward (like
/// torch::autograd::AutogradContext).
class AutogradContext {
public:
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> get_saved_variables() const;
  /// Whether input `i` (counting tensor arguments) needs a gradient.
  bool needs_input_grad(size_t i) const;
  /// Any other values backward needs.
  std::map<std::string, std::any> saved_data;
  /// Called by weft once forward has returned: turns save_for_backward's tensors into saved ones.
  void finishForward(const std::vector<Tensor>& outputs);

private:
  template <typename T> friend struct Function;
  friend class CustomNode;
  friend std::vector<Tensor> wrapCustomOutputs(const std::shared_ptr<CustomNode>& node,
                                               const std::vector<Tensor>& inputs,
                                               std::vector<Tensor> outputs);
  std::vector<Tensor> toSave_;
  std::vector<SavedTensor> saved_;
  std::vector<bool> needsInputGrad_;
  bool released_ = false;
  mutable std::mutex mutex_; // guards saved_ and released_ once backward may run
};

/// The node of a custom function: calls the user's backward.
class CustomNode : public Node {
public:
  using Backward = std::function<std::vector<Tensor>(AutogradContext*, std::vector<Tensor>)>;
  /// `typeName`: the function type's mangled name (typeid), shown as "MyFunctionBackward".
  CustomNode(const char* typeName, Backward backward);
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override;
  AutogradContext ctx;
  /// Shape and dtype of each tensor input and output (inputs' gradients are checked against them).
  std::vector<std::pair<Shape, DType>> inputTypes, outputTypes;
  /// Per argument of forward (after the context): whether it is a tensor.
  std::vector<bool> argIsTensor;

private:
  /// The user's gradients, one per tensor input (see Function).
  std::vector<Tensor> perTensorInput(std::vector<Tensor> result) const;
  std::string name_;
  Backward backward_;
};

/// True if `t` is a traced value (inside compile() or trace()).
bool tracing(const Tensor& t);

/// Wires a custom function's outputs to a new CustomNode (inputs: the function's tensor arguments).
std::vector<Tensor> wrapCustomOutputs(const std::shared_ptr<CustomNode>& node,
                                      const std::vector<Tensor>& inputs,
                                      std::vector<Tensor> outputs);

/// A user-defined differentiable function, as torch::autograd::Function<T>: T provides
/// `static Tensor forward(AutogradContext*, Args...)` (or returns std::vector<Tensor>) and
/// `static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> grad_outputs)`
/// returning, as LibTorch's, one gradient per argument of forward (undefined for a non-tensor
/// argument or no gradient; trailing undefined ones may be left out).
template <typename T> struct Function {
  template <typename... Args> static auto apply(Args&&... args) {
    std::vector<Tensor> inputs;
    std::vector<bool> isTensor;
    auto collect = [&](const auto& a) {
      constexpr bool tensor = std::is_convertible_v<decltype(a), const Tensor&>;
      if constexpr (tensor) inputs.push_back(a);
      isTensor.push_back(tensor);
    };
    (collect(args), ...);
    auto node = std::make_shared<CustomNode>(
        typeid(T).name(),
        [](AutogradContext* ctx, std::vector<Tensor> g) { return T::backward(ctx, std::move(g)); });
    node->argIsTensor = std::move(isTensor);
    for (const Tensor& t : inputs)
      node->ctx.needsInputGrad_.push_back(t.defined() && (t.requires_grad() || tracing(t)));
    using Out = decltype(T::forward(&node->ctx, std::forward<Args>(args)...));
    std::vector<Tensor> outputs;
    {
      NoGradGuard guard;
      if constexpr (std::is_same_v<Out, Tensor>)
        outputs.push_back(T::forward(&node->ctx, std::forward<Args>(args)...));
      else
        outputs = T::forward(&node->ctx, std::forward<Args>(args)...);
    }
    outputs = wrapCustomOutputs(node, inputs, std::move(outputs));
    if constexpr (std::is_same_v<Out, Tensor>)
      return outputs[0];
    else
      return outputs;
  }
};

} // namespace autograd
} // namespace weft
