// GEMM for the CPU kernels: OpenBLAS runs single-threaded inside weft's thread pool, which splits
// the work itself. One pool instead of two keeps OpenBLAS's own workers from spinning on the cores
// while weft's kernels run, and lets small batched GEMMs (attention heads, per-sample
// convolutions) go one per thread instead of each being split.
#pragma once

#include "weft/runtime/ThreadPool.h"

#include <algorithm>
#include <cblas.h>
#include <cstdint>
#include <type_traits>

namespace weft::kernels {

/// Row-major C = op(A) op(B) + beta C on the calling thread; op transposes where `ta`/`tb`.
template <typename T>
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  auto A = ta ? CblasTrans : CblasNoTrans, B = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, A, B, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
  else
    cblas_dgemm(CblasRowMajor, A, B, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

/// Multiply-adds below which one GEMM stays on one thread: waking another costs more.
inline constexpr int64_t kGemmSplitWork = int64_t{1} << 19;

/// gemm() split across the thread pool along the longer of C's rows and columns (in blocks of 16,
/// the width of OpenBLAS's micro-kernels), or on the calling thread when it is small or already
/// inside a parallel region.
template <typename T>
void parallelGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
                  const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  const int64_t threads = getNumThreads();
  if (threads <= 1 || m * n * k < kGemmSplitWork || std::max(m, n) < 32)
    return gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
  const bool byRows = m >= n;
  const int64_t extent = byRows ? m : n;
  const int64_t block = (extent + threads - 1) / threads;
  const int64_t part = (block + 15) / 16 * 16;
  const int64_t parts = (extent + part - 1) / part;
  parallelFor(parts, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      const int64_t lo = p * part, len = std::min(extent, lo + part) - lo;
      if (byRows)
        gemm(ta, tb, len, n, k, a + (ta ? lo : lo * lda), lda, b, ldb, beta, c + lo * ldc, ldc);
      else
        gemm(ta, tb, m, len, k, a, lda, b + (tb ? lo * ldb : lo), ldb, beta, c + lo, ldc);
    }
  });
}

} // namespace weft::kernels
