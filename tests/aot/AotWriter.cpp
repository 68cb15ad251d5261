// Writes what the AOT runner checks: a compiled function's saved executable, and a small CNN
// exported as an artifact (cnn.weft), with the inputs of one call and that call's outputs (of the
// same compilation, in this process), each as raw little-endian bytes; the CNN's train step
// exported (cnn_train.weft) with data and the state 8 compiled steps leave. With --expect-cached, it
// also checks that every kernel came from the disk cache (a second process compiles nothing).
// Usage: weft_aot_writer DIR [--expect-cached]
#include "weft/codegen/KernelCache.h"
#include "weft/ir/TextFormat.h"
#include "weft/runtime/Artifact.h"

#include <weft/weft.h>

#include <cstdio>
#include <fstream>

namespace {

void writeFile(const std::string& path, const void* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  WEFT_CHECK(static_cast<bool>(out), IO, "cannot write ", path);
}

void writeTensors(const std::string& path, const std::vector<weft::Tensor>& tensors) {
  std::vector<float> all;
  for (const weft::Tensor& t : tensors) {
    std::vector<float> v = t.to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  writeFile(path, all.data(), all.size() * sizeof(float));
}

} // namespace

int main(int argc, char** argv) try {
  using namespace weft;
  bool expectCached = argc == 3 && std::string(argv[2]) == "--expect-cached";
  WEFT_CHECK(argc == 2 || expectCached, Value, "usage: weft_aot_writer DIR [--expect-cached]");
  std::string dir = argv[1];
  manual_seed(7);
  // A small MLP forward: matmuls run in the interpreter, bias + GELU-like chains as kernels.
  auto mlp = compile([](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
    Tensor h = x.matmul(w1) + b1;
    h = h * (h * 1.702).sigmoid();
    return (h.matmul(w2).tanh() * 3).exp();
  });
  std::vector<Tensor> in = {randn({16, 32}), randn({32, 64}) * 0.2, randn({64}),
                            randn({64, 8}) * 0.1};
  Tensor out = mlp(in[0], in[1], in[2], in[3]);
  WEFT_CHECK(mlp.compiled().num_kernels() >= 2, Value, "expected generated kernels, got ",
             mlp.compiled().num_kernels());
  std::vector<uint8_t> bytes = mlp.compiled().executable()->save();
  writeFile(dir + "/mlp.wexe", bytes.data(), bytes.size());
  writeTensors(dir + "/inputs.bin", in);
  writeTensors(dir + "/expected.bin", {out});
  // A CNN exported for inference: its expected outputs are the in-process compiled forward's.
  nn::Sequential cnn(nn::Conv2d(nn::Conv2dOptions(1, 4, 3).padding(1)), nn::ReLU(),
                     nn::MaxPool2d(2), nn::Flatten(), nn::Linear(4 * 4 * 4, 10));
  Tensor image = randn({3, 1, 8, 8});
  export_model(cnn, {image}, dir + "/cnn.weft");
  Tensor logits;
  {
    NoGradGuard noGrad;
    cnn->eval();
    auto forward = compile([&](const Tensor& x) { return cnn->forward(x); });
    logits = forward(image);
  }
  // The same CNN for batches of 1 to 4 images: a program per bucket.
  export_model(cnn, {image}, dir + "/cnn_dynamic.weft", ExportOptions().dynamic_dim(0).buckets({1, 2, 4}));
  writeTensors(dir + "/cnn_inputs.bin", {image});
  writeTensors(dir + "/cnn_expected.bin", {logits});
  // The same for weft-run: the input as safetensors and as .npy, the output as safetensors, under
  // the program's names for them.
  std::shared_ptr<const Artifact> exported = Artifact::open(dir + "/cnn.weft");
  const Executable& forward = exported->program("forward");
  safetensors::save_file({{forward.arguments.at(0).name, image}}, dir + "/cnn_inputs.safetensors");
  safetensors::save_file({{forward.outputs.at(0).name, logits}}, dir + "/cnn_expected.safetensors");
  std::string npy = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, 8, 8), }";
  npy.append(64 - (10 + npy.size() + 1) % 64, ' ');
  npy += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8);
  file += static_cast<char>(npy.size() & 0xFF);
  file += static_cast<char>(npy.size() >> 8);
  file += npy;
  std::vector<float> pixels = image.to_vector<float>();
  file.append(reinterpret_cast<const char*>(pixels.data()), pixels.size() * sizeof(float));
  writeFile(dir + "/cnn_input.npy", file.data(), file.size());
  // A train step of the CNN (Adam), exported, with data for `weft-run --train 8` (four batches of
  // three, cycled) and the state the same step compiled in this process has after those 8 steps.
  {
    optim::Adam adam(cnn->parameters(), optim::AdamOptions(1e-2));
    cnn->train();
    auto step = [&](const std::vector<Tensor>& b) -> std::vector<Tensor> {
      adam.zero_grad();
      Tensor loss = nn::functional::cross_entropy(cnn->forward(b[0]), b[1]);
      loss.backward();
      adam.step();
      return {loss.detach()};
    };
    Tensor xs = randn({12, 1, 8, 8}), ys = randint(10, {12});
    export_train_step(*cnn.ptr(), adam, step, {xs.narrow(0, 0, 3), ys.narrow(0, 0, 3)},
                      dir + "/cnn_train.weft", ExportOptions().input_names({"image", "label"}).output_names({"loss"}));
    safetensors::save_file({{"image", xs}, {"label", ys}}, dir + "/cnn_train_data.safetensors");
    writeFile(dir + "/cnn_train_data.bin", xs.data_ptr(), static_cast<size_t>(xs.numel()) * 4);
    std::ofstream(dir + "/cnn_train_data.bin", std::ios::binary | std::ios::app)
        .write(static_cast<const char*>(ys.data_ptr()), ys.numel() * 8);
    CompiledFunction compiled{CompileOptions()};
    for (int i = 0; i < 8; ++i)
      compiled.call({xs.narrow(0, 3 * (i % 4), 3), ys.narrow(0, 3 * (i % 4), 3)}, step);
    nn::NamedTensors known = cnn->named_parameters();
    for (auto& b : cnn->named_buffers())
      known.push_back(b);
    for (auto& [key, t] : adam.state_dict())
      known.emplace_back("optimizer." + key, t);
    safetensors::TensorMap trained;
    for (auto& [name, t] : compiled.named_state_tensors(known))
      trained.emplace_back(name, t.contiguous());
    safetensors::save_file(trained, dir + "/cnn_trained_expected.safetensors");
  }
  // For weftc: a traced graph as text IR, its state and an input by the graph's names.
  {
    Tensor w = randn({8, 16}), b = randn({16}), x = randn({5, 8});
    TraceResult traced = trace(
        [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{(a[0].matmul(w) + b).relu()}; },
        {x});
    const ir::Graph& g = *traced.graph;
    std::string text = ir::printGraph(g);
    writeFile(dir + "/aot.wir", text.data(), text.size());
    safetensors::TensorMap state;
    for (size_t k = 0; k < traced.state.size(); ++k)
      state.emplace_back(g.value(g.state()[k]).name, traced.state[k]);
    safetensors::save_file(state, dir + "/aot_state.safetensors");
    safetensors::save_file({{g.value(g.arguments()[0]).name, x}}, dir + "/aot_inputs.safetensors");
  }
  codegen::KernelCacheStats cache = codegen::kernelCacheStats();
  std::printf("wrote %s/mlp.wexe (%zu bytes, %zu kernels: %lld compiled, %lld from the cache)\n",
              dir.c_str(), bytes.size(), mlp.compiled().num_kernels(),
              static_cast<long long>(cache.misses), static_cast<long long>(cache.hits));
  return !expectCached || (cache.misses == 0 && cache.hits > 0) ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "weft_aot_writer: %s\n", e.what());
  return 1;
}
