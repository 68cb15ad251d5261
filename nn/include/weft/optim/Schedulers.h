// Learning-rate schedules: each sets the optimizer's learning rates (tensors, so compiled steps
// read the new value without recompiling) from a closed form of the epoch, as PyTorch's do.
#pragma once

#include "weft/optim/Optimizer.h"

#include <memory>
#include <utility>
#include <vector>

namespace weft::optim {

/// The base: remembers each group's initial learning rate and the epoch count. Every change it
/// makes is computed and checked whole first: a schedule never leaves some groups changed.
class LRScheduler {
public:
  virtual ~LRScheduler() = default;
  /// Advances one epoch (or step) and sets the learning rates; where the schedule has no rate
  /// (OneCycleLR past total_steps) it is an error and nothing changes.
  void step(WEFT_LOC);
  /// The learning rate of each group after the last step.
  std::vector<double> get_last_lr() const;
  /// The epochs (or steps) taken.
  int64_t last_epoch() const { return lastEpoch_; }
  /// The epoch count and initial rates, to resume a schedule.
  nn::StateDict state_dict() const;
  /// Restores a state_dict(): "last_epoch" an integer >= 0, "base_lrs" one rate >= 0 per group,
  /// both checked, and the rates they give, before anything changes; errors name the key.
  void load_state_dict(const nn::StateDict& dict, WEFT_LOC);
  /// The learning rate of a group whose initial rate is `base` at `epoch`.
  virtual double lrAt(double base, int64_t epoch) const = 0;

protected:
  /// Binds to `optimizer`; `name` ("StepLR") prefixes messages. The derived constructor checks
  /// its options and then calls start().
  LRScheduler(Optimizer& optimizer, const char* name);
  /// Takes each group's initial rate (set by the first schedule on it) and sets epoch 0's rates.
  void start();
  /// Checks that the schedule has rates at `epoch` (OneCycleLR's end); nothing by default.
  virtual void checkEpoch(int64_t epoch) const;
  /// Each group's rate at `epoch` from `bases`, each checked to be one an optimizer takes.
  std::vector<double> ratesAt(int64_t epoch, const std::vector<double>& bases) const;
  /// Sets each group's rate.
  void setRates(const std::vector<double>& rates);
  Optimizer& optimizer_;
  const char* name_;
  std::vector<double> baseLrs_;
  int64_t lastEpoch_ = 0;

private:
  friend class SequentialLR; // checks that its parts share its optimizer
};

/// base * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
public:
  /// step_size > 0, gamma >= 0 and finite.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  int64_t stepSize_;
  double gamma_;
};
/// base * gamma^(milestones passed).
class MultiStepLR : public LRScheduler {
public:
  /// Milestones in increasing order, gamma >= 0 and finite.
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  std::vector<int64_t> milestones_;
  double gamma_;
};
/// base * gamma^epoch.
class ExponentialLR : public LRScheduler {
public:
  /// gamma >= 0 and finite.
  ExponentialLR(Optimizer& optimizer, double gamma, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  double gamma_;
};
/// eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
public:
  /// T_max > 0, eta_min >= 0 and finite.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  int64_t tMax_;
  double etaMin_;
};
/// base * factor, the factor going linearly from start_factor to end_factor over total_iters.
class LinearLR : public LRScheduler {
public:
  /// start_factor in (0, 1], end_factor in [0, 1] (PyTorch's ranges), total_iters > 0.
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  double start_, end_;
  int64_t total_;
};
/// The 1cycle policy (cosine annealing): from max_lr/div_factor up to max_lr over pct_start of
/// total_steps, then down to max_lr/(div_factor*final_div_factor). Learning rates only. As
/// PyTorch's, it takes total_steps steps (and one more, where the cosine goes on); a step past
/// that is an error.
class OneCycleLR : public LRScheduler {
public:
  /// max_lr >= 0, total_steps > 0, pct_start in [0, 1], div_factor and final_div_factor > 0 (all
  /// finite); pct_start * total_steps = 1 leaves the warm-up no steps and is refused too.
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25.0, double final_div_factor = 1e4, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

protected:
  void checkEpoch(int64_t epoch) const override;

private:
  double maxLr_, pctStart_, div_, finalDiv_;
  int64_t total_;
};
/// Runs `schedulers` one after another, switching at each milestone (each sees its own epochs).
class SequentialLR : public LRScheduler {
public:
  /// One more scheduler than milestones, all of `optimizer`; milestones in increasing order.
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

protected:
  void checkEpoch(int64_t epoch) const override;

private:
  /// The part that runs `epoch`, and the epoch it starts at.
  std::pair<size_t, int64_t> part(int64_t epoch) const;
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

} // namespace weft::optim
