// nn: modules, state dicts, optimizers and schedules, eagerly and inside compile(); and what
// models hit in compile() (views of captured tensors, state made on a first step, modes).
#include "TestUtil.h"
#include "weft/weft.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace weft;
namespace F = weft::nn::functional;

namespace {

bool sameBits(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>();
}

nn::Sequential smallCnn(bool convBias = true) {
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1).bias(convBias)),
                        nn::BatchNorm2d(4), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
                        nn::Dropout(0.1), nn::Linear(4 * 4 * 4, 3));
}

/// One train step of `m` with `opt`: cross-entropy, backward, step, zero_grad.
std::function<Tensor(const Tensor&, const Tensor&)> trainStep(nn::Sequential& m,
                                                              optim::Optimizer& opt) {
  return [&m, &opt](const Tensor& x, const Tensor& y) {
    Tensor loss = F::cross_entropy(m(x), y);
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
}

/// `f` throws an `E` whose message contains `text`.
template <typename E> void expectThrows(const std::string& text, const std::function<void()>& f) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << text << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

} // namespace

/// PReLU learns its slope: one weight per channel starting at `init`, reached by the gradient of
/// the negative inputs only (PyTorch's rule: d/dw (w * x) = x where x <= 0).
TEST(Nn, PReLULearnsOneSlopePerChannel) {
  nn::PReLU act(nn::PReLUOptions().num_parameters(2).init(0.1));
  ASSERT_EQ(act->parameters().size(), 1u);
  Tensor x = tensor({-1.0f, 2.0f, -3.0f, 4.0f}).reshape({1, 2, 2});
  Tensor y = act(x);
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-0.1f, 2.0f, -3.0f * 0.1f, 4.0f}));
  y.sum().backward();
  EXPECT_EQ(act->weight.grad().to_vector<float>(), (std::vector<float>{-1.0f, -3.0f}));
  EXPECT_THROW(nn::PReLU(nn::PReLUOptions().num_parameters(0)), ValueError);
}

/// Where PyTorch's kernels pass a NaN through (hardshrink, threshold) weft's do too; interpolate
/// picks nearest sources as PyTorch (the same index at the same size, half of it at twice the
/// size, whatever the scale factor); gaussian_nll_loss refuses a var of another shape.
TEST(Nn, ShrinkThresholdNearestAndVarShapesAsPyTorch) {
  namespace F = nn::functional;
  Tensor x = tensor({std::nanf(""), 0.2f, -2.0f});
  std::vector<float> h = F::hardshrink(x).to_vector<float>(),
                     t = F::threshold(x, 0.1, 9.0).to_vector<float>();
  EXPECT_TRUE(std::isnan(h[0]));
  EXPECT_EQ(h[1], 0.0f);
  EXPECT_EQ(h[2], -2.0f);
  EXPECT_TRUE(std::isnan(t[0]));
  EXPECT_EQ(t[1], 0.2f);
  EXPECT_EQ(t[2], 9.0f);
  Tensor row = arange(5, kFloat32).reshape({1, 1, 5});
  EXPECT_EQ(F::interpolate(row, nn::InterpolateOptions().scale_factor({2.1})).to_vector<float>(),
            (std::vector<float>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  EXPECT_EQ(F::interpolate(row, nn::InterpolateOptions().scale_factor({1.1})).to_vector<float>(),
            (std::vector<float>{0, 1, 2, 3, 4}));
  EXPECT_THROW((void)F::interpolate(row, nn::InterpolateOptions().size({int64_t{1} << 50})),
               ValueError);
  EXPECT_THROW((void)F::gaussian_nll_loss(zeros({2, 3}), zeros({2, 3}), ones({1, 3})), ShapeError);
  EXPECT_NO_THROW((void)F::gaussian_nll_loss(zeros({2, 3}), zeros({2, 3}), ones({2, 1})));
}

TEST(Nn, BatchNormCountsRowsPastWhatA16BitFloatHolds) {
  // 64 x 32 x 32 = 65536 values per channel: a float16 count would be inf (and the unbiased
  // variance's correction inf / inf = NaN); the count is float64.
  for (DType t : {kFloat16, kBFloat16}) {
    nn::BatchNorm2d bn(nn::BatchNorm2dOptions(2));
    bn->to(t);
    Tensor x = randn({64, 2, 32, 32}, t, Generator(3));
    (void)bn(x);
    std::vector<double> rv = bn->running_var.to_vector<double>();
    for (double v : rv) // 0.9 * 1 + 0.1 * (about 1): near 1, finite
      EXPECT_NEAR(v, 1.0, 0.05) << dtypeName(t);
    // Means and variances of 16-bit floats sum and divide in float32, as PyTorch's.
    EXPECT_EQ(ones({65536}, t).mean().item<float>(), 1.0f);
    EXPECT_EQ((ones({70000}, t) * 2).var().item<float>(), 0.0f);
  }
}

TEST(Nn, ModulesRegisterNameAndPrintTheirTree) {
  nn::Sequential m = smallCnn();
  std::vector<std::string> names;
  for (auto& [n, t] : m->named_parameters())
    names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "6.weight",
                                             "6.bias"}));
  EXPECT_EQ(m->buffers().size(), 3u); // running_mean, running_var, num_batches_tracked
  EXPECT_EQ(m->named_modules().size(), 8u);
  std::ostringstream os;
  os << *m;
  EXPECT_NE(os.str().find("Sequential(\n  (0): Conv2d(1, 4, kernel_size=[3, 3]"), std::string::npos)
      << os.str();
  EXPECT_NE(os.str().find("(6): Linear(in_features=64, out_features=3, bias=true)"),
            std::string::npos)
      << os.str();
  // PyTorch's default init bounds: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  nn::Linear lin(nn::LinearOptions(100, 50).bias(false));
  EXPECT_FALSE(lin->bias.defined());
  EXPECT_LE(lin->weight.abs().max().item<float>(), 0.1f);
  EXPECT_GT(lin->weight.abs().max().item<float>(), 0.09f);
}

TEST(Nn, StateDictRoundTripsAndStrictLoadingNamesTheKey) {
  nn::Sequential a = smallCnn(), b = smallCnn();
  b->load_state_dict(a->state_dict());
  for (auto& [name, t] : a->state_dict())
    EXPECT_TRUE(sameBits(t, b->state_dict().at(name))) << name;
  nn::StateDict missing = a->state_dict();
  missing.erase("6.bias");
  EXPECT_THROW(
      {
        try {
          b->load_state_dict(missing);
        } catch (const ValueError& e) {
          EXPECT_NE(std::string(e.what()).find("missing key '6.bias'"), std::string::npos);
          throw;
        }
      },
      ValueError);
  nn::StateDict wrong = a->state_dict();
  wrong["6.weight"] = zeros({2, 2});
  EXPECT_THROW(b->load_state_dict(wrong), ShapeError);
  wrong = a->state_dict();
  wrong["extra"] = zeros({1});
  EXPECT_THROW(b->load_state_dict(wrong), ValueError);
  b->load_state_dict(wrong, /*strict=*/false);
}

TEST(Nn, ToDtypeKeepsHandlesAndHooksRun) {
  nn::Linear lin(3, 2);
  Tensor w = lin->weight;
  lin->to(kFloat64);
  EXPECT_EQ(w.dtype(), DType::Float64); // the same tensor, converted in place
  EXPECT_EQ(lin->parameters()[0].dtype(), DType::Float64);
  int forwardCalls = 0, backwardCalls = 0;
  lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const Tensor&) {
    ++forwardCalls;
    return Tensor();
  });
  lin->register_full_backward_hook([&](nn::Module&, const Tensor& g) {
    EXPECT_EQ(g.sizes(), (Shape{4, 2}));
    ++backwardCalls;
  });
  lin(ones({4, 3}, kFloat64)).sum().backward();
  EXPECT_EQ(forwardCalls, 1);
  EXPECT_EQ(backwardCalls, 1);
}

/// A compiled train step (model, cross-entropy, backward, Adam with lazily made state, zero_grad)
/// agrees with the same step run eagerly; the first step compiles twice (it makes the optimizer's
/// state, then reads it), a schedule changing the learning rate never recompiles. The conv has no
/// bias: before BatchNorm, a bias's gradient is zero in exact arithmetic, so what is computed is
/// rounding noise, which Adam divides by its own size into steps of about lr; compiled and eager
/// would then differ by lr wherever their GEMMs sum in another order.
TEST(Nn, CompiledTrainStepMatchesEagerAndSchedulesDoNotRecompile) {
  manual_seed(3);
  nn::Sequential eagerModel = smallCnn(false), compiledModel = smallCnn(false);
  compiledModel->load_state_dict(eagerModel->state_dict());
  optim::Adam eagerOpt(eagerModel->parameters(), optim::AdamOptions(1e-2));
  optim::Adam compiledOpt(compiledModel->parameters(), optim::AdamOptions(1e-2));
  optim::StepLR eagerSchedule(eagerOpt, 2, 0.5), compiledSchedule(compiledOpt, 2, 0.5);
  auto eager = trainStep(eagerModel, eagerOpt);
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(trainStep(compiledModel, compiledOpt));
  Generator g(5);
  for (int i = 0; i < 6; ++i) {
    Tensor x = randn({8, 1, 8, 8}, {}, g), y = randint(0, 3, {8}, kInt64, g);
    Generator before = default_generator();
    uint64_t offset = before.offset();
    Tensor le = eager(x, y);
    default_generator().set_offset(offset); // dropout draws the same numbers in both
    Tensor lc = compiled(x, y);
    // The interpreter runs the same kernels; tolerance for the few reductions whose order differs.
    EXPECT_NEAR(le.item<float>(), lc.item<float>(), 1e-4f) << "step " << i;
    eagerSchedule.step();
    compiledSchedule.step();
  }
  EXPECT_EQ(compiled.compiled().num_compiled(), 2u);
  EXPECT_DOUBLE_EQ(compiledOpt.param_groups()[0].options().get_lr(), 1e-2 * 0.125);
  for (auto& [name, t] : eagerModel->state_dict())
    EXPECT_LT((t.to(kFloat64) - compiledModel->state_dict().at(name).to(kFloat64))
                  .abs()
                  .max()
                  .item<double>(),
              1e-4)
        << name;
}

/// An optimizer's update of every parameter is one horizontal kernel
/// (tests/ir/fuse-horizontal.wir) with a part per parameter shape. Parameters of one shape share
/// the part's loop, and one's new state may be written over another's gradient: every element is
/// read before any is written. AdamW over four layers of the same shape, 20 compiled steps against
/// eager ones.
TEST(Nn, CompiledUpdateOfEveryParameterIsOneKernelAndMatchesEager) {
  manual_seed(4);
  auto mlp = [] {
    return nn::Sequential(nn::Linear(16, 16), nn::Tanh(), nn::Linear(16, 16), nn::Tanh(),
                          nn::Linear(16, 16), nn::Tanh(), nn::Linear(16, 16));
  };
  nn::Sequential eagerModel = mlp(), compiledModel = mlp();
  compiledModel->load_state_dict(eagerModel->state_dict());
  optim::AdamW eagerOpt(eagerModel->parameters(), optim::AdamWOptions(1e-2));
  optim::AdamW compiledOpt(compiledModel->parameters(), optim::AdamWOptions(1e-2));
  auto eager = trainStep(eagerModel, eagerOpt);
  CompiledFn<Tensor(const Tensor&, const Tensor&)> compiled =
      compile(trainStep(compiledModel, compiledOpt));
  Generator g(6);
  for (int i = 0; i < 20; ++i) {
    Tensor x = randn({32, 16}, {}, g), y = randint(0, 16, {32}, kInt64, g);
    // Equal but for float rounding: the cross-entropy's log_softmax is a row kernel summing in
    // another order than the eager one (last bits), which AdamW's division by the gradient's
    // running size can grow, for elements whose gradient is near zero, to 1e-5 over 20 steps.
    EXPECT_NEAR(eager(x, y).item<float>(), compiled(x, y).item<float>(), 1e-6f) << "step " << i;
  }
  for (auto& [name, t] : eagerModel->state_dict())
    EXPECT_LT((t - compiledModel->state_dict().at(name)).abs().max().item<float>(), 1e-5f) << name;
  const std::string text = compiled.compiled().graph_text();
  EXPECT_NE(text.find("parts([16, 16], [16])"), std::string::npos) << text;
}

/// train()/eval() is part of what a compiled function is specialised on.
TEST(Nn, ModeChangesTraceAgain) {
  nn::Dropout drop(0.5);
  auto f = compile([&](const Tensor& x) { return drop(x); });
  Tensor x = ones({1000});
  EXPECT_LT(f(x).eq(x).to(kFloat32).mean().item<float>(), 0.8f); // training: drops about half
  drop->eval();
  EXPECT_TRUE(sameBits(f(x), x));
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
  drop->train();
  f(x);
  EXPECT_EQ(f.compiled().num_compiled(), 2u); // the train-mode executable is still cached
}

/// A view of a captured real tensor compiles; a view eager rejects is rejected compiled too.
TEST(Nn, ViewsInsideCompileAgreeWithEager) {
  Tensor bias = arange(6).to(kFloat32);
  auto f = compile([&](const Tensor& x) { return x + bias.view({1, 6, 1}); });
  Tensor x = ones({2, 6, 3});
  EXPECT_TRUE(sameBits(f(x), x + bias.view({1, 6, 1})));
  auto g = compile([](const Tensor& x) { return x.t().view({12}); });
  EXPECT_THROW(ones({3, 4}).t().view({12}), ShapeError);
  EXPECT_THROW(g(ones({3, 4})), ShapeError);
  auto h = compile([](const Tensor& x) { return x.transpose(0, 1).contiguous().view({12}); });
  EXPECT_TRUE(sameBits(h(arange(12).reshape({3, 4})),
                       arange(12).reshape({3, 4}).t().contiguous().view({12})));
}

/// A tensor made inside a compiled function and kept after it returns becomes a real tensor the
/// executable writes; it is never read as a value of a later trace.
TEST(Nn, TensorsKeptFromATraceBecomeRealState) {
  Tensor kept;
  auto f = compile([&](const Tensor& x) {
    if (!kept.defined())
      kept = x * 2;
    else
      kept.add_(x);
    return x.sum();
  });
  f(ones({3}));
  EXPECT_TRUE(sameBits(kept, full({3}, 2.0)));
  f(ones({3}));
  f(ones({3}));
  EXPECT_TRUE(sameBits(kept, full({3}, 4.0)));
  EXPECT_EQ(f.compiled().num_compiled(), 2u);
}

/// Operators name the line that wrote them.
TEST(Nn, OperatorsNameTheCallersLine) {
  Tensor a = ones({2}), b = ones({3});
  for (auto op : std::vector<std::function<void()>>{[&] { (void)(a - b); }, [&] { a += b; },
                                                    [&] { a *= b; }}) {
    try {
      op();
      FAIL() << "no error";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find("NnTest.cpp"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(sameBits(conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, 1, 1),
                       conv2d(ones({1, 1, 4, 4}), ones({1, 1, 3, 3}), {}, {1, 1}, {1, 1})));
  EXPECT_EQ(max_pool2d(ones({1, 1, 4, 4}), 2).sizes(), (Shape{1, 1, 2, 2}));
}

/// Losses against values PyTorch 1.13 computed (float64).
TEST(Nn, LossesMatchPyTorch) {
  Tensor logits = tensor({0.5, -1.0, 2.0, 0.1, 0.2, -0.3}, kFloat64).reshape({2, 3});
  Tensor y = tensor({2, 0});
  // torch.nn.functional.cross_entropy(logits, y) and with label_smoothing=0.1 (PyTorch 1.13).
  EXPECT_NEAR(F::cross_entropy(logits, y).item<double>(), 0.6310694761052082, 1e-12);
  EXPECT_NEAR(F::cross_entropy(logits, y, nn::CrossEntropyLossOptions().label_smoothing(0.1))
                  .item<double>(),
              0.7110694761052082, 1e-12);
  Tensor p = tensor({0.2, 0.7, 0.9}, kFloat64), t = tensor({0.0, 1.0, 1.0}, kFloat64);
  // torch.nn.functional.binary_cross_entropy(p, t); 1e-12: float64, a few roundings apart.
  EXPECT_NEAR(F::binary_cross_entropy(p, t).item<double>(), 0.22839300363692283, 1e-12);
  EXPECT_NEAR(F::mse_loss(p, t).item<double>(), (0.04 + 0.09 + 0.01) / 3, 1e-12);
}

/// Recurrent and attention layers: PyTorch's parameter names and shapes, unbatched inputs, and
/// clear errors for wrong shapes. (Their values are checked against PyTorch in
/// NnReferenceTest.cpp.)
TEST(Nn, RecurrentAndAttentionLayersHavePyTorchsShapesAndErrors) {
  nn::LSTM lstm(nn::LSTMOptions(4, 6).num_layers(2).bidirectional(true).batch_first(true));
  auto named = lstm->named_parameters();
  ASSERT_EQ(named.size(), 16u);
  EXPECT_EQ(named[0].first, "weight_ih_l0");
  EXPECT_EQ(named[0].second.sizes(), (Shape{24, 4}));
  EXPECT_EQ(named[4].first, "weight_ih_l0_reverse");
  EXPECT_EQ(named[8].second.sizes(), (Shape{24, 12})); // layer 1 reads both directions
  auto [y, hc] = lstm(randn({3, 5, 4}));
  EXPECT_EQ(y.sizes(), (Shape{3, 5, 12}));
  EXPECT_EQ(std::get<0>(hc).sizes(), (Shape{4, 3, 6}));
  EXPECT_EQ(std::get<1>(hc).sizes(), (Shape{4, 3, 6}));
  // Unbatched: (seq, feature) in, states without the batch dimension.
  nn::GRU gru(3, 5);
  auto [yu, hu] = gru(randn({7, 3}), zeros({1, 5}));
  EXPECT_EQ(yu.sizes(), (Shape{7, 5}));
  EXPECT_EQ(hu.sizes(), (Shape{1, 5}));
  // The last output of a one-layer unidirectional GRU is its final state.
  EXPECT_TRUE(sameBits(yu.select(0, 6), hu.select(0, 0)));
  expectThrows<ShapeError>("does not end in input_size = 3", [&] { gru(randn({7, 2, 4})); });
  expectThrows<ShapeError>("expected an initial state of [1, 2, 5]", [&] {
    gru(randn({7, 2, 3}), zeros({2, 2, 5}));
  });
  expectThrows<ValueError>("nonlinearity must be",
                           [] { nn::RNN(nn::RNNOptions(2, 2).nonlinearity("sigmoid")); });

  nn::MultiheadAttention mha(nn::MultiheadAttentionOptions(8, 2).batch_first(true));
  std::vector<std::string> names;
  for (auto& [n, p] : mha->named_parameters())
    names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  Tensor q = randn({2, 5, 8});
  auto [out, w] = mha(q, q, q);
  EXPECT_EQ(out.sizes(), (Shape{2, 5, 8}));
  EXPECT_EQ(w.sizes(), (Shape{2, 5, 5}));
  // Causal: no weight on later positions, and each row sums to 1.
  auto [outc, wc] = mha->forward(q, q, q, {}, true, {}, true, true);
  EXPECT_EQ(wc.triu(1).abs().sum().item<float>(), 0.0f);
  EXPECT_NEAR(wc.sum({2}).sub(ones({2, 5})).abs().max().item<float>(), 0.0f, 1e-6f);
  expectThrows<ValueError>("must be a positive multiple of num_heads",
                           [] { nn::MultiheadAttention(10, 3); });
  expectThrows<ShapeError>("attn_mask must be [5, 5] or [4, 5, 5]", [&] {
    mha->forward(q, q, q, {}, true, ones({5, 4}, kBool));
  });

  nn::TransformerEncoderLayer enc(
      nn::TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).norm_first(true));
  EXPECT_EQ(enc->named_parameters().size(), 12u);
  EXPECT_EQ(enc(randn({5, 2, 8})).sizes(), (Shape{5, 2, 8}));
  nn::TransformerDecoderLayer dec(nn::TransformerDecoderLayerOptions(8, 2).dim_feedforward(16));
  EXPECT_EQ(dec->named_parameters().size(), 18u);
  EXPECT_EQ(dec(randn({5, 2, 8}), randn({7, 2, 8})).sizes(), (Shape{5, 2, 8}));
  std::ostringstream printed;
  printed << *lstm;
  EXPECT_EQ(printed.str(), "LSTM(4, 6, num_layers=2, batch_first=true, bidirectional=true)");
}

namespace {

/// A model, its optimizer and schedule, a shuffling loader with random augmentation, and a train
/// step (eager or compiled): all the state a checkpoint must carry.
struct Trainer {
  nn::Sequential model = smallCnn();
  optim::AdamW opt{model->parameters(), optim::AdamWOptions(1e-2)};
  optim::OneCycleLR schedule{opt, 1e-2, 15};
  data::DataLoader loader;
  std::function<Tensor(const Tensor&, const Tensor&)> step;

  Trainer(const Tensor& x, const Tensor& y, bool compiled)
      : loader(data::TensorDataset(x, y),
               data::DataLoaderOptions(8).shuffle().seed(5).workers(2).transform(
                   data::RandomHorizontalFlip())) {
    auto f = [this](const Tensor& xb, const Tensor& yb) {
      Tensor loss = F::cross_entropy(model(xb), yb);
      loss.backward();
      opt.step();
      opt.zero_grad();
      return loss;
    };
    if (compiled)
      step = compile(f);
    else
      step = f;
  }
  /// Trains until `losses` holds `steps` losses, stepping the schedule after every batch.
  void train(size_t steps, std::vector<float>& losses) {
    while (losses.size() < steps)
      for (data::Example<>& b : loader) {
        losses.push_back(step(b.data, b.target).item<float>());
        schedule.step();
        if (losses.size() == steps) break;
      }
  }
};

} // namespace

/// A run stopped mid-epoch, saved, and resumed in fresh objects (differently initialised) ends
/// with the same losses and parameters, bit for bit, as a run that never stopped.
TEST(Nn, ResumingFromACheckpointContinuesBitForBit) {
  Generator g(11);
  Tensor x = randn({40, 1, 8, 8}, {}, g), y = randint(0, 3, {40}, kInt64, g); // 5 batches/epoch
  std::string path = ::testing::TempDir() + "weft_resume.safetensors";
  for (bool compiled : {false, true}) {
    SCOPED_TRACE(compiled ? "compiled" : "eager");
    manual_seed(3);
    Trainer straight(x, y, compiled);
    std::vector<float> expected;
    straight.train(15, expected);

    manual_seed(3);
    std::vector<float> losses;
    {
      Trainer first(x, y, compiled);
      first.train(7, losses); // all of epoch 0, two batches of epoch 1
      Checkpoint()
          .set("model", first.model->state_dict())
          .set("optimizer", first.opt.state_dict())
          .set("scheduler", first.schedule.state_dict())
          .set(first.loader)
          .set(default_generator())
          .save(path);
    }
    manual_seed(99); // other initial weights and random stream: all must come from the file
    Trainer resumed(x, y, compiled);
    Checkpoint ck = Checkpoint::load(path);
    resumed.model->load_state_dict(ck.get("model"));
    resumed.opt.load_state_dict(ck.get("optimizer"));
    resumed.schedule.load_state_dict(ck.get("scheduler"));
    ck.restore(resumed.loader);
    ck.restore(default_generator());
    resumed.train(15, losses);

    ASSERT_EQ(losses.size(), expected.size());
    for (size_t i = 7; i < losses.size(); ++i)
      EXPECT_EQ(losses[i], expected[i]) << "step " << i;
    for (auto& [name, t] : straight.model->state_dict())
      EXPECT_TRUE(sameBits(t, resumed.model->state_dict().at(name))) << name;
    for (auto& [name, t] : straight.opt.state_dict())
      EXPECT_TRUE(sameBits(t, resumed.opt.state_dict().at(name))) << name;
  }
  std::remove(path.c_str());
  EXPECT_THROW(Checkpoint().get("model"), IOError);
}
