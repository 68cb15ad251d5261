// The libmvec functions behind VectorMath.h, as array functions per instruction set. Included by
// VectorMath.cpp (the SSE2 forms every x86-64 CPU runs) and VectorMathAvx2.cpp (built with AVX2,
// called only where the CPU has it): C types only, so no inline function of the standard library
// is ever compiled for AVX2 and picked by the linker for the whole program.
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

} // namespace weft::kernels::vmath
