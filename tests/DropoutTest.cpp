// The dropout family as PyTorch 1.13's: what dropout2d/3d and feature alpha dropout drop (whole
// channels), the mean and variance alpha dropout keeps, eval mode, the in-place forms, gradients,
// compile() drawing per call, and the errors.
#include "TestUtil.h"

#include <cmath>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

namespace weft::test {
namespace {

namespace F = nn::functional;

/// SELU's scale * alpha: where PyTorch's alpha dropout sends a dropped element before its affine.
constexpr double kSeluSaturation = 1.7580993408473766;

/// How `y` is made from `x` (x without repeated values): the dropped elements share y's most
/// common value, the kept ones are a * x + b for one a and b (within float64 rounding).
/// `fraction` is that of the dropped elements, -1 where a kept one is not on the line.
struct DropStats {
  double fraction = -1, value = std::nan(""), a = std::nan(""), b = std::nan("");
};
DropStats dropStats(const Tensor& x, const Tensor& y) {
  std::vector<double> xs = x.to(kFloat64).contiguous().to_vector<double>();
  std::vector<double> ys = y.to(kFloat64).contiguous().to_vector<double>();
  std::map<double, int64_t> counts;
  for (double v : ys)
    ++counts[v];
  DropStats s;
  int64_t dropped = 0;
  for (const auto& [v, n] : counts)
    if (n > dropped) std::tie(s.value, dropped) = std::make_pair(v, n);
  std::vector<size_t> kept;
  for (size_t i = 0; i < ys.size(); ++i)
    if (ys[i] != s.value) kept.push_back(i);
  if (kept.size() < 2) return s;
  const size_t i0 = kept[0], i1 = kept[1];
  s.a = (ys[i1] - ys[i0]) / (xs[i1] - xs[i0]);
  s.b = ys[i0] - s.a * xs[i0];
  for (size_t i : kept)
    if (std::fabs(ys[i] - (s.a * xs[i] + s.b)) > 1e-9 * (1 + std::fabs(ys[i]))) return s;
  s.fraction = static_cast<double>(dropped) / static_cast<double>(ys.size());
  return s;
}

/// Whether each (sample, channel) slice of `y` (N, C, *) is `value` throughout or nowhere.
bool wholeChannels(const Tensor& y, double value) {
  const int64_t slices = y.size(0) * y.size(1), len = y.numel() / slices;
  std::vector<double> ys = y.to(kFloat64).contiguous().to_vector<double>();
  for (int64_t c = 0; c < slices; ++c) {
    int64_t hits = 0;
    for (int64_t i = 0; i < len; ++i)
      hits += ys[static_cast<size_t>(c * len + i)] == value;
    if (hits != 0 && hits != len) return false;
  }
  return true;
}

// The fractions below are of 4096 or more independent draws: the standard deviation of a fraction
// near p = 0.25 is sqrt(p (1 - p) / 4096) < 0.007, so 0.03 (over 4 of them) fails only on a wrong
// probability (and the seeds are fixed, so the tests are deterministic).
TEST(Dropout, Dropout2dZeroesWholeChannelsAndScalesTheRest) {
  manual_seed(11);
  Tensor x = rand({64, 64, 2, 3}, kFloat64) + 1.0; // no zeros of its own
  nn::Dropout2d drop(nn::Dropout2dOptions(0.25));
  Tensor y = drop(x);
  DropStats s = dropStats(x, y);
  EXPECT_EQ(s.value, 0.0);
  EXPECT_NEAR(s.fraction, 0.25, 0.03);
  EXPECT_NEAR(s.a, 1 / 0.75, 1e-12);
  EXPECT_NEAR(s.b, 0.0, 1e-12);
  EXPECT_TRUE(wholeChannels(y, 0.0));
}

TEST(Dropout, Dropout3dZeroesWholeChannels) {
  manual_seed(12);
  Tensor x = rand({64, 64, 2, 2, 2}, kFloat64) + 1.0;
  Tensor y = F::dropout3d(x, 0.25);
  DropStats s = dropStats(x, y);
  EXPECT_NEAR(s.fraction, 0.25, 0.03);
  EXPECT_NEAR(s.a, 1 / 0.75, 1e-12);
  EXPECT_TRUE(wholeChannels(y, 0.0));
}

TEST(Dropout, UnbatchedInputsDropWholeChannels) {
  manual_seed(13);
  // (C, H, W) for dropout2d and (C, D, H, W) for dropout3d, as LibTorch: channels are dim 0.
  Tensor x2 = rand({4096, 2, 2}, kFloat64) + 1.0;
  Tensor y2 = F::dropout2d(x2, 0.25);
  EXPECT_EQ(y2.sizes(), x2.sizes());
  EXPECT_NEAR(dropStats(x2, y2).fraction, 0.25, 0.03);
  EXPECT_TRUE(wholeChannels(y2.unsqueeze(0), 0.0));
  Tensor x3 = rand({4096, 2, 1, 2}, kFloat64) + 1.0;
  Tensor y3 = F::dropout3d(x3, 0.25);
  EXPECT_NEAR(dropStats(x3, y3).fraction, 0.25, 0.03);
  EXPECT_TRUE(wholeChannels(y3.unsqueeze(0), 0.0));
}

// 400,000 draws from N(0, 1): the sample mean's standard deviation is 1/sqrt(4e5) = 0.0016 and the
// sample variance's about sqrt(2 / 4e5) = 0.0022 (a few times that for the two-valued mixture
// alpha dropout makes), so 0.01 and 0.02 fail only on a wrong scale or shift.
TEST(Dropout, AlphaDropoutKeepsMeanAndVarianceAndFillsSeluSaturation) {
  manual_seed(14);
  const double p = 0.2;
  Tensor x = randn({400000}, kFloat64);
  nn::AlphaDropout drop{nn::AlphaDropoutOptions(p)};
  Tensor y = drop(x);
  EXPECT_NEAR(y.mean().item<double>(), 0.0, 0.01);
  EXPECT_NEAR(y.var().item<double>(), 1.0, 0.02);
  // The dropped elements take SELU's saturation -scale*alpha put through the affine a x + b the
  // kept ones get, as PyTorch's; 400,000 draws: the fraction's standard deviation is 0.0006.
  DropStats s = dropStats(x, y);
  EXPECT_NEAR(s.fraction, p, 0.005);
  EXPECT_NEAR(s.value, s.a * -kSeluSaturation + s.b, 1e-12);
}

TEST(Dropout, FeatureAlphaDropoutDropsChannelsAndKeepsTheMoments) {
  manual_seed(15);
  const double p = 0.3;
  Tensor x = randn({500, 200, 4}, kFloat64); // 100,000 channels of 4
  Tensor y = F::feature_alpha_dropout(x, p, /*training=*/true);
  EXPECT_NEAR(y.mean().item<double>(), 0.0, 0.02);
  EXPECT_NEAR(y.var().item<double>(), 1.0, 0.03);
  DropStats s = dropStats(x, y);
  EXPECT_NEAR(s.fraction, p, 0.01);
  EXPECT_NEAR(s.value, s.a * -kSeluSaturation + s.b, 1e-12);
  EXPECT_TRUE(wholeChannels(y, s.value));
}

TEST(Dropout, EvalModeAndTrainingFalseAreTheIdentity) {
  Tensor x = randn({2, 3, 4, 5});
  nn::Dropout drop(0.5);
  nn::Dropout2d drop2d(0.5);
  nn::Dropout3d drop3d(0.5);
  nn::AlphaDropout alpha(0.5);
  nn::FeatureAlphaDropout featureAlpha(0.5);
  drop->eval();
  drop2d->eval();
  alpha->eval();
  featureAlpha->eval();
  drop3d->eval();
  EXPECT_TRUE(sameBytes(drop(x), x));
  EXPECT_TRUE(sameBytes(drop2d(x), x));
  EXPECT_TRUE(sameBytes(drop3d(x.unsqueeze(0)), x.unsqueeze(0)));
  EXPECT_TRUE(sameBytes(alpha(x), x));
  EXPECT_TRUE(sameBytes(featureAlpha(x), x));
  // PyTorch's defaults: the alpha forms do nothing unless told they are training.
  EXPECT_TRUE(sameBytes(F::alpha_dropout(x), x));
  EXPECT_TRUE(sameBytes(F::feature_alpha_dropout(x), x));
  EXPECT_TRUE(sameBytes(F::dropout2d(x, 0.5, false), x));
  // p = 0 keeps everything in training; p = 1 drops everything (alpha dropout too: zeros).
  EXPECT_TRUE(sameBytes(F::dropout2d(x, 0.0), x));
  EXPECT_EQ(F::alpha_dropout(x, 1.0, true).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(F::dropout3d(x, 1.0).abs().sum().item<double>(), 0.0);
}

TEST(Dropout, InPlaceFormsWriteTheirInput) {
  manual_seed(16);
  Tensor x = rand({8, 16, 3, 3}) + 1.0, before = x.clone();
  nn::Dropout2d drop(nn::Dropout2dOptions(0.5).inplace(true));
  Tensor y = drop(x);
  EXPECT_TRUE(sameBytes(x, y));
  EXPECT_FALSE(sameBytes(x, before));
  EXPECT_NEAR(dropStats(before, x).a, 2.0, 1e-6);
  EXPECT_TRUE(wholeChannels(x, 0.0));
  // An unbatched input is written in place too.
  Tensor u = rand({64, 2, 2}) + 1.0, uBefore = u.clone();
  F::dropout2d(u, 0.5, true, true);
  EXPECT_NEAR(dropStats(uBefore, u).a, 2.0, 1e-6);
  EXPECT_TRUE(wholeChannels(u.unsqueeze(0), 0.0));
  // Alpha dropout in place: the same values as out of place from the same seed.
  Tensor v = randn({1000});
  manual_seed(17);
  Tensor outOfPlace = F::alpha_dropout(v, 0.4, true);
  manual_seed(17);
  F::alpha_dropout(v, 0.4, true, /*inplace=*/true);
  EXPECT_TRUE(allClose(v, outOfPlace, 1e-6, 1e-6));
}

TEST(Dropout, GradientsFlowThroughTheKeptChannels) {
  manual_seed(18);
  Tensor x = (rand({16, 32, 2}, kFloat64) + 1.0).requires_grad_();
  Tensor y = F::dropout2d(x.unsqueeze(-1), 0.5);
  y.sum().backward();
  // d y / d x is 1/(1-p) where the channel is kept, 0 where dropped.
  Tensor expected = (y.squeeze(-1) != 0).to(kFloat64) * 2.0;
  EXPECT_TRUE(sameBytes(x.grad(), expected));
  // In place on an unbatched non-leaf: the gradient still reaches the leaf, channel by channel.
  Tensor q = (rand({64, 2, 2}, kFloat64) + 1.0).requires_grad_();
  Tensor r = q * 1.0;
  F::dropout2d(r, 0.5, true, /*inplace=*/true);
  r.sum().backward();
  EXPECT_TRUE(sameBytes(q.grad(), (r != 0).to(kFloat64) * 2.0));
  EXPECT_TRUE(wholeChannels(q.grad().unsqueeze(0), 0.0));
  // Alpha dropout: a where kept, 0 where dropped; through an in-place write of a non-leaf too.
  // (Writing in place through a view of a tensor that requires grad is an error in weft.)
  Tensor z = randn({1000}, kFloat64).requires_grad_();
  Tensor h = z.reshape({10, 10, 10}) * 1.0; // 100 channels of 10
  F::feature_alpha_dropout(h, 0.3, true, true);
  h.sum().backward();
  std::vector<double> g = z.grad().to_vector<double>();
  const double a = 1.0 / std::sqrt((kSeluSaturation * kSeluSaturation * 0.3 + 1) * 0.7);
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i], g[i / 10 * 10]) << "element " << i << " shares its channel's draw";
    EXPECT_TRUE(g[i] == 0.0 || std::fabs(g[i] - a) < 1e-12) << g[i];
  }
}

TEST(Dropout, CompiledDropoutDrawsOnEveryCall) {
  nn::Dropout2d drop(nn::Dropout2dOptions(0.5));
  auto step = compile([&](const Tensor& x) { return drop(x); });
  Tensor x = rand({4, 64, 2, 2}) + 1.0;
  manual_seed(19);
  Tensor eager = drop(x);
  manual_seed(19);
  Tensor first = step(x), second = step(x);
  // Each call's masks are whole channels, the seed's draws as eagerly, and a new draw per call.
  EXPECT_NEAR(dropStats(x, first).a, 2.0, 1e-6);
  EXPECT_TRUE(wholeChannels(first, 0.0));
  EXPECT_TRUE(wholeChannels(second, 0.0));
  EXPECT_TRUE(sameBytes(first, eager));
  EXPECT_FALSE(sameBytes(first, second));
  // Eval mode is guarded: the compiled function traces again and is the identity.
  drop->eval();
  EXPECT_TRUE(sameBytes(step(x), x));
}

TEST(Dropout, ErrorsNameTheOpTheValueAndTheCallersLine) {
  Tensor x = randn({2, 3, 4, 4});
  std::string m = messageOf<ValueError>([&] { F::dropout2d(x, 1.5); });
  EXPECT_TRUE(has(m, "dropout2d") && has(m, "1.5") && has(m, "DropoutTest.cpp")) << m;
  EXPECT_TRUE(throwsWith<ValueError>([&] { F::alpha_dropout(x, std::nan(""), true); },
                                     {"alpha_dropout", "nan"}));
  EXPECT_TRUE(throwsWith<ValueError>([] { nn::FeatureAlphaDropout(-0.1); },
                                     {"nn::FeatureAlphaDropout", "-0.1"}));
  // Ranks: dropout2d takes (N, C, H, W) or (C, H, W), dropout3d one dim more; the feature forms
  // need (N, C, *). Checked in eval mode too.
  EXPECT_TRUE(throwsWith<ShapeError>(
      [] {
        F::dropout2d(randn({3, 4}), 0.5, false);
      },
      {"dropout2d", "[3, 4]", "(N, C, H, W)"}));
  EXPECT_TRUE(throwsWith<ShapeError>(
      [] {
        F::dropout3d(randn({1, 2, 3, 4, 5, 6}), 0.5);
      },
      {"dropout3d", "(N, C, D, H, W)"}));
  EXPECT_TRUE(throwsWith<ShapeError>([] { F::feature_alpha_dropout(randn({5}), 0.5, true); },
                                     {"feature_alpha_dropout", "[5]"}));
  EXPECT_TRUE(throwsWith<DTypeError>([] { F::alpha_dropout(ones({4}, kInt64), 0.5, true); },
                                     {"alpha_dropout", "int64"}));
  // In place on a leaf that requires grad, as PyTorch.
  Tensor leaf = randn({2, 3}).requires_grad_();
  EXPECT_THROW(F::dropout(leaf, 0.5, true, true), ValueError);
}

TEST(Dropout, ModulesPrintAsPyTorch) {
  std::ostringstream os;
  os << *nn::Dropout2d(0.3) << " " << *nn::AlphaDropout(nn::AlphaDropoutOptions(0.2).inplace(true));
  EXPECT_EQ(os.str(), "Dropout2d(p=0.3, inplace=false) AlphaDropout(p=0.2, inplace=true)");
}

} // namespace
} // namespace weft::test
