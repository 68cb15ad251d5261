// weft-bench-vulkan: the Vulkan device's per-op kernels, each checked against the CPU's kernel on
// the same inputs and timed: eager latency of a few ops (the time one op takes when many are
// issued back to back, as an eager program issues them) and the float32 GEMM's throughput. It
// links the runtime alone: its shaders come from codegen (weft-bench-vulkan) or from a shader pack
// (weft-bench-vulkan-rt --pack FILE, for a machine without MLIR), which weft-bench-vulkan writes
// with --write-pack FILE. benchmarks/gpu/run.sh runs it beside PyTorch.
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Shaders.h"
#if WEFT_BENCH_CODEGEN
#include "weft/codegen/KernelCache.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace weft {
namespace {

/// A float32 tensor on the host and its copy on the device.
struct Pair {
  std::vector<float> host;
  std::shared_ptr<Storage> device;
  Shape shape;
  TensorRef cpu() { return TensorRef{host.data(), DType::Float32, shape, contiguousStrides(shape)}; }
  TensorRef gpu() const {
    return refInto(*device, 0, DType::Float32, shape, contiguousStrides(shape));
  }
};

Pair make(hal::Device& dev, Shape shape, std::mt19937& rng, bool fill = true) {
  Pair p;
  p.shape = std::move(shape);
  p.host.resize(static_cast<size_t>(numel(p.shape)));
  std::normal_distribution<float> normal;
  if (fill)
    for (float& v : p.host)
      v = normal(rng);
  p.device = dev.allocate(p.host.size() * 4);
  dev.upload(p.host.data(), *p.device, 0, p.host.size() * 4);
  return p;
}

struct Case {
  std::string name;
  OpCode op;
  std::vector<Shape> inputs;
  Shape out;
  Attrs attrs;
  double flops = 0; // per call, for throughput
  int iterations = 100;
};

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The shaders codegen compiled in this process, for --write-pack.
std::mutex gRecordMutex;
std::vector<hal::PackedShader> gRecorded;
hal::ShaderCode (*gCompile)(const hal::ShaderKey&, const std::string&) = nullptr;
hal::ShaderCode recordCompile(const hal::ShaderKey& key, const std::string& target) {
  hal::ShaderCode code = gCompile(key, target);
  if (code.error.empty()) {
    std::lock_guard<std::mutex> lock(gRecordMutex);
    gRecorded.push_back({key.str(), target, code.words});
  }
  return code;
}

int run(int argc, char** argv) {
  std::string pack, writePack;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--pack" && i + 1 < argc) pack = argv[++i];
    else if (a == "--write-pack" && i + 1 < argc) writePack = argv[++i];
    else if (a == "--quick") quick = true; // small sizes: a check that runs on lavapipe
    else {
      std::fprintf(stderr, "usage: weft-bench-vulkan [--pack FILE | --write-pack FILE] [--quick]\n");
      return 2;
    }
  }
#if WEFT_BENCH_CODEGEN
  (void)codegen::kernelCacheDir(); // codegen's library, whose loading installs its shaders
#endif
  if (!pack.empty()) hal::useShaderPack(pack);
  if (!writePack.empty()) {
    hal::ShaderSource s = hal::shaderSource();
    if (s.compile == nullptr) {
      std::fprintf(stderr, "--write-pack: this build has no shader compiler (use weft-bench-vulkan)\n");
      return 2;
    }
    gCompile = s.compile;
    hal::setShaderSource({&recordCompile, s.cacheDir});
  }
  hal::Device& dev = hal::vulkanDevice(0);
  std::printf("device: %s\ntarget: %s\n", dev.limits().name.c_str(), dev.limits().codeTarget.c_str());
  for (const hal::Limits::CooperativeMatrix& c : dev.limits().cooperativeMatrix)
    std::printf("cooperative matrix: %ux%ux%u %s x %s + %s -> %s (%s)\n", c.m, c.n, c.k, c.a.c_str(),
                c.b.c_str(), c.c.c_str(), c.result.c_str(), c.scope.c_str());
  const int64_t big = quick ? 64 : 1024, gemm = quick ? 256 : 4096;
  std::vector<Case> cases = {
      {"add [1M]", OpCode::Add, {{1 << 20}, {1 << 20}}, {1 << 20}, {}, 0, 200},
      {"matmul " + std::to_string(big) + "^3", OpCode::MatMul, {{big, big}, {big, big}},
       {big, big}, {}, 2.0 * big * big * big, 50},
      {"conv 32x64x56x56 k3", OpCode::Conv,
       {{quick ? 2 : 32, 64, 56, 56}, {64, 64, 3, 3}}, {quick ? 2 : 32, 64, 56, 56},
       Attrs{{"stride", Shape{1, 1}}, {"padding", Shape{1, 1}}, {"dilation", Shape{1, 1}},
             {"groups", int64_t{1}}},
       2.0 * (quick ? 2 : 32) * 64 * 56 * 56 * 64 * 9, 20},
      {"softmax [4096, 1024]", OpCode::Softmax, {{4096, 1024}}, {4096, 1024},
       Attrs{{"dim", int64_t{1}}}, 0, 50},
      {"sum [16M]", OpCode::Sum, {{1 << 24}}, {}, Attrs{{"dims", Shape{}}, {"keepdim", false}}, 0,
       50},
      {"gemm " + std::to_string(gemm) + "^3 fp32", OpCode::MatMul, {{gemm, gemm}, {gemm, gemm}},
       {gemm, gemm}, {}, 2.0 * gemm * gemm * gemm, quick ? 3 : 20},
  };
  std::mt19937 rng(7);
  std::printf("%-26s %12s %12s %10s %s\n", "op", "us/op", "TFLOP/s", "max err", "check");
  int failures = 0;
  for (Case& c : cases) {
    std::vector<Pair> in;
    for (const Shape& s : c.inputs)
      in.push_back(make(dev, s, rng));
    Pair out = make(dev, c.out, rng, false);
    std::vector<TensorRef> gpuIn, cpuIn;
    for (Pair& p : in) {
      gpuIn.push_back(p.gpu());
      cpuIn.push_back(p.cpu());
    }
    // Checked against the CPU's kernel: relative to the largest magnitude of the CPU's result.
    std::vector<float> want(out.host.size());
    runKernel(c.op, cpuIn, TensorRef{want.data(), DType::Float32, c.out, contiguousStrides(c.out)},
              c.attrs);
    dev.kernels().run(c.op, gpuIn, out.gpu(), c.attrs);
    dev.download(*out.device, 0, out.host.data(), out.host.size() * 4);
    double scale = 1e-30, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, std::abs(static_cast<double>(want[i])));
      err = std::max(err, std::abs(static_cast<double>(want[i]) - out.host[i]));
    }
    err /= scale;
    const bool ok = err < 1e-3;
    failures += ok ? 0 : 1;
    // Eager latency: `iterations` calls back to back, then waiting for the device; median of 5.
    std::vector<double> times;
    for (int r = 0; r < 5; ++r)
      times.push_back(seconds([&] {
                        for (int i = 0; i < c.iterations; ++i)
                          dev.kernels().run(c.op, gpuIn, out.gpu(), c.attrs);
                        dev.synchronize();
                      }) /
                      c.iterations);
    std::sort(times.begin(), times.end());
    const double t = times[2];
    char tflops[32] = "-";
    if (c.flops > 0) std::snprintf(tflops, sizeof tflops, "%.2f", c.flops / t / 1e12);
    std::printf("%-26s %12.1f %12s %10.1e %s\n", c.name.c_str(), t * 1e6, tflops, err,
                ok ? "ok" : "MISMATCH");
    std::printf("RESULT %s|%.3f|%s\n", c.name.c_str(), t * 1e6, tflops);
  }
  if (hal::vulkanValidationActive())
    std::printf("validation layer messages: %lld\n",
                static_cast<long long>(hal::vulkanValidationMessages()));
  if (!writePack.empty()) {
    hal::writeShaderPack(writePack, gRecorded);
    std::printf("wrote %zu shaders to %s\n", gRecorded.size(), writePack.c_str());
  }
  return failures == 0 ? 0 : 1;
}

} // namespace
} // namespace weft

int main(int argc, char** argv) {
  try {
    return weft::run(argc, argv);
  } catch (const weft::Error& e) {
    std::fprintf(stderr, "weft-bench-vulkan: %s\n", e.what());
    return 1;
  }
}
