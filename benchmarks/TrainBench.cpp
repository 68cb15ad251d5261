// weft-bench-train: median train step of three models, weft compiled, weft eager and LibTorch
// eager, side by side in one run, with peak tensor memory and compile latency. Prints a table.
//
// Each cell runs in a child process of its own (this program, re-executed with --child), so one
// framework's allocator caches, thread pools and page faults never bleed into another's numbers.
// Both frameworks get the same number of threads; OpenBLAS, OPENBLAS_CORETYPE and
// OMP_WAIT_POLICY are shared through the environment and printed.
//
//   weft-bench-train [--steps N] [--warmup N] [--threads N] [--models mlp,cnn,gpt]
#include "TrainBench.h"
#include "TrainModels.h"

#include <weft/weft.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" char* openblas_get_config();

namespace bench {
namespace {

using weft::Tensor;

int64_t peakBytes() {
  return weft::memoryStats().peakBytes;
}

template <typename Model, typename Optimizer>
Result train(Model& model, Optimizer& opt, const Tensor& x, const Tensor& y, bool compiled,
             int warmup, int steps) {
  auto body = weft::bench::trainStep(model, opt);
  if (!compiled)
    return timeSteps([&] { return body(x, y).template item<double>(); }, warmup, steps,
                     weft::resetPeakMemory, peakBytes);
  auto step = weft::compile(body);
  double compileMs = 0;
  size_t seen = 0;
  Result r = timeSteps(
      [&] {
        double l = step(x, y).template item<double>();
        if (step.compiled().num_compiled() != seen) { // count every compilation once
          seen = step.compiled().num_compiled();
          compileMs += step.compiled().compile_ms();
        }
        return l;
      },
      warmup, steps, weft::resetPeakMemory, peakBytes);
  r.compileMs = compileMs;
  return r;
}

Result runWeft(const std::string& model, bool compiled, int threads, int warmup, int steps) {
  weft::setNumThreads(threads);
  weft::Generator g(0);
  using weft::bench::Cnn, weft::bench::Gpt, weft::bench::Mlp;
  if (model == "mlp") {
    Mlp m(784, 256, 10);
    weft::optim::Adam opt(m->parameters(), weft::optim::AdamOptions(1e-3));
    Tensor x = weft::randn({Config::kMlpBatch, 784}, weft::kFloat32, g);
    Tensor y = weft::randint(0, 10, {Config::kMlpBatch}, weft::kInt64, g);
    return train(m, opt, x, y, compiled, warmup, steps);
  }
  if (model == "cnn") {
    Cnn m(32, 64, 28, 128, 10);
    weft::optim::SGD opt(m->parameters(), weft::optim::SGDOptions(0.01).momentum(0.9));
    Tensor x = weft::randn({Config::kCnnBatch, 1, 28, 28}, weft::kFloat32, g);
    Tensor y = weft::randint(0, 10, {Config::kCnnBatch}, weft::kInt64, g);
    return train(m, opt, x, y, compiled, warmup, steps);
  }
  Gpt m(Config::kGptVocab, Config::kGptContext, Config::kGptDim, Config::kGptHeads,
        Config::kGptLayers, Config::kGptHidden);
  weft::optim::AdamW opt(m->parameters(), weft::optim::AdamWOptions(1e-3));
  weft::Shape shape{Config::kGptBatch, Config::kGptContext};
  Tensor x = weft::randint(0, Config::kGptVocab, shape, weft::kInt64, g);
  Tensor y = weft::randint(0, Config::kGptVocab, shape, weft::kInt64, g);
  return train(m, opt, x, y, compiled, warmup, steps);
}

/// Runs one cell in a child process and reads its result line.
Result child(const std::string& args) {
  std::string cmd = "/proc/" + std::to_string(::getpid()) + "/exe --child " + args;
  FILE* p = ::popen(cmd.c_str(), "r");
  Result r{};
  if (p == nullptr) return r;
  char line[512];
  bool ok = false;
  while (std::fgets(line, sizeof line, p) != nullptr)
    if (std::sscanf(line, "result %lf %lf %lf %lf %lf", &r.medianMs, &r.peakMb, &r.compileMs,
                    &r.firstLoss, &r.lastLoss) == 5)
      ok = true;
  if (::pclose(p) != 0 || !ok) {
    std::fprintf(stderr, "weft-bench-train: '%s' failed\n", args.c_str());
    std::exit(1);
  }
  return r;
}

int childMain(int argc, char** argv) {
  // --child <model> <weft-compiled|weft-eager|torch> <threads> <warmup> <steps>
  if (argc != 7) return 2;
  std::string model = argv[2], mode = argv[3];
  int threads = std::atoi(argv[4]), warmup = std::atoi(argv[5]), steps = std::atoi(argv[6]);
  Result r = mode == "torch" ? runTorch(model, threads, warmup, steps)
                             : runWeft(model, mode == "weft-compiled", threads, warmup, steps);
  std::printf("result %.6f %.6f %.6f %.6f %.6f\n", r.medianMs, r.peakMb, r.compileMs, r.firstLoss,
              r.lastLoss);
  return 0;
}

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

} // namespace
} // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
  if (argc > 1 && std::strcmp(argv[1], "--child") == 0) return childMain(argc, argv);

  int steps = 30, warmup = 3, threads = 2;
  std::string models = "mlp,cnn,gpt";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--steps")
      steps = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--warmup")
      warmup = std::max(2, std::atoi(argv[i + 1]));
    else if (flag == "--threads")
      threads = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--models")
      models = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--warmup N] [--threads N] [--models a,b]\n",
                   argv[0]);
      return 2;
    }
  }
  // PyTorch's steadier setting on a small machine; set before any child starts its OpenMP.
  ::setenv("OMP_WAIT_POLICY", envOr("OMP_WAIT_POLICY", "PASSIVE"), 1);
  std::string cache = "/tmp/weft-bench-train-cache-" + std::to_string(::getpid());
  ::setenv("WEFT_CACHE_DIR", cache.c_str(), 1);

  std::printf("weft-bench-train: %d threads each; OPENBLAS_CORETYPE=%s; OMP_WAIT_POLICY=%s\n",
              threads, envOr("OPENBLAS_CORETYPE", "(unset)"), envOr("OMP_WAIT_POLICY", ""));
  std::printf("OpenBLAS: %s\n", openblas_get_config());
  std::printf("median of %d steps after %d warm-up steps; peak = most bytes held by tensors "
              "during the timed steps\n",
              steps, warmup);
  std::printf("(weights and optimizer state included); compile = every compilation of the "
              "step, cold: empty kernel cache, warm: a second process\n\n");

  std::printf("| %-6s | %12s | %9s | %10s | %7s | %9s | %11s | %12s | %12s |\n", "model",
              "weft comp ms", "eager ms", "LibTorch ms", "speedup", "weft MB", "LibTorch MB",
              "compile cold", "compile warm");
  std::printf("|--------|--------------|-----------|-------------|---------|-----------|----------"
              "---|--------------|--------------|\n");
  std::ostringstream losses;
  std::stringstream list(models);
  for (std::string model; std::getline(list, model, ',');) {
    auto cell = [&](const char* mode, int w, int s) {
      return child(model + " " + mode + " " + std::to_string(threads) + " " + std::to_string(w) +
                   " " + std::to_string(s));
    };
    std::filesystem::remove_all(cache);
    Result compiled = cell("weft-compiled", warmup, steps);
    Result warm = cell("weft-compiled", 2, 1); // every kernel from the disk cache now
    Result eager = cell("weft-eager", warmup, steps);
    Result torch = cell("torch", warmup, steps);
    std::printf("| %-6s | %12.2f | %9.2f | %11.2f | %6.2fx | %9.1f | %11.1f | %12.0f | %12.0f |\n",
                model.c_str(), compiled.medianMs, eager.medianMs, torch.medianMs,
                torch.medianMs / compiled.medianMs, compiled.peakMb, torch.peakMb,
                compiled.compileMs, warm.compileMs);
    losses << "  " << model << ": weft compiled " << compiled.firstLoss << " -> "
           << compiled.lastLoss << ", weft eager " << eager.firstLoss << " -> " << eager.lastLoss
           << ", LibTorch " << torch.firstLoss << " -> " << torch.lastLoss << "\n";
  }
  std::filesystem::remove_all(cache);
  std::printf("\n%s\nlosses, first warm-up step -> last timed step (same data each step):\n%s",
              torchInfo().c_str(), losses.str().c_str());
  return 0;
}
