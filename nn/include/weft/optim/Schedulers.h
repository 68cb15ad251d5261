// Learning-rate schedules: each sets the optimizer's learning rates (tensors, so compiled steps
// read the new value without recompiling) from a closed form of the epoch, as PyTorch's do.
#pragma once

#include "weft/optim/Optimizer.h"

#include <memory>
#include <vector>

namespace weft::optim {

/// The base: remembers each group's initial learning rate and the epoch count.
class LRScheduler {
public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch (or step) and sets the learning rates.
  void step();
  /// The learning rate of each group after the last step.
  std::vector<double> get_last_lr() const;
  int64_t last_epoch() const { return lastEpoch_; }
  /// The epoch count and initial rates, to resume a schedule.
  nn::StateDict state_dict() const;
  void load_state_dict(const nn::StateDict& dict, WEFT_LOC);
  /// The learning rate of a group whose initial rate is `base` at `epoch`.
  virtual double lrAt(double base, int64_t epoch) const = 0;

protected:
  void apply();
  Optimizer& optimizer_;
  std::vector<double> baseLrs_;
  int64_t lastEpoch_ = 0;
};

/// base * gamma^(epoch / step_size).
class StepLR : public LRScheduler {
public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  int64_t stepSize_;
  double gamma_;
};
/// base * gamma^(milestones passed).
class MultiStepLR : public LRScheduler {
public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  std::vector<int64_t> milestones_;
  double gamma_;
};
/// base * gamma^epoch.
class ExponentialLR : public LRScheduler {
public:
  ExponentialLR(Optimizer& optimizer, double gamma);
  double lrAt(double base, int64_t epoch) const override;

private:
  double gamma_;
};
/// eta_min + (base - eta_min) (1 + cos(pi epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  int64_t tMax_;
  double etaMin_;
};
/// base * factor, the factor going linearly from start_factor to end_factor over total_iters.
class LinearLR : public LRScheduler {
public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  double start_, end_;
  int64_t total_;
};
/// The 1cycle policy (cosine annealing): from max_lr/div_factor up to max_lr over pct_start of
/// total_steps, then down to max_lr/(div_factor*final_div_factor). Learning rates only.
class OneCycleLR : public LRScheduler {
public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25.0, double final_div_factor = 1e4, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  double maxLr_, pctStart_, div_, finalDiv_;
  int64_t total_;
};
/// Runs `schedulers` one after another, switching at each milestone (each sees its own epochs).
class SequentialLR : public LRScheduler {
public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, WEFT_LOC);
  double lrAt(double base, int64_t epoch) const override;

private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

} // namespace weft::optim
