// The libmvec functions behind VectorMath.h, as array functions per instruction set. Included by
// VectorMath.cpp (the SSE2 forms every x86-64 CPU runs), VectorMathAvx2.cpp and
// VectorMathAvx512.cpp (built with AVX2 or AVX-512, called only where the CPU has it): C types
// only, so no inline function of the standard library is ever compiled for AVX2 or AVX-512 and
// picked by the linker for the whole program.
#pragma once

#include "weft/runtime/VectorMathFunctions.h"

#include <stdint.h>

namespace weft::kernels::vmath {

enum class VectorFn {
#define WEFT_ENUM(op, f) op,
  WEFT_VECTOR_MATH_FUNCTIONS(WEFT_ENUM)
#undef WEFT_ENUM
      Count
};

/// One instruction set's array functions: y[i] = f(x[i]) for i < n, the tail padded to a full
/// vector so every element goes through the vector function.
struct Table {
  void (*f32[static_cast<int>(VectorFn::Count)])(const float*, float*, int64_t);
  void (*f64[static_cast<int>(VectorFn::Count)])(const double*, double*, int64_t);
};

const Table& sse2Table();
const Table& avx2Table();
const Table& avx512Table();

namespace {

/// `f` over an array, a vector of V at a time, the tail padded with zeros to a full vector.
/// Internal to each file that instantiates it, so each gets the instruction set it is built for.
template <typename V, typename T, V (*F)(V)> void overArray(const T* x, T* y, int64_t n) {
  constexpr int64_t kLanes = sizeof(V) / sizeof(T);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V v;
    __builtin_memcpy(&v, x + i, sizeof v);
    v = F(v);
    __builtin_memcpy(y + i, &v, sizeof v);
  }
  if (i < n) {
    V v{};
    __builtin_memcpy(&v, x + i, static_cast<unsigned long>(n - i) * sizeof(T));
    v = F(v);
    __builtin_memcpy(y + i, &v, static_cast<unsigned long>(n - i) * sizeof(T));
  }
}

} // namespace

} // namespace weft::kernels::vmath
