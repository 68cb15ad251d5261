// Small programs in LibTorch's C++ spelling of the nn side (written here, not copied): the
// top-level functions (torch::nll_loss, torch::dropout, ...), the dropout modules and
// torch::save / torch::load. Each must compile and do what LibTorch does, so the spellings stay.
#include "TestUtil.h"

#include <string>
#include <vector>

namespace weft::test {
namespace {

namespace F = nn::functional;

static_assert(Reduction::None == 0 && Reduction::Mean == 1 && Reduction::Sum == 2);

TEST(LibTorchNnSpelling, TopLevelLossesAreTheFunctionalOnes) {
  manual_seed(1);
  Tensor logits = randn({6, 3}), target = randint(3, {6}), w = rand({3}) + 0.5;
  Tensor logp = log_softmax(logits, 1);
  EXPECT_TRUE(sameBytes(nll_loss(logp, target), F::nll_loss(logp, target)));
  EXPECT_TRUE(
      sameBytes(nll_loss(logp, target, w, Reduction::Sum, 1),
                F::nll_loss(logp, target,
                            nn::NLLLossOptions().weight(w).reduction(nn::kSum).ignore_index(1))));
  EXPECT_TRUE(sameBytes(
      cross_entropy_loss(logits, target, {}, Reduction::None, -100, 0.1),
      F::cross_entropy(logits, target,
                       nn::CrossEntropyLossOptions().reduction(nn::kNone).label_smoothing(0.1))));
  Tensor p = rand({4, 3}) * 0.9 + 0.05, y = rand({4, 3});
  EXPECT_TRUE(
      sameBytes(binary_cross_entropy(p, y, w, Reduction::Sum),
                F::binary_cross_entropy(p, y, nn::BCELossOptions().weight(w).reduction(nn::kSum))));
  EXPECT_TRUE(
      sameBytes(binary_cross_entropy_with_logits(logits.narrow(0, 0, 4), y, {}, w),
                F::binary_cross_entropy_with_logits(logits.narrow(0, 0, 4), y,
                                                    nn::BCEWithLogitsLossOptions().pos_weight(w))));
  Tensor a = randn({3, 4}), b = randn({3, 4});
  EXPECT_TRUE(sameBytes(mse_loss(a, b, Reduction::Sum), F::mse_loss(a, b, nn::kSum)));
  EXPECT_TRUE(sameBytes(l1_loss(a, b), F::l1_loss(a, b)));
  EXPECT_TRUE(sameBytes(smooth_l1_loss(a, b, Reduction::Mean, 0.5),
                        F::smooth_l1_loss(a, b, nn::SmoothL1LossOptions().beta(0.5))));
  EXPECT_TRUE(
      sameBytes(huber_loss(a, b, Reduction::None, 2.0),
                F::huber_loss(a, b, nn::HuberLossOptions().reduction(nn::kNone).delta(2.0))));
  Tensor lp = log_softmax(a, 1), lq = log_softmax(b, 1);
  EXPECT_TRUE(sameBytes(kl_div(lp, lq, Reduction::Mean, true),
                        F::kl_div(lp, lq, nn::KLDivLossOptions().log_target(true))));
  Tensor sign = tensor({1.0, -1.0, 1.0});
  EXPECT_TRUE(sameBytes(margin_ranking_loss(a.select(0, 0).narrow(0, 0, 3),
                                            b.select(0, 0).narrow(0, 0, 3), sign, 0.2),
                        F::margin_ranking_loss(a.select(0, 0).narrow(0, 0, 3),
                                               b.select(0, 0).narrow(0, 0, 3), sign,
                                               nn::MarginRankingLossOptions().margin(0.2))));
  EXPECT_TRUE(sameBytes(hinge_embedding_loss(a.narrow(1, 0, 3), sign.expand({3, 3}), 0.5),
                        F::hinge_embedding_loss(a.narrow(1, 0, 3), sign.expand({3, 3}),
                                                nn::HingeEmbeddingLossOptions().margin(0.5))));
  EXPECT_TRUE(
      sameBytes(cosine_embedding_loss(a, b, sign, 0.1, Reduction::Sum),
                F::cosine_embedding_loss(
                    a, b, sign, nn::CosineEmbeddingLossOptions().margin(0.1).reduction(nn::kSum))));
  EXPECT_TRUE(sameBytes(soft_margin_loss(a.narrow(1, 0, 3), sign.expand({3, 3})),
                        F::soft_margin_loss(a.narrow(1, 0, 3), sign.expand({3, 3}))));
  Tensor c = randn({3, 4});
  EXPECT_TRUE(
      sameBytes(triplet_margin_loss(a, b, c, 0.5, 1.0, 1e-6, true),
                F::triplet_margin_loss(
                    a, b, c, nn::TripletMarginLossOptions().margin(0.5).p(1.0).swap(true))));
  Tensor rate = rand({3, 4}) + 0.5;
  EXPECT_TRUE(sameBytes(
      poisson_nll_loss(rate, b.abs(), false, true, 1e-8, Reduction::Mean),
      F::poisson_nll_loss(rate, b.abs(), nn::PoissonNLLLossOptions().log_input(false).full(true))));
  // A reduction outside the enum names the loss and the value.
  EXPECT_TRUE(
      throwsWith<ValueError>([&] { mse_loss(a, b, 3); }, {"mse_loss", "weft::Reduction", "got 3"}));
  EXPECT_TRUE(
      throwsWith<ShapeError>([&] { nll_loss2d(logp, target); }, {"nll_loss2d", "4-D", "[6, 3]"}));
}

TEST(LibTorchNnSpelling, TopLevelActivationsAndLayers) {
  Tensor x = randn({4, 6});
  EXPECT_TRUE(sameBytes(leaky_relu(x, 0.2), F::leaky_relu(x, 0.2)));
  EXPECT_TRUE(sameBytes(hardtanh(x, -0.5, 0.5), x.clamp(-0.5, 0.5)));
  EXPECT_TRUE(sameBytes(elu(x), F::elu(x)));
  EXPECT_TRUE(sameBytes(elu(x, 2.0, 1.0, 1.0), F::elu(x, 2.0)));
  EXPECT_TRUE(sameBytes(log_sigmoid(x), F::logsigmoid(x)));
  EXPECT_TRUE(sameBytes(threshold(x, 0.1, -1.0), F::threshold(x, 0.1, -1.0)));
  EXPECT_EQ(glu(x, 1).sizes(), (Shape{4, 3}));
  for (Tensor y : {selu(x), celu(x, 0.5), silu(x), mish(x), softplus(x, 2.0, 10.0), hardsigmoid(x),
                   hardswish(x), relu6(x), hardshrink(x), softshrink(x, 0.3)})
    EXPECT_EQ(y.sizes(), x.sizes());
  // Layers and distances.
  Tensor w = randn({3, 6}), bias = randn({3});
  EXPECT_TRUE(sameBytes(linear(x, w, bias), F::linear(x, w, bias)));
  EXPECT_EQ(cosine_similarity(x, x).sizes(), (Shape{4}));
  EXPECT_EQ(pairwise_distance(x, x * 2, 1.0).sizes(), (Shape{4}));
  EXPECT_EQ(pixel_shuffle(randn({1, 8, 2, 2}), 2).sizes(), (Shape{1, 2, 4, 4}));
  EXPECT_EQ(adaptive_avg_pool2d(randn({1, 2, 6, 6}), {3, 2}).sizes(), (Shape{1, 2, 3, 2}));
  // dropout(input, p, train) and its in-place form; train = false is the identity.
  EXPECT_TRUE(sameBytes(dropout(x, 0.5, false), x));
  Tensor d = ones({1000});
  dropout_(d, 0.5, true);
  EXPECT_TRUE(d.eq(0).logical_or(d.eq(2)).all().item<bool>());
  Tensor features = ones({100, 4, 3});
  feature_dropout_(features, 0.5, true);
  EXPECT_TRUE(features.amax({2}).eq(features.amin({2})).all().item<bool>()) << "whole channels";
  EXPECT_TRUE(sameBytes(alpha_dropout(x, 0.5, false), x));
  EXPECT_TRUE(sameBytes(feature_alpha_dropout(x, 0.5, false), x));
  Tensor e = randn({10, 3});
  alpha_dropout_(e, 0.0, true);
  feature_alpha_dropout_(e, 0.0, true);
  EXPECT_EQ(e.sizes(), (Shape{10, 3}));
}

TEST(LibTorchNnSpelling, NormsAndEmbeddingInATensOrder) {
  manual_seed(2);
  Tensor x = randn({5, 3, 2}), w = randn({3}), b = randn({3});
  Tensor rm = zeros({3}), rv = ones({3}), rm2 = zeros({3}), rv2 = ones({3});
  // ATen: weight and bias before the running statistics; training updates them in place.
  Tensor y = batch_norm(x, w, b, rm, rv, /*training=*/true, 0.1, 1e-5, /*cudnn_enabled=*/false);
  EXPECT_TRUE(sameBytes(y, F::batch_norm(x, rm2, rv2, w, b, true, 0.1, 1e-5)));
  EXPECT_TRUE(sameBytes(rm, rm2));
  EXPECT_FALSE(sameBytes(rm, zeros({3})));
  EXPECT_TRUE(
      sameBytes(batch_norm(x, {}, {}, rm, rv, false, 0.1, 1e-5, false), F::batch_norm(x, rm, rv)));
  Tensor g = randn({2}), h = randn({2});
  EXPECT_TRUE(sameBytes(layer_norm(x, {2}, g, h, 1e-5, true), F::layer_norm(x, {2}, g, h)));
  EXPECT_TRUE(sameBytes(layer_norm(x, {3, 2}), F::layer_norm(x, {3, 2})));
  EXPECT_TRUE(sameBytes(group_norm(x, 3, w, b, 1e-5, true), F::group_norm(x, 3, w, b)));
  // embedding(weight, indices, padding_idx): the weight first, -1 for no padding row.
  Tensor table = randn({5, 2}), idx = tensor({0, 4, 1});
  EXPECT_TRUE(sameBytes(embedding(table, idx, -1), F::embedding(idx, table)));
  EXPECT_TRUE(sameBytes(embedding(table, idx, 4), F::embedding(idx, table, 4)));
  EXPECT_TRUE(throwsWith<DTypeError>([&] { embedding(idx, table, -1); }, {"weight first"}));
  EXPECT_TRUE(throwsWith<IndexError>([&] { embedding(table, idx, 5); }, {"padding_idx 5"}));
  EXPECT_TRUE(
      throwsWith<ValueError>([&] { embedding(table, idx, -1, true); }, {"scale_grad_by_freq"}));
}

/// A network written as a LibTorch user writes one, with Dropout2d and AlphaDropout.
struct NetImpl : nn::Module {
  NetImpl() {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)));
    drop = register_module("drop", nn::Dropout2d(nn::Dropout2dOptions(0.25)));
    fc = register_module("fc", nn::Linear(4 * 4 * 4, 3));
    alpha = register_module("alpha", nn::AlphaDropout(0.1));
  }
  Tensor forward(Tensor x) {
    x = drop(relu(conv(x)));
    x = alpha(selu(fc(x.view({x.size(0), -1}))));
    return log_softmax(x, 1);
  }
  nn::Conv2d conv = nullptr;
  nn::Dropout2d drop = nullptr;
  nn::Linear fc = nullptr;
  nn::AlphaDropout alpha = nullptr;
};
WEFT_MODULE(Net);

TEST(LibTorchNnSpelling, TrainSaveAndLoadAModelAndItsOptimizer) {
  TempDir dir;
  const std::string modelPath = (dir.path / "net.pt").string();
  const std::string optimPath = (dir.path / "optim.pt").string();
  manual_seed(3);
  Net net;
  optim::SGD optimizer(net->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  Tensor data = randn({8, 1, 4, 4}), target = randint(3, {8});
  for (int step = 0; step < 3; ++step) {
    optimizer.zero_grad();
    Tensor loss = nll_loss(net->forward(data), target);
    loss.backward();
    optimizer.step();
  }
  save(net, modelPath);
  save(optimizer, optimPath);

  Net restored;
  optim::SGD restoredOptimizer(restored->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  load(restored, modelPath);
  load(restoredOptimizer, optimPath);
  net->eval();
  restored->eval(); // dropout off: both compute the same function
  EXPECT_TRUE(sameBytes(restored->forward(data), net->forward(data)));

  // Tensors and lists of tensors, as torch::save(tensor, "x.pt").
  std::vector<Tensor> tensors = {data, target};
  save(tensors, (dir.path / "tensors.pt").string());
  std::vector<Tensor> back;
  load(back, (dir.path / "tensors.pt").string());
  ASSERT_EQ(back.size(), 2u);
  EXPECT_TRUE(sameBytes(back[1], target));
}

TEST(LibTorchNnSpelling, DropoutModulesInTrainAndEval) {
  manual_seed(4);
  Tensor x = ones({16, 8, 3, 3});
  nn::Dropout2d drop2d(nn::Dropout2dOptions().p(0.5));
  nn::Dropout3d drop3d(nn::Dropout3dOptions(0.5).inplace(false));
  nn::FeatureAlphaDropout featureAlpha(nn::FeatureAlphaDropoutOptions(0.2));
  EXPECT_TRUE(drop2d->is_training());
  Tensor y = drop2d(x);
  EXPECT_TRUE(y.amax({2, 3}).eq(y.amin({2, 3})).all().item<bool>()) << "whole channels";
  EXPECT_TRUE(y.eq(0).any().item<bool>() && y.eq(2).any().item<bool>());
  EXPECT_EQ(drop3d(x.unsqueeze(0)).sizes(), (Shape{1, 16, 8, 3, 3}));
  drop2d->eval();
  featureAlpha->eval();
  EXPECT_TRUE(sameBytes(drop2d(x), x));
  EXPECT_TRUE(sameBytes(featureAlpha(x), x));
  EXPECT_DOUBLE_EQ(drop3d->options.p(), 0.5);
}

} // namespace
} // namespace weft::test
