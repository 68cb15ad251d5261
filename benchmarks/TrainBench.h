// weft-bench-train: the same three train steps written with weft::nn (TrainBench.cpp) and
// torch::nn (TrainBenchTorch.cpp), kept in separate files so neither library's headers see the
// other's.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace bench {

/// The input shapes and hyperparameters every implementation uses.
struct Config {
  static constexpr int kMlpBatch = 128;
  static constexpr int kCnnBatch = 64;
  static constexpr int kGptBatch = 16, kGptContext = 64, kGptVocab = 256, kGptDim = 128,
                       kGptHeads = 4, kGptLayers = 2, kGptHidden = 512;
};

/// What one run of one model reports.
struct Result {
  double medianMs = 0;
  double peakMb = 0;    ///< peak bytes held by tensors (the framework's allocator) during
                        ///< the timed steps, parameters and optimizer state included
  double compileMs = 0; ///< all compilations (weft compiled only)
  double firstLoss = 0, lastLoss = 0;
};

/// Runs `warmup` untimed and then `steps` timed calls of `step` (which returns the loss): the
/// median time, and the peak tensor bytes `peakBytes()` reads after `resetPeak()` started the
/// measurement past the warm-up.
template <typename Step, typename ResetPeak, typename PeakBytes>
Result timeSteps(Step&& step, int warmup, int steps, ResetPeak resetPeak, PeakBytes peakBytes) {
  Result r;
  for (int i = 0; i < warmup; ++i) {
    double l = step();
    if (i == 0) r.firstLoss = l;
  }
  resetPeak();
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    r.lastLoss = step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  r.medianMs = ms[ms.size() / 2];
  r.peakMb = static_cast<double>(peakBytes()) / (1 << 20);
  return r;
}

/// Runs `steps` timed steps after `warmup` untimed ones of `model` ("mlp", "cnn", "gpt") on
/// `threads` intra-op threads.
Result runTorch(const std::string& model, int threads, int warmup, int steps);

/// LibTorch's version, for the table.
std::string torchInfo();

} // namespace bench
