// Trains a small MLP on a two-spiral classification problem with eager autograd and Adam written
// out in tensor ops, printing the loss as it falls. The compiled-train-step demo replaces this once
// compile() and nn:: exist.
#include <weft/weft.h>

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
  Tensor x = cat({a, -a}, 0) + noise;
  Tensor y = cat({zeros({n}, kInt64), ones({n}, kInt64)});
  return {x, y};
}

struct Adam {
  std::vector<Tensor> params, m, v;
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t t = 0;
  Adam(std::vector<Tensor> p, double lr_) : params(std::move(p)), lr(lr_) {
    for (const Tensor& q : params) {
      m.push_back(zeros_like(q));
      v.push_back(zeros_like(q));
    }
  }
  void step() {
    NoGradGuard guard;
    ++t;
    double c1 = 1 - std::pow(beta1, static_cast<double>(t)), c2 = 1 - std::pow(beta2, static_cast<double>(t));
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad();
      m[i].mul_(beta1).add_(g, 1 - beta1);
      v[i].mul_(beta2).add_(g * g, 1 - beta2);
      params[i].sub_((m[i] / c1) / ((v[i] / c2).sqrt() + eps) * lr);
      params[i].mutable_grad().zero_();
    }
  }
};

} // namespace

int main() {
  Generator gen(2024);
  auto [x, y] = spirals(500, gen);
  auto init = [&](int64_t in, int64_t out) {
    return (randn({in, out}, kFloat32, gen) * std::sqrt(2.0 / static_cast<double>(in))).requires_grad_();
  };
  Tensor w1 = init(2, 64), b1 = zeros({64}, TensorOptions().requires_grad());
  Tensor w2 = init(64, 64), b2 = zeros({64}, TensorOptions().requires_grad());
  Tensor w3 = init(64, 2), b3 = zeros({2}, TensorOptions().requires_grad());
  Adam opt({w1, b1, w2, b2, w3, b3}, 0.01);

  std::printf("weft eager demo: 3-layer MLP on %lld two-spiral points, Adam lr=0.01, %d threads\n",
              static_cast<long long>(x.size(0)), getNumThreads());
  float first = 0, last = 0;
  for (int epoch = 0; epoch <= 400; ++epoch) {
    Tensor h = relu(x.matmul(w1) + b1);
    h = relu(h.matmul(w2) + b2);
    Tensor logits = h.matmul(w3) + b3;
    Tensor loss = -logits.log_softmax(1).gather(1, y.unsqueeze(1)).mean();
    loss.backward();
    opt.step();
    last = loss.item<float>();
    if (epoch == 0)
      first = last;
    if (epoch % 50 == 0) {
      float acc = (logits.argmax(1) == y).to(kFloat32).mean().item<float>();
      std::printf("epoch %3d  loss %.4f  accuracy %.3f\n", epoch, last, acc);
    }
  }
  std::printf("loss fell from %.4f to %.4f\n", first, last);
  return last < first * 0.5f ? 0 : 1;
}
