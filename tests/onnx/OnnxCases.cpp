// Writes the models check_onnxruntime.js runs in onnxruntime: each exported with export_onnx(),
// with inputs and the outputs weft computes eagerly for them (eval mode, no autograd), as raw
// little-endian bytes, listed in DIR/manifest.json. The models: the Fashion-MNIST CNN of
// examples/fashion_mnist (batch norm with trained-looking statistics, max pooling, dropout), an
// MLP, a transformer encoder layer (and one with GELU, pre-norm and a mask), a two-layer LSTM
// (output, h_n and c_n), and a function spanning the ops the exporter translates; the CNN, MLP,
// encoder layer and LSTM also with a dynamic batch, run at another batch size than exported.
// Usage: weft_onnx_cases DIR
#include <weft/Onnx.h>
#include <weft/weft.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace {

using namespace weft;

void writeFile(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  WEFT_CHECK(static_cast<bool>(out), IO, "cannot write ", path);
}

/// One tensor's manifest entry; its bytes go to DIR/<file>.
std::string tensorEntry(const std::string& dir, const std::string& file, const std::string& name,
                        const Tensor& t) {
  Tensor dense = t.detach().contiguous();
  writeFile(dir + "/" + file, dense.data_ptr(),
            static_cast<size_t>(dense.numel()) * elementSize(dense.dtype()));
  std::ostringstream s;
  s << "{\"name\": \"" << name << "\", \"dtype\": \"" << dtypeName(dense.dtype())
    << "\", \"shape\": [";
  for (int64_t d = 0; d < dense.dim(); ++d)
    s << (d ? ", " : "") << dense.size(d);
  s << "], \"file\": \"" << file << "\"}";
  return s.str();
}

class Cases {
public:
  explicit Cases(std::string dir) : dir_(std::move(dir)) {}

  /// Exports `fn` over `module` on `inputs` as DIR/<name>.onnx and records inputs (`run`, when
  /// given: of another size of a dynamic dimension) and the eager outputs for them.
  void add(const std::string& name, nn::Module& module, const TensorFunction& fn,
           const std::vector<Tensor>& examples, const OnnxOptions& options = {},
           const std::vector<Tensor>& run = {}, double tolerance = 1e-5) {
    export_onnx(module, fn, examples, dir_ + "/" + name + ".onnx", options);
    const std::vector<Tensor>& inputs = run.empty() ? examples : run;
    const bool training = module.is_training();
    module.eval();
    std::vector<Tensor> outputs;
    {
      NoGradGuard noGrad;
      outputs = fn(inputs);
    }
    module.train(training);
    std::ostringstream s;
    s << "{\"name\": \"" << name << "\", \"model\": \"" << name << ".onnx\", \"tolerance\": "
      << tolerance << ",\n   \"inputs\": [";
    for (size_t i = 0; i < inputs.size(); ++i)
      s << (i ? ", " : "")
        << tensorEntry(dir_, name + ".in" + std::to_string(i) + ".bin", "a" + std::to_string(i),
                       inputs[i]);
    s << "],\n   \"outputs\": [";
    for (size_t i = 0; i < outputs.size(); ++i)
      s << (i ? ", " : "")
        << tensorEntry(dir_, name + ".out" + std::to_string(i) + ".bin", "out" + std::to_string(i),
                       outputs[i]);
    s << "]}";
    entries_.push_back(s.str());
    std::printf("%-36s %zu inputs, %zu outputs\n", name.c_str(), inputs.size(), outputs.size());
  }

  void writeManifest() const {
    std::string json = "{\"cases\": [\n  ";
    for (size_t i = 0; i < entries_.size(); ++i)
      json += (i ? ",\n  " : "") + entries_[i];
    json += "\n]}\n";
    writeFile(dir_ + "/manifest.json", json.data(), json.size());
  }

private:
  std::string dir_;
  std::vector<std::string> entries_;
};

/// Running statistics a trained network would have, so that eval-mode batch norm is not the
/// identity.
void trainedStatistics(nn::Module& m) {
  for (auto& [name, b] : m.named_buffers()) {
    NoGradGuard noGrad;
    if (name.ends_with("running_mean")) b.copy_(randn(b.sizes()) * 0.2);
    if (name.ends_with("running_var")) b.copy_(rand(b.sizes()) + 0.5);
  }
}

/// Every op family export_onnx translates, on one input of positive and negative values.
std::vector<Tensor> manyOps(const Tensor& x, const Tensor& w, const Tensor& idx) {
  Tensor p = x.abs() + 0.5;
  std::vector<Tensor> out;
  out.push_back(x.neg().exp() + p.log() + p.sqrt() + p.rsqrt() + x.sin() + x.cos() + x.tanh() +
                x.sigmoid() + x.erf() + p.reciprocal() + x.floor() + x.ceil() + x.round() +
                x.trunc() + p.log2() + p.log10() + x.exp2() + p.log1p() + x.expm1() + x.erfc() +
                x.atan() + x.sign() + x.relu() + x.tanh().asin() + x.tanh().acos() +
                x.sinh() + x.cosh() + x.asinh() + (p + 1).acosh() + (x.tanh() * 0.9).atanh());
  out.push_back(maximum(x, w) - minimum(x, w) + x.pow(2) + fmod(x, w.abs() + 0.5) +
                floor_divide(x, w.abs() + 0.5) + x / (w.abs() + 1));
  Tensor i = (x * 3).to(kInt64);
  Tensor j = (w * 3).to(kInt64).abs() + 1;
  out.push_back(floor_divide(i, j) + fmod(i, j) + i * j - i);
  out.push_back(where(x > w, x, w) + (x >= w).to(kFloat32) + (x <= 0).to(kFloat32) +
                (x == w).to(kFloat32) + (x != w).to(kFloat32) +
                ((x > 0).logical_and(w > 0)).to(kFloat32) +
                ((x > 0).logical_or(w > 0)).to(kFloat32) +
                ((x > 0).logical_xor(w > 0)).to(kFloat32) + (x < 0).logical_not().to(kFloat32));
  out.push_back(x.sum(1) + x.mean(1) + x.amax(1) + x.amin(1) + (p * 0.5 + 0.5).prod(1));
  out.push_back(x.sum());
  out.push_back(x.argmax(1));
  out.push_back(x.argmin(0, true));
  out.push_back(x.cumsum(1) + x.softmax(1) + x.log_softmax(0));
  out.push_back(x.flip({0, 1}) + x.transpose(0, 1).reshape({x.size(0), x.size(1)}));
  out.push_back(cat({x, w * 2}, 1).narrow(1, 1, 5));
  out.push_back(pad(x, {1, 2, 0, 1}, 0.5));
  out.push_back(x.gather(1, idx) + x.index_select(1, idx[0]).sum(1, true));
  out.push_back(x.scatter_add(1, idx, w.narrow(1, 0, idx.size(1))) +
                x.scatter(1, idx, w.narrow(1, 0, idx.size(1))));
  out.push_back(x.index_add(1, idx[0], w.narrow(1, 0, idx.size(1))));
  out.push_back(x.argsort(1, true));
  out.push_back(x.unsqueeze(0).expand({3, x.size(0), x.size(1)}) * 2);
  out.push_back(x.to(kFloat64) * 3 + 1);
  out.push_back(nn::functional::gelu(x) + nn::functional::silu(x) + nn::functional::softplus(x) +
                nn::functional::leaky_relu(x) + nn::functional::hardtanh(x));
  Tensor img = x.reshape({1, 1, x.size(0), x.size(1)});
  Tensor k = w.narrow(1, 0, 3).narrow(0, 0, 3).reshape({1, 1, 3, 3});
  out.push_back(conv_transpose2d(img, k, {}, 2, 1, 1) + 0);
  out.push_back(avg_pool2d(img, 2) + max_pool2d(img, 2));
  out.push_back(x.matmul(w.transpose(0, 1)));
  out.push_back(x.clamp(-0.5, 0.5) + x.masked_fill(x > 1, 1.0));
  out.push_back(x.logsumexp(1));
  // Where a plain translation would differ: float floor division computed from fmod (1 // 0.1
  // is 9), an int64 sentinel past 2^53, a 0-d index, ceil-mode pooling whose last window would
  // start in the padding.
  Tensor one = x * 0 + 1;
  out.push_back(floor_divide(one, one * 0.1) + floor_divide(-one * 7.5, one * 2) +
                floor_divide(x, (w.abs() + 0.25) * -1));
  out.push_back(where(x > 0, i, full({}, std::numeric_limits<int64_t>::max(), kInt64)).amin(1));
  out.push_back(x.index_select(1, full({}, 2, kInt64)));
  Tensor five = cat({x, w.narrow(0, 0, 1)}, 0).narrow(1, 0, 5).reshape({1, 1, 5, 5});
  out.push_back(max_pool2d(five, 2, 2, 1, 1, true));
  return out;
}

} // namespace

int main(int argc, char** argv) try {
  WEFT_CHECK(argc == 2, Value, "usage: weft_onnx_cases DIR");
  const std::string dir = argv[1];
  std::filesystem::create_directories(dir);
  manual_seed(1234);
  Cases cases(dir);

  // The Fashion-MNIST CNN (examples/fashion_mnist, width 1).
  nn::Sequential cnn(
      nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1).bias(false)), nn::BatchNorm2d(16),
      nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1).bias(false)),
      nn::BatchNorm2d(32), nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(),
      nn::Linear(32 * 7 * 7, 128), nn::ReLU(), nn::Dropout(0.2), nn::Linear(128, 10));
  trainedStatistics(*cnn);
  cases.add("fashion_cnn", *cnn,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cnn->forward(in[0])}; },
            {rand({8, 1, 28, 28})});

  nn::Sequential mlp(nn::Linear(784, 256), nn::ReLU(), nn::Linear(256, 128), nn::Tanh(),
                     nn::Linear(128, 10), nn::LogSoftmax(1));
  cases.add("mlp", *mlp,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp->forward(in[0])}; },
            {randn({16, 784})});

  nn::TransformerEncoderLayer encoder(nn::TransformerEncoderLayerOptions(64, 4).dim_feedforward(128));
  cases.add("transformer_encoder", *encoder,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{encoder->forward(in[0])}; },
            {randn({10, 3, 64})});
  nn::TransformerEncoderLayer preNorm(nn::TransformerEncoderLayerOptions(32, 4)
                                          .dim_feedforward(64)
                                          .activation("gelu")
                                          .norm_first(true)
                                          .batch_first(true));
  Tensor causal = triu(full({7, 7}, -1e9), 1);
  cases.add("transformer_encoder_prenorm_masked", *preNorm,
            [&](const std::vector<Tensor>& in) {
              return std::vector<Tensor>{preNorm->forward(in[0], causal)};
            },
            {randn({2, 7, 32})});

  nn::LSTM lstm(nn::LSTMOptions(12, 20).num_layers(2));
  cases.add("lstm", *lstm,
            [&](const std::vector<Tensor>& in) {
              auto [out, state] = lstm->forward(in[0]);
              return std::vector<Tensor>{out, std::get<0>(state), std::get<1>(state)};
            },
            {randn({9, 4, 12})});

  // A dynamic batch: exported at one size, run at another.
  cases.add("fashion_cnn_dynamic_batch", *cnn,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{cnn->forward(in[0])}; },
            {rand({8, 1, 28, 28})}, OnnxOptions().dynamic_dim(0), {rand({3, 1, 28, 28})});
  cases.add("mlp_dynamic_batch", *mlp,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mlp->forward(in[0])}; },
            {randn({16, 784})}, OnnxOptions().dynamic_dim(0), {randn({1, 784})});
  cases.add("transformer_encoder_dynamic_batch", *encoder,
            [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{encoder->forward(in[0])}; },
            {randn({10, 3, 64})}, OnnxOptions().dynamic_dim(1), {randn({10, 5, 64})});
  cases.add("lstm_dynamic_batch", *lstm,
            [&](const std::vector<Tensor>& in) {
              auto [out, state] = lstm->forward(in[0]);
              return std::vector<Tensor>{out, std::get<0>(state), std::get<1>(state)};
            },
            {randn({9, 4, 12})}, OnnxOptions().dynamic_dim(1), {randn({9, 2, 12})});

  nn::Sequential none;
  Tensor idx = randint(0, 6, {4, 3});
  cases.add("many_ops", *none,
            [&](const std::vector<Tensor>& in) { return manyOps(in[0], in[1], idx); },
            {randn({4, 6}), randn({4, 6})});

  cases.writeManifest();
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "weft_onnx_cases: %s\n", e.what());
  return 1;
}
