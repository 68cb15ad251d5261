// Optimizers (SGD, Adam, AdamW, RMSprop, Adagrad) with parameter groups and state dicts, written
// with tensor ops so that a compiled train step traces the update: the learning rate and step
// counts are tensors the executable reads on every call, never numbers frozen into a trace.
#pragma once

#include "weft/nn/Module.h"
#include "weft/nn/Options.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace weft::optim {

/// What every optimizer's options have: the learning rate, kept in a 0-d float64 tensor that
/// set_lr() writes in place (a schedule changes it without a recompilation).
class OptimizerOptions {
public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  double get_lr() const;
  void set_lr(double lr);
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

/// Declares the options class `Name` with learning rate default `lr`; fields follow.
#define WEFT_OPTIMIZER_OPTIONS(Name)                                                               \
  Name& lr(double v) {                                                                             \
    set_lr(v);                                                                                     \
    return *this;                                                                                  \
  }                                                                                                \
  double lr() const {                                                                              \
    return get_lr();                                                                               \
  }                                                                                                \
  std::unique_ptr<OptimizerOptions> clone() const override {                                       \
    return std::make_unique<Name>(*this);                                                          \
  }

struct SGDOptions : OptimizerOptions {
  SGDOptions(double lr) : OptimizerOptions(lr) {} // NOLINT: as LibTorch
  WEFT_OPTIMIZER_OPTIONS(SGDOptions)
  WEFT_ARG(double, momentum) = 0;
  WEFT_ARG(double, dampening) = 0;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(bool, nesterov) = false;
};
struct AdamOptions : OptimizerOptions {
  AdamOptions(double lr = 1e-3) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdamOptions)
  WEFT_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(bool, amsgrad) = false;
};
struct AdamWOptions : OptimizerOptions {
  AdamWOptions(double lr = 1e-3) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdamWOptions)
  WEFT_ARG(Betas, betas) = std::make_tuple(0.9, 0.999);
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 1e-2;
  WEFT_ARG(bool, amsgrad) = false;
};
struct RMSpropOptions : OptimizerOptions {
  RMSpropOptions(double lr = 1e-2) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(RMSpropOptions)
  WEFT_ARG(double, alpha) = 0.99;
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(double, weight_decay) = 0;
  WEFT_ARG(double, momentum) = 0;
  WEFT_ARG(bool, centered) = false;
};
struct AdagradOptions : OptimizerOptions {
  AdagradOptions(double lr = 1e-2) : OptimizerOptions(lr) {} // NOLINT
  WEFT_OPTIMIZER_OPTIONS(AdagradOptions)
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
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  /// Updates every parameter that has a gradient (without recording autograd).
  virtual void step() = 0;
  /// Clears (set_to_none) or zeros every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  /// Adds a group; options it lacks come from the defaults.
  void add_param_group(const OptimizerParamGroup& group, WEFT_LOC);
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  const OptimizerOptions& defaults() const { return *defaults_; }
  /// Every state tensor by name ("state.<parameter index>.<key>", parameters numbered across
  /// groups) and each group's learning rate ("param_groups.<group>.lr").
  nn::StateDict state_dict() const;
  /// Copies a state dict made by state_dict() in place (missing state is created). An unknown
  /// key, or a shape that differs, is an error naming it.
  void load_state_dict(const nn::StateDict& dict, WEFT_LOC);

protected:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults,
            std::source_location loc);
  /// The state tensor `key` of `param`, made from `init` on first use (inside a compiled step,
  /// the first call makes it and the next one traces again to read it).
  Tensor& state(const Tensor& param, const std::string& key, const std::function<Tensor()>& init);
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

private:
  std::vector<OptimizerParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::map<const void*, std::map<std::string, Tensor>> state_; // by parameter identity
};

/// Stochastic gradient descent with momentum, dampening, Nesterov and weight decay.
class SGD : public Optimizer {
public:
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions defaults, WEFT_LOC);
  SGD(std::vector<Tensor> params, SGDOptions defaults, WEFT_LOC);
  void step() override;
};
/// Adam (and, with decoupled weight decay, AdamW).
class Adam : public Optimizer {
public:
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions defaults = {}, WEFT_LOC);
  Adam(std::vector<Tensor> params, AdamOptions defaults = {}, WEFT_LOC);
  void step() override;
};
class AdamW : public Optimizer {
public:
  AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults = {}, WEFT_LOC);
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = {}, WEFT_LOC);
  void step() override;
};
class RMSprop : public Optimizer {
public:
  RMSprop(std::vector<OptimizerParamGroup> groups, RMSpropOptions defaults = {}, WEFT_LOC);
  RMSprop(std::vector<Tensor> params, RMSpropOptions defaults = {}, WEFT_LOC);
  void step() override;
};
class Adagrad : public Optimizer {
public:
  Adagrad(std::vector<OptimizerParamGroup> groups, AdagradOptions defaults = {}, WEFT_LOC);
  Adagrad(std::vector<Tensor> params, AdagradOptions defaults = {}, WEFT_LOC);
  void step() override;
};

/// Scales all gradients so that their joint `norm_type` norm is at most `max_norm`; returns the
/// norm before clipping (a tensor: compiled code computes it per call).
Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, WEFT_LOC);
/// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value, WEFT_LOC);

} // namespace weft::optim

/// LibTorch's spelling: torch::nn::utils::clip_grad_norm_.
namespace weft::nn::utils {
using optim::clip_grad_norm_;
using optim::clip_grad_value_;
} // namespace weft::nn::utils
