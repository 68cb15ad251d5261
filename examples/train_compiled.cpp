// The main demo: a 3-layer MLP on two interleaved spirals, trained with a compiled train step
// (forward, backward and an Adam update traced once into a graph, optimized, then interpreted on
// every call), printing the loss as it falls, with the eager step timed beside it.
#include <weft/weft.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

using namespace weft;

namespace {

/// Two interleaved spirals, `n` points each, with a little noise.
std::pair<Tensor, Tensor> spirals(int64_t n, Generator gen) {
  Tensor t = rand({n}, kFloat32, gen) * 3.5 * M_PI + 0.5;
  Tensor noise = randn({2 * n, 2}, kFloat32, gen) * 0.15;
  Tensor a = stack({t * t.cos(), t * t.sin()}, 1) / 4.0;
  return {cat({a, -a}, 0) + noise, cat({zeros({n}, kInt64), ones({n}, kInt64)})};
}

/// The model and its Adam state, created up front so a compiled step reads and writes them.
struct Model {
  std::vector<Tensor> params, m, v;
  Tensor steps = zeros({});
  explicit Model(Generator gen) {
    auto init = [&](int64_t in, int64_t out) {
      return (randn({in, out}, kFloat32, gen) * std::sqrt(2.0 / static_cast<double>(in)))
          .requires_grad_();
    };
    params = {init(2, 64), zeros({64}).requires_grad_(), init(64, 64), zeros({64}).requires_grad_(),
              init(64, 2), zeros({2}).requires_grad_()};
    for (const Tensor& p : params) {
      m.push_back(zeros_like(p));
      v.push_back(zeros_like(p));
    }
  }
  Tensor logits(const Tensor& x) const {
    Tensor h = relu(x.matmul(params[0]) + params[1]);
    h = relu(h.matmul(params[2]) + params[3]);
    return h.matmul(params[4]) + params[5];
  }
  /// One train step: loss, backward, Adam (lr 0.01), zero_grad. Plain eager code, also compiled.
  Tensor step(const Tensor& x, const Tensor& y) {
    Tensor loss = -logits(x).log_softmax(1).gather(1, y.unsqueeze(1)).mean();
    loss.backward();
    NoGradGuard guard;
    steps.add_(1);
    Tensor c1 = 1.0 - pow(full({}, 0.9), steps), c2 = 1.0 - pow(full({}, 0.999), steps);
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      m[i].mul_(0.9).add_(g, 0.1);
      v[i].mul_(0.999).add_(g * g, 0.001);
      params[i].sub_((m[i] / c1) / ((v[i] / c2).sqrt() + 1e-8) * 0.01);
      params[i].set_grad({});
    }
    return loss;
  }
};

double millisecondsPerStep(const std::function<Tensor()>& step, int n) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i)
    step();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
             .count() /
         n;
}

} // namespace

int main() {
  Generator gen(2024);
  auto [x, y] = spirals(500, gen);
  Model model(gen);
  auto trainStep = compile([&](const Tensor& xb, const Tensor& yb) { return model.step(xb, yb); });

  std::printf("weft demo: 3-layer MLP on %lld two-spiral points, compiled train step (Adam, lr "
              "0.01), %d threads\n",
              static_cast<long long>(x.size(0)), getNumThreads());
  float first = 0, last = 0;
  for (int epoch = 0; epoch <= 400; ++epoch) {
    last = trainStep(x, y).item<float>();
    if (epoch == 0) first = last;
    if (epoch % 50 == 0) {
      NoGradGuard guard;
      float acc = (model.logits(x).argmax(1) == y).to(kFloat32).mean().item<float>();
      std::printf("epoch %3d  loss %.4f  accuracy %.3f\n", epoch, last, acc);
    }
  }
  std::printf("loss fell from %.4f to %.4f (%zu compilation)\n", first, last,
              trainStep.compiled().num_compiled());
  Model eagerModel(Generator(2024));
  double eagerMs = millisecondsPerStep([&] { return eagerModel.step(x, y); }, 50);
  double compiledMs = millisecondsPerStep([&] { return trainStep(x, y); }, 50);
  std::printf("train step: eager %.3f ms, compiled %.3f ms (%zu generated kernels, the rest "
              "interpreted)\n",
              eagerMs, compiledMs, trainStep.compiled().num_kernels());
  return last < first * 0.5f ? 0 : 1;
}
