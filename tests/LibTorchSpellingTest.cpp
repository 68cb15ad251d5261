// Small programs written in LibTorch's C++ spelling (written here, not copied), one per thing a
// ported program needed: each must compile and do what LibTorch does, so the spellings stay.
#include "TestUtil.h"

#include <any>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace weft::test {
namespace {

TEST(LibTorchSpelling, SizesFromOneIntegerAListOrAVector) {
  int64_t n = 4;
  Tensor a = randn(3), b = ones(n), c = zeros({2, 3}), d = full(2, 1.5);
  EXPECT_EQ(a.sizes(), (Shape{3}));
  EXPECT_EQ(b.sizes(), (Shape{4}));
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.5, 1.5}));
  std::vector<int64_t> sizes{3, 2};
  EXPECT_EQ(weft::empty(sizes).sizes(), (Shape{3, 2}));
  EXPECT_EQ(c.reshape(-1).sizes(), (Shape{6}));
  EXPECT_EQ(c.view(-1).sizes(), (Shape{6}));
  EXPECT_EQ(c.view(sizes).sizes(), (Shape{3, 2}));
  EXPECT_EQ(c.permute({1, 0}).sizes(), (Shape{3, 2}));
  EXPECT_EQ(b.expand({2, 4}).sizes(), (Shape{2, 4}));
  EXPECT_EQ(b.repeat(2).sizes(), (Shape{8}));
  EXPECT_EQ(c.new_zeros(5).sizes(), (Shape{5}));
  Tensor r = randint(10, {100});
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_GE(r.min().item<int64_t>(), 0);
  EXPECT_LT(r.max().item<int64_t>(), 10);
  EXPECT_EQ(rand({2, 2}, kFloat64).dtype(), kFloat64);
  // A shape can be written as a Shape or as LibTorch's IntArrayRef.
  IntArrayRef s = {2, 2};
  EXPECT_EQ(ones(s).numel(), 4);
}

TEST(LibTorchSpelling, ItemStrInferenceModeAndOptions) {
  Tensor loss = tensor({2.5}).sum();
  Scalar v = loss.item(); // untyped, as LibTorch's
  EXPECT_TRUE(v.isFloatingPoint());
  EXPECT_EQ(v.toFloat(), 2.5f);
  EXPECT_EQ(v.to<double>(), 2.5);
  EXPECT_EQ(tensor({3, 4}).sum().item().toLong(), 7);
  EXPECT_TRUE(tensor({true}).sum().item().isIntegral(false)); // a bool sum is int64
  EXPECT_EQ(str("loss ", loss.item(), " at step ", 3), "loss 2.5 at step 3");
  // A value the type cannot hold is an error, as LibTorch's checked conversions.
  EXPECT_THROW((void)tensor({std::nan("")}).sum().item().toInt(), ValueError);
  EXPECT_THROW((void)Scalar(1e20).toLong(), ValueError);
  EXPECT_THROW((void)Scalar(int64_t{1} << 40).toInt(), ValueError);
  EXPECT_THROW((void)Scalar(1e300).toFloat(), ValueError);
  EXPECT_EQ(Scalar(-2.7).to<int64_t>(), -2);
  EXPECT_EQ(Scalar(255).to<uint8_t>(), 255);
  EXPECT_THROW((void)Scalar(256).to<uint8_t>(), ValueError);

  Tensor w = ones({2}, TensorOptions().requires_grad(true));
  EXPECT_TRUE(w.requires_grad());
  {
    InferenceMode guard;
    EXPECT_TRUE(InferenceMode::is_enabled());
    EXPECT_FALSE((w * 2).requires_grad());
    {
      InferenceMode off(false);
      EXPECT_TRUE((w * 2).requires_grad());
    }
  }
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE((w * 2).requires_grad());
}

/// A LibTorch-style custom function: backward returns one gradient per forward argument, an
/// undefined one for the number.
struct MulConstant : autograd::Function<MulConstant> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double c) {
    ctx->saved_data["c"] = c;
    return x * c;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    return {g[0] * std::any_cast<double>(ctx->saved_data["c"]), Tensor()};
  }
};
/// The number first, and the trailing undefined gradient left out.
struct ScaledSum : autograd::Function<ScaledSum> {
  static Tensor forward(autograd::AutogradContext*, double c, const Tensor& x, const Tensor& y) {
    return (x + y).sum() * c;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {Tensor(), g[0] * 3.0 * ones({2})}; // y's gradient omitted: none
  }
};
/// A defined gradient for the number is an error.
struct Wrong : autograd::Function<Wrong> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x, double) { return x * 1.0; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[0], g[0]};
  }
};

TEST(LibTorchSpelling, CustomFunctionGradientsPerForwardArgument) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  MulConstant::apply(x, 5.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 5}));
  Tensor a = ones({2}, TensorOptions().requires_grad(true));
  Tensor b = ones({2}, TensorOptions().requires_grad(true));
  ScaledSum::apply(3.0, a, b).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 3}));
  EXPECT_FALSE(b.grad().defined());
  Tensor z = ones({2}, TensorOptions().requires_grad(true));
  try {
    Wrong::apply(z, 1.0).sum().backward();
    ADD_FAILURE() << "no error";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("a defined gradient for argument 1 of forward, which is "
                                         "not a tensor"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace weft::test
