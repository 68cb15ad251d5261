// Tracing and compile(): traced graphs round-trip through text, compiled code equals eager, whole
// train steps update real parameters, recompilation follows the signature, errors are clear.
#include "CompileTestUtil.h"
#include "OpSamples.h"
#include "TestUtil.h"

#include "weft/runtime/Executable.h"

#include <cstdlib>

namespace weft::test {
namespace {

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
  int itemLine = 0, calls = 0;
  auto body = [&](const Tensor& x) {
    ++calls;
    itemLine = __LINE__ + 1;
    return x * x.sum().item<float>();
  };
  auto step = compile(body, CompileOptions().fullgraph());
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
  // Without fullgraph, a function that reads values (here a shape depending on data too) runs
  // eagerly for that signature: traced once, then called eagerly, nothing compiled.
  auto lenient = compile([&](const Tensor& x) {
    ++calls;
    return x.index({x > 1.0}) * x.sum().item<float>();
  });
  calls = 0;
  Tensor x = tensor({0.5, 2.0, 3.0}).to(kFloat32);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(vals(lenient(x)), (std::vector<double>{11, 16.5}));
  EXPECT_EQ(calls, 4); // one trace, three eager calls
  EXPECT_EQ(lenient.compiled().num_compiled(), 0u);
  EXPECT_EQ(lenient.compiled().graph_text(), "");
}

class CompiledOp : public ::testing::TestWithParam<int> {};

/// Every primitive compiled (traced, optimized, lowered, interpreted) equals eager exactly, in
/// every dtype: the same kernels run on the same values. Where eager rejects a dtype, so does
/// compile(). (Random ops: float32, checked for their distribution.) But softmax and log_softmax
/// along the last dim in float32/float64, which compile() computes in a row kernel (the
/// expand-softmax pass): it sums a row in another order than the eager kernel (other vector lanes)
/// and divides by the sum where eager multiplies by its reciprocal, so they agree within a few
/// units in the last place (relative 2e-6 in float32, 1e-14 in float64, of 1 or the value).
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
      const bool rowKernel =
          (op == OpCode::Softmax || op == OpCode::LogSoftmax) && (dt == kFloat32 || dt == kFloat64);
      const double tol = !rowKernel ? 0.0 : dt == kFloat32 ? 2e-6 : 1e-14;
      for (size_t k = 0; k < a.size(); ++k) {
        if (std::isnan(a[k]) && std::isnan(b[k])) continue;
        if (tol == 0.0 || std::isinf(b[k]))
          ASSERT_EQ(a[k], b[k]) << "element " << k;
        else
          ASSERT_NEAR(a[k], b[k], tol * std::max(1.0, std::abs(b[k]))) << "element " << k;
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(AllOps, CompiledOp, ::testing::Range(0, kNumOps),
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

/// gather's gradient with one index per row (a compare, not a scatter) is the same eagerly and
/// compiled; a negative index is out of bounds in both, as PyTorch's gather has it.
TEST(Compile, GatherGradientOfOneIndexPerRowAndNegativeIndices) {
  Tensor x = randn({3, 5}, kFloat32, Generator(10)).requires_grad_();
  Tensor index = from_vector<int64_t>({4, 2, 0}, {3, 1});
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
  Tensor negative = from_vector<int64_t>({-1, 2, 0}, {3, 1});
  EXPECT_THROW(loss(negative), IndexError);
  EXPECT_THROW(step(negative), IndexError);
}

/// An attention's head merge (matmul, transpose, reshape) compiles to a matmul that writes its
/// output in the merged layout: the transpose and reshape are views, not copies. Rows stay rows
/// (a @ v) or become columns (a product transposed into [b, t, h, d]); BLAS computes the same
/// products, only stored elsewhere (the transposed one as B^T A^T, which another OpenBLAS
/// kernel sums in another order), forward and backward, and the saved executable keeps the
/// layout. The gradients sum 8 to 16 products through tanh' in an order that depends on the
/// CPU's OpenBLAS kernel: relative 1e-5 (measured up to 1e-5 on an AVX-512 EPYC), 1e-6 absolute
/// where terms cancel.
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
  EXPECT_TRUE(allClose(vals(compiled), vals(eager), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(vals(att.grad()), grads[0], 1e-5, 1e-6));
  EXPECT_TRUE(allClose(vals(v.grad()), grads[1], 1e-5, 1e-6));
  EXPECT_TRUE(allClose(vals(k.grad()), grads[2], 1e-5, 1e-6));
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

  // Differentiated outside the compiled function: the output-grads pass traces the user's backward
  // into the program (and, under dynamic_dim, into the probe's too).
  w.set_grad({});
  auto forward = compile(loss);
  forward(x).backward();
  EXPECT_EQ(vals(w.grad()), eagerGrad);
  auto rows = [&](const Tensor& a) { return (StraightThrough::apply(w * a, 3.0) * a).sum(); };
  Tensor xs = tensor({1.0, 2.0, 3.0, -1.0, 0.5, 2.0, 4.0, 1.0, -3.0}).reshape({3, 3});
  w.set_grad({});
  rows(xs).backward();
  std::vector<double> eagerRows = vals(w.grad()); // 3 * sum over rows of x * x
  EXPECT_EQ(eagerRows, (std::vector<double>{3 * 18, 3 * 5.25, 3 * 22}));
  w.set_grad({});
  auto dynamic = compile(rows, CompileOptions().dynamic_dim(0)); // 3 rows padded to 4
  dynamic(xs).backward();
  EXPECT_EQ(vals(w.grad()), eagerRows);
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

TEST(Compile, InPlaceWritesToArgumentsReachTheCallersTensors) {
  // Written whole and through a view; the caller's tensors change on every call as eagerly.
  auto body = [](Tensor x, Tensor y) {
    x.mul_(2.0);
    y.narrow(1, 1, 2).fill_(-1.0);
    return (x + y).sum({1});
  };
  auto f = compile(body);
  Tensor xe = arange(6, kFloat32).reshape({2, 3}), ye = ones({2, 3}).t().contiguous().t();
  Tensor xc = xe.clone(), yc = ye.clone().t().contiguous().t(); // y strided (column-major)
  for (int call = 0; call < 3; ++call) {
    Tensor want = body(xe, ye), got = f(xc, yc);
    EXPECT_EQ(vals(got), vals(want)) << "call " << call;
    EXPECT_EQ(vals(xc), vals(xe)) << "call " << call;
    EXPECT_EQ(vals(yc), vals(ye)) << "call " << call;
  }
  EXPECT_EQ(f.compiled().num_compiled(), 1u);

  // An update step that takes its parameter as an argument, under NoGradGuard as optimizers run.
  auto sgd = compile([](Tensor p, const Tensor& g) {
    p.sub_(g * 0.5);
    return p.sum();
  });
  Tensor p = ones({3}, TensorOptions().requires_grad()), g = tensor({2.0, 4.0, 6.0}).to(kFloat32);
  {
    NoGradGuard guard;
    sgd(p, g);
  }
  EXPECT_EQ(vals(p), (std::vector<double>{0, -1, -2}));
  EXPECT_FALSE(p.grad().defined());

  // The backward of an output reads the argument as the function read it, before the write.
  Tensor w = tensor({1.0, 2.0, 3.0}).to(kFloat32).requires_grad_();
  auto scaled = compile([&](Tensor x) {
    Tensor out = x * w;
    x.mul_(10.0);
    return out;
  });
  Tensor x = tensor({4.0, 5.0, 6.0}).to(kFloat32);
  scaled(x).sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{4, 5, 6}));
  EXPECT_EQ(vals(x), (std::vector<double>{40, 50, 60}));

  // With a dynamic batch, the caller's rows take the new values (the padded rows are cut off).
  auto dyn = compile(
      [](Tensor b) {
        b.add_(1.0);
        return b.sum({0});
      },
      CompileOptions().dynamic_dim(0));
  Tensor b5 = arange(10, kFloat32).reshape({5, 2}), b7 = ones({7, 2});
  EXPECT_EQ(vals(dyn(b5)), (std::vector<double>{25, 30}));
  EXPECT_EQ(vals(b5), vals(arange(10, kFloat32) + 1.0));
  EXPECT_EQ(vals(dyn(b7)), (std::vector<double>{14, 14}));
  EXPECT_EQ(vals(b7), (std::vector<double>(14, 2.0)));
  EXPECT_EQ(dyn.compiled().num_compiled(), 1u); // 5 and 7 rows: one bucket of 8

  // Outputs that share memory with a written argument keep the function's values: a copy taken
  // before the write, another argument copied into before the write, a write of the argument's
  // own transpose.
  auto copies = compile([](Tensor a, Tensor b, Tensor c) {
    Tensor old = a.clone();
    a.add_(1.0);
    b.copy_(c);
    c.add_(10.0);
    a.copy_(a.t().contiguous());
    return std::vector<Tensor>{old, b * 1.0};
  });
  Tensor a = arange(4, kFloat32).reshape({2, 2}), b = zeros({2, 2}), c = ones({2, 2});
  std::vector<Tensor> got = copies(a, b, c);
  EXPECT_EQ(vals(got[0]), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(vals(got[1]), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(vals(a), (std::vector<double>{1, 3, 2, 4}));
  EXPECT_EQ(vals(b), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(vals(c), (std::vector<double>{11, 11, 11, 11}));
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
  // Without specialization, reading even a real tensor inside the function is an error with
  // fullgraph, and runs the function eagerly without.
  auto g = compile([&](const Tensor& x) { return x * calls.item<float>(); },
                   CompileOptions().fullgraph());
  EXPECT_THROW(g(tensor({1.0})), ValueError);
  auto e = compile([&](const Tensor& x) { return x * calls.item<float>(); });
  EXPECT_EQ(vals(e(tensor({1.0}))), (std::vector<double>{3}));
  calls.add_(1);
  EXPECT_EQ(vals(e(tensor({1.0}))), (std::vector<double>{4}));
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
