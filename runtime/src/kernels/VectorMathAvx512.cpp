// libmvec's AVX-512 forms (the "e" ISA of the x86-64 vector function ABI), built with -mavx512f.
// Nothing here may include a C++ header: see VectorMathLibrary.h.
#include "VectorMathLibrary.h"

#include <immintrin.h>

extern "C" {
#define WEFT_DECLARE(op, name)                                                                     \
  __m512 _ZGVeN16v_##name##f(__m512);                                                              \
  __m512d _ZGVeN8v_##name(__m512d);
WEFT_VECTOR_MATH_FUNCTIONS(WEFT_DECLARE)
#undef WEFT_DECLARE
}

namespace weft::kernels::vmath {

const Table& avx512Table() {
  static const Table table = {
#define WEFT_F32(op, name) overArray<__m512, float, _ZGVeN16v_##name##f>,
#define WEFT_F64(op, name) overArray<__m512d, double, _ZGVeN8v_##name>,
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F32)},
      {WEFT_VECTOR_MATH_FUNCTIONS(WEFT_F64)},
#undef WEFT_F32
#undef WEFT_F64
  };
  return table;
}

} // namespace weft::kernels::vmath
