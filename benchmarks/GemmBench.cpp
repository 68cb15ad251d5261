// weft-bench-gemm: float32 C = A B through weft (Tensor::matmul into a preallocated output's
// worth of work, on weft's thread pool) and through OpenBLAS called directly with its own threads,
// side by side at 256, 512 and 1024, with the same number of threads. Prints a table of GFLOP/s
// (medians) and the ratio. Then, at the train benchmark models' linear-layer shapes, a GEMM with a
// bias + GELU epilogue as compile() runs it today (OpenBLAS on weft's pool, then the epilogue as
// one generated kernel) beside one generated kernel computing both (codegen's GEMM, the epilogue
// applied per register tile): milliseconds and their ratio.
//
//   weft-bench-gemm [--threads N] [--reps N]
#include <weft/weft.h>

#include "weft/codegen/Elementwise.h"
#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/passes/Fusion.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Interpreter.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

double medianSeconds(const std::function<void()>& f, int reps) {
  // Warm up for a tenth of a second: caches, pages, the pool's workers and OpenBLAS's buffer per
  // thread (one call was too few: weft at 256 read 0.62x of OpenBLAS, 1.2x once warm).
  auto warm = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (int i = 0; i < 3 || std::chrono::steady_clock::now() < warm; ++i)
    f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// x @ w.t() + bias, then GELU (tanh form, as weft::gelu traces it), over float32[m, n]: a linear
/// layer with w of [n, k].
std::string geluLinear(int64_t m, int64_t k, int64_t n) {
  const std::string mn = "[" + std::to_string(m) + ", " + std::to_string(n) + "]";
  const std::string t = "float32" + mn;
  std::string text = "graph @linear(%x: float32[" + std::to_string(m) + ", " + std::to_string(k) +
                     "], %w: float32[" + std::to_string(n) + ", " + std::to_string(k) +
                     "], %bias: float32[" + std::to_string(n) + "]) {\n";
  auto line = [&](const std::string& s) { text += "  " + s + "\n"; };
  auto constant = [&](const std::string& name, const char* value) {
    line("%" + name + "0 = full() {shape = [], dtype = float32, value = " + value +
         "} : float32[]");
    line("%" + name + " = expand(%" + name + "0) {shape = " + mn + "} : " + t);
  };
  constant("c", "0.044715"); // before the matmul (else the epilogue reads values made after it)
  constant("k", "0.7978845608028654");
  constant("one", "1.0");
  constant("half", "0.5");
  line("%wt = permute(%w) {dims = [1, 0]} : float32[" + std::to_string(k) + ", " +
       std::to_string(n) + "]");
  line("%y = matmul(%x, %wt) : " + t);
  line("%b = expand(%bias) {shape = " + mn + "} : " + t);
  line("%z = add(%y, %b) : " + t);
  line("%z2 = mul(%z, %z) : " + t);
  line("%z3 = mul(%z2, %z) : " + t);
  line("%q = mul(%z3, %c) : " + t);
  line("%s = add(%z, %q) : " + t);
  line("%u = mul(%s, %k) : " + t);
  line("%th = tanh(%u) : " + t);
  line("%t1 = add(%th, %one) : " + t);
  line("%h = mul(%z, %half) : " + t);
  line("%r = mul(%h, %t1) : " + t);
  line("return(%r)");
  return text + "}\n";
}

/// The plan of `g` with `groups` as generated kernels (the CPU's code loaded), or an empty plan
/// where codegen fails.
std::optional<weft::Plan> planWith(const weft::ir::Graph& g,
                                   const std::vector<weft::ir::FusionGroup>& groups) {
  auto compiled = weft::codegen::compileElementwise(g, groups);
  if (!compiled) return std::nullopt;
  std::vector<weft::ir::FusedKernel> fused;
  for (size_t k = 0; k < groups.size(); ++k) {
    if (compiled.value().kernelOf[k] < 0) return std::nullopt;
    fused.push_back({groups[k], compiled.value().kernelOf[k]});
  }
  weft::KernelTable& table = compiled.value().table;
  table.load(weft::hal::cpu());
  return weft::ir::lowerToPlan(g, fused, std::move(table));
}

/// The epilogue table: per shape, the OpenBLAS + kernel plan and the one-kernel plan.
void epilogueTable(int reps) {
  struct LinearShape {
    const char* model;
    int64_t m, k, n;
  };
  const std::vector<LinearShape> shapes = {
      {"mlp fc1", 128, 784, 256},  {"mlp fc2", 128, 256, 256},  {"cnn fc1", 64, 3136, 128},
      {"gpt qkv", 1024, 128, 384}, {"gpt mlp", 1024, 128, 512}, {"gpt proj", 1024, 512, 128},
      {"gpt head", 1024, 128, 256}};
  std::printf("\nGEMM + bias + GELU, float32, ms (median of %d)\n\n", reps);
  std::printf("| %-8s | %16s | %19s | %14s | %9s |\n", "layer", "M x K x N", "OpenBLAS + kernel",
              "one generated", "speedup");
  std::printf(
      "|----------|------------------|---------------------|----------------|-----------|\n");
  weft::Generator gen(2);
  for (const LinearShape& s : shapes) {
    auto parsed = weft::ir::parseGraph(geluLinear(s.m, s.k, s.n));
    if (!parsed) {
      std::fprintf(stderr, "%s\n", parsed.diagnostic().message.c_str());
      return;
    }
    const weft::ir::Graph& g = parsed.value();
    // OpenBLAS: the matmul in the interpreter, the epilogue as the fuse pass groups it. Fused:
    // the fuse pass letting the matmul lead that group (as WEFT_GEMM=generated does).
    const std::vector<weft::ir::FusionGroup> epilogue =
        weft::passes::findElementwiseGroups(g, weft::codegen::CpuTarget());
    const std::vector<weft::ir::FusionGroup> whole = weft::passes::findElementwiseGroups(
        g, weft::codegen::CpuTarget(),
        [](const weft::ir::Graph&, const std::vector<const weft::ir::Node*>& matmuls) {
          return std::vector<bool>(matmuls.size(), true);
        });
    if (whole.size() != 1 || weft::passes::matmulRoot(g, whole[0]) == nullptr) {
      std::fprintf(stderr, "expected one kernel led by the matmul at %s\n", s.model);
      return;
    }
    auto today = planWith(g, epilogue), fused = planWith(g, whole);
    if (!today || !fused) {
      std::fprintf(stderr, "codegen failed at %s\n", s.model);
      return;
    }
    std::vector<weft::Buffer> args;
    for (weft::ir::ValueId v : g.arguments()) {
      weft::Tensor r = weft::randn(g.type(v).shape, weft::kFloat32, gen);
      args.push_back(weft::allocateBuffer(weft::hal::cpu(), g.type(v).shape, weft::DType::Float32));
      std::memcpy(args.back().ref.data, r.data_ptr<float>(),
                  static_cast<size_t>(r.numel()) * sizeof(float));
    }
    const double a =
        medianSeconds([&] { (void)weft::runPlan(weft::hal::cpu(), *today, args, {}); }, reps);
    const double b =
        medianSeconds([&] { (void)weft::runPlan(weft::hal::cpu(), *fused, args, {}); }, reps);
    char dims[32];
    std::snprintf(dims, sizeof(dims), "%lld x %lld x %lld", static_cast<long long>(s.m),
                  static_cast<long long>(s.k), static_cast<long long>(s.n));
    std::printf("| %-8s | %16s | %19.3f | %14.3f | %8.2fx |\n", s.model, dims, a * 1e3, b * 1e3,
                a / b);
  }
}

} // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::max(1, std::atoi(argv[i + 1]));
    else if (flag == "--reps")
      reps = std::max(1, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--reps N]\n", argv[0]);
      return 2;
    }
  }
  weft::setNumThreads(threads);
  const char* core = std::getenv("OPENBLAS_CORETYPE");
  std::printf("weft-bench-gemm: float32, %d threads each, OPENBLAS_CORETYPE=%s, median of %d\n",
              threads, core != nullptr ? core : "(unset)", reps);
  std::printf("OpenBLAS: %s\n\n", openblas_get_config());
  std::printf("| %5s | %12s | %16s | %11s |\n", "n", "weft GFLOP/s", "OpenBLAS GFLOP/s",
              "weft / BLAS");
  std::printf("|-------|--------------|------------------|-------------|\n");
  weft::Generator g(1);
  const std::vector<int64_t> sizes = {256, 512, 1024};
  std::vector<weft::Tensor> as, bs;
  for (int64_t n : sizes) {
    as.push_back(weft::randn({n, n}, weft::kFloat32, g));
    bs.push_back(weft::randn({n, n}, weft::kFloat32, g));
  }
  // Every weft size first, then every OpenBLAS size: OpenBLAS's own workers keep spinning on the
  // cores for a while after each call, and measured in between they took a core from weft's next
  // size (weft at 512 read 0.52x of OpenBLAS that way, 0.9-1.0x measured alone).
  std::vector<double> weftS, blasS;
  for (size_t i = 0; i < sizes.size(); ++i)
    weftS.push_back(medianSeconds([&] { (void)as[i].matmul(bs[i]); }, reps));
  // weft sets OpenBLAS to one thread and splits GEMMs itself; OpenBLAS alone gets its threads
  // back for its own rows.
  openblas_set_num_threads(threads);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int n = static_cast<int>(sizes[i]);
    std::vector<float> c(static_cast<size_t>(n) * static_cast<size_t>(n));
    blasS.push_back(medianSeconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f,
                      as[i].data_ptr<float>(), n, bs[i].data_ptr<float>(), n, 0.0f, c.data(), n);
        },
        reps));
  }
  openblas_set_num_threads(1);
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double n = static_cast<double>(sizes[i]), flops = 2.0 * n * n * n;
    std::printf("| %5lld | %12.1f | %16.1f | %10.2fx |\n", static_cast<long long>(sizes[i]),
                flops / weftS[i] / 1e9, flops / blasS[i] / 1e9, blasS[i] / weftS[i]);
  }
  epilogueTable(reps);
  return 0;
}
