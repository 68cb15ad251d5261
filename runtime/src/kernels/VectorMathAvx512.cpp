// libmvec's AVX-512 forms (the "e" ISA of the x86-64 vector function ABI), built with -mavx512f.
// Nothing here may include a C++ header: see VectorMathLibrary.h.
#include "VectorMathLibrary.h"

#include <immintrin.h>

#define WEFT_TABLE avx512Table
#define WEFT_V32 __m512
#define WEFT_V64 __m512d
#define WEFT_F32(name) _ZGVeN16v_##name##f
#define WEFT_F64(name) _ZGVeN8v_##name
#include "VectorMathTable.inc"
