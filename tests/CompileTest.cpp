// Tracing and compile(): traced graphs round-trip through text, compiled code equals eager, whole
// train steps update real parameters, recompilation follows the signature, errors are clear.
#include "OpSamples.h"
#include "TestUtil.h"

#include "weft/ir/Graph.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/Executable.h"
#include "weft/runtime/View.h"

#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <set>
#include <unistd.h>

namespace weft::test {
namespace {

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

/// Every compiled graph must verify and print back exactly through the parser.
::testing::AssertionResult roundTrips(const CompiledFunction& cf) {
  std::string text = cf.graph_text();
  auto parsed = ir::parseGraph(text);
  if (!parsed) return ::testing::AssertionFailure() << parsed.diagnostic().message << "\n" << text;
  if (!ir::verify(parsed.value()).empty())
    return ::testing::AssertionFailure() << ir::verify(parsed.value())[0].message;
  // The kernels print as comments, which the parser skips: fusing the parsed graph again must
  // find the same ones, with the matmuls that led kernels when compiled leading them again (which
  // do was measured per shape; the text does not say).
  std::set<int64_t> leaders;
  for (size_t at = text.find("nodes(%"); at != std::string::npos; at = text.find("nodes(%", at + 1))
    leaders.insert(std::stoll(text.substr(at + 7)));
  auto led = [&](const ir::Graph& g, const std::vector<const ir::Node*>& matmuls) {
    std::vector<bool> r;
    for (const ir::Node* n : matmuls)
      r.push_back(leaders.count(n - g.nodes().data()) > 0);
    return r;
  };
  if (!passes::createFuse(led)->run(parsed.value()))
    return ::testing::AssertionFailure() << "fuse failed";
  if (ir::printGraph(parsed.value()) != text)
    return ::testing::AssertionFailure() << "printed differently after parsing:\n" << text;
  return ::testing::AssertionSuccess();
}

TEST(Trace, GraphVerifiesAndRoundTripsThroughText) {
  Tensor w = randn({3, 4}, kFloat32, Generator(1));
  TraceResult r = trace(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{(in[0].matmul(w) + 1.0).relu().softmax(1).sum()};
      },
      {zeros({2, 3})});
  EXPECT_TRUE(ir::verify(*r.graph).empty());
  ASSERT_EQ(r.state.size(), 1u);
  EXPECT_TRUE(r.state[0].is_same(w)); // the parameter became a state input
  std::string text = ir::printGraph(*r.graph);
  auto parsed = ir::parseGraph(text);
  ASSERT_TRUE(static_cast<bool>(parsed)) << parsed.diagnostic().message;
  EXPECT_EQ(ir::printGraph(parsed.value()), text);
  EXPECT_NE(text.find("CompileTest.cpp"), std::string::npos)
      << "nodes carry the user's source line:\n"
      << text;
}

TEST(Trace, ReadingAValueInsideATraceIsAClearError) {
  int itemLine = 0;
  auto step = compile([&](const Tensor& x) {
    itemLine = __LINE__ + 1;
    return x * x.sum().item<float>();
  });
  try {
    step(ones({2}));
    FAIL();
  } catch (const ValueError& e) {
    std::string what = e.what();
    EXPECT_NE(
        what.find("item: cannot read the value of a tensor inside a traced or compiled function"),
        std::string::npos)
        << what;
    EXPECT_NE(what.find("CompileTest.cpp:" + std::to_string(itemLine)), std::string::npos) << what;
  }
}

class CompiledOp : public ::testing::TestWithParam<int> {};

/// Every primitive compiled (traced, optimized, lowered, interpreted) equals eager exactly, in
/// every dtype: the same kernels run on the same values. Where eager rejects a dtype, so does
/// compile(). (Random ops: float32, checked for their distribution.)
TEST_P(CompiledOp, EqualsEager) {
  auto op = static_cast<OpCode>(GetParam());
  const bool random = opInfo(op).kind == OpKind::Random;
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt32, kInt64, kUInt8}) {
    if (random && dt != kFloat32) continue;
    for (const OpSample& s : samplesFor(op)) {
      SCOPED_TRACE(s.label + " " + std::string(dtypeName(dt)));
      std::vector<Tensor> in;
      for (const Tensor& t : s.inputs) // integers: the samples scaled, so they are not all 0 or 1
        in.push_back(!t.is_floating_point() ? t : isFloating(dt) ? t.to(dt) : (t * 7.0).to(dt));
      auto f = [&](const std::vector<Tensor>& args) {
        return std::vector<Tensor>{dispatch(op, s.prepared(args), s.attrs)};
      };
      CompiledFunction cf{CompileOptions()};
      Tensor eager;
      try {
        eager = f(in)[0];
      } catch (const Error&) {
        EXPECT_THROW(cf.call(in, f), Error);
        continue;
      }
      std::vector<Tensor> out = cf.call(in, f);
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(roundTrips(cf));
      ASSERT_EQ(out[0].dtype(), eager.dtype());
      if (random) { // drawn at the next counter: same distribution, new numbers
        EXPECT_TRUE(s.check(out[0]));
        continue;
      }
      std::vector<double> a = vals(out[0]), b = vals(eager);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        if (std::isnan(a[k]) && std::isnan(b[k])) continue;
        ASSERT_EQ(a[k], b[k]) << "element " << k;
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(AllOps, CompiledOp, ::testing::Range(0, kNumOps),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(opName(static_cast<OpCode>(i.param)));
                         });

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
        in.push_back(!t.is_floating_point() ? t : integral ? (t * 7.0).to(dt) : t.to(dt));
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
      // Generated code computes every dtype, and every op but integer pow, fmod and floor_divide.
      const bool fusible =
          !((op == OpCode::Pow || op == OpCode::Fmod || op == OpCode::FloorDivide) &&
            !eager[0].is_floating_point());
      if (fusible) {
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

/// A two-layer MLP with Adam written in tensor ops, run as one eager or compiled train step.
struct MlpTrainer {
  Tensor w1, b1, w2, b2;
  std::vector<Tensor> m, v;
  Tensor t = zeros({});
  explicit MlpTrainer(uint64_t seed) {
    Generator g(seed);
    w1 = (randn({8, 16}, kFloat32, g) * 0.3).requires_grad_();
    b1 = zeros({16}).requires_grad_();
    w2 = (randn({16, 3}, kFloat32, g) * 0.3).requires_grad_();
    b2 = zeros({3}).requires_grad_();
    for (const Tensor& p : params()) {
      m.push_back(zeros_like(p));
      v.push_back(zeros_like(p));
    }
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor step(const Tensor& x, const Tensor& y) {
    Tensor h = gelu(x.matmul(w1) + b1);
    Tensor loss = -(h.matmul(w2) + b2).log_softmax(1).gather(1, y.unsqueeze(1)).mean();
    loss.backward();
    NoGradGuard guard;
    t.add_(1);
    Tensor c1 = 1.0 - pow(full({}, 0.9), t), c2 = 1.0 - pow(full({}, 0.999), t);
    std::vector<Tensor> ps = params();
    for (size_t i = 0; i < ps.size(); ++i) {
      Tensor g = ps[i].grad();
      m[i].mul_(0.9).add_(g, 0.1);
      v[i].mul_(0.999).add_(g * g, 0.001);
      ps[i].sub_((m[i] / c1) / ((v[i] / c2).sqrt() + 1e-8) * 0.01);
      ps[i].set_grad({}); // zero_grad(set_to_none=true)
    }
    return loss;
  }
};

/// An independent check of a compiled program's memory plan: each planned buffer lies inside the
/// arena, and two planned buffers alive at the same step never share bytes, except an output
/// written where an input read for the last time by that step was (same offset, same size).
::testing::AssertionResult arenaIsSound(const CompiledFunction& cf) {
  const Plan& plan = cf.executable()->plan;
  const auto n = static_cast<size_t>(plan.numSlots);
  if (plan.arenaOffset.size() != n) return ::testing::AssertionFailure() << "no memory plan";
  std::vector<int64_t> def(n, -1), last(n, -1), bytes(n, 0);
  std::vector<int32_t> base(n);
  std::iota(base.begin(), base.end(), 0);
  auto write = [&](int32_t s, int64_t at, DType t, const Shape& shape) {
    def[static_cast<size_t>(s)] = last[static_cast<size_t>(s)] = at;
    bytes[static_cast<size_t>(s)] = numel(shape) * static_cast<int64_t>(elementSize(t));
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& st = plan.steps[i];
    const auto at = static_cast<int64_t>(i);
    for (int32_t s : st.inputs)
      last[static_cast<size_t>(base[static_cast<size_t>(s)])] =
          std::max(last[static_cast<size_t>(base[static_cast<size_t>(s)])], at);
    if (st.kernel >= 0)
      for (size_t k = 0; k < st.kernelOutputs.size(); ++k)
        write(st.kernelOutputs[k], at, st.kernelTypes[k].first, st.kernelTypes[k].second);
    else if (isViewOp(st.op))
      base[static_cast<size_t>(st.output)] = base[static_cast<size_t>(st.inputs[0])];
    else
      write(st.output, at, st.dtype, st.shape);
  }
  for (const auto& [index, slot] : plan.stateUpdates)
    last[static_cast<size_t>(base[static_cast<size_t>(slot)])] =
        static_cast<int64_t>(plan.steps.size());
  std::vector<size_t> planned;
  int64_t total = 0;
  for (size_t s = 0; s < n; ++s)
    if (plan.arenaOffset[s] >= 0) {
      planned.push_back(s);
      total += bytes[s];
      if (plan.arenaOffset[s] + bytes[s] > plan.arenaBytes)
        return ::testing::AssertionFailure() << "slot " << s << " ends past the arena";
    }
  for (size_t a : planned)
    for (size_t b : planned) {
      if (a >= b || def[a] > last[b] || def[b] > last[a]) continue; // not alive together
      int64_t oa = plan.arenaOffset[a], ob = plan.arenaOffset[b];
      if (oa + bytes[a] <= ob || ob + bytes[b] <= oa) continue; // apart
      bool handOff = oa == ob && bytes[a] == bytes[b] && (def[b] == last[a] || def[a] == last[b]);
      if (!handOff)
        return ::testing::AssertionFailure() << "slots " << a << " and " << b << " overlap";
    }
  if (cf.planned_bytes() != plan.arenaBytes)
    return ::testing::AssertionFailure() << "planned_bytes() is not the arena's size";
  if (planned.empty() || plan.arenaBytes >= total)
    return ::testing::AssertionFailure()
           << "no buffer shares memory (" << plan.arenaBytes << " of " << total << " bytes)";
  return ::testing::AssertionSuccess();
}

TEST(Compile, MlpAdamTrainStepMatchesEagerFor100Steps) {
  MlpTrainer eager(3), compiled(3);
  auto step = compile([&](const Tensor& x, const Tensor& y) { return compiled.step(x, y); });
  Generator data(4);
  for (int i = 0; i < 100; ++i) {
    Tensor x = randn({32, 8}, kFloat32, data), y = randint(0, 3, {32}, kInt64, data);
    float le = eager.step(x, y).item<float>();
    float lc = step(x, y).item<float>();
    ASSERT_NEAR(lc, le, 1e-6) << "step " << i;
  }
  EXPECT_EQ(step.compiled().num_compiled(), 1u);
  EXPECT_TRUE(roundTrips(step.compiled()));
  EXPECT_TRUE(arenaIsSound(step.compiled()));
  // Same kernels, same order: the parameters agree to float rounding (1e-6 absolute).
  for (size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(allClose(vals(compiled.params()[i]), vals(eager.params()[i]), 0, 1e-6))
        << "param " << i;
  EXPECT_TRUE(allClose(vals(compiled.m[0]), vals(eager.m[0]), 0, 1e-6));
  EXPECT_FALSE(compiled.w1.grad().defined()); // set to none by the compiled step, as eagerly
  EXPECT_EQ(compiled.t.item<float>(), 100.0f);
}

TEST(Compile, GradientsAccumulateIntoRealLeaves) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  auto f = compile([&](const Tensor& x) {
    Tensor loss = (w * x).sum();
    loss.backward();
    return loss;
  });
  f(tensor({3.0, 4.0}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{3, 4}));
  Tensor g = w.grad();
  f(tensor({1.0, 1.0}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{4, 5})); // accumulated, in the same tensor
  EXPECT_TRUE(w.grad().is_same(g));
}

TEST(Compile, OutputsAreDifferentiableOutsideTheCompiledFunction) {
  // Compile the model only and keep the loss, backward and optimizer eager (torch.compile's most
  // common use): eager autograd runs the compiled backward graph.
  Generator g(21);
  Tensor w1 = (randn({4, 6}, kFloat64, g) * 0.5).requires_grad_(),
         b1 = zeros({6}, kFloat64).requires_grad_(),
         w2 = (randn({6, 2}, kFloat64, g) * 0.5).requires_grad_();
  auto model = [&](const Tensor& x) {
    Tensor h = (x.matmul(w1) + b1).tanh();
    return std::vector<Tensor>{h.matmul(w2), h.sum({1}), h.argmax(1)};
  };
  Tensor x = randn({5, 4}, kFloat64, g), y = randn({5, 2}, kFloat64, g);
  auto lossOf = [&](const std::vector<Tensor>& out) {
    return (out[0] - y).pow(2).mean() + out[1].sin().sum() * 0.1;
  };
  std::vector<std::vector<double>> want;
  Tensor xe = x.clone().requires_grad_();
  lossOf(model(xe)).backward();
  for (Tensor p : {w1, b1, w2}) {
    want.push_back(vals(p.grad()));
    p.set_grad({});
  }
  auto compiled = compile([&](const Tensor& a) { return model(a); });
  Tensor xc = x.clone().requires_grad_();
  std::vector<Tensor> out = compiled(xc);
  EXPECT_TRUE(out[0].requires_grad());
  EXPECT_FALSE(out[2].requires_grad()); // argmax has no gradient
  EXPECT_EQ(out[0].grad_fn()->name(), "CompiledFunctionBackward");
  lossOf(out).backward();
  std::vector<Tensor> ps{w1, b1, w2};
  // Same rules, same kernels; float64: 1e-12.
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(allClose(vals(ps[i].grad()), want[i], 1e-12, 1e-12)) << "parameter " << i;
  EXPECT_TRUE(allClose(xc.grad(), xe.grad(), 1e-12, 1e-12));
  // Only one output used: the other's gradient counts as zeros.
  for (Tensor p : ps)
    p.set_grad({});
  compiled(x)[1].sum().backward();
  EXPECT_TRUE(w1.grad().defined());
  EXPECT_FALSE(w2.grad().defined() && w2.grad().abs().sum().item<double>() != 0.0);

  // Under NoGradGuard the outputs need no backward: a separate executable without one.
  {
    NoGradGuard ng;
    EXPECT_FALSE(compiled(x)[0].requires_grad());
  }
  EXPECT_EQ(compiled.compiled().num_compiled(), 3u); // x requiring grad, x not, no grad mode

  // What backward reads is checked like eager autograd's saved tensors.
  Tensor again = compiled(x)[0].sum();
  {
    NoGradGuard ng;
    w2.mul_(2.0);
  }
  EXPECT_THROW(again.backward(), Error);
  Tensor twice = compiled(x)[0].sum();
  twice.backward();
  EXPECT_THROW(twice.backward(), Error); // saved values freed, as eagerly
  Tensor nested = compiled(xc)[0].sum();
  EXPECT_THROW(autograd::grad({nested}, {xc}, {}, std::nullopt, true), Error); // create_graph
}

TEST(Compile, GradientPenaltyInsideACompiledFunction) {
  Tensor w = tensor({0.5, -1.0}).requires_grad_();
  auto penalty = [&](const Tensor& x) {
    Tensor out = (w * x * x).sum();
    auto gx = autograd::grad({out}, {x}, {}, std::nullopt, true);
    return (gx[0] * gx[0]).sum();
  };
  Tensor xe = tensor({1.0, 2.0}).requires_grad_();
  Tensor pe = penalty(xe);
  pe.backward();
  std::vector<double> eagerGrad = vals(w.grad());
  w.set_grad({});
  auto f = compile([&](const Tensor& x) {
    Tensor p = penalty(x);
    p.backward();
    return p;
  });
  Tensor pc = f(tensor({1.0, 2.0}).requires_grad_());
  EXPECT_TRUE(roundTrips(f.compiled()));
  EXPECT_FLOAT_EQ(pc.item<float>(), pe.item<float>());
  EXPECT_TRUE(allClose(vals(w.grad()), eagerGrad, 1e-6, 1e-6));
}

TEST(Compile, TransformerBlockAndCnnGradientsMatchEager) {
  Generator g(9);
  int64_t d = 8, heads = 2;
  Tensor wq = (randn({d, d}, kFloat64, g) * 0.3).requires_grad_(),
         wk = (randn({d, d}, kFloat64, g) * 0.3).requires_grad_();
  Tensor wv = (randn({d, d}, kFloat64, g) * 0.3).requires_grad_(),
         w1 = (randn({d, 2 * d}, kFloat64, g) * 0.3).requires_grad_();
  Tensor w2 = (randn({2 * d, d}, kFloat64, g) * 0.3).requires_grad_(),
         gamma = ones({d}, kFloat64).requires_grad_();
  Tensor k = (randn({3, 2, 3, 3}, kFloat64, g) * 0.3).requires_grad_();
  std::vector<Tensor> ps{wq, wk, wv, w1, w2, gamma, k};
  auto layerNorm = [&](const Tensor& x) {
    Tensor mu = x.mean({-1}, true);
    Tensor var = (x - mu).pow(2).mean({-1}, true);
    return (x - mu) / (var + 1e-5).sqrt() * gamma;
  };
  auto loss = [&](const Tensor& x, const Tensor& img) {
    int64_t b = x.size(0), t = x.size(1);
    auto split = [&](const Tensor& y) {
      return y.reshape({b, t, heads, d / heads}).transpose(1, 2);
    };
    Tensor h = layerNorm(x);
    Tensor q = split(h.matmul(wq)), kk = split(h.matmul(wk)), v = split(h.matmul(wv));
    Tensor att =
        (q.matmul(kk.transpose(-1, -2)) / std::sqrt(static_cast<double>(d / heads))).softmax(-1);
    Tensor y = x + att.matmul(v).transpose(1, 2).reshape({b, t, d});
    y = y + gelu(layerNorm(y).matmul(w1)).matmul(w2);
    Tensor c = max_pool2d(conv2d(img, k, {}, {1}, {1}).tanh(), {2});
    return y.pow(2).mean() + c.sum() * 0.1;
  };
  Tensor x = randn({2, 5, d}, kFloat64, g), img = randn({2, 2, 6, 6}, kFloat64, g);
  loss(x, img).backward();
  std::vector<std::vector<double>> eagerGrads;
  for (Tensor& p : ps) {
    eagerGrads.push_back(vals(p.grad()));
    p.set_grad({});
  }
  auto step = compile([&](const Tensor& a, const Tensor& b) {
    Tensor l = loss(a, b);
    l.backward();
    return l;
  });
  step(x, img);
  EXPECT_TRUE(roundTrips(step.compiled()));
  EXPECT_TRUE(arenaIsSound(step.compiled()));
  for (size_t i = 0; i < ps.size(); ++i)
    EXPECT_TRUE(allClose(vals(ps[i].grad()), eagerGrads[i], 1e-10, 1e-12)) << "parameter " << i;
}

/// relu's backward reads its output only through a mask: the hoist pass computes the mask in the
/// forward, once the output's last forward reader (the pool) is done, so a compiled train step
/// keeps a bool per element instead of the float across the rest of the forward. Its planned
/// arena is smaller than the same step's without the pass (WEFT_SKIP_PASSES=hoist), and the
/// gradients are the same bits (the pass only reorders).
TEST(Compile, HoistKeepsReluMasksInsteadOfActivations) {
  Generator g(5);
  Tensor k1 = (randn({8, 1, 3, 3}, kFloat32, g) * 0.3).requires_grad_();
  Tensor k2 = (randn({8, 8, 3, 3}, kFloat32, g) * 0.1).requires_grad_();
  Tensor img = randn({4, 1, 16, 16}, kFloat32, g);
  auto run = [&] {
    k1.set_grad({});
    k2.set_grad({});
    auto step = compile([&](const Tensor& x) {
      Tensor a = max_pool2d(conv2d(x, k1, {}, {1}, {1}).relu(), {2});
      Tensor b = max_pool2d(conv2d(a, k2, {}, {1}, {1}).relu(), {2});
      Tensor l = b.pow(2).sum();
      l.backward();
      return l;
    });
    step(img);
    return std::make_pair(step.compiled().planned_bytes(), vals(k1.grad()));
  };
  auto [with, gradsWith] = run();
  ::setenv("WEFT_SKIP_PASSES", "hoist", 1);
  auto [without, gradsWithout] = run();
  ::unsetenv("WEFT_SKIP_PASSES");
  EXPECT_LT(with, without);
  EXPECT_EQ(gradsWith, gradsWithout);
}

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

/// A cross-entropy's backward places each row's gradient by comparing positions with the target
/// inside the kernel that reads it: no [rows, classes] buffer of zeros is filled and scattered
/// into. The gradient is checked against softmax - one_hot computed in double (1e-6: float32
/// softmax).
TEST(Compile, CrossEntropyBackwardFillsNoOneHotBuffer) {
  Generator g(9);
  const int64_t rows = 64, classes = 1000;
  Tensor w = randn({rows, classes}, kFloat32, g).requires_grad_();
  Tensor target = randint(0, classes, {rows}, kInt64, g);
  auto step = compile([&](const Tensor& t) {
    Tensor loss = -w.log_softmax(1).gather(1, t.unsqueeze(1)).mean();
    loss.backward();
    return loss;
  });
  step(target);
  std::vector<double> logits = vals(w), grad = vals(w.grad()), expected(grad.size());
  std::vector<double> labels = vals(target);
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = &logits[static_cast<size_t>(r * classes)];
    double mx = *std::max_element(row, row + classes), sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(row[c] - mx);
    for (int64_t c = 0; c < classes; ++c)
      expected[static_cast<size_t>(r * classes + c)] =
          (std::exp(row[c] - mx) / sum - (c == static_cast<int64_t>(labels[r]) ? 1.0 : 0.0)) /
          static_cast<double>(rows);
  }
  EXPECT_TRUE(allClose(grad, expected, 1e-6, 1e-9));
  for (const PlanStep& st : step.compiled().executable()->plan.steps) {
    EXPECT_NE(st.op, OpCode::ScatterAdd);
    EXPECT_FALSE(st.op == OpCode::Full && st.shape == (Shape{rows, classes}));
  }
}

/// gather's gradient with one index per row counts a negative index from the end, as gather does,
/// eagerly and compiled.
TEST(Compile, GatherGradientCountsNegativeIndicesFromTheEnd) {
  Tensor x = randn({3, 5}, kFloat32, Generator(10)).requires_grad_();
  Tensor index = from_vector<int64_t>({-1, 2, -5}, {3, 1});
  Tensor weight = from_vector<float>({1, 2, 3}, {3, 1});
  auto loss = [&](const Tensor& i) { return (x.gather(1, i) * weight).sum(); };
  const std::vector<double> expected{0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 0, 0};
  loss(index).backward();
  EXPECT_EQ(vals(x.grad()), expected);
  x.set_grad({});
  auto step = compile([&](const Tensor& i) {
    Tensor l = loss(i);
    l.backward();
    return l;
  });
  step(index);
  EXPECT_EQ(vals(x.grad()), expected);
}

/// An attention's head merge (matmul, transpose, reshape) compiles to a matmul that writes its
/// output in the merged layout: the transpose and reshape are views, not copies. Rows stay rows
/// (a @ v) or become columns (a product transposed into [b, t, h, d]); BLAS computes the same
/// products, only stored elsewhere (the transposed one as B^T A^T, which another OpenBLAS
/// kernel might sum in another order: relative 1e-6), forward and backward, and the saved
/// executable keeps the layout.
TEST(Compile, HeadMergeWritesTheMatmulInPlaceOfACopy) {
  Generator g(8);
  Tensor att = randn({2, 4, 8, 8}, kFloat32, g).requires_grad_();
  Tensor v = randn({2, 4, 8, 16}, kFloat32, g).requires_grad_();
  Tensor k = randn({2, 4, 16, 8}, kFloat32, g).requires_grad_();
  auto f = [&](const Tensor& w) {
    Tensor merged = att.matmul(v).transpose(1, 2).reshape({2, 8, 64});
    Tensor columns = k.matmul(att).permute({0, 3, 1, 2}).reshape({16, 64});
    return (merged.reshape({16, 64}) * w + columns).tanh().sum();
  };
  Tensor w = randn({16, 64}, kFloat32, g);
  Tensor eager = f(w);
  eager.backward();
  std::vector<std::vector<double>> grads{vals(att.grad()), vals(v.grad()), vals(k.grad())};
  for (Tensor t : {att, v, k})
    t.set_grad({});
  auto step = compile([&](const Tensor& x) {
    Tensor l = f(x);
    l.backward();
    return l;
  });
  Tensor compiled = step(w);
  EXPECT_TRUE(allClose(vals(compiled), vals(eager), 1e-6, 1e-7));
  EXPECT_TRUE(allClose(vals(att.grad()), grads[0], 1e-6, 1e-7));
  EXPECT_TRUE(allClose(vals(v.grad()), grads[1], 1e-6, 1e-7));
  EXPECT_TRUE(allClose(vals(k.grad()), grads[2], 1e-6, 1e-7));
  EXPECT_TRUE(roundTrips(step.compiled()));
  auto laidOut = [](const Plan& plan) {
    int n = 0;
    for (const PlanStep& st : plan.steps)
      n += st.op == OpCode::MatMul && !st.outputStrides.empty() ? 1 : 0;
    return n;
  };
  std::shared_ptr<const Executable> exe = step.compiled().executable();
  ASSERT_NE(exe, nullptr);
  EXPECT_GE(laidOut(exe->plan), 2);
  const std::vector<uint8_t> bytes = exe->save();
  Executable loaded = Executable::load(bytes);
  EXPECT_EQ(laidOut(loaded.plan), laidOut(exe->plan)); // the layouts are saved
  EXPECT_EQ(loaded.save(), bytes);
  EXPECT_TRUE(isDenseLayout({2, 3, 4}, {12, 1, 3}));
  EXPECT_TRUE(isDenseLayout({2, 1, 4}, {4, 99, 1}));  // a dim of one element: any stride
  EXPECT_FALSE(isDenseLayout({2, 3, 4}, {12, 4, 2})); // overlapping
  EXPECT_FALSE(isDenseLayout({2, 3, 4}, {24, 8, 1})); // gaps
  EXPECT_FALSE(isDenseLayout({2, 3}, {3}));           // not one stride per dim
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
/// float32 rounding (the GEMMs sum in another order than OpenBLAS: 1e-5 relative), with fewer
/// matmuls left to the interpreter than WEFT_GEMM=blas leaves, and a sound memory plan.
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
    EXPECT_TRUE(arenaIsSound(step.compiled())) << gemm;
    return interpreterMatmuls(step.compiled());
  };
  const int generated = run("generated"), blas = run("blas");
  // The first layer's forward GEMM (bias, GELU) and the hidden gradient's (g @ w2, GELU's
  // backward) lead kernels; the weight gradients (g.t() @ h) read a transposed A and stay.
  EXPECT_LE(generated, blas - 2);
}

/// By default the choice is measured once per GEMM shape and remembered in the kernel cache's
/// `choices`: two compilations of a linear layer with a tanh (in two compile() objects) leave one
/// entry, and the result equals eager's within float32 rounding whichever way it went.
TEST(Compile, GemmChoiceIsMeasuredOncePerShape) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("weft-choice-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ::setenv("WEFT_CACHE_DIR", dir.c_str(), 1);
  ::unsetenv("WEFT_GEMM");
  Generator g(12);
  Tensor w = randn({40, 24}, kFloat32, g), b = randn({40}, kFloat32, g);
  Tensor x = randn({33, 24}, kFloat32, g);
  auto f = [&](const Tensor& in) { return (in.matmul(w.t()) + b).tanh(); };
  Tensor eager = f(x);
  for (int i = 0; i < 2; ++i) {
    auto compiled = compile(f);
    EXPECT_TRUE(allClose(vals(compiled(x)), vals(eager), 1e-5, 1e-6));
  }
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir / "choices"))
    entries += e.path().extension() == ".wc" ? 1 : 0;
  ::unsetenv("WEFT_CACHE_DIR");
  fs::remove_all(dir);
  EXPECT_EQ(entries, 1u);
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

/// Rounds in forward, passes the gradient straight through in backward (scaled, to tell it apart).
struct StraightThrough : autograd::Function<StraightThrough> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x, double scale) {
    ctx->saved_data["scale"] = scale;
    Tensor y = x.round();
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(autograd::AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor y = ctx->get_saved_variables()[0]; // saved outputs work inside traces too
    return {g[0] * std::any_cast<double>(ctx->saved_data["scale"]) + y * 0.0};
  }
};

TEST(Compile, CustomFunctionsTraceWithTheirOwnBackward) {
  Tensor w = tensor({0.4, 1.6, -2.2}).requires_grad_();
  auto loss = [&](const Tensor& x) { return (StraightThrough::apply(w * x, 3.0) * x).sum(); };
  Tensor x = tensor({1.0, 2.0, 3.0});
  Tensor le = loss(x);
  le.backward();
  std::vector<double> eagerGrad = vals(w.grad()); // 3 * x * x: the round's own gradient would be 0
  EXPECT_EQ(eagerGrad, (std::vector<double>{3, 12, 27}));
  w.set_grad({});
  auto step = compile([&](const Tensor& a) {
    Tensor l = loss(a);
    l.backward();
    return l;
  });
  EXPECT_EQ(step(x).item<float>(), le.item<float>());
  EXPECT_EQ(vals(w.grad()), eagerGrad);
  EXPECT_TRUE(roundTrips(step.compiled()));
}

TEST(Compile, WritesThroughViewsReachTheirBaseAsEagerly) {
  using indexing::Slice;
  auto f = [](const Tensor& a) {
    Tensor out = zeros({2, 4});
    Tensor left = out.narrow(1, 0, 2), all = out.view({8});
    left.copy_(a);                          // through a view
    out.index({Slice(), 3}).fill_(7.0);     // through an indexing view
    Tensor before = all * 1.0;              // a view made before the writes sees them
    out.t().index({2}).add_(left.sum({1})); // a view of a view (column 2 via the transpose)
    return std::vector<Tensor>{out, before, left * 1.0, all.sum()};
  };
  Tensor a = tensor({1.0, 2.0, 3.0, 4.0}).reshape({2, 2}).to(kFloat32);
  auto c = compile(f);
  std::vector<Tensor> want = f(a), got = c(a);
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(allClose(got[i], want[i], 0, 0)) << "output " << i;

  // A real tensor written through a view (a cache updated one row per call), and a real view made
  // outside the function that reads the base after the function wrote it.
  Tensor cache = zeros({3, 2});
  Tensor firstRow = cache.narrow(0, 0, 1);
  auto put = compile([&](const Tensor& row) {
    cache.narrow(0, 1, 1).copy_(row);
    cache.mul_(2.0);
    firstRow.add_(1.0);    // a real view written: the base takes it
    return firstRow * 1.0; // and reads see it
  });
  Tensor r = put(tensor({1.0, 2.0}).reshape({1, 2}).to(kFloat32));
  EXPECT_EQ(vals(cache), (std::vector<double>{1, 1, 2, 4, 0, 0}));
  EXPECT_EQ(vals(r), (std::vector<double>{1, 1}));

  // Gradients flow through a write into a view (eager refuses this without CopySlices).
  Tensor w = tensor({0.5, -1.5}).to(kFloat64).requires_grad_();
  auto loss = compile([&]() {
    Tensor buf = zeros({4}, kFloat64);
    buf.narrow(0, 1, 2).copy_(w * 2.0);
    Tensor l = (buf * buf).sum();
    l.backward();
    return l;
  });
  loss();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{4.0, -12.0})); // d/dw sum((2w)^2) = 8w

  // Writing through an expanded view would write one element twice: an error, as in PyTorch.
  auto twice = compile([](const Tensor& x) {
    Tensor e = x.expand({3, 2});
    e.add_(1.0);
    return e;
  });
  try {
    twice(ones({1, 2}));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than one element"), std::string::npos) << e.what();
  }
}

TEST(Compile, RandomOpsDrawFreshNumbersEachCallLikeEager) {
  auto dropout = [](const Tensor& x, Generator gen) {
    return x * bernoulli(full_like(x, 0.5), gen) * 2.0;
  };
  Generator eagerGen(77), compiledGen(77);
  auto f = compile([&](const Tensor& x) { return dropout(x, compiledGen); });
  Tensor x = ones({1000});
  for (int i = 0; i < 3; ++i) {
    Tensor e = dropout(x, eagerGen), c = f(x);
    EXPECT_EQ(vals(c), vals(e)) << "call " << i; // the same counter-based draws
  }
}

TEST(Compile, RecompilesOncePerNewShapeAndLogsWhy) {
  setenv("WEFT_LOG_RECOMPILES", "1", 1);
  auto f = compile([](const Tensor& x) { return x.exp().sum(); });
  ::testing::internal::CaptureStderr();
  f(ones({4, 3}));
  f(ones({4, 3}));
  f(ones({8, 3}));
  f(ones({8, 3}));
  f(ones({8, 3}, kFloat64));
  std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("WEFT_LOG_RECOMPILES");
  EXPECT_EQ(f.compiled().num_compiled(), 3u);
  EXPECT_NE(log.find("recompiling (compilation 2): input 0 shape [4, 3] -> [8, 3]"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("recompiling (compilation 3): input 0 dtype float32 -> float64"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("compilation 4"), std::string::npos) << log;
}

TEST(Compile, SpecializingOnValuesGuardsOnTheExactValuesRead) {
  auto f = compile([](const Tensor& x) { return x.sum().item<float>() > 0 ? x * 2 : -x; },
                   CompileOptions().specialize_on_values());
  EXPECT_EQ(vals(f(tensor({1.0, 2.0}))), (std::vector<double>{2, 4}));
  EXPECT_EQ(vals(f(tensor({-1.0, -2.0}))),
            (std::vector<double>{1, 2})); // the sum changed: a new version
  EXPECT_EQ(vals(f(tensor({2.0, 1.0}))),
            (std::vector<double>{4, 2})); // sum 3 again: the first version
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
  EXPECT_EQ(vals(f(tensor({2.0, 2.0}))),
            (std::vector<double>{4, 4})); // sum 4: guards are exact values
  EXPECT_EQ(f.compiled().num_compiled(), 3u);
}

TEST(Compile, ValuesReadAfterStateWritesAreTheWrittenOnes) {
  Tensor calls = zeros({});
  auto f = compile(
      [&](const Tensor& x) {
        calls.add_(1); // written before the read: the read sees the new value, as eager would
        return x * calls.item<float>();
      },
      CompileOptions().specialize_on_values().recompile_limit(10));
  for (int i = 1; i <= 3; ++i)
    EXPECT_EQ(vals(f(tensor({1.0}))), (std::vector<double>{static_cast<double>(i)}));
  EXPECT_EQ(calls.item<float>(), 3.0f);
  // A boolean mask's shape depends on its values: specialized like any other read.
  auto masked = compile([](const Tensor& x) { return x.index({x > 0}).sum(); },
                        CompileOptions().specialize_on_values());
  EXPECT_EQ(masked(tensor({1.0, -2.0, 3.0})).item<float>(), 4.0f);
  EXPECT_EQ(masked(tensor({-1.0, 2.0, -3.0})).item<float>(), 2.0f);
  // Without specialization, reading even a real tensor inside the function is an error.
  auto g = compile([&](const Tensor& x) { return x * calls.item<float>(); });
  EXPECT_THROW(g(tensor({1.0})), ValueError);
}

TEST(Compile, RecompileLimitErrorsOrFallsBackToEager) {
  auto strict = compile([](const Tensor& x) { return x * 2; }, CompileOptions().recompile_limit(1));
  strict(ones({2}));
  EXPECT_THROW(strict(ones({3})), ValueError);
  auto lenient =
      compile([](const Tensor& x) { return x * 2; },
              CompileOptions().recompile_limit(1).on_recompile_limit(RecompileLimitAction::Eager));
  lenient(ones({2}));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(vals(lenient(ones({3}))), (std::vector<double>{2, 2, 2}));
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("running this function eagerly"), std::string::npos) << log;
  EXPECT_EQ(lenient.compiled().num_compiled(), 1u);
}

TEST(Compile, CompiledGraphIsOptimized) {
  Tensor w = ones({4});
  auto f = compile([&](const Tensor& x) {
    Tensor unused = x.exp();              // dead
    return (x * w).sum() + (x * w).sum(); // the product is computed once
  });
  f(ones({4}));
  std::string text = f.compiled().graph_text();
  EXPECT_EQ(text.find("exp("), std::string::npos) << text;
  size_t first = text.find("mul("), second = text.find("mul(", first + 1);
  EXPECT_NE(first, std::string::npos);
  EXPECT_EQ(second, std::string::npos) << text;
}

} // namespace
} // namespace weft::test
