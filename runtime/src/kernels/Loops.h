// Strided iteration shared by the CPU kernels: coalesce dimensions, then walk 1-D runs.
#pragma once

#include "weft/runtime/Error.h"
#include "weft/runtime/TensorRef.h"
#include "weft/runtime/ThreadPool.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <tuple>
#include <type_traits>
#include <utility>

namespace weft::kernels {

/// Elements per chunk for cheap elementwise work; enough to amortise waking a thread.
inline constexpr int64_t kElementwiseGrain = 32768;

/// Strides of `ref` when broadcast to `shape` (right-aligned; size-1 and missing dims get 0).
Shape broadcastStrides(const TensorRef& ref, const Shape& shape);

/// The loop nest of N operands over one shape, in bytes, with mergeable dimensions merged.
template <size_t N> struct LoopNest {
  Shape shape;
  std::array<Shape, N> strides; // bytes
  std::array<char*, N> base;

  LoopNest(const Shape& s, const std::array<Shape, N>& elemStrides,
           const std::array<char*, N>& ptrs, const std::array<int64_t, N>& elemSizes)
      : base(ptrs) {
    // Drop size-1 dims, then merge d into d+1 where every operand is contiguous across them.
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      shape.push_back(s[d]);
      for (size_t k = 0; k < N; ++k)
        strides[k].push_back(elemStrides[k][d] * elemSizes[k]);
    }
    for (size_t d = shape.size(); d-- > 1;) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k)
        merge = merge && strides[k][d - 1] == strides[k][d] * shape[d];
      if (!merge) continue;
      shape[d - 1] *= shape[d];
      shape.erase(shape.begin() + static_cast<int64_t>(d));
      for (size_t k = 0; k < N; ++k) {
        strides[k][d - 1] = strides[k][d];
        strides[k].erase(strides[k].begin() + static_cast<int64_t>(d));
      }
    }
    if (shape.empty()) { // a scalar: one run of one element
      shape.push_back(1);
      for (size_t k = 0; k < N; ++k)
        strides[k].push_back(0);
    }
  }

  int64_t numel() const { return weft::numel(shape); }

  /// Calls `run(ptrs, innerStrides, count)` for the 1-D runs covering linear range [begin, end).
  template <typename Run> void forRange(int64_t begin, int64_t end, Run&& run) const {
    const size_t nd = shape.size();
    const int64_t inner = shape[nd - 1];
    Shape idx(nd, 0);
    int64_t rem = begin;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
    }
    std::array<int64_t, N> innerStrides;
    for (size_t k = 0; k < N; ++k)
      innerStrides[k] = strides[k][nd - 1];
    int64_t pos = begin;
    while (pos < end) {
      std::array<char*, N> p = base;
      for (size_t d = 0; d < nd; ++d)
        for (size_t k = 0; k < N; ++k)
          p[k] += idx[d] * strides[k][d];
      int64_t count = std::min(inner - idx[nd - 1], end - pos);
      run(p, innerStrides, count);
      pos += count;
      idx[nd - 1] = 0;
      for (size_t d = nd - 1; d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }

  /// forRange over everything, split across the thread pool.
  template <typename Run> void parallel(int64_t grain, Run&& run) const {
    parallelFor(numel(), grain, [&](int64_t b, int64_t e) { forRange(b, e, run); });
  }

  /// Whether an operand is read across its rows (a transpose): its inner stride spans more than
  /// a cache line while the next dim's is smaller. Walked run by run, each of its elements would
  /// then come from another cache line (and page) than the last.
  bool readsAcross() const {
    const size_t nd = shape.size();
    if (nd < 2) return false;
    for (size_t k = 0; k < N; ++k) {
      const int64_t inner = std::abs(strides[k][nd - 1]), next = std::abs(strides[k][nd - 2]);
      if (inner > 64 && next < inner) return true;
    }
    return false;
  }

  /// Like parallel(), for an order-free `run`; where an operand is read across its rows
  /// (readsAcross), the inner two dims go in square blocks, a block's runs one per row: the
  /// cache lines a block touches serve all its rows.
  template <typename Run> void parallelBlocked(int64_t grain, Run&& run) const {
    if (!readsAcross()) {
      parallel(grain, run);
      return;
    }
    constexpr int64_t kBlockRows = 32, kBlockCols = 128;
    const size_t nd = shape.size();
    const int64_t rows = shape[nd - 2], cols = shape[nd - 1];
    const int64_t rowBlocks = (rows + kBlockRows - 1) / kBlockRows,
                  colBlocks = (cols + kBlockCols - 1) / kBlockCols;
    const int64_t outer = numel() / (rows * cols);
    std::array<int64_t, N> innerStrides;
    for (size_t k = 0; k < N; ++k)
      innerStrides[k] = strides[k][nd - 1];
    parallelFor(outer * rowBlocks * colBlocks,
                std::max<int64_t>(1, grain / (kBlockRows * kBlockCols)), [&](int64_t b, int64_t e) {
                  for (int64_t blk = b; blk < e; ++blk) {
                    const int64_t o = blk / (rowBlocks * colBlocks);
                    const int64_t r0 = (blk / colBlocks) % rowBlocks * kBlockRows,
                                  c0 = blk % colBlocks * kBlockCols;
                    std::array<char*, N> start = base;
                    int64_t rem = o; // the outer dims' index
                    for (size_t d = nd - 2; d-- > 0;) {
                      const int64_t i = rem % shape[d];
                      rem /= shape[d];
                      for (size_t k = 0; k < N; ++k)
                        start[k] += i * strides[k][d];
                    }
                    const int64_t count = std::min(kBlockCols, cols - c0);
                    for (int64_t r = r0; r < std::min(rows, r0 + kBlockRows); ++r) {
                      std::array<char*, N> p = start;
                      for (size_t k = 0; k < N; ++k)
                        p[k] += r * strides[k][nd - 2] + c0 * strides[k][nd - 1];
                      run(p, innerStrides, count);
                    }
                  }
                });
  }
};

// Signed integer overflow wraps (two's complement) as in PyTorch instead of being undefined.
template <typename T> T kadd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                          static_cast<std::make_unsigned_t<T>>(b));
  else
    return a + b;
}
template <typename T> T ksub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) -
                          static_cast<std::make_unsigned_t<T>>(b));
  else
    return a - b;
}
template <typename T> T kmul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<std::conditional_t<sizeof(T) < 4, uint32_t, T>>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
/// -v: a float's sign flipped (neg(0.0) is -0.0, as PyTorch and generated code's arith.negf), an
/// integer subtracted from 0 with wraparound.
template <typename T> T kneg(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return -v;
  else
    return ksub(T(0), v);
}

/// A float converted to a signed integer type: as the x86 conversion instructions (so as PyTorch
/// there), NaN and values out of range give the type's minimum, where C++ leaves them undefined.
template <typename I, typename F> inline I floatToInt(F v) {
  constexpr F lo = static_cast<F>(std::numeric_limits<I>::min()); // -2^(bits-1): exact
  if (!(v >= lo && v < -lo)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

/// Storage -> compute conversion and back, for every dtype pair (bool means != 0).
template <typename D, typename S> inline D convert(S s) {
  using C = ComputeType<S>;
  if constexpr (std::is_same_v<D, bool>)
    return static_cast<C>(s) != C(0);
  else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BFloat16>)
    return D(static_cast<float>(static_cast<C>(s)));
  else if constexpr (std::is_floating_point_v<C> && std::is_same_v<D, uint8_t>)
    return static_cast<uint8_t>(floatToInt<int32_t>(static_cast<C>(s))); // wraps, as PyTorch
  else if constexpr (std::is_floating_point_v<C> && std::is_integral_v<D>)
    return floatToInt<D>(static_cast<C>(s));
  else
    return static_cast<D>(static_cast<C>(s));
}

/// `c ? a : b`, through bit masks for floats: GCC keeps a data-dependent ?: on floats as a
/// branch, which mispredicts half the time on data like where() masks or max-pool windows, and
/// blocks vectorisation.
template <typename C> C bitSelect(bool c, C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    using U = std::conditional_t<sizeof(C) == 4, uint32_t, uint64_t>;
    U m = U(0) - static_cast<U>(c);
    return std::bit_cast<C>((std::bit_cast<U>(a) & m) | (std::bit_cast<U>(b) & ~m));
  } else {
    return c ? a : b;
  }
}

/// `len` elements of type T at `p`, `stride` bytes apart, as a contiguous array: `p` itself when
/// they already are, else a copy in `buffer` (at least len * sizeof(T) bytes, suitably aligned).
template <typename T>
const T* contiguousRun(const char* p, int64_t stride, int64_t len, unsigned char* buffer) {
  if (stride == static_cast<int64_t>(sizeof(T))) return reinterpret_cast<const T*>(p);
  T* dst = reinterpret_cast<T*>(buffer);
  if (stride == 0) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    std::fill(dst, dst + len, v);
  } else {
    for (int64_t j = 0; j < len; ++j)
      std::memcpy(&dst[j], p + j * stride, sizeof(T));
  }
  return dst;
}

/// The most elements forEachTile hands its `tile` at once.
inline constexpr int64_t kTileElements = 256;

/// Calls `tile(out, in..., len)` over `out` in tiles of at most 256 elements, split across the
/// thread pool: `out` and each `in` are plain arrays of storage type. An operand that is not
/// contiguous along a run (a broadcast scalar, a transposed view) is first copied into a small
/// contiguous buffer, and an output that is not is written back from one, so the tile always
/// indexes plain arrays (the compiler vectorises its loop, or it calls a vector function).
template <typename OutT, typename... InT, typename Tile>
void forEachTile(const TensorRef& out, std::array<const TensorRef*, sizeof...(InT)> ins,
                 Tile tile) {
  constexpr size_t N = sizeof...(InT) + 1;
  std::array<Shape, N> strides;
  std::array<char*, N> ptrs;
  std::array<int64_t, N> sizes;
  strides[0] = out.strides;
  ptrs[0] = static_cast<char*>(out.data);
  sizes[0] = sizeof(OutT);
  int64_t elemSizes[] = {static_cast<int64_t>(sizeof(InT))...};
  for (size_t k = 0; k < sizeof...(InT); ++k) {
    strides[k + 1] = broadcastStrides(*ins[k], out.shape);
    ptrs[k + 1] = static_cast<char*>(ins[k]->data);
    sizes[k + 1] = elemSizes[k];
  }
  LoopNest<N> nest(out.shape, strides, ptrs, sizes);
  nest.parallelBlocked(kElementwiseGrain, [&](const std::array<char*, N>& p,
                                              const std::array<int64_t, N>& s, int64_t count) {
    [&]<size_t... I>(std::index_sequence<I...>) {
      alignas(64) unsigned char scratch[sizeof...(InT) + 1][kTileElements * 8];
      for (int64_t j0 = 0; j0 < count; j0 += kTileElements) {
        const int64_t len = std::min(kTileElements, count - j0);
        const bool direct = s[0] == static_cast<int64_t>(sizeof(OutT));
        OutT* o = direct ? reinterpret_cast<OutT*>(p[0] + j0 * s[0])
                         : reinterpret_cast<OutT*>(scratch[0]);
        tile(o, contiguousRun<InT>(p[I + 1] + j0 * s[I + 1], s[I + 1], len, scratch[I + 1])...,
             len);
        if (!direct)
          for (int64_t j = 0; j < len; ++j)
            std::memcpy(p[0] + (j0 + j) * s[0], &o[j], sizeof(OutT));
      }
    }
    (std::index_sequence_for<InT...>{});
  });
}

/// Runs `fn(out, in...)` elementwise: `fn` receives compute-typed inputs and returns the value.
/// OutT and InT... are storage types; inputs broadcast against `out`.
template <typename OutT, typename... InT, typename Fn>
void mapElementwise(const TensorRef& out, std::array<const TensorRef*, sizeof...(InT)> ins, Fn fn) {
  forEachTile<OutT, InT...>(out, ins, [&](OutT* o, const InT*... in, int64_t len) {
    for (int64_t j = 0; j < len; ++j)
      o[j] = convert<OutT>(fn(static_cast<ComputeType<InT>>(in[j])...));
  });
}

} // namespace weft::kernels
