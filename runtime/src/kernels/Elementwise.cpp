// Elementwise kernels: the op table's unary and binary expressions, cast, where, copy and fill.
#include "Loops.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/VectorMath.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace weft::kernels {

Shape broadcastStrides(const TensorRef& ref, const Shape& shape) {
  Shape strides(shape.size(), 0);
  size_t offset = shape.size() - ref.shape.size();
  for (size_t d = 0; d < ref.shape.size(); ++d)
    if (ref.shape[d] != 1) strides[offset + d] = ref.strides[d];
  return strides;
}

namespace {

// Scalar helpers named in the op table's kernel column.
template <typename T> T kabs(T v) {
  if constexpr (std::is_unsigned_v<T>)
    return v;
  else
    return v < T(0) ? kneg(v) : v; // abs(INT64_MIN) wraps to itself, as in PyTorch
}
template <typename T> T ksign(T v) {
  return static_cast<T>((T(0) < v) - (v < T(0))); // sign(NaN) is 0, as in PyTorch
}
template <typename T> T krelu(T v) {
  return v <= T(0) ? T(0) : v; // NaN is not <= 0: it stays NaN
}
template <typename T> T ksigmoid(T v) {
  // Never exponentiates a large positive number, so it saturates instead of overflowing.
  if (v >= T(0)) return T(1) / (T(1) + std::exp(-v));
  T e = std::exp(v);
  return e / (T(1) + e);
}
template <typename T> T kfloor(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::floor(v);
  else
    return v;
}
template <typename T> T kceil(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::ceil(v);
  else
    return v;
}
template <typename T> T ktrunc(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::trunc(v);
  else
    return v;
}
template <typename T> T kround(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::nearbyint(v); // half to even, as PyTorch rounds
  else
    return v;
}
template <typename T> bool ktruth(T v) {
  return v != T(0);
}

template <typename T> T kpow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    if constexpr (std::is_signed_v<T>)
      if (b < 0) return a == 1 ? T(1) : a == -1 ? T((b % 2) ? -1 : 1) : T(0);
    T result = 1;
    while (b > 0) {
      if (b & 1) result = kmul(result, a);
      a = kmul(a, a);
      b = static_cast<T>(b >> 1);
    }
    return result;
  }
}
template <typename T> T kfmod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::fmod(a, b);
  } else {
    WEFT_CHECK(b != T(0), Value, "fmod: integer division by zero");
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return T(0); // the minimum % -1 overflows in C++
    return static_cast<T>(a % b);
  }
}
template <typename T> T kfloordiv(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b == T(0)) return a / b; // infinities and NaN, as IEEE division
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b; // an integer up to rounding
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    T floor = std::floor(div);
    if (div - floor > T(0.5)) floor += T(1); // div was an integer rounded down
    return floor;
  } else {
    WEFT_CHECK(b != T(0), Value, "floor_divide: integer division by zero");
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return kneg(a); // the minimum / -1 wraps to itself
      const T q = static_cast<T>(a / b);
      return a % b != 0 && ((a < T(0)) != (b < T(0))) ? static_cast<T>(q - 1) : q;
    } else {
      return static_cast<T>(a / b);
    }
  }
}
// ---- special functions, in double ----

/// log|gamma(x)| through the reentrant lgamma_r (lgamma writes the global signgam: a data race
/// when threads share a tensor's elements).
inline double lgammaDouble(double x) {
  int sign = 0;
  return lgamma_r(x, &sign);
}

/// digamma (psi), as PyTorch: -inf at +0 (+inf at -0), NaN at the negative integers, the
/// reflection formula below 0, the recurrence up to 10, then the asymptotic series
/// ln x - 1/(2x) - sum B_2n / (2n x^2n).
inline double digammaDouble(double x) {
  constexpr double pi = 3.14159265358979323846;
  if (x == 0) return std::copysign(std::numeric_limits<double>::infinity(), -x);
  if (std::isnan(x)) return x;
  if (x < 0) {
    if (x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
    // psi(x) = psi(1 - x) - pi / tan(pi x), the tangent taken of x's distance to the nearest
    // integer (its period is 1; exact, so x just below 0 or a negative integer keeps its digits).
    return digammaDouble(1 - x) - pi / std::tan(pi * (x - std::round(x)));
  }
  double shift = 0;
  while (x < 10) {
    shift -= 1 / x;
    x += 1;
  }
  if (std::isinf(x)) return x;
  // B_2n / 2n for n = 1..7: 1/12, -1/120, 1/252, -1/240, 1/132, -691/32760, 1/12.
  const double z = 1 / (x * x);
  const double series =
      z * (1.0 / 12 +
           z * (-1.0 / 120 +
                z * (1.0 / 252 +
                     z * (-1.0 / 240 + z * (1.0 / 132 + z * (-691.0 / 32760 + z * (1.0 / 12)))))));
  return shift + std::log(x) - 0.5 / x - series;
}

/// The Hurwitz zeta function sum_k (k + q)^-s for s > 1 (PyTorch's domain: NaN below 1, inf at
/// s = 1 and at q a non-positive integer): direct terms until q + k >= 9, then the Euler-Maclaurin
/// tail with the Bernoulli terms B_2j / (2j)! (s)_(2j-1) / w^(s+2j-1).
inline double zetaDouble(double s, double q) {
  const double inf = std::numeric_limits<double>::infinity();
  if (std::isnan(s) || std::isnan(q)) return s + q;
  if (s == 1) return inf;
  if (s < 1) return std::numeric_limits<double>::quiet_NaN();
  if (q == inf) return 0; // every term 0 (trigamma(inf) = 0, as PyTorch's)
  if (q <= 0) {
    if (q == std::floor(q)) return inf;
    if (s != std::floor(s)) return std::numeric_limits<double>::quiet_NaN(); // q^-s not real
    // trigamma's reflection, psi1(q) + psi1(1 - q) = pi^2 / sin^2(pi q): no term-by-term walk up
    // from a very negative q. Other orders walk, up to a million terms.
    constexpr double pi = 3.14159265358979323846;
    if (s == 2) {
      const double sine = std::sin(pi * (q - std::round(q)));
      return pi * pi / (sine * sine) - zetaDouble(2, 1 - q);
    }
    if (q < -1e6) return std::numeric_limits<double>::quiet_NaN();
  }
  constexpr double eps = 1.11022302462515654042e-16;
  double sum = std::pow(q, -s), a = q, term = 0;
  for (int64_t i = 0; i < 9 || a <= 9; ++i) {
    a += 1;
    term = std::pow(a, -s);
    sum += term;
    if (std::fabs(term / sum) < eps) return sum;
  }
  // The tail from w = a: integral w^(1-s) / (s - 1), minus half the first term, plus
  // sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) / w^(s+2j-1). (2j)! / B_2j for j = 1..12:
  static constexpr double factorialOverBernoulli[] = {12.0,
                                                      -720.0,
                                                      30240.0,
                                                      -1209600.0,
                                                      47900160.0,
                                                      -1.8924375803183791606e9,
                                                      7.47242496e10,
                                                      -2.950130727918164224e12,
                                                      1.1646782814350067249e14,
                                                      -4.5979787224074726105e15,
                                                      1.8152105401943546773e17,
                                                      -7.1661652561756670113e18};
  const double w = a;
  sum += term * w / (s - 1) - 0.5 * term;
  double rising = 1, k = 0;
  for (double d : factorialOverBernoulli) {
    rising *= s + k; // s (s+1) ... (s+2j-2)
    term /= w;
    const double t = rising * term / d;
    sum += t;
    if (std::fabs(t / sum) < eps) break;
    k += 1;
    rising *= s + k;
    term /= w;
    k += 1;
  }
  return sum;
}

/// The inverse error function: +-inf at +-1, NaN outside [-1, 1]. A first guess within ~10%
/// (the Taylor series in the middle, the asymptote x^2 = w - ln x + ln 2 - ln(pi)/2 in the tails,
/// w = -ln(1 - y^2)), then Halley steps on erf(x) = |y|, written as erfc(x) = 1 - |y| past 0.5
/// (1 - |y| is exact there, so the tails keep their precision).
inline double erfinvDouble(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1 || y == -1) return std::copysign(std::numeric_limits<double>::infinity(), y);
  if (y == 0) return y; // keeps -0
  constexpr double twoOverSqrtPi = 1.12837916709551257390;
  const double a = std::fabs(y), r = 1 - a;
  const bool tail = a > 0.5;
  const double w = -std::log(r * (1 + a));
  double x;
  if (w < 2) {
    const double c = 0.886226925452758 * a, c2 = c * c;
    x = c * (1 + c2 * (1.0 / 3 + c2 * (7.0 / 30 + c2 * (127.0 / 630))));
  } else {
    const double t = std::sqrt(w);
    x = t - (std::log(t) - 0.1207822376352452) / (2 * t);
  }
  for (int i = 0; i < 8; ++i) {
    const double f = tail ? r - std::erfc(x) : std::erf(x) - a; // erf(x) - |y|
    const double step = f / (twoOverSqrtPi * std::exp(-x * x));
    const double h = step / (1 + x * step);
    x -= h;
    if (!(std::fabs(h) > 1e-16 * x)) break;
  }
  return std::copysign(x, y);
}

template <typename T> T klgamma(T v) {
  return static_cast<T>(lgammaDouble(static_cast<double>(v)));
}
template <typename T> T kdigamma(T v) {
  return static_cast<T>(digammaDouble(static_cast<double>(v)));
}
template <typename T> T kerfinv(T v) {
  return static_cast<T>(erfinvDouble(static_cast<double>(v)));
}
template <typename T> T kzeta(T a, T b) {
  return static_cast<T>(zetaDouble(static_cast<double>(a), static_cast<double>(b)));
}

// Bitwise ops on integers and bool (bool: logical).
template <typename T> T kbitnot(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return !v;
  else
    return static_cast<T>(~v);
}
template <typename T> T kbitand(T a, T b) {
  return static_cast<T>(a & b);
}
template <typename T> T kbitor(T a, T b) {
  return static_cast<T>(a | b);
}
template <typename T> T kbitxor(T a, T b) {
  return static_cast<T>(a ^ b);
}
// Shifts as PyTorch 2 defines them: a negative amount or one of the type's width or more gives 0
// (left), or every bit the sign's (right; 0 for unsigned types). The bits shifted out are lost.
template <typename T> bool kshiftInRange(T b, int width) {
  if constexpr (std::is_signed_v<T>)
    if (b < T(0)) return false;
  return static_cast<uint64_t>(b) < static_cast<uint64_t>(width);
}
template <typename T> T kshl(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if (!kshiftInRange(b, sizeof(T) * 8)) return T(0);
  return static_cast<T>(static_cast<U>(static_cast<U>(a) << b));
}
template <typename T> T kshr(T a, T b) {
  constexpr int widest = sizeof(T) * 8 - (std::is_signed_v<T> ? 1 : 0);
  if (!kshiftInRange(b, widest)) return static_cast<T>(a >> widest); // all sign bits, or 0
  return static_cast<T>(a >> b);
}
/// |v| as the unsigned type (the minimum of a signed type has no signed magnitude).
template <typename T> std::make_unsigned_t<T> kmagnitude(T v) {
  using U = std::make_unsigned_t<T>;
  if constexpr (std::is_signed_v<T>)
    if (v < T(0)) return static_cast<U>(U(0) - static_cast<U>(v));
  return static_cast<U>(v);
}
// The greatest common divisor of |a| and |b| (0 for two zeros), and the least common multiple
// (0 if either is 0), computed on magnitudes so no step overflows; as PyTorch's, a result past
// the type's maximum wraps (gcd(INT_MIN, 0) is INT_MIN).
template <typename T> T kgcd(T a, T b) {
  auto x = kmagnitude(a), y = kmagnitude(b);
  while (x != 0) {
    auto r = static_cast<decltype(x)>(y % x);
    y = x;
    x = r;
  }
  return static_cast<T>(y);
}
template <typename T> T klcm(T a, T b) {
  auto g = kmagnitude(kgcd(a, b));
  if (g == 0) return T(0);
  return kabs(static_cast<T>(static_cast<decltype(g)>(kmagnitude(a) / g * kmagnitude(b))));
}
template <typename T> T kmax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b))
      return std::isnan(a) ? a : b; // NaN propagates, as in torch.maximum
  return a > b ? a : b;
}
template <typename T> T kmin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>)
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) ? a : b;
  return a < b ? a : b;
}

template <typename T>
constexpr bool kIsFloat = std::is_same_v<ComputeType<T>, float> || std::is_same_v<T, double>;

template <UnaryDomain D, typename T> constexpr bool unaryAccepts() {
  if constexpr (D == UnaryDomain::Float)
    return kIsFloat<T>;
  else if constexpr (D == UnaryDomain::Numeric)
    return !std::is_same_v<T, bool>;
  else if constexpr (D == UnaryDomain::Bitwise)
    return std::is_integral_v<T>;
  else
    return true;
}

template <UnaryDomain D, typename Fn>
void unaryTyped(const TensorRef& in, const TensorRef& out, Fn fn) {
  visitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (unaryAccepts<D, T>()) {
      using O = std::conditional_t<D == UnaryDomain::Logical, bool, T>;
      mapElementwise<O, T>(out, {&in}, fn);
    } else {
      WEFT_INTERNAL_ASSERT(false, "unary kernel called with dtype ", dtypeName(in.dtype));
    }
  });
}

template <BinaryResult R, typename Fn>
void binaryTyped(const TensorRef& a, const TensorRef& b, const TensorRef& out, Fn fn) {
  WEFT_INTERNAL_ASSERT(a.dtype == b.dtype, "binary kernel inputs differ in dtype");
  visitDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (R == BinaryResult::Bool) {
      mapElementwise<bool, T, T>(out, {&a, &b}, fn);
    } else if constexpr (std::is_same_v<T, bool>    ? R != BinaryResult::Bitwise
                         : R == BinaryResult::Float ? !kIsFloat<T>
                         : R == BinaryResult::Bitwise || R == BinaryResult::Integer
                             ? !std::is_integral_v<T>
                             : false) {
      WEFT_INTERNAL_ASSERT(false, "binary kernel called with dtype ", dtypeName(a.dtype));
    } else {
      mapElementwise<T, T, T>(out, {&a, &b}, fn);
    }
  });
}

} // namespace

void unary(OpCode op, const TensorRef& in, const TensorRef& out) {
  if (hasVectorMath(op) && in.dtype == out.dtype &&
      (in.dtype == DType::Float32 || in.dtype == DType::Float64)) {
    auto tiles = [&](auto tag) {
      using T = decltype(tag);
      forEachTile<T, T>(out, {&in},
                        [op](T* y, const T* x, int64_t len) { vectorMath(op, x, y, len); });
    };
    return in.dtype == DType::Float32 ? tiles(float()) : tiles(double());
  }
  if (hasVectorMath(op) && in.dtype == out.dtype &&
      (in.dtype == DType::Float16 || in.dtype == DType::BFloat16)) {
    // Computed in float by the same vector functions as float32 (so generated code, which holds
    // 16-bit values in float registers, rounds the same results), then rounded.
    auto tiles = [&](auto tag) {
      using T = decltype(tag);
      forEachTile<T, T>(out, {&in}, [op](T* y, const T* x, int64_t len) {
        float buffer[2][kTileElements];
        for (int64_t j = 0; j < len; ++j)
          buffer[0][j] = static_cast<float>(x[j]);
        vectorMath(op, buffer[0], buffer[1], len);
        for (int64_t j = 0; j < len; ++j)
          y[j] = T(buffer[1][j]);
      });
    };
    return in.dtype == DType::Float16 ? tiles(Half()) : tiles(BFloat16());
  }
  switch (op) {
#define WEFT_UNARY(N, s, d, low, k, vjp)                                                           \
  case OpCode::N:                                                                                  \
    return unaryTyped<UnaryDomain::d>(in, out, [](auto v) { return k; });
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) case OpCode::N:
#define WEFT_OP(N, s, kind, n, v) case OpCode::N:
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
    break;
  }
  WEFT_INTERNAL_ASSERT(false, "not a unary op: ", opName(op));
}

void binary(OpCode op, const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  switch (op) {
#define WEFT_BINARY(N, s, r, api, low, k, va, vb)                                                  \
  case OpCode::N:                                                                                  \
    return binaryTyped<BinaryResult::r>(a, b, out, [](auto a, auto b) { return k; });
#define WEFT_UNARY(N, s, d, low, k, v) case OpCode::N:
#define WEFT_OP(N, s, kind, n, v) case OpCode::N:
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
    break;
  }
  WEFT_INTERNAL_ASSERT(false, "not a binary op: ", opName(op));
}

void Cast(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  copyCast(in[0], out);
}

void Where(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  WEFT_INTERNAL_ASSERT(in[0].dtype == DType::Bool && in[1].dtype == in[2].dtype &&
                       in[1].dtype == out.dtype);
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    mapElementwise<T, bool, T, T>(out, {&in[0], &in[1], &in[2]},
                                  [](bool c, C a, C b) { return bitSelect(c, a, b); });
  });
}

} // namespace weft::kernels

namespace weft {

void copyCast(const TensorRef& src, const TensorRef& dst) {
  WEFT_INTERNAL_ASSERT(src.shape == dst.shape || numel(src.shape) == numel(dst.shape));
  // A copy onto itself (scatter_add planned in place over its input 0) has nothing to do.
  if (src.data == dst.data && src.dtype == dst.dtype && src.shape == dst.shape &&
      src.strides == dst.strides)
    return;
  visitDType(src.dtype, [&](auto stag) {
    using S = decltype(stag);
    visitDType(dst.dtype, [&](auto dtag) {
      using D = decltype(dtag);
      TensorRef s = src;
      if (src.shape != dst.shape) { // same count, other shape: only for contiguous sources
        WEFT_INTERNAL_ASSERT(src.isContiguous());
        s.shape = dst.shape;
        s.strides = contiguousStrides(dst.shape);
      }
      kernels::mapElementwise<D, S>(dst, {&s}, [](ComputeType<S> v) { return v; });
    });
  });
}

void fill(const TensorRef& dst, double value) {
  visitDType(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    T v = kernels::convert<T>(value);
    if (dst.isContiguous()) { // one run: filled a vector at a time
      T* p = dst.ptr<T>();
      parallelFor(dst.numel(), kernels::kElementwiseGrain,
                  [&](int64_t b, int64_t e) { std::fill(p + b, p + e, v); });
      return;
    }
    std::array<Shape, 1> strides{dst.strides};
    kernels::LoopNest<1> nest(dst.shape, strides, {static_cast<char*>(dst.data)},
                              {static_cast<int64_t>(sizeof(T))});
    nest.parallel(kernels::kElementwiseGrain,
                  [&](const std::array<char*, 1>& p, const std::array<int64_t, 1>& s, int64_t n) {
                    for (int64_t j = 0; j < n; ++j)
                      *reinterpret_cast<T*>(p[0] + j * s[0]) = v;
                  });
  });
}

} // namespace weft
