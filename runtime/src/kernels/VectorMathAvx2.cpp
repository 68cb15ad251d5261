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

const Table& avx2Table() {
  static const Table table = {
#define WEFT_F32(op, name) overArray<__m256, float, _ZGVdN8v_##name##f>,
#define WEFT_F64(op, name) overArray<__m256d, double, _ZGVdN4v_##name>,
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F32)},
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F64)},
#undef WEFT_F32
#undef WEFT_F64
  };
  return table;
}

} // namespace weft::kernels::vmath
