// Whole train steps on a GPU device, for benchmarks/gpu/run.sh's table beside PyTorch
// (benchmarks/gpu/torch_steps.py builds the same models): the GPT-like step of the GPU benchmarks
// (4 layers, d=512, 8 heads, context 256, vocab 8192, batch 16, AdamW) and the Fashion-MNIST-sized
// CNN step (batch 128, AdamW), compiled and eager, and device-to-device copy bandwidth.
//
//   weft-bench-gpu-step [--device vulkan] [--models gpt,cnn,copy] [--modes eager,compiled]
//                       [--quick]
//
// Each step is timed as torch_steps.py times PyTorch's: `iterations` calls back to back, then the
// last loss read (which waits for the device); the median of 5 such runs, per call. Prints
// "RESULT name|us|-" lines (run.sh's format) and, per model, the first and last loss, so that a
// diverging step shows.
#include "TrainModels.h"

#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using weft::Tensor;
using Clock = std::chrono::steady_clock;

/// The median over 5 runs of `iterations` calls of `f`, in microseconds per call; `f` returns a
/// tensor whose read waits for everything before it.
template <typename F> double timed(F&& f, int iterations) {
  std::vector<double> runs;
  for (int r = 0; r < 5; ++r) {
    auto start = Clock::now();
    Tensor last;
    for (int i = 0; i < iterations; ++i)
      last = f();
    (void)last.reshape({-1})[0].item<float>(); // one element read: waits for the queue
    runs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() /
                   iterations);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

void report(const std::string& name, double us) {
  std::printf("RESULT %s|%.3f|-\n", name.c_str(), us);
  std::fflush(stdout);
}

/// Times model `name`'s train step on `device`, eager and compiled.
template <typename Make>
void steps(const std::string& name, Make make, const Tensor& x, const Tensor& y,
           const weft::Device& device, int iterations, const std::string& modes) {
  for (bool compiled : {false, true}) {
    if (modes.find(compiled ? "compiled" : "eager") == std::string::npos) continue;
    weft::manual_seed(0);
    auto model = make();
    model->to(device);
    weft::optim::AdamW opt(model->parameters(), weft::optim::AdamWOptions(1e-4));
    auto eager = weft::bench::trainStep(model, opt);
    auto step = weft::compile(eager, weft::CompileOptions().device(device));
    const Tensor xd = x.to(device), yd = y.to(device);
    auto call = [&]() -> Tensor { return compiled ? Tensor(step(xd, yd)) : eager(xd, yd); };
    const Tensor firstLoss = call();
    const float first = firstLoss.item<float>();
    for (int i = 0; i < 3; ++i) // compiled: the step making the optimizer's state, then the trace
      (void)call();
    const double us = timed(call, iterations);
    const std::string mode = compiled ? "compiled" : "eager";
    const Tensor lastLoss = call();
    std::fprintf(stderr, "%s %s: loss %.4f at the first step, %.4f after %d; %s\n", name.c_str(),
                 mode.c_str(), first, lastLoss.item<float>(), 5 * iterations + 5,
                 compiled ? (std::to_string(step.compiled().num_kernels()) + " generated kernels")
                                .c_str()
                          : "");
    report(name + " step, " + mode, us);
  }
}

} // namespace

int main(int argc, char** argv) {
  std::string device = "vulkan", models = "gpt,cnn,copy", modes = "eager,compiled";
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) device = argv[++i];
    else if (std::strcmp(argv[i], "--models") == 0 && i + 1 < argc) models = argv[++i];
    else if (std::strcmp(argv[i], "--modes") == 0 && i + 1 < argc) modes = argv[++i];
    else if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else {
      std::fprintf(stderr, "usage: weft-bench-gpu-step [--device vulkan] [--models gpt,cnn,copy] "
                           "[--modes eager,compiled] [--quick]\n");
      return 2;
    }
  }
  try {
    const weft::Device dev(device);
    weft::manual_seed(0);
    auto has = [&](const char* m) { return models.find(m) != std::string::npos; };
    if (has("gpt")) {
      // The GPU benchmarks' GPT-like step (--quick: a small one, for a look on a software device).
      const int64_t vocab = quick ? 64 : 8192, ctx = quick ? 16 : 256, dim = quick ? 32 : 512,
                    heads = quick ? 2 : 8, layers = quick ? 1 : 4, batch = quick ? 2 : 16;
      Tensor x = weft::randint(0, vocab, {batch, ctx}), y = weft::randint(0, vocab, {batch, ctx});
      steps(
          "gpt", [&] { return weft::bench::Gpt(vocab, ctx, dim, heads, layers, 4 * dim); }, x, y,
          dev, quick ? 2 : 10, modes);
    }
    if (has("cnn")) {
      const int64_t batch = quick ? 8 : 128;
      Tensor x = weft::randn({batch, 1, 28, 28}), y = weft::randint(0, 10, {batch});
      steps(
          "cnn", [] { return weft::bench::Cnn(32, 64, 28, 128, 10); }, x, y, dev, quick ? 2 : 20,
          modes);
    }
    if (has("copy")) {
      // Device-to-device copy bandwidth: 256 MiB read and written (--quick: 4 MiB).
      const int64_t n = quick ? (1 << 20) : (64 << 20);
      Tensor a = weft::randn({n}).to(dev), b = weft::empty({n}, weft::TensorOptions().device(dev));
      const double us = timed([&] { return b.copy_(a); }, quick ? 2 : 20);
      report("copy 256 MiB", us);
      std::fprintf(stderr, "copy: %.1f GB/s (read + write)\n", 2.0 * 4.0 * double(n) / us / 1e3);
    }
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft-bench-gpu-step: %s\n", e.what());
    return 1;
  }
  return 0;
}
