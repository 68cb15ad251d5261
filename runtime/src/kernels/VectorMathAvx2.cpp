// libmvec's AVX2 forms (the "d" ISA of the x86-64 vector function ABI), built with -mavx2 -mfma.
// Nothing here may include a C++ header: see VectorMathLibrary.h.
#include "VectorMathLibrary.h"

#include <immintrin.h>

extern "C" {
#define WEFT_DECLARE(op, name)                                                                     \
  __m256 _ZGVdN8v_##name##f(__m256);                                                               \
  __m256d _ZGVdN4v_##name(__m256d);
WEFT_VECTOR_MATH_FUNCTIONS(WEFT_DECLARE)
#undef WEFT_DECLARE
}

namespace weft::kernels::vmath {
namespace {

template <__m256 (*F)(__m256)> void arrayF32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    alignas(32) float lanes[8] = {};
    __builtin_memcpy(lanes, x + i, static_cast<size_t>(n - i) * sizeof(float));
    _mm256_store_ps(lanes, F(_mm256_load_ps(lanes)));
    __builtin_memcpy(y + i, lanes, static_cast<size_t>(n - i) * sizeof(float));
  }
}

template <__m256d (*F)(__m256d)> void arrayF64(const double* x, double* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(y + i, F(_mm256_loadu_pd(x + i)));
  if (i < n) {
    alignas(32) double lanes[4] = {};
    __builtin_memcpy(lanes, x + i, static_cast<size_t>(n - i) * sizeof(double));
    _mm256_store_pd(lanes, F(_mm256_load_pd(lanes)));
    __builtin_memcpy(y + i, lanes, static_cast<size_t>(n - i) * sizeof(double));
  }
}

} // namespace

const Table& avx2Table() {
  static const Table table = {
#define WEFT_F32(op, name) arrayF32<_ZGVdN8v_##name##f>,
#define WEFT_F64(op, name) arrayF64<_ZGVdN4v_##name>,
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F32)},
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F64)},
#undef WEFT_F32
#undef WEFT_F64
  };
  return table;
}

} // namespace weft::kernels::vmath
