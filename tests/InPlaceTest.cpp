// The in-place forms of out-of-place methods (InPlace.cpp): each writes exactly what its
// out-of-place form returns, keeps the tensor's dtype, takes over the autograd history, runs
// inside compile() as eagerly, and refuses a result its dtype cannot hold; the random fills of
// other distributions and fill_diagonal_ against PyTorch 1.13.
#include "TestUtil.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace weft::test {
namespace {

/// `f` throws an `E` whose message contains `text`.
template <typename E, typename F> void expectError(F f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << text;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

struct Case {
  const char* name;
  std::function<void(Tensor&)> inPlace;
  std::function<Tensor(const Tensor&)> outOfPlace;
};

/// Every in-place form against its out-of-place form, bit for bit, eagerly and compiled.
TEST(InPlace, EachFormWritesWhatItsOutOfPlaceFormReturns) {
  const Tensor x = tensor({0.25, -0.5, 0.75, 0.0, 0.9, -0.3}).reshape({2, 3}).to(kFloat32);
  const Tensor y = tensor({0.5, -0.5, 0.25, 2.0, -0.9, 0.1}).reshape({2, 3}).to(kFloat32);
  const Tensor m = tensor({1.0, 2.0, 0.5, -1.0, 0.0, 3.0}).reshape({3, 2}).to(kFloat32);
  const Tensor v = tensor({1.0, -2.0}).to(kFloat32), w = tensor({0.5, 1.5, -1.0}).to(kFloat32);
  const Tensor b1 = ones({2, 2, 4}), b2 = ones({2, 4, 3}) * 0.5;
  const std::vector<Case> cases = {
      {"absolute_", [](Tensor& t) { t.absolute_(); }, [](const Tensor& t) { return t.abs(); }},
      {"negative_", [](Tensor& t) { t.negative_(); }, [](const Tensor& t) { return t.neg(); }},
      {"sgn_", [](Tensor& t) { t.sgn_(); }, [](const Tensor& t) { return t.sign(); }},
      {"fix_", [](Tensor& t) { t.fix_(); }, [](const Tensor& t) { return t.trunc(); }},
      {"square_", [](Tensor& t) { t.square_(); }, [](const Tensor& t) { return t * t; }},
      {"frac_", [](Tensor& t) { t.frac_(); }, [](const Tensor& t) { return t.frac(); }},
      {"sinc_", [](Tensor& t) { t.sinc_(); }, [](const Tensor& t) { return t.sinc(); }},
      {"deg2rad_", [](Tensor& t) { t.deg2rad_(); }, [](const Tensor& t) { return t.deg2rad(); }},
      {"rad2deg_", [](Tensor& t) { t.rad2deg_(); }, [](const Tensor& t) { return t.rad2deg(); }},
      {"arccos_", [](Tensor& t) { t.arccos_(); }, [](const Tensor& t) { return t.acos(); }},
      {"arcsin_", [](Tensor& t) { t.arcsin_(); }, [](const Tensor& t) { return t.asin(); }},
      {"arctan_", [](Tensor& t) { t.arctan_(); }, [](const Tensor& t) { return t.atan(); }},
      {"arcsinh_", [](Tensor& t) { t.arcsinh_(); }, [](const Tensor& t) { return t.asinh(); }},
      {"arctanh_", [](Tensor& t) { t.arctanh_(); }, [](const Tensor& t) { return t.atanh(); }},
      {"arccosh_", [](Tensor& t) { t.add_(2.0).arccosh_(); },
       [](const Tensor& t) { return (t + 2.0).acosh(); }},
      {"logit_", [](Tensor& t) { t.logit_(0.1); }, [](const Tensor& t) { return t.logit(0.1); }},
      {"nan_to_num_", [](Tensor& t) { t.div_(0.0).nan_to_num_(1.0, 2.0, -2.0); },
       [](const Tensor& t) { return (t / 0.0).nan_to_num(1.0, 2.0, -2.0); }},
      {"polygamma_", [](Tensor& t) { t.add_(2.0).polygamma_(1); },
       [](const Tensor& t) { return (t + 2.0).polygamma(1); }},
      {"mvlgamma_", [](Tensor& t) { t.add_(3.0).mvlgamma_(2); },
       [](const Tensor& t) { return (t + 3.0).mvlgamma(2); }},
      {"clip_", [](Tensor& t) { t.clip_(-0.4, 0.6); },
       [](const Tensor& t) { return t.clamp(-0.4, 0.6); }},
      {"renorm_", [](Tensor& t) { t.renorm_(2, 0, 0.5); },
       [](const Tensor& t) { return t.renorm(2, 0, 0.5); }},
      {"cumsum_", [](Tensor& t) { t.cumsum_(1); }, [](const Tensor& t) { return t.cumsum(1); }},
      {"cumprod_", [](Tensor& t) { t.cumprod_(0); }, [](const Tensor& t) { return t.cumprod(0); }},
      {"tril_", [](Tensor& t) { t.tril_(); }, [](const Tensor& t) { return t.tril(); }},
      {"triu_", [](Tensor& t) { t.triu_(1); }, [](const Tensor& t) { return t.triu(1); }},
      {"eq_", [&](Tensor& t) { t.eq_(y); }, [&](const Tensor& t) { return t.eq(y); }},
      {"ne_", [](Tensor& t) { t.ne_(0.0); }, [](const Tensor& t) { return t.ne(0.0); }},
      {"lt_", [&](Tensor& t) { t.lt_(y); }, [&](const Tensor& t) { return t.lt(y); }},
      {"le_", [](Tensor& t) { t.le_(0.25); }, [](const Tensor& t) { return t.le(0.25); }},
      {"gt_", [&](Tensor& t) { t.gt_(y); }, [&](const Tensor& t) { return t.gt(y); }},
      {"ge_", [](Tensor& t) { t.ge_(0.0); }, [](const Tensor& t) { return t.ge(0.0); }},
      {"greater_", [&](Tensor& t) { t.greater_(y); }, [&](const Tensor& t) { return t.gt(y); }},
      {"greater_equal_", [&](Tensor& t) { t.greater_equal_(y); },
       [&](const Tensor& t) { return t.ge(y); }},
      {"less_", [](Tensor& t) { t.less_(0.5); }, [](const Tensor& t) { return t.lt(0.5); }},
      {"less_equal_", [&](Tensor& t) { t.less_equal_(y); },
       [&](const Tensor& t) { return t.le(y); }},
      {"not_equal_", [&](Tensor& t) { t.not_equal_(y); }, [&](const Tensor& t) { return t.ne(y); }},
      {"logical_and_", [&](Tensor& t) { t.logical_and_(y); },
       [&](const Tensor& t) { return t.logical_and(y); }},
      {"logical_or_", [&](Tensor& t) { t.logical_or_(y); },
       [&](const Tensor& t) { return t.logical_or(y); }},
      {"logical_xor_", [&](Tensor& t) { t.logical_xor_(y); },
       [&](const Tensor& t) { return t.logical_xor(y); }},
      {"atan2_", [&](Tensor& t) { t.atan2_(y); }, [&](const Tensor& t) { return t.atan2(y); }},
      {"arctan2_", [&](Tensor& t) { t.arctan2_(y); }, [&](const Tensor& t) { return t.atan2(y); }},
      {"hypot_", [&](Tensor& t) { t.hypot_(y); }, [&](const Tensor& t) { return t.hypot(y); }},
      {"ldexp_", [&](Tensor& t) { t.ldexp_(y.round()); },
       [&](const Tensor& t) { return t.ldexp(y.round()); }},
      {"xlogy_", [&](Tensor& t) { t.xlogy_(y.abs()); },
       [&](const Tensor& t) { return t.xlogy(y.abs()); }},
      {"heaviside_", [&](Tensor& t) { t.heaviside_(y); },
       [&](const Tensor& t) { return t.heaviside(y); }},
      {"copysign_", [&](Tensor& t) { t.copysign_(y); },
       [&](const Tensor& t) { return t.copysign(y); }},
      {"copysign_ scalar", [](Tensor& t) { t.copysign_(-1.0); },
       [](const Tensor& t) { return t.copysign(-1.0); }},
      {"true_divide_", [&](Tensor& t) { t.true_divide_(y); },
       [&](const Tensor& t) { return t / y; }},
      {"divide_", [](Tensor& t) { t.divide_(4.0); }, [](const Tensor& t) { return t / 4.0; }},
      {"multiply_", [&](Tensor& t) { t.multiply_(y); }, [&](const Tensor& t) { return t * y; }},
      {"subtract_", [&](Tensor& t) { t.subtract_(y, 2.0); },
       [&](const Tensor& t) { return t.sub(y, 2.0); }},
      {"subtract_ scalar", [](Tensor& t) { t.subtract_(1.0, 3.0); },
       [](const Tensor& t) { return t.sub(3.0); }},
      {"addmm_",
       [&](Tensor& t) { t.narrow(1, 0, 2).addmm_(t.narrow(1, 0, 3).mul(1.0), m, 0.5, 2.0); },
       [&](const Tensor& t) {
         Tensor r = t.clone();
         r.narrow(1, 0, 2).copy_(t.narrow(1, 0, 2).addmm(t.narrow(1, 0, 3), m, 0.5, 2.0));
         return r;
       }},
      {"addmv_", [&](Tensor& t) { t.select(0, 0).narrow(0, 0, 3).addmv_(m, v, 2.0, 0.5); },
       [&](const Tensor& t) {
         Tensor r = t.clone();
         r.select(0, 0).copy_(t.select(0, 0).addmv(m, v, 2.0, 0.5));
         return r;
       }},
      {"addr_", [&](Tensor& t) { t.addr_(v, w); }, [&](const Tensor& t) { return t.addr(v, w); }},
      {"remainder_", [&](Tensor& t) { t.remainder_(y); },
       [&](const Tensor& t) { return t.remainder(y); }},
      {"remainder_ scalar", [](Tensor& t) { t.remainder_(0.3); },
       [](const Tensor& t) { return t.remainder(0.3); }},
      {"lerp_", [&](Tensor& t) { t.lerp_(y, x.abs()); },
       [&](const Tensor& t) { return t.lerp(y, x.abs()); }},
      {"lerp_ scalar", [&](Tensor& t) { t.lerp_(y, 0.25); },
       [&](const Tensor& t) { return t.lerp(y, 0.25); }},
      {"masked_fill_", [&](Tensor& t) { t.masked_fill_(y > 0, 2.0); },
       [&](const Tensor& t) { return t.masked_fill(y > 0, 2.0); }},
      {"index_fill_",
       [](Tensor& t) {
         t.index_fill_(1, tensor({2, 0}), -1.0);
       },
       [](const Tensor& t) {
         return t.index_fill(1, tensor({2, 0}), -1.0);
       }},
      {"index_copy_", [&](Tensor& t) { t.index_copy_(0, tensor({1}), y.narrow(0, 0, 1)); },
       [&](const Tensor& t) { return t.index_copy(0, tensor({1}), y.narrow(0, 0, 1)); }},
      {"clamp_min_", [](Tensor& t) { t.clamp_min_(0.1); },
       [](const Tensor& t) { return t.clamp(0.1); }},
      {"clamp_max_", [](Tensor& t) { t.clamp_max_(0.1); },
       [](const Tensor& t) { return t.clamp(std::nullopt, 0.1); }},
      {"add_ scalar alpha", [](Tensor& t) { t.add_(0.5, 3); },
       [](const Tensor& t) { return t + 1.5; }},
      {"sub_ scalar alpha", [](Tensor& t) { t.sub_(2, 0.25); },
       [](const Tensor& t) { return t - 0.5; }},
      {"baddbmm_",
       [&](Tensor& t) {
         Tensor s = t.reshape({2, 1, 3}).expand({2, 2, 3}).contiguous();
         s.baddbmm_(b1, b2, 0.5);
         t.copy_(s.sum(1));
       },
       [&](const Tensor& t) {
         return t.reshape({2, 1, 3}).expand({2, 2, 3}).baddbmm(b1, b2, 0.5).sum(1);
       }},
      {"addbmm_",
       [&](Tensor& t) {
         Tensor s = t.narrow(0, 0, 1).expand({2, 3}).contiguous();
         s.addbmm_(b1, b2, 1.0, 0.25);
         t.copy_(s);
       },
       [&](const Tensor& t) {
         return t.narrow(0, 0, 1).expand({2, 3}).addbmm(b1, b2, 1.0, 0.25);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tensor t = x.clone();
    const uint64_t version = t._version();
    c.inPlace(t);
    EXPECT_GT(t._version(), version);
    EXPECT_EQ(t.dtype(), kFloat32);
    const Tensor want = c.outOfPlace(x).to(kFloat32);
    EXPECT_TRUE(allClose(t, want, 0, 0)) << t << want;
    auto compiled = compile([&](const Tensor& a) {
      Tensor u = a.clone();
      c.inPlace(u);
      return u;
    });
    EXPECT_TRUE(allClose(compiled(x), want, 0, 0));
  }
}

/// The free functions and other names weft/TensorMethods.inc generates are their methods.
TEST(InPlace, GeneratedFunctionsAndOtherNamesAreTheirMethods) {
  const Tensor x = tensor({0.25, -0.5, 0.75, 0.0, 0.9, -0.3}).reshape({2, 3}).to(kFloat32);
  const Tensor y = tensor({0.5, -0.5, 0.25, 2.0, -0.9, 0.1}).reshape({2, 3}).to(kFloat32);
  const std::vector<std::pair<Tensor, Tensor>> same = {
      {absolute(x), x.abs()},
      {arccos(x), x.acos()},
      {arcsinh(x), x.asinh()},
      {negative(x), -x},
      {fix(x), x.trunc()},
      {sgn(x), x.sign()},
      {arctan2(x, y), x.atan2(y)},
      {clip(x, -0.2, 0.2), x.clamp(-0.2, 0.2)},
      {clamp_min(x, 0.1), x.clamp(0.1)},
      {clamp_max(x, 0.1), x.clamp(std::nullopt, 0.1)},
      {true_divide(x, y), x / y},
      {divide(x, 2.0), x / 2.0},
      {multiply(x, y), x * y},
      {subtract(x, y, 2.0), x - y * 2.0},
      {greater(x, y), x > y},
      {less_equal(x, 0.25), x <= 0.25},
      {not_equal(x, y), x != y},
      {square(x), x * x},
      {frac(x), x.frac()},
      {remainder(x, 0.3), x.remainder(0.3)},
      {lerp(x, y, 0.5), x.lerp(y, 0.5)},
      {masked_fill(x, y > 0, 1.0), x.masked_fill(y > 0, 1.0)},
      {index_fill(x, 1, tensor({1}), 0.0), x.index_fill(1, tensor({1}), 0.0)},
      {ravel(x), x.reshape({-1})},
      {swapaxes(x, 0, 1), x.t()},
      {moveaxis(x, 0, 1), x.t()},
      {ger(x.select(0, 0), y.select(0, 1)), outer(x.select(0, 0), y.select(0, 1))},
      {x.expand_as(ones({4, 2, 3})), x.expand({4, 2, 3})},
  };
  for (size_t i = 0; i < same.size(); ++i)
    EXPECT_TRUE(allClose(same[i].first, same[i].second, 0, 0)) << "pair " << i;
  EXPECT_EQ(split_with_sizes(x, {1, 2}, 1).size(), 2u);
  EXPECT_EQ(unsafe_chunk(x, 3, 1).size(), 3u);
  // An in-place form reports its own name for an undefined tensor, like the hand-written ones.
  Tensor undefined;
  expectError<ValueError>([&] { undefined.sinc_(); }, "sinc_: called on an undefined tensor");
}

/// The in-place form takes over the history: the gradient through x.sinc_() is sinc's, through
/// x.xlogy_(y) reaches both, and a comparison written in place cuts it (its result has none).
TEST(InPlace, GradientsFlowAsThroughTheOutOfPlaceForm) {
  const Tensor start = tensor({0.3, -0.7, 1.2}).to(kFloat64);
  Tensor a = start.clone().requires_grad_(), b = start.clone().requires_grad_();
  Tensor y = tensor({0.5, 2.0, 1.5}).to(kFloat64).requires_grad_();
  Tensor viaInPlace = a * 1.0;
  viaInPlace.sinc_().xlogy_(y);
  viaInPlace.sum().backward();
  b.sinc().xlogy(y.detach()).sum().backward();
  EXPECT_TRUE(allClose(a.grad(), b.grad(), 1e-15, 0));
  // d/dy of sinc(a) * log(y): sinc(a) / y; y's gradient reached through the in-place xlogy_.
  EXPECT_TRUE(allClose(y.grad(), start.sinc() / y.detach(), 1e-15, 0));
  Tensor c = start.clone().requires_grad_();
  Tensor cut = c * 2.0;
  cut.gt_(0.0);
  EXPECT_FALSE(cut.requires_grad());
}

TEST(InPlace, ResultsTheTensorCannotHoldAreErrors) {
  Tensor i = tensor({1, 2, 3});
  expectError<DTypeError>([&] { i.sinc_(); }, "can't be cast to the desired output type");
  expectError<DTypeError>([&] { i.true_divide_(2); }, "can't be cast");
  Tensor f = tensor({1.0, 2.0}).to(kFloat32);
  expectError<DTypeError>([&] { f.float_power_(2.0); }, "requires dtype float64");
  Tensor d = tensor({1.0, 2.0}).to(kFloat64);
  d.float_power_(2.0);
  EXPECT_EQ(d.to_vector<double>(), (std::vector<double>{1.0, 4.0}));
  expectError<ShapeError>([&] { f.gt_(ones({2, 2})); }, "doesn't match the broadcast shape");
  Tensor leaf = ones({2}).requires_grad_();
  expectError<ValueError>([&] { leaf.square_(); }, "leaf Variable that requires grad");
  expectError<ValueError>([&] { Tensor().square_(); }, "undefined tensor");
}

/// fill_diagonal_ as PyTorch 1.13 fills: a matrix's diagonal, a tall one's wrapped with `wrap`
/// (one row left out between the repeats), a cube's (0,0,0) and (1,1,1).
TEST(InPlace, FillDiagonalAsPyTorch) {
  auto filled = [](Shape s, bool wrap) {
    Tensor t = zeros(std::move(s));
    t.fill_diagonal_(5.0, wrap);
    return t.to_vector<double>();
  };
  std::vector<double> tall(21, 0.0), tallWrapped(21, 0.0), wide(8, 0.0), cube(8, 0.0);
  for (int64_t k : {0, 4, 8})
    tall[static_cast<size_t>(k)] = 5;
  for (int64_t k : {0, 4, 8, 12, 16, 20})
    tallWrapped[static_cast<size_t>(k)] = 5;
  wide[0] = wide[5] = 5;
  cube[0] = cube[7] = 5;
  EXPECT_EQ(filled({7, 3}, false), tall);
  EXPECT_EQ(filled({7, 3}, true), tallWrapped);
  EXPECT_EQ(filled({2, 4}, true), wide);
  EXPECT_EQ(filled({2, 2, 2}, false), cube);
  auto compiled = compile([](const Tensor& a) {
    Tensor t = a.clone();
    t.fill_diagonal_(5.0, true);
    return t;
  });
  EXPECT_EQ(compiled(zeros({7, 3})).to_vector<double>(), tallWrapped);
  expectError<ShapeError>([] { zeros({3}).fill_diagonal_(1.0); }, "larger than 1");
  expectError<ShapeError>([] { zeros({2, 3, 2}).fill_diagonal_(1.0); }, "equal length");
}

/// The random fills draw from their distributions: checked by the sample's moments over 200,000
/// draws (tolerances are several standard errors of each estimate, so a correct fill fails less
/// often than once in 10^6 runs; a wrong parameter moves the estimate far past them).
TEST(InPlace, RandomFillsDrawFromTheirDistributions) {
  manual_seed(7);
  const int64_t n = 200000;
  Tensor e = empty({n}, kFloat64);
  e.exponential_(4.0);
  EXPECT_GE(e.min().item<double>(), 0.0);
  EXPECT_NEAR(e.mean().item<double>(), 0.25, 0.005); // sd 0.25 / sqrt(n) = 0.00056
  Tensor c = empty({n}, kFloat64);
  c.cauchy_(2.0, 0.5);
  EXPECT_NEAR(c.median().item<double>(), 2.0, 0.01); // quartiles at 2 -+ 0.5
  EXPECT_NEAR(c.quantile(0.75).item<double>(), 2.5, 0.02);
  Tensor l = empty({n}, kFloat64);
  l.log_normal_(0.5, 0.25);
  EXPECT_NEAR(l.log().mean().item<double>(), 0.5, 0.005);
  EXPECT_NEAR(l.log().std().item<double>(), 0.25, 0.005);
  Tensor g = empty({n}, kInt64);
  g.geometric_(0.25);
  EXPECT_GE(g.min().item<int64_t>(), 1);
  EXPECT_NEAR(g.to(kFloat64).mean().item<double>(), 4.0, 0.05); // sd sqrt(12) / sqrt(n) = 0.008
  Tensor r = empty({n}, kInt32);
  r.random_(3, 7);
  EXPECT_EQ(r.min().item<int32_t>(), 3);
  EXPECT_EQ(r.max().item<int32_t>(), 6);
  EXPECT_NEAR(r.to(kFloat64).mean().item<double>(), 4.5, 0.02);
  Tensor rf = empty({n}, kFloat32);
  rf.random_(10);
  EXPECT_EQ(rf.min().item<float>(), 0.0f);
  EXPECT_EQ(rf.max().item<float>(), 9.0f);
  EXPECT_TRUE(allClose(rf, rf.floor(), 0, 0)); // integers
  Tensor bits = empty({1000}, kBool);
  bits.random_(2);
  EXPECT_GT(bits.sum().item<int64_t>(), 400);
  EXPECT_LT(bits.sum().item<int64_t>(), 600);
  expectError<ValueError>([] { empty({2}).exponential_(0.0); }, "lambda > 0");
  expectError<ValueError>([] { empty({2}).cauchy_(0.0, -1.0); }, "sigma > 0");
  expectError<ValueError>([] { empty({2}).geometric_(1.0); }, "(0, 1)");
  expectError<DTypeError>([] { empty({2}, kInt64).exponential_(); }, "floating");
  expectError<ValueError>([] { empty({2}).random_(5, 5); }, "less than 'to'");
  expectError<ValueError>([] { empty({2}, kBool).random_(0, 3); }, "bool's range");
  expectError<ValueError>([] { empty({2}, kInt32).random_(0, int64_t{1} << 40); }, "range");
  expectError<ValueError>([] { empty({2}, kUInt8).random_(-1, 3); }, "range");
  Tensor small = empty({1000}, kUInt8);
  small.geometric_(1e-6); // draws far past 255: held at the type's largest count
  EXPECT_LE(small.to(kInt64).max().item<int64_t>(), 255);
  EXPECT_GE(small.to(kInt64).min().item<int64_t>(), 1);
}

} // namespace
} // namespace weft::test
