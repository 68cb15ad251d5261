// Optimizers: groups, state and state dicts, and each update rule as PyTorch documents it.
#include "weft/optim/Optimizer.h"

#include <cmath>

namespace weft::optim {

// ---- options and groups ----

OptimizerOptions::OptimizerOptions(double lr) : lr_(full({}, lr, kFloat64)) {
  WEFT_CHECK(lr >= 0, Value, "optim: invalid learning rate: ", lr);
}
OptimizerOptions::OptimizerOptions(const OptimizerOptions& other)
    : lr_(other.lr_.detach().clone()) {}
OptimizerOptions& OptimizerOptions::operator=(const OptimizerOptions& other) {
  lr_ = other.lr_.detach().clone();
  return *this;
}

double OptimizerOptions::get_lr() const {
  return lr_.item<double>();
}

void OptimizerOptions::set_lr(double lr) {
  WEFT_CHECK(lr >= 0, Value, "optim: invalid learning rate: ", lr);
  NoGradGuard guard;
  Tensor t = lr_;
  t.fill_(lr);
}

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& other)
    : initial_lr(other.initial_lr), params_(other.params_),
      options_(other.options_ ? other.options_->clone() : nullptr) {}
OptimizerParamGroup& OptimizerParamGroup::operator=(const OptimizerParamGroup& other) {
  initial_lr = other.initial_lr;
  params_ = other.params_;
  options_ = other.options_ ? other.options_->clone() : nullptr;
  return *this;
}
OptimizerOptions& OptimizerParamGroup::options() {
  WEFT_CHECK(options_ != nullptr, Value, "optim: this parameter group has no options yet");
  return *options_;
}
const OptimizerOptions& OptimizerParamGroup::options() const {
  WEFT_CHECK(options_ != nullptr, Value, "optim: this parameter group has no options yet");
  return *options_;
}

// ---- the base ----

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups,
                     std::unique_ptr<OptimizerOptions> defaults, std::source_location loc)
    : defaults_(std::move(defaults)) {
  for (const OptimizerParamGroup& g : groups)
    add_param_group(g, loc);
}

void Optimizer::add_param_group(const OptimizerParamGroup& group, std::source_location loc) {
  CallSite cs(loc);
  OptimizerParamGroup g = group;
  for (const Tensor& p : g.params()) {
    WEFT_CHECK(p.defined() && p.is_leaf(), Value,
               "optim: can only optimize defined leaf tensors (parameters)");
    for (const OptimizerParamGroup& other : groups_)
      for (const Tensor& q : other.params())
        WEFT_CHECK(!p.is_same(q), Value,
                   "optim: some parameters appear in more than one parameter group");
  }
  if (!g.has_options()) g.set_options(defaults_->clone());
  groups_.push_back(std::move(g));
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard guard;
  for (OptimizerParamGroup& g : groups_)
    for (Tensor& p : g.params()) {
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad({});
      else
        grad.zero_();
    }
}

Tensor& Optimizer::state(const Tensor& param, const std::string& key,
                         const std::function<Tensor()>& init) {
  Tensor& slot = state_[param.impl().get()][key];
  if (!slot.defined()) slot = init();
  return slot;
}

Tensor Optimizer::stateOr(const Tensor& param, const std::string& key) const {
  auto it = state_.find(param.impl().get());
  if (it == state_.end()) return {};
  auto k = it->second.find(key);
  return k == it->second.end() ? Tensor() : k->second;
}

void Optimizer::setState(const Tensor& param, const std::string& key, Tensor value) {
  state_[param.impl().get()][key] = std::move(value);
}

nn::StateDict Optimizer::state_dict() const {
  nn::StateDict dict;
  size_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    dict.emplace("param_groups." + std::to_string(g) + ".lr", groups_[g].options().lr_tensor());
    for (const Tensor& p : groups_[g].params()) {
      if (auto it = state_.find(p.impl().get()); it != state_.end())
        for (const auto& [key, t] : it->second)
          dict.emplace("state." + std::to_string(index) + "." + key, t);
      ++index;
    }
  }
  return dict;
}

void Optimizer::load_state_dict(const nn::StateDict& dict, std::source_location loc) {
  CallSite cs(loc);
  std::vector<const Tensor*> params;
  for (const OptimizerParamGroup& g : groups_)
    for (const Tensor& p : g.params())
      params.push_back(&p);
  NoGradGuard guard;
  for (const auto& [name, value] : dict) {
    size_t dot1 = name.find('.'), dot2 = name.find('.', dot1 + 1);
    WEFT_CHECK(dot1 != std::string::npos && dot2 != std::string::npos, Value,
               "optim::load_state_dict: unexpected key '", name, "'");
    std::string kind = name.substr(0, dot1), key = name.substr(dot2 + 1);
    size_t index = std::stoul(name.substr(dot1 + 1, dot2 - dot1 - 1));
    if (kind == "param_groups" && key == "lr" && index < groups_.size()) {
      groups_[index].options().set_lr(value.item<double>());
    } else if (kind == "state" && index < params.size()) {
      Tensor mine = stateOr(*params[index], key);
      if (!mine.defined()) {
        setState(*params[index], key, value.detach().clone());
        continue;
      }
      WEFT_CHECK(mine.sizes() == value.sizes(), Shape, "optim::load_state_dict: '", name,
                 "' has shape ", shapeString(value.sizes()), " but the optimizer's has ",
                 shapeString(mine.sizes()));
      mine.copy_(value);
    } else {
      WEFT_FAIL(Value, "optim::load_state_dict: unexpected key '", name, "'");
    }
  }
}

namespace {

/// The gradient with L2 weight decay folded in, as PyTorch's coupled decay.
Tensor decayed(const Tensor& grad, const Tensor& param, double weightDecay) {
  return weightDecay != 0 ? grad + param * weightDecay : grad;
}

std::vector<OptimizerParamGroup> oneGroup(std::vector<Tensor> params) {
  return {OptimizerParamGroup(std::move(params))};
}

} // namespace

#define WEFT_OPTIMIZER_CONSTRUCTORS(Name)                                                          \
  Name::Name(std::vector<OptimizerParamGroup> groups, Name##Options defaults,                      \
             std::source_location loc)                                                             \
      : Optimizer(std::move(groups), std::make_unique<Name##Options>(defaults), loc) {}            \
  Name::Name(std::vector<Tensor> params, Name##Options defaults, std::source_location loc)         \
      : Name(oneGroup(std::move(params)), std::move(defaults), loc) {}

WEFT_OPTIMIZER_CONSTRUCTORS(SGD)
WEFT_OPTIMIZER_CONSTRUCTORS(Adam)
WEFT_OPTIMIZER_CONSTRUCTORS(AdamW)
WEFT_OPTIMIZER_CONSTRUCTORS(RMSprop)
WEFT_OPTIMIZER_CONSTRUCTORS(Adagrad)
#undef WEFT_OPTIMIZER_CONSTRUCTORS

void SGD::step() {
  NoGradGuard guard;
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
    WEFT_CHECK(!o.nesterov() || (o.momentum() > 0 && o.dampening() == 0), Value,
               "SGD: Nesterov momentum requires a momentum and zero dampening");
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Tensor d = decayed(g, p, o.weight_decay());
      if (o.momentum() != 0) {
        Tensor buf = stateOr(p, "momentum_buffer");
        if (buf.defined())
          buf.mul_(o.momentum()).add_(d, 1 - o.dampening());
        else
          setState(p, "momentum_buffer", buf = d.clone()); // the first step, as PyTorch
        d = o.nesterov() ? d + buf * o.momentum() : buf;
      }
      p.sub_(d * o.lr_tensor());
    }
  }
}

void Optimizer::adamUpdate(OptimizerParamGroup& group, const AdamHyper& h) {
  const Tensor& lr = group.options().lr_tensor();
  for (Tensor& p : group.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    auto zeroState = [&] { return zeros_like(p); };
    Tensor& m = state(p, "exp_avg", zeroState);
    Tensor& v = state(p, "exp_avg_sq", zeroState);
    Tensor& step = state(p, "step", [] { return zeros({}, kFloat64); });
    // The scalars first: compiled, everything below is then one kernel over the parameter.
    step.add_(1);
    Tensor bc1 = 1.0 - full({}, h.beta1, kFloat64).pow(step);
    Tensor bc2 = 1.0 - full({}, h.beta2, kFloat64).pow(step);
    if (h.decoupled && h.weightDecay != 0)
      p.mul_(1.0 - lr * h.weightDecay); // AdamW
    else
      g = decayed(g, p, h.weightDecay);
    m.mul_(h.beta1).add_(g, 1 - h.beta1);
    v.mul_(h.beta2).add_(g * g, 1 - h.beta2);
    Tensor second = v;
    if (h.amsgrad) {
      Tensor& maxV = state(p, "max_exp_avg_sq", zeroState);
      maxV.copy_(maximum(maxV, v));
      second = maxV;
    }
    // Step by step, in place where possible: one expression would keep all five parameter-sized
    // temporaries alive until its end (two at a time here; same operations, same bits).
    Tensor update = second.sqrt();
    update.div_(bc2.sqrt()).add_(h.eps);
    update = m / update;
    update.mul_(lr / bc1);
    p.sub_(update);
  }
}

void Adam::step() {
  NoGradGuard guard;
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    adamUpdate(group, {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
                       o.amsgrad(), false});
  }
}

void AdamW::step() {
  NoGradGuard guard;
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    adamUpdate(group, {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
                       o.amsgrad(), true});
  }
}

void RMSprop::step() {
  NoGradGuard guard;
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const RMSpropOptions&>(group.options());
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      g = decayed(g, p, o.weight_decay());
      auto zeroState = [&] { return zeros_like(p); };
      Tensor& sq = state(p, "square_avg", zeroState);
      sq.mul_(o.alpha()).add_(g * g, 1 - o.alpha());
      Tensor avg;
      if (o.centered()) {
        Tensor& ga = state(p, "grad_avg", zeroState);
        ga.mul_(o.alpha()).add_(g, 1 - o.alpha());
        avg = (sq - ga * ga).sqrt() + o.eps();
      } else {
        avg = sq.sqrt() + o.eps();
      }
      if (o.momentum() > 0) {
        Tensor& buf = state(p, "momentum_buffer", zeroState);
        buf.mul_(o.momentum()).add_(g / avg);
        p.sub_(buf * o.lr_tensor());
      } else {
        p.sub_(g / avg * o.lr_tensor());
      }
    }
  }
}

void Adagrad::step() {
  NoGradGuard guard;
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      Tensor& step = state(p, "step", [] { return zeros({}, kFloat64); });
      Tensor& sum = state(p, "sum", [&] { return full_like(p, o.initial_accumulator_value()); });
      step.add_(1);
      g = decayed(g, p, o.weight_decay());
      Tensor clr = o.lr_tensor() / ((step - 1.0) * o.lr_decay() + 1.0);
      sum.add_(g * g);
      p.sub_(g / (sum.sqrt() + o.eps()) * clr);
    }
  }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double maxNorm, double normType,
                       std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(normType > 0, Value, "clip_grad_norm_: norm_type must be positive, got ", normType);
  NoGradGuard guard;
  std::vector<Tensor> grads;
  for (const Tensor& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return zeros({});
  Tensor total;
  if (std::isinf(normType)) {
    for (const Tensor& g : grads) {
      Tensor m = g.abs().amax().to(kFloat32);
      total = total.defined() ? maximum(total, m) : m;
    }
  } else {
    for (const Tensor& g : grads) {
      Tensor s = g.abs().pow(normType).sum().to(kFloat32);
      total = total.defined() ? total + s : s;
    }
    total = total.pow(1.0 / normType);
  }
  Tensor coef = (maxNorm / (total + 1e-6)).clamp(std::nullopt, 1.0);
  for (Tensor& g : grads)
    g.mul_(coef);
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clipValue,
                      std::source_location loc) {
  CallSite cs(loc);
  NoGradGuard guard;
  for (const Tensor& p : parameters)
    if (Tensor g = p.grad(); g.defined()) g.clamp_(-clipValue, clipValue);
}

} // namespace weft::optim
