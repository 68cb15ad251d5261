// Tensors: dtypes and promotion, views sharing storage, factories, in-place ops, printing.
#include "TestUtil.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace weft::test {
namespace {

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

// Shape is a vector that keeps up to kInline values inline: each operation must give what a
// std::vector<int64_t> gives, on both sides of the inline capacity and across it.
TEST(Shape, BehavesAsAVectorInlineAndOnTheHeap) {
  for (size_t n : {size_t{0}, size_t{3}, Shape::kInline, Shape::kInline + 1, size_t{40}}) {
    std::vector<int64_t> ref;
    Shape s;
    for (size_t i = 0; i < n; ++i) {
      ref.push_back(static_cast<int64_t>(i * 7 + 1));
      s.push_back(static_cast<int64_t>(i * 7 + 1));
    }
    ASSERT_EQ(std::vector<int64_t>(s), ref) << n;
    ref.insert(ref.begin(), -1);
    s.insert(s.begin(), -1);
    ref.insert(ref.begin() + 1, 3, 9);
    s.insert(s.begin() + 1, 3, 9);
    ref.insert(ref.end(), ref.begin(), ref.begin() + 2); // a range out of itself
    s.insert(s.end(), s.begin(), s.begin() + 2);
    ASSERT_EQ(std::vector<int64_t>(s), ref) << n;
    ref.erase(ref.begin() + 1, ref.begin() + 3);
    s.erase(s.begin() + 1, s.begin() + 3);
    ref.erase(ref.end() - 1);
    s.erase(s.end() - 1);
    ASSERT_EQ(std::vector<int64_t>(s), ref) << n;
    Shape copy = s, moved = std::move(copy);
    EXPECT_EQ(moved, s);
    EXPECT_TRUE(copy.empty());
    Shape assigned{5};
    assigned = std::move(moved);
    EXPECT_EQ(assigned, s);
    assigned.resize(n + 10, 4);
    ref.resize(n + 10, 4);
    EXPECT_EQ(std::vector<int64_t>(assigned), ref);
    EXPECT_EQ(Shape(ref), assigned); // from a vector
  }
  EXPECT_LT(Shape({1, 2}), Shape({1, 3}));
  EXPECT_LT(Shape({1, 2}), Shape({1, 2, 0}));
  EXPECT_EQ(Shape(3, 2), Shape({2, 2, 2}));
}

TEST(DType, PromotionFollowsPyTorch) {
  EXPECT_EQ(promoteTypes(kInt32, kFloat16), kFloat16);
  EXPECT_EQ(promoteTypes(kFloat16, kBFloat16), kFloat32);
  EXPECT_EQ(promoteTypes(kUInt8, kInt32), kInt32);
  EXPECT_EQ(promoteTypes(kBool, kUInt8), kUInt8);
  EXPECT_EQ(promoteTypes(kInt64, kFloat32), kFloat32);
  EXPECT_EQ(promoteTypes(kFloat32, kFloat64), kFloat64);
}

TEST(DType, ScalarsAndZeroDimTensorsDoNotWidenWithinACategory) {
  Tensor i32 = ones({3}, kInt32), f16 = ones({3}, kFloat16);
  EXPECT_EQ((i32 + 5).dtype(), kInt32);                    // int scalar keeps int32
  EXPECT_EQ((i32 + 2.5).dtype(), kFloat32);                // float scalar: default float
  EXPECT_EQ((f16 * 2.0).dtype(), kFloat16);                // float scalar keeps float16
  EXPECT_EQ((i32 + ones({}, kInt64)).dtype(), kInt32);     // 0-dim tensor of the same category
  EXPECT_EQ((i32 + ones({}, kFloat64)).dtype(), kFloat64); // 0-dim tensor of a higher category
  EXPECT_EQ((ones({3}, kBool) + 1).dtype(), kInt64);
  EXPECT_EQ((i32 / 2).dtype(), kFloat32); // true division
  EXPECT_EQ((i32 < 2.5).dtype(), kBool);
  EXPECT_EQ(i32.exp().dtype(), kFloat32);
}

TEST(DType, HalfAndBFloat16RoundToNearestEven) {
  EXPECT_EQ(static_cast<float>(Half(1.0f + 1.0f / 2048)), 1.0f); // tie -> even
  EXPECT_EQ(static_cast<float>(Half(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(5.9604645e-8f)), 5.9604645e-8f); // smallest subnormal
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);        // tie -> even
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
  Tensor t = tensor({0.1, 1.5, -2.25}).to(kFloat16).to(kFloat64);
  EXPECT_TRUE(allClose(vals(t), {0.0999755859375, 1.5, -2.25}, 0, 0));
}

TEST(DType, ToConvertsEveryPair) {
  Tensor base = tensor({0.0, 1.0, 2.0, 3.0});
  for (DType a : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8})
    for (DType b : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8})
      EXPECT_EQ(vals(base.to(a).to(b)), (std::vector<double>{0, 1, 2, 3}))
          << dtypeName(a) << "->" << dtypeName(b);
  EXPECT_EQ(vals(base.to(kBool)), (std::vector<double>{0, 1, 1, 1}));
}

TEST(Views, ShareStorageAndSeeWrites) {
  Tensor x = arange(12).to(kFloat32).reshape({3, 4});
  Tensor t = x.t(), s = x.slice(1, 1, 4, 2), r = x.select(0, 1), v = x.view({2, 6});
  EXPECT_EQ(t.data_ptr(), x.data_ptr());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(s.sizes(), (Shape{3, 2}));
  EXPECT_EQ(s.strides(), (Shape{4, 2}));
  x.index_put_({1, 1}, 100.0);
  EXPECT_EQ(t.index({1, 1}).item<float>(), 100.0f);
  EXPECT_EQ(s.index({1, 0}).item<float>(), 100.0f);
  EXPECT_EQ(r.index({1}).item<float>(), 100.0f);
  EXPECT_EQ(v.index({0, 5}).item<float>(), 100.0f);
}

TEST(Views, ExpandUsesZeroStridesAndContiguousCopies) {
  Tensor x = tensor({1.0, 2.0, 3.0}).unsqueeze(0).expand({4, 3});
  EXPECT_EQ(x.strides(), (Shape{0, 1}));
  Tensor c = x.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(vals(c.sum({0})), (std::vector<double>{4, 8, 12}));
}

TEST(Views, ReshapeCopiesOnlyWhenItMust) {
  Tensor x = arange(6).reshape({2, 3});
  EXPECT_EQ(x.reshape({3, 2}).data_ptr(), x.data_ptr());
  Tensor y = x.t().reshape({6});
  EXPECT_NE(y.data_ptr(), x.data_ptr());
  EXPECT_EQ(vals(y), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_THROW(x.t().view({6}), ShapeError);
}

TEST(Views, SqueezeUnsqueezeFlattenUnflattenPermute) {
  Tensor x = zeros({2, 1, 3, 1});
  EXPECT_EQ(x.squeeze().sizes(), (Shape{2, 3}));
  EXPECT_EQ(x.squeeze(1).sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).sizes(), (Shape{2, 1, 3, 1, 1}));
  EXPECT_EQ(x.flatten(1).sizes(), (Shape{2, 3}));
  EXPECT_EQ(zeros({2, 12}).unflatten(1, {3, -1}).sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(zeros({2, 3, 4}).permute({2, 0, 1}).sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(zeros({2, 3, 4}).transpose(0, -1).sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(zeros({5, 7}).narrow(1, 2, 3).sizes(), (Shape{5, 3}));
}

TEST(Factories, ValuesAndDtypes) {
  EXPECT_EQ(arange(5).dtype(), kInt64);
  EXPECT_EQ(arange(0.0, 1.0, 0.25).dtype(), kFloat32);
  EXPECT_TRUE(allClose(vals(arange(0.0, 1.0, 0.25)), {0, 0.25, 0.5, 0.75}, 0, 0));
  EXPECT_TRUE(allClose(vals(linspace(0, 1, 5)), {0, 0.25, 0.5, 0.75, 1}, 0, 1e-7));
  EXPECT_EQ(vals(eye(2, 3)), (std::vector<double>{1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(vals(full({2}, 7, kInt32)), (std::vector<double>{7, 7}));
  EXPECT_EQ(full({1}, int64_t{9007199254740993}, kInt64).item<int64_t>(),
            9007199254740993); // exact past 2^53
  EXPECT_EQ(tensor({1, 2}).dtype(), kInt64);
  EXPECT_EQ(tensor({1.5, 2.0}).dtype(), kFloat32);
  float buf[4] = {1, 2, 3, 4};
  Tensor b = from_blob(buf, {2, 2});
  b.mul_(2);
  EXPECT_EQ(buf[3], 8.0f); // from_blob shares the caller's memory
  EXPECT_TRUE(zeros({2}, TensorOptions().requires_grad()).requires_grad());
}

TEST(Random, SameSeedSameNumbersAndStreamsAdvance) {
  Generator g1(42), g2(42);
  Tensor a = randn({100}, kFloat32, g1), b = randn({100}, kFloat32, g2);
  EXPECT_EQ(vals(a), vals(b));
  Tensor c = randn({100}, kFloat32, g1);
  EXPECT_NE(vals(a), vals(c));
  manual_seed(3);
  Tensor d = rand({10});
  manual_seed(3);
  EXPECT_EQ(vals(rand({10})), vals(d));
  // The same draw in float64 and float32 comes from the same bits: they agree to float precision.
  EXPECT_TRUE(allClose(vals(rand({50}, kFloat32, Generator(5))),
                       vals(rand({50}, kFloat64, Generator(5))), 1e-6, 1e-6));
}

TEST(Random, RandintBernoulliRandperm) {
  Tensor r = randint(3, 7, {1000}, kInt64, Generator(1));
  EXPECT_GE(r.amin().item<int64_t>(), 3);
  EXPECT_LE(r.amax().item<int64_t>(), 6);
  EXPECT_GT((r == 6).sum().item<int64_t>(), 150); // each of 4 values ~250 times
  double p = bernoulli({20000}, 0.3, kFloat32, Generator(2)).mean().item<double>();
  EXPECT_NEAR(p, 0.3, 0.02); // std error 0.0032: 6 sigma
  std::vector<int64_t> perm = randperm(50, Generator(3)).to_vector<int64_t>();
  std::sort(perm.begin(), perm.end());
  for (int64_t i = 0; i < 50; ++i)
    EXPECT_EQ(perm[static_cast<size_t>(i)], i);
}

TEST(InPlace, BumpsVersionAndWritesThrough) {
  Tensor x = zeros({3});
  uint64_t v0 = x._version();
  x.add_(1).mul_(tensor({1.0, 2.0, 3.0})).sub_(0.5).div_(2);
  EXPECT_EQ(x._version(), v0 + 4);
  EXPECT_TRUE(allClose(vals(x), {0.25, 0.75, 1.25}, 0, 1e-7));
  x.clamp_(0.5, 1.0);
  EXPECT_TRUE(allClose(vals(x), {0.5, 0.75, 1.0}, 0, 0));
  x.fill_(2).masked_fill_(tensor({true, false, true}), 9);
  EXPECT_EQ(vals(x), (std::vector<double>{9, 2, 9}));
  x.zero_();
  EXPECT_EQ(vals(x), (std::vector<double>{0, 0, 0}));
  x.copy_(tensor({5}));
  EXPECT_EQ(vals(x), (std::vector<double>{5, 5, 5}));
  Tensor m = zeros({2, 3});
  m.select(0, 1).add_(1); // in place through a view changes the base
  EXPECT_EQ(vals(m), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  Tensor i = zeros({2}, kInt64);
  i += 3;
  EXPECT_EQ(vals(i), (std::vector<double>{3, 3}));
}

TEST(InPlace, EveryUnaryOpHasAnInPlaceForm) {
  // x.op_() writes op(x) into x (through a view into its base), bumps the version once, and
  // refuses what PyTorch refuses: a float op's result in an integral tensor.
  Tensor x = tensor({0.25, -1.5, 2.0});
  uint64_t v0 = x._version();
  x.exp_().log_().neg_().abs_();
  EXPECT_EQ(x._version(), v0 + 4);
  EXPECT_TRUE(allClose(vals(x), {0.25, 1.5, 2.0}, 0, 1e-6));
  Tensor m = tensor({-1.0, 4.0, -9.0, 16.0}).reshape({2, 2});
  m.t().select(0, 1).relu_(); // m's column 1: [4, 16] stay
  m.select(1, 0).relu_();     // m's column 0: [-1, -9] -> 0
  EXPECT_EQ(vals(m), (std::vector<double>{0, 4, 0, 16}));
  m.sqrt_().trunc_();
  EXPECT_EQ(vals(m), (std::vector<double>{0, 2, 0, 4}));
  Tensor b = tensor({1.0, 0.0});
  b.logical_not_(); // a bool result cast back into self's dtype
  EXPECT_EQ(b.dtype(), kFloat32);
  EXPECT_EQ(vals(b), (std::vector<double>{0, 1}));
  Tensor i = tensor({1, -2});
  EXPECT_THROW(i.exp_(), DTypeError);
  i.abs_().neg_();
  EXPECT_EQ(vals(i), (std::vector<double>{-1, -2}));
}

TEST(InPlace, OverlappingOperandsReadTheOldValues) {
  // add_/sub_/mul_/div_ write self's memory directly when that gives the out-of-place result:
  // an operand that is self itself reads element i before i is written; one overlapping self
  // otherwise (a flipped or shifted view) must still see the old values, as PyTorch's do.
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0});
  x.mul_(x);
  EXPECT_EQ(vals(x), (std::vector<double>{1, 4, 9, 16}));
  x.add_(x.flip({0}));
  EXPECT_EQ(vals(x), (std::vector<double>{17, 13, 13, 17}));
  Tensor y = arange(1000).to(kFloat32) * 2.0;
  y.slice(0, 1, 1000).sub_(y.slice(0, 0, 999)); // the old neighbour: 2 each
  std::vector<double> d = vals(y);
  EXPECT_EQ(d[0], 0);
  EXPECT_EQ(std::count(d.begin() + 1, d.end(), 2.0), 999);
  Tensor m = tensor({1.0, 2.0, 3.0, 4.0}).reshape({2, 2});
  m.t().div_(tensor({1.0, 2.0})); // a strided self: its row j (m's column j) over [1, 2]
  EXPECT_EQ(vals(m), (std::vector<double>{1, 2, 1.5, 2}));
  Tensor i = tensor({7}, kInt64);
  EXPECT_THROW(i.div_(2), Error); // true division: an int64 self cannot hold the result
  i.mul_(2);
  EXPECT_EQ(vals(i), (std::vector<double>{14}));
  // A tensor saved for backward and then changed in place under no_grad: backward notices.
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  Tensor s = tensor({3.0, 4.0});
  Tensor loss = (w * s).sum();
  {
    NoGradGuard guard;
    s.mul_(2.0);
  }
  EXPECT_THROW(loss.backward(), Error);
}

TEST(Ops, ReductionsSortsAndComposites) {
  Tensor x = tensor({3.0, 1.0, 4.0, 1.0, 5.0, 9.0}).reshape({2, 3});
  EXPECT_EQ(vals(x.sum({1})), (std::vector<double>{8, 15}));
  EXPECT_EQ(vals(x.amax({0}, true)), (std::vector<double>{3, 5, 9}));
  auto [mv, mi] = x.max(1);
  EXPECT_EQ(vals(mv), (std::vector<double>{4, 9}));
  EXPECT_EQ(vals(mi), (std::vector<double>{2, 2}));
  EXPECT_EQ(x.argmin().item<int64_t>(), 1);
  EXPECT_NEAR(x.var({1}).index({0}).item<float>(), 7.0f / 3.0f * 1.0f, 1e-5);
  EXPECT_NEAR(x.std().item<float>(),
              std::sqrt(((3 - 23.0 / 6) * (3 - 23.0 / 6) + (1 - 23.0 / 6) * (1 - 23.0 / 6) * 2 +
                         (4 - 23.0 / 6) * (4 - 23.0 / 6) + (5 - 23.0 / 6) * (5 - 23.0 / 6) +
                         (9 - 23.0 / 6) * (9 - 23.0 / 6)) /
                        5),
              1e-5);
  auto [sv, si] = x.sort(1, true);
  EXPECT_EQ(vals(sv), (std::vector<double>{4, 3, 1, 9, 5, 1}));
  EXPECT_EQ(vals(si), (std::vector<double>{2, 0, 1, 2, 1, 0}));
  auto [tv, ti] = x.flatten().topk(2);
  EXPECT_EQ(vals(tv), (std::vector<double>{9, 5}));
  EXPECT_EQ(vals(ti), (std::vector<double>{5, 4}));
  EXPECT_EQ(vals(x.cumsum(1)), (std::vector<double>{3, 4, 8, 1, 6, 15}));
  EXPECT_EQ(arange(4).sum().dtype(), kInt64);
  EXPECT_EQ(vals(tensor({true, true, false}).sum()), (std::vector<double>{2}));
}

/// sum(x, dims) in double, from x's elements by their multi-index: the reference for the kernels'
/// layouts (reductions over inner, outer and mixed dims, transposed and sliced inputs).
std::vector<double> naiveSum(const Tensor& x, const Shape& dims) {
  std::vector<double> v = x.contiguous().to_vector<double>();
  Shape shape = x.sizes(), keptShape;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) keptShape.push_back(shape[d]);
  std::vector<double> out(static_cast<size_t>(numel(keptShape)), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rem = i, o = 0, scale = 1;
    for (int64_t d = x.dim(); d-- > 0;) {
      int64_t idx = rem % shape[d];
      rem /= shape[d];
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
      o += idx * scale;
      scale *= shape[d];
    }
    out[static_cast<size_t>(o)] += v[static_cast<size_t>(i)];
  }
  return out;
}

/// Distance in units in the last place between two finite floating-point numbers of one type.
template <typename T> int64_t ulps(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  auto ordered = [](T v) {
    I i;
    std::memcpy(&i, &v, sizeof(T));
    return i < 0 ? -static_cast<int64_t>(i & std::numeric_limits<I>::max())
                 : static_cast<int64_t>(i);
  };
  return std::abs(ordered(a) - ordered(b));
}

/// Binary methods and functions with a number promote as PyTorch does (a wrapped number changes
/// the dtype only across categories), add/sub scale it by alpha, and pow's special exponents go
/// through their ops. The expected values are PyTorch 1.13's for the same calls.
TEST(Ops, ScalarOverloadsPromoteAsPyTorch) {
  Tensor x = tensor({-1.5, -0.5, 0.25, 0.375, 2.0}).to(kFloat32);
  Tensor i = tensor({1, 2, 3});
  auto bools = [](const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::Bool);
    return vals(t);
  };
  EXPECT_EQ(bools(x.gt(0.25)), (std::vector<double>{0, 0, 0, 1, 1}));
  EXPECT_EQ(bools(x.le(-0.5)), (std::vector<double>{1, 1, 0, 0, 0}));
  EXPECT_EQ(bools(x.eq(0.375)), (std::vector<double>{0, 0, 0, 1, 0}));
  EXPECT_EQ(bools(ne(x, 2)), (std::vector<double>{1, 1, 1, 1, 0}));
  EXPECT_EQ(bools(i.gt(1.5)), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(i.add(1.5).dtype(), DType::Float32);
  EXPECT_EQ(vals(i.add(1.5)), (std::vector<double>{2.5, 3.5, 4.5}));
  EXPECT_EQ(i.div(2).dtype(), DType::Float32);
  EXPECT_EQ(vals(i.div(2)), (std::vector<double>{0.5, 1, 1.5}));
  EXPECT_EQ(i.mul(2).dtype(), DType::Int64);
  EXPECT_EQ(vals(i.mul(2)), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(i.add(2, 3).dtype(), DType::Int64);
  EXPECT_EQ(vals(i.add(2, 3)), (std::vector<double>{7, 8, 9}));
  EXPECT_EQ(vals(x.sub(0.5, 2)), (std::vector<double>{-2.5, -1.5, -0.75, -0.625, 1.0}));
  EXPECT_EQ(vals(add(x, 1, 2)), (std::vector<double>{0.5, 1.5, 2.25, 2.375, 4.0}));
  EXPECT_EQ(vals(sub(x, x, 0.5)), (std::vector<double>{-0.75, -0.25, 0.125, 0.1875, 1.0}));
  EXPECT_EQ(vals(mul(x, 2)), (std::vector<double>{-3.0, -1.0, 0.5, 0.75, 4.0}));
  EXPECT_EQ(vals(x.pow(2)), (std::vector<double>{2.25, 0.25, 0.0625, 0.140625, 4.0}));
  EXPECT_EQ(vals(pow(x, 3)), (std::vector<double>{-3.375, -0.125, 0.015625, 0.052734375, 8.0}));
  EXPECT_TRUE(std::isnan(vals(tensor({-INFINITY}).pow(0.5))[0])); // sqrt's NaN, not C pow's inf
  EXPECT_THROW(i.add(1, 0.5), DTypeError);                        // integral input, floating alpha
  EXPECT_THROW(x.add(2, true), DTypeError);                       // boolean alpha, float result
  EXPECT_THROW(tensor({true}).sub(true), DTypeError);
  EXPECT_THROW(x.sub(true), DTypeError); // as PyTorch: a bool operand of sub is an error
  EXPECT_THROW(x - true, DTypeError);
  EXPECT_THROW(true - x, DTypeError);
}

/// On bool tensors add and maximum are logical or, mul and minimum logical and, in place and
/// compiled too; sub stays an error (expected values: PyTorch 1.13's).
TEST(Ops, BoolAddAndMulAreLogicalAsPyTorch) {
  Tensor a = from_vector<bool>({true, false, true, false});
  Tensor b = from_vector<bool>({true, true, false, false});
  const std::vector<double> orAB{1, 1, 1, 0}, andAB{1, 0, 0, 0};
  auto bools = [](const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::Bool);
    return vals(t);
  };
  EXPECT_EQ(bools(a + b), orAB);
  EXPECT_EQ(bools(a.add(b, true)), orAB);
  EXPECT_EQ(bools(a.add(b, false)), vals(a)); // a + false * b
  EXPECT_EQ(bools(a.maximum(b)), orAB);
  EXPECT_EQ(bools(a * b), andAB);
  EXPECT_EQ(bools(a.minimum(b)), andAB);
  EXPECT_EQ(bools(a + true), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(bools(a * false), (std::vector<double>{0, 0, 0, 0}));
  Tensor c = a.clone();
  c.add_(b);
  EXPECT_EQ(bools(c), orAB);
  c = a.clone();
  c.mul_(b);
  EXPECT_EQ(bools(c), andAB);
  EXPECT_EQ(vals(a + 1), (std::vector<double>{2, 1, 2, 1})); // an integer operand: int64
  EXPECT_THROW(a - b, DTypeError);
  auto f = compile([](const Tensor& x, const Tensor& y) { return (x + y).logical_xor(x * y); });
  EXPECT_EQ(bools(f(a, b)), (std::vector<double>{0, 1, 1, 0}));
}

/// fmod keeps the dividend's sign, remainder (and %) the divisor's, with gradients; floor_divide
/// and div(..., "floor" / "trunc"); eager and compiled; an integer divisor of 0 is an error
/// (expected values: PyTorch 1.13's).
TEST(Ops, FmodAndRemainderAsPyTorch) {
  Tensor a = tensor({-3.5, 3.5, -3.0, 3.0, 5.0, -0.0, 7.25}).to(kFloat32);
  Tensor b = tensor({2.0, -2.0, 2.0, -2.0, 0.0, 3.0, 0.5}).to(kFloat32);
  auto same = [](const Tensor& t, const std::vector<double>& expected) {
    std::vector<double> v = vals(t);
    ASSERT_EQ(v.size(), expected.size());
    for (size_t k = 0; k < v.size(); ++k) {
      if (std::isnan(expected[k])) {
        EXPECT_TRUE(std::isnan(v[k])) << k;
      } else {
        EXPECT_EQ(v[k], expected[k]) << k;
        EXPECT_EQ(std::signbit(v[k]), std::signbit(expected[k])) << k; // -0.0 stays -0.0
      }
    }
  };
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  auto fns = [](const Tensor& x, const Tensor& y) {
    return std::vector<Tensor>{x.remainder(y), fmod(x, y), x % -2.0, x % 2};
  };
  auto compiled = compile(fns);
  for (const std::vector<Tensor>& r : {fns(a, b), compiled(a, b)}) {
    same(r[0], {0.5, -0.5, 1.0, -1.0, nan, -0.0, 0.25});
    same(r[1], {-1.5, 1.5, -1.0, 1.0, nan, -0.0, 0.25});
    same(r[2], {-1.5, -0.5, -1.0, -1.0, -1.0, -0.0, -0.75});
    same(r[3], {0.5, 1.5, 1.0, 1.0, 1.0, -0.0, 1.25});
  }
  Tensor i = tensor({-7, 7, -7, 7, 0}), j = tensor({3, -3, -3, 3, 5});
  EXPECT_EQ(vals(i.remainder(j)), (std::vector<double>{2, -2, -1, 1, 0}));
  EXPECT_EQ(vals(i.fmod(j)), (std::vector<double>{-1, 1, -1, 1, 0}));
  EXPECT_EQ(vals(i % 4), (std::vector<double>{1, 3, 1, 3, 0}));
  EXPECT_EQ((i % 2.5).dtype(), DType::Float32);
  EXPECT_EQ(vals(i % 2.5), (std::vector<double>{0.5, 2.0, 0.5, 2.0, 0.0}));
  EXPECT_THROW(i.remainder(tensor({0, 1, 1, 1, 1})), ValueError);
  EXPECT_EQ(vals(7 % j.narrow(0, 0, 2)), (std::vector<double>{1, -2}));
  // The divisor in the tensor's dtype first, as every wrapped number (u + -3 is an error too).
  EXPECT_THROW(from_vector<uint8_t>({5}) % -3, Error);
  EXPECT_EQ(vals(tensor({-7, 7}).to(kInt32) % -3), (std::vector<double>{-1, -2}));
  // A zero divisor found by a worker thread, past the first chunk, raises on the caller.
  Tensor many = ones({1 << 20}, kInt64), divisors = ones({1 << 20}, kInt64);
  divisors.narrow(0, (1 << 20) - 5, 1).fill_(0);
  EXPECT_THROW(many.fmod(divisors), ValueError);
  auto compiledFmod = compile([](const Tensor& p, const Tensor& q) { return (p * 2).fmod(q); });
  EXPECT_THROW(compiledFmod(i, tensor({1, 1, 0, 1, 1})), ValueError);
  // floor_divide and div's rounding modes, eager and compiled.
  auto quotients = [](const Tensor& p, const Tensor& q, const Tensor& f, const Tensor& g) {
    return std::vector<Tensor>{p.floor_divide(q), f.floor_divide(g),   f.div(0.0, "floor"),
                               p.div(q, "trunc"), f.div(2.0, "trunc"), p.div(-2, "floor")};
  };
  Tensor p = tensor({-7, 7, -7, 7}), q = tensor({2, -2, -2, 2});
  Tensor f = tensor({-7.5, 7.5, 0.0, -0.0}).to(kFloat32), g = tensor({2.0, -2.0, -2.0, 2.0});
  auto compiledQuotients = compile(quotients);
  for (const std::vector<Tensor>& r :
       {quotients(p, q, f, g.to(kFloat32)), compiledQuotients(p, q, f, g.to(kFloat32))}) {
    EXPECT_EQ(r[0].dtype(), DType::Int64);
    same(r[0], {-4, -4, 3, 3});
    same(r[1], {-4, -4, -0.0, -0.0});
    same(r[2], {-inf, inf, nan, nan});
    same(r[3], {-3, -3, 3, 3});
    same(r[4], {-3, 3, 0, -0.0});
    same(r[5], {3, -4, 3, -4});
  }
  EXPECT_THROW(p.floor_divide(tensor({1, 0, 1, 1})), ValueError);
  EXPECT_THROW(p.div(q, "round"), ValueError);
  // In place: the same values, in self's memory; an integer self of a float result is an error.
  Tensor r = p.clone();
  r.floor_divide_(q);
  EXPECT_EQ(vals(r), (std::vector<double>{-4, -4, 3, 3}));
  r = p.clone();
  r %= 4;
  EXPECT_EQ(vals(r), (std::vector<double>{1, 3, 1, 3}));
  r.fmod_(q);
  EXPECT_EQ(vals(r), (std::vector<double>{1, 1, 1, 1}));
  r = f.clone();
  r.remainder_(g.to(kFloat32));
  same(r, {0.5, -0.5, 0.0, -0.0});
  EXPECT_THROW(p.clone().remainder_(2.5), DTypeError);
  Tensor s = p.clone();
  const void* before = s.data_ptr();
  s.fmod_(3);
  EXPECT_EQ(s.data_ptr(), before);
  // float16: 1403 / 2.001953125 is 700.8; "trunc" truncates the float16 quotient (701), "floor"
  // computes in float (700), as PyTorch's kernels.
  Tensor h = full({1}, 1403.0, kFloat16), k = full({1}, 2.001953125, kFloat16);
  EXPECT_EQ(vals(h.div(k, "trunc")), std::vector<double>{701});
  EXPECT_EQ(vals(h.div(k, "floor")), std::vector<double>{700});
  Tensor x = tensor({-3.5, 3.5, 7.25}).to(kFloat32).requires_grad_();
  Tensor y = tensor({2.0, -2.0, 0.5}).to(kFloat32).requires_grad_();
  x.remainder(y).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{2, 2, -14})); // -floor(x / y)
}

/// square, clamp_min/max, nan_to_num, lerp, addcmul/addcdiv and norm, eager and compiled
/// (expected values: PyTorch 1.13's; lerp from the nearer end as torch.lerp, so exact).
TEST(Ops, PointwiseCompositesAndNormAsPyTorch) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const double big = std::numeric_limits<float>::max();
  Tensor x = tensor({1.5, -2.0, nan, inf, -inf, 0.25}).reshape({2, 3}).to(kFloat32);
  Tensor a = tensor({1.0, 2.0, 3.0}).to(kFloat32), e = tensor({3.0, 2.0, -1.0}).to(kFloat32);
  Tensor w = tensor({0.25, 0.5, 0.75}).to(kFloat32);
  Tensor y = tensor({3.0, 4.0, 1.0, -2.0}).reshape({2, 2}).to(kFloat32);
  auto fns = [](const Tensor& x, const Tensor& a, const Tensor& e, const Tensor& w,
                const Tensor& y) {
    return std::vector<Tensor>{x.square(),
                               x.clamp_min(0),
                               x.clamp_max(0),
                               x.nan_to_num(),
                               x.nan_to_num(1.0, 2.0, -3.0),
                               a.lerp(e, 0.75),
                               a.lerp(e, w),
                               a.addcmul(e, w, 2),
                               a.addcdiv(e, w, 0.5),
                               y.norm(),
                               y.norm(2, {1}),
                               y.norm(1),
                               y.norm(1, {0}, true),
                               y.norm(std::numeric_limits<double>::infinity())};
  };
  const std::vector<std::vector<double>> expected{{2.25, 4.0, nan, inf, inf, 0.0625},
                                                  {1.5, 0.0, nan, inf, 0.0, 0.25},
                                                  {0.0, -2.0, nan, 0.0, -inf, 0.0},
                                                  {1.5, -2.0, 0.0, big, -big, 0.25},
                                                  {1.5, -2.0, 1.0, 2.0, -3.0, 0.25},
                                                  {2.5, 2.0, 0.0},
                                                  {1.5, 2.0, 0.0},
                                                  {2.5, 4.0, 1.5},
                                                  {7.0, 4.0, 2.3333332538604736},
                                                  {5.4772257804870605},
                                                  {5.0, 2.2360680103302},
                                                  {10.0},
                                                  {4.0, 6.0},
                                                  {4.0}};
  auto compiled = compile(fns);
  for (const std::vector<Tensor>& r : {fns(x, a, e, w, y), compiled(x, a, e, w, y)}) {
    ASSERT_EQ(r.size(), expected.size());
    for (size_t k = 0; k < r.size(); ++k) {
      std::vector<double> v = vals(r[k]);
      ASSERT_EQ(v.size(), expected[k].size()) << "result " << k;
      for (size_t j = 0; j < v.size(); ++j) {
        if (std::isnan(expected[k][j])) {
          EXPECT_TRUE(std::isnan(v[j])) << "result " << k << " element " << j;
        } else {
          // Exact except the 2-norms, whose square root of a float sum may round differently
          // from PyTorch's accumulation (1 ulp of float).
          if (k == 9 || k == 10)
            EXPECT_NEAR(v[j], expected[k][j], 4e-7 * std::abs(expected[k][j])) << "result " << k;
          else
            EXPECT_EQ(v[j], expected[k][j]) << "result " << k << " element " << j;
        }
      }
    }
  }
  EXPECT_EQ(y.norm(2, {1}, true).sizes(), (Shape{2, 1}));
  EXPECT_THROW(tensor({1, 2}).norm(), DTypeError);
  EXPECT_THROW(y.norm(0), ValueError);
  // value multiplies t1 first, as PyTorch's kernels (0.1 is not a power of two: the order shows)
  EXPECT_EQ(vals(a.addcmul(e, w, 0.1)),
            (std::vector<double>{1.0750000476837158, 2.0999999046325684, 2.924999952316284}));
  EXPECT_EQ(vals(a.addcdiv(e, w, 0.1)),
            (std::vector<double>{2.200000047683716, 2.4000000953674316, 2.866666555404663}));
  Tensor i = tensor({1, 2});
  EXPECT_EQ(i.addcmul(i, i, 0.5).dtype(), DType::Int64); // value truncated to 0, as PyTorch
  EXPECT_EQ(vals(i.addcmul(i, i, 0.5)), (std::vector<double>{1, 2}));
  EXPECT_THROW(i.addcdiv(i, i), DTypeError);
  EXPECT_THROW(i.lerp(i, 0.5), DTypeError);
  EXPECT_THROW(a.lerp(e.to(kFloat64), 0.5), DTypeError);
  EXPECT_EQ(from_vector<bool>({true, false}).square().dtype(), DType::Int64);
  // Replacements are not replaced again; every mask reads the input.
  EXPECT_EQ(vals(tensor({nan, inf, -inf, 1.0}).to(kFloat32).nan_to_num(inf)),
            (std::vector<double>{inf, big, -big, 1.0}));
  // float16 sums its squares in float (PyTorch 1.13 overflowed to inf here; 2.x does not).
  EXPECT_EQ(vals(tensor({300.0}).to(kFloat16).norm()), std::vector<double>{300.0});
  EXPECT_EQ(vals(full({2}, 65504.0, kFloat16).nan_to_num()), (std::vector<double>{65504, 65504}));
  for (double p : {2.0, 3.0}) { // a zero norm's gradient is 0, not NaN
    Tensor z = zeros({3}).requires_grad_();
    z.norm(p).backward();
    EXPECT_EQ(vals(z.grad()), (std::vector<double>{0, 0, 0})) << "p = " << p;
  }
}

/// any/all and the NaN/infinity tests, eager and compiled (expected values: PyTorch 1.13's).
TEST(Ops, AnyAllAndNanTestsAsPyTorch) {
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  Tensor x = tensor({0.0, nan, 1.5, inf, -inf, 0.0}).reshape({2, 3}).to(kFloat32);
  auto bools = [](const Tensor& t) {
    EXPECT_EQ(t.dtype(), DType::Bool);
    return vals(t);
  };
  auto tests = [](const Tensor& v) {
    return std::vector<Tensor>{v.isnan(), isinf(v),   v.isfinite(), v.any(),
                               all(v),    v.any({1}), v.any({0}),   v.all({0}, true)};
  };
  const std::vector<std::vector<double>> expected{
      {0, 1, 0, 0, 0, 0}, {0, 0, 0, 1, 1, 0}, {1, 0, 1, 0, 0, 1}, {1}, {0}, {1, 1},
      {1, 1, 1},          {0, 1, 0}};
  auto compiled = compile(tests);
  for (const std::vector<Tensor>& results : {tests(x), compiled(x)}) {
    ASSERT_EQ(results.size(), expected.size());
    for (size_t k = 0; k < results.size(); ++k)
      EXPECT_EQ(bools(results[k]), expected[k]) << "result " << k;
    EXPECT_EQ(results.back().sizes(), (Shape{1, 3}));
  }
  Tensor i = tensor({3, 0, 0, 0}).reshape({2, 2});
  EXPECT_EQ(bools(i.isnan()), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(bools(i.isinf()), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(bools(i.isfinite()), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(bools(i.any({1})), (std::vector<double>{1, 0}));
  EXPECT_EQ(bools(i.all({0})), (std::vector<double>{0, 0}));
  Tensor u = from_vector<uint8_t>({0, 7});
  EXPECT_EQ(u.any().dtype(), DType::UInt8); // as PyTorch, for backward compatibility
  EXPECT_EQ(vals(u.any()), std::vector<double>{1});
  EXPECT_EQ(vals(u.all()), std::vector<double>{0});
  Tensor b = from_vector<bool>({true, true});
  EXPECT_EQ(bools(b.all()), std::vector<double>{1});
  EXPECT_EQ(bools(b.isfinite()), (std::vector<double>{1, 1}));
  EXPECT_EQ(bools(b.isinf()), (std::vector<double>{0, 0}));
  Tensor empty = zeros({0, 3});
  EXPECT_EQ(bools(empty.any()), std::vector<double>{0});
  EXPECT_EQ(bools(empty.all()), std::vector<double>{1});
  EXPECT_EQ(bools(empty.any({0})), (std::vector<double>{0, 0, 0}));
  EXPECT_THROW(x.any({2}), IndexError);
}

/// The transcendental functions go through glibc's vector math (libmvec). Its documented and
/// measured error is at most 4 ulps from the correctly rounded result (log; exp 3, the others 1-2;
/// measured over 2M inputs per function), in float32 and float64: the bound asserted here, against
/// the C library's long double functions rounded to the type. Odd lengths exercise the padded
/// tail, strided inputs the tiles.
TEST(Ops, TranscendentalsAreWithinFourUlps) {
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    long double (*ref)(long double);
    double lo, hi;
  };
  const Case cases[] = {
      {"exp", [](const Tensor& x) { return x.exp(); }, expl, -80, 80},
      {"log", [](const Tensor& x) { return x.log(); }, logl, 1e-6, 1e6},
      {"log1p", [](const Tensor& x) { return x.log1p(); }, log1pl, -0.99, 100},
      {"expm1", [](const Tensor& x) { return x.expm1(); }, expm1l, -20, 20},
      {"sin", [](const Tensor& x) { return x.sin(); }, sinl, -100, 100},
      {"cos", [](const Tensor& x) { return x.cos(); }, cosl, -100, 100},
      {"tanh", [](const Tensor& x) { return x.tanh(); }, tanhl, -10, 10},
      {"erf", [](const Tensor& x) { return x.erf(); }, erfl, -5, 5},
      {"sigmoid", [](const Tensor& x) { return x.sigmoid(); },
       [](long double v) { return 1.0L / (1.0L + expl(-v)); }, -30, 30},
  };
  manual_seed(11);
  for (const Case& c : cases)
    for (DType dt : {kFloat32, kFloat64}) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtypeName(dt)));
      Tensor x = (rand({2, 1003}, dt) * (c.hi - c.lo) + c.lo);
      for (const Tensor& in : {x, x.t().contiguous().t()}) { // contiguous, then strided
        std::vector<double> xs = in.to_vector<double>(), ys = c.op(in).to_vector<double>();
        for (size_t i = 0; i < xs.size(); ++i) {
          long double want = c.ref(static_cast<long double>(xs[i]));
          int64_t err = dt == kFloat32 ? ulps(static_cast<float>(ys[i]), static_cast<float>(want))
                                       : ulps(ys[i], static_cast<double>(want));
          // sigmoid adds a division and an addition to exp's error: one more ulp each.
          ASSERT_LE(err, c.name == std::string("sigmoid") ? 6 : 4)
              << "x = " << xs[i] << ": " << ys[i] << " vs " << static_cast<double>(want);
        }
      }
    }
}

TEST(Ops, SumMatchesAReferenceInEveryLayout) {
  // Float sums accumulate in double past blocks of 1024 float additions, so a float result is
  // within a few float ulps of the exact sum: rtol 1e-5 with atol for cancellation.
  Generator g(7);
  struct Case {
    Shape shape;
    Shape dims;
  };
  std::vector<Case> cases = {{{1500, 300}, {0}},      {{1500, 300}, {1}},   {{40, 7, 300}, {0, 1}},
                             {{40, 7, 300}, {1}},     {{6, 9, 33}, {0, 2}}, {{3, 2100, 12}, {1}},
                             {{2, 5000, 16}, {0, 1}}, {{70000, 9}, {0}},    {{9, 70000}, {1}}};
  for (const Case& c : cases) {
    Tensor x = randn(c.shape, kFloat32, g);
    EXPECT_TRUE(allClose(x.sum(c.dims).to_vector<double>(), naiveSum(x, c.dims), 1e-5, 1e-3))
        << shapeString(c.shape) << " over " << shapeString(c.dims);
    Tensor t = x.transpose(0, x.dim() - 1); // the reduced dims now sit elsewhere in memory
    EXPECT_TRUE(allClose(t.sum(c.dims).to_vector<double>(), naiveSum(t, c.dims), 1e-5, 1e-3))
        << "transposed " << shapeString(c.shape) << " over " << shapeString(c.dims);
  }
  Tensor big = randn({64, 512}, kFloat64, g);
  Tensor stepped = big.slice(1, 0, 512, 2); // a row stride of 512 with 256 columns
  EXPECT_TRUE(allClose(stepped.sum({0}).to_vector<double>(), naiveSum(stepped, {0}), 1e-12, 1e-12));
  Tensor ints = randint(-1000, 1000, {3000, 40}, kInt64, g);
  EXPECT_EQ(ints.sum({0}).to_vector<double>(), naiveSum(ints, {0})); // exact
  Tensor halves = randn({2000, 64}, kFloat32, g).to(kBFloat16);
  EXPECT_TRUE(allClose(halves.sum({0}).to_vector<double>(), naiveSum(halves, {0}), 1e-2, 0.5));
}

TEST(Ops, SoftmaxAndLogSumExpAreStableForLargeInputs) {
  Tensor x = tensor({1000.0, 1001.0, 1002.0});
  EXPECT_TRUE(allClose(vals(x.softmax(0)), {0.09003057, 0.24472847, 0.66524096}, 1e-5, 0));
  EXPECT_TRUE(allClose(vals(x.log_softmax(0)), {-2.40760596, -1.40760596, -0.40760596}, 1e-5, 0));
  EXPECT_NEAR(x.logsumexp({0}).item<float>(), 1002.40760596, 1e-3);
  Tensor neg = full({3}, -INFINITY);
  EXPECT_TRUE(std::isinf(neg.logsumexp({0}).item<float>()));
}

TEST(Ops, LongRowsOfSoftmaxAndMaxKeepNaNAndInfinities) {
  // Rows long enough for the vectorized paths (8 lanes and a tail): a NaN anywhere makes amax,
  // amin and the softmax row NaN; -inf entries (a causal mask) get probability 0 exactly.
  for (int64_t at : {0, 13, 37}) {
    std::vector<float> v(38);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<float>(i % 7) - 3.0f;
    v[static_cast<size_t>(at)] = NAN;
    Tensor x = from_blob(v.data(), {38}).clone();
    EXPECT_TRUE(std::isnan(x.amax().item<float>())) << at;
    EXPECT_TRUE(std::isnan(x.amin({0}).item<float>())) << at;
    for (float p : x.softmax(0).to_vector<float>())
      EXPECT_TRUE(std::isnan(p)) << at;
  }
  Tensor scores = arange(40, kFloat32).reshape({2, 20}) * 0.25;
  Tensor masked = scores.masked_fill(arange(20) >= 15, -INFINITY); // columns 15.. masked
  std::vector<float> p = masked.softmax(1).to_vector<float>(),
                     want = scores.narrow(1, 0, 15).softmax(1).to_vector<float>();
  std::vector<float> lp = masked.log_softmax(1).to_vector<float>();
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 20; ++c) {
      float got = p[static_cast<size_t>(r * 20 + c)];
      if (c >= 15) {
        EXPECT_EQ(got, 0.0f);
        EXPECT_EQ(lp[static_cast<size_t>(r * 20 + c)], -INFINITY);
      } else {
        // 1e-6 relative: float32 exp and sum over 15 terms, the same in both
        EXPECT_NEAR(got, want[static_cast<size_t>(r * 15 + c)],
                    1e-6f * want[static_cast<size_t>(r * 15 + c)]);
      }
    }
  EXPECT_EQ(scores.amax({1}).to_vector<float>(), (std::vector<float>{4.75f, 9.75f}));
  EXPECT_EQ(scores.amin({1}).to_vector<float>(), (std::vector<float>{0.0f, 5.0f}));
}

TEST(Ops, MatmulShapes) {
  EXPECT_EQ(matmul(ones({3}), ones({3})).sizes(), Shape{});
  EXPECT_EQ(matmul(ones({2, 3}), ones({3})).sizes(), (Shape{2}));
  EXPECT_EQ(matmul(ones({3}), ones({3, 4})).sizes(), (Shape{4}));
  EXPECT_EQ(matmul(ones({5, 1, 2, 3}), ones({4, 3, 6})).sizes(), (Shape{5, 4, 2, 6}));
  EXPECT_EQ(matmul(ones({2, 3}, kInt64), ones({3, 2}, kInt64)).index({0, 0}).item<int64_t>(), 3);
  EXPECT_EQ(ones({2, 3}, kFloat16).matmul(ones({3, 2}, kFloat16)).dtype(), kFloat16);
}

TEST(Ops, ConvolutionAndPoolingShapesAndValues) {
  Tensor x = arange(16).to(kFloat32).reshape({1, 1, 4, 4});
  EXPECT_EQ(vals(max_pool2d(x, {2})), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(vals(avg_pool2d(x, {2})), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  Tensor w = ones({1, 1, 3, 3});
  EXPECT_EQ(conv2d(x, w, {}, {1}, {1}).sizes(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(conv2d(x, w).index({0, 0, 0, 0}).item<float>(), 0 + 1 + 2 + 4 + 5 + 6 + 8 + 9 + 10);
  EXPECT_EQ(conv_transpose2d(randn({2, 3, 5, 5}), randn({3, 4, 3, 3}), {}, {2}, {1}, {1}).sizes(),
            (Shape{2, 4, 10, 10}));
  EXPECT_EQ(conv1d(randn({2, 3, 10}), randn({6, 1, 3}), randn({6}), 1, 0, 1, 3).sizes(),
            (Shape{2, 6, 8}));
  EXPECT_EQ(conv2d(randn({3, 8, 8}), randn({4, 3, 3, 3})).sizes(), (Shape{4, 6, 6})); // unbatched
  // conv_transpose2d is the adjoint of conv2d: <conv(x), y> == <x, conv_t(y)>.
  Tensor a = randn({1, 2, 6, 6}, kFloat64), k = randn({3, 2, 3, 3}, kFloat64),
         b = randn({1, 3, 3, 3}, kFloat64);
  double lhs = (conv2d(a, k, {}, {2}, {1}) * b).sum().item<double>();
  double rhs = (a * conv_transpose2d(b, k, {}, {2}, {1}, {1})).sum().item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-10);
}

/// The gradient max_pool2d sends back for an all-ones upstream gradient: 1 (or the number of
/// windows choosing it) at each window's argmax, by PyTorch's rule (the first largest value, or
/// the last NaN), counted by plain loops.
std::vector<double> naiveMaxPoolGrad(const Tensor& x, int64_t k, int64_t stride, int64_t pad) {
  std::vector<double> v = x.contiguous().to_vector<double>(), grad(v.size(), 0.0);
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oy = 0; oy < oh; ++oy)
      for (int64_t ox = 0; ox < ow; ++ox) {
        int64_t best = -1;
        for (int64_t iy = oy * stride - pad; iy < oy * stride - pad + k; ++iy)
          for (int64_t ix = ox * stride - pad; ix < ox * stride - pad + k; ++ix) {
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            int64_t at = (pl * h + iy) * w + ix;
            double val = v[static_cast<size_t>(at)];
            if (best < 0 || val > v[static_cast<size_t>(best)] || std::isnan(val)) best = at;
          }
        grad[static_cast<size_t>(best)] += 1;
      }
  return grad;
}

TEST(Ops, MaxPoolPicksPyTorchsArgmax) {
  // Reference values from torch 1.13 (max_pool2d(..., 2, return_indices=True)): ties keep the
  // first index, NaNs the last.
  auto gradOf = [](const Tensor& x, int64_t k, int64_t stride, int64_t pad) {
    Tensor leaf = x.detach().requires_grad_();
    max_pool2d(leaf, {k}, {stride}, {pad}).sum().backward();
    return leaf.grad().to_vector<double>();
  };
  EXPECT_EQ(gradOf(tensor({NAN, 1.0, NAN, 2.0}).reshape({1, 1, 2, 2}), 2, 2, 0),
            (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(gradOf(tensor({3.0, 3.0, 1.0, 3.0}).reshape({1, 1, 2, 2}), 2, 2, 0),
            (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(gradOf(tensor({1.0, NAN, 5.0, NAN}).reshape({1, 1, 2, 2}), 2, 2, 0),
            (std::vector<double>{0, 0, 0, 1}));
  // Every path of the kernel (windows inside with a step of 1, 2 or 3; padded windows), in float
  // and double, with ties (values rounded to halves) and NaNs sprinkled in.
  Generator g(11);
  for (DType dtype : {kFloat32, kFloat64})
    for (auto [k, stride, pad] : std::vector<std::array<int64_t, 3>>{
             {2, 2, 0}, {3, 1, 0}, {3, 3, 0}, {3, 2, 1}, {2, 1, 1}}) {
      Tensor x = (randn({2, 3, 11, 13}, dtype, g) * 2).round() / 2;
      x = where(rand({2, 3, 11, 13}, dtype, g) < 0.03, full({}, NAN, dtype), x);
      EXPECT_EQ(gradOf(x, k, stride, pad), naiveMaxPoolGrad(x, k, stride, pad))
          << dtypeName(dtype) << " k " << k << " stride " << stride << " pad " << pad;
    }
}

TEST(Ops, ShapeOps) {
  Tensor a = ones({2, 3}), b = zeros({2, 2});
  EXPECT_EQ(cat({a, b}, 1).sizes(), (Shape{2, 5}));
  EXPECT_EQ(cat({a, ones({1, 3}, kInt64)}, 0).dtype(), kFloat32);
  EXPECT_EQ(stack({a, a, a}, 1).sizes(), (Shape{2, 3, 3}));
  auto parts = split(arange(7), 3);
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].numel(), 1);
  EXPECT_EQ(chunk(arange(6), 4).size(), 3u); // chunks of ceil(6/4)=2
  EXPECT_EQ(pad(ones({2, 2}), {1, 2}).sizes(), (Shape{2, 5}));
  EXPECT_EQ(vals(pad(ones({1, 2}), {1, 0, 0, 1}, 7.0)), (std::vector<double>{7, 1, 1, 7, 7, 7}));
  EXPECT_EQ(vals(arange(4).flip({0})), (std::vector<double>{3, 2, 1, 0}));
  EXPECT_EQ(vals(one_hot(tensor({0, 2}), 3)), (std::vector<double>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(embedding(arange(4).to(kFloat32).reshape({2, 2}), tensor({1, 0})).sizes(),
            (Shape{2, 2}));
  EXPECT_EQ(vals(nonzero(tensor({0, 3, 0, 4}).reshape({2, 2}))), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(vals(where(tensor({true, false}), 1.0, tensor({5.0, 6.0}))),
            (std::vector<double>{1, 6}));
}

TEST(Ops, LargeScatterAddAndIndexAddMatchASerialCount) {
  // Big enough to run on several threads; every thread owns whole lines, so counts are exact.
  Tensor idx = randint(0, 50, {4, 100000}, kInt64, Generator(21));
  Tensor counts = zeros({4, 50}, kFloat64).scatter_add(1, idx, ones({4, 100000}, kFloat64));
  std::vector<int64_t> ix = idx.to_vector<int64_t>();
  std::vector<double> want(200, 0.0);
  for (size_t i = 0; i < ix.size(); ++i)
    want[(i / 100000) * 50 + static_cast<size_t>(ix[i])] += 1;
  EXPECT_EQ(vals(counts), want);
  Tensor rows = randint(0, 30, {60000}, kInt64, Generator(22));
  Tensor acc = zeros({30, 3}, kFloat64).index_add(0, rows, ones({60000, 3}, kFloat64));
  std::vector<double> want2(90, 0.0);
  for (int64_t r : rows.to_vector<int64_t>())
    for (int k = 0; k < 3; ++k)
      want2[static_cast<size_t>(r) * 3 + static_cast<size_t>(k)] += 1;
  EXPECT_EQ(vals(acc), want2);
}

TEST(Printing, MatchesPyTorchFormat) {
  auto str = [](const Tensor& t) { return t.toString(); };
  EXPECT_EQ(str(tensor({1.0, 2.0, 3.0})), "tensor([1., 2., 3.])");
  EXPECT_EQ(str(tensor({1.5, -2.25})), "tensor([ 1.5000, -2.2500])");
  EXPECT_EQ(str(arange(4).reshape({2, 2})), "tensor([[0, 1],\n        [2, 3]])");
  EXPECT_EQ(str(tensor({1.0}).to(kFloat64)), "tensor([1.], dtype=torch.float64)");
  EXPECT_EQ(str(tensor({true, false})), "tensor([ True, False])") << "bools print like PyTorch";
  EXPECT_EQ(str(scalar_tensor(2.5)), "tensor(2.5000)");
  EXPECT_EQ(str(tensor({1.0}).requires_grad_()), "tensor([1.], requires_grad=True)");
  EXPECT_EQ(str(tensor({1e-5, 1.0})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(str(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_NE(str(arange(2000)).find("..."), std::string::npos);
}

TEST(Threads, NumThreadsIsConfigurable) {
  int before = getNumThreads();
  setNumThreads(1);
  EXPECT_EQ(getNumThreads(), 1);
  Tensor s = ones({100000}).sum();
  EXPECT_EQ(s.item<float>(), 100000.0f);
  setNumThreads(before);
  EXPECT_EQ(getNumThreads(), before);
}

/// Element `i` (row-major over its shape) of a strided float tensor, read through its strides.
float elementAt(const Tensor& t, int64_t i) {
  int64_t offset = 0;
  for (int64_t d = t.dim(); d-- > 0;) {
    offset += (i % t.size(d)) * t.stride(d);
    i /= t.size(d);
  }
  return static_cast<const float*>(t.data_ptr())[offset];
}

TEST(Tensor, ElementwiseOpsOnTransposedViewsWalkInBlocksAndMatchElementByElement) {
  // Views read across their rows (inner stride beyond a cache line) go through the blocked walk:
  // shapes that leave partial blocks in both dims, an outer dim, a broadcast operand, a
  // transposed output. Each result is checked element by element against its definition.
  Generator g(3);
  Tensor base = randn({3, 150, 70}, kFloat32, g);
  Tensor t = base.transpose(1, 2); // [3, 70, 150], inner stride 70 floats
  ASSERT_FALSE(t.is_contiguous());
  Tensor copy = t.contiguous(), e = t.exp(), bias = randn({150}, kFloat32, g);
  Tensor expOfCopy = copy.exp(); // exp is vectorised: the same lanes, not std::exp's last bit
  Tensor sum = t + bias, picked = where(t > 0, t, bias);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float x = elementAt(t, i), b = elementAt(bias, i % 150);
    ASSERT_EQ(elementAt(copy, i), x) << i;
    ASSERT_EQ(elementAt(e, i), elementAt(expOfCopy, i)) << i;
    ASSERT_EQ(elementAt(sum, i), x + b) << i;
    ASSERT_EQ(elementAt(picked, i), x > 0 ? x : b) << i;
  }
  Tensor out = zeros({3, 70, 150}, kFloat32).transpose(1, 2); // written across its rows
  out.copy_(base.neg());
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_EQ(elementAt(out, i), -elementAt(base, i)) << i;
}

} // namespace
} // namespace weft::test
