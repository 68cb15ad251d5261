// Exported train steps: export_train_step() writes a whole step (forward, loss, backward, the
// optimizer's update) that a runtime Session runs as eager training runs it, with every piece of
// state (parameters, buffers, optimizer state, random keys) named in the artifact; the session's
// fine-tuned state is saved back to the artifact or to a safetensors file.
#include "TestUtil.h"

#include <weft/weft.h>

#include "weft/ir/TextFormat.h"
#include "weft/runtime/Artifact.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <unistd.h>

using namespace weft;
using test::has;
using test::messageOf;
namespace fs = std::filesystem;

namespace {

std::string tempPath(const std::string& name) {
  return test::tempPath("weft_export_train_", name);
}

struct Net : nn::Module {
  explicit Net(double dropout) {
    // No bias before the batch norm: its gradient is zero up to rounding, which Adam's
    // normalization would blow up to a step of lr in a direction rounding picks.
    fc1 = register_module("fc1", nn::Linear(nn::LinearOptions(8, 32).bias(false)));
    norm = register_module("norm", nn::BatchNorm1d(32));
    drop = register_module("drop", nn::Dropout(dropout));
    fc2 = register_module("fc2", nn::Linear(32, 4));
  }
  Tensor forward(const Tensor& x) {
    return fc2->forward(drop->forward(norm->forward(fc1->forward(x)).relu()));
  }
  nn::Linear fc1 = nullptr, fc2 = nullptr;
  nn::BatchNorm1d norm = nullptr;
  nn::Dropout drop = nullptr;
};

/// The step every test trains with: one Adam update of `net` on a batch, returning the loss.
TensorFunction stepOf(Net& net, optim::Optimizer& opt) {
  return [&net, &opt](const std::vector<Tensor>& in) -> std::vector<Tensor> {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(net.forward(in[0]), in[1]);
    loss.backward();
    opt.step();
    return {loss.detach()};
  };
}

/// Runs `session` (a train step of (x, y) returning the loss) on `x`, `y`; returns the loss.
float runStep(Session& session, const Tensor& x, const Tensor& y) {
  Tensor xc = x.contiguous(), yc = y.contiguous();
  const void* in[] = {xc.data_ptr(), yc.data_ptr()};
  float loss = 0;
  void* out[] = {&loss};
  session.run(in, out);
  return loss;
}

/// State tensor `name` of `session` as a tensor.
Tensor stateOf(const Session& session, const std::string& name, const Tensor& like) {
  Tensor t = empty(like.sizes(), like.dtype());
  session.readState(name, t.data_ptr(), static_cast<size_t>(t.numel()) * t.element_size());
  return t;
}

} // namespace

// Compiled and eager steps differ by float rounding only (fused kernels sum in another order):
// after 5 Adam steps (each moving a weight by about lr), 1e-5 absolute.
TEST(ExportTrain, AnExportedTrainStepTrainsAsEagerStepsDo) {
  manual_seed(11);
  Net eager(0.25), exported(0.25);
  exported.load_state_dict(eager.state_dict());
  optim::Adam eagerOpt(eager.parameters(), optim::AdamOptions(1e-2));
  optim::Adam exportOpt(exported.parameters(), optim::AdamOptions(1e-2));
  std::vector<Tensor> xs, ys;
  for (int i = 0; i < 5; ++i) {
    xs.push_back(randn({16, 8}));
    ys.push_back(randint(4, {16}));
  }
  const std::string path = tempPath("step.weft");
  manual_seed(5); // the dropout masks: the artifact's keys start where eager draws start
  export_train_step(exported, exportOpt, stepOf(exported, exportOpt), {xs[0], ys[0]}, path);
  // Exporting ran nothing: the parameters and the fresh optimizer state are untouched.
  EXPECT_TRUE(exported.fc1->weight.equal(eager.fc1->weight));
  for (auto& [key, t] : exportOpt.state_dict())
    if (key.ends_with("exp_avg")) {
      EXPECT_EQ(t.abs().sum().item<float>(), 0.0f) << key;
    }

  auto artifact = Artifact::open(path);
  EXPECT_EQ(artifact->programNames(), std::vector<std::string>{"train_step"});
  Session session(artifact, "train_step");
  for (const char* name : {"fc1.weight", "norm.running_mean", "norm.num_batches_tracked",
                           "optimizer.state.0.exp_avg", "optimizer.state.0.step",
                           "optimizer.param_groups.0.lr", "train_step.rng.0"})
    EXPECT_TRUE(std::ranges::count(session.stateNames(), name) == 1) << name;

  manual_seed(5);
  auto step = stepOf(eager, eagerOpt);
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = step({xs[i], ys[i]})[0].item<float>();
    EXPECT_NEAR(runStep(session, xs[i], ys[i]), want, 1e-5) << "step " << i;
  }
  for (auto& [name, p] : eager.named_parameters())
    EXPECT_TRUE(test::allClose(stateOf(session, name, p), p, 1e-5, 1e-5)) << name;
  EXPECT_TRUE(test::allClose(stateOf(session, "norm.running_var", eager.norm->running_var),
                             eager.norm->running_var, 1e-5, 1e-5));
  // The random key moved on by one draw per step, as the default generator's offset did.
  Tensor key = stateOf(session, "train_step.rng.0", zeros({2}, kInt64));
  EXPECT_EQ(key[1].item<int64_t>(), 5);
  EXPECT_EQ(default_generator().offset(), 5u);
  fs::remove(path);
}

TEST(ExportTrain, FineTunedStateIsSavedBackToTheArtifactOrToSafetensors) {
  manual_seed(2);
  Net net(0.0);
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.1).momentum(0.9));
  Tensor x = randn({16, 8}), y = randint(4, {16});
  const std::string path = tempPath("tune.weft"), side = tempPath("tuned.safetensors");
  export_train_step(net, opt, stepOf(net, opt), {x, y}, path);
  Tensor before = load_state(path).at(0).second.clone();
  {
    Session session(Artifact::open(path), "train_step");
    float first = runStep(session, x, y), loss = first;
    for (int i = 0; i < 20; ++i)
      loss = runStep(session, x, y);
    EXPECT_LT(loss, first * 0.5f); // the same batch 20 times: it learns it
    session.save(side);
    session.save(path); // over the very file the session maps
  }
  auto tuned = safetensors::load_file(side);
  auto rewritten = load_state(path);
  ASSERT_EQ(rewritten.size(), tuned.size());
  for (auto& [name, t] : rewritten) {
    auto it = std::find_if(tuned.begin(), tuned.end(), [&](auto& e) { return e.first == name; });
    ASSERT_NE(it, tuned.end()) << name;
    EXPECT_TRUE(t.equal(it->second)) << name;
  }
  EXPECT_FALSE(rewritten.at(0).second.equal(before)); // it did change
  // The rewritten artifact resumes from the tuned state: its momentum buffers included.
  Session again(Artifact::open(path), "train_step");
  Tensor buf = stateOf(again, "optimizer.state.0.momentum_buffer", net.fc1->weight);
  EXPECT_GT(buf.abs().sum().item<float>(), 0.0f);
  fs::remove(path);
  fs::remove(side);
}

TEST(ExportTrain, StateAnOptimizerCannotMakeBeforehandIsAClearError) {
  Net net(0.0);
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.1).momentum(0.9).dampening(0.5));
  Tensor x = randn({4, 8}), y = randint(4, {4});
  const std::string path = tempPath("damp.weft");
  std::string m = messageOf([&] { export_train_step(net, opt, stepOf(net, opt), {x, y}, path); });
  EXPECT_TRUE(has(m, "dampening")) << m;
  EXPECT_TRUE(has(m, "take one step first")) << m;
  EXPECT_FALSE(fs::exists(path));
  // After one eager step the buffer exists, and the step exports.
  stepOf(net, opt)({x, y});
  export_train_step(net, opt, stepOf(net, opt), {x, y}, path);
  EXPECT_EQ(std::ranges::count(Artifact::open(path)->stateNames("train_step"),
                               "optimizer.state.0.momentum_buffer"),
            1);
  fs::remove(path);
}

TEST(ExportTrain, CompiledFunctionsNameTheirState) {
  Net net(0.5);
  optim::AdamW opt(net.parameters());
  opt.init_state();
  auto step = stepOf(net, opt);
  CompiledFunction compiled{CompileOptions()};
  Tensor x = randn({4, 8}), y = randint(4, {4});
  compiled.call({x, y}, step);
  nn::NamedTensors known = net.named_parameters();
  for (auto& [key, t] : opt.state_dict())
    known.emplace_back("optimizer." + key, t);
  auto named = compiled.named_state_tensors(known);
  std::vector<Tensor> state = compiled.state_tensors();
  ASSERT_EQ(named.size(), state.size());
  for (size_t i = 0; i < named.size(); ++i)
    EXPECT_TRUE(named[i].second.is_same(state[i])) << named[i].first;
  auto find = [&](const std::string& name) {
    for (auto& [n, t] : named)
      if (n == name) return t;
    return Tensor();
  };
  EXPECT_TRUE(find("fc2.bias").is_same(net.fc2->bias));
  EXPECT_TRUE(find("rng.0").defined());
  // The buffers are not among `known`: constants, by number.
  EXPECT_FALSE(find("norm.running_mean").defined());
  EXPECT_TRUE(find("constant.0").defined());
}

// Buckets: each is its own compilation of the same graph, so a call of n rows in bucket b gives
// eager's values to float rounding (fused kernels sum in another order): 1e-5.
TEST(ExportTrain, ADynamicBatchRunsInTheSmallestBucketThatHoldsIt) {
  manual_seed(4);
  Net net(0.0);
  net.eval();
  const std::string path = tempPath("buckets.weft");
  export_model(
      net, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{net.forward(in[0])}; },
      {randn({3, 8})}, path,
      ExportOptions().dynamic_dim(0).buckets({2, 4, 8}).input_names({"x"}).output_names({"y"}));
  auto artifact = Artifact::open(path);
  EXPECT_EQ(artifact->programNames(), std::vector<std::string>{"forward"});
  EXPECT_EQ(artifact->buckets("forward"), (std::vector<int64_t>{2, 4, 8}));
  Session session(artifact, "forward");
  EXPECT_EQ(session.buckets(), (std::vector<int64_t>{2, 4, 8}));
  ASSERT_EQ(session.arguments().size(), 1u); // the row mask is the session's own
  EXPECT_EQ(session.arguments()[0].shape, (Shape{8, 8}));
  // Each bucket plans its own memory: the smallest needs less than the largest.
  EXPECT_LT(artifact->loaded("forward", hal::cpu(), 2)->plan.arenaBytes,
            artifact->loaded("forward", hal::cpu(), 8)->plan.arenaBytes);
  for (int64_t rows : {1, 2, 3, 5, 8}) {
    Tensor x = randn({rows, 8});
    Tensor want;
    {
      NoGradGuard g;
      want = net.forward(x);
    }
    Tensor got = empty({rows, 4});
    const void* in[] = {x.data_ptr()};
    void* out[] = {got.data_ptr()};
    session.run(in, out, rows);
    EXPECT_TRUE(test::allClose(got, want, 1e-5, 1e-5)) << rows << " rows";
  }
  std::string m = messageOf([&] {
    const void* in[] = {nullptr};
    void* out[] = {nullptr};
    session.run(in, out, 9);
  });
  EXPECT_TRUE(has(m, "1 to 8")) << m;
  // A bucket whose signature is not the largest's with fewer rows is a damaged file: a session
  // sizes the caller's buffers from the largest.
  Executable small = artifact->program("forward", 2), large = artifact->program("forward", 8);
  small.dynamic->outputAxes[0] = {-1, 1}; // its output no longer batched: not the largest's
  std::vector<ArtifactTensor> state = artifact->state();
  std::vector<ArtifactProgram> programs = {{"forward", &small, artifact->stateNames("forward", 2)},
                                           {"forward", &large, artifact->stateNames("forward", 8)}};
  const std::string bad = tempPath("bad_buckets.weft");
  writeArtifact(bad, programs, state, "test");
  m = messageOf([&] { Artifact::open(bad); });
  EXPECT_TRUE(has(m, "bucket of 2 rows has another signature")) << m;
  fs::remove(bad);
  fs::remove(path);
}

// A constant sized by the batch (arange over the rows) differs per bucket: each bucket keeps its
// own, and n rows get eager's values.
TEST(ExportTrain, ABucketKeepsAConstantSizedByItsRows) {
  const std::string path = tempPath("arange.weft");
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] + arange(in[0].size(0)).to(kFloat32).unsqueeze(1)};
  };
  nn::Linear holder(2, 2); // export_model wants a module; this function reads none of it
  export_model(*holder.ptr(), fn, {randn({4, 3})}, path, ExportOptions().dynamic_dim(0).buckets({2, 4}));
  auto artifact = Artifact::open(path);
  EXPECT_NE(artifact->stateNames("forward", 2), artifact->stateNames("forward", 4));
  Session session(artifact, "forward");
  Tensor x = randn({3, 3}), got = empty({3, 3});
  const void* in[] = {x.data_ptr()};
  void* out[] = {got.data_ptr()};
  session.run(in, out, 3);
  EXPECT_TRUE(got.equal(fn({x})[0]));
  fs::remove(path);
}

// Several CPU targets in one artifact: the code for each, one plan; a machine that cannot run the
// first target's (znver4 needs AMD's SSE4a) loads the next, and computes as eager does (1e-5:
// fused kernels sum in another order).
TEST(ExportTrain, CodeForSeveralTargetsRunsWhereverOneOfThemDoes) {
  manual_seed(6);
  Net net(0.0);
  net.eval();
  const std::string path = tempPath("targets.weft");
  Tensor x = randn({5, 8});
  export_model(
      net, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{net.forward(in[0])}; },
      {x}, path, ExportOptions().targets({"znver4", "x86-64-v3", "x86-64"}));
  auto artifact = Artifact::open(path);
  const std::vector<hal::CodeObject>& code = artifact->program("forward").plan.kernels.code;
  ASSERT_EQ(code.size(), 3u);
  EXPECT_TRUE(has(code[0].target, "znver4")) << code[0].target;
  EXPECT_TRUE(has(code[2].target, "x86-64")) << code[2].target;
  EXPECT_TRUE(hal::cpu().cannotRun(code[2]).empty()) << "every x86-64 machine runs the fallback";
  Session session(artifact, "forward");
  Tensor got = empty({5, 4}), want;
  {
    NoGradGuard g;
    want = net.forward(x);
  }
  const void* in[] = {x.data_ptr()};
  void* out[] = {got.data_ptr()};
  session.run(in, out);
  EXPECT_TRUE(test::allClose(got, want, 1e-5, 1e-5));
  std::string m = messageOf([&] {
    export_model(
        net, [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{net.forward(in[0])}; },
        {x}, path, ExportOptions().targets({"x86-64", "no-such-cpu"}));
  });
  EXPECT_TRUE(has(m, "no-such-cpu")) << m;
  fs::remove(path);
}

// compile_graph: a traced graph through its text form, compiled ahead of time for two targets,
// computes what eager code does (1e-5: fused kernels sum in another order).
TEST(ExportTrain, TextIrCompilesAheadOfTimeForSeveralTargets) {
  manual_seed(8);
  Tensor w = randn({8, 16}), b = randn({16}), x = randn({5, 8});
  auto fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0].matmul(w) + b).relu().sum(1)};
  };
  TraceResult traced = trace(fn, {x});
  ir::Result<ir::Graph> parsed = ir::parseGraph(ir::printGraph(*traced.graph));
  ASSERT_TRUE(static_cast<bool>(parsed));
  Executable exe = compile_graph(parsed.value(), "x86-64-v3");
  exe.addCodeFrom(compile_graph(parsed.value(), "x86-64"));
  ASSERT_EQ(exe.plan.kernels.code.size(), 2u);
  EXPECT_EQ(exe.state.size(), 2u);
  EXPECT_EQ(exe.state[0].name, parsed.value().value(parsed.value().state()[0]).name);
  // Written as an artifact with the graph's state by its names, run by a runtime session.
  const std::string path = tempPath("aot.weft");
  std::vector<std::string> names = {exe.state[0].name, exe.state[1].name};
  std::vector<ArtifactTensor> state = {{names[0], kFloat32, w.sizes(), w.data_ptr()},
                                       {names[1], kFloat32, b.sizes(), b.data_ptr()}};
  ArtifactProgram p{"forward", &exe, names};
  writeArtifact(path, std::span(&p, 1), state, "test");
  Session session(Artifact::open(path), "forward");
  Tensor got = empty({5});
  const void* in[] = {x.data_ptr()};
  void* out[] = {got.data_ptr()};
  session.run(in, out);
  EXPECT_TRUE(test::allClose(got, fn({x})[0], 1e-5, 1e-5));
  fs::remove(path);
  std::string m = messageOf([&] { (void)compile_graph(parsed.value(), "no-such-cpu"); });
  EXPECT_TRUE(has(m, "no-such-cpu")) << m;
}

// One file for inference and fine-tuning: forward and train_step over the same named weights; the
// weights the train steps leave, saved back, are what forward reads next (as eager's to 1e-5).
TEST(ExportTrain, ForwardAndTrainStepShareTheirWeightsInOneArtifact) {
  manual_seed(9);
  Net net(0.0), eager(0.0);
  eager.load_state_dict(net.state_dict());
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.05));
  optim::SGD eagerOpt(eager.parameters(), optim::SGDOptions(0.05));
  Tensor x = randn({16, 8}), y = randint(4, {16});
  const std::string path = tempPath("both.weft");
  auto forward = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{net.forward(in[0])}; };
  export_model(net, forward, {x}, path);
  export_train_step(net, opt, stepOf(net, opt), {x, y}, path, ExportOptions().append());
  auto artifact = Artifact::open(path);
  EXPECT_EQ(artifact->programNames(), (std::vector<std::string>{"train_step", "forward"}));
  EXPECT_EQ(artifact->findState("fc2.weight")->shape, (Shape{4, 32}));
  {
    Session train(artifact, "train_step");
    for (int i = 0; i < 3; ++i)
      runStep(train, x, y);
    train.save(path);
  }
  auto step = stepOf(eager, eagerOpt);
  for (int i = 0; i < 3; ++i)
    step({x, y});
  Session infer(Artifact::open(path), "forward");
  Tensor got = empty({16, 4}), want;
  {
    NoGradGuard g;
    eager.eval();
    want = eager.forward(x);
  }
  const void* in[] = {x.data_ptr()};
  void* out[] = {got.data_ptr()};
  infer.run(in, out);
  EXPECT_TRUE(test::allClose(got, want, 1e-5, 1e-5));
  fs::remove(path);
}
