// Linear algebra kernels on batches of square matrices through LAPACK's LU factorization, which
// OpenBLAS carries: getrf factors each matrix, getri inverts it from the factors.
#include "Loops.h"
#include "weft/runtime/Kernels.h"

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

extern "C" {
// LAPACK's Fortran interface (no header ships with Debian's OpenBLAS): column-major, every
// argument by pointer, `info` 0 on success, i > 0 when U(i, i) is exactly zero.
void sgetrf_(const int* m, const int* n, float* a, const int* lda, int* ipiv, int* info);
void dgetrf_(const int* m, const int* n, double* a, const int* lda, int* ipiv, int* info);
void sgetri_(const int* n, float* a, const int* lda, const int* ipiv, float* work, const int* lwork,
             int* info);
void dgetri_(const int* n, double* a, const int* lda, const int* ipiv, double* work,
             const int* lwork, int* info);
void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info);
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w,
             float* work, const int* lwork, int* iwork, const int* liwork, int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w,
             double* work, const int* lwork, int* iwork, const int* liwork, int* info);
}

namespace weft::kernels {
namespace {

void getrf(int n, float* a, int* pivots, int* info) {
  sgetrf_(&n, &n, a, &n, pivots, info);
}
void getrf(int n, double* a, int* pivots, int* info) {
  dgetrf_(&n, &n, a, &n, pivots, info);
}
void getri(int n, float* a, const int* pivots, float* work, int lwork, int* info) {
  sgetri_(&n, a, &n, pivots, work, &lwork, info);
}
void getri(int n, double* a, const int* pivots, double* work, int lwork, int* info) {
  dgetri_(&n, a, &n, pivots, work, &lwork, info);
}
void potrf(char uplo, int n, float* a, int* info) {
  spotrf_(&uplo, &n, a, &n, info);
}
void potrf(char uplo, int n, double* a, int* info) {
  dpotrf_(&uplo, &n, a, &n, info);
}
void syevd(char jobz, int n, float* a, float* w, float* work, int lwork, int* iwork, int liwork,
           int* info) {
  const char uplo = 'L';
  ssyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info);
}
void syevd(char jobz, int n, double* a, double* w, double* work, int lwork, int* iwork, int liwork,
           int* info) {
  const char uplo = 'L';
  dsyevd_(&jobz, &uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info);
}

/// Calls `f(matrix, k)` on a contiguous copy of each matrix k of `x` ([..., n, n], any strides),
/// row-major, which LAPACK reads as its transpose: LU of A^T gives det(A^T) = det(A), and
/// inverting A^T in place leaves (A^T)^-1 = (A^-1)^T, which read back row-major is A^-1.
template <typename T, typename F> void forEachMatrix(const TensorRef& x, F f) {
  const size_t rank = x.shape.size();
  const int64_t n = x.shape[rank - 1];
  const int64_t count = n == 0 ? numel(x.shape) : numel(x.shape) / (n * n);
  WEFT_CHECK(n <= (int64_t{1} << 20), Value, "linear algebra on matrices of size ", n,
             " is not supported");
  Shape batch(x.shape.begin(), x.shape.end() - 2);
  std::vector<T> m(static_cast<size_t>(n * n));
  for (int64_t k = 0; k < (n == 0 ? numel(batch) : count); ++k) {
    // The element offset of matrix k.
    int64_t offset = 0, rest = k;
    for (size_t d = batch.size(); d-- > 0;) {
      offset += (rest % batch[d]) * x.strides[d];
      rest /= batch[d];
    }
    const T* base = static_cast<const T*>(x.data) + offset;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        m[static_cast<size_t>(i * n + j)] = base[i * x.strides[rank - 2] + j * x.strides[rank - 1]];
    f(m.data(), static_cast<int>(n), k);
  }
}

} // namespace

void Inverse(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    std::vector<int> pivots;
    std::vector<T> work;
    forEachMatrix<T>(in[0], [&](T* m, int n, int64_t k) {
      if (n == 0) return;
      pivots.resize(static_cast<size_t>(n));
      work.resize(static_cast<size_t>(n) * 64);
      int info = 0;
      getrf(n, m, pivots.data(), &info);
      WEFT_CHECK(info == 0, Value, "linalg.inv: The diagonal element ", info,
                 " is zero, the inversion could not be completed because the input matrix is "
                 "singular.");
      getri(n, m, pivots.data(), work.data(), static_cast<int>(work.size()), &info);
      WEFT_CHECK(info == 0, Value, "linalg.inv: the inversion failed (LAPACK info ", info, ")");
      std::memcpy(o + k * n * n, m, sizeof(T) * static_cast<size_t>(n) * static_cast<size_t>(n));
    });
  };
  if (in[0].dtype == DType::Float32)
    run(float());
  else
    run(double());
}

namespace {
/// Each matrix's U diagonal from its LU factors, reduced by `f(diagonal element, row exchanged)`
/// from `init` into out (an empty matrix's result is `init`).
template <typename Fold>
void foldLuDiagonal(const TensorRef& x, const TensorRef& out, double init, Fold f) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    std::vector<int> pivots;
    forEachMatrix<T>(x, [&](T* m, int n, int64_t k) {
      pivots.resize(static_cast<size_t>(n));
      int info = 0;
      if (n > 0) getrf(n, m, pivots.data(), &info);
      double r = init; // accumulated in double: float32's log-sums drift by n ulps otherwise
      for (int i = 0; i < n; ++i)
        r = f(r, static_cast<double>(m[static_cast<size_t>(i) * static_cast<size_t>(n + 1)]),
              pivots[static_cast<size_t>(i)] != i + 1);
      o[k] = static_cast<T>(r);
    });
  };
  if (x.dtype == DType::Float32)
    run(float());
  else
    run(double());
}
} // namespace

void Det(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  // The product of U's diagonal, negated for each row exchange.
  foldLuDiagonal(in[0], out, 1.0,
                 [](auto r, auto u, bool swapped) { return r * (swapped ? -u : u); });
}

void LogAbsDet(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  // The sum of log|U's diagonal| (-inf where an element is 0).
  foldLuDiagonal(in[0], out, 0.0, [](auto r, auto u, bool) { return r + std::log(std::fabs(u)); });
}

void Cholesky(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    forEachMatrix<T>(in[0], [&](T* m, int n, int64_t k) {
      if (n == 0) return;
      // The row-major copy read column-major is A^T; its upper factor U (A^T = U^T U, from A^T's
      // upper triangle, A's lower) read back row-major is U^T = L, with A = L L^T.
      int info = 0;
      potrf('U', n, m, &info);
      WEFT_CHECK(info <= 0, Value,
                 "linalg.cholesky: The factorization could not be completed "
                 "because the input is not positive-definite (the leading minor of order ",
                 info, " is not positive-definite).");
      T* l = o + k * n * n;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          l[i * n + j] = j <= i ? m[i * n + j] : T(0); // the other triangle still holds A
    });
  };
  if (in[0].dtype == DType::Float32)
    run(float());
  else
    run(double());
}

namespace {
/// Each symmetric matrix's eigenvalues (ascending) into `values`, and with `vectors` its
/// eigenvectors as columns, through syevd on the lower triangle (column-major, 'L').
void eigh(const TensorRef& x, const TensorRef* values, const TensorRef* vectors) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> w, work;
    std::vector<int> iwork;
    forEachMatrix<T>(x, [&](T* m, int n, int64_t k) {
      if (n == 0) return;
      // Transposed to column-major, so syevd reduces the lower triangle as PyTorch has it do
      // (the same elements read through the upper triangle of the transpose give other
      // eigenvector signs).
      for (int i = 0; i < n; ++i)
        for (int j = i + 1; j < n; ++j)
          std::swap(m[i * n + j], m[j * n + i]);
      const char jobz = vectors != nullptr ? 'V' : 'N';
      w.resize(static_cast<size_t>(n));
      // The workspace sizes LAPACK asks for (syevd's documented minima).
      const int lwork = vectors != nullptr ? 1 + 6 * n + 2 * n * n : 2 * n + 1;
      const int liwork = vectors != nullptr ? 3 + 5 * n : 1;
      work.resize(static_cast<size_t>(lwork));
      iwork.resize(static_cast<size_t>(liwork));
      int info = 0;
      syevd(jobz, n, m, w.data(), work.data(), lwork, iwork.data(), liwork, &info);
      WEFT_CHECK(info == 0, Value, "linalg.eigh: the algorithm failed to converge (LAPACK info ",
                 info, "); the input may contain NaN or infinity");
      if (values != nullptr) std::memcpy(values->ptr<T>() + k * n, w.data(), sizeof(T) * w.size());
      if (vectors == nullptr) return;
      // Column-major Z read row-major is Z^T: transposed back, eigenvector j is column j.
      T* v = vectors->ptr<T>() + k * n * n;
      for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
          v[i * n + j] = m[j * n + i];
    });
  };
  if (x.dtype == DType::Float32)
    run(float());
  else
    run(double());
}
} // namespace

void EighValues(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  eigh(in[0], &out, nullptr);
}

void EighVectors(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  eigh(in[0], nullptr, &out);
}

} // namespace weft::kernels
