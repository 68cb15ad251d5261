// The three models weft-bench-train times, written with weft::nn and sized by their arguments:
// an MLP, a CNN for square one-channel images, and a pre-norm causal transformer. The benchmark
// builds them at its sizes (TrainBench.h's Config); tests/TrainStepsTest.cpp trains small ones
// compiled against eager.
#pragma once

#include <weft/weft.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace weft::bench {

/// in -> hidden -> hidden -> out, ReLU between.
class MlpImpl : public nn::Module {
public:
  MlpImpl(int64_t in, int64_t hidden, int64_t out) {
    fc1 = register_module("fc1", nn::Linear(in, hidden));
    fc2 = register_module("fc2", nn::Linear(hidden, hidden));
    fc3 = register_module("fc3", nn::Linear(hidden, out));
  }
  Tensor forward(const Tensor& x) { return fc3(relu(fc2(relu(fc1(x))))); }
  nn::Linear fc1 = nullptr, fc2 = nullptr, fc3 = nullptr;
};
WEFT_MODULE(Mlp);

/// conv(c1), ReLU, 2x2 max-pool, conv(c2), ReLU, pool, fc(hidden), ReLU, fc(classes), on images
/// of one channel, `side` pixels square (a multiple of 4).
class CnnImpl : public nn::Module {
public:
  CnnImpl(int64_t c1, int64_t c2, int64_t side, int64_t hidden, int64_t classes) {
    conv1 = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, c1, 3).padding(1)));
    conv2 = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(c1, c2, 3).padding(1)));
    pool = register_module("pool", nn::MaxPool2d(2));
    fc1 = register_module("fc1", nn::Linear(c2 * (side / 4) * (side / 4), hidden));
    fc2 = register_module("fc2", nn::Linear(hidden, classes));
  }
  Tensor forward(const Tensor& x) {
    Tensor h = pool(relu(conv1(x)));
    h = pool(relu(conv2(h)));
    return fc2(relu(fc1(h.flatten(1))));
  }
  nn::Conv2d conv1 = nullptr, conv2 = nullptr;
  nn::MaxPool2d pool = nullptr;
  nn::Linear fc1 = nullptr, fc2 = nullptr;
};
WEFT_MODULE(Cnn);

/// A pre-norm causal transformer layer, written out op for op as TrainBenchTorch.cpp's.
class LayerImpl : public nn::Module {
public:
  LayerImpl(int64_t dim, int64_t heads, int64_t hidden) : heads_(heads) {
    ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({dim})));
    ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({dim})));
    q = register_module("q", nn::Linear(dim, dim));
    k = register_module("k", nn::Linear(dim, dim));
    v = register_module("v", nn::Linear(dim, dim));
    proj = register_module("proj", nn::Linear(dim, dim));
    up = register_module("up", nn::Linear(dim, hidden));
    down = register_module("down", nn::Linear(hidden, dim));
  }
  Tensor forward(const Tensor& x, const Tensor& causal) {
    const int64_t b = x.size(0), t = x.size(1), hd = x.size(2) / heads_;
    auto heads = [&](const Tensor& y) { return y.reshape({b, t, heads_, hd}).transpose(1, 2); };
    Tensor n = ln1(x);
    Tensor att = heads(q(n)).matmul(heads(k(n)).transpose(-1, -2)) / std::sqrt(double(hd));
    att = att.masked_fill(causal, -INFINITY).softmax(-1);
    Tensor y = x + proj(att.matmul(heads(v(n))).transpose(1, 2).reshape({b, t, -1}));
    return y + down(gelu(up(ln2(y))));
  }
  nn::LayerNorm ln1 = nullptr, ln2 = nullptr;
  nn::Linear q = nullptr, k = nullptr, v = nullptr, proj = nullptr, up = nullptr, down = nullptr;

private:
  int64_t heads_;
};
WEFT_MODULE(Layer);

/// Token and position embeddings, `layers` transformer layers, a final norm and a linear head.
class GptImpl : public nn::Module {
public:
  GptImpl(int64_t vocab, int64_t context, int64_t dim, int64_t heads, int64_t layers,
          int64_t hidden) {
    tok = register_module("tok", nn::Embedding(vocab, dim));
    pos = register_module("pos", nn::Embedding(context, dim));
    for (int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("layer" + std::to_string(i), Layer(dim, heads, hidden)));
    norm = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({dim})));
    head = register_module("head", nn::Linear(dim, vocab));
    causal = register_buffer("causal", ones({context, context}, kBool).triu(1));
  }
  Tensor forward(const Tensor& idx) {
    Tensor x = tok(idx) + pos(arange(idx.size(1), TensorOptions(kInt64).device(idx.device())));
    for (Layer& layer : blocks)
      x = layer->forward(x, causal);
    return head(norm(x));
  }
  nn::Embedding tok = nullptr, pos = nullptr;
  std::vector<Layer> blocks;
  nn::LayerNorm norm = nullptr;
  nn::Linear head = nullptr;
  Tensor causal;
};
WEFT_MODULE(Gpt);

/// One train step of `model` with `opt` on (x, y): cross-entropy over every position (the
/// output's last dim holds the classes), backward, step, zero_grad; returns the loss.
template <typename Model>
std::function<Tensor(const Tensor&, const Tensor&)> trainStep(Model& model, optim::Optimizer& opt) {
  return [&model, &opt](const Tensor& x, const Tensor& y) {
    Tensor out = model->forward(x);
    Tensor loss = nn::functional::cross_entropy(out.flatten(0, out.dim() - 2), y.flatten());
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  };
}

} // namespace weft::bench
