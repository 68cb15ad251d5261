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
  return 0;
}
