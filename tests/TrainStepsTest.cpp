// The benchmark's three kinds of model (an MLP with Adam, a CNN with SGD and momentum, a pre-norm
// causal transformer with AdamW), written with weft::nn at test sizes, trained 50 steps compiled
// and 50 eagerly from the same weights on the same batches: the compiled train step follows the
// eager one. Compiled code sums in other orders than the eager kernels (generated GEMMs, row
// and column kernels), so the two agree to float32 rounding, which 50 optimizer steps carry on.
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

using namespace weft;
namespace F = weft::nn::functional;

namespace {

class MlpImpl : public nn::Module {
public:
  MlpImpl() {
    fc1 = register_module("fc1", nn::Linear(48, 32));
    fc2 = register_module("fc2", nn::Linear(32, 32));
    fc3 = register_module("fc3", nn::Linear(32, 10));
  }
  Tensor forward(const Tensor& x) { return fc3(relu(fc2(relu(fc1(x))))); }
  nn::Linear fc1 = nullptr, fc2 = nullptr, fc3 = nullptr;
};
WEFT_MODULE(Mlp);

class CnnImpl : public nn::Module {
public:
  CnnImpl() {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(4, 8, 3).padding(1)));
    pool = register_module("pool", nn::MaxPool2d(2));
    fc1 = register_module("fc1", nn::Linear(8 * 3 * 3, 16));
    fc2 = register_module("fc2", nn::Linear(16, 10));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = pool(relu(conv1(x)));
    h = pool(relu(conv2(h)));
    return fc2(relu(fc1(h.flatten(1))));
  }
  nn::Conv2d conv1 = nullptr, conv2 = nullptr;
  nn::MaxPool2d pool = nullptr;
  nn::Linear fc1 = nullptr, fc2 = nullptr;
};
WEFT_MODULE(Cnn);

constexpr int64_t kDim = 32, kHeads = 4, kContext = 16, kVocab = 32;

/// A pre-norm causal transformer layer, as the benchmark's.
class LayerImpl : public nn::Module {
public:
  LayerImpl() {
    ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    q = register_module("q", nn::Linear(kDim, kDim));
    k = register_module("k", nn::Linear(kDim, kDim));
    v = register_module("v", nn::Linear(kDim, kDim));
    proj = register_module("proj", nn::Linear(kDim, kDim));
    up = register_module("up", nn::Linear(kDim, 4 * kDim));
    down = register_module("down", nn::Linear(4 * kDim, kDim));
  }
  Tensor forward(const Tensor& x, const Tensor& causal) {
    const int64_t b = x.size(0), t = x.size(1), hd = kDim / kHeads;
    auto heads = [&](const Tensor& y) { return y.reshape({b, t, kHeads, hd}).transpose(1, 2); };
    Tensor n = ln1(x);
    Tensor att = heads(q(n)).matmul(heads(k(n)).transpose(-1, -2)) / std::sqrt(double(hd));
    att = att.masked_fill(causal, -INFINITY).softmax(-1);
    Tensor y = x + proj(att.matmul(heads(v(n))).transpose(1, 2).reshape({b, t, -1}));
    return y + down(gelu(up(ln2(y))));
  }
  nn::LayerNorm ln1 = nullptr, ln2 = nullptr;
  nn::Linear q = nullptr, k = nullptr, v = nullptr, proj = nullptr, up = nullptr, down = nullptr;
};
WEFT_MODULE(Layer);

class GptImpl : public nn::Module {
public:
  GptImpl() {
    tok = register_module("tok", nn::Embedding(kVocab, kDim));
    pos = register_module("pos", nn::Embedding(kContext, kDim));
    for (int i = 0; i < 2; ++i)
      layers.push_back(register_module("layer" + std::to_string(i), Layer()));
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({kDim})));
    head = register_module("head", nn::Linear(kDim, kVocab));
    causal = ones({kContext, kContext}, kBool).triu(1);
  }
  Tensor forward(const Tensor& idx) {
    Tensor x = tok(idx) + pos(arange(idx.size(1)));
    for (Layer& layer : layers)
      x = layer->forward(x, causal);
    return head(norm(x));
  }
  nn::Embedding tok = nullptr, pos = nullptr;
  std::vector<Layer> layers;
  nn::LayerNorm norm = nullptr;
  nn::Linear head = nullptr;
  Tensor causal;
};
WEFT_MODULE(Gpt);

/// One train step of `model` with `opt` on (x, y): cross-entropy over every position, backward,
/// step, zero_grad.
template <typename Model>
std::function<Tensor(const Tensor&, const Tensor&)> trainStep(Model& model, optim::Optimizer& opt) {
  return [&model, &opt](const Tensor& x, const Tensor& y) {
    Tensor out = model->forward(x);
    Tensor loss = F::cross_entropy(out.flatten(0, out.dim() - 2), y.flatten());
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
}

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
  Mlp eagerModel, compiledModel;
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
  Cnn eagerModel, compiledModel;
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
  Gpt eagerModel, compiledModel;
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
