// compile() costs and gains, side by side in one run: for an MLP and a transformer-block train
// step, the graph size, the time to trace, run the pass pipeline and lower, and the median step
// time eager vs compiled (the compiled graph run by the interpreter), also with a batch size that
// varies under dynamic_dim. Prints a table.
#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace weft;

namespace {

double medianMs(const std::function<void()>& f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// SGD with momentum over `params`, as plain tensor code (traced as is).
struct Sgd {
  std::vector<Tensor> params, velocity;
  explicit Sgd(std::vector<Tensor> p) : params(std::move(p)) {
    for (const Tensor& q : params)
      velocity.push_back(zeros_like(q));
  }
  void step() {
    NoGradGuard guard;
    for (size_t i = 0; i < params.size(); ++i) {
      velocity[i].mul_(0.9).add_(params[i].grad());
      params[i].sub_(velocity[i] * 0.01);
      params[i].set_grad({});
    }
  }
};

struct Mlp {
  std::vector<Tensor> p;
  explicit Mlp(Generator g) {
    p = {(randn({256, 512}, kFloat32, g) * 0.05).requires_grad_(), zeros({512}).requires_grad_(),
         (randn({512, 512}, kFloat32, g) * 0.05).requires_grad_(), zeros({512}).requires_grad_(),
         (randn({512, 10}, kFloat32, g) * 0.05).requires_grad_(),  zeros({10}).requires_grad_()};
  }
  Tensor loss(const Tensor& x, const Tensor& y) {
    Tensor h = relu(x.matmul(p[0]) + p[1]);
    h = relu(h.matmul(p[2]) + p[3]);
    return -(h.matmul(p[4]) + p[5]).log_softmax(1).gather(1, y.unsqueeze(1)).mean();
  }
};

struct Block {
  int64_t d = 128, heads = 4;
  std::vector<Tensor> p;
  explicit Block(Generator g) {
    auto w = [&](int64_t a, int64_t b) {
      return (randn({a, b}, kFloat32, g) * 0.05).requires_grad_();
    };
    p = {w(d, d),
         w(d, d),
         w(d, d),
         w(d, d),
         w(d, 4 * d),
         w(4 * d, d),
         ones({d}).requires_grad_(),
         zeros({d}).requires_grad_(),
         ones({d}).requires_grad_(),
         zeros({d}).requires_grad_()};
  }
  Tensor norm(const Tensor& x, const Tensor& gamma, const Tensor& beta) {
    Tensor mu = x.mean({-1}, true);
    Tensor var = (x - mu).pow(2).mean({-1}, true);
    return (x - mu) / (var + 1e-5).sqrt() * gamma + beta;
  }
  Tensor loss(const Tensor& x) {
    int64_t b = x.size(0), t = x.size(1), hd = d / heads;
    auto split = [&](const Tensor& y) { return y.reshape({b, t, heads, hd}).transpose(1, 2); };
    Tensor h = norm(x, p[6], p[7]);
    Tensor q = split(h.matmul(p[0])), k = split(h.matmul(p[1])), v = split(h.matmul(p[2]));
    Tensor att = (q.matmul(k.transpose(-1, -2)) / std::sqrt(static_cast<double>(hd))).softmax(-1);
    Tensor y = x + att.matmul(v).transpose(1, 2).reshape({b, t, d}).matmul(p[3]);
    y = y + gelu(norm(y, p[8], p[9]).matmul(p[4])).matmul(p[5]);
    return y.pow(2).mean();
  }
};

/// The GPT-like model of the training benchmark: 2 pre-norm causal layers, d=128, 4 heads,
/// context 64, vocabulary 256.
class GptImpl : public nn::Module {
public:
  GptImpl() {
    tok = register_module("tok", nn::Embedding(256, 128));
    pos = register_module("pos", nn::Embedding(64, 128));
    for (int i = 0; i < 2; ++i)
      layers.push_back(
          register_module("layer" + std::to_string(i),
                          nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions(128, 4)
                                                          .dim_feedforward(512)
                                                          .dropout(0.0)
                                                          .activation("gelu")
                                                          .batch_first(true)
                                                          .norm_first(true))));
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({128})));
    head = register_module("head", nn::Linear(128, 256));
  }
  Tensor forward(const Tensor& idx) {
    Tensor x = tok(idx) + pos(arange(idx.size(1)));
    for (nn::TransformerEncoderLayer& layer : layers)
      x = layer->forward(x, {}, {}, /*is_causal=*/true);
    return head(norm(x));
  }
  nn::Embedding tok = nullptr, pos = nullptr;
  std::vector<nn::TransformerEncoderLayer> layers;
  nn::LayerNorm norm = nullptr;
  nn::Linear head = nullptr;
};
WEFT_MODULE(Gpt);

/// Compiles a fresh GPT-like AdamW train step (batch 16) and returns the milliseconds of its two
/// compilations (the first step makes the optimizer's state, the second reads it).
std::pair<double, double> gptCompileMs() {
  Gpt model;
  optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
  auto step = compile([&](const Tensor& x, const Tensor& y) {
    Tensor loss = nn::functional::cross_entropy(model(x).flatten(0, 1), y.flatten());
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  });
  Generator g(5);
  Tensor x = randint(0, 256, {16, 64}, kInt64, g), y = randint(0, 256, {16, 64}, kInt64, g);
  step(x, y);
  double first = step.compiled().compile_ms();
  step(x, y);
  return {first, step.compiled().compile_ms()};
}

void row(const char* name, const std::function<Tensor()>& eagerStep,
         const std::function<Tensor()>& compiledStep, const CompiledFunction& cf) {
  eagerStep();    // warm up the allocator and the thread pool
  compiledStep(); // traces, runs the pipeline, lowers, runs once
  std::string text = cf.graph_text();
  size_t nodes = 0; // lines "  %N = op(...)"; kernels print as comments
  for (size_t at = text.find("\n  %"); at != std::string::npos; at = text.find("\n  %", at + 1))
    ++nodes;
  double eager = medianMs([&] { eagerStep(); }, 30);
  double compiled = medianMs([&] { compiledStep(); }, 30);
  std::printf("| %-26s | %6zu | %13.2f | %9.3f | %12.3f | %6.2f |\n", name, nodes, cf.compile_ms(),
              eager, compiled, compiled / eager);
}

} // namespace

int main() {
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::printf("weft compile benchmark: %d threads, OPENBLAS_CORETYPE=%s; medians of 30 steps\n\n",
              getNumThreads(), core ? core : "(unset)");
  std::printf("| %-26s | %6s | %13s | %9s | %12s | %6s |\n", "train step", "nodes", "trace+pipe ms",
              "eager ms", "compiled ms", "ratio");
  std::printf(
      "|----------------------------|--------|---------------|-----------|--------------|----"
      "----|\n");
  {
    Generator g(1);
    Tensor x = randn({256, 256}, kFloat32, g), y = randint(0, 10, {256}, kInt64, g);
    Mlp eagerModel(Generator(2)), stepModel(Generator(2)), forwardModel(Generator(2));
    Sgd eagerOpt(eagerModel.p), stepOpt(stepModel.p), forwardOpt(forwardModel.p);
    auto eagerStep = [&] {
      Tensor l = eagerModel.loss(x, y);
      l.backward();
      eagerOpt.step();
      return l;
    };
    auto step = compile([&](const Tensor& a, const Tensor& b) {
      Tensor l = stepModel.loss(a, b);
      l.backward();
      stepOpt.step();
      return l;
    });
    row(
        "MLP 256-512-512-10, b256", eagerStep, [&] { return step(x, y); }, step.compiled());
    // Only the model compiled; loss.backward() and the optimizer stay eager, and autograd runs the
    // compiled backward graph.
    auto loss = compile([&](const Tensor& a, const Tensor& b) { return forwardModel.loss(a, b); });
    row(
        "MLP, only forward compiled", eagerStep,
        [&] {
          Tensor l = loss(x, y);
          l.backward();
          forwardOpt.step();
          return l;
        },
        loss.compiled());
  }
  int dynamicCompilations = 0;
  {
    // Batches of 200, 231 and 256 rows in turn: one bucket (256), so one compilation; the padded
    // rows cost work, and masking them adds a where() before each reduction over the batch.
    Generator g(1);
    std::vector<Tensor> xs, ys;
    for (int64_t n : {200, 231, 256}) {
      xs.push_back(randn({n, 256}, kFloat32, g));
      ys.push_back(randint(0, 10, {n}, kInt64, g));
    }
    Mlp eagerModel(Generator(2)), compiledModel(Generator(2));
    Sgd eagerOpt(eagerModel.p), compiledOpt(compiledModel.p);
    size_t ei = 0, ci = 0;
    auto eagerStep = [&] {
      Tensor l = eagerModel.loss(xs[ei % 3], ys[ei % 3]);
      ++ei;
      l.backward();
      eagerOpt.step();
      return l;
    };
    auto step = compile(
        [&](const Tensor& a, const Tensor& b) {
          Tensor l = compiledModel.loss(a, b);
          l.backward();
          compiledOpt.step();
          return l;
        },
        CompileOptions().dynamic_dim(0));
    row(
        "MLP, b200/231/256 dynamic", eagerStep,
        [&] {
          ++ci;
          return step(xs[ci % 3], ys[ci % 3]);
        },
        step.compiled());
    dynamicCompilations = static_cast<int>(step.compiled().num_compiled());
  }
  {
    Generator g(3);
    Tensor x = randn({8, 64, 128}, kFloat32, g);
    Block eagerModel(Generator(4)), compiledModel(Generator(4));
    Sgd eagerOpt(eagerModel.p), compiledOpt(compiledModel.p);
    auto eagerStep = [&] {
      Tensor l = eagerModel.loss(x);
      l.backward();
      eagerOpt.step();
      return l;
    };
    auto step = compile([&](const Tensor& a) {
      Tensor l = compiledModel.loss(a);
      l.backward();
      compiledOpt.step();
      return l;
    });
    row(
        "transformer block d128", eagerStep, [&] { return step(x); }, step.compiled());
  }
  std::printf("\nThe dynamic row compiled %d time(s) for its three batch sizes.\n",
              dynamicCompilations);

  // Compile latency of the GPT-like train step: cold (an empty kernel cache of its own) and warm
  // (the same step compiled again by a fresh model: every kernel comes from the disk cache).
  std::string cache = "/tmp/weft-compile-bench-cache-" + std::to_string(::getpid());
  std::filesystem::remove_all(cache);
  ::setenv("WEFT_CACHE_DIR", cache.c_str(), 1);
  auto [cold1, cold2] = gptCompileMs();
  auto [warm1, warm2] = gptCompileMs();
  std::filesystem::remove_all(cache);
  std::printf("\nGPT-like AdamW step (2 layers, d=128, 4 heads, context 64, batch 16): trace, "
              "passes, codegen and load, ms\n\n");
  std::printf("| %-38s | %8s | %8s |\n", "compilation", "cold", "warm");
  std::printf("|----------------------------------------|----------|----------|\n");
  std::printf("| %-38s | %8.0f | %8.0f |\n", "1st (makes the optimizer state)", cold1, warm1);
  std::printf("| %-38s | %8.0f | %8.0f |\n", "2nd (the step that runs from then on)", cold2, warm2);
  return 0;
}
