// Optimizers: groups, state and state dicts, and each update rule as PyTorch documents it.
#include "weft/optim/Optimizer.h"

#include "weft/runtime/InputFile.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <typeinfo>

namespace weft::optim {

// ---- options and groups ----

namespace {

/// PyTorch's `0.0 <= value` check (NaN fails it).
void checkAtLeastZero(const OptimizerOptions& o, const char* option, double value) {
  WEFT_CHECK(value >= 0, Value, o.optimizer(), ": invalid ", option, " value: ", value,
             " (it must be >= 0)");
}

void checkNotNaN(const OptimizerOptions& o, const char* option, double value) {
  WEFT_CHECK(!std::isnan(value), Value, o.optimizer(), ": invalid ", option, " value: nan");
}

/// PyTorch's `0.0 <= beta < 1.0` for both betas.
void checkBetas(const OptimizerOptions& o, const Betas& betas) {
  const double b[2] = {std::get<0>(betas), std::get<1>(betas)};
  for (int i = 0; i < 2; ++i)
    WEFT_CHECK(b[i] >= 0 && b[i] < 1, Value, o.optimizer(), ": invalid beta parameter at index ", i,
               ": ", b[i], " (betas must be in [0, 1))");
}

void checkLr(const OptimizerOptions& o, double lr) {
  WEFT_CHECK(lr >= 0, Value, o.optimizer(), ": invalid learning rate: ", lr, " (it must be >= 0)");
}

} // namespace

void SGDOptions::check() const {
  checkAtLeastZero(*this, "momentum", momentum());
  checkNotNaN(*this, "dampening", dampening());
  checkAtLeastZero(*this, "weight_decay", weight_decay());
  WEFT_CHECK(!nesterov() || (momentum() > 0 && dampening() == 0), Value,
             "SGD: Nesterov momentum requires a momentum and zero dampening (got momentum ",
             momentum(), " and dampening ", dampening(), ")");
}

void AdamOptions::check() const {
  checkAtLeastZero(*this, "eps", eps());
  checkBetas(*this, betas());
  checkAtLeastZero(*this, "weight_decay", weight_decay());
}

void AdamWOptions::check() const {
  checkAtLeastZero(*this, "eps", eps());
  checkBetas(*this, betas());
  checkAtLeastZero(*this, "weight_decay", weight_decay());
}

void RMSpropOptions::check() const {
  checkAtLeastZero(*this, "eps", eps());
  checkAtLeastZero(*this, "momentum", momentum());
  checkAtLeastZero(*this, "weight_decay", weight_decay());
  checkAtLeastZero(*this, "alpha", alpha());
}

void AdagradOptions::check() const {
  checkAtLeastZero(*this, "lr_decay", lr_decay());
  checkAtLeastZero(*this, "weight_decay", weight_decay());
  checkAtLeastZero(*this, "initial_accumulator_value", initial_accumulator_value());
  checkAtLeastZero(*this, "eps", eps());
}

OptimizerOptions::OptimizerOptions(double lr) : lr_(full({}, lr, kFloat64)) {}
OptimizerOptions::OptimizerOptions(const OptimizerOptions& other)
    : lr_(other.lr_.detach().clone()) {}
OptimizerOptions& OptimizerOptions::operator=(const OptimizerOptions& other) {
  lr_ = other.lr_.detach().clone();
  return *this;
}

double OptimizerOptions::get_lr() const {
  return lr_.item<double>();
}

void OptimizerOptions::set_lr(double lr, std::source_location loc) {
  CallSite cs(loc);
  checkLr(*this, lr);
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
  CallSite cs(loc);
  checkLr(*defaults_, defaults_->get_lr());
  defaults_->check();
  const bool none = std::all_of(groups.begin(), groups.end(),
                                [](const OptimizerParamGroup& g) { return g.params().empty(); });
  WEFT_CHECK(!none, Value, defaults_->optimizer(), ": got an empty parameter list");
  for (const OptimizerParamGroup& g : groups)
    add_param_group(g, loc);
}

void Optimizer::step(std::source_location loc) {
  CallSite cs(loc);
  for (const OptimizerParamGroup& g : groups_) // options may have changed since construction
    g.options().check();
  NoGradGuard guard;
  update();
}

void Optimizer::add_param_group(const OptimizerParamGroup& group, std::source_location loc) {
  CallSite cs(loc);
  const char* name = defaults_->optimizer();
  if (group.has_options()) {
    const OptimizerOptions& o = group.options();
    // The update rule reads the group's options as its own kind: another kind would be garbage.
    WEFT_CHECK(typeid(o) == typeid(*defaults_), Value, name, ": parameter group ", groups_.size(),
               " has options for ", o.optimizer(), "; give it ", name, "'s options");
    checkLr(o, o.get_lr());
    o.check();
  }
  OptimizerParamGroup g = group;
  for (const Tensor& p : g.params()) {
    WEFT_CHECK(p.defined() && p.is_leaf(), Value, name,
               ": can only optimize defined leaf tensors (parameters)");
    for (const OptimizerParamGroup& other : groups_)
      for (const Tensor& q : other.params())
        WEFT_CHECK(!p.is_same(q), Value, name,
                   ": some parameters appear in more than one parameter group");
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
  if (!slot.defined()) {
    WEFT_INTERNAL_ASSERT(init != nullptr, "optimizer state '", key, "' was not made");
    slot = init();
  }
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
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string group = "param_groups." + std::to_string(g);
    dict.emplace(group + ".lr", groups_[g].options().lr_tensor());
    std::vector<int64_t> ids;
    for (const Tensor& p : groups_[g].params()) {
      if (auto it = state_.find(p.impl().get()); it != state_.end())
        for (const auto& [key, t] : it->second)
          dict.emplace("state." + std::to_string(index) + "." + key, t);
      ids.push_back(index++);
    }
    dict.emplace(group + ".params", from_vector(ids, {static_cast<int64_t>(ids.size())}));
  }
  return dict;
}

namespace {

/// A state-dict key "kind.<index>.<rest>", split.
struct KeyParts {
  std::string_view kind;
  size_t index = 0;
  std::string_view rest;
};

std::optional<KeyParts> splitKey(std::string_view name) {
  const size_t dot1 = name.find('.');
  const size_t dot2 = dot1 == std::string_view::npos ? dot1 : name.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos) return std::nullopt;
  const std::string_view digits = name.substr(dot1 + 1, dot2 - dot1 - 1);
  KeyParts k{name.substr(0, dot1), 0, name.substr(dot2 + 1)};
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k.index);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size())
    return std::nullopt;
  return k;
}

/// The one number a loaded tensor holds.
double numberIn(const std::string& op, const std::string& name, const Tensor& t) {
  WEFT_CHECK(t.defined() && t.numel() == 1, Value, op, ": '", name, "' must hold one number, got ",
             t.defined() ? "shape " + shapeString(t.sizes()) : "an undefined tensor");
  return t.to(kFloat64).item<double>();
}

} // namespace

namespace {
/// A parameter's step count as an optimizer keeps it: a float64 scalar on the CPU (as PyTorch's
/// default optimizers keep it), but a float32 scalar on the GPU beside a parameter there (as
/// PyTorch's fused and capturable optimizers): the step's scalar math (Adam's bias corrections,
/// with its learning rate in float32 too) then runs there with the rest of the update, compiled
/// into its kernel, with no wait for the host and no float64, which many GPUs lack.
TensorOptions stepOptions(const Tensor& p) {
  return p.device().is_vulkan() ? TensorOptions().dtype(kFloat32).device(p.device())
                                : TensorOptions().dtype(kFloat64);
}

/// A group's learning rate (a float64 CPU scalar) in the precision of a parameter's step count
/// (stepOptions): itself beside a CPU parameter, a float32 copy (made once, in `float32`) beside a
/// GPU one, so that the scalar math mixing the two stays float32 there.
const Tensor& rateFor(const Tensor& step, const Tensor& lr, Tensor& float32) {
  if (step.dtype() != kFloat32) return lr;
  if (!float32.defined()) float32 = lr.to(kFloat32);
  return float32;
}
} // namespace

/// What load_state_dict writes once the whole dict has been checked.
struct Optimizer::LoadPlan {
  std::vector<std::optional<double>> lrs; // per group
  struct Write {
    const Tensor* param;
    std::string key;
    Tensor value; // converted as the optimizer keeps it
  };
  std::vector<Write> writes;
};

void Optimizer::planGroupEntry(LoadPlan& plan, const std::string& op, const std::string& name,
                               size_t g, std::string_view field, const Tensor& value) const {
  WEFT_CHECK(g < groups_.size(), Value, op, ": '", name, "' is for parameter group ", g,
             ", but this ", defaults_->optimizer(), " has ", groups_.size(),
             " (the dict was saved from an optimizer with more parameter groups)");
  if (field == "lr") {
    const double lr = numberIn(op, name, value);
    WEFT_CHECK(lr >= 0, Value, op, ": '", name, "' holds learning rate ", lr,
               ", which must be >= 0");
    plan.lrs[g] = lr;
    return;
  }
  WEFT_CHECK(field == "params", Value, op, ": unexpected key '", name, "'");
  const size_t mine = groups_[g].params().size();
  WEFT_CHECK(value.defined() && value.dim() == 1 && static_cast<size_t>(value.numel()) == mine,
             Value, op, ": '", name, "' lists ",
             value.defined() ? std::to_string(value.numel()) : "no", " parameters, but group ", g,
             " of this ", defaults_->optimizer(), " has ", mine,
             " (the dict was saved from another model or grouping)");
}

void Optimizer::planStateEntry(LoadPlan& plan, const std::string& op, const std::string& name,
                               size_t index, std::string_view key, const Tensor& value,
                               const std::vector<const Tensor*>& params) const {
  WEFT_CHECK(index < params.size(), Value, op, ": '", name, "' is for parameter ", index,
             ", but this ", defaults_->optimizer(), " has ", params.size(), " parameters");
  const StateKey* spec = nullptr;
  std::string known;
  for (const StateKey& k : stateKeys()) {
    known += (known.empty() ? "" : ", ") + std::string(k.name);
    if (key == k.name) spec = &k;
  }
  WEFT_CHECK(spec != nullptr, Value, op, ": unexpected key '", name, "' (", defaults_->optimizer(),
             " keeps ", known, " per parameter)");
  WEFT_CHECK(value.defined(), Value, op, ": '", name, "' is an undefined tensor");
  const Tensor& p = *params[index];
  if (spec->scalar) {
    numberIn(op, name, value);
    const TensorOptions kept = stepOptions(p); // converted first: a GPU may lack float64
    plan.writes.push_back(
        {&p, std::string(key), value.detach().reshape({}).to(kept.dtype_).to(kept.device_).clone()});
    return;
  }
  WEFT_CHECK(value.sizes() == p.sizes(), Shape, op, ": '", name, "' has shape ",
             shapeString(value.sizes()), " but parameter ", index, " has shape ",
             shapeString(p.sizes()));
  plan.writes.push_back({&p, std::string(key), value.detach().to(p.dtype()).to(p.device()).clone()});
}

void Optimizer::load_state_dict(const nn::StateDict& dict, std::source_location loc) {
  CallSite cs(loc);
  const std::string op = std::string(defaults_->optimizer()) + "::load_state_dict";
  detail::convertStdExceptions(op.c_str(), [&] {
    std::vector<const Tensor*> params;
    for (const OptimizerParamGroup& g : groups_)
      for (const Tensor& p : g.params())
        params.push_back(&p);
    LoadPlan plan;
    plan.lrs.resize(groups_.size());
    for (const auto& [name, value] : dict) {
      std::optional<KeyParts> k = splitKey(name);
      WEFT_CHECK(k && (k->kind == "param_groups" || k->kind == "state"), Value, op,
                 ": unexpected key '", detail::excerpt(name, 80),
                 "' (an optimizer's keys are param_groups.<group>.lr, "
                 "param_groups.<group>.params and state.<parameter>.<name>)");
      if (k->kind == "param_groups")
        planGroupEntry(plan, op, name, k->index, k->rest, value);
      else
        planStateEntry(plan, op, name, k->index, k->rest, value, params);
    }
    for (size_t g = 0; g < groups_.size(); ++g)
      WEFT_CHECK(plan.lrs[g], Value, op, ": the dict has no 'param_groups.", g, ".lr', but this ",
                 defaults_->optimizer(), " has ", groups_.size(),
                 " parameter groups (the dict was saved from an optimizer with fewer)");
    applyLoad(plan);
  });
}

void Optimizer::applyLoad(LoadPlan& plan) {
  NoGradGuard guard;
  for (size_t g = 0; g < groups_.size(); ++g)
    groups_[g].options().set_lr(*plan.lrs[g]);
  // The dict's state replaces the optimizer's, as PyTorch's: state it does not hold is dropped
  // (a step makes it afresh).
  std::map<const void*, std::map<std::string, Tensor>> kept;
  for (const LoadPlan::Write& w : plan.writes)
    if (Tensor mine = stateOr(*w.param, w.key); mine.defined())
      kept[w.param->impl().get()][w.key] = mine;
  state_ = std::move(kept);
  for (LoadPlan::Write& w : plan.writes) {
    // Existing state is written in place: a compiled step reads these very tensors.
    Tensor mine = stateOr(*w.param, w.key);
    if (mine.defined() && mine.sizes() == w.value.sizes() && mine.dtype() == w.value.dtype())
      mine.copy_(w.value);
    else
      setState(*w.param, w.key, std::move(w.value));
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

namespace {
constexpr Optimizer::StateKey kSGDState[] = {{"momentum_buffer", false}};
constexpr Optimizer::StateKey kAdamState[] = {
    {"step", true}, {"exp_avg", false}, {"exp_avg_sq", false}, {"max_exp_avg_sq", false}};
constexpr Optimizer::StateKey kRMSpropState[] = {
    {"square_avg", false}, {"grad_avg", false}, {"momentum_buffer", false}};
constexpr Optimizer::StateKey kAdagradState[] = {{"step", true}, {"sum", false}};
} // namespace

std::span<const Optimizer::StateKey> SGD::stateKeys() const {
  return kSGDState;
}
std::span<const Optimizer::StateKey> Adam::stateKeys() const {
  return kAdamState;
}
std::span<const Optimizer::StateKey> AdamW::stateKeys() const {
  return kAdamState;
}
std::span<const Optimizer::StateKey> RMSprop::stateKeys() const {
  return kRMSpropState;
}
std::span<const Optimizer::StateKey> Adagrad::stateKeys() const {
  return kAdagradState;
}

void Optimizer::init_state(std::source_location loc) {
  CallSite cs(loc);
  NoGradGuard guard;
  for (const OptimizerParamGroup& g : groups_)
    for (const Tensor& p : g.params())
      initState(g, p);
}

void SGD::initState(const OptimizerParamGroup& group, const Tensor& p) {
  const auto& o = static_cast<const SGDOptions&>(group.options());
  if (o.momentum() == 0 || stateOr(p, "momentum_buffer").defined()) return;
  // PyTorch's first step sets the buffer to the gradient: a zero buffer gives the same only
  // without dampening.
  WEFT_CHECK(o.dampening() == 0, Value,
             "SGD.init_state: with dampening, the first step sets the momentum buffer to the "
             "gradient undamped, which no buffer made beforehand reproduces; take one step first");
  setState(p, "momentum_buffer", zeros_like(p));
}


void Optimizer::adamInit(const Tensor& p, bool amsgrad) {
  auto zeroState = [&] { return zeros_like(p); };
  state(p, "exp_avg", zeroState);
  state(p, "exp_avg_sq", zeroState);
  state(p, "step", [&] { return zeros({}, stepOptions(p)); });
  if (amsgrad) state(p, "max_exp_avg_sq", zeroState);
}

void Adam::initState(const OptimizerParamGroup& group, const Tensor& p) {
  adamInit(p, static_cast<const AdamOptions&>(group.options()).amsgrad());
}

void AdamW::initState(const OptimizerParamGroup& group, const Tensor& p) {
  adamInit(p, static_cast<const AdamWOptions&>(group.options()).amsgrad());
}

void RMSprop::initState(const OptimizerParamGroup& group, const Tensor& p) {
  const auto& o = static_cast<const RMSpropOptions&>(group.options());
  auto zeroState = [&] { return zeros_like(p); };
  state(p, "square_avg", zeroState);
  if (o.centered()) state(p, "grad_avg", zeroState);
  if (o.momentum() > 0) state(p, "momentum_buffer", zeroState);
}

void Adagrad::initState(const OptimizerParamGroup& group, const Tensor& p) {
  const auto& o = static_cast<const AdagradOptions&>(group.options());
  state(p, "step", [&] { return zeros({}, stepOptions(p)); });
  state(p, "sum", [&] { return full_like(p, o.initial_accumulator_value()); });
}

void SGD::update() {
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const SGDOptions&>(group.options());
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
  Tensor lr32; // rateFor's
  for (Tensor& p : group.params()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    adamInit(p, h.amsgrad);
    Tensor& m = state(p, "exp_avg");
    Tensor& v = state(p, "exp_avg_sq");
    Tensor& step = state(p, "step");
    const Tensor& lr = rateFor(step, group.options().lr_tensor(), lr32);
    // The scalars first: compiled, everything below is then one kernel over the parameter.
    step.add_(1);
    Tensor bc1 = 1.0 - full({}, h.beta1, step.options()).pow(step);
    Tensor bc2 = 1.0 - full({}, h.beta2, step.options()).pow(step);
    if (h.decoupled && h.weightDecay != 0)
      p.mul_(1.0 - lr * h.weightDecay); // AdamW
    else
      g = decayed(g, p, h.weightDecay);
    m.mul_(h.beta1).add_(g, 1 - h.beta1);
    v.mul_(h.beta2).add_(g * g, 1 - h.beta2);
    Tensor second = v;
    if (h.amsgrad) {
      Tensor& maxV = state(p, "max_exp_avg_sq");
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

void Adam::update() {
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamOptions&>(group.options());
    adamUpdate(group, {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
                       o.amsgrad(), false});
  }
}

void AdamW::update() {
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdamWOptions&>(group.options());
    adamUpdate(group, {std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(),
                       o.amsgrad(), true});
  }
}

void RMSprop::update() {
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const RMSpropOptions&>(group.options());
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      g = decayed(g, p, o.weight_decay());
      initState(group, p);
      Tensor& sq = state(p, "square_avg");
      sq.mul_(o.alpha()).add_(g * g, 1 - o.alpha());
      Tensor avg;
      if (o.centered()) {
        Tensor& ga = state(p, "grad_avg");
        ga.mul_(o.alpha()).add_(g, 1 - o.alpha());
        avg = (sq - ga * ga).sqrt() + o.eps();
      } else {
        avg = sq.sqrt() + o.eps();
      }
      if (o.momentum() > 0) {
        Tensor& buf = state(p, "momentum_buffer");
        buf.mul_(o.momentum()).add_(g / avg);
        p.sub_(buf * o.lr_tensor());
      } else {
        p.sub_(g / avg * o.lr_tensor());
      }
    }
  }
}

void Adagrad::update() {
  for (OptimizerParamGroup& group : param_groups()) {
    const auto& o = static_cast<const AdagradOptions&>(group.options());
    Tensor lr32; // rateFor's
    for (Tensor& p : group.params()) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      initState(group, p);
      Tensor& step = state(p, "step");
      Tensor& sum = state(p, "sum");
      step.add_(1);
      g = decayed(g, p, o.weight_decay());
      Tensor clr = rateFor(step, o.lr_tensor(), lr32) / ((step - 1.0) * o.lr_decay() + 1.0);
      sum.add_(g * g);
      p.sub_(g / (sum.sqrt() + o.eps()) * clr);
    }
  }
}

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double maxNorm, double normType,
                       std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(normType > 0, Value, "clip_grad_norm_: norm_type must be positive, got ", normType);
  // PyTorch takes a negative max_norm and flips every gradient's sign; weft refuses it.
  WEFT_CHECK(maxNorm >= 0, Value, "clip_grad_norm_: max_norm must be >= 0, got ", maxNorm);
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
  WEFT_CHECK(clipValue >= 0, Value, "clip_grad_value_: clip_value must be >= 0, got ", clipValue);
  NoGradGuard guard;
  for (const Tensor& p : parameters)
    if (Tensor g = p.grad(); g.defined()) g.clamp_(-clipValue, clipValue);
}

} // namespace weft::optim
