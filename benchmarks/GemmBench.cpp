// weft-bench-gemm: float32 C = A B through weft (Tensor::matmul into a preallocated output's
// worth of work, on weft's thread pool) and through OpenBLAS called directly with its own threads,
// side by side at 256, 512 and 1024, with the same number of threads. Prints a table of GFLOP/s
// (medians) and the ratio.
//
//   weft-bench-gemm [--threads N] [--reps N]
#include <weft/weft.h>

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

double medianSeconds(const std::function<void()>& f, int reps) {
  f(); // warm up: caches, pages, thread start
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
  for (int64_t n : {256, 512, 1024}) {
    weft::Tensor a = weft::randn({n, n}, weft::kFloat32, g);
    weft::Tensor b = weft::randn({n, n}, weft::kFloat32, g);
    std::vector<float> c(static_cast<size_t>(n * n));
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * n;
    // weft sets OpenBLAS to one thread and splits GEMMs itself; OpenBLAS alone gets its threads
    // back for its own row, and weft's setting is restored for weft's.
    double weftS = medianSeconds([&] { (void)a.matmul(b); }, reps);
    openblas_set_num_threads(threads);
    double blasS = medianSeconds(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n),
                      static_cast<int>(n), static_cast<int>(n), 1.0f, a.data_ptr<float>(),
                      static_cast<int>(n), b.data_ptr<float>(), static_cast<int>(n), 0.0f, c.data(),
                      static_cast<int>(n));
        },
        reps);
    openblas_set_num_threads(1);
    std::printf("| %5lld | %12.1f | %16.1f | %10.2fx |\n", static_cast<long long>(n),
                flops / weftS / 1e9, flops / blasS / 1e9, blasS / weftS);
  }
  return 0;
}
