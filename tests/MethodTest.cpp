// Every Tensor method a user calls, inside compile() as well as eagerly: each is applied to a
// traced argument and to a real tensor the function captures, and must give eager's result (or
// eager's error). The op-table suites check the primitives; this checks the methods built on them
// (views, contiguous(), composites, in-place forms, pairs of results).
#include "TestUtil.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

namespace weft::test {
namespace {

using Method = std::function<Tensor(const Tensor& x, const Tensor& y)>;

struct MethodCase {
  std::string name;
  Method f;
};

/// `x` is (2, 3, 4) float32 in [-1.5, 1.5) with no ties, `y` is (3, 4).
std::vector<MethodCase> methods() {
  Tensor idx = tensor({2, 0, 1}); // int64
  return {
      // views and layout
      {"view",
       [](auto& x, auto&) {
         return x.view({6, 4});
       }},
      {"view_of_transpose_is_an_error",
       [](auto& x, auto&) { return x.transpose(0, 2).view({24}); }},
      {"view_of_captured_bias_shape",
       [](auto& x, auto& y) {
         return x + y.view({1, 3, 4});
       }},
      {"reshape_of_transpose", [](auto& x, auto&) { return x.transpose(0, 2).reshape({24}); }},
      {"contiguous", [](auto& x, auto&) { return x.transpose(1, 2).contiguous(); }},
      {"is_contiguous",
       [](auto& x, auto&) {
         bool a = x.is_contiguous(), b = x.transpose(1, 2).is_contiguous();
         return x * (a ? 2.0 : 3.0) + (b ? 1.0 : 0.0);
       }},
      {"permute",
       [](auto& x, auto&) {
         return x.permute({2, 0, 1});
       }},
      {"t_mT", [](auto& x, auto& y) { return x.mT() + y.t(); }},
      {"slice_step", [](auto& x, auto&) { return x.slice(2, 1, std::nullopt, 2); }},
      {"narrow_select", [](auto& x, auto&) { return x.narrow(1, 1, 2).select(0, 1); }},
      {"expand",
       [](auto& x, auto& y) {
         return y.unsqueeze(0).expand({2, 3, 4}) * x;
       }},
      {"expand_as", [](auto& x, auto& y) { return y.expand_as(x) - x; }},
      {"squeeze_unsqueeze", [](auto& x, auto&) { return x.unsqueeze(1).squeeze(1).squeeze(); }},
      {"flatten_unflatten",
       [](auto& x, auto&) {
         return x.flatten(1).unflatten(1, {4, 3});
       }},
      {"flip",
       [](auto& x, auto&) {
         return x.flip({0, 2});
       }},
      {"index",
       [](auto& x, auto&) {
         using namespace indexing;
         return x.index({Slice(), 1, Slice(std::nullopt, std::nullopt, 2)});
       }},
      {"index_put_",
       [](auto& x, auto&) {
         Tensor c = x.clone();
         c.index_put_({indexing::Slice(), 0}, 5.0);
         return c;
       }},
      {"to_float64", [](auto& x, auto&) { return x.to(kFloat64) * 3.0; }},
      {"clone", [](auto& x, auto&) { return x.clone() + 1.0; }},
      // elementwise
      {"unary_chain",
       [](auto& x, auto&) {
         return x.neg().abs().sqrt().exp().log().log1p().expm1().rsqrt().reciprocal();
       }},
      {"trig_and_friends",
       [](auto& x, auto&) { return x.sin() + x.cos() + x.tanh() + x.sigmoid() + x.erf(); }},
      {"inverse_and_hyperbolic_trig",
       [](auto& x, auto&) {
         Tensor u = x * 0.6; // in (-1, 1)
         return x.tan() + u.asin() + u.acos() + u.atanh() + x.sinh() + x.cosh() + x.asinh() +
                (x.abs() + 1.0).acosh() + x.atan();
       }},
      {"logs_and_exp2",
       [](auto& x, auto&) {
         return x.abs().log2() + x.abs().log10() + x.exp2() + (x * 3.0).trunc();
       }},
      {"rounding",
       [](auto& x, auto&) { return (x * 3.0).floor() + (x * 3.0).ceil() + (x * 3.0).round(); }},
      {"sign_relu", [](auto& x, auto&) { return x.sign() * x.relu(); }},
      {"clamp", [](auto& x, auto&) { return x.clamp(-0.5, 0.5) + x.clamp(0.2); }},
      {"arith", [](auto& x, auto& y) { return x.add(y, 2).sub(y, 0.5).mul(y).div(y.abs() + 1.0); }},
      {"pow", [](auto& x, auto& y) { return x.abs().pow(y) + x.pow(2); }},
      {"maximum_minimum", [](auto& x, auto& y) { return x.maximum(y) - x.minimum(y); }},
      {"comparisons",
       [](auto& x, auto& y) {
         return x.eq(y).logical_or(x.lt(y)).logical_and(x.le(y)).logical_xor(x.gt(y)).logical_or(
             x.ge(y).logical_not().logical_and(x.ne(y)));
       }},
      {"masked_fill", [](auto& x, auto& y) { return x.masked_fill(y > 0, -2.0); }},
      {"triu_tril", [](auto& x, auto&) { return x.triu(1) + x.tril(-1) * 2.0; }},
      // reductions
      {"sum_mean", [](auto& x, auto&) { return x.sum({1}) + x.mean({1}) + x.sum() + x.mean(); }},
      {"sum_keepdim_dtype",
       [](auto& x, auto&) {
         return x.sum({0, 2}, true, kFloat64);
       }},
      {"prod", [](auto& x, auto&) { return x.prod(2) + x.prod(); }},
      {"amax_amin",
       [](auto& x, auto&) {
         return x.amax({2}) - x.amin({0, 1}, false).sum();
       }},
      {"max_min", [](auto& x, auto&) { return x.max() - x.min(); }},
      {"max_dim_values",
       [](auto& x, auto&) { return x.max(1).first + x.min(2, true).first.sum(); }},
      {"max_dim_indices", [](auto& x, auto&) { return x.max(1, true).second; }},
      {"argmax_argmin", [](auto& x, auto&) { return x.argmax(2) + x.argmin(); }},
      {"var_std", [](auto& x, auto&) { return x.var({2}) + x.std({1}, 0, true).sum(); }},
      {"logsumexp", [](auto& x, auto&) { return x.logsumexp({2}); }},
      {"cumsum", [](auto& x, auto&) { return x.cumsum(1); }},
      {"sort_values", [](auto& x, auto&) { return x.sort(2, true).first; }},
      {"sort_indices", [](auto& x, auto&) { return x.sort(1).second; }},
      {"argsort", [](auto& x, auto&) { return x.argsort(0, true); }},
      {"topk", [](auto& x, auto&) { return x.topk(2).first + x.topk(2, 1, false).first.sum(); }},
      {"softmax_log_softmax", [](auto& x, auto&) { return x.softmax(2) + x.log_softmax(1); }},
      // binary methods with a number
      {"scalar_comparisons",
       [](auto& x, auto&) {
         return x.gt(0.25).to(kFloat32) + x.le(-0.5).to(kFloat32) * 2.0 +
                x.eq(0.375).to(kFloat32) * 4.0 + x.ne(1).to(kFloat32) * 8.0 +
                lt(x, 0).to(kFloat32) * 16.0 + ge(x, 0.5).to(kFloat32) * 32.0;
       }},
      {"scalar_arithmetic",
       [](auto& x, auto&) {
         return x.mul(2).div(3).add(1, 2).sub(0.5, 3).pow(2) + mul(x, 1.5) + add(x, 2, 0.5);
       }},
      {"int_tensor_with_numbers",
       [](auto& x, auto&) {
         Tensor i = (x * 4.0).to(kInt64);
         return i.add(1.5) + i.div(2) + i.mul(2).add(2, 3).to(kFloat32) + i.gt(1.5).to(kFloat32);
       }},
      {"int_add_float_alpha_is_an_error",
       [](auto& x, auto&) { return (x * 4.0).to(kInt64).add(1, 0.5); }},
      // linear algebra and indexing
      {"matmul", [](auto& x, auto& y) { return x.matmul(y.t()); }},
      {"mm", [](auto&, auto& y) { return y.mm(y.t()); }},
      {"bmm", [](auto& x, auto&) { return x.bmm(x.transpose(1, 2)); }},
      {"gather",
       [idx](auto& x, auto&) {
         return x.gather(1, idx.view({1, 3, 1}).expand({2, 3, 4}));
       }},
      {"scatter",
       [idx](auto& x, auto& y) {
         return y.scatter(0, idx.view({3, 1}).expand({3, 4}), x.select(0, 0));
       }},
      {"scatter_add",
       [idx](auto& x, auto& y) {
         return y.scatter_add(0, idx.view({3, 1}).expand({3, 4}), x.select(0, 1));
       }},
      {"index_select", [idx](auto& x, auto&) { return x.index_select(1, idx); }},
      {"index_add", [idx](auto& x, auto& y) { return y.index_add(0, idx, x.select(0, 0)); }},
      // in place, on a fresh copy
      {"inplace_arith",
       [](auto& x, auto& y) {
         Tensor c = x.clone();
         c.add_(y, 2).sub_(0.5).mul_(y).div_(3.0).add_(1.0).sub_(y).mul_(2.0).div_(y.abs() + 1.0);
         return c;
       }},
      {"inplace_fill",
       [](auto& x, auto& y) {
         Tensor c = x.clone(), d = x.clone(), e = x.clone();
         c.clamp_(-0.25, 0.25);
         d.zero_().fill_(1.5);
         e.copy_(y).masked_fill_(y < 0, 7.0);
         return c + d + e;
       }},
      {"inplace_through_view",
       [](auto& x, auto&) {
         Tensor c = x.clone();
         c.select(1, 0).mul_(10.0);
         c.transpose(0, 2).narrow(0, 1, 1).fill_(-1.0);
         return c;
       }},
      {"inplace_unary",
       [](auto& x, auto&) {
         Tensor c = x.clone();
         c.neg_().relu_().exp_().sqrt_().tanh_().atan_();
         Tensor d = x.clone();
         d.select(1, 2).sigmoid_(); // through a view
         return c + d;
       }},
      {"inplace_float_op_on_ints_is_an_error",
       [](auto& x, auto&) {
         Tensor c = (x * 4.0).to(kInt64);
         c.exp_();
         return c.to(kFloat32);
       }},
      {"detach", [](auto& x, auto&) { return x.detach() * 2.0; }},
      // composites of primitives
      {"einsum_attention",
       [](auto& x, auto& y) {
         Tensor scores = einsum("bqd,kd->bqk", {x, y}).tanh();
         return einsum("bqk,kd->bqd", {scores, y});
       }},
      {"repeat_tile_interleave",
       [](auto& x, auto& y) {
         return x.repeat({1, 2, 1}).narrow(1, 1, 3) + y.tile({2, 1, 1}) +
                y.repeat_interleave(2, 0).narrow(0, 0, 3);
       }},
      {"roll_movedim_swapaxes",
       [](auto& x, auto&) {
         return x.roll({1, -2}, {0, 2}).movedim(0, -1).swapaxes(0, 1);
       }},
      {"diagonal_diag_trace",
       [](auto& x, auto& y) {
         return x.diagonal(1, 1, 2).sum() + y.diag().diag(1).sum(0) + y.narrow(1, 0, 3).trace();
       }},
      {"take_along_dim_median",
       [](auto& x, auto&) {
         return x.take_along_dim(x.argsort(-1), -1) + x.median(1, true).first;
       }},
      {"atan2_logaddexp_frac",
       [](auto& x, auto& y) { return x.atan2(y) + x.logaddexp(y * 2.0) + (x * 3.0).frac(); }},
      {"unbind_stack_outer",
       [](auto& x, auto& y) {
         std::vector<Tensor> rows = y.unbind(0);
         return stack({rows[2], rows[0], rows[1]}) +
                x.select(0, 0) * outer(y.select(0, 1), y.select(0, 2)).narrow(0, 0, 1);
       }},
      {"addmm_mv_dot",
       [](auto& x, auto& y) {
         Tensor m = x.reshape({6, 4});
         return y.narrow(0, 0, 1).narrow(1, 0, 3).addmm(m.narrow(0, 0, 1), y.t(), 0.5, 2.0) +
                m.narrow(0, 0, 3).mv(y.select(0, 0)).dot(y.select(1, 0));
       }},
      {"subscript_operator", // x[i], x[i][j], x[t]
       [idx](auto& x, auto& y) { return x[1] + x[0][2].unsqueeze(0) + y[idx]; }},
      {"subscript_out_of_range_is_an_error", [](auto& x, auto&) { return x[2]; }},
      {"reduction_dims_as_numbers", // as LibTorch spells them: x.sum(1) is x.sum({1})
       [](auto& x, auto&) {
         return x.sum(1) + x.mean(1, true).amax(1) + x.amin(0).logsumexp(0).unsqueeze(0) +
                x.var(1) * x.std(1, 0) + x.flip(2).norm(2, 1);
       }},
      {"bitwise_on_masks_and_integers",
       [](auto& x, auto& y) {
         Tensor masks = (x.gt(0) & y.lt(0.5)) | (~x.lt(-1) ^ y.gt(0));
         Tensor n = (x * 8.0).to(kInt32);
         Tensor bits = ((n & 7) << 2) ^ (n >> 1) | ~n;
         return masks.to(kFloat32) + bits.to(kFloat32) + n.gcd(tensor({6}, kInt32)).to(kFloat32);
       }},
      {"bitwise_on_floats_is_an_error", [](auto& x, auto& y) { return x & y; }},
      {"unfold_searchsorted_isin",
       [](auto& x, auto& y) {
         Tensor windows = x.unfold(2, 2, 1).sum({-1}) + y.unfold(1, 2, 1).mean({-1}).sum(0);
         Tensor sorted = y.flatten().sort().first;
         Tensor at = searchsorted(sorted, x) + bucketize(x, sorted, false, true);
         return windows.narrow(2, 0, 3) * at.narrow(2, 0, 3).to(kFloat32) +
                isin(x, y).to(kFloat32).narrow(2, 0, 3);
       }},
      {"tensordot_cdist_renorm",
       [](auto& x, auto& y) {
         return tensordot(x, y, {1, 2}, {0, 1}).sum() + cdist(x, y.narrow(0, 0, 2)).sum() +
                x.renorm(2, 1, 1.0) + tensordot(y, y.t(), 1).sum();
       }},
      {"stacks_block_diag_cartesian_prod",
       [](auto& x, auto& y) {
         Tensor r = y.select(0, 0);
         return hstack({y, y}).sum() + vstack({r, y}).sum(0).sum() + dstack({y, y}).sum() +
                column_stack({y.select(1, 0), y}).sum() +
                block_diag({y, r, x.select(0, 0)}).sum(0).sum() +
                cartesian_prod({r, r}).prod(1).sum() + x;
       }},
      {"trapezoid_xlog1py_var_mean",
       [](auto& x, auto& y) {
         auto [v, m] = var_mean(x, {1}, 1, true);
         auto [sd, m2] = std_mean(y, {0});
         return trapezoid(x, y.select(0, 1)).unsqueeze(-1) + trapezoid(x, 0.5, 1).sum() +
                xlog1py(x.abs(), y.select(0, 0)) + v * m + (sd * m2).sum();
       }},
      {"inverse_det_solve",
       [](auto& x, auto& y) {
         Tensor m = x.narrow(1, 0, 3).narrow(2, 0, 3) + eye(3) * 3.0;
         auto [sign, logabs] = m.slogdet();
         return m.inverse().sum({1}) + m.det().unsqueeze(1) + (sign * logabs).unsqueeze(1) +
                linalg_solve(m, y.select(1, 0).unsqueeze(0).expand({2, 3}));
       }},
      {"inverse_of_a_singular_matrix_is_an_error",
       [](auto& x, auto&) {
         return zeros({3, 3}).inverse() + x.sum();
       }},
      {"nansum_count_nonzero",
       [](auto& x, auto&) {
         return x.log().nansum({1}) + x.gt(0.5).count_nonzero({1}).to(kFloat32);
       }},
  };
}

/// The same values, or the same kind of error.
struct Outcome {
  Tensor value;
  std::string error;
};

Outcome run(const std::function<Tensor()>& f) {
  try {
    return {f(), ""};
  } catch (const Error& e) {
    return {Tensor(), std::to_string(static_cast<int>(e.kind()))};
  }
}

::testing::AssertionResult same(const Outcome& eager, const Outcome& compiled) {
  if (eager.error != compiled.error)
    return ::testing::AssertionFailure()
           << "eager error '" << eager.error << "', compiled error '" << compiled.error << "'";
  if (!eager.error.empty()) return ::testing::AssertionSuccess();
  if (eager.value.sizes() != compiled.value.sizes() ||
      eager.value.dtype() != compiled.value.dtype())
    return ::testing::AssertionFailure()
           << "eager " << shapeString(eager.value.sizes()) << " " << dtypeName(eager.value.dtype())
           << ", compiled " << shapeString(compiled.value.sizes()) << " "
           << dtypeName(compiled.value.dtype());
  std::vector<double> a = eager.value.to_vector<double>(), b = compiled.value.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i)
    // The compiled function runs the same kernels on the same values in the same order (fusion
    // of elementwise chains calls the same scalar functions): exact, with NaN equal to NaN.
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": eager " << a[i] << ", compiled " << b[i];
  return ::testing::AssertionSuccess();
}

class CompiledMethod : public ::testing::TestWithParam<size_t> {};

TEST_P(CompiledMethod, OnArgumentsAndCapturedTensorsEqualsEager) {
  MethodCase m = methods()[GetParam()];
  // Distinct values (no ties for sort/argmax), some negative, none zero.
  std::vector<float> xs;
  for (int i = 0; i < 24; ++i)
    xs.push_back(static_cast<float>((i * 7) % 24 - 11.5) / 8);
  Tensor x = from_vector(xs, {2, 3, 4});
  Tensor y = (arange(12, kFloat32) - 5.5).reshape({3, 4}) * (1.0 / 4);
  Outcome eager = run([&] { return m.f(x, y); });
  // Only the cases named so are errors: the others must not agree by both failing.
  ASSERT_EQ(eager.error.empty(), !m.name.ends_with("_is_an_error")) << eager.error;

  // Both as arguments.
  auto onArgs = compile([&](const Tensor& a, const Tensor& b) { return m.f(a, b); });
  EXPECT_TRUE(same(eager, run([&] { return onArgs(x, y); }))) << "arguments";
  // Both captured: the function reads real tensors it did not receive.
  auto captured = compile([&](const Tensor& /*unused*/) { return m.f(x, y); });
  Outcome cap = run([&] { return captured(zeros({1})); });
  EXPECT_TRUE(same(eager, cap)) << "captured";
}

INSTANTIATE_TEST_SUITE_P(AllMethods, CompiledMethod, ::testing::Range<size_t>(0, methods().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           return methods()[i.param].name;
                         });

/// Composites copy where PyTorch returns a new tensor, even where nothing moves (writes to the
/// result never reach the input, nor is the result an expanded view writes refuse), and refuse
/// what PyTorch refuses, huge counts included, with a weft::Error.
TEST(Composites, ReturnNewTensorsAndRefuseWhatPyTorchRefuses) {
  Tensor x = arange(6, kFloat32).reshape({2, 3});
  const std::vector<float> before = x.to_vector<float>();
  std::vector<Tensor> results = {x.repeat({1, 1}),          x.tile({1}),
                                 x.repeat_interleave(1, 0), x.roll(3, 1),
                                 x.roll({2, 3}, {0, 1}),    x.narrow(1, 0, 2).diag()};
  for (Tensor& r : results)
    r.add_(1.0);
  EXPECT_EQ(x.to_vector<float>(), before);
  Tensor column = zeros({2, 1});
  Tensor wide = column.repeat({1, 3}); // from a size-1 dim: a copy, not a stride-0 view
  wide.add_(1.0);
  EXPECT_EQ(wide.sum().item<float>(), 6.0f);
  EXPECT_EQ(column.sum().item<float>(), 0.0f);
  EXPECT_THROW((void)zeros({2}).repeat({std::numeric_limits<int64_t>::max()}), Error);
  EXPECT_THROW((void)zeros({2, 2}).diag(std::numeric_limits<int64_t>::min()), IndexError);
  EXPECT_THROW((void)zeros({3}).diag(std::numeric_limits<int64_t>::max()), ValueError);
  EXPECT_THROW((void)ones({2, 2}).addmm(ones({2, 2}, kFloat64), ones({2, 2}, kFloat64), 0),
               DTypeError);
  EXPECT_THROW((void)ones({3}).take_along_dim(tensor({0, 1}).to(kInt32)), DTypeError);
  EXPECT_THROW((void)tensor({true, false}).median(), DTypeError);
  EXPECT_THROW((void)einsum("ij,jk->il", {ones({2, 2}), ones({2, 2})}), ValueError);
}

/// The composites the edge-case table does not cover: aminmax (PyTorch 1.13 cannot differentiate
/// it, so the reference has no gradient to compare), h/v/dsplit's sections and indices, addbmm,
/// ger, matrix_power's identity and refusals, and the properties under older names. Values are
/// small integers in float32: every sum and product here is exact.
TEST(Composites, SplitsProductsAndPropertiesAsPyTorch) {
  Tensor x = arange(24, kFloat32).reshape({2, 3, 4});
  auto [lo, hi] = x.aminmax();
  EXPECT_EQ(lo.dim(), 0);
  EXPECT_EQ(lo.item<float>(), 0.0f);
  EXPECT_EQ(hi.item<float>(), 23.0f);
  auto [rowLo, rowHi] = x.aminmax(2, true);
  EXPECT_EQ(rowLo.sizes(), (Shape{2, 3, 1}));
  EXPECT_EQ(rowLo.flatten().to_vector<float>(), x.select(2, 0).flatten().to_vector<float>());
  EXPECT_EQ(rowHi.flatten().to_vector<float>(), x.select(2, 3).flatten().to_vector<float>());
  EXPECT_THROW((void)zeros({0}).aminmax(), IndexError);

  std::vector<Tensor> h = x.hsplit(3);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[1].sizes(), (Shape{2, 1, 4}));
  EXPECT_EQ(h[1].to_vector<float>(), x.narrow(1, 1, 1).to_vector<float>());
  EXPECT_THROW((void)x.hsplit(2), ValueError); // 3 rows do not split in 2
  EXPECT_EQ(x.vsplit(2)[1].to_vector<float>(), x.select(0, 1).flatten().to_vector<float>());
  std::vector<Tensor> d = x.dsplit(std::vector<int64_t>{1, 3});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].size(2), 1);
  EXPECT_EQ(d[1].size(2), 2);
  EXPECT_EQ(d[2].size(2), 1);
  EXPECT_THROW((void)zeros({2, 2}).dsplit(2), ShapeError);
  std::vector<Tensor> t = arange(5, kFloat32).tensor_split(std::vector<int64_t>{3, 1, 9});
  ASSERT_EQ(t.size(), 4u); // [0, 3), [3, 1) empty, [1, 5) (9 is past the end), [5, 5) empty
  EXPECT_EQ(t[0].numel(), 3);
  EXPECT_EQ(t[1].numel(), 0);
  EXPECT_EQ(t[2].to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(t[3].numel(), 0);

  Tensor b1 = arange(24, kFloat32).reshape({2, 3, 4}), b2 = arange(24, kFloat32).reshape({2, 4, 3});
  Tensor want = b1.bmm(b2).sum({0}) * 2.0 + 1.0;
  EXPECT_EQ(ones({3, 3}).addbmm(b1, b2, 1, 2).to_vector<float>(), want.to_vector<float>());
  Tensor v = arange(3, kFloat32);
  EXPECT_EQ(v.ger(v).to_vector<float>(), outer(v, v).to_vector<float>());
  Tensor m = tensor({1.0f, 1.0f, 0.0f, 1.0f}).reshape({2, 2});
  EXPECT_EQ(m.matrix_power(0).to_vector<float>(), eye(2).to_vector<float>());
  EXPECT_EQ(m.matrix_power(5).to_vector<float>(), (std::vector<float>{1, 5, 0, 1}));
  EXPECT_THROW((void)m.matrix_power(-1), ValueError);
  EXPECT_THROW((void)zeros({2, 3}).matrix_power(2), ShapeError);
  EXPECT_THROW((void)tensor({true}).positive(), DTypeError);
  EXPECT_EQ(tensor({1, 2}).deg2rad().dtype(), kFloat32); // integers become float32

  EXPECT_EQ(x.ndimension(), 3);
  EXPECT_EQ(x.nelement(), 24);
  EXPECT_EQ(x.element_size(), 4);
  EXPECT_EQ(zeros({1}, kInt64).element_size(), 8);
  EXPECT_EQ(zeros({1}, kBool).element_size(), 1);
  EXPECT_TRUE(x.is_same_size(b1));
  EXPECT_FALSE(x.is_same_size(b2));
  EXPECT_TRUE(x.cpu().is_same(x));
}

/// The in-place samplers overwrite every element within their distribution's support (10000
/// samples: the uniform mean within 0.02 of 0.5 and the normal's within 0.05 of 2 are 7 and 5
/// standard errors), write a leaf that requires grad only under NoGradGuard, and refuse what
/// PyTorch refuses; index_fill's index is checked eagerly and compiled.
TEST(Composites, SamplersFillInPlaceAndIndicesAreChecked) {
  manual_seed(3);
  Tensor u = empty({10000});
  Tensor& same = u.uniform_(-1, 2);
  EXPECT_TRUE(same.is_same(u));
  EXPECT_GE(u.min().item<float>(), -1.0f);
  EXPECT_LT(u.max().item<float>(), 2.0f);
  EXPECT_NEAR(u.mean().item<float>(), 0.5f, 0.02f);
  Tensor n = empty({10000}, kFloat64).normal_(2, 0.5);
  EXPECT_NEAR(n.mean().item<double>(), 2.0, 0.05);
  Tensor b = empty({1000}).bernoulli_(0.3);
  EXPECT_EQ((b.eq(0.0).logical_or(b.eq(1.0))).all().item<bool>(), true);
  EXPECT_EQ(full({4}, 1.0).bernoulli().sum().item<float>(), 4.0f);
  EXPECT_THROW((void)empty({3}, kInt64).uniform_(), DTypeError);
  EXPECT_THROW((void)empty({3}).uniform_(2, 1), ValueError);
  EXPECT_THROW((void)empty({3}).normal_(0, -1), ValueError);
  Tensor w = zeros({3}).requires_grad_();
  EXPECT_THROW((void)w.normal_(), Error); // a leaf that requires grad, outside NoGradGuard
  {
    NoGradGuard guard;
    w.normal_();
  }
  EXPECT_TRUE(w.requires_grad());

  EXPECT_THROW((void)zeros({3}).index_fill(0, tensor({3}), 1.0), IndexError);
  EXPECT_EQ(zeros({3}).index_fill(0, tensor({-3}), 1.0).to_vector<float>(),
            (std::vector<float>{1, 0, 0}));
  auto fill = compile([](const Tensor& x) { return x.index_fill(0, tensor({4}), 1.0); });
  EXPECT_THROW((void)fill(zeros({3})), IndexError);
  Tensor acc = zeros({3});
  acc.addcmul_(tensor({1.0f, 2.0f, 3.0f}), tensor({2.0f, 2.0f, 2.0f}), 0.5)
      .addcdiv_(tensor({4.0f, 4.0f, 4.0f}), tensor({2.0f, 4.0f, 8.0f}))
      .lerp_(zeros({3}), 0.5);
  EXPECT_EQ(acc.to_vector<float>(), (std::vector<float>{1.5f, 1.5f, 1.75f}));
}

/// heaviside (PyTorch 1.13 cannot differentiate it, so the edge-case table, which compares
/// gradients, leaves it out) and copysign with a number, -0.0 included.
TEST(Composites, HeavisideAndCopysignOfANumber) {
  Tensor x = tensor({-2.0f, 0.0f, 3.0f, std::nanf("")});
  EXPECT_EQ(x.heaviside(full({4}, 0.5f)).to_vector<float>().at(1), 0.5f);
  std::vector<float> h = x.heaviside(full({4}, 0.5f)).to_vector<float>();
  EXPECT_EQ(h[0], 0.0f);
  EXPECT_EQ(h[2], 1.0f);
  EXPECT_EQ(h[3], 0.0f); // NaN > 0 is false, as in PyTorch
  EXPECT_THROW((void)x.heaviside(zeros({4}, kFloat64)), DTypeError);
  std::vector<float> c = tensor({-2.0f, 0.0f, 3.0f}).copysign(-0.0).to_vector<float>();
  EXPECT_EQ(c[0], -2.0f);
  EXPECT_TRUE(std::signbit(c[1]));
  EXPECT_EQ(c[2], -3.0f);
  EXPECT_EQ(tensor({-1, 2}).copysign(1.0).to_vector<float>(), (std::vector<float>{1, 2}));
}

/// Predicates and per-channel forms the edge-case table does not reach.
TEST(Composites, PredicatesChannelsAndSplitsAsPyTorch) {
  EXPECT_TRUE(tensor({1, -2}).is_signed());
  EXPECT_FALSE(tensor({1, 2}, kUInt8).is_signed());
  EXPECT_FALSE(tensor({true}).is_signed());
  EXPECT_TRUE(tensor({0.5}).is_nonzero());
  EXPECT_FALSE(zeros({1, 1}).is_nonzero());
  EXPECT_THROW((void)zeros({2}).is_nonzero(), ValueError);
  EXPECT_THROW((void)zeros({0}).is_nonzero(), ValueError);
  // A weight per channel (dim 1): channel 0 scales by 0.1, channel 1 by 0.2; 0 is not scaled.
  Tensor x = tensor({-1.0, 2.0, -3.0, 0.0}, kFloat64).reshape({1, 2, 2});
  EXPECT_EQ(x.prelu(tensor({0.1, 0.2}, kFloat64)).to_vector<double>(),
            (std::vector<double>{-0.1, 2.0, -3.0 * 0.2, 0.0}));
  EXPECT_THROW((void)x.prelu(tensor({0.1, 0.2, 0.3})), ShapeError);
  std::vector<Tensor> parts = arange(6).split_with_sizes({1, 2, 3});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].to_vector<int64_t>(), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(zeros({2, 3, 4}).adjoint().sizes(), (Shape{2, 4, 3}));
  EXPECT_EQ(tensor({1, 5}).greater(2).to_vector<bool>(), (std::vector<bool>{false, true}));
  EXPECT_THROW((void)zeros({2, 3}).sum_to_size({4}), ShapeError);
  EXPECT_THROW((void)zeros({4, 3}).slice_scatter(zeros({1, 3}), 0, 0, 4, 2), ShapeError);
}

/// bincount and histc against PyTorch 1.13's values; a NaN is in no bin (PyTorch 1.13 counts it in
/// the first one when given a range). Both read values (bincount's size, histc's default range),
/// so compile() runs them eagerly, with the same results.
TEST(Composites, BincountAndHistcAsPyTorch) {
  Tensor x = tensor({1, 1, 3});
  EXPECT_EQ(x.bincount().to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 0, 1}));
  EXPECT_EQ(bincount(x, {}, 6).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 0, 1, 0, 0}));
  Tensor weighted = x.bincount(tensor({0.5f, 0.25f, 2.0f}));
  EXPECT_EQ(weighted.dtype(), kFloat32);
  EXPECT_EQ(weighted.to_vector<float>(), (std::vector<float>{0, 0.75f, 0, 2}));
  EXPECT_EQ(zeros({0}, kInt64).bincount().numel(), 0);
  EXPECT_THROW((void)tensor({-1}).bincount(), ValueError);
  EXPECT_THROW((void)tensor({1.5}).bincount(), DTypeError);
  EXPECT_THROW((void)x.bincount(tensor({1.0})), ShapeError);

  Tensor h = tensor({1.0, 2.0, 1.0, 4.0, NAN, 0.0}, kFloat64);
  EXPECT_EQ(h.histc(4, 0, 3).to_vector<double>(), (std::vector<double>{1, 2, 1, 0}));
  EXPECT_EQ(tensor({1.0, 2.0, 1.0}).histc(4).to_vector<float>(), (std::vector<float>{2, 0, 0, 1}));
  EXPECT_EQ(tensor({2.0, 2.0}).histc(4).to_vector<float>(), (std::vector<float>{0, 0, 2, 0}));
  EXPECT_THROW((void)tensor({1, 2}).histc(4), DTypeError);
  EXPECT_THROW((void)h.histc(0), ValueError);
  auto counts = compile([](const Tensor& t) { return t.histc(3) + t.abs().to(kInt64).bincount(); });
  Tensor v = tensor({0.0, 1.0, 2.0}, kFloat64);
  EXPECT_EQ(counts(v).to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

/// The scans beside cumsum, against values PyTorch 1.13 gave (float64). cumprod's gradient at and
/// after a zero, and logcumsumexp far below its running value, are where naive formulas fail
/// (a division by zero; log(0) = -inf): 1e-4 absolute covers the four digits quoted.
TEST(Scans, CumprodLogcumsumexpCummaxAndCumminAsPyTorch) {
  Tensor a = tensor({2.0, 0.0, 3.0, 0.0, 4.0}, kFloat64).requires_grad_(true);
  a.cumprod(0).backward(tensor({1.0, 2.0, 3.0, 4.0, 5.0}, kFloat64));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{1, 22, 0, 0, 0}));
  // An inf after a zero stays out of the gradients before it (0 * inf would be NaN), and a line
  // of one element passes g on, even an inf.
  const double inf = std::numeric_limits<double>::infinity();
  for (const auto& [in, want] :
       {std::pair{std::vector<double>{2, 0, inf}, std::vector<double>{1, inf, 0}},
        std::pair{std::vector<double>{0, 0, inf}, std::vector<double>{1, 0, 0}},
        std::pair{std::vector<double>{3, 0, 2, 0, inf}, std::vector<double>{1, 9, 0, 0, 0}}}) {
    Tensor c = from_vector(in, {static_cast<int64_t>(in.size())}).requires_grad_(true);
    c.cumprod(0).sum().backward();
    EXPECT_EQ(c.grad().to_vector<double>(), want);
  }
  Tensor column = from_vector(std::vector<double>{inf, 2.0}, {2, 1}).requires_grad_(true);
  column.cumprod(1).sum().backward();
  EXPECT_EQ(column.grad().to_vector<double>(), (std::vector<double>{1, 1}));
  EXPECT_EQ(full({}, -3.0, kFloat64).norm(2, {0}).item<double>(), 3.0);
  EXPECT_EQ(zeros({0, 2}, kFloat64).norm(std::numeric_limits<double>::infinity(), {0}).sizes(),
            (Shape{2}));
  Tensor b = tensor({-1000.0, 0.0, 1.0}, kFloat64).requires_grad_(true);
  Tensor l = b.logcumsumexp(0);
  EXPECT_TRUE(allClose(l.to_vector<double>(), {-1000.0, 0.0, 1.3133}, 0, 1e-4));
  l.backward(tensor({1.0, -2.0, 3.0}, kFloat64));
  EXPECT_TRUE(allClose(b.grad().to_vector<double>(), {1.0, -1.1932, 2.1932}, 0, 1e-4));
  EXPECT_THROW((void)tensor({1, 2, 3}).logcumsumexp(0), DTypeError);

  Tensor x = tensor({1.0, 3.0, 3.0, 2.0, NAN, 5.0, NAN, 1.0}, kFloat64);
  auto [hi, hiAt] = x.cummax(0);
  EXPECT_EQ(hiAt.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, 4, 4, 6, 6}));
  EXPECT_EQ(hi.to_vector<double>()[3], 3.0);
  EXPECT_TRUE(std::isnan(hi.to_vector<double>()[5]));
  auto [lo, loAt] = cummin(tensor({2.0, -1.0, -1.0, 0.0, -3.0}, kFloat64), 0);
  EXPECT_EQ(loAt.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 2, 4}));
  EXPECT_EQ(lo.to_vector<double>(), (std::vector<double>{2, -1, -1, -1, -3}));
  EXPECT_EQ(tensor({1, 2, 3}).cumprod(0).dtype(), kInt64);

  // Compiled, the same values and gradients.
  auto leaf = [] {
    return tensor({0.5, 0.0, -1.5, 2.0, 0.0, 1.0}, kFloat64).reshape({2, 3}).requires_grad_(true);
  };
  Tensor w = leaf(), v = leaf();
  auto f = [](const Tensor& t) {
    auto [m, at] = t.cummax(1);
    return (t.cumprod(1) + t.logcumsumexp(0) + m).sum() + at.sum().to(kFloat64);
  };
  Tensor eager = f(w);
  eager.backward();
  auto compiled = compile(f);
  Tensor out = compiled(v);
  out.backward();
  EXPECT_EQ(out.item<double>(), eager.item<double>());
  EXPECT_TRUE(allClose(v.grad().to_vector<double>(), w.grad().to_vector<double>(), 1e-12, 1e-12));
}

} // namespace
} // namespace weft::test
