// Learning-rate schedules in closed form.
#include "weft/optim/Schedulers.h"

#include <algorithm>
#include <cmath>

namespace weft::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  // Schedules built one after another (SequentialLR's parts) all start from the rate the group
  // had before the first of them changed it.
  for (OptimizerParamGroup& g : optimizer.param_groups()) {
    if (!g.initial_lr) g.initial_lr = g.options().get_lr();
    baseLrs_.push_back(*g.initial_lr);
  }
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size() && i < baseLrs_.size(); ++i)
    groups[i].options().set_lr(lrAt(baseLrs_[i], lastEpoch_));
}

void LRScheduler::step() {
  ++lastEpoch_;
  apply();
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
  d.emplace("base_lrs", from_vector(baseLrs_));
  return d;
}

void LRScheduler::load_state_dict(const nn::StateDict& dict, std::source_location loc) {
  CallSite cs(loc);
  auto epoch = dict.find("last_epoch"), base = dict.find("base_lrs");
  WEFT_CHECK(epoch != dict.end() && base != dict.end(), Value,
             "LRScheduler::load_state_dict: expected keys 'last_epoch' and 'base_lrs'");
  lastEpoch_ = epoch->second.item<int64_t>();
  baseLrs_ = base->second.to(kFloat64).to_vector<double>();
  apply();
}

StepLR::StepLR(Optimizer& o, int64_t stepSize, double gamma, std::source_location loc)
    : LRScheduler(o), stepSize_(stepSize), gamma_(gamma) {
  CallSite cs(loc);
  WEFT_CHECK(stepSize > 0, Value, "StepLR: step_size must be positive, got ", stepSize);
}
double StepLR::lrAt(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch / stepSize_));
}

MultiStepLR::MultiStepLR(Optimizer& o, std::vector<int64_t> milestones, double gamma,
                         std::source_location loc)
    : LRScheduler(o), milestones_(std::move(milestones)), gamma_(gamma) {
  CallSite cs(loc);
  WEFT_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()), Value,
             "MultiStepLR: milestones must be increasing");
}
double MultiStepLR::lrAt(double base, int64_t epoch) const {
  auto passed =
      std::upper_bound(milestones_.begin(), milestones_.end(), epoch) - milestones_.begin();
  return base * std::pow(gamma_, static_cast<double>(passed));
}

ExponentialLR::ExponentialLR(Optimizer& o, double gamma) : LRScheduler(o), gamma_(gamma) {}
double ExponentialLR::lrAt(double base, int64_t epoch) const {
  return base * std::pow(gamma_, static_cast<double>(epoch));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, int64_t tMax, double etaMin,
                                     std::source_location loc)
    : LRScheduler(o), tMax_(tMax), etaMin_(etaMin) {
  CallSite cs(loc);
  WEFT_CHECK(tMax > 0, Value, "CosineAnnealingLR: T_max must be positive, got ", tMax);
}
double CosineAnnealingLR::lrAt(double base, int64_t epoch) const {
  return etaMin_ +
         (base - etaMin_) *
             (1 + std::cos(M_PI * static_cast<double>(epoch) / static_cast<double>(tMax_))) / 2;
}

LinearLR::LinearLR(Optimizer& o, double start, double end, int64_t total, std::source_location loc)
    : LRScheduler(o), start_(start), end_(end), total_(total) {
  CallSite cs(loc);
  WEFT_CHECK(start > 0 && start <= 1 && end >= 0 && end <= 1, Value,
             "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]");
  WEFT_CHECK(total > 0, Value, "LinearLR: total_iters must be positive, got ", total);
  apply();
}
double LinearLR::lrAt(double base, int64_t epoch) const {
  double t = static_cast<double>(std::min(epoch, total_)) / static_cast<double>(total_);
  return base * (start_ + (end_ - start_) * t);
}

OneCycleLR::OneCycleLR(Optimizer& o, double maxLr, int64_t total, double pctStart, double div,
                       double finalDiv, std::source_location loc)
    : LRScheduler(o), maxLr_(maxLr), pctStart_(pctStart), div_(div), finalDiv_(finalDiv),
      total_(total) {
  CallSite cs(loc);
  WEFT_CHECK(total > 1, Value, "OneCycleLR: total_steps must be at least 2, got ", total);
  WEFT_CHECK(pctStart > 0 && pctStart < 1, Value, "OneCycleLR: pct_start must be in (0, 1)");
  apply();
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
  // Past total_steps the cosine continues (and rises again), as PyTorch's does.
  return cosine(maxLr_, minLr, (s - upEnd) / (downEnd - upEnd));
}

SequentialLR::SequentialLR(Optimizer& o, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, std::source_location loc)
    : LRScheduler(o), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  CallSite cs(loc);
  WEFT_CHECK(!schedulers_.empty() && milestones_.size() + 1 == schedulers_.size(), Value,
             "SequentialLR: expected one more scheduler than milestones, got ", schedulers_.size(),
             " schedulers and ", milestones_.size(), " milestones");
  apply();
}
double SequentialLR::lrAt(double base, int64_t epoch) const {
  auto i = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), epoch) -
                               milestones_.begin());
  int64_t start = i == 0 ? 0 : milestones_[i - 1];
  return schedulers_[i]->lrAt(base, epoch - start);
}

} // namespace weft::optim
