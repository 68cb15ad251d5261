// What expanding the rows of weft/TensorMethods.inc takes: which forms a row has, and its
// parameter and argument lists.
#pragma once

/// WEFT_HAS_FUNCTION_<forms>(x) and WEFT_HAS_IN_PLACE_<forms>(x): `x` where the row's forms
/// include the free function (F) or the in-place form (I), else nothing.
#define WEFT_HAS_FUNCTION_M(...)
#define WEFT_HAS_FUNCTION_F(...) __VA_ARGS__
#define WEFT_HAS_FUNCTION_I(...)
#define WEFT_HAS_FUNCTION_FI(...) __VA_ARGS__
#define WEFT_HAS_IN_PLACE_M(...)
#define WEFT_HAS_IN_PLACE_F(...)
#define WEFT_HAS_IN_PLACE_I(...) __VA_ARGS__
#define WEFT_HAS_IN_PLACE_FI(...) __VA_ARGS__
/// A row's `(params)` as the start of a parameter list: `a, b,` (nothing for `()`).
#define WEFT_PARAMS(...) __VA_ARGS__ __VA_OPT__(, )
/// A row's `(args)` after a first argument: `, a, b` (nothing for `()`).
#define WEFT_REST(...) __VA_OPT__(, ) __VA_ARGS__
/// A default argument in a row's parameters (declarations show it; definitions leave it out).
#define WEFT_DEFAULT(...) = __VA_ARGS__
