// The benchmark's three models (benchmarks/TrainModels.h: an MLP with Adam, a CNN with SGD and
// momentum, a pre-norm causal transformer with AdamW), at test sizes, trained 50 steps compiled
// and 50 eagerly from the same weights on the same batches: the compiled train step follows the
// eager one. Compiled code sums in other orders than the eager kernels (generated GEMMs, row
// and column kernels), so the two agree to float32 rounding, which 50 optimizer steps carry on.
#include "TrainModels.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

using namespace weft;

namespace {

using bench::Cnn, bench::Gpt, bench::Mlp, bench::trainStep;
constexpr int64_t kContext = 16, kVocab = 32;

/// Trains `eagerModel` eagerly and `compiledModel` (the same weights) with a compiled step for
/// 50 batches from `batch`; every loss agrees within `lossTol` relative, the last parameters
/// within `paramTol` of the largest parameter magnitude, and the loss fell.
template <typename Model>
void trainsLikeEager(Model& eagerModel, optim::Optimizer& eagerOpt, Model& compiledModel,
                     optim::Optimizer& compiledOpt,
                     const std::function<std::pair<Tensor, Tensor>(Generator&)>& batch,
                     double lossTol, double paramTol) {
  auto eager = trainStep(eagerModel, eagerOpt);
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(trainStep(compiledModel, compiledOpt));
  Generator g(21);
  double first = 0, last = 0;
  for (int i = 0; i < 50; ++i) {
    auto [x, y] = batch(g);
    const Tensor te = eager(x, y), tc = compiled(x, y);
    const double le = te.item<double>(), lc = tc.item<double>();
    ASSERT_NEAR(lc, le, lossTol * std::abs(le)) << "step " << i;
    if (i == 0) {
      // The first step makes the optimizer's state, so it runs once: the interpreter runs it
      // (the eager kernels on the optimized graph) rather than code generated for one call.
      EXPECT_EQ(compiled.compiled().num_kernels(), 0u);
    }
    if (i == 1) {
      EXPECT_GT(compiled.compiled().num_kernels(), 0u); // the step that keeps running
    }
    if (i == 0) first = le;
    last = le;
  }
  EXPECT_LT(last, first);
  // The first step makes the optimizer's state, the second reads it: two compilations, no more.
  EXPECT_EQ(compiled.compiled().num_compiled(), 2u);
  double scale = 0, worst = 0;
  for (auto& [name, value] : eagerModel->state_dict()) {
    const Tensor& t = value;
    if (!t.is_floating_point()) continue;
    const Tensor c = compiledModel->state_dict().at(name);
    scale = std::max(scale, t.abs().max().item<double>());
    worst = std::max(worst, (t - c).abs().max().item<double>());
  }
  EXPECT_LT(worst, paramTol * scale);
}

// Tolerances (measured: losses within 2.1e-7 relative in all three; parameters within 2.3e-7 of
// their largest magnitude in the MLP and CNN, 7.7e-5 in the transformer, whose AdamW divides
// near-zero gradients, of embedding rows a batch barely touches, by their own running size):
// each step's loss within 1e-5 relative, the parameters within 1e-5 (MLP, CNN) and 5e-4
// (transformer) of their largest magnitude.

TEST(TrainSteps, MlpWithAdamFollowsEagerFor50Steps) {
  manual_seed(31);
  Mlp eagerModel(48, 32, 10), compiledModel(48, 32, 10);
  compiledModel->load_state_dict(eagerModel->state_dict());
  optim::Adam eagerOpt(eagerModel->parameters(), optim::AdamOptions(1e-3));
  optim::Adam compiledOpt(compiledModel->parameters(), optim::AdamOptions(1e-3));
  trainsLikeEager(
      eagerModel, eagerOpt, compiledModel, compiledOpt,
      [](Generator& g) {
        return std::pair{randn({16, 48}, kFloat32, g), randint(0, 10, {16}, kInt64, g)};
      },
      1e-5, 1e-5);
}

TEST(TrainSteps, CnnWithMomentumFollowsEagerFor50Steps) {
  manual_seed(32);
  Cnn eagerModel(4, 8, 12, 16, 10), compiledModel(4, 8, 12, 16, 10);
  compiledModel->load_state_dict(eagerModel->state_dict());
  optim::SGD eagerOpt(eagerModel->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  optim::SGD compiledOpt(compiledModel->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  trainsLikeEager(
      eagerModel, eagerOpt, compiledModel, compiledOpt,
      [](Generator& g) {
        return std::pair{randn({8, 1, 12, 12}, kFloat32, g), randint(0, 10, {8}, kInt64, g)};
      },
      1e-5, 1e-5);
}

TEST(TrainSteps, TransformerWithAdamWFollowsEagerFor50Steps) {
  manual_seed(33);
  Gpt eagerModel(kVocab, kContext, 32, 4, 2, 128), compiledModel(kVocab, kContext, 32, 4, 2, 128);
  compiledModel->load_state_dict(eagerModel->state_dict());
  optim::AdamW eagerOpt(eagerModel->parameters(), optim::AdamWOptions(1e-3));
  optim::AdamW compiledOpt(compiledModel->parameters(), optim::AdamWOptions(1e-3));
  trainsLikeEager(
      eagerModel, eagerOpt, compiledModel, compiledOpt,
      [](Generator& g) {
        return std::pair{randint(0, kVocab, {4, kContext}, kInt64, g),
                         randint(0, kVocab, {4, kContext}, kInt64, g)};
      },
      1e-5, 5e-4);
}

} // namespace
