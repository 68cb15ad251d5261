// compile() gives what eager gives where tensors alias: outputs that are (views of) arguments or
// captured tensors, arguments that share memory with captured tensors the function writes, and
// captured tensors whose requires_grad changes between calls. The cases the issue names first,
// then a generated matrix comparing compiled with eager value by value and alias by alias.
#include "CompileTestUtil.h"

#include <functional>
#include <map>

namespace weft::test {
namespace {

Tensor f32(std::initializer_list<double> v) {
  return tensor(v).to(kFloat32);
}

TEST(CompileAliasing, FreezingAParameterBetweenCallsTracesAgain) {
  // SGD over captured a and b; b is frozen after the first call, unfrozen after the second.
  Tensor x = f32({1, 2});
  auto run = [&](bool compiled) {
    Tensor a = f32({1, 1}).requires_grad_(), b = f32({1, 1}).requires_grad_();
    auto step = [&]() {
      Tensor loss = (x * a + x * x * b).sum();
      loss.backward();
      NoGradGuard guard;
      for (Tensor* p : {&a, &b})
        if (p->grad().defined()) {
          p->sub_(p->grad() * 0.1);
          p->grad().zero_();
        }
      return loss;
    };
    std::vector<std::vector<double>> seen;
    auto c = compile(step);
    auto call = [&] { compiled ? c() : step(); };
    call();
    b.requires_grad_(false);
    call();
    seen.push_back(vals(b));
    b.requires_grad_(true);
    call();
    seen.push_back(vals(a));
    seen.push_back(vals(b));
    return std::make_pair(seen, compiled ? c.compiled().num_compiled() : 0);
  };
  auto [eager, none] = run(false);
  auto [compiled, n] = run(true);
  // b stays as after the first step (float32: within an ulp of the decimal values).
  EXPECT_TRUE(allClose(eager[0], {0.9, 0.6}, 0, 1e-7));
  for (size_t i = 0; i < eager.size(); ++i)
    EXPECT_TRUE(allClose(compiled[i], eager[i], 0, 1e-6)) << "check " << i;
  // Each call differs from the ones before: b frozen, then every .grad defined and b unfrozen.
  EXPECT_EQ(n, 3u);
}

TEST(CompileAliasing, AParameterUnfrozenAfterTracingGetsItsGradient) {
  Tensor w = f32({1, 2, 3});
  auto f = compile([&](const Tensor& x) { return (x * w).sum(); });
  Tensor x = f32({1, 1, 1});
  EXPECT_FALSE(f(x).requires_grad());
  w.requires_grad_(true);
  Tensor loss = f(x);
  ASSERT_TRUE(loss.requires_grad());
  loss.backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{1, 1, 1}));
  // Frozen again: the loss no longer requires grad, and backward() raises as it does eagerly.
  w.requires_grad_(false);
  Tensor frozen = f(x);
  EXPECT_FALSE(frozen.requires_grad());
  EXPECT_THROW(frozen.backward(), Error);
  // backward() inside the function over frozen parameters only raises too, as eagerly.
  auto inside = compile([&](const Tensor& x) {
    Tensor l = (x * w).sum();
    l.backward();
    return l;
  });
  EXPECT_THROW(inside(x), Error);
}

/// Each function returns a value eager computes freshly; compiled, the simplifier may reduce it to
/// the input itself. The result must not change when the input is written afterwards.
TEST(CompileAliasing, AnOutputTheSimplifierReducesToAnInputIsStillItsOwnTensor) {
  std::map<std::string, std::function<Tensor(const Tensor&)>> fns = {
      {"clone", [](const Tensor& x) { return x.clone(); }},
      {"x * 1", [](const Tensor& x) { return x * 1; }},
      {"x + 0", [](const Tensor& x) { return x + 0; }},
      {"x - 0", [](const Tensor& x) { return x - 0; }},
      {"x / 1", [](const Tensor& x) { return x / 1; }},
      {"-(-x)", [](const Tensor& x) { return -(-x); }},
      {"contiguous().clone()", [](const Tensor& x) { return x.contiguous().clone(); }},
  };
  for (const auto& [name, fn] : fns) {
    auto c = compile(fn);
    Tensor x = f32({1, 2, 3});
    Tensor y = c(x);
    x.add_(10);
    EXPECT_EQ(vals(y), (std::vector<double>{1, 2, 3})) << name;
    EXPECT_FALSE(y.is_alias_of(x)) << name;
  }
  // A clone of a captured tensor that an optimizer later updates.
  Tensor w = f32({1, 2});
  auto snapshot = compile([&]() { return w.clone(); });
  Tensor before = snapshot();
  w.sub_(f32({1, 1}));
  EXPECT_EQ(vals(before), (std::vector<double>{1, 2}));
  // Two outputs eager makes apart stay apart though the simplifier makes them one value.
  auto two = compile([](const Tensor& x) {
    Tensor y = x * 2;
    return std::vector<Tensor>{y, y.clone()};
  });
  std::vector<Tensor> ys = two(f32({1, 2}));
  ys[0].add_(100);
  EXPECT_EQ(vals(ys[1]), (std::vector<double>{2, 4}));
}

TEST(CompileAliasing, AnOutputThatIsAnInputIsThatTensor) {
  // A captured tensor written and returned: eager returns the tensor itself.
  Tensor s = f32({1, 2});
  auto bump = compile([&]() {
    s.add_(1);
    return s;
  });
  Tensor r = bump();
  EXPECT_TRUE(r.is_same(s));
  EXPECT_EQ(vals(s), (std::vector<double>{2, 3}));
  // An argument written and returned, and views of arguments and captured tensors.
  auto views = compile([&](Tensor x) {
    x.mul_(2);
    return std::vector<Tensor>{x, x.view({2, 1}), s.select(0, 1), x.t()};
  });
  Tensor x = f32({1, 2});
  std::vector<Tensor> out = views(x);
  EXPECT_TRUE(out[0].is_same(x));
  EXPECT_TRUE(out[1].is_alias_of(x));
  EXPECT_TRUE(out[2].is_alias_of(s));
  x.add_(1);
  s.add_(1);
  EXPECT_EQ(vals(out[1]), (std::vector<double>{3, 5}));
  EXPECT_EQ(vals(out[2]), (std::vector<double>{4}));
  EXPECT_EQ(vals(out[3]), (std::vector<double>{3, 5}));
}

TEST(CompileAliasing, AnArgumentSharingMemoryWithAWrittenCapturedTensorSeesTheWrite) {
  Tensor w = arange(6, kFloat32).reshape({2, 3});
  auto f = compile([&](const Tensor& x) {
    w.add_(100);
    return x * 2;
  });
  NoGradGuard guard;
  EXPECT_EQ(vals(f(w.select(0, 1))), (std::vector<double>{206, 208, 210}));
  EXPECT_EQ(vals(f(zeros({3}))), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(vals(f(w.select(0, 0))), (std::vector<double>{600, 602, 604})); // after 3 writes
  // An argument written in place that another argument views: the other sees the write.
  auto g = compile([](Tensor a, const Tensor& b) {
    a.add_(1);
    return b * 1.0;
  });
  Tensor t = zeros({4});
  EXPECT_EQ(vals(g(t, t.narrow(0, 1, 2))), (std::vector<double>{1, 1}));
  EXPECT_EQ(vals(t), (std::vector<double>{1, 1, 1, 1}));
}

// ---- The generated matrix ----

/// The tensors a function captures (each world its own, so eager and compiled runs start alike).
struct World {
  Tensor w = arange(6, kFloat32).reshape({2, 3}) * 0.5 + 1.0;
  Tensor s = f32({3, -1, 2});
};
using Body = std::function<std::vector<Tensor>(World&, Tensor)>;
using Arg = std::function<Tensor(World&)>;

/// Functions over one argument x of shape [3] and the captured w [2, 3] and s [3]: outputs fresh,
/// views, inputs themselves and identities the simplifier removes; writes to x, to w, s and their
/// views.
const std::map<std::string, Body>& bodies() {
  using V = std::vector<Tensor>;
  static const std::map<std::string, Body> b = {
      {"fresh", [](World& c, Tensor x) { return V{x * 2.0 + c.w.sum({0})}; }},
      {"clone", [](World&, Tensor x) { return V{x.clone()}; }},
      {"identities",
       [](World&, Tensor x) {
         return V{x * 1, -(-x), x + 0, x / 1};
       }},
      {"argument", [](World&, Tensor x) { return V{x}; }},
      {"argument views",
       [](World&, Tensor x) {
         return V{x.narrow(0, 1, 2), x.view({3, 1})};
       }},
      {"captured",
       [](World& c, Tensor) {
         return V{c.s, c.w};
       }},
      {"captured views",
       [](World& c, Tensor) {
         return V{c.w.select(0, 1), c.w.t()};
       }},
      {"captured clone",
       [](World& c, Tensor x) {
         return V{c.w.clone(), x + c.s};
       }},
      {"write captured",
       [](World& c, Tensor x) {
         c.s.add_(1.0);
         return V{c.s, x * c.s};
       }},
      {"write captured view",
       [](World& c, Tensor x) {
         c.w.select(0, 0).mul_(2.0);
         return V{c.w, x.sum() * 1.0};
       }},
      {"write captured, read argument",
       [](World& c, Tensor x) {
         c.w.add_(100.0);
         return V{x * 2.0};
       }},
      {"write argument",
       [](World&, Tensor x) {
         x.add_(1.0);
         return V{x, x * 1, x.narrow(0, 0, 2)};
       }},
      {"write argument, read captured",
       [](World& c, Tensor x) {
         x.mul_(3.0);
         return V{c.w.sum({1}), c.s * 1.0};
       }},
      {"outputs eager makes apart",
       [](World&, Tensor x) {
         Tensor y = x * 2.0;
         return V{y, y.clone(), y.view({1, 3}), y * 1};
       }},
  };
  return b;
}

/// Arguments: a fresh tensor, a strided one, and ones sharing memory with the captured tensors.
const std::map<std::string, Arg>& arguments() {
  static const std::map<std::string, Arg> a = {
      {"fresh",
       [](World&) {
         return f32({0.5, 1.5, 2.5});
       }},
      {"strided",
       [](World&) {
         return arange(6, kFloat32).reshape({3, 2}).select(1, 1);
       }},
      {"row of w", [](World& c) { return c.w.select(0, 1); }},
      {"s itself", [](World& c) { return c.s; }},
  };
  return a;
}

/// Whether `a` and `b` can reach a common element of one storage.
bool sharesMemory(const Tensor& a, const Tensor& b) {
  if (!a.is_alias_of(b) || a.numel() == 0 || b.numel() == 0) return false;
  auto reach = [](const Tensor& t) {
    int64_t lo = t.storage_offset(), hi = lo;
    for (int64_t d = 0; d < t.dim(); ++d)
      (t.stride(d) < 0 ? lo : hi) += (t.size(d) - 1) * t.stride(d);
    return std::pair{lo, hi};
  };
  auto [a0, a1] = reach(a);
  auto [b0, b1] = reach(b);
  return a0 <= b1 && b0 <= a1;
}

/// One call's observable result: error or not, output values and requires_grad, the captured
/// tensors and the argument afterwards, which of all these share memory, and the gradients a
/// backward through the outputs leaves on w and s.
struct Observed {
  bool threw = false;
  std::vector<std::vector<double>> values;
  std::vector<bool> requiresGrad, shares;
  std::vector<double> wGrad, sGrad;
};

Observed observe(const std::function<std::vector<Tensor>(Tensor)>& f, World& c, Tensor x) {
  Observed o;
  std::vector<Tensor> out;
  try {
    out = f(x);
  } catch (const Error&) {
    o.threw = true;
  }
  std::vector<Tensor> all = out;
  for (const Tensor& t : {x, c.w, c.s})
    all.push_back(t);
  for (const Tensor& t : all) {
    o.values.push_back(vals(t));
    o.requiresGrad.push_back(t.requires_grad());
  }
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t j = i + 1; j < all.size(); ++j)
      o.shares.push_back(sharesMemory(all[i], all[j]));
  Tensor loss;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].requires_grad()) {
      Tensor term = (out[i] * (1.0 + static_cast<double>(i))).sum();
      loss = loss.defined() ? loss + term : term;
    }
  if (loss.defined()) loss.backward();
  for (auto [t, g] : {std::pair{c.w, &o.wGrad}, std::pair{c.s, &o.sGrad}})
    if (t.grad().defined()) {
      *g = vals(t.grad());
      t.grad().zero_();
    }
  return o;
}

TEST(CompileAliasing, CompiledMatchesEagerValueByValueAndAliasByAlias) {
  // Which of w and s require grad before each of three calls: never, and toggled between calls.
  const std::vector<std::vector<std::pair<bool, bool>>> gradPatterns = {
      {{false, false}, {false, false}, {false, false}},
      {{true, false}, {false, true}, {true, true}},
  };
  int scenarios = 0;
  for (const auto& [bodyName, body] : bodies())
    for (const auto& [argName, arg] : arguments())
      for (size_t p = 0; p < gradPatterns.size(); ++p) {
        World eagerWorld, compiledWorld;
        auto eagerFn = [&](Tensor x) { return body(eagerWorld, x); };
        auto compiled = compile([&](Tensor x) { return body(compiledWorld, x); });
        for (size_t call = 0; call < 3; ++call) {
          const std::string where = bodyName + " with " + argName + " argument, grad pattern " +
                                    std::to_string(p) + ", call " + std::to_string(call);
          for (World* wd : {&eagerWorld, &compiledWorld}) {
            wd->w.requires_grad_(gradPatterns[p][call].first);
            wd->s.requires_grad_(gradPatterns[p][call].second);
          }
          Observed e = observe(eagerFn, eagerWorld, arg(eagerWorld));
          Observed c =
              observe([&](Tensor x) { return compiled(x); }, compiledWorld, arg(compiledWorld));
          ASSERT_EQ(c.threw, e.threw) << where;
          ASSERT_EQ(c.values.size(), e.values.size()) << where;
          for (size_t i = 0; i < e.values.size(); ++i)
            // float32, the same ops in the same order (generated code rounds as eager): 1e-6.
            EXPECT_TRUE(allClose(c.values[i], e.values[i], 1e-6, 1e-6))
                << where << ", tensor " << i;
          EXPECT_EQ(c.requiresGrad, e.requiresGrad) << where;
          EXPECT_EQ(c.shares, e.shares) << where << ": which tensors share memory";
          EXPECT_TRUE(allClose(c.wGrad, e.wGrad, 1e-6, 1e-6)) << where << ", w.grad";
          EXPECT_TRUE(allClose(c.sGrad, e.sGrad, 1e-6, 1e-6)) << where << ", s.grad";
          ++scenarios;
        }
      }
  EXPECT_EQ(scenarios, static_cast<int>(bodies().size() * arguments().size() * 2 * 3));
}

} // namespace
} // namespace weft::test
