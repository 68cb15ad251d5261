// Reductions (sum, prod, amax, amin, argmax, argmin), scans (cumsum, cumprod, logcumsumexp, the
// running argmax/argmin), softmax, log-softmax and argsort
// along dimensions.
#include "Loops.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

namespace weft::kernels {
namespace {

/// The input split into the dims that stay (outer) and the dims reduced (inner).
struct ReduceSplit {
  Shape keptShape, keptStrides, keptOutStrides; // input and output strides of the kept dims
  Shape redShape, redStrides;
};

ReduceSplit splitDims(const TensorRef& in, const TensorRef& out, Shape dims, bool keepdim) {
  const int64_t nd = in.dim();
  if (dims.empty())
    for (int64_t d = 0; d < nd; ++d)
      dims.push_back(d);
  Shape reduced(static_cast<size_t>(nd), 0);
  for (int64_t d : dims)
    reduced[static_cast<size_t>(d)] = 1;
  ReduceSplit s;
  int64_t od = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[static_cast<size_t>(d)]) {
      s.redShape.push_back(in.shape[d]);
      s.redStrides.push_back(in.strides[d]);
      if (keepdim) ++od;
    } else {
      s.keptShape.push_back(in.shape[d]);
      s.keptStrides.push_back(in.strides[d]);
      s.keptOutStrides.push_back(out.strides[od++]);
    }
  }
  return s;
}

/// Byte offset of linear index `i` in a strided space.
int64_t offsetOf(int64_t i, const Shape& shape, const Shape& strides, int64_t elemSize) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (i % shape[d]) * strides[d] * elemSize;
    i /= shape[d];
  }
  return off;
}

/// Sums and products accumulate floats in double and bools in int64.
template <typename C>
using AccumulateType = std::conditional_t<std::is_floating_point_v<C>, double,
                                          std::conditional_t<std::is_same_v<C, bool>, int64_t, C>>;

/// Accumulators: Acc init; void step(Acc&, C); Acc merge(Acc, Acc); T finish(Acc).
template <typename T> struct SumOp {
  using C = ComputeType<T>;
  using Acc = AccumulateType<C>;
  static Acc init() { return Acc(0); }
  static Acc run(const char* p, int64_t stride, int64_t n) {
    // Blocks of 1024 summed in the compute type (vectorised), blocks added in Acc: fast and
    // accurate.
    Acc total = 0;
    for (int64_t b = 0; b < n; b += 1024) {
      int64_t e = std::min(n, b + 1024);
      // Integers wrap on overflow, as in PyTorch (unsigned arithmetic); bools count.
      using Block = std::conditional_t<std::is_integral_v<C>, uint64_t, C>;
      Block acc = 0;
      if (stride == static_cast<int64_t>(sizeof(T))) {
        const T* q = reinterpret_cast<const T*>(p);
#pragma omp simd reduction(+ : acc)
        for (int64_t j = b; j < e; ++j)
          acc += static_cast<Block>(static_cast<C>(q[j]));
      } else {
        for (int64_t j = b; j < e; ++j)
          acc += static_cast<Block>(static_cast<C>(*reinterpret_cast<const T*>(p + j * stride)));
      }
      total = kadd(total, static_cast<Acc>(acc));
    }
    return total;
  }
  static Acc merge(Acc a, Acc b) {
    return kadd(a, b);
  }
};

template <typename T> struct ProdOp {
  using C = ComputeType<T>;
  using Acc = AccumulateType<C>;
  static Acc init() { return Acc(1); }
  static Acc run(const char* p, int64_t stride, int64_t n) {
    Acc acc = 1;
    for (int64_t j = 0; j < n; ++j)
      acc =
          kmul(acc, static_cast<Acc>(static_cast<C>(*reinterpret_cast<const T*>(p + j * stride))));
    return acc;
  }
  static Acc merge(Acc a, Acc b) { return kmul(a, b); }
};

/// The max (or min) of a contiguous float run in 8 independent lanes (a vector register; one
/// running extremum would wait on every compare). NaNs are skipped: callers that must see them
/// look for them apart.
template <bool Max, typename T> T laneExtremum(const T* x, int64_t n) {
  T lanes[8];
  std::fill(lanes, lanes + 8,
            Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
#pragma omp simd
    for (int k = 0; k < 8; ++k)
      lanes[k] = (Max ? x[i + k] > lanes[k] : x[i + k] < lanes[k]) ? x[i + k] : lanes[k];
  for (; i < n; ++i)
    lanes[0] = (Max ? x[i] > lanes[0] : x[i] < lanes[0]) ? x[i] : lanes[0];
  T m = lanes[0];
  for (int k = 1; k < 8; ++k)
    m = (Max ? lanes[k] > m : lanes[k] < m) ? lanes[k] : m;
  return m;
}

template <typename T, bool Max> struct ExtremumOp {
  using C = ComputeType<T>;
  using Acc = C;
  static Acc init() {
    if constexpr (std::is_floating_point_v<C>)
      return Max ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::infinity();
    else
      return Max ? std::numeric_limits<C>::lowest() : std::numeric_limits<C>::max();
  }
  static Acc merge(Acc a, Acc b) {
    if constexpr (std::is_floating_point_v<C>)
      if (std::isnan(a) || std::isnan(b))
        return std::isnan(a) ? a : b; // NaN propagates, as in torch.amax
    return (Max ? a > b : a < b) ? a : b;
  }
  static Acc run(const char* p, int64_t stride, int64_t n) {
    if constexpr (std::is_floating_point_v<C> && std::is_same_v<T, C>)
      if (stride == static_cast<int64_t>(sizeof(T)) && n >= 16)
        return runContiguous(reinterpret_cast<const T*>(p), n);
    Acc acc = init();
    for (int64_t j = 0; j < n; ++j)
      acc = merge(acc, static_cast<C>(*reinterpret_cast<const T*>(p + j * stride)));
    return acc;
  }
  /// A contiguous float run: laneExtremum, and NaNs looked for apart (one propagates).
  static Acc runContiguous(const T* x, int64_t n) {
    int nan = 0;
#pragma omp simd reduction(| : nan)
    for (int64_t j = 0; j < n; ++j)
      nan |= x[j] != x[j];
    return nan ? std::numeric_limits<T>::quiet_NaN() : laneExtremum<Max>(x, n);
  }
};

/// Sums where the innermost kept dim is contiguous in the input and every reduced dim lies outside
/// it (a bias gradient: [rows, n] -> [n]): whole rows are added into a row of accumulators, which
/// vectorises and reads memory in order, instead of one strided walk per output. Rows are summed
/// in blocks of 1024 in the compute type and the blocks in the accumulation type, as SumOp::run
/// does. Returns false where the layout does not fit.
template <typename T>
bool sumAcrossRows(const TensorRef& in, const TensorRef& out, const ReduceSplit& s) {
  using C = ComputeType<T>;
  using Acc = typename SumOp<T>::Acc;
  using Block = std::conditional_t<std::is_integral_v<C>, uint64_t, C>;
  if (s.keptShape.empty() || s.redShape.empty() || s.keptStrides.back() != 1) return false;
  for (int64_t st : s.redStrides)
    if (st == 1 || st == 0) return false;
  const int64_t width = s.keptShape.back(), numRed = numel(s.redShape);
  if (width < 8 || numRed < 2) return false;
  const Shape outerShape(s.keptShape.begin(), s.keptShape.end() - 1);
  const Shape outerStrides(s.keptStrides.begin(), s.keptStrides.end() - 1);
  const Shape outerOutStrides(s.keptOutStrides.begin(), s.keptOutStrides.end() - 1);
  const int64_t outStride = s.keptOutStrides.back();
  constexpr int64_t kTile = 256, kRowBlock = 1024;
  const int64_t tiles = (width + kTile - 1) / kTile, numOuter = numel(outerShape);
  // Work items: (outer index, tile, part of the reduced rows). With fewer items than threads,
  // the rows are split too and the parts' partial sums added at the end.
  const int64_t threads = getNumThreads();
  const int64_t parts =
      numOuter * tiles >= threads || numRed * width < 65536 ? 1 : std::min(threads, numRed);
  const int64_t rowsPerPart = (numRed + parts - 1) / parts;
  std::vector<Acc> partial(static_cast<size_t>(parts > 1 ? parts * numOuter * width : 0));
  const T* base = static_cast<const T*>(in.data);
  const std::array<Shape, 1> redStrides{s.redStrides};
  parallelFor(numOuter * tiles * parts, 1, [&](int64_t b, int64_t e) {
    Acc acc[kTile];
    Block block[kTile];
    for (int64_t item = b; item < e; ++item) {
      const int64_t part = item % parts, tile = (item / parts) % tiles, o = item / parts / tiles;
      const int64_t w0 = tile * kTile, w = std::min(kTile, width - w0);
      const T* p = base + offsetOf(o, outerShape, outerStrides, 1) + w0;
      std::fill(acc, acc + w, Acc(0));
      std::fill(block, block + w, Block(0));
      int64_t inBlock = 0;
      auto flush = [&] {
        for (int64_t j = 0; j < w; ++j)
          acc[j] = kadd(acc[j], static_cast<Acc>(block[j]));
        std::fill(block, block + w, Block(0));
        inBlock = 0;
      };
      // The reduced rows as a loop nest: runs of rows `stride` bytes apart.
      LoopNest<1> rows(s.redShape, redStrides, {reinterpret_cast<char*>(const_cast<T*>(p))},
                       {sizeof(T)});
      rows.forRange(
          part * rowsPerPart, std::min(numRed, (part + 1) * rowsPerPart),
          [&](const std::array<char*, 1>& q, const std::array<int64_t, 1>& stride, int64_t count) {
            for (int64_t r = 0; r < count; ++r) {
              const T* row = reinterpret_cast<const T*>(q[0] + r * stride[0]);
#pragma omp simd
              for (int64_t j = 0; j < w; ++j)
                block[j] += static_cast<Block>(static_cast<C>(row[j]));
              if (++inBlock == kRowBlock) flush();
            }
          });
      flush();
      if (parts > 1) {
        std::copy(acc, acc + w, partial.begin() + (part * numOuter + o) * width + w0);
        continue;
      }
      T* dst = static_cast<T*>(out.data) + offsetOf(o, outerShape, outerOutStrides, 1);
      for (int64_t j = 0; j < w; ++j)
        dst[(w0 + j) * outStride] = convert<T>(static_cast<C>(acc[j]));
    }
  });
  if (parts > 1)
    for (int64_t o = 0; o < numOuter; ++o) {
      T* dst = static_cast<T*>(out.data) + offsetOf(o, outerShape, outerOutStrides, 1);
      for (int64_t j = 0; j < width; ++j) {
        Acc total = 0;
        for (int64_t part = 0; part < parts; ++part)
          total = kadd(total, partial[static_cast<size_t>((part * numOuter + o) * width + j)]);
        dst[j * outStride] = convert<T>(static_cast<C>(total));
      }
    }
  return true;
}

template <template <typename> class Op>
void reduce(const TensorRef& in, const TensorRef& out, const Attrs& at) {
  WEFT_INTERNAL_ASSERT(in.dtype == out.dtype, "reduction changes dtype");
  ReduceSplit s = splitDims(in, out, at.ints("dims"), at.b("keepdim"));
  visitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using R = Op<T>;
    using Acc = typename R::Acc;
    const int64_t numOut = numel(s.keptShape), numRed = numel(s.redShape);
    const int64_t es = sizeof(T);
    const char* base = static_cast<const char*>(in.data);
    // Reduce the strided inner space starting at `p` over linear range [b, e).
    auto reduceRange = [&](const char* p, int64_t b, int64_t e) {
      std::array<Shape, 1> st{s.redStrides};
      LoopNest<1> nest(s.redShape, st, {const_cast<char*>(p)}, {es});
      Acc acc = R::init();
      nest.forRange(b, e,
                    [&](const std::array<char*, 1>& q, const std::array<int64_t, 1>& str,
                        int64_t n) { acc = R::merge(acc, R::run(q[0], str[0], n)); });
      return acc;
    };
    auto store = [&](int64_t o, Acc acc) {
      char* dst = static_cast<char*>(out.data) + offsetOf(o, s.keptShape, s.keptOutStrides, es);
      *reinterpret_cast<T*>(dst) = convert<T>(static_cast<ComputeType<T>>(acc));
    };
    if (numRed == 0) { // empty reduction: the identity
      parallelFor(numOut, 4096, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          store(o, R::init());
      });
      return;
    }
    if constexpr (std::is_same_v<R, SumOp<T>>)
      if (sumAcrossRows<T>(in, out, s)) return;
    if (numOut >= getNumThreads() * 4 || numRed < 65536) {
      // The reduced dims as one nest, built once: each output only moves its base pointer.
      std::array<Shape, 1> st{s.redStrides};
      LoopNest<1> nest(s.redShape, st, {nullptr}, {es});
      const bool oneRun = nest.shape.size() == 1;
      parallelFor(
          numOut, std::max<int64_t>(1, kElementwiseGrain / numRed), [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) {
              const char* p = base + offsetOf(o, s.keptShape, s.keptStrides, es);
              store(o, oneRun ? R::run(p, nest.strides[0][0], numRed) : reduceRange(p, 0, numRed));
            }
          });
      return;
    }
    // Few outputs, long reductions: split each reduction across threads and merge the partials.
    for (int64_t o = 0; o < numOut; ++o) {
      const char* p = base + offsetOf(o, s.keptShape, s.keptStrides, es);
      int64_t chunks = getNumThreads();
      std::vector<Acc> partial(static_cast<size_t>(chunks), R::init());
      int64_t per = (numRed + chunks - 1) / chunks;
      parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c)
          partial[static_cast<size_t>(c)] =
              reduceRange(p, c * per, std::min(numRed, (c + 1) * per));
      });
      Acc acc = R::init();
      for (Acc a : partial)
        acc = R::merge(acc, a);
      store(o, acc);
    }
  });
}

template <typename T> using AMaxOp = ExtremumOp<T, true>;
template <typename T> using AMinOp = ExtremumOp<T, false>;

/// Calls `line(inPtr, inStride, outPtr, outStride, n)` for every line along `dim`, in parallel.
template <typename Line>
void forEachLine(const TensorRef& in, const TensorRef& out, int64_t dim, int64_t inEs,
                 int64_t outEs, Line line) {
  Shape otherShape, inStrides, outStrides;
  for (int64_t d = 0; d < in.dim(); ++d)
    if (d != dim) {
      otherShape.push_back(in.shape[d]);
      inStrides.push_back(in.strides[d]);
      outStrides.push_back(out.strides[d]);
    }
  const int64_t n = in.shape[dim];
  parallelFor(numel(otherShape), std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
              [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o)
                  line(static_cast<const char*>(in.data) + offsetOf(o, otherShape, inStrides, inEs),
                       in.strides[dim] * inEs,
                       static_cast<char*>(out.data) + offsetOf(o, otherShape, outStrides, outEs),
                       out.strides[dim] * outEs, n);
              });
}

template <typename C> bool greaterNan(C a, C b) {
  // NaN sorts above every number, as in PyTorch.
  if constexpr (std::is_floating_point_v<C>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
  return a > b;
}

template <bool Max> void argExtremum(const TensorRef& in, const TensorRef& out, const Attrs& at) {
  int64_t dim = at.i("dim");
  // With keepdim the output has the dim (size 1); without it, view the output as if it had.
  TensorRef o = out;
  if (!at.b("keepdim")) {
    o.shape.insert(o.shape.begin() + dim, 1);
    o.strides.insert(o.strides.begin() + dim, 0);
  }
  visitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    forEachLine(in, o, dim, sizeof(T), sizeof(int64_t),
                [](const char* p, int64_t s, char* q, int64_t, int64_t n) {
                  int64_t best = 0;
                  C bv = static_cast<C>(*reinterpret_cast<const T*>(p));
                  for (int64_t j = 1; j < n; ++j) {
                    C v = static_cast<C>(*reinterpret_cast<const T*>(p + j * s));
                    bool better = Max ? v > bv : v < bv;
                    if constexpr (std::is_floating_point_v<C>) // the first NaN wins, as in PyTorch
                      better = !std::isnan(bv) && (std::isnan(v) || better);
                    if (better) {
                      best = j;
                      bv = v;
                    }
                  }
                  *reinterpret_cast<int64_t*>(q) = best;
                });
  });
}

} // namespace

void Sum(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  reduce<SumOp>(in[0], out, at);
}
void Prod(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  reduce<ProdOp>(in[0], out, at);
}
void AMax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  reduce<AMaxOp>(in[0], out, at);
}
void AMin(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  reduce<AMinOp>(in[0], out, at);
}
void ArgMax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  argExtremum<true>(in[0], out, at);
}
void ArgMin(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  argExtremum<false>(in[0], out, at);
}

namespace {

/// out[j] = start (+) in[0] (+) ... (+) in[j] along `dim`, accumulated in the type reductions use
/// (double for float32, as PyTorch's CPU scans). `step(acc, v)` is the (+).
template <typename Step>
void scanLines(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at, double start,
               Step step) {
  WEFT_INTERNAL_ASSERT(in[0].dtype == out.dtype);
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    using Acc = AccumulateType<C>;
    forEachLine(
        in[0], out, at.i("dim"), sizeof(T), sizeof(T),
        [&](const char* p, int64_t s, char* q, int64_t qs, int64_t n) {
          // (an infinite start is for floating types only)
          Acc acc = std::is_floating_point_v<Acc> || std::isfinite(start) ? static_cast<Acc>(start)
                                                                          : Acc{};
          for (int64_t j = 0; j < n; ++j) {
            acc =
                step(acc, static_cast<Acc>(static_cast<C>(*reinterpret_cast<const T*>(p + j * s))));
            *reinterpret_cast<T*>(q + j * qs) = convert<T>(static_cast<C>(acc));
          }
        });
  });
}

/// log(exp(a) + exp(b)) without overflow; equal infinities stay themselves, a NaN spreads.
template <typename A> A logAddExp(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
    const A lo = std::min(a, b), hi = std::max(a, b);
    if (lo == hi && !std::isfinite(lo)) return lo; // -inf and -inf, or inf and inf
    return hi + std::log1p(std::exp(lo - hi));
  } else {
    return a; // integers never get here: the op takes floating inputs
  }
}

/// The index of the running maximum (Max) or minimum along `dim`: a tie or a NaN moves it on.
template <bool Max>
void cumArgExtremum(const TensorRef& in, const TensorRef& out, const Attrs& at) {
  visitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    forEachLine(in, out, at.i("dim"), sizeof(T), sizeof(int64_t),
                [](const char* p, int64_t s, char* q, int64_t qs, int64_t n) {
                  int64_t best = 0;
                  C bv{};
                  for (int64_t j = 0; j < n; ++j) {
                    const auto v = static_cast<C>(*reinterpret_cast<const T*>(p + j * s));
                    bool take = j == 0 || (Max ? v >= bv : v <= bv);
                    if constexpr (std::is_floating_point_v<C>) take = take || std::isnan(v);
                    if (take) {
                      best = j;
                      bv = v;
                    }
                    *reinterpret_cast<int64_t*>(q + j * qs) = best;
                  }
                });
  });
}

} // namespace

void CumSum(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scanLines(in, out, at, 0.0, [](auto acc, auto v) { return kadd(acc, v); });
}
void CumProd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scanLines(in, out, at, 1.0, [](auto acc, auto v) { return kmul(acc, v); });
}
void LogCumSumExp(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scanLines(in, out, at, -std::numeric_limits<double>::infinity(),
            [](auto acc, auto v) { return logAddExp(acc, v); });
}
void CumArgMax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  cumArgExtremum<true>(in[0], out, at);
}
void CumArgMin(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  cumArgExtremum<false>(in[0], out, at);
}

namespace {

/// softmax (or, with Log, log_softmax) of one contiguous float32/float64 row: loops the compiler
/// vectorizes and libmvec's exp. A NaN makes the row NaN (through the sum), a row of only -inf
/// too, as in PyTorch.
template <bool Log, typename T> void softmaxRow(const T* x, T* y, int64_t n) {
  // A NaN is skipped here, but x - max spreads it to the sum and so to the whole row.
  const T m = laneExtremum<true>(x, n);
  // exp(x - max) is 0 below `low` (a masked -inf, say); libmvec would take its slow scalar path
  // for those lanes, so they go in as 0 and are zeroed after.
  constexpr T low = sizeof(T) == 4 ? T(-87) : T(-708);
  int anyLow = 0;
#pragma omp simd reduction(| : anyLow)
  for (int64_t j = 0; j < n; ++j) {
    T z = x[j] - m;
    anyLow |= z < low;
    y[j] = z < low ? T(0) : z;
  }
  vectorMath(OpCode::Exp, y, y, n);
  if (anyLow)
    for (int64_t j = 0; j < n; ++j)
      y[j] = x[j] - m < low ? T(0) : y[j];
  // Blocks of 1024 summed in T (vectorized), blocks in double, as SumOp does.
  double sum = 0;
  for (int64_t b = 0; b < n; b += 1024) {
    const int64_t e = std::min(n, b + 1024);
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t j = b; j < e; ++j)
      acc += y[j];
    sum += static_cast<double>(acc);
  }
  if constexpr (Log) {
    // (x - max) - lse, not x - (max + lse), which rounds for large x
    const T lse = static_cast<T>(std::log(sum));
    for (int64_t k = 0; k < n; ++k)
      y[k] = (x[k] - m) - lse;
  } else {
    const T scale = static_cast<T>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k)
      y[k] *= scale;
  }
}

/// softmax (or log_softmax) along `dim`: per line the max, exp(x - max) summed, one pass out;
/// contiguous float32/float64 lines through softmaxRow.
template <bool Log> void softmaxAlong(const TensorRef& in, const TensorRef& out, int64_t dim) {
  WEFT_CHECK(isFloating(in.dtype) && in.dtype == out.dtype, DType, Log ? "log_softmax" : "softmax",
             ": expected a floating-point input, got ", dtypeName(in.dtype));
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    if constexpr (std::is_floating_point_v<C>) {
      forEachLine(in, out, dim, sizeof(T), sizeof(T),
                  [](const char* p, int64_t s, char* q, int64_t qs, int64_t n) {
                    if constexpr (std::is_same_v<T, C>)
                      if (s == static_cast<int64_t>(sizeof(T)) && qs == s)
                        return softmaxRow<Log>(reinterpret_cast<const T*>(p),
                                               reinterpret_cast<T*>(q), n);
                    auto x = [&](int64_t j) {
                      return static_cast<C>(*reinterpret_cast<const T*>(p + j * s));
                    };
                    auto y = [&](int64_t j) -> T& { return *reinterpret_cast<T*>(q + j * qs); };
                    const C m = ExtremumOp<T, true>::run(p, s, n);
                    double sum = 0;
                    for (int64_t j = 0; j < n; ++j) {
                      y(j) = static_cast<T>(std::exp(x(j) - m));
                      sum += static_cast<double>(static_cast<C>(y(j)));
                    }
                    const C lse = static_cast<C>(std::log(sum)), scale = static_cast<C>(1.0 / sum);
                    for (int64_t j = 0; j < n; ++j)
                      y(j) = static_cast<T>(Log ? (x(j) - m) - lse : static_cast<C>(y(j)) * scale);
                  });
    }
  });
}

} // namespace

void Softmax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  softmaxAlong<false>(in[0], out, at.i("dim"));
}
void LogSoftmax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  softmaxAlong<true>(in[0], out, at.i("dim"));
}

void ArgSort(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  bool descending = at.b("descending");
  visitDType(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    forEachLine(in[0], out, at.i("dim"), sizeof(T), sizeof(int64_t),
                [&](const char* p, int64_t s, char* q, int64_t qs, int64_t n) {
                  std::vector<int64_t> idx(static_cast<size_t>(n));
                  std::iota(idx.begin(), idx.end(), 0);
                  auto val = [&](int64_t j) {
                    return static_cast<C>(*reinterpret_cast<const T*>(p + j * s));
                  };
                  std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
                    return descending ? greaterNan(val(x), val(y)) : greaterNan(val(y), val(x));
                  });
                  for (int64_t j = 0; j < n; ++j)
                    *reinterpret_cast<int64_t*>(q + j * qs) = idx[static_cast<size_t>(j)];
                });
  });
}

} // namespace weft::kernels
