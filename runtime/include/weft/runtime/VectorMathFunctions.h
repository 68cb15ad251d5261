// The transcendental functions both eager kernels and generated code compute through glibc's
// libmvec (the x86-64 vector function ABI), so the two agree bit for bit: an element's result
// depends only on its value, never on where in a vector it sits. The runtime calls the AVX-512
// forms ("e", 16 floats or 8 doubles) where the CPU has AVX-512F, else the AVX2 forms ("d", 8 or
// 4) where it has AVX2 and FMA, else the SSE2 forms ("b", 4 or 2); codegen calls the forms of its
// target's features, scalar leftovers included. C only: included by code built for AVX2 and
// AVX-512.
#pragma once

// X(OpCode name, libm name of the double function; the float one adds "f").
#define WEFT_VECTOR_MATH_FUNCTIONS(X)                                                              \
  X(Exp, exp)                                                                                      \
  X(Log, log) X(Log1p, log1p) X(Expm1, expm1) X(Sin, sin) X(Cos, cos) X(Tanh, tanh) X(Erf, erf)
