// Vector math for the eager kernels: the functions of VectorMathFunctions.h over arrays, through
// glibc's libmvec, the library generated kernels call too (codegen/src/VectorMath.cpp).
#pragma once

#include "weft/runtime/OpTable.h"

#include <cstdint>

namespace weft::kernels {

/// Whether the unary op has an array form for float32 and float64 below.
bool hasVectorMath(OpCode op);

/// y[i] = op(x[i]) for i < n (y may be x). Every element goes through the same vector function,
/// whatever the array's length or alignment.
void vectorMath(OpCode op, const float* x, float* y, int64_t n);
void vectorMath(OpCode op, const double* x, double* y, int64_t n);

} // namespace weft::kernels
