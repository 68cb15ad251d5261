// Eager vector math through libmvec: the SSE2 forms here, the AVX2 and AVX-512 forms in
// VectorMathAvx2.cpp and VectorMathAvx512.cpp, chosen once by what the CPU has.
#include "weft/runtime/VectorMath.h"

#include "Loops.h"
#include "VectorMathLibrary.h"

#include <algorithm>
#include <cmath>
#include <immintrin.h>

#define WEFT_TABLE sse2Table
#define WEFT_V32 __m128
#define WEFT_V64 __m128d
#define WEFT_F32(name) _ZGVbN4v_##name##f
#define WEFT_F64(name) _ZGVbN2v_##name
#include "VectorMathTable.inc"

namespace weft::kernels {

namespace {

const vmath::Table& table() {
  static const vmath::Table& t = __builtin_cpu_supports("avx512f") ? vmath::avx512Table()
                                 : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
                                     ? vmath::avx2Table()
                                     : vmath::sse2Table();
  return t;
}

/// The library function computing `op`, if there is one.
int functionOf(OpCode op) {
  switch (op) {
#define WEFT_CASE(o, f)                                                                            \
  case OpCode::o:                                                                                  \
    return static_cast<int>(vmath::VectorFn::o);
    WEFT_VECTOR_MATH_FUNCTIONS(WEFT_CASE)
#undef WEFT_CASE
  default:
    return -1;
  }
}

/// sigmoid(x) as the scalar kernel computes it, 1 / (1 + e) or e / (1 + e) with e = exp(-|x|),
/// so it never exponentiates a large positive number; the exponentials go through the library.
template <typename T, typename ExpFn> void sigmoid(ExpFn expFn, const T* x, T* y, int64_t n) {
  constexpr int64_t kChunk = 256;
  alignas(64) T e[kChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t len = std::min(kChunk, n - i0);
    for (int64_t j = 0; j < len; ++j)
      e[j] = -std::fabs(x[i0 + j]);
    expFn(e, e, len);
    for (int64_t j = 0; j < len; ++j)
      y[i0 + j] = bitSelect(x[i0 + j] >= T(0), T(1), e[j]) / (T(1) + e[j]);
  }
}

/// `op` over an array with one instruction set's functions for T.
template <typename T>
void apply(OpCode op, void (*const* functions)(const T*, T*, int64_t), const T* x, T* y,
           int64_t n) {
  if (op == OpCode::Sigmoid)
    return sigmoid(functions[static_cast<int>(vmath::VectorFn::Exp)], x, y, n);
  int f = functionOf(op);
  WEFT_INTERNAL_ASSERT(f >= 0, "no vector math for ", opName(op));
  functions[f](x, y, n);
}

} // namespace

bool hasVectorMath(OpCode op) {
  return op == OpCode::Sigmoid || functionOf(op) >= 0;
}

void vectorMath(OpCode op, const float* x, float* y, int64_t n) {
  apply(op, table().f32, x, y, n);
}

void vectorMath(OpCode op, const double* x, double* y, int64_t n) {
  apply(op, table().f64, x, y, n);
}

} // namespace weft::kernels
