// compile() with a dynamic dimension: batches of different sizes share one compilation per bucket
// and give what eager gives for each size; functions that cannot be bucketed are clear errors.
#include "CompileTestUtil.h"
#include "TestUtil.h"

#include <cstdlib>

namespace weft::test {
namespace {

/// Throws from `f` and checks the message holds every piece.
template <typename F>
::testing::AssertionResult failsWith(F&& f, const std::vector<std::string>& pieces) {
  try {
    f();
  } catch (const Error& e) {
    std::string m = e.what();
    for (const std::string& p : pieces)
      if (m.find(p) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks \"" << p << "\": " << m;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "no error";
}

/// A train step that reduces over the batch in many ways: a normalization with batch statistics
/// (mean and unbiased var over rows) and a running mean written back as state, a cross-entropy
/// mean, an embedding, a convolution, bias gradients summed over rows; SGD with momentum.
struct Model {
  Tensor w1, b1, w2, emb, k, running, velocity1, velocity2;
  explicit Model(uint64_t seed) {
    Generator g(seed);
    w1 = (randn({6 + 4 + 8, 12}, kFloat64, g) * 0.3).requires_grad_();
    b1 = zeros({12}, kFloat64).requires_grad_();
    w2 = (randn({12, 3}, kFloat64, g) * 0.3).requires_grad_();
    emb = (randn({10, 4}, kFloat64, g) * 0.5).requires_grad_();
    k = (randn({2, 1, 3, 3}, kFloat64, g) * 0.3).requires_grad_();
    running = zeros({6}, kFloat64);
    velocity1 = zeros_like(w1);
    velocity2 = zeros_like(w2);
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, emb, k}; }
  Tensor step(const Tensor& x, const Tensor& tokens, const Tensor& img, const Tensor& y) {
    Tensor mu = x.mean({0}), sd = (x.var({0}) + 1e-5).sqrt();
    {
      NoGradGuard ng;
      running.mul_(0.9).add_(mu, 0.1);
    }
    Tensor xn = (x - mu) / sd;
    Tensor e = embedding(emb, tokens).mean({1});                                // [n, 4]
    Tensor c = max_pool2d(conv2d(img, k, {}, {1}, {1}).tanh(), {2}).flatten(1); // [n, 8]
    Tensor h = cat({xn, e, c}, 1).matmul(w1) + b1;
    Tensor logits = h.tanh().matmul(w2);
    Tensor loss = -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean();
    loss.backward();
    NoGradGuard ng;
    velocity1.mul_(0.9).add_(w1.grad());
    velocity2.mul_(0.9).add_(w2.grad());
    w1.sub_(velocity1 * 0.1);
    w2.sub_(velocity2 * 0.1);
    for (Tensor p : {b1, emb, k})
      p.sub_(p.grad() * 0.1);
    for (Tensor p : params())
      p.set_grad({});
    return loss;
  }
};

TEST(DynamicDim, TrainStepMatchesEagerAtEveryBatchSizeWithOneCompilationPerBucket) {
  Model eager(1), compiled(1);
  auto step = compile([&](const Tensor& x, const Tensor& t, const Tensor& img,
                          const Tensor& y) { return compiled.step(x, t, img, y); },
                      CompileOptions().dynamic_dim(0));
  Generator data(2);
  for (int64_t n : {5, 8, 3, 7, 6, 12, 16, 9, 5}) {
    Tensor x = randn({n, 6}, kFloat64, data), t = randint(0, 10, {n, 3}, kInt64, data);
    Tensor img = randn({n, 1, 4, 4}, kFloat64, data), y = randint(0, 3, {n}, kInt64, data);
    double le = eager.step(x, t, img, y).item<double>();
    double lc = step(x, t, img, y).item<double>();
    // float64; padded rows are masked to exact zeros, so only summation order differs (GEMM
    // blocking over a longer batch): 1e-12 relative.
    ASSERT_NEAR(lc, le, 1e-12 * std::fabs(le)) << n << " rows";
    for (size_t i = 0; i < eager.params().size(); ++i)
      ASSERT_TRUE(allClose(vals(compiled.params()[i]), vals(eager.params()[i]), 1e-10, 1e-12))
          << "parameter " << i << " after a batch of " << n;
    ASSERT_TRUE(allClose(vals(compiled.running), vals(eager.running), 1e-10, 1e-12)) << n;
  }
  // Buckets 8, 4 and 16: three compilations for nine sizes.
  EXPECT_EQ(step.compiled().num_compiled(), 3u);
}

TEST(DynamicDim, OutputsKeepTheValidRowsAndReductionsIgnoreThePadding) {
  Tensor w = randn({3, 4}, kFloat64, Generator(5));
  auto f = [&](const Tensor& x) {
    Tensor z = x.matmul(w);
    return std::vector<Tensor>{z.softmax(-1),          // rows stay rows
                               z.sum({0}),             // sum over rows
                               z.amin({0}),            // min over rows
                               z.argmax(0),            // position of the max row
                               x.reshape({-1}) * 2.0,  // rows flattened with their columns
                               x.reshape({-1}).mean(), // a mean over rows and columns
                               z.std({0}),             // unbiased: divides by rows - 1
                               x.cumsum(0),            // prefix sums along rows
                               z.softmax(0),           // normalized over the rows
                               z.log_softmax(0)};
  };
  auto cf = compile([&](const Tensor& x) { return f(x); }, CompileOptions().dynamic_dim(0));
  Generator g(6);
  for (int64_t n : {5, 2, 7, 8, 3}) {
    // Distinct rows, the last one largest, so a padded copy would change sums, argmax, min.
    Tensor x = randn({n, 3}, kFloat64, g) + arange(n, kFloat64).unsqueeze(1);
    std::vector<Tensor> want = f(x), got = cf(x);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(allClose(got[i], want[i], 1e-12, 1e-12)) << "output " << i << ", " << n;
  }
  EXPECT_EQ(cf.compiled().num_compiled(), 3u); // buckets 8, 2, 4
}

TEST(DynamicDim, BatchNormAndLossesCountTheValidRows) {
  // Batch statistics with running stats written back, cross_entropy with class probabilities and
  // kl_div's batchmean divide by the number of rows: inside the bucket they count the valid ones.
  struct Net {
    nn::BatchNorm1d bn{nn::BatchNorm1dOptions(4)};
    Tensor w = randn({4, 3}, kFloat64, Generator(3)).requires_grad_();
    Net() { bn->to(kFloat64); }
    Tensor step(const Tensor& x, const Tensor& p) {
      Tensor logits = bn(x).matmul(w);
      Tensor loss =
          nn::functional::cross_entropy(logits, p) +
          nn::functional::kl_div(logits.log_softmax(1), p, nn::KLDivLossOptions().batchmean(true));
      loss.backward();
      NoGradGuard ng;
      for (Tensor t : {w, bn->weight, bn->bias}) {
        t.sub_(t.grad() * 0.1);
        t.grad().zero_();
      }
      return loss;
    }
  } eager, compiled;
  auto step = compile([&](const Tensor& x, const Tensor& p) { return compiled.step(x, p); },
                      CompileOptions().dynamic_dim(0));
  Generator data(4);
  for (int64_t n : {5, 3, 7, 6}) {
    Tensor x = randn({n, 4}, kFloat64, data), p = randn({n, 3}, kFloat64, data).softmax(1);
    double le = eager.step(x, p).item<double>(), lc = step(x, p).item<double>();
    // float64, padded rows masked to exact zeros: only summation order differs.
    ASSERT_NEAR(lc, le, 1e-12 * std::fabs(le)) << n << " rows";
    for (auto [a, b] : {std::pair{compiled.w, eager.w},
                        std::pair{compiled.bn->running_mean, eager.bn->running_mean},
                        std::pair{compiled.bn->running_var, eager.bn->running_var},
                        std::pair{compiled.bn->weight, eager.bn->weight}})
      ASSERT_TRUE(allClose(vals(a), vals(b), 1e-10, 1e-12)) << n << " rows";
  }
  EXPECT_EQ(step.compiled().num_compiled(), 3u); // buckets 8 and 4, and the first step's .grad
}

TEST(DynamicDim, CompiledForwardWithEagerBackwardMatchesEager) {
  // Only the model compiled, with a dynamic batch; loss and backward eager. The model also
  // reduces over the rows (a batch mean), so its backward needs the masks too.
  Generator g(8);
  Tensor w1 = (randn({3, 5}, kFloat64, g) * 0.5).requires_grad_(),
         w2 = (randn({5, 2}, kFloat64, g) * 0.5).requires_grad_();
  auto model = [&](const Tensor& x) {
    Tensor h = x.matmul(w1).tanh();
    Tensor centered = h - h.mean({0});
    return std::vector<Tensor>{centered.matmul(w2), h.amax({0})};
  };
  auto compiled =
      compile([&](const Tensor& x) { return model(x); }, CompileOptions().dynamic_dim(0));
  for (int64_t n : {5, 3, 8, 7}) {
    Tensor x = randn({n, 3}, kFloat64, g), y = randn({n, 2}, kFloat64, g);
    auto lossOf = [&](const std::vector<Tensor>& out) {
      return (out[0] - y).pow(2).mean() + out[1].sum();
    };
    Tensor xe = x.clone().requires_grad_(), xc = x.clone().requires_grad_();
    lossOf(model(xe)).backward();
    std::vector<Tensor> want{w1.grad().clone(), w2.grad().clone()};
    w1.set_grad({});
    w2.set_grad({});
    std::vector<Tensor> out = compiled(xc);
    ASSERT_EQ(out[0].size(0), n);
    lossOf(out).backward();
    // float64, masked rows are exact zeros: 1e-12.
    EXPECT_TRUE(allClose(w1.grad(), want[0], 1e-12, 1e-12)) << n;
    EXPECT_TRUE(allClose(w2.grad(), want[1], 1e-12, 1e-12)) << n;
    EXPECT_TRUE(allClose(xc.grad(), xe.grad(), 1e-12, 1e-12)) << n; // cut back to n rows
    w1.set_grad({});
    w2.set_grad({});
  }
  EXPECT_EQ(compiled.compiled().num_compiled(), 2u); // buckets 8 and 4
}

TEST(DynamicDim, SameBucketDoesNotRecompileANewBucketDoesAndSaysWhy) {
  setenv("WEFT_LOG_RECOMPILES", "1", 1);
  auto f = compile([](const Tensor& x) { return x.exp().sum(); }, CompileOptions().dynamic_dim(0));
  ::testing::internal::CaptureStderr();
  for (int64_t n : {5, 6, 7, 8, 9})
    EXPECT_NEAR(f(ones({n, 3})).item<double>(), static_cast<double>(3 * n) * std::exp(1.0), 1e-4);
  std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("WEFT_LOG_RECOMPILES");
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
  EXPECT_NE(log.find("recompiling (compilation 2): input 0 shape [8, 3] -> [16, 3]"),
            std::string::npos)
      << log;
}

TEST(DynamicDim, ExplicitBucketsAndArgumentLists) {
  Tensor w = ones({1, 3});
  auto f = compile([&](const Tensor& x, const Tensor& scale) { return (x * scale).sum({1}); },
                   CompileOptions().dynamic_dim(0, {0}).buckets({4, 10}));
  // `scale` has a dimension 0 too, but only argument 0 is dynamic.
  EXPECT_TRUE(allClose(f(ones({5, 3}), w), full({5}, 3.0), 0, 0));
  EXPECT_TRUE(allClose(f(ones({10, 3}), w), full({10}, 3.0), 0, 0));
  EXPECT_EQ(f.compiled().num_compiled(), 1u); // both in bucket 10
  EXPECT_TRUE(failsWith([&] { f(ones({11, 3}), w); }, {"11 rows exceed the largest bucket (10)"}));
}

TEST(DynamicDim, MistakesAreClearErrors) {
  auto both = compile([](const Tensor& x, const Tensor& y) { return x + y; },
                      CompileOptions().dynamic_dim(0));
  EXPECT_TRUE(failsWith(
      [&] {
        both(ones({4, 2}), ones({5, 2}));
      },
      {"argument 1 has 5 rows where argument 0 has 4", "dynamic_dim(dim, {"}));
  EXPECT_TRUE(failsWith([&] { both(ones({0, 2}), ones({0, 2})); }, {"0 rows"}));
  EXPECT_TRUE(failsWith(
      [] {
        compile([](const Tensor& x) { return x; },
                CompileOptions().dynamic_dim(0).specialize_on_values());
      },
      {"dynamic_dim and specialize_on_values"}));
  EXPECT_TRUE(failsWith(
      [] {
        compile([](const Tensor& x) { return x; }, CompileOptions().buckets({8, 4}));
      },
      {"ascending"}));
  auto scalarOnly = compile([](const Tensor& x) { return x; }, CompileOptions().dynamic_dim(0));
  EXPECT_TRUE(failsWith([&] { scalarOnly(ones({})); }, {"applies to no argument"}));
}

TEST(DynamicDim, FunctionsThatCannotBeBucketedNameTheLine) {
  auto opts = CompileOptions().dynamic_dim(0);
  auto perRowCount = compile([](const Tensor& x) { return x.sum() / x.size(0); }, opts);
  EXPECT_TRUE(failsWith(
      [&] {
        perRowCount(ones({5, 2}));
      },
      {"size of the dynamic dimension", "an operand of div", "mean()"}));
  int line = __LINE__ + 1;
  auto scaled = compile([](const Tensor& x) { return x * full({}, 1.0 / x.size(0)); }, opts);
  EXPECT_TRUE(failsWith(
      [&] {
        scaled(ones({5, 2}));
      },
      {"full at ", "DynamicDimTest.cpp:" + std::to_string(line)}));

  line = __LINE__ + 1;
  auto flipped = compile([](const Tensor& x) { return x.flip({0}); }, opts);
  EXPECT_TRUE(failsWith(
      [&] {
        flipped(ones({5, 2}));
      },
      {"flip", "reverses the dynamic dimension", "DynamicDimTest.cpp:" + std::to_string(line)}));

  auto firstRow = compile([](const Tensor& x) { return x.index({0}); }, opts);
  EXPECT_TRUE(failsWith([&] { firstRow(ones({5, 2})); }, {"picks rows of the dynamic dimension"}));

  auto sorted = compile([](const Tensor& x) { return x.sort(0).first; }, opts);
  EXPECT_TRUE(failsWith([&] { sorted(ones({5, 2})); }, {"sorts along the dynamic dimension"}));

  auto gram = compile([](const Tensor& x) { return x.matmul(x.t()); }, opts);
  EXPECT_TRUE(failsWith([&] { gram(ones({5, 2})); }, {"two axes of the dynamic dimension"}));

  // Structure that depends on the size: 3 rows trace at 4 and, to check, at 8.
  auto branchy = compile([](const Tensor& x) { return x.size(0) > 4 ? x * 2.0 : x.exp(); }, opts);
  EXPECT_TRUE(failsWith([&] { branchy(ones({3, 2})); }, {"records a different graph"}));

  // A constant made from the size: its values must not depend on it (arange may, linspace not).
  auto ramp =
      compile([](const Tensor& x) { return x * linspace(0, 1, x.size(0)).unsqueeze(1); }, opts);
  EXPECT_TRUE(failsWith([&] { ramp(ones({5, 2})); }, {"whose values depend on the size"}));
  auto rowIds =
      compile([](const Tensor& x) { return x * arange(x.size(0), kFloat32).unsqueeze(1); }, opts);
  EXPECT_TRUE(
      allClose(rowIds(ones({5, 2})), arange(5, kFloat32).unsqueeze(1).expand({5, 2}), 0, 0));

  // A shape that fits the bucket only: state keeps one shape, so rows cannot be stored in it.
  Tensor last = zeros({8, 2});
  auto keep = compile([&](const Tensor& x) { last.copy_(x * 2.0); }, opts);
  EXPECT_TRUE(failsWith(
      [&] {
        keep(ones({5, 2}));
      },
      {"traces with 8 rows but not with 16", "copy_"}));
}

} // namespace
} // namespace weft::test
