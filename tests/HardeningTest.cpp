// What an adversarial user tried, and what each attempt must now give: a weft::Error with a clear
// message or PyTorch's result, eagerly and inside compile(), never a crash or a silent wrong value.
#include "TestUtil.h"

#include <atomic>
#include <limits>
#include <string>
#include <thread>

namespace weft::test {
namespace {

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

// ---- crashes ----

TEST(Hardening, FreeingALongAutogradGraphNeedsNoDeepStack) {
  // 200,000 recorded ops: freed one node at a time, not by 200,000 nested destructors.
  constexpr int kOps = 200000;
  {
    Tensor y = ones({1}, TensorOptions().requires_grad());
    for (int i = 0; i < kOps; ++i)
      y = y + 0.0;
  } // destroyed without backward
  Tensor x = ones({1}, TensorOptions().requires_grad());
  Tensor y = x;
  for (int i = 0; i < kOps; ++i)
    y = y * 1.0; // saves its inputs: the chain also runs through saved tensors
  y.backward();
  EXPECT_EQ(vals(x.grad()), std::vector<double>{1.0});
}

TEST(Hardening, ShapeArithmeticThatOverflowsIsAnError) {
  constexpr int64_t k32 = int64_t{1} << 32, k62 = int64_t{1} << 62;
  EXPECT_TRUE(has(messageOf([&] { (void)zeros({k32, k32}); }), "zeros"));
  EXPECT_TRUE(has(messageOf([&] { (void)empty({k62, 4}); }), "empty"));
  EXPECT_TRUE(has(messageOf([&] { (void)ones({1}).expand({k62}); }), "expand"));
  EXPECT_TRUE(has(messageOf([&] { (void)ones({1}, kFloat64).expand({k62 / 2}).sum(); }), "expand"));
  // A legal view larger than memory cannot be copied out (4 TiB here).
  EXPECT_TRUE(has(messageOf([&] { (void)ones({1}).expand({int64_t{1} << 40}).to_vector<float>(); }),
                  "to_vector"));
  EXPECT_TRUE(has(messageOf([&] { (void)ones({4}).reshape({-1, k62, k62}); }), "reshape"));
  EXPECT_TRUE(has(messageOf([&] {
                    (void)pad(ones({2}), {std::numeric_limits<int64_t>::max(), 1});
                  }),
                  "pad"));
  EXPECT_TRUE(has(messageOf([&] { (void)full({k32, k32, 0, k32}, 1.0); }), "full"));
  EXPECT_TRUE(
      has(messageOf([&] { (void)linspace(0, 1, int64_t{1000000000000}); }), "out of memory"));
  EXPECT_TRUE(has(messageOf([&] { (void)arange(0.0, 1e300, 1e-300); }), "too many"));
  EXPECT_TRUE(has(messageOf([&] {
                    (void)conv1d(ones({1, 1, 4}), ones({1, 1, 1}), {}, 1,
                                 std::numeric_limits<int64_t>::max() / 2);
                  }),
                  "too large"));
  // Empty shapes with huge sizes are fine: they hold nothing.
  EXPECT_EQ(zeros({0, k32}).numel(), 0);
}

TEST(Hardening, SlicesWithExtremeBoundsHavePythonLengths) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(),
                    hi = std::numeric_limits<int64_t>::max();
  Tensor x = arange(10);
  EXPECT_EQ(vals(x.slice(0, lo, hi, hi)), std::vector<double>{0});
  EXPECT_EQ(x.slice(0, lo, hi, 3).numel(), 4); // [0, 3, 6, 9]
  EXPECT_EQ(x.slice(0, hi, lo).numel(), 0);
  EXPECT_EQ(x.slice(0, -3, hi, 2).numel(), 2); // [7, 9]
  EXPECT_EQ(x.slice(0, lo, -9).numel(), 1);
}

TEST(Hardening, ZeroDimTensorsTakeDimensionZeroAndMinusOneEagerlyAndCompiled) {
  // Every op along a dimension accepts 0 and -1 on a 0-d tensor and returns a 0-d tensor, as
  // PyTorch does; other dimensions are IndexErrors.
  using Op = std::function<Tensor(const Tensor&, int64_t)>;
  std::vector<std::pair<const char*, Op>> ops = {
      {"sum", [](const Tensor& x, int64_t d) { return x.sum({d}); }},
      {"sum keepdim", [](const Tensor& x, int64_t d) { return x.sum({d}, true); }},
      {"mean", [](const Tensor& x, int64_t d) { return x.mean({d}); }},
      {"prod", [](const Tensor& x, int64_t d) { return x.prod(d); }},
      {"amax", [](const Tensor& x, int64_t d) { return x.amax({d}); }},
      {"amin", [](const Tensor& x, int64_t d) { return x.amin({d}, true); }},
      {"max(dim)", [](const Tensor& x, int64_t d) { return x.max(d).first; }},
      {"min(dim) index", [](const Tensor& x, int64_t d) { return x.min(d).second; }},
      {"argmax", [](const Tensor& x, int64_t d) { return x.argmax(d); }},
      {"argmin", [](const Tensor& x, int64_t d) { return x.argmin(d, true); }},
      {"softmax", [](const Tensor& x, int64_t d) { return x.softmax(d); }},
      {"log_softmax", [](const Tensor& x, int64_t d) { return x.log_softmax(d); }},
      {"logsumexp", [](const Tensor& x, int64_t d) { return x.logsumexp({d}); }},
      {"var", [](const Tensor& x, int64_t d) { return x.var({d}, 0); }},
      {"cumsum", [](const Tensor& x, int64_t d) { return x.cumsum(d); }},
      {"cumprod", [](const Tensor& x, int64_t d) { return x.cumprod(d); }},
      {"logcumsumexp", [](const Tensor& x, int64_t d) { return x.logcumsumexp(d); }},
      {"cummax", [](const Tensor& x, int64_t d) { return x.cummax(d).first; }},
      {"cummin index", [](const Tensor& x, int64_t d) { return x.cummin(d).second; }},
      {"sort", [](const Tensor& x, int64_t d) { return x.sort(d).first; }},
      {"argsort", [](const Tensor& x, int64_t d) { return x.argsort(d); }},
      {"topk", [](const Tensor& x, int64_t d) { return x.topk(1, d).first; }},
      {"flip", [](const Tensor& x, int64_t d) { return x.flip({d}); }},
      {"transpose", [](const Tensor& x, int64_t d) { return x.transpose(d, 0); }},
      {"squeeze", [](const Tensor& x, int64_t d) { return x.squeeze(d); }},
      {"gather", [](const Tensor& x, int64_t d) { return x.gather(d, zeros({}, kInt64)); }},
      {"scatter",
       [](const Tensor& x, int64_t d) { return x.scatter(d, zeros({}, kInt64), x * 3); }},
      {"scatter_add",
       [](const Tensor& x, int64_t d) { return x.scatter_add(d, zeros({}, kInt64), x); }},
      {"index_select",
       [](const Tensor& x, int64_t d) { return x.index_select(d, zeros({1}, kInt64)); }},
      {"index_add",
       [](const Tensor& x, int64_t d) { return x.index_add(d, zeros({1}, kInt64), x); }},
  };
  Tensor x = scalar_tensor(2.5, kFloat64);
  for (const auto& [name, op] : ops) {
    SCOPED_TRACE(name);
    for (int64_t d : {0, -1}) {
      Tensor eager = op(x, d);
      EXPECT_EQ(eager.dim(), 0);
      auto compiled = compile([&](const Tensor& t) { return op(t, d); });
      Tensor c = compiled(x);
      EXPECT_EQ(c.dim(), 0);
      EXPECT_TRUE(allClose(c, eager, 0, 0));
    }
    EXPECT_THROW((void)op(x, 1), IndexError);
    EXPECT_THROW((void)op(x, -2), IndexError);
  }
  EXPECT_EQ(x.flatten(0, -1).sizes(), Shape{1}); // as torch.flatten: a scalar becomes 1-d
  EXPECT_THROW((void)x.flatten(0, 1), IndexError);
  // Sizes and strides of a 0-d tensor have no dimension to name; splitting needs one.
  EXPECT_TRUE(has(messageOf([&] { (void)x.size(0); }), "no dimensions"));
  EXPECT_TRUE(has(messageOf([&] { (void)x.stride(-1); }), "no dimensions"));
  EXPECT_TRUE(has(messageOf([&] { (void)chunk(x, 1); }), "1-dimensional"));
  EXPECT_TRUE(has(messageOf([&] { (void)split(x, 1); }), "1-dimensional"));
  EXPECT_TRUE(has(messageOf([&] { (void)x.unflatten(0, {1}); }), "0-dimensional"));
  EXPECT_THROW((void)x.index_select(0, zeros({2}, kInt64)), IndexError);
}

TEST(Hardening, SelfOverlappingTensorsCannotBeWrittenInPlace) {
  // One rule for every in-place op: an expanded tensor's elements share memory.
  Tensor base = zeros({1});
  Tensor t = base.expand({3});
  for (auto write : std::vector<std::function<void()>>{
           [&] { t.add_(ones({3})); },
           [&] { t.mul_(2.0); },
           [&] { t.fill_(1.0); },
           [&] { t.zero_(); },
           [&] { t.copy_(ones({3})); },
           [&] {
             t.masked_fill_(tensor({true, false, true}), 1.0);
           },
           [&] { t.clamp_(0.5); },
           [&] { t.index_put_({tensor({0})}, 5.0); },
       })
    EXPECT_TRUE(has(messageOf(write), "single memory location"));
  EXPECT_EQ(vals(base), std::vector<double>{0}); // nothing was written
  auto compiled = compile([&](const Tensor& x) {
    Tensor e = x.expand({3});
    e.add_(1.0);
    return e;
  });
  EXPECT_TRUE(has(messageOf([&] { (void)compiled(ones({1})); }), "single memory location"));
}

// ---- wrong values and accepted bad input ----

TEST(Hardening, FactoriesHonourTheirOptions) {
  EXPECT_EQ(arange(6, kFloat32).dtype(), kFloat32);
  EXPECT_EQ(arange(6).dtype(), kInt64);
  Tensor r = arange(3, TensorOptions().dtype(kFloat64).requires_grad());
  EXPECT_EQ(r.dtype(), kFloat64);
  EXPECT_TRUE(r.requires_grad());
  EXPECT_EQ(arange(0, 6, 2, kFloat64).dtype(), kFloat64);
  EXPECT_EQ(arange(0.0, 2.0, 0.5).dtype(), kFloat32);
  // int64 ranges are exact beyond 2^53.
  int64_t big = (int64_t{1} << 60) + 1;
  EXPECT_EQ(arange(big, big + 2).to_vector<int64_t>(), (std::vector<int64_t>{big, big + 1}));
  EXPECT_EQ(full({2}, 3).dtype(), kInt64); // as torch.full infers from the value
  EXPECT_EQ(full({2}, true).dtype(), kBool);
  EXPECT_EQ(full({2}, 3.5).dtype(), kFloat32);
  EXPECT_THROW((void)arange(3, kBool), DTypeError);
  EXPECT_THROW((void)arange(3, TensorOptions().dtype(kInt64).requires_grad()), DTypeError);
  // Fill values must fit the dtype, as in PyTorch.
  EXPECT_TRUE(has(messageOf([&] { (void)full({2}, std::nan(""), kInt64); }), "int64"));
  EXPECT_TRUE(has(messageOf([&] { (void)full({2}, 300, kUInt8); }), "uint8"));
  EXPECT_TRUE(has(messageOf([&] { (void)full({2}, 1e6, kFloat16); }), "float16"));
  EXPECT_TRUE(has(messageOf([&] { (void)zeros({2}, kUInt8).fill_(300); }), "uint8"));
  EXPECT_EQ(vals(full({1}, std::numeric_limits<double>::infinity(), kFloat16)),
            std::vector<double>{std::numeric_limits<double>::infinity()});
  int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(zeros({1}, kInt64).fill_(max).item<int64_t>(), max);
}

TEST(Hardening, IntegerAddWithAFloatAlphaIsAnError) {
  EXPECT_TRUE(has(messageOf([&] { (void)arange(3).add(arange(3), 0.5); }), "alpha"));
  EXPECT_TRUE(has(messageOf([&] { (void)arange(3).sub(arange(3), 0.5); }), "alpha"));
  EXPECT_THROW((void)ones({2}).add(ones({2}), true), DTypeError);
  EXPECT_EQ(vals(arange(3).add(arange(3), 2)), (std::vector<double>{0, 3, 6}));
  EXPECT_EQ(vals(arange(3).add(ones({3}), 0.5)), (std::vector<double>{0.5, 1.5, 2.5}));
}

TEST(Hardening, EmptyReductionsGivePyTorchsResults) {
  EXPECT_EQ(zeros({3, 0}).softmax(1).sizes(), (Shape{3, 0}));
  EXPECT_EQ(zeros({3, 0}).log_softmax(1).sizes(), (Shape{3, 0}));
  double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(vals(zeros({2, 0}).logsumexp({1})), (std::vector<double>{-inf, -inf}));
  EXPECT_EQ(vals(zeros({0, 3}).softmax(1)), std::vector<double>{});
  EXPECT_THROW((void)zeros({0}).max(), ValueError); // as torch: no identity
  auto compiled = compile([](const Tensor& x) { return x.logsumexp({1}); });
  EXPECT_EQ(vals(compiled(zeros({2, 0}))), (std::vector<double>{-inf, -inf}));
}

TEST(Hardening, Uint8IndicesAreMasks) {
  Tensor x = arange(3);
  EXPECT_EQ(vals(x.index({tensor({1, 0, 1}).to(kUInt8)})), (std::vector<double>{0, 2}));
  EXPECT_THROW((void)x.index({tensor({1, 0}).to(kUInt8)}), IndexError);
  EXPECT_THROW((void)x.index({tensor({true, false})}), IndexError);
  Tensor y = zeros({3});
  y.index_put_({tensor({0, 1, 1}).to(kUInt8)}, 7.0);
  EXPECT_EQ(vals(y), (std::vector<double>{0, 7, 7}));
}

// ---- autograd: custom functions and hooks ----

struct IntGradient : autograd::Function<IntGradient> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {ones(g[0].sizes(), kInt64)};
  }
};
struct WrongShape : autograd::Function<WrongShape> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor>) {
    return {ones({5})};
  }
};
struct BroadcastGradient : autograd::Function<BroadcastGradient> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor>) {
    return {ones({4, 3}, kFloat64)}; // broadcasts to the input's [3]: summed, converted
  }
};
struct UndefinedOutput : autograd::Function<UndefinedOutput> {
  static Tensor forward(autograd::AutogradContext*, const Tensor&) { return {}; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return g;
  }
};

TEST(Hardening, CustomFunctionsReturningBadGradientsAreNamedErrors) {
  Tensor x = ones({3}, TensorOptions().requires_grad());
  std::string m = messageOf([&] { IntGradient::apply(x).sum().backward(); });
  EXPECT_TRUE(has(m, "IntGradientBackward")) << m;
  EXPECT_TRUE(has(m, "int64")) << m;
  EXPECT_FALSE(x.grad().defined());
  m = messageOf([&] { WrongShape::apply(x).sum().backward(); });
  EXPECT_TRUE(has(m, "WrongShapeBackward")) << m;
  EXPECT_TRUE(has(m, "[5]") && has(m, "[3]")) << m;
  BroadcastGradient::apply(x).sum().backward();
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(BroadcastGradient::apply(x).grad_fn()->name(),
            "weft::test::(anonymous namespace)::BroadcastGradientBackward");
  m = messageOf([&] { (void)UndefinedOutput::apply(x); });
  EXPECT_TRUE(has(m, "UndefinedOutputBackward") && has(m, "undefined")) << m;
}

TEST(Hardening, HooksReturningBadGradientsNameTheHook) {
  Tensor x = ones({2, 3}, TensorOptions().requires_grad());
  const int line = __LINE__ + 1;
  x.register_hook([](const Tensor&) { return ones({3}); });
  std::string m = messageOf([&] { (x * 2).sum().backward(); });
  EXPECT_TRUE(has(m, "HardeningTest.cpp:" + std::to_string(line))) << m;
  EXPECT_TRUE(has(m, "[3]") && has(m, "[2, 3]")) << m;
  Tensor y = ones({2}, TensorOptions().requires_grad());
  Tensor z = y * 2;
  z.register_hook([](const Tensor& g) { return g.to(kFloat64); });
  m = messageOf([&] { z.sum().backward(); });
  EXPECT_TRUE(has(m, "float64") && has(m, "float32")) << m;
}

// ---- compile() and eager agree ----

TEST(Hardening, ACompiledFunctionFollowsAReassignedCapturedTensor) {
  Tensor w = full({3}, 1.0);
  auto f = compile([&](const Tensor& x) { return (x * w).sum(); });
  Tensor x = ones({3});
  EXPECT_EQ(f(x).item<float>(), 3.0f);
  w = full({3}, 10.0); // the old tensor is gone: the function is traced again
  ::testing::internal::CaptureStderr();
  setenv("WEFT_LOG_RECOMPILES", "1", 1);
  EXPECT_EQ(f(x).item<float>(), 30.0f);
  unsetenv("WEFT_LOG_RECOMPILES");
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(log, "captured tensor s0 (float32 [3]) is gone")) << log;
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
  EXPECT_EQ(f(x).item<float>(), 30.0f);
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
  // In-place updates keep the tensor: no retrace.
  w.mul_(2.0);
  EXPECT_EQ(f(x).item<float>(), 60.0f);
  EXPECT_EQ(f.compiled().num_compiled(), 2u);

  // The old tensor may live on elsewhere (a list of parameters): the handle still moved on.
  std::vector<Tensor> params{w};
  auto g = compile([&](const Tensor& t) { return (t * w).sum(); });
  EXPECT_EQ(g(x).item<float>(), 60.0f);
  w = full({3}, 1.0);
  EXPECT_EQ(g(x).item<float>(), 3.0f);
  EXPECT_EQ(g.compiled().num_compiled(), 2u);
  for (int i = 0; i < 5; ++i) // copies made and dropped between calls are no reason to retrace
    (void)g(x * std::vector<Tensor>{w, w}[0].sum());
  EXPECT_EQ(g.compiled().num_compiled(), 2u);

  // Kept autograd graphs and views hold the old tensor too, but not as handles: still seen.
  Tensor v = ones({3}, TensorOptions().requires_grad());
  auto h = compile([&](const Tensor& t) { return (t * v).sum(); });
  Tensor xg = ones({3}, TensorOptions().requires_grad());
  std::vector<Tensor> kept{h(xg)}; // its compiled backward saved v
  Tensor view = v.narrow(0, 0, 2);
  v = full({3}, 2.0, TensorOptions().requires_grad());
  EXPECT_EQ(h(xg).item<float>(), 6.0f);
  EXPECT_EQ(h.compiled().num_compiled(), 2u);
}

TEST(Hardening, ManualSeedInsideACompiledFunctionIsReplayedEveryCall) {
  auto body = [](const Tensor& x) {
    Tensor a = x + rand({4}); // drawn at the generator's running counter
    manual_seed(123);
    return a + randn({4}) * 10; // drawn right after the reseed: the same numbers every call
  };
  auto f = compile(body);
  manual_seed(7);
  std::vector<std::vector<double>> eager;
  for (int i = 0; i < 3; ++i)
    eager.push_back(vals(body(zeros({4}))));
  manual_seed(7);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(vals(f(zeros({4}))), eager[static_cast<size_t>(i)]) << "call " << i;
  EXPECT_EQ(default_generator().seed(), 123u);
}

TEST(Hardening, InPlaceOnALeafRequiringGradIsAnErrorInsideCompileToo) {
  Tensor w = ones({2}, TensorOptions().requires_grad());
  auto f = compile([&](const Tensor& x) {
    w.add_(x);
    return w.sum();
  });
  EXPECT_TRUE(has(messageOf([&] { (void)f(ones({2})); }), "leaf Variable"));
  auto g = compile([&](const Tensor& x) {
    NoGradGuard noGrad; // as an optimizer step: allowed
    w.add_(x);
    return w.sum();
  });
  EXPECT_EQ(g(ones({2})).item<float>(), 4.0f);
}

TEST(Hardening, CompileErrorsNameTheCallersLine) {
  auto f = compile([](const Tensor& x) { return x * 2; }, CompileOptions().recompile_limit(1));
  (void)f(ones({2}));
  const int line = __LINE__ + 1;
  std::string m = messageOf([&] { (void)f(ones({3})); });
  EXPECT_TRUE(has(m, "HardeningTest.cpp:" + std::to_string(line))) << m;
  EXPECT_TRUE(has(m, "input 0 shape [2] -> [3]")) << m;
  m = messageOf([&] { (void)f(Tensor()); });
  EXPECT_TRUE(has(m, "HardeningTest.cpp:") && has(m, "undefined")) << m;
  const int optionsLine = __LINE__ + 2;
  m = messageOf([] {
    (void)compile([](const Tensor& x) { return x; }, CompileOptions().buckets({4, 2}));
  });
  EXPECT_TRUE(has(m, "HardeningTest.cpp:" + std::to_string(optionsLine))) << m;
  auto undefinedOut = compile([](const Tensor&) { return Tensor(); });
  const int outLine = __LINE__ + 1;
  m = messageOf([&] { (void)undefinedOut(ones({2})); });
  EXPECT_TRUE(has(m, "undefined tensor")) << m;
  EXPECT_TRUE(has(m, "HardeningTest.cpp:" + std::to_string(outLine))) << m;
  auto nested = compile([&](const Tensor& x) { return f(x); });
  m = messageOf([&] { (void)nested(ones({2})); });
  EXPECT_TRUE(has(m, "inside a traced function")) << m;
}

TEST(Hardening, TheRecompileLogNamesTheOneThingThatChanged) {
  setenv("WEFT_LOG_RECOMPILES", "1", 1);
  Tensor w = ones({2}, TensorOptions().requires_grad());
  auto step = compile([&](const Tensor& x) { return (x * w).sum(); });
  ::testing::internal::CaptureStderr();
  (void)step(ones({2}));
  {
    NoGradGuard noGrad;
    (void)step(ones({2}));
  }
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(log, "grad mode changed (traced with grad on, called with it off)")) << log;

  auto train = compile([&](const Tensor& x) {
    (x * w).sum().backward();
    return w.grad();
  });
  ::testing::internal::CaptureStderr();
  (void)train(ones({2})); // w has no .grad yet
  (void)train(ones({2})); // now it has one: backward accumulates
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(log, "captured tensor s0 (float32 [2]) has a .grad")) << log;

  Tensor scale = full({}, 2.0);
  auto read = compile([&](const Tensor& x) { return x * scale.item<double>(); },
                      CompileOptions().specialize_on_values());
  ::testing::internal::CaptureStderr();
  (void)read(ones({2}));
  scale.fill_(3.0);
  EXPECT_EQ(vals(read(ones({2}))), (std::vector<double>{3, 3}));
  log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(has(log, "the value read by item() at ")) << log;
  EXPECT_TRUE(has(log, "HardeningTest.cpp")) << log;
  unsetenv("WEFT_LOG_RECOMPILES");
}

} // namespace
} // namespace weft::test

namespace weft::test {
namespace {

// ---- found in review ----

struct SavesAConstant : autograd::Function<SavesAConstant> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    Tensor scale = tensor({2.0f}); // a real tensor made while the function is traced
    ctx->save_for_backward({scale});
    return x * scale;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    return {g[0] * ctx->get_saved_variables()[0]};
  }
};

TEST(Hardening, TensorsAFunctionMakesAreItsOwnOnEveryCall) {
  // Made while traced (arange, tensor, eye, a custom function's saved constant): constants the
  // executable owns, made anew by every eager call, so in-place writes do not carry over.
  auto body = [](const Tensor& x) {
    Tensor i = arange(3).to(kFloat32);
    i.mul_(2);
    return x + i + eye(3).sum({1}) + SavesAConstant::apply(x);
  };
  auto f = compile(body);
  for (int call = 0; call < 3; ++call)
    EXPECT_EQ(vals(f(ones({3}))), vals(body(ones({3})))) << "call " << call;
  EXPECT_EQ(f.compiled().num_compiled(), 1u);
}

struct ConstantInBackward : autograd::Function<ConstantInBackward> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x) { return x * 2; }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[0] * tensor({2.0f})}; // a real tensor made while the compiled backward is traced
  }
};

TEST(Hardening, TensorsMadeWhileTracingTheCompiledBackwardAreItsOwn) {
  auto f = compile([](const Tensor& x) { return ConstantInBackward::apply(x).sum(); });
  for (int call = 0; call < 2; ++call) {
    Tensor x = ones({3}, TensorOptions().requires_grad());
    f(x).backward(); // the backward graph was traced after the function returned
    EXPECT_EQ(vals(x.grad()), (std::vector<double>{2, 2, 2})) << "call " << call;
  }
  EXPECT_EQ(f.compiled().num_compiled(), 1u);
}

TEST(Hardening, ACompiledStepReadsGradientsThroughTheirLeaves) {
  // Backward eager, the update compiled; the gradient is a new tensor after every set_grad({}).
  Tensor w = ones({3}, TensorOptions().requires_grad());
  auto update = compile([&](const Tensor& lr) {
    NoGradGuard noGrad;
    w.sub_(w.grad() * lr);
    return w.sum();
  });
  Tensor expected = ones({3});
  for (int step = 0; step < 4; ++step) {
    (w * w).sum().backward();
    expected = expected - expected * 2 * 0.1;
    (void)update(full({}, 0.1));
    w.set_grad({});
    EXPECT_TRUE(allClose(w.detach(), expected, 1e-6, 0)) << "step " << step;
  }
  EXPECT_EQ(update.compiled().num_compiled(), 1u);
}

TEST(Hardening, GeneratorsMadeInsideACompiledFunctionStartAnewEachCall) {
  auto body = [](const Tensor& x) {
    Generator g(42);
    Tensor a = x + randn({4}, {}, g);
    g.set_offset(7);
    return a + rand({4}, {}, g);
  };
  auto f = compile(body);
  for (int call = 0; call < 3; ++call)
    EXPECT_EQ(vals(f(zeros({4}))), vals(body(zeros({4})))) << "call " << call;
}

TEST(Hardening, ReadingARandomValueInsideACompiledFunctionIsAnError) {
  auto f = compile([](const Tensor& x) { return (rand({}) > 0.5).item<bool>() ? x : -x; },
                   CompileOptions().specialize_on_values());
  EXPECT_TRUE(has(messageOf([&] { (void)f(ones({2})); }), "random numbers"));
}

TEST(Hardening, InPlaceWritesToCompiledArgumentsThatCannotReachTheCallerAreErrors) {
  // (An argument written in place that shares memory with another argument runs eagerly:
  // CompileAliasingTest.)
  auto g = compile([](const Tensor& x) {
    Tensor y = x;
    y.add_(1.0);
    return y;
  });
  std::string m = messageOf([&] { (void)g(ones({2}, TensorOptions().requires_grad())); });
  EXPECT_TRUE(has(m, "leaf Variable")) << m; // as eager: the argument is a leaf needing grad
  // A value that requires grad written into an argument: autograd would record the write.
  Tensor w = ones({2}, TensorOptions().requires_grad());
  auto h = compile([&](Tensor x) { return x.add_(w); });
  m = messageOf([&] { (void)h(ones({2})); });
  EXPECT_TRUE(has(m, "requires grad in place into argument 0")) << m;
  auto k = compile([](const Tensor& x) { return x.clone().add_(1.0); }); // a copy is fine
  EXPECT_EQ(vals(k(ones({2}))), (std::vector<double>{2, 2}));
  // An expanded argument written: refused before anything runs (the other argument unchanged).
  auto both = compile([](Tensor x, Tensor y) {
    y.add_(1.0);
    x.add_(1.0);
    return x.sum();
  });
  Tensor y = zeros({3});
  m = messageOf([&] { (void)both(ones({1}).expand({3}), y); });
  EXPECT_TRUE(has(m, "argument 0 is written in place by the function, but more than one")) << m;
  EXPECT_EQ(vals(y), (std::vector<double>{0, 0, 0}));
  // A non-leaf argument that requires grad: eager would record the write; compiled code cannot.
  auto relu = compile([](Tensor h) { return h.relu_(); });
  Tensor leaf = ones({2}, TensorOptions().requires_grad());
  m = messageOf([&] { (void)relu(leaf * 2.0); });
  EXPECT_TRUE(has(m, "argument 0 of the compiled function requires grad")) << m;
}

TEST(Hardening, FunctionsReadingValuesRunEagerlyWithinTheLimit) {
  // Traced once per new signature, up to the recompile limit; past it, eagerly without a trace.
  int calls = 0;
  auto f = compile(
      [&](const Tensor& x) {
        ++calls;
        return x * x.sum().item<float>();
      },
      CompileOptions().recompile_limit(3));
  for (int64_t n = 1; n <= 10; ++n)
    EXPECT_EQ(vals(f(ones({n}))), std::vector<double>(static_cast<size_t>(n), double(n)));
  EXPECT_EQ(calls, 13); // 3 traces and 10 eager calls
  EXPECT_EQ(f.compiled().num_compiled(), 0u);
  // A function that made and kept a tensor (lazily created state) before its read: the failed
  // trace left that tensor without a value, so the read stays an error rather than running an
  // eager call on it.
  Tensor state;
  auto lazy = compile([&](const Tensor& x) {
    if (!state.defined()) state = zeros({2});
    state.add_(x);
    return x * state.sum().item<float>();
  });
  std::string m = messageOf([&] { (void)lazy(ones({2})); });
  EXPECT_TRUE(has(m, "item")) << m;
}

TEST(Hardening, ALosingConcurrentBackwardChangesNothing) {
  // b's branch saves nothing: a thread that loses the race must not add to b.grad before failing.
  for (int round = 0; round < 20; ++round) {
    Tensor x = ones({3}), w = ones({3}, TensorOptions().requires_grad()),
           b = ones({3}, TensorOptions().requires_grad());
    Tensor loss = (x * w).tanh().sum() + b.sum();
    std::atomic<int> ok{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&] {
        try {
          loss.backward();
          ++ok;
        } catch (const ValueError&) {
        }
      });
    for (auto& th : threads)
      th.join();
    ASSERT_EQ(ok.load(), 1);
    ASSERT_EQ(vals(b.grad()), (std::vector<double>{1, 1, 1})) << "round " << round;
  }
}

TEST(Hardening, InPlaceOnAViewOfALeafRequiringGradIsAnError) {
  Tensor w = ones({2}, TensorOptions().requires_grad());
  EXPECT_TRUE(has(messageOf([&] { w.narrow(0, 0, 1).fill_(3.0); }), "view of a leaf"));
  EXPECT_TRUE(has(messageOf([&] { w.select(0, 1).mul_(2.0); }), "view of a leaf"));
  EXPECT_EQ(vals(w.detach()), (std::vector<double>{1, 1}));
  // A detached view carries no history: writing it writes the leaf, as in PyTorch.
  w.detach().narrow(0, 1, 1).fill_(5.0);
  w.detach().copy_(w.detach() * 2.0);
  EXPECT_EQ(vals(w.detach()), (std::vector<double>{2, 10}));
  w.detach().fill_(1.0);
  NoGradGuard noGrad; // as an optimizer writes parameters
  w.narrow(0, 0, 1).fill_(3.0);
  EXPECT_EQ(vals(w.detach()), (std::vector<double>{3, 1}));
}

TEST(Hardening, BackwardInsideACompiledFunctionReachesArgumentsLikeEager) {
  // Gradients with respect to inputs (adversarial examples, saliency): backward inside the
  // compiled function accumulates into the caller's tensors' .grad, as eager backward does.
  Tensor w = from_vector(std::vector<double>{1, -2, 3}).requires_grad_();
  auto body = [&](const Tensor& x) {
    Tensor loss = (x * w).tanh().sum();
    loss.backward();
    return loss;
  };
  Tensor xe = from_vector(std::vector<double>{0.5, 0.1, -0.3}, {1, 3}).requires_grad_();
  Tensor xc = xe.detach().clone().requires_grad_();
  auto f = compile(body, CompileOptions().dynamic_dim(0));
  for (int call = 0; call < 2; ++call) { // the second call accumulates
    (void)body(xe);
    (void)f(xc);
    EXPECT_TRUE(allClose(xc.grad(), xe.grad(), 1e-12, 1e-12)) << "call " << call;
  }
  EXPECT_EQ(xc.grad().sizes(), (Shape{1, 3})); // the bucket's padded rows are cut off
  // w's gradient: one share from each of the four calls, eager and compiled alike.
  Tensor once = autograd::grad({(xe.detach() * w).tanh().sum()}, {w})[0];
  EXPECT_TRUE(allClose(w.grad(), once * 4, 1e-12, 1e-12));
  // An argument with a history passes the gradient on into it, as eager backward does.
  Tensor be = xe.detach().clone().requires_grad_(), bc = be.detach().clone().requires_grad_();
  (void)body(be * 3);
  (void)f(bc * 3);
  EXPECT_TRUE(allClose(bc.grad(), be.grad(), 1e-12, 1e-12));
}

struct IndexGradient : autograd::Function<IndexGradient> {
  static Tensor forward(autograd::AutogradContext*, const Tensor& x, const Tensor& index) {
    return x.index_select(0, index);
  }
  static std::vector<Tensor> backward(autograd::AutogradContext*, std::vector<Tensor> g) {
    return {g[0].sum().expand({3}), zeros({1}, kInt64)}; // a "gradient" for the index: ignored
  }
};

TEST(Hardening, GradientsForInputsThatNeedNoneAreIgnored) {
  Tensor x = ones({3}, TensorOptions().requires_grad());
  IndexGradient::apply(x, tensor({0})).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 1, 1}));
}

TEST(Hardening, GatherOnAScalarTakesItsIndexShape) {
  Tensor s = scalar_tensor(2.0);
  EXPECT_EQ(s.gather(0, tensor({0, 0})).sizes(), Shape{2}); // as torch.gather
  EXPECT_EQ(s.gather(0, zeros({}, kInt64)).sizes(), Shape{});
  EXPECT_EQ(s.topk(0).first.sizes(), Shape{}); // as torch.topk on a scalar
}

TEST(Hardening, IntegerOverflowWrapsAsInPyTorch) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  Tensor t = from_vector(std::vector<int64_t>{lo, hi});
  EXPECT_EQ(t.neg().to_vector<int64_t>(), (std::vector<int64_t>{lo, lo + 1}));
  EXPECT_EQ(t.abs().to_vector<int64_t>(), (std::vector<int64_t>{lo, hi}));
  EXPECT_EQ(from_vector(std::vector<int64_t>{hi, 1}).sum().item<int64_t>(), lo);
  EXPECT_EQ(from_vector(std::vector<int64_t>{hi, 2}).prod().item<int64_t>(), -2);
  EXPECT_EQ(from_vector(std::vector<int64_t>{hi, 1}).cumsum(0).to_vector<int64_t>(),
            (std::vector<int64_t>{hi, lo}));
}

TEST(Hardening, FactoriesAndWindowsNeverOverflowOrTrap) {
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(has(messageOf([&] { (void)arange(0, lo, -1); }), "too many"));
  EXPECT_TRUE(has(messageOf([&] { (void)arange(lo, hi); }), "too many"));
  EXPECT_EQ(arange(hi - 2, hi).to_vector<int64_t>(), (std::vector<int64_t>{hi - 2, hi - 1}));
  // Values out of an integer dtype's range convert as casts do (the minimum), not undefined.
  EXPECT_EQ(linspace(0, 1e20, 3, kInt64).to_vector<int64_t>(), (std::vector<int64_t>{0, lo, lo}));
  Tensor pooled = max_pool2d(ones({1, 1, 4, 4}), {2}, {hi / 2}, {0}, {1}, true);
  EXPECT_EQ(pooled.sizes(), (Shape{1, 1, 1, 1}));
  // More than memory and swap hold is refused up front, whatever the kernel's overcommit policy.
  EXPECT_TRUE(has(messageOf([&] { (void)empty({int64_t{1} << 50}); }), "memory and swap"));
}

} // namespace
} // namespace weft::test
