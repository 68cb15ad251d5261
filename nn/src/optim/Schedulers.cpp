// Learning-rate schedules in closed form, their option checks, and state dicts.
#include "weft/optim/Schedulers.h"

#include <algorithm>
#include <cmath>

namespace weft::optim {
namespace {

/// A decay factor: negative ones make negative rates, which no optimizer takes.
void checkGamma(const char* name, double gamma) {
  WEFT_CHECK(std::isfinite(gamma) && gamma >= 0, Value, name,
             ": gamma must be finite and >= 0 (the rate is multiplied by it), got ", gamma);
}

/// Milestones must increase: the schedule finds an epoch's place among them by bisection.
void checkIncreasing(const char* name, const std::vector<int64_t>& milestones) {
  auto bad = std::is_sorted_until(milestones.begin(), milestones.end());
  WEFT_CHECK(bad == milestones.end(), Value, name, ": milestones must be increasing, but ",
             bad == milestones.end() ? 0 : *bad, " follows ",
             bad == milestones.end() ? 0 : *(bad - 1));
}

} // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, const char* name)
    : optimizer_(optimizer), name_(name) {}

void LRScheduler::start() {
  // Schedules built one after another (SequentialLR's parts) all start from the rate the group
  // had before the first of them changed it.
  std::vector<double> bases;
  for (const OptimizerParamGroup& g : optimizer_.param_groups())
    bases.push_back(g.initial_lr.value_or(g.options().get_lr()));
  const std::vector<double> rates = ratesAt(0, bases);
  for (OptimizerParamGroup& g : optimizer_.param_groups())
    if (!g.initial_lr) g.initial_lr = g.options().get_lr();
  baseLrs_ = std::move(bases);
  setRates(rates);
}

void LRScheduler::checkEpoch(int64_t) const {}

std::vector<double> LRScheduler::ratesAt(int64_t epoch, const std::vector<double>& bases) const {
  checkEpoch(epoch);
  std::vector<double> rates;
  for (size_t g = 0; g < bases.size(); ++g) {
    rates.push_back(lrAt(bases[g], epoch));
    WEFT_CHECK(rates.back() >= 0, Value, name_, ": at epoch ", epoch,
               " the learning rate of group ", g, " would be ", rates.back(),
               ", which no optimizer takes; check the options");
  }
  return rates;
}

void LRScheduler::setRates(const std::vector<double>& rates) {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size() && i < rates.size(); ++i)
    groups[i].options().set_lr(rates[i]);
}

void LRScheduler::step(std::source_location loc) {
  CallSite cs(loc);
  const std::vector<double> rates = ratesAt(lastEpoch_ + 1, baseLrs_);
  ++lastEpoch_;
  setRates(rates);
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (const OptimizerParamGroup& g : optimizer_.param_groups())
    out.push_back(g.options().get_lr());
  return out;
}

nn::StateDict LRScheduler::state_dict() const {
  nn::StateDict d;
  d.emplace("last_epoch", scalar_tensor(lastEpoch_));
  d.emplace("base_lrs", from_vector(baseLrs_, {static_cast<int64_t>(baseLrs_.size())}));
  return d;
}

void LRScheduler::load_state_dict(const nn::StateDict& dict, std::source_location loc) {
  CallSite cs(loc);
  const std::string op = std::string(name_) + "::load_state_dict";
  auto epoch = dict.find("last_epoch"), base = dict.find("base_lrs");
  WEFT_CHECK(epoch != dict.end() && base != dict.end(), Value, op,
             ": expected keys 'last_epoch' and 'base_lrs'");
  for (const auto& [key, t] : dict)
    WEFT_CHECK(key == "last_epoch" || key == "base_lrs", Value, op, ": unexpected key '", key, "'");
  const Tensor& e = epoch->second;
  WEFT_CHECK(e.defined() && e.numel() == 1, Value, op, ": 'last_epoch' must hold one integer");
  const double last = e.to(kFloat64).item<double>();
  WEFT_CHECK(last >= 0 && last == std::floor(last) && last < 9.2e18, Value, op,
             ": 'last_epoch' must be an integer >= 0, got ", last);
  const Tensor& b = base->second;
  const size_t groups = optimizer_.param_groups().size();
  // Dicts saved before base_lrs was always 1-D hold one group's rate 0-d.
  WEFT_CHECK(b.defined() && b.dim() <= 1 && static_cast<size_t>(b.numel()) == groups, Value, op,
             ": 'base_lrs' must hold one rate per parameter group (", groups, "), got ",
             b.defined() ? "shape " + shapeString(b.sizes()) : "an undefined tensor");
  const std::vector<double> bases = b.to(kFloat64).to_vector<double>();
  for (size_t g = 0; g < groups; ++g)
    WEFT_CHECK(bases[g] >= 0, Value, op, ": 'base_lrs' holds ", bases[g], " for group ", g,
               ", but a learning rate must be >= 0");
  const std::vector<double> rates = ratesAt(static_cast<int64_t>(last), bases);
  lastEpoch_ = static_cast<int64_t>(last);
  baseLrs_ = bases;
  setRates(rates);
}

StepLR::StepLR(Optimizer& o, int64_t stepSize, double gamma, std::source_location loc)
    : LRScheduler(o, "StepLR"), stepSize_(stepSize), gamma_(gamma) {
  CallSite cs(loc);
  WEFT_CHECK(stepSize > 0, Value, "StepLR: step_size must be positive, got ", stepSize);
  checkGamma(name_, gamma);
  start();
}
double StepLR::lrAt(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch / stepSize_));
}

MultiStepLR::MultiStepLR(Optimizer& o, std::vector<int64_t> milestones, double gamma,
                         std::source_location loc)
    : LRScheduler(o, "MultiStepLR"), milestones_(std::move(milestones)), gamma_(gamma) {
  CallSite cs(loc);
  checkIncreasing(name_, milestones_);
  checkGamma(name_, gamma);
  start();
}
double MultiStepLR::lrAt(double base, int64_t epoch) const {
  auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& o, double gamma, std::source_location loc)
    : LRScheduler(o, "ExponentialLR"), gamma_(gamma) {
  CallSite cs(loc);
  checkGamma(name_, gamma);
  start();
}
double ExponentialLR::lrAt(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, int64_t tMax, double etaMin,
                                     std::source_location loc)
    : LRScheduler(o, "CosineAnnealingLR"), tMax_(tMax), etaMin_(etaMin) {
  CallSite cs(loc);
  WEFT_CHECK(tMax > 0, Value, "CosineAnnealingLR: T_max must be positive, got ", tMax);
  WEFT_CHECK(std::isfinite(etaMin) && etaMin >= 0, Value,
             "CosineAnnealingLR: eta_min must be finite and >= 0 (it is a learning rate), got ",
             etaMin);
  start();
}
double CosineAnnealingLR::lrAt(double base, int64_t epoch) const {
  return etaMin_ +
         (base - etaMin_) *
             (1 + std::cos(M_PI * static_cast<double>(epoch) / static_cast<double>(tMax_))) / 2;
}

LinearLR::LinearLR(Optimizer& o, double startFactor, double endFactor, int64_t total,
                   std::source_location loc)
    : LRScheduler(o, "LinearLR"), start_(startFactor), end_(endFactor), total_(total) {
  CallSite cs(loc);
  WEFT_CHECK(startFactor > 0 && startFactor <= 1, Value,
             "LinearLR: start_factor must be in (0, 1], got ", startFactor);
  WEFT_CHECK(endFactor >= 0 && endFactor <= 1, Value,
             "LinearLR: end_factor must be in [0, 1], got ", endFactor);
  WEFT_CHECK(total > 0, Value, "LinearLR: total_iters must be positive, got ", total);
  start();
}
double LinearLR::lrAt(double base, int64_t epoch) const {
  double t = static_cast<double>(std::min(epoch, total_)) / static_cast<double>(total_);
  return base * (start_ + (end_ - start_) * t);
}

OneCycleLR::OneCycleLR(Optimizer& o, double maxLr, int64_t total, double pctStart, double div,
                       double finalDiv, std::source_location loc)
    : LRScheduler(o, "OneCycleLR"), maxLr_(maxLr), pctStart_(pctStart), div_(div),
      finalDiv_(finalDiv), total_(total) {
  CallSite cs(loc);
  WEFT_CHECK(std::isfinite(maxLr) && maxLr >= 0, Value,
             "OneCycleLR: max_lr must be finite and >= 0, got ", maxLr);
  WEFT_CHECK(total > 0, Value, "OneCycleLR: total_steps must be positive, got ", total);
  WEFT_CHECK(pctStart >= 0 && pctStart <= 1, Value, "OneCycleLR: pct_start must be in [0, 1], got ",
             pctStart);
  WEFT_CHECK(std::isfinite(div) && div > 0 && std::isfinite(finalDiv) && finalDiv > 0, Value,
             "OneCycleLR: div_factor and final_div_factor must be finite and > 0, got ", div,
             " and ", finalDiv);
  WEFT_CHECK(pctStart * static_cast<double>(total) != 1, Value, "OneCycleLR: pct_start ", pctStart,
             " of total_steps ", total,
             " is one step, which leaves the warm-up none to rise over; choose another pct_start");
  start();
}
void OneCycleLR::checkEpoch(int64_t step) const {
  WEFT_CHECK(step <= total_, Value, "OneCycleLR: tried to step ", step + 1,
             " times; the specified number of total steps is ", total_);
}
double OneCycleLR::lrAt(double, int64_t step) const {
  double initial = maxLr_ / div_, minLr = initial / finalDiv_;
  double upEnd = pctStart_ * static_cast<double>(total_) - 1,
         downEnd = static_cast<double>(total_ - 1);
  auto cosine = [](double from, double to, double pct) {
    return to + (from - to) / 2.0 * (1 + std::cos(M_PI * pct));
  };
  auto s = static_cast<double>(step);
  if (s <= upEnd) return cosine(initial, maxLr_, s / upEnd);
  // At step total_steps the cosine continues (and rises again), as PyTorch's does.
  return cosine(maxLr_, minLr, (s - upEnd) / (downEnd - upEnd));
}

SequentialLR::SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, std::source_location loc)
    : LRScheduler(o, "SequentialLR"), schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  CallSite cs(loc);
  WEFT_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), Value,
             "SequentialLR: expected one more scheduler than milestones, got ", schedulers_.size(),
             " schedulers and ", milestones_.size(), " milestones");
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    WEFT_CHECK(schedulers_[i] != nullptr, Value, "SequentialLR: scheduler ", i, " is null");
    WEFT_CHECK(&schedulers_[i]->optimizer_ == &o, Value, "SequentialLR: scheduler ", i,
               " belongs to another optimizer than the one passed in");
  }
  checkIncreasing(name_, milestones_);
  start();
}
void SequentialLR::checkEpoch(int64_t epoch) const {
  auto [i, start] = part(epoch);
  schedulers_[i]->checkEpoch(epoch - start);
}
double SequentialLR::lrAt(double base, int64_t epoch) const {
  auto [i, start] = part(epoch);
  return schedulers_[i]->lrAt(base, epoch - start);
}
std::pair<size_t, int64_t> SequentialLR::part(int64_t epoch) const {
  auto i = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                               milestones_.begin());
  return {i, i == 0 ? 0 : milestones_[i - 1]};
}

} // namespace weft::optim
