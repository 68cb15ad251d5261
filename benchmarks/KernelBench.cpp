// Eager CPU kernel benchmarks, each beside its baseline in the same run: elementwise and a chain
// against memcpy of the same bytes, sum, matmul against a direct cblas_sgemm, conv2d time and
// peak workspace at batch 1 vs 64, a conv's fused epilogue against the bare conv, and the heap
// memory one recorded autograd op keeps alive, and gather / index_select of 1M indices against a
// plain unchecked C++ loop over the same indices (what an index's bounds check costs).
#include <weft/weft.h>

#include "weft/runtime/Storage.h"

#include <benchmark/benchmark.h>
#include <cblas.h>
#include <cmath>

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <vector>

using namespace weft;

namespace {

constexpr int64_t kElems = int64_t{1} << 24; // 64 MiB per float32 operand: well past the caches

void setBytes(benchmark::State& state, int64_t bytesPerIter) {
  state.SetBytesProcessed(state.iterations() * bytesPerIter);
}

void BM_Memcpy(benchmark::State& state) {
  // The bandwidth baseline: read 64 MiB, write 64 MiB.
  std::vector<float> a(kElems, 1.0f), c(kElems);
  for (auto _ : state) {
    std::memcpy(c.data(), a.data(), kElems * sizeof(float));
    benchmark::DoNotOptimize(c.data());
  }
  setBytes(state, 2 * kElems * static_cast<int64_t>(sizeof(float)));
}

void BM_Add(benchmark::State& state) {
  Tensor a = rand({kElems}), b = rand({kElems});
  for (auto _ : state)
    benchmark::DoNotOptimize((a + b).data_ptr());
  setBytes(state, 3 * kElems * static_cast<int64_t>(sizeof(float)));
}

void BM_MulAddChain(benchmark::State& state) {
  // x*y+z as two eager kernels: the traffic a fused kernel would need is 4 x 64 MiB.
  Tensor x = rand({kElems}), y = rand({kElems}), z = rand({kElems});
  for (auto _ : state)
    benchmark::DoNotOptimize((x * y + z).data_ptr());
  setBytes(state, 4 * kElems * static_cast<int64_t>(sizeof(float)));
}

void BM_MulAddChainCompiled(benchmark::State& state) {
  // The same x*y+z compiled: one generated kernel reads x, y, z once and writes the result once.
  Tensor x = rand({kElems}), y = rand({kElems}), z = rand({kElems});
  auto f = compile([](const Tensor& a, const Tensor& b, const Tensor& c) { return a * b + c; });
  f(x, y, z);
  if (f.compiled().num_kernels() != 1) state.SkipWithError("no generated kernel");
  for (auto _ : state)
    benchmark::DoNotOptimize(f(x, y, z).data_ptr());
  setBytes(state, 4 * kElems * static_cast<int64_t>(sizeof(float)));
}

void BM_GeluCompiled(benchmark::State& state) {
  // gelu (erf form) as eager kernels (range(0)) or one generated kernel (range(1)): 2 x 64 MiB.
  Tensor x = rand({kElems});
  auto eager = [](const Tensor& a) { return a * 0.5 * ((a * 0.7071067811865476).erf() + 1.0); };
  auto f = compile(eager);
  for (auto _ : state)
    benchmark::DoNotOptimize((state.range(0) ? f(x) : eager(x)).data_ptr());
  setBytes(state, 2 * kElems * static_cast<int64_t>(sizeof(float)));
}

void BM_LayerNorm(benchmark::State& state) {
  // layer norm over rows of 128 (the GPT benchmark's [16, 64, 128] as [1024, 128]) with weight and
  // bias, as eager kernels (range(0)) or one generated row kernel (range(1)): reads x once, writes
  // y once, 2 x 512 KiB.
  Generator g(3);
  Tensor x = randn({1024, 128}, kFloat32, g), w = randn({128}, kFloat32, g),
         b = randn({128}, kFloat32, g);
  auto eager = [&](const Tensor& a) {
    Tensor mu = a.mean({-1}, true);
    Tensor c = a - mu;
    return c * ((c * c).mean({-1}, true) + 1e-5).rsqrt() * w + b;
  };
  auto f = compile(eager);
  for (auto _ : state)
    benchmark::DoNotOptimize((state.range(0) ? f(x) : eager(x)).data_ptr());
  setBytes(state, 2 * x.numel() * static_cast<int64_t>(sizeof(float)));
}

void BM_Sum(benchmark::State& state) {
  Tensor a = rand({kElems});
  for (auto _ : state)
    benchmark::DoNotOptimize(a.sum().data_ptr());
  setBytes(state, kElems * static_cast<int64_t>(sizeof(float)));
}

void setFlops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * n * n * n),
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}

void BM_Matmul(benchmark::State& state) {
  int64_t n = state.range(0);
  Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state)
    benchmark::DoNotOptimize(a.matmul(b).data_ptr());
  setFlops(state, n);
}

void BM_CblasSgemm(benchmark::State& state) {
  int64_t n = state.range(0);
  std::vector<float> a(static_cast<size_t>(n * n), 0.5f), b(static_cast<size_t>(n * n), 0.25f),
      c(static_cast<size_t>(n * n));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), static_cast<int>(n),
                static_cast<int>(n), 1.0f, a.data(), static_cast<int>(n), b.data(),
                static_cast<int>(n), 0.0f, c.data(), static_cast<int>(n));
    benchmark::DoNotOptimize(c.data());
  }
  setFlops(state, n);
}

void BM_Conv2d(benchmark::State& state) {
  // 3x3 conv, 64 -> 64 channels on 56x56 images (a ResNet stage): workspace vs batch size.
  int64_t batch = state.range(0);
  Tensor x = randn({batch, 64, 56, 56}), w = randn({64, 64, 3, 3});
  int64_t io = (x.numel() + batch * 64 * 56 * 56) * static_cast<int64_t>(sizeof(float));
  int64_t peakExtra = 0;
  for (auto _ : state) {
    resetPeakMemory();
    int64_t before = memoryStats().currentBytes;
    Tensor y = conv2d(x, w, {}, {1}, {1});
    benchmark::DoNotOptimize(y.data_ptr());
    // Everything that was alive at the peak beyond the output (as allocated) is workspace.
    int64_t output = memoryStats().currentBytes - before;
    peakExtra = memoryStats().peakBytes - before - output;
  }
  state.counters["workspace_MiB"] = static_cast<double>(peakExtra) / (1 << 20);
  state.counters["io_MiB"] = static_cast<double>(io) / (1 << 20);
  state.counters["images/s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_ConvEpilogue(benchmark::State& state) {
  // A ResNet stage's 3x3 conv, 64 -> 64 channels on 56x56 images, batch 16 (12.25 MiB out, past
  // the caches): the bare eager conv (range(0)), eager conv + bias + ReLU (1), and compiled, where
  // the bias and ReLU run inside the conv on each sample as it is written (2). What 1 and 2 take
  // beyond 0 is the epilogue's cost.
  Generator g(5);
  Tensor x = randn({16, 64, 56, 56}, kFloat32, g), w = randn({64, 64, 3, 3}, kFloat32, g),
         b = randn({64}, kFloat32, g);
  auto layer = [&](const Tensor& a) { return conv2d(a, w, b, {1}, {1}).relu(); };
  auto f = compile(layer);
  f(x); // compiled before the timing
  for (auto _ : state) {
    Tensor y = state.range(0) == 0   ? conv2d(x, w, {}, {1}, {1})
               : state.range(0) == 1 ? layer(x)
                                     : f(x);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetLabel(state.range(0) == 0   ? "conv alone"
                 : state.range(0) == 1 ? "eager conv + bias + relu"
                                       : "compiled, epilogue per sample");
}

void BM_Softmax(benchmark::State& state) {
  // Attention scores of the GPT benchmark: [16, 4, 64, 64] over the last dim, plain (0) or with a
  // causal mask of -inf above the diagonal (1).
  Tensor x = randn({16, 4, 64, 64});
  if (state.range(0) == 1) x = x.masked_fill(ones({64, 64}, kBool).triu(1), -INFINITY);
  for (auto _ : state) {
    Tensor y = x.softmax(-1);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["elements/s"] = benchmark::Counter(static_cast<double>(x.numel()),
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

/// Heap bytes one recorded op keeps alive (its node, saved tensors, metadata): a chain of 100,000
/// ops on a one-element leaf, `y = y + 0` (saves nothing) or `y = y * 2` (saves the scalar).
void BM_RecordedOpMemory(benchmark::State& state) {
  constexpr int kOps = 100000;
  Tensor x = ones({1}, TensorOptions().requires_grad());
  double perOp = 0;
  for (auto _ : state) {
    size_t before = mallinfo2().uordblks;
    Tensor y = x;
    for (int i = 0; i < kOps; ++i)
      y = state.range(0) == 0 ? y + 0.0 : y * 2.0;
    perOp = static_cast<double>(mallinfo2().uordblks - before) / kOps;
  }
  state.counters["bytes_per_op"] = perOp;
  state.SetLabel(state.range(0) == 0 ? "y = y + 0.0" : "y = y * 2.0");
}

constexpr int64_t kIndexed = int64_t{1} << 20; // indices per gather / index_select

/// 1M random int64 indices into [0, n) and the float32 values they pick from.
std::vector<int64_t> randomIndices(int64_t count, int64_t n) {
  std::vector<int64_t> ix(static_cast<size_t>(count));
  uint64_t s = 12345;
  for (int64_t& v : ix) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(n));
  }
  return ix;
}

void BM_GatherIndices(benchmark::State& state) {
  // gather along dim 1 of [1024, 1024] with a [1024, 1024] index (range(0) = 1), or the same
  // picks as a plain loop without bounds checks (range(0) = 0): reads 8 + 4 bytes, writes 4 per
  // index.
  constexpr int64_t kRows = 1024, kCols = kIndexed / kRows;
  std::vector<int64_t> ix = randomIndices(kIndexed, kCols);
  Tensor x = rand({kRows, kCols}), index = from_vector(ix, {kRows, kCols});
  std::vector<float> out(static_cast<size_t>(kIndexed));
  const float* xs = x.data_ptr<float>();
  for (auto _ : state) {
    if (state.range(0) == 1) {
      benchmark::DoNotOptimize(x.gather(1, index).data_ptr());
      continue;
    }
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kCols; ++c)
        out[static_cast<size_t>(r * kCols + c)] =
            xs[r * kCols + ix[static_cast<size_t>(r * kCols + c)]];
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(state.range(0) == 1 ? "weft gather" : "unchecked loop");
  state.SetItemsProcessed(state.iterations() * kIndexed);
}

void BM_IndexSelectIndices(benchmark::State& state) {
  // index_select of 1M elements of a 1M-element vector (range(0) = 1), or a plain loop without
  // bounds checks (range(0) = 0).
  std::vector<int64_t> ix = randomIndices(kIndexed, kIndexed);
  Tensor x = rand({kIndexed}), index = from_vector(ix, {kIndexed});
  std::vector<float> out(static_cast<size_t>(kIndexed));
  const float* xs = x.data_ptr<float>();
  for (auto _ : state) {
    if (state.range(0) == 1) {
      benchmark::DoNotOptimize(x.index_select(0, index).data_ptr());
      continue;
    }
    for (size_t i = 0; i < ix.size(); ++i)
      out[i] = xs[ix[i]];
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(state.range(0) == 1 ? "weft index_select" : "unchecked loop");
  state.SetItemsProcessed(state.iterations() * kIndexed);
}

} // namespace

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MulAddChain)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MulAddChainCompiled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GeluCompiled)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Softmax)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_LayerNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_Sum)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CblasSgemm)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Conv2d)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ConvEpilogue)->DenseRange(0, 2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GatherIndices)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_IndexSelectIndices)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RecordedOpMemory)->Arg(0)->Arg(1)->Iterations(3)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  const char* blasThreads = std::getenv("OPENBLAS_NUM_THREADS");
  benchmark::AddCustomContext("weft_threads", std::to_string(getNumThreads()));
  benchmark::AddCustomContext("OPENBLAS_CORETYPE", core ? core : "(unset)");
  benchmark::AddCustomContext("OPENBLAS_NUM_THREADS", blasThreads ? blasThreads : "(unset)");
  benchmark::AddCustomContext("openblas_config", openblas_get_config());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
