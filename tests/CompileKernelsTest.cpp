// Generated code inside compile(): every elementwise primitive fused equals eager, row kernels
// (reductions along rows with the work around them), conversions as eager makes them, and matmuls
// leading their epilogues as generated GEMMs, chosen by measurement.
#include "CompileTestUtil.h"
#include "OpSamples.h"
#include "TestUtil.h"
#include "weft/codegen/KernelCache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <unistd.h>

namespace weft::test {
namespace {

class FusedOp : public ::testing::TestWithParam<int> {};

/// Every elementwise primitive inside a generated (fused) kernel equals eager exactly, in every
/// dtype, on contiguous, strided and broadcast inputs: the kernel calls the same libm and libmvec
/// functions (see weft/runtime/VectorMathFunctions.h) and rounds, wraps and converts as the eager
/// kernels do (float16/bfloat16: computed in float, each op's result rounded to its type). Where
/// eager rejects a dtype, so does compile().
TEST_P(FusedOp, EqualsEagerExactly) {
  auto op = static_cast<OpCode>(GetParam());
  if (!isElementwise(op)) GTEST_SKIP() << "not elementwise";
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8})
    for (const OpSample& s : samplesFor(op)) {
      SCOPED_TRACE(s.label + " " + std::string(dtypeName(dt)));
      const bool integral = !isFloating(dt);
      std::vector<Tensor> in;
      for (const Tensor& t : s.inputs) // integers: the samples scaled, so they are not all 0 or 1
        in.push_back(integralOnly(op)         ? t.to(dt) // int64 samples: each dtype, or an error
                     : !t.is_floating_point() ? t
                     : integral               ? (t * 7.0).to(dt)
                                              : t.to(dt));
      // The op, then one more elementwise op so the two fuse into one kernel.
      auto f = [&](const std::vector<Tensor>& args) {
        Tensor y = dispatch(op, s.prepared(args), s.attrs);
        Tensor z = y.dtype() == kBool ? y.logical_not() : y * 0.5 - 1.0;
        return std::vector<Tensor>{y, z};
      };
      CompiledFunction cf{CompileOptions()};
      std::vector<Tensor> eager;
      try {
        eager = f(in);
      } catch (const Error&) {
        EXPECT_THROW(cf.call(in, f), Error);
        continue;
      }
      std::vector<Tensor> out = cf.call(in, f);
      // Where the CPU's code generator says it computes the op (as the fuse pass asks it), the op
      // and the one after it are one kernel.
      ir::Graph asked("asked");
      std::vector<ir::ValueId> operands;
      for (const Tensor& t : s.prepared(in))
        operands.push_back(asked.addArgument({t.dtype(), t.sizes()}, "a"));
      asked.addNode(op, operands, s.attrs, {eager[0].dtype(), eager[0].sizes()});
      if (codegen::CpuTarget::host().computes(asked, asked.nodes().back())) {
        EXPECT_EQ(cf.num_kernels(), 1u); // the op and the one after it
      }
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ(out[i].dtype(), eager[i].dtype());
        std::vector<double> a = vals(out[i]), b = vals(eager[i]);
        ASSERT_EQ(a.size(), b.size());
        for (size_t k = 0; k < a.size(); ++k) {
          if (std::isnan(a[k]) && std::isnan(b[k])) continue;
          ASSERT_EQ(a[k], b[k]) << "output " << i << " element " << k;
        }
      }
    }
}
INSTANTIATE_TEST_SUITE_P(AllOps, FusedOp, ::testing::Range(0, kNumOps),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(opName(static_cast<OpCode>(i.param)));
                         });

/// Row kernels: reductions along the last dim run inside generated kernels together with the
/// elementwise work around them (layer norm forward and backward, a softmax and a log-softmax
/// written out, amax/amin and their backward), on rows shorter and longer than the kernels'
/// 1024-element sum blocks, in float32 and float64. A kernel adds a row in another order than the
/// eager sum (other vector lanes), so compiled and eager agree to rounding: relative 1e-4 in
/// float32 (sums of up to 2500 terms, then divided through layer norm's backward), 1e-10 in
/// float64.
TEST(Compile, RowReductionsRunInKernelsAndMatchEager) {
  for (DType dt : {kFloat32, kFloat64})
    for (const Shape& shape : {Shape{6, 5, 24}, Shape{3, 2500}}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " rows of " + std::to_string(shape.back()));
      Generator g(11);
      Tensor x = randn(shape, dt, g).requires_grad_();
      Tensor w = (randn({shape.back()}, dt, g) * 0.5 + 1.0).requires_grad_();
      Tensor target = randn(shape, dt, g);
      auto loss = [&](const Tensor& t) {
        Tensor mu = x.mean({-1}, true);
        Tensor var = (x - mu).pow(2).mean({-1}, true);
        Tensor h = (x - mu) / (var + 1e-5).sqrt() * w;
        Tensor m = h.amax({-1}, true);
        Tensor e = (h - m).exp();
        Tensor p = e / e.sum({-1}, true);
        Tensor logp = h - m - e.sum({-1}, true).log();
        return (p * t).sum() - (logp * t).mean() + h.amin({-1}, true).sum() * 0.1;
      };
      Tensor eagerLoss = loss(target);
      eagerLoss.backward();
      std::vector<double> gx = vals(x.grad()), gw = vals(w.grad());
      x.set_grad({});
      w.set_grad({});
      auto step = compile([&](const Tensor& t) {
        Tensor l = loss(t);
        l.backward();
        return l;
      });
      Tensor l = step(target);
      const double rtol = dt == kFloat32 ? 1e-4 : 1e-10, atol = dt == kFloat32 ? 1e-5 : 1e-12;
      EXPECT_TRUE(allClose(vals(l), vals(eagerLoss), rtol, atol));
      EXPECT_TRUE(allClose(vals(x.grad()), gx, rtol, atol));
      EXPECT_TRUE(allClose(vals(w.grad()), gw, rtol, atol));
      EXPECT_TRUE(arenaIsSound(step.compiled()));
      // No reduction along the rows is left to the interpreter.
      const Plan& plan = step.compiled().executable()->plan;
      int rowReductions = 0, kernels = 0;
      for (const PlanStep& st : plan.steps) {
        kernels += st.kernel >= 0 ? 1 : 0;
        bool reduction = st.op == OpCode::Sum || st.op == OpCode::AMax || st.op == OpCode::AMin;
        if (st.kernel < 0 && reduction && st.shape.size() == shape.size() && st.shape.back() == 1)
          ++rowReductions;
      }
      EXPECT_EQ(rowReductions, 0);
      EXPECT_GT(kernels, 0);
    }
}

/// A row kernel reading a slice of the shape of its reductions (a keepdim view of another input)
/// reads it once per row and runs as generated code; float64, so compiled and eager agree to
/// 1e-12 (rows of 7).
TEST(Compile, RowKernelsReadReducedShapeViewsOncePerRow) {
  Generator g(5);
  Tensor x = randn({4, 7}, kFloat64, g), z = randn({4, 3}, kFloat64, g);
  auto f = [](const Tensor& a, const Tensor& b) {
    Tensor m = a.amax({-1}, true) + b.narrow(1, 1, 1); // [4, 1]: a reduced-shape view leaf
    return ((a - m).exp().sum({-1}, true) * b.narrow(1, 2, 1)).log();
  };
  Tensor eager = f(x, z);
  auto compiled = compile(f);
  EXPECT_TRUE(allClose(vals(compiled(x, z)), vals(eager), 1e-12, 1e-14));
  int interpreted = 0;
  for (const PlanStep& st : compiled.compiled().executable()->plan.steps)
    interpreted += st.kernel < 0 && (st.op == OpCode::AMax || st.op == OpCode::Sum) ? 1 : 0;
  EXPECT_EQ(interpreted, 0) << "the row kernel fell back to the interpreter";
}

/// Column sums: a sum over every dim but the last of a value a kernel computes (the gradient of a
/// per-channel scale and bias over [B, T, C] activations, a forward sum returned) is split into
/// a sum over the middle dims, which the kernel adds up as it writes the value, and a small sum
/// over dim 0. Rank 3 and 4, middle dims of 7 to 300 rows, float32 and float64, dims kept or not,
/// with and without a layer norm after the scale and bias (whose backward row kernel then adds
/// the sums up).
/// The kernel adds each partial sum's rows in order in the element type, then the interpreter the
/// partials, where eager adds all rows in blocks of 1024: compiled and eager agree to rounding,
/// relative 1e-5 in float32 (sums of at most 1200 terms of one sign's magnitude), 1e-12 in
/// float64. Behind a layer norm the gradients of the scale sum 1200 terms of both signs from the
/// norm's backward, whose own row sums LLVM vectorizes in another order than eager's: their
/// rounding walks up to about sqrt(1200) * 2^-24 * 35 (the partial sums' size), so float32 allows
/// 1e-4 absolute there.
TEST(Compile, ColumnSumsRunInKernelsAndMatchEager) {
  for (DType dt : {kFloat32, kFloat64})
    for (const Shape& shape : {Shape{6, 7, 40}, Shape{3, 2, 5, 33}, Shape{4, 300, 20}})
      for (bool norm : {false, true}) {
        SCOPED_TRACE(std::string(dtypeName(dt)) + " " + shapeString(shape) +
                     (norm ? " normalized" : ""));
        Generator g(13);
        const int64_t c = shape.back();
        Tensor x = randn(shape, dt, g).requires_grad_();
        Tensor w = (randn({c}, dt, g) * 0.5 + 1.0).requires_grad_();
        Tensor b = (randn({c}, dt, g) * 0.1).requires_grad_();
        Tensor target = randn(shape, dt, g);
        std::vector<int64_t> leading;
        for (size_t d = 0; d + 1 < shape.size(); ++d)
          leading.push_back(static_cast<int64_t>(d));
        auto f = [&](const Tensor& t) {
          Tensor z = x * w + b;
          if (norm) { // layer norm written out: its backward is a row kernel the sums join
            Tensor mu = z.mean({-1}, true);
            z = (z - mu) / ((z - mu).pow(2).mean({-1}, true) + 1e-5).sqrt();
          }
          Tensor h = gelu(z);
          Tensor l = (h * t).sum();
          l.backward();
          // A forward column sum returned, with and without its dims.
          Tensor y = (h * 2.0).tanh();
          return std::vector<Tensor>{l, y.sum(leading, true), y.sum(leading)};
        };
        std::vector<Tensor> eager = f(target);
        std::vector<std::vector<double>> eagerGrads;
        for (Tensor* p : {&x, &w, &b}) {
          eagerGrads.push_back(vals(p->grad()));
          p->set_grad({});
        }
        CompiledFunction step{CompileOptions()};
        std::vector<Tensor> out =
            step.call({target}, [&](const std::vector<Tensor>& a) { return f(a[0]); });
        const double rtol = dt == kFloat32 ? 1e-5 : 1e-12,
                     atol = dt == kFloat32 ? (norm ? 1e-4 : 1e-5) : 1e-12;
        for (size_t i = 0; i < out.size(); ++i)
          EXPECT_TRUE(allClose(vals(out[i]), vals(eager[i]), rtol, atol)) << "output " << i;
        EXPECT_EQ(out[1].sizes(), eager[1].sizes());
        EXPECT_EQ(out[2].sizes(), eager[2].sizes());
        size_t k = 0;
        for (Tensor* p : {&x, &w, &b}) {
          EXPECT_TRUE(allClose(vals(p->grad()), eagerGrads[k], rtol, atol)) << "gradient " << k;
          ++k;
        }
        EXPECT_TRUE(arenaIsSound(step));
        EXPECT_TRUE(roundTrips(step));
        // Each column sum's rows are added inside a kernel: kernels write the partial sums, and no
        // interpreter step computes one.
        Shape partial(shape.size(), 1);
        partial.front() = shape.front();
        partial.back() = c;
        int partials = 0, fullSums = 0;
        for (const PlanStep& st : step.executable()->plan.steps) {
          for (const auto& [type, s] : st.kernelTypes)
            partials += s == partial ? 1 : 0;
          fullSums += st.kernel < 0 && st.op == OpCode::Sum && st.shape == partial ? 1 : 0;
        }
        EXPECT_GE(partials, 3); // w's and b's gradients, the forward sum
        EXPECT_EQ(fullSums, 0);
      }
}

/// An attention's scaled, causally masked softmax and a log_softmax compiled run in row kernels
/// (the expand-softmax pass; no softmax step is left to the interpreter) and agree with eager's
/// within float32 rounding (another summation order: relative 2e-6); masked entries are exactly 0
/// (exp(-inf) in a kernel is 0, computed apart from libmvec's slow path), a row masked whole is
/// NaN in both, and exp in a kernel of -inf, NaN, an overflow and an underflow equals eager's
/// exactly.
TEST(Compile, MaskedSoftmaxRunsInRowKernels) {
  Generator g(17);
  Tensor x = randn({2, 3, 16, 16}, kFloat32, g);
  Tensor mask = ones({16, 16}, kBool).triu(1);
  mask = mask.logical_or(arange(16).eq(5).unsqueeze(1)); // row 5 masked whole
  Tensor special = tensor({-INFINITY, -INFINITY, NAN, 88.5, -100.0});
  auto f = [&](const std::vector<Tensor>& a) {
    Tensor s = (a[0] * 0.25).masked_fill(mask, -INFINITY);
    return std::vector<Tensor>{s.softmax(-1), a[0].log_softmax(3), (a[1] * 2.0).exp()};
  };
  std::vector<Tensor> eager = f({x, special});
  CompiledFunction cf{CompileOptions()};
  std::vector<Tensor> out = cf.call({x, special}, f);
  for (size_t i = 0; i < 2; ++i) {
    std::vector<double> a = vals(out[i]), b = vals(eager[i]);
    for (size_t k = 0; k < a.size(); ++k) {
      if (std::isnan(b[k])) {
        EXPECT_TRUE(std::isnan(a[k])) << "output " << i << " element " << k;
        continue;
      }
      if (b[k] == 0.0) {
        EXPECT_EQ(a[k], 0.0) << "output " << i << " element " << k;
      }
      EXPECT_NEAR(a[k], b[k], 2e-6 * std::max(1.0, std::abs(b[k])))
          << "output " << i << " element " << k;
    }
  }
  EXPECT_TRUE(std::isnan(vals(out[0])[5 * 16])); // the row masked whole
  std::vector<double> e = vals(out[2]), eagerExp = vals(eager[2]);
  for (size_t k = 0; k < e.size(); ++k)
    EXPECT_TRUE(e[k] == eagerExp[k] || (std::isnan(e[k]) && std::isnan(eagerExp[k]))) << k;
  // Only kernels compute: the softmaxes' maxima, exps, sums and divisions are in row kernels.
  int kernels = 0;
  for (const PlanStep& st : cf.executable()->plan.steps) {
    kernels += st.kernel >= 0 ? 1 : 0;
    EXPECT_TRUE(st.kernel >= 0 || isViewOp(st.op) || st.op == OpCode::Full) << opName(st.op);
  }
  EXPECT_EQ(kernels, 3);
}

/// A row kernel adds its column sums up before it stores its outputs: here y goes over the
/// matmul's b (dead after the kernel), which the column sum's operand b * y reads. Adding after
/// the stores read y where b had been (q off by 21 in float32). Sums of 16 and 64 terms: relative
/// 1e-5.
TEST(Compile, RowKernelAddsColumnSumsBeforeItsStores) {
  Generator g(19);
  Tensor h = randn({4, 16, 64}, kFloat32, g), w = randn({64, 64}, kFloat32, g) * 0.1;
  Tensor a = randn({4, 16, 64}, kFloat32, g);
  auto f = [&](const std::vector<Tensor>& in) {
    Tensor b = in[0].matmul(w);
    Tensor y = in[1] * in[1].sum({-1}, true);
    return std::vector<Tensor>{y, (b * y).sum({1}, true)};
  };
  std::vector<Tensor> eager = f({h, a});
  CompiledFunction cf{CompileOptions()};
  std::vector<Tensor> out = cf.call({h, a}, f);
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_TRUE(allClose(vals(out[i]), vals(eager[i]), 1e-5, 1e-4)) << "output " << i;
  // The case at hand: one kernel computes both, y written over b.
  int overB = 0;
  for (const PlanStep& st : cf.executable()->plan.steps)
    for (int32_t over : st.kernelInPlace)
      overB += st.kernel >= 0 && over >= 0 && st.kernelOutputs.size() == 2 ? 1 : 0;
  EXPECT_EQ(overB, 1);
}

/// Conversions inside a generated kernel as the eager kernels make them: a float goes to an integer
/// truncated toward zero, NaN, infinities and values out of range give the type's minimum (uint8:
/// int32's, wrapped), integer arithmetic wraps, uint8 compares unsigned, integers reach floats
/// exactly where they fit, and float16/bfloat16 round to nearest even (subnormals kept, overflow
/// to infinity, float64 through float). Each function is one kernel, and compiled equals eager.
TEST(Compile, KernelsConvertRoundAndWrapAsEager) {
  const double inf = std::numeric_limits<double>::infinity();
  Tensor x = from_vector<double>({0.0,           -0.0,          1.9,  -1.9,         254.7,
                                  255.5,         300.25,        -3.5, 2147483647.5, 2147483648.0,
                                  -2147483648.0, -2147483649.0, 3e9,  -3e9,         9.3e18,
                                  -9.3e18,       std::nan(""),  inf,  -inf,         1e-300});
  auto conversions = [](const std::vector<Tensor>& in) {
    Tensor f = in[0] * 1.0; // computed in the kernel, then converted
    Tensor i32 = f.to(kInt32), i64 = f.to(kInt64), u8 = f.to(kUInt8);
    return std::vector<Tensor>{i32,
                               i64,
                               u8,
                               f.to(kFloat32).to(kInt32),
                               i32.to(kFloat64),
                               u8.to(kInt64),
                               i64.to(kInt32),
                               (i32 + 1).to(kUInt8)};
  };
  Tensor big = from_vector<int32_t>({2147483647, -2147483647 - 1, 5, -7, 100000, 0});
  Tensor bytes = from_vector<uint8_t>({200, 100, 255, 0, 1, 128});
  auto arithmetic = [](const std::vector<Tensor>& in) {
    Tensor a = in[0] * 1, u = in[1] * 1, w = u * 3; // in the kernel, so all below fuse with them
    return std::vector<Tensor>{
        a + a, a * a, -a, a.abs(), a.maximum(-a), a.gt(0), u + u, w, -u, u.gt(w), u.le(w),
        u.maximum(w), u.minimum(w), a.sign(), a.relu(), (a / 3).to(kInt64), a.to(kInt64) * 3,
        a.to(kFloat32), u.to(kFloat32) - 1.5,
        // integer constants past 2^53 stay exact
        a.to(kInt64) + full({6}, int64_t{9007199254740993}, kInt64),
        a.to(kInt64).minimum(full({6}, INT64_MAX, kInt64)) + INT64_MAX, u * 200};
  };
  Tensor small = from_vector<double>({1e-6, -3e-8, 6e-5, 65519.0, 65520.0, -70000.0, 3.3e38,
                                      1.00048828125, 1.00048828128, 1.0009765625, 1.00390625,
                                      1.01171875, 1e-39, std::nan(""), -inf});
  auto halves = [](const std::vector<Tensor>& in) {
    Tensor f = in[0] * 1.0, h = f.to(kFloat16), b = f.to(kBFloat16);
    return std::vector<Tensor>{h,
                               b,
                               h * 3.0,
                               b * 3.0,
                               h.exp(),
                               b.tanh(),
                               h.to(kInt32),
                               b.to(kInt64),
                               f.to(kFloat32).to(kFloat16),
                               h.to(kBFloat16),
                               b.gt(h.to(kBFloat16)),
                               (h + 1).sqrt()};
  };
  for (auto [f, in] : {std::pair{std::function(conversions), std::vector<Tensor>{x}},
                       std::pair{std::function(arithmetic), std::vector<Tensor>{big, bytes}},
                       std::pair{std::function(halves), std::vector<Tensor>{small}}}) {
    std::vector<Tensor> eager = f(in);
    CompiledFunction cf{CompileOptions()};
    std::vector<Tensor> out = cf.call(in, f);
    EXPECT_EQ(cf.num_kernels(), 1u);
    ASSERT_EQ(out.size(), eager.size());
    for (size_t i = 0; i < out.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      ASSERT_EQ(out[i].dtype(), eager[i].dtype());
      std::vector<double> a = vals(out[i]), b = vals(eager[i]);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        if (!(std::isnan(a[k]) && std::isnan(b[k]))) {
          EXPECT_EQ(a[k], b[k]) << "element " << k;
        }
      }
    }
  }
}

/// A row kernel's max and min run vectorized on the assumption of no NaN and track NaNs apart: a
/// NaN anywhere in a row (in the vector body or the tail) makes its max and min NaN, as eagerly;
/// infinities stay. Rows of 1500 take the blocked path too. The extrema are exact, so compiled
/// equals eager bit for bit (NaN equal to NaN).
TEST(Compile, RowExtremaInKernelsPropagateNaNs) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  for (int64_t len : {40, 1500}) {
    SCOPED_TRACE("rows of " + std::to_string(len));
    Tensor x = randn({5, len}, kFloat32, Generator(3)) + 0.5; // no zeros (no -0 vs +0)
    x.index_put_({0, 3}, nan);                                // in the vectorized body
    x.index_put_({1, len - 1}, nan);                          // in the tail
    x.index_put_({2}, -inf);                                  // a fully masked row
    x.index_put_({3, 7}, inf);
    auto f = [](const Tensor& a) {
      Tensor e = a.exp();
      return std::vector<Tensor>{e.amax({-1}, true) + 1.0, e.amin({-1}, true) * 2.0,
                                 a - a.amax({-1}, true)};
    };
    std::vector<Tensor> eager = f(x);
    CompiledFunction cf{CompileOptions()};
    std::vector<Tensor> out = cf.call({x}, [&](const std::vector<Tensor>& in) { return f(in[0]); });
    EXPECT_GE(cf.num_kernels(), 1u);
    for (size_t i = 0; i < eager.size(); ++i)
      EXPECT_TRUE(allClose(vals(out[i]), vals(eager[i]), 0, 0)) << "output " << i;
    EXPECT_TRUE(std::isnan(vals(out[0])[0]) && std::isnan(vals(out[0])[1]));
  }
}

/// Matmuls whose results elementwise nodes read run as generated GEMMs with those nodes as their
/// epilogue (WEFT_GEMM=generated: every shape, not measured): a two-layer classifier's train step
/// written as nn::Linear computes (x @ w.t() + b), forward and backward, equals eager's within
/// float32 rounding (the GEMMs sum in another order than OpenBLAS: 1e-5 relative), leaving the
/// interpreter only the matmuls the generated GEMM cannot run, and a sound memory plan.
TEST(Compile, MatmulEpiloguesRunAsGeneratedGemms) {
  Generator g(11);
  Tensor w1 = (randn({24, 20}, kFloat32, g) * 0.3).requires_grad_();
  Tensor b1 = (randn({24}, kFloat32, g) * 0.1).requires_grad_();
  Tensor w2 = (randn({5, 24}, kFloat32, g) * 0.3).requires_grad_();
  Tensor b2 = (randn({5}, kFloat32, g) * 0.1).requires_grad_();
  Tensor x = randn({37, 20}, kFloat32, g), y = randint(0, 5, {37}, kInt64, g);
  std::vector<Tensor> ps{w1, b1, w2, b2};
  auto loss = [&](const Tensor& in) {
    Tensor h = gelu(in.matmul(w1.t()) + b1, true);
    return -(h.matmul(w2.t()) + b2).log_softmax(1).gather(1, y.unsqueeze(1)).mean();
  };
  Tensor eager = loss(x);
  eager.backward();
  std::vector<std::vector<double>> eagerGrads;
  for (Tensor& p : ps) {
    eagerGrads.push_back(vals(p.grad()));
    p.set_grad({});
  }
  auto interpreterMatmuls = [](const CompiledFunction& cf) {
    int n = 0;
    for (const PlanStep& st : cf.executable()->plan.steps)
      n += st.kernel < 0 && st.op == OpCode::MatMul ? 1 : 0;
    return n;
  };
  auto run = [&](const char* gemm) {
    ::setenv("WEFT_GEMM", gemm, 1);
    auto step = compile([&](const Tensor& in) {
      Tensor l = loss(in);
      l.backward();
      return l;
    });
    Tensor l = step(x);
    ::unsetenv("WEFT_GEMM");
    EXPECT_TRUE(allClose(vals(l), vals(eager), 1e-5, 1e-6)) << gemm;
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_TRUE(allClose(vals(ps[i].grad()), eagerGrads[i], 1e-5, 1e-6))
          << gemm << " parameter " << i;
      ps[i].set_grad({});
    }
    EXPECT_TRUE(roundTrips(step.compiled())) << gemm;
    // Generated, nothing in this small step can share memory: each kernel writes over what it
    // reads last, or a buffer that lives on.
    EXPECT_TRUE(arenaIsSound(step.compiled(), std::string(gemm) == "blas")) << gemm;
    return interpreterMatmuls(step.compiled());
  };
  const int generated = run("generated"), blas = run("blas");
  // The first layer's forward GEMM (bias, GELU) and the hidden gradient's (g @ w2, GELU's
  // backward) lead kernels, the second layer's (its reader is log_softmax) runs as a kernel of its
  // own; the two weight gradients (g.t() @ h) read a transposed A and stay.
  EXPECT_EQ(blas, 5);
  EXPECT_EQ(generated, 2);
}

/// A permute, a slice or a flip feeding a kernel is read through inside it (a leaf: the kernel
/// reads the view's operand at the view's strides), not copied first: in a plain kernel, a row
/// kernel (a softmax of a transpose) and a generated GEMM's epilogue (a transposed residual). The
/// plans hold no view step and no interpreter step but the interpreter's GEMM; results equal eager
/// (the elementwise kernels exactly; the softmax within 2e-6, its row sum's order; the GEMM within
/// float32 rounding of its other order, 1e-5).
TEST(Compile, KernelsReadThroughViewsWithoutCopies) {
  Generator g(5);
  Tensor x = randn({6, 10}, kFloat32, g), y = randn({10, 6}, kFloat32, g);
  auto onlyKernels = [](const CompiledFunction& cf) {
    for (const PlanStep& st : cf.executable()->plan.steps)
      if (st.kernel < 0 && st.op != OpCode::MatMul) return false;
    return true;
  };
  auto plain = [](const Tensor& a, const Tensor& b) {
    Tensor t = (a.t() * 2.0 + b).exp() - b.flip({1});
    Tensor s = (a.slice(1, 1, std::nullopt, 3) + 1.0).abs().sqrt(); // columns 1, 4, 7
    return std::vector<Tensor>{t, s * a.narrow(1, 2, 3)};
  };
  auto cp = compile(plain);
  std::vector<Tensor> want = plain(x, y), got = cp(x, y);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(vals(got[i]), vals(want[i])) << "output " << i;
  EXPECT_TRUE(onlyKernels(cp.compiled()));
  EXPECT_EQ(cp.compiled().num_kernels(), 2u);
  EXPECT_TRUE(arenaIsSound(cp.compiled(), false));

  auto rows = [](const Tensor& a) { return (a.t() * 0.5).softmax(-1); };
  auto cr = compile(rows);
  EXPECT_TRUE(allClose(vals(cr(x)), vals(rows(x)), 2e-6, 0));
  EXPECT_TRUE(onlyKernels(cr.compiled()));

  ::setenv("WEFT_GEMM", "generated", 1);
  Tensor a = randn({40, 24}, kFloat32, g), w = randn({24, 16}, kFloat32, g),
         r = randn({16, 40}, kFloat32, g);
  auto epilogue = [](const Tensor& p, const Tensor& q, const Tensor& res) {
    return (p.matmul(q) + res.t()).tanh();
  };
  auto ce = compile(epilogue);
  Tensor out = ce(a, w, r);
  ::unsetenv("WEFT_GEMM");
  EXPECT_TRUE(allClose(vals(out), vals(epilogue(a, w, r)), 1e-5, 1e-6));
  int steps = 0;
  for (const PlanStep& st : ce.compiled().executable()->plan.steps) {
    EXPECT_GE(st.kernel, 0) << opName(st.op); // the GEMM leads the kernel, the transpose a leaf
    ++steps;
  }
  EXPECT_EQ(steps, 1);

  // A group reading the GEMM's result through a view reads other tiles than the GEMM's own: the
  // GEMM does not lead it, both run as kernels.
  ::setenv("WEFT_GEMM", "generated", 1);
  Tensor sq = randn({24, 16}, kFloat32, g);
  auto flipped = [](const Tensor& p, const Tensor& q) {
    Tensor prod = p.matmul(q);
    return (prod + prod.flip({0})).tanh();
  };
  auto cf = compile(flipped);
  Tensor fo = cf(a, sq);
  ::unsetenv("WEFT_GEMM");
  EXPECT_TRUE(allClose(vals(fo), vals(flipped(a, sq)), 1e-5, 1e-6));
  for (const PlanStep& st : cf.compiled().executable()->plan.steps)
    EXPECT_GE(st.kernel, 0) << opName(st.op);
}

/// A kernel reading a transpose walks its last two dims in 64 x 64 blocks (readsAcrossRows), rows
/// split between threads: partial blocks in both dims and a batch dim before them give every
/// element as eager does.
TEST(Compile, KernelsReadingAcrossRowsWalkInBlocksAndMatchEager) {
  Generator g(8);
  Tensor x = randn({70, 150}, kFloat64, g), y = randn({150, 70}, kFloat64, g);
  Tensor bx = randn({3, 130, 70}, kFloat64, g), by = randn({70, 130}, kFloat64, g);
  auto two = [](const Tensor& a, const Tensor& b) {
    return std::vector<Tensor>{(a.t() * 2.0 + b).exp() * b, a.t() - b.abs().sqrt()};
  };
  auto batched = [](const Tensor& a, const Tensor& b) { return (a.transpose(1, 2) + b).tanh(); };
  // With a column sum: the dim between the first and the last is tiled too, and each sum still
  // adds its rows in order.
  auto summed = [](const Tensor& a, const Tensor& b) {
    Tensor v = (a.transpose(1, 2) * 2.0 + b).tanh();
    return std::vector<Tensor>{v, v.sum({1}, true)};
  };
  auto ct = compile(two);
  auto cb = compile(batched);
  auto cs = compile(summed);
  std::vector<Tensor> want = two(x, y), got = ct(x, y);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(vals(got[i]), vals(want[i])) << "output " << i; // the same scalar code: exact
  EXPECT_EQ(vals(cb(bx, by)), vals(batched(bx, by)));
  std::vector<Tensor> sums = cs(bx, by), eagerSums = summed(bx, by);
  EXPECT_EQ(vals(sums[0]), vals(eagerSums[0]));
  // 70 rows in another order than eager's sum: float64 rounding, far below a wrong element's.
  EXPECT_TRUE(allClose(vals(sums[1]), vals(eagerSums[1]), 1e-13, 1e-13));
  EXPECT_EQ(cs.compiled().num_kernels(), 1u); // one column kernel reading the transpose
  for (const CompiledFunction* cf : {&ct.compiled(), &cb.compiled(), &cs.compiled()})
    for (const PlanStep& st : cf->executable()->plan.steps)
      EXPECT_GE(st.kernel, 0) << opName(st.op); // the transposes are the kernels' leaves
}

/// An optimizer's update over parameters of three shapes is one horizontal kernel: one
/// linalg.generic per parameter, no hand-built loop (the module codegen builds, WEFT_DUMP_DIR),
/// each parameter written in place as eager writes it.
TEST(Compile, HorizontalKernelsAreOneLinalgGenericPerPart) {
  namespace fs = std::filesystem;
  Generator g(3);
  std::vector<Tensor> params = {randn({7, 5}, kFloat32, g), randn({5}, kFloat32, g),
                                randn({3, 4, 2}, kFloat32, g)};
  std::vector<Tensor> eagerParams, grads, moments;
  for (const Tensor& p : params) {
    eagerParams.push_back(p.clone());
    grads.push_back(randn(p.sizes(), kFloat32, g));
    moments.push_back(zeros_like(p));
  }
  auto sgd = [&](std::vector<Tensor>& ps, std::vector<Tensor>& ms) {
    NoGradGuard ng;
    for (size_t i = 0; i < ps.size(); ++i) {
      ms[i].mul_(0.9).add_(grads[i]);
      ps[i].sub_(ms[i] * 0.1);
    }
  };
  std::vector<Tensor> eagerMoments = {zeros_like(params[0]), zeros_like(params[1]),
                                      zeros_like(params[2])};
  fs::path dump = fs::temp_directory_path() / ("weft-dump-parts-" + std::to_string(::getpid()));
  fs::remove_all(dump);
  fs::create_directories(dump);
  ::setenv("WEFT_DUMP_DIR", dump.c_str(), 1);
  ::setenv("WEFT_KERNEL_CACHE", "0", 1); // build it, to see it built
  auto step = compile([&](const Tensor&) {
    sgd(params, moments);
    return std::vector<Tensor>{};
  });
  for (int k = 0; k < 2; ++k) {
    step(zeros({1}));
    sgd(eagerParams, eagerMoments);
  }
  ::unsetenv("WEFT_KERNEL_CACHE");
  ::unsetenv("WEFT_DUMP_DIR");
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(vals(params[i]), vals(eagerParams[i])) << "parameter " << i;
  EXPECT_EQ(step.compiled().num_kernels(), 1u);
  std::string module;
  for (const auto& e : fs::directory_iterator(dump))
    if (e.path().filename().string().ends_with(".input.mlir")) {
      std::ifstream in(e.path());
      module += std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  fs::remove_all(dump);
  size_t generics = 0;
  for (size_t at = module.find("linalg.generic"); at != std::string::npos;
       at = module.find("linalg.generic", at + 1))
    ++generics;
  EXPECT_EQ(generics, params.size()) << module;
  EXPECT_EQ(module.find("scf.for"), std::string::npos);
}

/// By default the choice is measured once per GEMM shape and remembered in the kernel cache's
/// `choices`: two compilations of a linear layer with a tanh (in two compile() objects, 128 x 96
/// by 96) leave one entry, and the result equals eager's within float32 rounding whichever way it
/// went: each output sums 96 products of about 1 in another order than OpenBLAS's kernel for
/// this CPU, whose rounding walks up to about sqrt(96) * 2^-24 * 10 (the partial sums' size),
/// so 1e-5 absolute. A GEMM of fewer than 2^20 multiply-adds (33 x 24 by 40) is not measured: no
/// entry.
TEST(Compile, GemmChoiceIsMeasuredOncePerShape) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("weft-choice-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ::setenv("WEFT_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("WEFT_GEMM");
  Generator g(12);
  auto entries = [&] {
    size_t n = 0;
    if (fs::exists(dir / "choices"))
      for (const auto& e : fs::directory_iterator(dir / "choices"))
        n += e.path().extension() == ".wc" ? 1 : 0;
    return n;
  };
  for (const auto& [rows, in, out] : {std::tuple{33, 24, 40}, std::tuple{128, 96, 96}}) {
    Tensor w = randn({out, in}, kFloat32, g), b = randn({out}, kFloat32, g);
    Tensor x = randn({rows, in}, kFloat32, g);
    auto f = [&](const Tensor& t) { return (t.matmul(w.t()) + b).tanh(); };
    Tensor eager = f(x);
    for (int i = 0; i < 2; ++i) {
      auto compiled = compile(f);
      EXPECT_TRUE(allClose(vals(compiled(x)), vals(eager), 1e-5, 1e-5));
    }
    EXPECT_EQ(entries(), rows == 33 ? 0u : 1u) << rows << " rows";
  }
  ::unsetenv("WEFT_CACHE_DIR");
  fs::remove_all(dir);
}

/// A compiled program is cached whole on disk: a second compile() object (as in a second process)
/// runs the graph it traces through neither the passes nor code generation. Its executable comes
/// from the cache, its kernels count as cache hits, and it gives the same bits, kernels and text
/// form. A damaged entry is rejected and built again; another thread count (GEMM choices are
/// measured per thread count) is another entry.
TEST(Compile, ExecutablesComeWholeFromTheDiskCache) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("weft-exe-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ::setenv("WEFT_CACHE_DIR", dir.c_str(), 1);
  codegen::resetKernelCacheStats();
  auto entries = [&] {
    std::vector<fs::path> r;
    for (const auto& e : fs::directory_iterator(dir / "executables"))
      r.push_back(e.path());
    return r;
  };
  Generator g(3);
  Tensor x = randn({64, 48}, kFloat32, g), w = randn({48, 32}, kFloat32, g),
         b = randn({32}, kFloat32, g);
  auto f = [&](const Tensor& t) { return ((t.matmul(w) + b).relu() * 2).softmax(-1); };
  auto first = compile(f);
  const std::vector<double> expected = vals(first(x));
  const codegen::KernelCacheStats built = codegen::kernelCacheStats();
  const size_t kernels = first.compiled().num_kernels();
  ASSERT_GT(kernels, 0u);
  EXPECT_EQ(built.executableHits, 0);
  ASSERT_EQ(entries().size(), 1u);

  auto second = compile(f);
  EXPECT_EQ(vals(second(x)), expected);
  codegen::KernelCacheStats now = codegen::kernelCacheStats();
  EXPECT_EQ(now.executableHits, 1);
  EXPECT_EQ(now.misses, built.misses); // nothing compiled
  EXPECT_EQ(now.hits - built.hits, static_cast<int64_t>(kernels));
  EXPECT_EQ(second.compiled().num_kernels(), kernels);
  EXPECT_EQ(second.compiled().graph_text(), first.compiled().graph_text());

  { // flip one byte in the middle of the entry
    const fs::path entry = entries().at(0);
    std::fstream file(entry, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(static_cast<std::streamoff>(fs::file_size(entry) / 2));
    file.put('\x5a');
  }
  auto third = compile(f);
  EXPECT_EQ(vals(third(x)), expected);
  EXPECT_EQ(codegen::kernelCacheStats().rejected, 1);
  EXPECT_EQ(codegen::kernelCacheStats().executableHits, 1);
  auto fourth = compile(f); // the rebuilt entry is good
  EXPECT_EQ(vals(fourth(x)), expected);
  EXPECT_EQ(codegen::kernelCacheStats().executableHits, 2);

  const int threads = getNumThreads();
  setNumThreads(threads == 1 ? 2 : 1);
  auto fifth = compile(f);
  EXPECT_EQ(vals(fifth(x)), expected);
  setNumThreads(threads);
  EXPECT_EQ(codegen::kernelCacheStats().executableHits, 2);
  EXPECT_EQ(entries().size(), 2u);
  ::unsetenv("WEFT_CACHE_DIR");
  fs::remove_all(dir);
}

/// A row kernel that stores `e` in its first pass over a row and reads `h` again in its second
/// (to recompute `e` for `p`) must not write `e` over `h`, though nothing reads `h` afterwards.
TEST(Compile, RowKernelKeepsInputsItsLaterPassesRead) {
  Generator g(5);
  Tensor a = randn({4, 8}, kFloat32, g), w = randn({8, 8}, kFloat32, g);
  auto f = [](const Tensor& x, const Tensor& m) {
    Tensor e = x.matmul(m).exp();
    return std::vector<Tensor>{e, e / e.amax({-1}, true)};
  };
  std::vector<Tensor> eager = f(a, w);
  CompiledFunction cf{CompileOptions()};
  std::vector<Tensor> out =
      cf.call({a, w}, [&](const std::vector<Tensor>& in) { return f(in[0], in[1]); });
  EXPECT_EQ(cf.num_kernels(), 1u);
  for (size_t i = 0; i < 2; ++i) // the same libm exp and one max: equal exactly
    EXPECT_TRUE(allClose(vals(out[i]), vals(eager[i]), 0, 0)) << "output " << i;
}

} // namespace
} // namespace weft::test
