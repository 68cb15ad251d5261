// nn::Module: LibTorch's module model (parameters, buffers, submodules, modes, state dicts, hooks)
// and the holders that give each layer its value-like handle (nn::Linear around nn::LinearImpl).
#pragma once

#include "weft/Autograd.h"
#include "weft/Compile.h"
#include "weft/Functions.h"
#include "weft/Tensor.h"

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft::nn {

/// Named tensors in registration order (parameters, buffers, a state dict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// A state dict: every parameter and buffer by its dotted name ("features.0.weight").
using StateDict = std::map<std::string, Tensor>;

class Module;
/// Runs before forward with its inputs; may return replacement inputs (empty: keep them).
using ForwardPreHook = std::function<std::vector<Tensor>(Module&, const std::vector<Tensor>&)>;
/// Runs after forward with its inputs and output; may return a replacement output (undefined:
/// keep it).
using ForwardHook =
    std::function<Tensor(Module&, const std::vector<Tensor>& inputs, const Tensor& output)>;
/// Runs when the gradient of the module's output is computed, with that gradient.
using BackwardHook = std::function<void(Module&, const Tensor& grad_output)>;

/// The base of every layer: owns named parameters, buffers and submodules.
class Module : public std::enable_shared_from_this<Module> {
public:
  /// `name`: the type name printing shows ("Linear"); empty: the class name.
  explicit Module(std::string name = "");
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The type name printing shows ("Linear" for LinearImpl, unless given).
  std::string name() const;

  /// Adds a parameter (a leaf that requires grad unless `requires_grad` is false) and returns the
  /// stored handle: assign it to a member, as LibTorch code does.
  Tensor& register_parameter(std::string name, Tensor tensor, bool requires_grad = true, WEFT_LOC);
  /// Adds a buffer: state that is saved and moved with the module but not trained (running stats).
  Tensor& register_buffer(std::string name, Tensor tensor, WEFT_LOC);
  /// Adds a submodule under `name`.
  template <typename M>
  std::shared_ptr<M> register_module(std::string name, std::shared_ptr<M> module, WEFT_LOC) {
    addChild(std::move(name), module, loc);
    return module;
  }
  /// Adds the module a holder (nn::Linear, ...) holds.
  template <typename H>
  requires requires(const H& h) { h.ptr(); }
  auto register_module(std::string name, const H& holder, WEFT_LOC) {
    return register_module(std::move(name), holder.ptr(), loc);
  }

  /// Parameters of this module and (with `recurse`) its submodules, each once.
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  /// This module (unless `include_self` is false) and every submodule, depth first.
  std::vector<std::shared_ptr<Module>> modules(bool include_self = true);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>
  named_modules(const std::string& prefix = "", bool include_self = true);
  /// The direct submodules.
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }

  /// Training mode (dropout drops, batch norm uses batch statistics) for this module and every
  /// submodule. A compiled function that reads the mode is traced again when it changes.
  virtual void train(bool on = true);
  /// Evaluation mode: train(false).
  void eval() { train(false); }
  /// Whether this module is in training mode.
  bool is_training() const;

  /// Converts every floating parameter and buffer to `dtype` in place (the handles stay valid).
  void to(DType dtype, WEFT_LOC);
  /// Moves parameters, buffers and their gradients to `device` in place (the handles stay
  /// valid, so an optimizer made before the move keeps working).
  void to(Device device, WEFT_LOC);
  /// Clears every parameter's gradient (set_to_none) or zeros it in place.
  void zero_grad(bool set_to_none = true);

  /// Every parameter and buffer by dotted name (sharing memory with the module).
  StateDict state_dict() const;
  /// Copies `dict` into the parameters and buffers in place (converting dtypes), after checking
  /// all of it. Strict: a missing or unexpected key is an error naming the key; otherwise those
  /// are skipped. A shape that differs or an undefined tensor is an error either way, as PyTorch.
  void load_state_dict(const StateDict& dict, bool strict = true, WEFT_LOC);

  /// Hooks around forward (run by the holder's call operator), as PyTorch's.
  void register_forward_pre_hook(ForwardPreHook hook);
  void register_forward_hook(ForwardHook hook);
  void register_full_backward_hook(BackwardHook hook);

  /// Prints the module's one-line description ("Linear(in_features=2, out_features=3,
  /// bias=true)"); containers print their children below it.
  virtual void pretty_print(std::ostream& os) const;

  /// Runs `forward` between this module's hooks (what a holder's call operator does).
  template <typename Fn> Tensor callWithHooks(std::vector<Tensor> inputs, Fn&& forward) {
    if (!hasHooks()) return forward(inputs);
    return runHooks(std::move(inputs),
                    std::function<Tensor(const std::vector<Tensor>&)>(std::forward<Fn>(forward)));
  }

private:
  void addChild(std::string name, std::shared_ptr<Module> module, std::source_location loc);
  void collect(const std::string& prefix, bool recurse, bool buffers, NamedTensors& out) const;
  bool hasHooks() const { return !preHooks_.empty() || !hooks_.empty() || !backwardHooks_.empty(); }
  Tensor runHooks(std::vector<Tensor> inputs,
                  const std::function<Tensor(const std::vector<Tensor>&)>& forward);

  /// compile() traces again when a mode the function read changes.
  TracedFlag training_{true};
  std::string name_;
  NamedTensors parameters_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  std::vector<ForwardPreHook> preHooks_;
  std::vector<ForwardHook> hooks_;
  std::vector<BackwardHook> backwardHooks_;
};

/// Prints the module tree as PyTorch does.
std::ostream& operator<<(std::ostream& os, const Module& module);

/// A shared handle to a module implementation: `nn::Linear` holds an `nn::LinearImpl`. Copies
/// share the module; `->` reaches its members; calling it runs forward between its hooks.
template <typename Impl> class ModuleHolder {
public:
  using ContainedType = Impl;
  /// Constructs the module from `args` (its options).
  template <typename... Args>
  requires(std::is_constructible_v<Impl, Args&&...> &&
           !(sizeof...(Args) == 1 && (std::is_base_of_v<ModuleHolder, std::decay_t<Args>> &&
                                      ...))) explicit ModuleHolder(Args&&... args)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  /// An empty holder, to assign a module to later.
  ModuleHolder(std::nullptr_t) {} // NOLINT
  /// Wraps an existing module.
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {} // NOLINT

  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    WEFT_CHECK(impl_ != nullptr, Value, "nn: this module holder is empty");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }

  /// Calls forward with `args`; tensor arguments pass through the module's forward hooks.
  template <typename... Args> decltype(auto) operator()(Args&&... args) const {
    Impl& m = *get();
    using R = decltype(m.forward(std::forward<Args>(args)...));
    if constexpr (std::is_same_v<R, Tensor> &&
                  (std::is_convertible_v<std::decay_t<Args>, Tensor> && ...)) {
      return m.callWithHooks({Tensor(args)...}, [&m](const std::vector<Tensor>& in) {
        return callUnpacked(m, in, std::index_sequence_for<Args...>{});
      });
    } else {
      return m.forward(std::forward<Args>(args)...);
    }
  }

private:
  template <size_t... I>
  static Tensor callUnpacked(Impl& m, const std::vector<Tensor>& in, std::index_sequence<I...>) {
    return m.forward(in[I]...);
  }
  std::shared_ptr<Impl> impl_;
};

template <typename Impl> std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << *m;
}

} // namespace weft::nn

/// Declares `Name` as the holder of `Name##Impl`, as LibTorch's TORCH_MODULE.
#define WEFT_MODULE(Name)                                                                          \
  class Name : public ::weft::nn::ModuleHolder<Name##Impl> {                                       \
  public:                                                                                          \
    using ::weft::nn::ModuleHolder<Name##Impl>::ModuleHolder;                                      \
  }
