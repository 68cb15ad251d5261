// The eager CPU kernel library: one entry per op in the table.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/TensorRef.h"

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace weft {

/// Runs `op`'s CPU kernel: reads `inputs`, writes every element of `out`, which is allocated by
/// the caller with the shape and dtype that shape inference gives. Elementwise inputs may have any
/// strides and broadcast against `out`; other kernels accept any strides unless they say otherwise.
void runKernel(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out,
               const Attrs& attrs);

/// Copies `src` into `dst` (same shape, any strides, any dtypes: converts like a C++ cast, with
/// float -> bool meaning "!= 0").
void copyCast(const TensorRef& src, const TensorRef& dst);
/// Fills `dst` (any strides) with `value` converted to its dtype.
void fill(const TensorRef& dst, double value);

namespace kernels {
#define WEFT_UNARY(N, s, d, low, k, v)
#define WEFT_BINARY(N, s, r, api, low, k, va, vb)
#define WEFT_OP(N, s, kind, n, v)                                                                  \
  void N(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at);
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
/// Conv (float32 or float64 `out`) calling `afterSamples(n0, n1)` on the thread that has just
/// written samples [n0, n1) of `out`, while they are in its cache: a plan runs the conv's fused
/// epilogue there (PlanStep::afterEachSample).
void convThen(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at,
              const std::function<void(int64_t, int64_t)>& afterSamples);
/// A device's copy (copyCast's contract) and fill: what the movement ops are made of.
struct CopyFill {
  void (*copy)(const TensorRef& src, const TensorRef& dst);
  void (*fill)(const TensorRef& dst, double value);
};
/// reshape, permute, expand, slice and flip (their view copied), pad and cat, written once over
/// `with`: the CPU's kernels pass copyCast and fill, another device its own.
void movement(OpCode op, std::span<const TensorRef> in, const TensorRef& out, const Attrs& at,
              const CopyFill& with);
/// Where an index points: dimension `dim` (-1: a flattened tensor) of `size`, as `op` names it.
struct IndexedDim {
  int64_t size, dim;
  std::string_view op;
};
/// Throws the IndexError for index `v`, saying which indices `at` takes (from -size with `wrap`).
[[noreturn]] [[gnu::cold]] void outOfBounds(int64_t v, const IndexedDim& at, bool wrap);
/// linalg.inv's ValueError: U's diagonal element `info` (from 1) of the LU factors is zero.
[[noreturn]] [[gnu::cold]] void singularMatrix(int64_t info);
/// linalg.cholesky's ValueError: the leading minor of order `info` is not positive-definite.
[[noreturn]] [[gnu::cold]] void notPositiveDefinite(int64_t info);
/// Elementwise unary and binary ops share one dispatcher each.
void unary(OpCode op, const TensorRef& in, const TensorRef& out);
void binary(OpCode op, const TensorRef& a, const TensorRef& b, const TensorRef& out);
} // namespace kernels

} // namespace weft
