// libmvec's AVX2 forms (the "d" ISA of the x86-64 vector function ABI), built with -mavx2 -mfma.
// Nothing here may include a C++ header: see VectorMathLibrary.h.
#include "VectorMathLibrary.h"

#include <immintrin.h>

#define WEFT_TABLE avx2Table
#define WEFT_V32 __m256
#define WEFT_V64 __m256d
#define WEFT_F32(name) _ZGVdN8v_##name##f
#define WEFT_F64(name) _ZGVdN4v_##name
#include "VectorMathTable.inc"
