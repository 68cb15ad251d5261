// Loads are all-or-nothing and options are checked as PyTorch 1.13 checks them: a bad entry at
// the last key of a state dict leaves every tensor, option and learning rate exactly as it was,
// and an option out of range is a ValueError naming the option, its value and the caller's line,
// at construction and, for options changed later, at step().
#include "TestUtil.h"

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace weft::test {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Every tensor of `dict`, cloned: a snapshot to compare with later.
nn::StateDict snapshot(const nn::StateDict& dict) {
  nn::StateDict out;
  for (const auto& [key, t] : dict)
    out.emplace(key, t.detach().clone());
  return out;
}

/// Whether `now` has the keys of `before` and each tensor bit for bit.
::testing::AssertionResult unchanged(const nn::StateDict& before, const nn::StateDict& now) {
  if (before.size() != now.size())
    return ::testing::AssertionFailure() << before.size() << " keys became " << now.size();
  for (const auto& [key, t] : before) {
    auto it = now.find(key);
    if (it == now.end()) return ::testing::AssertionFailure() << "key '" << key << "' vanished";
    if (!sameBytes(t, it->second))
      return ::testing::AssertionFailure() << "'" << key << "' changed";
  }
  return ::testing::AssertionSuccess();
}

/// The last key of `dict` in its (sorted) order.
std::string lastKey(const nn::StateDict& dict) {
  return dict.rbegin()->first;
}

// ---- modules ----

TEST(Loads, ModuleLoadChecksEveryKeyBeforeWritingAny) {
  manual_seed(1);
  nn::Sequential source(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  nn::Sequential target(nn::Linear(3, 4), nn::ReLU(), nn::Linear(4, 2));
  const nn::StateDict before = snapshot(target->state_dict());
  for (bool strict : {true, false}) {
    nn::StateDict dict = source->state_dict();
    const std::string last = lastKey(dict);
    dict[last] = zeros({7});
    std::string m = messageOf<ShapeError>([&] { target->load_state_dict(dict, strict); });
    EXPECT_TRUE(has(m, "'" + last + "'") && has(m, "[7]") && has(m, "called from")) << m;
    EXPECT_TRUE(unchanged(before, target->state_dict())) << "strict " << strict;
    dict[last] = Tensor();
    m = messageOf<ValueError>([&] { target->load_state_dict(dict, strict); });
    EXPECT_TRUE(has(m, "'" + last + "'") && has(m, "undefined")) << m;
    EXPECT_TRUE(unchanged(before, target->state_dict())) << "strict " << strict;
  }
  target->load_state_dict(source->state_dict());
  EXPECT_TRUE(unchanged(snapshot(source->state_dict()), target->state_dict()));
}

// ---- optimizers ----

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

struct OptimizerKind {
  std::string name;
  MakeOptimizer make;
};

const std::vector<OptimizerKind>& optimizerKinds() {
  using namespace optim;
  static const std::vector<OptimizerKind> kinds = {
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<SGD>(p, SGDOptions(0.1).momentum(0.9));
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<Adam>(p, AdamOptions(0.01).amsgrad(true));
       }},
      {"AdamW", [](std::vector<Tensor> p) { return std::make_unique<AdamW>(p); }},
      {"RMSprop",
       [](std::vector<Tensor> p) {
         return std::make_unique<RMSprop>(p, RMSpropOptions(0.01).centered(true).momentum(0.5));
       }},
      {"Adagrad", [](std::vector<Tensor> p) { return std::make_unique<Adagrad>(p); }},
  };
  return kinds;
}

/// `n` parameters [3, 2] from `seed`.
std::vector<Tensor> parameters(int n, uint64_t seed) {
  std::vector<Tensor> ps;
  Generator g(seed);
  for (int i = 0; i < n; ++i)
    ps.push_back(randn({3, 2}, {}, g).requires_grad_());
  return ps;
}

/// `steps` optimizer steps on the loss sum(p * p * (k + 1)).
void train(optim::Optimizer& opt, const std::vector<Tensor>& ps, int steps) {
  for (int k = 0; k < steps; ++k) {
    opt.zero_grad();
    Tensor loss = zeros({});
    for (const Tensor& p : ps)
      loss = loss + (p * p * static_cast<double>(k + 1)).sum();
    loss.backward();
    opt.step();
  }
}

/// What load_state_dict may not change when it fails: the state and learning rates (its dict)
/// and the parameters.
struct OptimizerSnapshot {
  nn::StateDict state;
  std::vector<Tensor> params;
  OptimizerSnapshot(const optim::Optimizer& opt, const std::vector<Tensor>& ps)
      : state(snapshot(opt.state_dict())) {
    for (const Tensor& p : ps)
      params.push_back(p.detach().clone());
  }
  ::testing::AssertionResult same(const optim::Optimizer& opt, const std::vector<Tensor>& ps) {
    for (size_t i = 0; i < ps.size(); ++i)
      if (!sameBytes(params[i], ps[i].detach()))
        return ::testing::AssertionFailure() << "parameter " << i << " changed";
    return unchanged(state, opt.state_dict());
  }
};

TEST(Loads, OptimizerLoadChecksTheWholeDictFirstForEveryOptimizer) {
  for (const OptimizerKind& kind : optimizerKinds()) {
    SCOPED_TRACE(kind.name);
    // The case: a 4-parameter optimizer's state into a 2-parameter one.
    std::vector<Tensor> four = parameters(4, 1), two = parameters(2, 2);
    std::unique_ptr<optim::Optimizer> big = kind.make(four), small = kind.make(two);
    train(*big, four, 2);
    train(*small, two, 1);
    big->param_groups()[0].options().set_lr(0.5);
    OptimizerSnapshot before(*small, two);
    std::string m = messageOf<ValueError>([&] { small->load_state_dict(big->state_dict()); });
    EXPECT_TRUE(has(m, "'param_groups.0.params' lists 4 parameters") && has(m, "has 2")) << m;
    EXPECT_TRUE(before.same(*small, two));
    // A twin's dict whose last key is bad: every earlier entry must stay unwritten.
    std::vector<Tensor> twin = parameters(2, 3);
    std::unique_ptr<optim::Optimizer> other = kind.make(twin);
    train(*other, twin, 3);
    other->param_groups()[0].options().set_lr(0.25);
    nn::StateDict dict = other->state_dict();
    const std::string last = lastKey(dict);
    ASSERT_TRUE(last.rfind("state.1.", 0) == 0) << last;
    dict[last] = zeros({5, 5});
    m = messageOf<Error>([&] { small->load_state_dict(dict); });
    EXPECT_TRUE(has(m, "'" + last + "'") && has(m, "[5, 5]")) << m;
    EXPECT_TRUE(before.same(*small, two));
    dict[last] = Tensor();
    EXPECT_TRUE(has(messageOf<ValueError>([&] { small->load_state_dict(dict); }), "undefined"));
    dict.erase(last);
    dict["state.1.zz_unknown"] = zeros({3, 2});
    m = messageOf<ValueError>([&] { small->load_state_dict(dict); });
    EXPECT_TRUE(has(m, "unexpected key 'state.1.zz_unknown'") && has(m, kind.name)) << m;
    EXPECT_TRUE(before.same(*small, two));
    // A loadable dict is loaded whole.
    small->load_state_dict(other->state_dict());
    EXPECT_TRUE(unchanged(snapshot(other->state_dict()), small->state_dict()));
    EXPECT_EQ(small->param_groups()[0].options().get_lr(), 0.25);
    // The dict's state replaces the optimizer's, as PyTorch's: a fresh optimizer's dict (no
    // state) leaves none, so the next step is a first step.
    std::vector<Tensor> ps = parameters(2, 5), fresh = parameters(2, 5);
    std::unique_ptr<optim::Optimizer> stepped = kind.make(ps), first = kind.make(fresh);
    train(*stepped, ps, 2);
    stepped->load_state_dict(kind.make(parameters(2, 6))->state_dict());
    for (size_t i = 0; i < ps.size(); ++i)
      fresh[i].detach().copy_(ps[i].detach());
    train(*stepped, ps, 1);
    train(*first, fresh, 1);
    for (size_t i = 0; i < ps.size(); ++i)
      EXPECT_TRUE(sameBytes(ps[i].detach(), fresh[i].detach())) << "parameter " << i;
  }
}

TEST(Loads, OptimizerLoadRefusesMalformedKeysAndRatesNamingThem) {
  std::vector<Tensor> ps = parameters(2, 4);
  optim::Adam opt(ps, optim::AdamOptions(0.01));
  train(opt, ps, 1);
  OptimizerSnapshot before(opt, ps);
  auto refused = [&](const std::string& key, const Tensor& value,
                     const std::vector<std::string>& parts) {
    nn::StateDict dict = opt.state_dict();
    dict[key] = value;
    const std::string m = messageOf<Error>([&] { opt.load_state_dict(dict); });
    for (const std::string& part : parts)
      EXPECT_TRUE(has(m, part)) << m;
    EXPECT_TRUE(before.same(opt, ps)) << key;
  };
  refused("state.99999999999999999999999.exp_avg", zeros({3, 2}), {"unexpected key"});
  refused("state.-1.exp_avg", zeros({3, 2}), {"unexpected key"});
  refused("state.2.exp_avg", zeros({3, 2}), {"is for parameter 2", "has 2 parameters"});
  refused("param_groups.1.lr", full({}, 0.1), {"parameter group 1", "has 1"});
  refused("param_groups.0.lr", full({}, -0.5), {"'param_groups.0.lr'", "-0.5", ">= 0"});
  refused("param_groups.0.lr", full({}, kNaN), {"'param_groups.0.lr'", "nan"});
  refused("param_groups.0.lr", zeros({2}), {"must hold one number"});
  refused("state.1.step", zeros({2}), {"'state.1.step'", "one number"});
  refused("weird", zeros({}), {"unexpected key 'weird'"});
  nn::StateDict noGroups = opt.state_dict();
  noGroups.erase("param_groups.0.lr");
  const std::string m = messageOf<ValueError>([&] { opt.load_state_dict(noGroups); });
  EXPECT_TRUE(has(m, "no 'param_groups.0.lr'")) << m;
  // State saved in another dtype is converted to the parameter's, as PyTorch does.
  nn::StateDict doubles = opt.state_dict();
  doubles["state.0.exp_avg"] = ones({3, 2}, kFloat64);
  opt.load_state_dict(doubles);
  EXPECT_EQ(opt.state_dict().at("state.0.exp_avg").dtype(), kFloat32);
}

// ---- schedules ----

using MakeSchedule = std::function<std::shared_ptr<optim::LRScheduler>(optim::Optimizer&)>;

const std::vector<std::pair<std::string, MakeSchedule>>& scheduleKinds() {
  using namespace optim;
  static const std::vector<std::pair<std::string, MakeSchedule>> kinds = {
      {"StepLR", [](Optimizer& o) { return std::make_shared<StepLR>(o, 2, 0.5); }},
      {"MultiStepLR",
       [](Optimizer& o) {
         return std::make_shared<MultiStepLR>(o, std::vector<int64_t>{1, 3});
       }},
      {"ExponentialLR", [](Optimizer& o) { return std::make_shared<ExponentialLR>(o, 0.9); }},
      {"CosineAnnealingLR", [](Optimizer& o) { return std::make_shared<CosineAnnealingLR>(o, 5); }},
      {"LinearLR", [](Optimizer& o) { return std::make_shared<LinearLR>(o); }},
      {"OneCycleLR", [](Optimizer& o) { return std::make_shared<OneCycleLR>(o, 0.5, 6); }},
      {"SequentialLR",
       [](Optimizer& o) {
         std::vector<std::shared_ptr<LRScheduler>> parts = {
             std::make_shared<LinearLR>(o, 0.5, 1.0, 2), std::make_shared<ExponentialLR>(o, 0.8)};
         return std::make_shared<SequentialLR>(o, parts, std::vector<int64_t>{2});
       }},
  };
  return kinds;
}

TEST(Loads, ScheduleLoadChecksBothKeysAndTheRatesFirstForEverySchedule) {
  for (const auto& [name, make] : scheduleKinds()) {
    SCOPED_TRACE(name);
    std::vector<Tensor> ps = parameters(2, 5);
    optim::SGD opt({optim::OptimizerParamGroup({ps[0]}),
                    optim::OptimizerParamGroup({ps[1]}, std::make_unique<optim::SGDOptions>(0.02))},
                   optim::SGDOptions(0.1));
    std::shared_ptr<optim::LRScheduler> schedule = make(opt);
    schedule->step();
    schedule->step();
    const nn::StateDict good = snapshot(schedule->state_dict());
    const std::vector<double> rates = schedule->get_last_lr();
    auto refused = [&](const std::string& key, const Tensor& value, const std::string& part) {
      nn::StateDict dict = good;
      dict[key] = value;
      const std::string m = messageOf<ValueError>([&] { schedule->load_state_dict(dict); });
      EXPECT_TRUE(has(m, part) && has(m, name + "::load_state_dict")) << m;
      EXPECT_EQ(schedule->last_epoch(), 2);
      EXPECT_EQ(schedule->get_last_lr(), rates);
      EXPECT_TRUE(unchanged(good, schedule->state_dict()));
    };
    refused("base_lrs", from_vector(std::vector<double>{0.1, -0.02}), "-0.02 for group 1");
    refused("base_lrs", from_vector(std::vector<double>{0.1}), "one rate per parameter group");
    refused("last_epoch", scalar_tensor(int64_t{-3}), "integer >= 0");
    refused("last_epoch", full({}, 2.5, kFloat64), "integer >= 0, got 2.5");
    refused("zz", zeros({}), "unexpected key 'zz'");
    // A dict of another run, loaded, moves the schedule and the rates to it.
    nn::StateDict later = good;
    later["last_epoch"] = scalar_tensor(int64_t{4});
    schedule->load_state_dict(later);
    EXPECT_EQ(schedule->last_epoch(), 4);
    EXPECT_EQ(schedule->get_last_lr()[1], schedule->lrAt(0.02, 4));
  }
}

TEST(Options, OneCycleLRStopsAfterTotalStepsAsPyTorchChangingNothing) {
  std::vector<Tensor> ps = parameters(1, 6);
  optim::SGD opt(ps, optim::SGDOptions(0.1));
  optim::OneCycleLR schedule(opt, 0.5, 3);
  for (int i = 0; i < 3; ++i) // PyTorch allows total_steps steps after the first rate
    schedule.step();
  const double rate = opt.param_groups()[0].options().get_lr();
  const int line = __LINE__ + 1;
  std::string m = messageOf<ValueError>([&] { schedule.step(); });
  EXPECT_TRUE(has(m, "tried to step 5 times") && has(m, "total steps is 3")) << m;
  EXPECT_TRUE(has(m, "LoadAndOptionTest.cpp:" + std::to_string(line))) << m;
  EXPECT_EQ(schedule.last_epoch(), 3);
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), rate);
  nn::StateDict past = schedule.state_dict();
  past["last_epoch"] = scalar_tensor(int64_t{9});
  EXPECT_TRUE(has(messageOf<ValueError>([&] { schedule.load_state_dict(past); }), "step 10"));
  EXPECT_EQ(schedule.last_epoch(), 3);
}

// ---- checkpoints, loaders and generators ----

/// Sample i is data [i] and target i.
class Counting : public data::Dataset {
public:
  explicit Counting(size_t n) : n_(n) {}
  data::Example<> get(size_t i) override {
    return {full({1}, static_cast<double>(i)), scalar_tensor(static_cast<int64_t>(i))};
  }
  std::optional<size_t> size() const override { return n_; }

private:
  size_t n_;
};

TEST(Loads, CheckpointRestoresChangeNothingWhenTheStoredStateIsBad) {
  auto ds = std::make_shared<Counting>(50);
  data::DataLoader loader(ds, data::DataLoaderOptions(10).shuffle().seed(4));
  for (data::Example<>& b : loader) // epoch 0, then 2 batches of epoch 1
    (void)b;
  int k = 0;
  for (data::Example<>& b : loader) {
    (void)b;
    if (++k == 2) break;
  }
  const data::LoaderState state = loader.state();
  // A state saved from a loader with smaller batches: 7 batches into an epoch of 5.
  Checkpoint ck;
  ck.set("loader", {{"state", from_vector(std::vector<int64_t>{1, 7, 99}, {3})}});
  const int line = __LINE__ + 1;
  std::string m = messageOf<ValueError>([&] { ck.restore(loader); });
  EXPECT_TRUE(has(m, "7 batches") && has(m, "has 5")) << m;
  EXPECT_TRUE(has(m, "LoadAndOptionTest.cpp:" + std::to_string(line))) << m;
  EXPECT_EQ(loader.state(), state);
  ck.set("loader", {{"state", from_vector(std::vector<double>{1, 2, 3}, {3})}});
  m = messageOf<IOError>([&] { ck.restore(loader); });
  EXPECT_TRUE(has(m, "group 'loader'") && has(m, "int64")) << m;
  EXPECT_EQ(loader.state(), state);
  m = messageOf<ValueError>([&] {
    loader.restore(data::LoaderState{std::numeric_limits<uint64_t>::max(), 5, 0});
  });
  EXPECT_TRUE(has(m, "last there is")) << m;
  EXPECT_EQ(loader.state(), state);
  // The generator: a malformed state moves nothing.
  Generator gen(17);
  gen.set_offset(5);
  ck.set("generator", {{"state", from_vector(std::vector<int64_t>{1, 2, 3}, {3})}});
  EXPECT_TRUE(has(messageOf<IOError>([&] { ck.restore(gen); }), "group 'generator'"));
  EXPECT_EQ(gen.seed(), 17u);
  EXPECT_EQ(gen.offset(), 5u);
  // Undefined tensors are refused when set, naming the key.
  m = messageOf<ValueError>([&] { ck.set("model", {{"w", Tensor()}}); });
  EXPECT_TRUE(has(m, "'model.w'")) << m;
}

// ---- options ----

/// Checks that `make` throws a ValueError holding every part and naming this file's line.
void refusesOption(const std::function<void()>& make, const std::vector<std::string>& parts) {
  const std::string m = messageOf<ValueError>(make);
  for (const std::string& part : parts)
    EXPECT_TRUE(has(m, part)) << m;
  EXPECT_TRUE(has(m, "(called from ") && has(m, "LoadAndOptionTest.cpp:")) << m;
}

TEST(Options, OptimizersCheckTheirOptionsAsPyTorchAtConstruction) {
  using namespace optim;
  std::vector<Tensor> ps = parameters(1, 7);
  // The case, and PyTorch's message.
  refusesOption(
      [&] {
        Adam(ps, AdamOptions().betas({1.5, 0.999}));
      },
      {"Adam: invalid beta parameter at index 0: 1.5"});
  refusesOption(
      [&] {
        AdamW(ps, AdamWOptions().betas({0.9, 1.0}));
      },
      {"AdamW: invalid beta parameter at index 1: 1"});
  refusesOption([&] { Adam(ps, AdamOptions().betas({-0.1, 0.9})); }, {"index 0: -0.1"});
  refusesOption([&] { Adam(ps, AdamOptions(-1e-3)); }, {"Adam: invalid learning rate: -0.001"});
  refusesOption([&] { Adam(ps, AdamOptions().eps(-1)); }, {"invalid eps value: -1"});
  refusesOption([&] { AdamW(ps, AdamWOptions().weight_decay(-0.1)); }, {"weight_decay", "-0.1"});
  refusesOption([&] { SGD(ps, SGDOptions(kNaN)); }, {"SGD: invalid learning rate: nan"});
  refusesOption([&] { SGD(ps, SGDOptions(0.1).momentum(-0.5)); }, {"momentum value: -0.5"});
  refusesOption([&] { SGD(ps, SGDOptions(0.1).weight_decay(kNaN)); }, {"weight_decay value: nan"});
  refusesOption([&] { SGD(ps, SGDOptions(0.1).nesterov(true)); },
                {"Nesterov momentum requires a momentum and zero dampening"});
  refusesOption([&] { SGD(ps, SGDOptions(0.1).nesterov(true).momentum(0.9).dampening(0.1)); },
                {"dampening 0.1"});
  refusesOption([&] { RMSprop(ps, RMSpropOptions().alpha(-0.9)); }, {"alpha value: -0.9"});
  refusesOption([&] { RMSprop(ps, RMSpropOptions().eps(kNaN)); }, {"eps value: nan"});
  refusesOption([&] { RMSprop(ps, RMSpropOptions().momentum(-1)); }, {"momentum value: -1"});
  refusesOption([&] { Adagrad(ps, AdagradOptions().lr_decay(-1)); }, {"lr_decay value: -1"});
  refusesOption([&] { Adagrad(ps, AdagradOptions().initial_accumulator_value(-2)); },
                {"initial_accumulator_value value: -2"});
  refusesOption([&] { Adagrad(ps, AdagradOptions().eps(-1e-10)); }, {"eps value"});
  refusesOption([&] { Adam(std::vector<Tensor>{}); }, {"Adam: got an empty parameter list"});
  // A group's own options: in range, and of the optimizer's kind (read as it, they would be
  // garbage).
  refusesOption(
      [&] {
        Adam({OptimizerParamGroup(ps, std::make_unique<AdamOptions>(AdamOptions().eps(-1)))});
      },
      {"eps value: -1"});
  refusesOption([&] { Adam({OptimizerParamGroup(ps, std::make_unique<SGDOptions>(0.1))}); },
                {"parameter group 0 has options for SGD"});
  // PyTorch takes inf as a learning rate, and so does weft.
  EXPECT_NO_THROW(SGD(ps, SGDOptions(std::numeric_limits<double>::infinity())));
  optim::SGD sgd(ps, SGDOptions(0.1));
  refusesOption([&] { sgd.param_groups()[0].options().set_lr(-2); }, {"invalid learning rate: -2"});
  EXPECT_EQ(sgd.param_groups()[0].options().get_lr(), 0.1);
}

TEST(Options, OptionsChangedAfterConstructionAreCheckedAtStepBeforeAnyUpdate) {
  using namespace optim;
  std::vector<Tensor> ps = parameters(2, 8);
  Adam opt({OptimizerParamGroup({ps[0]}), OptimizerParamGroup({ps[1]})}, AdamOptions(0.1));
  auto& second = static_cast<AdamOptions&>(opt.param_groups()[1].options());
  second.betas({1.5, 0.999}); // the betas, set on the second group after construction
  for (const Tensor& p : ps)
    (p * p).sum().backward();
  OptimizerSnapshot before(opt, ps);
  const int line = __LINE__ + 1;
  std::string m = messageOf<ValueError>([&] { opt.step(); });
  EXPECT_TRUE(has(m, "invalid beta parameter at index 0: 1.5")) << m;
  EXPECT_TRUE(has(m, "LoadAndOptionTest.cpp:" + std::to_string(line))) << m;
  EXPECT_TRUE(before.same(opt, ps)) << "the first group was updated before the second's check";
  second.betas({0.9, 0.999});
  opt.step();
  EXPECT_FALSE(sameBytes(before.params[0], ps[0].detach()));
  SGD sgd(ps, SGDOptions(0.1).momentum(0.9));
  static_cast<SGDOptions&>(sgd.param_groups()[0].options()).nesterov(true).dampening(0.5);
  EXPECT_TRUE(has(messageOf<ValueError>([&] { sgd.step(); }), "Nesterov"));
}

TEST(Options, SchedulesCheckTheirOptionsBeforeTouchingTheOptimizer) {
  using namespace optim;
  std::vector<Tensor> ps = parameters(1, 9);
  SGD opt(ps, SGDOptions(0.1));
  SGD another(parameters(1, 10), SGDOptions(0.1));
  refusesOption([&] { StepLR(opt, 0); }, {"StepLR: step_size must be positive, got 0"});
  refusesOption([&] { StepLR(opt, 2, -0.5); }, {"StepLR: gamma", "-0.5"});
  refusesOption(
      [&] {
        MultiStepLR(opt, {5, 2});
      },
      {"milestones must be increasing", "2 follows 5"});
  refusesOption([&] { MultiStepLR(opt, {1}, kNaN); }, {"gamma", "nan"});
  refusesOption([&] { ExponentialLR(opt, -0.9); }, {"ExponentialLR: gamma", "-0.9"});
  refusesOption([&] { CosineAnnealingLR(opt, 0); }, {"T_max must be positive, got 0"});
  refusesOption([&] { CosineAnnealingLR(opt, 5, -1e-3); }, {"eta_min", "-0.001"});
  refusesOption([&] { LinearLR(opt, 0.0); }, {"start_factor must be in (0, 1], got 0"});
  refusesOption([&] { LinearLR(opt, 0.5, 1.5); }, {"end_factor must be in [0, 1], got 1.5"});
  refusesOption([&] { LinearLR(opt, 0.5, 1.0, 0); }, {"total_iters must be positive, got 0"});
  refusesOption([&] { OneCycleLR(opt, 0.5, 0); }, {"total_steps must be positive, got 0"});
  refusesOption([&] { OneCycleLR(opt, 0.5, 10, 1.5); }, {"pct_start must be in [0, 1], got 1.5"});
  refusesOption([&] { OneCycleLR(opt, -0.5, 10); }, {"max_lr", "-0.5"});
  refusesOption([&] { OneCycleLR(opt, 0.5, 10, 0.3, 0.0); }, {"div_factor", "got 0 and"});
  refusesOption([&] { OneCycleLR(opt, 0.5, 10, 0.1); }, {"pct_start 0.1 of total_steps 10"});
  refusesOption([&] { SequentialLR(opt, {std::make_shared<ExponentialLR>(another, 0.9)}, {}); },
                {"scheduler 0 belongs to another optimizer"});
  refusesOption([&] { SequentialLR(opt, {nullptr, nullptr}, {3}); }, {"scheduler 0 is null"});
  // None of the refused schedules touched the optimizer.
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.1);
  EXPECT_FALSE(opt.param_groups()[0].initial_lr.has_value());
}

TEST(Options, ClippingOptionsAreCheckedBeforeAnyGradientChanges) {
  std::vector<Tensor> ps = parameters(1, 11);
  (ps[0] * ps[0]).sum().backward();
  const Tensor grad = ps[0].grad().clone();
  refusesOption([&] { optim::clip_grad_norm_(ps, -1.0); }, {"max_norm must be >= 0, got -1"});
  refusesOption([&] { optim::clip_grad_norm_(ps, 1.0, kNaN); }, {"norm_type", "nan"});
  refusesOption([&] { optim::clip_grad_value_(ps, -0.5); }, {"clip_value must be >= 0, got -0.5"});
  EXPECT_TRUE(sameBytes(ps[0].grad(), grad));
}

TEST(Options, LoaderAndTransformOptionsAreChecked) {
  auto ds = std::make_shared<Counting>(10);
  refusesOption([&] { data::DataLoader(ds, data::DataLoaderOptions(0)); },
                {"batch_size must be at least 1, got 0"});
  refusesOption([&] { data::DataLoader(ds, data::DataLoaderOptions(2).workers(size_t(-1))); },
                {"workers must be at least 0, got -1", "negative number converted"});
  refusesOption([&] { data::DataLoader(ds, data::DataLoaderOptions(2).prefetch(0)); },
                {"prefetch must be at least 1"});
  refusesOption([&] { data::DataLoader(ds, data::DataLoaderOptions(2).distributed(2, 2)); },
                {"rank 2 is out of range for 2 replicas"});
  refusesOption([&] { data::DataLoader(ds, data::DataLoaderOptions(2).distributed(0, 0)); },
                {"num_replicas must be at least 1"});
  refusesOption([&] { data::RandomCrop(4, int64_t{1} << 62); }, {"padding", "4611686018427387904"});
}

TEST(Options, ALoopsErrorsNameItsLineEvenFromWorkers) {
  // A batch a worker builds fails: the error reaches the loop with the loop's line.
  auto ds = std::make_shared<data::TensorDataset>(ones({6, 2}));
  data::DataLoader loader(ds, data::DataLoaderOptions(2).workers(2).transform(
                                  data::Normalize({0.5, 0.5, 0.5}, {1, 1, 1})));
  const int line = __LINE__ + 2;
  std::string m = messageOf<ShapeError>([&] {
    for (data::Example<>& b : loader)
      (void)b;
  });
  EXPECT_TRUE(has(m, "Normalize: 3 means for 2 channels")) << m;
  EXPECT_TRUE(has(m, "LoadAndOptionTest.cpp:" + std::to_string(line))) << m;
}

} // namespace
} // namespace weft::test
