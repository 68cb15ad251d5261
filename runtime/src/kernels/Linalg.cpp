// Linear algebra kernels on batches of square matrices through LAPACK's LU factorization, which
// OpenBLAS carries: getrf factors each matrix, getri inverts it from the factors.
#include "Loops.h"
#include "weft/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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
void sgeqrf_(const int* m, const int* n, float* a, const int* lda, float* tau, float* work,
             const int* lwork, int* info);
void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
             const int* lwork, int* info);
void sorgqr_(const int* m, const int* n, const int* k, float* a, const int* lda, const float* tau,
             float* work, const int* lwork, int* info);
void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
             double* work, const int* lwork, int* info);
void sgesdd_(const char* jobz, const int* m, const int* n, float* a, const int* lda, float* s,
             float* u, const int* ldu, float* vt, const int* ldvt, float* work, const int* lwork,
             int* iwork, int* info);
void dgesdd_(const char* jobz, const int* m, const int* n, double* a, const int* lda, double* s,
             double* u, const int* ldu, double* vt, const int* ldvt, double* work, const int* lwork,
             int* iwork, int* info);
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

void geqrf(int m, int n, float* a, float* tau, float* work, int lwork, int* info) {
  sgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void geqrf(int m, int n, double* a, double* tau, double* work, int lwork, int* info) {
  dgeqrf_(&m, &n, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int k, float* a, const float* tau, float* work, int lwork, int* info) {
  sorgqr_(&m, &k, &k, a, &m, tau, work, &lwork, info);
}
void orgqr(int m, int k, double* a, const double* tau, double* work, int lwork, int* info) {
  dorgqr_(&m, &k, &k, a, &m, tau, work, &lwork, info);
}
void gesdd(int m, int n, float* a, float* s, float* u, float* vt, float* work, int lwork,
           int* iwork, int* info) {
  const char jobz = 'S';
  const int k = std::min(m, n);
  sgesdd_(&jobz, &m, &n, a, &m, s, u, &m, vt, &k, work, &lwork, iwork, info);
}
void gesdd(int m, int n, double* a, double* s, double* u, double* vt, double* work, int lwork,
           int* iwork, int* info) {
  const char jobz = 'S';
  const int k = std::min(m, n);
  dgesdd_(&jobz, &m, &n, a, &m, s, u, &m, vt, &k, work, &lwork, iwork, info);
}

/// The element offset in `x` of matrix k of its batch dims `batch`.
int64_t matrixOffset(const TensorRef& x, const Shape& batch, int64_t k) {
  int64_t offset = 0, rest = k;
  for (size_t d = batch.size(); d-- > 0;) {
    offset += (rest % batch[d]) * x.strides[d];
    rest /= batch[d];
  }
  return offset;
}

/// Checks that an m x n matrix fits LAPACK's 32-bit indices.
void checkLapackSize(int64_t m, int64_t n) {
  WEFT_CHECK(m * n <= std::numeric_limits<int>::max(), Value, "linear algebra on matrices of ", m,
             " x ", n, " elements is not supported (LAPACK indexes them with 32-bit integers)");
}

/// Calls `f(a, m, n, k)` on a column-major copy of each matrix k of `x` ([..., m, n], any
/// strides): LAPACK's own layout, so it factors A itself as PyTorch has it do.
template <typename T, typename F> void forEachColumnMajor(const TensorRef& x, F f) {
  const size_t rank = x.shape.size();
  const int64_t m = x.shape[rank - 2], n = x.shape[rank - 1];
  checkLapackSize(m, n);
  Shape batch(x.shape.begin(), x.shape.end() - 2);
  std::vector<T> a(static_cast<size_t>(m * n));
  for (int64_t k = 0; k < numel(batch); ++k) {
    const T* base = static_cast<const T*>(x.data) + matrixOffset(x, batch, k);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        a[static_cast<size_t>(i + j * m)] = base[i * x.strides[rank - 2] + j * x.strides[rank - 1]];
    f(a.data(), static_cast<int>(m), static_cast<int>(n), k);
  }
}

/// Calls `f(matrix, k)` on a contiguous copy of each matrix k of `x` ([..., n, n], any strides),
/// row-major, which LAPACK reads as its transpose: LU of A^T gives det(A^T) = det(A), and
/// inverting A^T in place leaves (A^T)^-1 = (A^-1)^T, which read back row-major is A^-1.
template <typename T, typename F> void forEachMatrix(const TensorRef& x, F f) {
  const size_t rank = x.shape.size();
  const int64_t n = x.shape[rank - 1];
  const int64_t count = n == 0 ? numel(x.shape) : numel(x.shape) / (n * n);
  checkLapackSize(n, n);
  Shape batch(x.shape.begin(), x.shape.end() - 2);
  std::vector<T> m(static_cast<size_t>(n * n));
  for (int64_t k = 0; k < (n == 0 ? numel(batch) : count); ++k) {
    const T* base = static_cast<const T*>(x.data) + matrixOffset(x, batch, k);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        m[static_cast<size_t>(i * n + j)] = base[i * x.strides[rank - 2] + j * x.strides[rank - 1]];
    f(m.data(), static_cast<int>(n), k);
  }
}

} // namespace

void singularMatrix(int64_t info) {
  WEFT_FAIL(Value, "linalg.inv: The diagonal element ", info,
            " is zero, the inversion could not be completed because the input matrix is "
            "singular.");
}

void notPositiveDefinite(int64_t info) {
  WEFT_FAIL(Value,
            "linalg.cholesky: The factorization could not be completed because the input is not "
            "positive-definite (the leading minor of order ",
            info, " is not positive-definite).");
}

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
      if (info != 0) singularMatrix(info);
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
      WEFT_INTERNAL_ASSERT(info >= 0, "potrf rejected argument ", -info);
      if (info != 0) notPositiveDefinite(info);
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
      const int64_t need = vectors != nullptr ? 1 + 6 * int64_t{n} + 2 * int64_t{n} * n : 2 * n + 1;
      WEFT_CHECK(need <= std::numeric_limits<int>::max(), Value, "linalg.eigh: matrices of size ",
                 n, " need more workspace than LAPACK's 32-bit sizes address");
      const int lwork = static_cast<int>(need);
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

namespace {
/// Each matrix's reduced QR: Q into `q` ([..., m, k]) and R into `r` ([..., k, n]), either null.
void qr(const TensorRef& x, const TensorRef* q, const TensorRef* r) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> tau, work;
    forEachColumnMajor<T>(x, [&](T* a, int m, int n, int64_t b) {
      const int k = std::min(m, n);
      if (k == 0) return; // a Q of m x 0 or an R of 0 x n holds nothing
      tau.resize(static_cast<size_t>(k));
      work.resize(static_cast<size_t>(std::max(m, n)) * 64);
      int info = 0;
      geqrf(m, n, a, tau.data(), work.data(), static_cast<int>(work.size()), &info);
      WEFT_CHECK(info == 0, Value, "linalg.qr: the factorization failed (LAPACK info ", info, ")");
      if (r != nullptr) { // R: the upper triangle of the first k rows
        T* o = r->ptr<T>() + b * k * n;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < n; ++j)
            o[i * n + j] = j >= i ? a[i + j * m] : T(0);
      }
      if (q == nullptr) return;
      orgqr(m, k, a, tau.data(), work.data(), static_cast<int>(work.size()), &info);
      WEFT_CHECK(info == 0, Value, "linalg.qr: forming Q failed (LAPACK info ", info, ")");
      T* o = q->ptr<T>() + b * m * k;
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < k; ++j)
          o[i * k + j] = a[i + j * m];
    });
  };
  if (x.dtype == DType::Float32)
    run(float());
  else
    run(double());
}

/// Each matrix's reduced SVD: U, S and Vh into those of `u`, `s`, `vh` given.
void svd(const TensorRef& x, const TensorRef* u, const TensorRef* s, const TensorRef* vh) {
  auto run = [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> sv, uu, vt, work;
    std::vector<int> iwork;
    forEachColumnMajor<T>(x, [&](T* a, int m, int n, int64_t b) {
      const int k = std::min(m, n);
      if (k == 0) return;
      sv.resize(static_cast<size_t>(k));
      uu.resize(static_cast<size_t>(m) * static_cast<size_t>(k));
      vt.resize(static_cast<size_t>(k) * static_cast<size_t>(n));
      iwork.resize(static_cast<size_t>(8 * k));
      int info = 0;
      T query = 0; // the workspace size gesdd asks for
      gesdd(m, n, a, sv.data(), uu.data(), vt.data(), &query, -1, iwork.data(), &info);
      work.resize(static_cast<size_t>(std::max<T>(query, T(1))));
      gesdd(m, n, a, sv.data(), uu.data(), vt.data(), work.data(), static_cast<int>(work.size()),
            iwork.data(), &info);
      WEFT_CHECK(info == 0, Value,
                 "linalg.svd: The algorithm failed to converge because the input matrix is "
                 "ill-conditioned or has too many repeated singular values (error code: ",
                 info, ").");
      if (s != nullptr) std::memcpy(s->ptr<T>() + b * k, sv.data(), sizeof(T) * sv.size());
      if (u != nullptr) {
        T* o = u->ptr<T>() + b * m * k;
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < k; ++j)
            o[i * k + j] = uu[static_cast<size_t>(i + j * m)];
      }
      if (vh != nullptr) {
        T* o = vh->ptr<T>() + b * k * n;
        for (int i = 0; i < k; ++i)
          for (int j = 0; j < n; ++j)
            o[i * n + j] = vt[static_cast<size_t>(i + j * k)];
      }
    });
  };
  if (x.dtype == DType::Float32)
    run(float());
  else
    run(double());
}
} // namespace

void QrQ(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  qr(in[0], &out, nullptr);
}
void QrR(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  qr(in[0], nullptr, &out);
}
void SvdU(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  svd(in[0], &out, nullptr, nullptr);
}
void SvdS(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  svd(in[0], nullptr, &out, nullptr);
}
void SvdVh(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  svd(in[0], nullptr, nullptr, &out);
}

} // namespace weft::kernels
