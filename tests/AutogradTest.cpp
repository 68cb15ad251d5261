// Define-by-run autograd: backward, accumulation, graph retention, grad modes, hooks,
// autograd::grad with double backward, custom functions and in-place safety.
#include "TestUtil.h"

#include <cmath>

namespace weft::test {
namespace {

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}
Tensor leaf(std::initializer_list<double> v) {
  return tensor(v, kFloat64).requires_grad_();
}

TEST(Autograd, BackwardAccumulatesIntoLeaves) {
  Tensor x = leaf({1, 2, 3});
  (x * x).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 4, 6}));
  (x * 3).sum().backward(); // a new graph: gradients add up
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{5, 7, 9}));
  x.mutable_grad().zero_();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 0, 0}));
}

TEST(Autograd, ANumberOperandKeepsItsPrecisionInTheBackward) {
  // x ** (1 / 3.5) in float64: the rule's `b - 1.0` on the wrapped exponent is computed in float64
  // (it was rounded to float32, a relative error of 2e-8). Tolerance: a few float64 ulps.
  Tensor x = leaf({3, 2});
  x.pow(1.0 / 3.5).sum().backward();
  for (int i = 0; i < 2; ++i) {
    const double v = i == 0 ? 3.0 : 2.0, expected = std::pow(v, 1.0 / 3.5 - 1) / 3.5;
    EXPECT_NEAR(vals(x.grad())[static_cast<size_t>(i)], expected, 4e-16 * expected) << v;
  }
}

TEST(Autograd, SharedSubexpressionsSumTheirGradients) {
  Tensor x = leaf({2});
  Tensor y = x * x;
  Tensor z = y * y + y.exp() * 0 + y; // y used three times
  z.backward();
  EXPECT_NEAR(x.grad().item<double>(), 4 * 8 + 2 * 2, 1e-12); // d(x^4 + x^2) = 4x^3 + 2x
}

TEST(Autograd, RetainGraphAllowsASecondBackward) {
  Tensor x = leaf({1, 2});
  Tensor y = (x.exp() * x).sum();
  y.backward({}, true);
  y.backward();
  std::vector<double> g = vals(x.grad());
  EXPECT_NEAR(g[0], 2 * (std::exp(1.0) * 2), 1e-12);
  EXPECT_THROW(y.backward(), ValueError); // freed after the second pass
}

TEST(Autograd, NonScalarOutputsNeedAGradient) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  EXPECT_THROW(y.backward(), ValueError);
  y.backward(tensor({1.0, 10.0}, kFloat64));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 20}));
}

TEST(Autograd, NoGradEnableGradAndDetach) {
  Tensor x = leaf({1});
  {
    NoGradGuard guard;
    EXPECT_FALSE((x * 2).requires_grad());
    {
      EnableGradGuard enable;
      EXPECT_TRUE((x * 2).requires_grad());
    }
  }
  EXPECT_TRUE(is_grad_enabled());
  Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.data_ptr(), x.data_ptr());
  Tensor y = (x * d).sum();
  y.backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1})); // d is a constant
  EXPECT_FALSE(arange(3).to(kFloat32).requires_grad());
  EXPECT_FALSE((x > 0).requires_grad()); // comparisons have no gradient
}

TEST(Autograd, HooksSeeAndReplaceGradients) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    seen = vals(g);
    return g * 2;
  });
  x.register_hook([](const Tensor& g) { return g + 1; });
  y.sum().backward();
  EXPECT_EQ(seen, (std::vector<double>{1, 1}));
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{7, 7})); // (1*2)*3 + 1
}

TEST(Autograd, FirstGradientIsKeptOnlyWhenNothingElseHoldsIt) {
  // A linear layer's weight gradient arrives contiguous (computed transposed for w.t()) and held
  // by nothing else: .grad keeps it without a copy. A gradient a hook also kept must be copied:
  // the next backward accumulates into .grad in place, and the hook's tensor must not change.
  Tensor x = leaf({1, 2, 3, 4, 5, 6}).detach().reshape({2, 3});
  Tensor w = leaf({1, 0, -1, 2, 1, 0}).reshape({2, 3}).detach().requires_grad_();
  x.matmul(w.t()).sum().backward();
  EXPECT_TRUE(w.grad().is_contiguous());
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{5, 7, 9, 5, 7, 9}));
  Tensor kept;
  Tensor v = leaf({1, 2});
  v.register_hook([&](const Tensor& g) {
    kept = g;
    return Tensor{};
  });
  (v * 3).sum().backward();
  (v * 3).sum().backward();
  EXPECT_EQ(vals(v.grad()), (std::vector<double>{6, 6}));
  EXPECT_EQ(vals(kept), (std::vector<double>{3, 3})); // the second call's, untouched
  Tensor first;
  Tensor u = leaf({1, 2});
  u.register_hook([&](const Tensor& g) { // keeps g, passes on a view of its memory
    if (!first.defined()) first = g;
    return g.reshape({2});
  });
  (u * 3).sum().backward();
  (u * 3).sum().backward();
  EXPECT_EQ(vals(first), (std::vector<double>{3, 3})); // .grad was a copy of it
  EXPECT_EQ(vals(u.grad()), (std::vector<double>{6, 6}));
}

TEST(Autograd, RetainGradKeepsNonLeafGradients) {
  Tensor x = leaf({1, 2});
  Tensor y = x * x;
  y.retain_grad();
  (y * 5).sum().backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{5, 5}));
  EXPECT_FALSE(y.is_leaf());
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
}

TEST(Autograd, GradReturnsGradientsWithoutTouchingLeaves) {
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  Tensor y = (x * w).sum();
  auto g = autograd::grad({y}, {x});
  EXPECT_EQ(vals(g[0]), (std::vector<double>{3, 4}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  Tensor unused = leaf({0});
  EXPECT_THROW(autograd::grad({(x * 2).sum()}, {unused}), ValueError);
  auto u = autograd::grad({(x * 2).sum()}, {unused}, {}, std::nullopt, false, true);
  EXPECT_FALSE(u[0].defined());
}

TEST(Autograd, DoubleBackwardThroughGrad) {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x * x).sum();
  auto g = autograd::grad({y}, {x}, {}, std::nullopt, true);
  EXPECT_EQ(vals(g[0]), (std::vector<double>{3, 12, 27}));
  auto gg = autograd::grad({g[0].sum()}, {x});
  EXPECT_EQ(vals(gg[0]), (std::vector<double>{6, 12, 18}));
}

TEST(Autograd, GradientPenalty) {
  // Penalty ||d/dx (w . x^2)||^2 = sum (2 w x)^2; its gradient w.r.t. w is 8 w x^2.
  Tensor x = leaf({1, 2}), w = leaf({0.5, -1});
  Tensor out = (w * x * x).sum();
  auto gx = autograd::grad({out}, {x}, {}, std::nullopt, true);
  Tensor penalty = (gx[0] * gx[0]).sum();
  penalty.backward();
  EXPECT_TRUE(allClose(vals(w.grad()), {8 * 0.5 * 1, 8 * -1.0 * 4}, 1e-12, 0));
}

struct ScaledExp : autograd::Function<ScaledExp> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
    Tensor y = x.exp() * scale;
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor y = ctx->get_saved_variables()[0];
    return {g[0] * y}; // d(scale * e^x)/dx = y
  }
};

struct SplitSum : autograd::Function<SplitSum> {
  static std::vector<Tensor> forward(autograd::AutogradContext*, const Tensor& a, const Tensor& b) {
    return {a + b, a - b};
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    EXPECT_TRUE(ctx->needs_input_grad(0));
    return {g[0] + g[1], g[0] - g[1]};
  }
};

TEST(Autograd, CustomFunctionsUseTheirOwnBackward) {
  Tensor x = leaf({0, 1});
  Tensor y = ScaledExp::apply(x, 2.0);
  EXPECT_TRUE(y.requires_grad());
  y.sum().backward({}, true);
  EXPECT_TRUE(allClose(vals(x.grad()), {2.0, 2 * std::exp(1.0)}, 1e-12, 0));
  y.sum().backward();
  EXPECT_THROW(y.sum().backward(), ValueError); // saved tensors are freed

  Tensor a = leaf({1, 2}), b = leaf({5, 7});
  std::vector<Tensor> outs = SplitSum::apply(a, b);
  (outs[0] * 2 + outs[1] * 3).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{5, 5}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{-1, -1}));
  // Only one output used: the other's gradient arrives as zeros.
  Tensor c = leaf({1}), d = leaf({1});
  SplitSum::apply(c, d)[1].sum().backward();
  EXPECT_EQ(vals(d.grad()), (std::vector<double>{-1}));
}

TEST(Autograd, InPlaceOnSavedTensorIsDetected) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  Tensor z = y * y; // saves y
  y.add_(1);
  try {
    z.sum().backward();
    FAIL() << "expected an error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("is at version 1; expected version 0"), std::string::npos)
        << e.what();
  }
}

TEST(Autograd, ReluSavesItsOutputAsPyTorchDoes) {
  // relu's rule reads y: changing its input afterwards is fine, changing its output is not.
  Tensor x = leaf({-1, 2});
  Tensor h = x * 1.0;
  Tensor y = h.relu();
  h.add_(1);
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1}));
  Tensor z = (x * 1.0).relu();
  z.mul_(2);
  EXPECT_THROW(z.sum().backward(), ValueError);
}

TEST(Autograd, InPlaceOnNonLeafRebasesHistory) {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3;
  y.mul_(x); // y = 3 x^2
  y.add_(1);
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{6, 12}));
  Tensor u = leaf({0.5, 1.0});
  Tensor v = u * 2;
  v.exp_().sin_(); // d/du sin(exp(2u)) = cos(exp(2u)) exp(2u) 2
  v.sum().backward();
  for (int k = 0; k < 2; ++k) {
    double a = vals(u)[static_cast<size_t>(k)], e = std::exp(2 * a);
    EXPECT_NEAR(vals(u.grad())[static_cast<size_t>(k)], std::cos(e) * e * 2, 1e-12);
  }
  Tensor leafRequiring = leaf({1});
  EXPECT_THROW(leafRequiring.add_(1), ValueError);
  {
    NoGradGuard guard; // optimizers update parameters this way
    leafRequiring.sub_(tensor({0.5}, kFloat64));
  }
  EXPECT_EQ(vals(leafRequiring), (std::vector<double>{0.5}));
}

TEST(Autograd, LinearRegressionConvergesWithSgd) {
  Generator g(11);
  Tensor X = randn({64, 3}, kFloat64, g);
  Tensor trueW = tensor({1.5, -2.0, 0.5}, kFloat64).unsqueeze(1);
  Tensor Y = X.matmul(trueW) + 0.25;
  Tensor w = zeros({3, 1}, kFloat64).requires_grad_(), b = zeros({1}, kFloat64).requires_grad_();
  for (int step = 0; step < 300; ++step) {
    Tensor loss = (X.matmul(w) + b - Y).pow(2).mean();
    loss.backward();
    NoGradGuard guard;
    w.sub_(w.grad() * 0.1);
    b.sub_(b.grad() * 0.1);
    w.mutable_grad().zero_();
    b.mutable_grad().zero_();
  }
  EXPECT_TRUE(allClose(vals(w), {1.5, -2.0, 0.5}, 0, 1e-6));
  EXPECT_NEAR(b.item<double>(), 0.25, 1e-6);
}

TEST(Autograd, SmallCnnGradientsMatchFiniteDifferences) {
  Tensor x = randn({2, 2, 6, 6}, kFloat64, Generator(3));
  Tensor w1 = randn({3, 2, 3, 3}, kFloat64, Generator(4)) * 0.5,
         w2 = randn({3 * 2 * 2, 4}, kFloat64, Generator(5)) * 0.5;
  Fn f = [](const std::vector<Tensor>& in) {
    Tensor h = conv2d(in[0], in[1], {}, {1}, {1}).tanh();
    h = max_pool2d(avg_pool2d(h, {2}), {2}, {}, {0}, {1}, true);
    return h.flatten(1).matmul(in[2]).log_softmax(1);
  };
  EXPECT_TRUE(gradcheck(f, {x, w1, w2}));
}

TEST(Autograd, CompositeOpsGradcheck) {
  Tensor x = randn({3, 4}, kFloat64, Generator(8));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].softmax(1); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].logsumexp({0}); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].var({1}); }, {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return gelu(in[0]) + gelu(in[0], true); }, {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return in[0].clamp(-0.5, 0.5) + relu(in[0]); }, {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].topk(2).first; }, {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return stack({in[0], in[0] * 2}, 1).flip({2});
      },
      {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) {
        return pad(in[0], {1, 2, 0, 1}, 3.0).cumsum(0);
      },
      {x}));
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].prod(1); }, {x}));
  Tensor withZero = tensor({0.0, 2.0, 3.0, 0.5}, kFloat64);
  EXPECT_TRUE(gradcheck([](const std::vector<Tensor>& in) { return in[0].prod(); }, {withZero}));
  Tensor idx = tensor({2, 0, 2});
  EXPECT_TRUE(
      gradcheck([idx](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {x}));
  EXPECT_TRUE(gradcheck(
      [](const std::vector<Tensor>& in) { return conv_transpose1d(in[0], in[1], {}, 2, 1, 1); },
      {randn({1, 2, 5}, kFloat64, Generator(9)), randn({2, 3, 3}, kFloat64, Generator(10))}));
}

} // namespace
} // namespace weft::test
