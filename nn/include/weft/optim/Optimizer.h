// Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) with parameter groups and state dicts, written
// with tensor ops so that a compiled train step traces the update: the learning rate and step
// counts are tensors the executable reads on every call, never numbers frozen into a trace.
#pragma once

#include "weft/nn/Module.h"
#include "weft/nn/Options.h"

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace weft::optim {

/// What every optimizer's options have: the learning rate, kept in a 0-d float64 tensor that
/// set_lr() writes in place (a schedule changes it without a recompilation).
class OptimizerOptions {
public:
  virtual ~OptimizerOptions() = default;
  /// A copy of the options (with a learning-rate tensor of its own).
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  /// The optimizer these options are for ("Adam"), for messages.
  virtual const char* optimizer() const = 0;
  /// Checks every option but the learning rate against PyTorch's ranges (NaN never passes): a
  /// ValueError naming the optimizer, the option and its value.
  virtual void check() const = 0;
  /// The learning rate.
  double get_lr() const;
  /// Sets the learning rate in place; a ValueError unless lr >= 0 (NaN is not).
  void set_lr(double lr, WEFT_LOC);
  /// The learning rate as the tensor compiled code reads.
  const Tensor& lr_tensor() const { return lr_; }

protected:
  explicit OptimizerOptions(double lr);
  OptimizerOptions(const OptimizerOptions& other); ///< copies the value, not the tensor
  OptimizerOptions& operator=(const OptimizerOptions& other);

private:
  Tensor lr_;
};

/// Adam's (beta1, beta2).
using Betas = std::tuple<double, double>;

/// Declares the members every options class `Name` of optimizer `Optimizer` has; fields follow.
#define WEFT_OPTIMIZER_OPTIONS(Name, Optimizer)                                                    \
  Name& lr(double v, WEFT_LOC) {                                                                   \
    set_lr(v, loc);                                                                                \
    return *this;                                                                                  \
  }                                                                                                \
  double lr() const {                                                                              \
    return get_lr();                                                                               \
  }                                                                                                \
  std::unique_ptr<OptimizerOptions> clone() const override {                                       \
    return std::make_unique<Name>(*this);                                                          \
  }                                                                                                \
  const char* optimizer() const override {                                                         \
    return Optimizer;                                                                              \
  }                                                                                                \
  void check() const override;

struct SGDOptions : OptimizerOptions {
  SGDOptions(double lr) : OptimizerOptions(lr) {} // NOLINT: as LibTorch
  WEFT_OPTIMIZER_OPTIONS(SGDOptions, "SGD")
  WEFT_ARG(double, momentum) = 0;
  WEFT_ARG(double, dampening) = 0;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(bool, nesterov) = false;
};
struct AdamOptions : OptimizerOptions {
  AdamOptions(double lr = 1e-3) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdamOptions, "Adam")
  WEFT_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(bool, amsgrad) = false;
};
struct AdamWOptions : OptimizerOptions {
  AdamWOptions(double lr = 1e-3) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdamWOptions, "AdamW")
  WEFT_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 1e-2;
  WEFT_ARG(bool, amsgrad) = false;
};
struct RMSpropOptions : OptimizerOptions {
  RMSpropOptions(double lr = 1e-2) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(RMSpropOptions, "RMSprop")
  WEFT_ARG(double, alpha) = 0.99;
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(double, momentum) = 0;
  WEFT_ARG(bool, centered) = false;
};
struct AdagradOptions : OptimizerOptions {
  AdagradOptions(double lr = 1e-2) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdagradOptions, "Adagrad")
  WEFT_ARG(double, lr_decay) = 0;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(double, initial_accumulator_value) = 0;
  WEFT_ARG(double, eps) = 1e-10;
};
#undef WEFT_OPTIMIZER_OPTIONS

/// Parameters that share options.
class OptimizerParamGroup {
public:
  OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {} // NOLINT
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  OptimizerParamGroup(const OptimizerParamGroup& other);
  OptimizerParamGroup& operator=(const OptimizerParamGroup& other);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;
  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  /// The learning rate before any schedule changed it: set by the first schedule made on the
  /// group, the base of every later one (PyTorch's `initial_lr`).
  std::optional<double> initial_lr;

private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

/// The base of every optimizer: groups, per-parameter state, zero_grad and state dicts.
class Optimizer {
public:
  /// A state tensor an optimizer keeps per parameter: its key, and whether it is a 0-d count
  /// (else it has the parameter's shape and dtype).
  struct StateKey {
    const char* name;
    bool scalar;
  };
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  /// Updates every parameter that has a gradient (without recording autograd). Options changed
  /// since construction are checked here first: an option out of range updates nothing.
  void step(WEFT_LOC);
  /// Clears (set_to_none) or zeros every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  /// Adds a group; options it lacks come from the defaults. Its options must be this optimizer's
  /// kind and in range.
  void add_param_group(const OptimizerParamGroup& group, WEFT_LOC);
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  /// Every state tensor by name ("state.<parameter index>.<key>", parameters numbered across
  /// groups), each group's learning rate ("param_groups.<group>.lr") and the indices of its
  /// parameters ("param_groups.<group>.params", int64, as PyTorch's "params").
  nn::StateDict state_dict() const;
  /// Copies a state dict made by state_dict() in place (missing state is created, converted to
  /// the parameter's dtype as PyTorch does). The whole dict is checked first, as PyTorch does: a
  /// different number of groups or of parameters in a group, an unknown key, a state tensor of
  /// the wrong shape or a learning rate out of range is an error naming the key, and nothing
  /// changes.
  void load_state_dict(const nn::StateDict& dict, WEFT_LOC);
  /// Makes the state tensors step() would make on its first call, as that call makes them (zeros;
  /// Adagrad's sum at initial_accumulator_value), for every parameter lacking them, so that a
  /// compiled step reads them from its first trace and export_train_step() carries them. Where
  /// PyTorch's first step is special (SGD with momentum and dampening: the buffer takes the
  /// gradient undamped) a ValueError says to take a step first.
  void init_state(WEFT_LOC);

protected:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults,
            std::source_location loc);
  /// The update rule: every parameter of every group with a gradient, options already checked.
  virtual void update() = 0;
  /// Every state key this optimizer keeps, so that load_state_dict can check a dict.
  virtual std::span<const StateKey> stateKeys() const = 0;
  /// init_state() for `param` of `group` (an optimizer without lazily made state does nothing).
  virtual void initState(const OptimizerParamGroup& group, const Tensor& param) {
    (void)group;
    (void)param;
  }
  /// The state tensor `key` of `param`, made from `init` on first use (inside a compiled step,
  /// the first call makes it and the next one traces again to read it); without `init`, one
  /// initState() made.
  Tensor& state(const Tensor& param, const std::string& key,
                const std::function<Tensor()>& init = {});
  /// `param`'s state tensor `key`, or undefined before it is made.
  Tensor stateOr(const Tensor& param, const std::string& key) const;
  void setState(const Tensor& param, const std::string& key, Tensor value);
  /// Adam's hyperparameters; `decoupled`: AdamW's weight decay.
  struct AdamHyper {
    double beta1, beta2, eps, weightDecay;
    bool amsgrad, decoupled;
  };
  /// One Adam or AdamW update of every parameter in `group` (PyTorch's formulas).
  void adamUpdate(OptimizerParamGroup& group, const AdamHyper& h);
  /// Adam's and AdamW's state for `param`, made as adamUpdate makes it.
  void adamInit(const Tensor& param, bool amsgrad);

private:
  struct LoadPlan;
  void planGroupEntry(LoadPlan& plan, const std::string& op, const std::string& name, size_t group,
                      std::string_view field, const Tensor& value) const;
  void planStateEntry(LoadPlan& plan, const std::string& op, const std::string& name, size_t index,
                      std::string_view key, const Tensor& value,
                      const std::vector<const Tensor*>& params) const;
  void applyLoad(LoadPlan& plan);

  std::vector<OptimizerParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::map<const void*, std::map<std::string, Tensor>> state_; // by parameter identity
};

/// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.
class SGD : public Optimizer {
public:
  /// Optimizes `groups`; a group without options takes `defaults`.
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions defaults, WEFT_LOC);
  /// Optimizes `params` as one group.
  SGD(std::vector<Tensor> params, SGDOptions defaults, WEFT_LOC);

protected:
  void update() override;
  std::span<const StateKey> stateKeys() const override;
  void initState(const OptimizerParamGroup& group, const Tensor& param) override;
};
/// Adam, as torch.optim.Adam (L2 weight decay folded into the gradient).
class Adam : public Optimizer {
public:
  /// Optimizes `groups`; a group without options takes `defaults`.
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions defaults = {}, WEFT_LOC);
  /// Optimizes `params` as one group.
  Adam(std::vector<Tensor> params, AdamOptions defaults = {}, WEFT_LOC);

protected:
  void update() override;
  std::span<const StateKey> stateKeys() const override;
  void initState(const OptimizerParamGroup& group, const Tensor& param) override;
};
/// AdamW: Adam with decoupled weight decay, as torch.optim.AdamW.
class AdamW : public Optimizer {
public:
  /// Optimizes `groups`; a group without options takes `defaults`.
  AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults = {}, WEFT_LOC);
  /// Optimizes `params` as one group.
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {}, WEFT_LOC);

protected:
  void update() override;
  std::span<const StateKey> stateKeys() const override;
  void initState(const OptimizerParamGroup& group, const Tensor& param) override;
};
/// RMSprop (with momentum, centered), as torch.optim.RMSprop.
class RMSprop : public Optimizer {
public:
  /// Optimizes `groups`; a group without options takes `defaults`.
  RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions defaults = {}, WEFT_LOC);
  /// Optimizes `params` as one group.
  RMSprop(std::vector<Tensor> params, RMSpropOptions defaults = {}, WEFT_LOC);

protected:
  void update() override;
  std::span<const StateKey> stateKeys() const override;
  void initState(const OptimizerParamGroup& group, const Tensor& param) override;
};
/// Adagrad (with learning-rate decay), as torch.optim.Adagrad.
class Adagrad : public Optimizer {
public:
  /// Optimizes `groups`; a group without options takes `defaults`.
  Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions defaults = {}, WEFT_LOC);
  /// Optimizes `params` as one group.
  Adagrad(std::vector<Tensor> params, AdagradOptions defaults = {}, WEFT_LOC);

protected:
  void update() override;
  std::span<const StateKey> stateKeys() const override;
  void initState(const OptimizerParamGroup& group, const Tensor& param) override;
};

/// Scales all gradients so that their joint `norm_type` norm is at most `max_norm` (>= 0;
/// norm_type > 0 or inf); returns the norm before clipping (a tensor: compiled code computes it
/// per call).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, WEFT_LOC);
/// Clamps every gradient element into [-clip_value, clip_value] (clip_value >= 0).
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value, WEFT_LOC);

} // namespace weft::optim

/// LibTorch's spelling: torch::nn::utils::clip_grad_norm_.
namespace weft::nn::utils {
using optim::clip_grad_norm_;
using optim::clip_grad_value_;
} // namespace weft::nn::utils
