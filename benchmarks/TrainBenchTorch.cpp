// The LibTorch side of weft-bench-train: the three models in torch::nn, eager, with tensor bytes
// counted by a wrapper around LibTorch's CPU allocator.
#include "TrainBench.h"

#include <c10/core/CPUAllocator.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace bench {
namespace {

/// Counts the bytes LibTorch's CPU tensors hold, and their peak. The data pointer is the deleter's
/// context, as LibTorch's raw_allocate requires, so sizes are kept in a table.
class CountingAllocator final : public c10::Allocator {
public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) { self_ = this; }
  c10::DataPtr allocate(size_t n) const override {
    void* data = inner_->raw_allocate(n);
    {
      std::lock_guard<std::mutex> lock(mu_);
      sizes_[data] = n;
    }
    int64_t now = current_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void resetPeak() { peak_.store(current_.load()); }
  int64_t peak() const { return peak_.load(); }

private:
  static void release(void* data) {
    if (data == nullptr) return;
    size_t n = 0;
    {
      std::lock_guard<std::mutex> lock(self_->mu_);
      auto it = self_->sizes_.find(data);
      n = it->second;
      self_->sizes_.erase(it);
    }
    self_->current_.fetch_sub(static_cast<int64_t>(n));
    self_->inner_->raw_deallocate(data);
  }
  static inline CountingAllocator* self_ = nullptr;
  c10::Allocator* inner_;
  mutable std::mutex mu_;
  mutable std::unordered_map<void*, size_t> sizes_;
  mutable std::atomic<int64_t> current_{0}, peak_{0};
};

CountingAllocator& counter() {
  static auto* c = [] {
    auto* a = new CountingAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(a, /*priority=*/1);
    return a;
  }();
  return *c;
}

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 256));
    fc2 = register_module("fc2", torch::nn::Linear(256, 256));
    fc3 = register_module("fc3", torch::nn::Linear(256, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
  }
};
TORCH_MODULE(Mlp);

struct CnnImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::MaxPool2d pool{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  CnnImpl() {
    conv1 =
        register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)));
    conv2 =
        register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)));
    pool = register_module("pool", torch::nn::MaxPool2d(2));
    fc1 = register_module("fc1", torch::nn::Linear(64 * 7 * 7, 128));
    fc2 = register_module("fc2", torch::nn::Linear(128, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = pool(torch::relu(conv1(x)));
    h = pool(torch::relu(conv2(h)));
    return fc2(torch::relu(fc1(h.flatten(1))));
  }
};
TORCH_MODULE(Cnn);

struct LayerImpl : torch::nn::Module {
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, proj{nullptr}, up{nullptr}, down{nullptr};
  LayerImpl() {
    const int64_t d = Config::kGptDim;
    ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    q = register_module("q", torch::nn::Linear(d, d));
    k = register_module("k", torch::nn::Linear(d, d));
    v = register_module("v", torch::nn::Linear(d, d));
    proj = register_module("proj", torch::nn::Linear(d, d));
    up = register_module("up", torch::nn::Linear(d, Config::kGptHidden));
    down = register_module("down", torch::nn::Linear(Config::kGptHidden, d));
  }
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal) {
    int64_t b = x.size(0), t = x.size(1), h = Config::kGptHeads, hd = Config::kGptDim / h;
    auto heads = [&](const torch::Tensor& y) { return y.reshape({b, t, h, hd}).transpose(1, 2); };
    torch::Tensor n = ln1(x);
    torch::Tensor att = heads(q(n)).matmul(heads(k(n)).transpose(-1, -2)) / std::sqrt(double(hd));
    att = att.masked_fill(causal, -INFINITY).softmax(-1);
    torch::Tensor y = x + proj(att.matmul(heads(v(n))).transpose(1, 2).reshape({b, t, -1}));
    return y + down(torch::gelu(up(ln2(y))));
  }
};
TORCH_MODULE(Layer);

struct GptImpl : torch::nn::Module {
  torch::nn::Embedding tok{nullptr}, pos{nullptr};
  std::vector<Layer> layers;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
  torch::Tensor causal;
  GptImpl() {
    const int64_t d = Config::kGptDim, t = Config::kGptContext;
    tok = register_module("tok", torch::nn::Embedding(Config::kGptVocab, d));
    pos = register_module("pos", torch::nn::Embedding(t, d));
    for (int i = 0; i < Config::kGptLayers; ++i)
      layers.push_back(register_module("layer" + std::to_string(i), Layer()));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    head = register_module("head", torch::nn::Linear(d, Config::kGptVocab));
    causal = torch::ones({t, t}, torch::kBool).triu(1);
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    torch::Tensor x = tok(idx) + pos(torch::arange(idx.size(1)));
    for (Layer& layer : layers)
      x = layer->forward(x, causal);
    return head(norm(x));
  }
};
TORCH_MODULE(Gpt);

template <typename Model, typename Optimizer>
Result train(Model& model, Optimizer& opt, const torch::Tensor& x, const torch::Tensor& y,
             int warmup, int steps) {
  return timeSteps(
      [&] {
        opt.zero_grad();
        torch::Tensor out = model->forward(x);
        torch::Tensor loss =
            torch::nn::functional::cross_entropy(out.flatten(0, out.dim() - 2), y.flatten());
        loss.backward();
        opt.step();
        return loss.item<double>();
      },
      warmup, steps, [] { counter().resetPeak(); }, [] { return counter().peak(); });
}

} // namespace

std::string torchInfo() {
  return "LibTorch " TORCH_VERSION;
}

Result runTorch(const std::string& model, int threads, int warmup, int steps) {
  at::set_num_threads(threads);
  counter();
  torch::manual_seed(0);
  if (model == "mlp") {
    Mlp m;
    torch::optim::Adam opt(m->parameters(), torch::optim::AdamOptions(1e-3));
    torch::Tensor x = torch::randn({Config::kMlpBatch, 784});
    torch::Tensor y = torch::randint(0, 10, {Config::kMlpBatch});
    return train(m, opt, x, y, warmup, steps);
  }
  if (model == "cnn") {
    Cnn m;
    torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::Tensor x = torch::randn({Config::kCnnBatch, 1, 28, 28});
    torch::Tensor y = torch::randint(0, 10, {Config::kCnnBatch});
    return train(m, opt, x, y, warmup, steps);
  }
  Gpt m;
  torch::optim::AdamW opt(m->parameters(), torch::optim::AdamWOptions(1e-3));
  torch::Tensor x = torch::randint(0, Config::kGptVocab, {Config::kGptBatch, Config::kGptContext});
  torch::Tensor y = torch::randint(0, Config::kGptVocab, {Config::kGptBatch, Config::kGptContext});
  return train(m, opt, x, y, warmup, steps);
}

} // namespace bench
