// Samples and double-precision references for every primitive op. One file past 1,000 lines on
// purpose: samplesFor() is one switch over the op table, so a new primitive adds its sample and
// reference in one place (the table tests fail for an op without one).
#include "OpSamples.h"

#include "weft/runtime/ConvGeometry.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace weft::test {

double& NdArray::at(const Shape& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    off = off * shape[d] + idx[d];
  return v[static_cast<size_t>(off)];
}
double NdArray::at(const Shape& idx) const {
  return const_cast<NdArray*>(this)->at(idx);
}

NdArray toNd(const Tensor& t) {
  return {t.sizes(), t.detach().to_vector<double>()};
}

Shape unravel(int64_t i, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

namespace {

Generator gen(uint64_t seed) {
  return Generator(seed);
}
Tensor normal(Shape s, uint64_t seed) {
  return randn(std::move(s), kFloat64, gen(seed));
}
/// Values in [lo, hi): away from the singular points of log, sqrt, reciprocal, pow.
Tensor uniform(Shape s, double lo, double hi, uint64_t seed) {
  return rand(std::move(s), kFloat64, gen(seed)) * (hi - lo) + lo;
}
Tensor indices(Shape s, int64_t n, uint64_t seed) {
  return randint(0, n, std::move(s), kInt64, gen(seed));
}

NdArray zerosNd(const Shape& s) {
  return {s, std::vector<double>(static_cast<size_t>(numel(s)), 0.0)};
}

/// Element of `a` at output index `idx` under broadcasting to `out`.
double bcast(const NdArray& a, const Shape& idx, const Shape& out) {
  Shape j(a.shape.size());
  size_t lead = out.size() - a.shape.size();
  for (size_t d = 0; d < a.shape.size(); ++d)
    j[d] = a.shape[d] == 1 ? 0 : idx[lead + d];
  return a.at(j);
}

Shape broadcastShape(const std::vector<NdArray>& xs) {
  size_t n = 0;
  for (const auto& x : xs)
    n = std::max(n, x.shape.size());
  Shape s(n, 1);
  for (const auto& x : xs)
    for (size_t d = 0; d < x.shape.size(); ++d) {
      int64_t v = x.shape[d];
      size_t o = n - x.shape.size() + d;
      if (v != 1) s[o] = v;
    }
  return s;
}

template <typename F> NdArray mapNd(const std::vector<NdArray>& xs, F f) {
  Shape s = broadcastShape(xs);
  NdArray r = zerosNd(s);
  for (int64_t i = 0; i < numel(s); ++i) {
    Shape idx = unravel(i, s);
    std::vector<double> args;
    for (const auto& x : xs)
      args.push_back(bcast(x, idx, s));
    r.v[static_cast<size_t>(i)] = f(args);
  }
  return r;
}

bool isReduced(const Attrs& at, size_t d) {
  const auto& dims = at.ints("dims");
  return dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end();
}

NdArray reduceNd(const NdArray& x, const Attrs& at, double init,
                 const std::function<double(double, double)>& f) {
  Shape kept;
  for (size_t d = 0; d < x.shape.size(); ++d)
    kept.push_back(isReduced(at, d) ? 1 : x.shape[d]);
  NdArray r{kept, std::vector<double>(static_cast<size_t>(numel(kept)), init)};
  for (int64_t i = 0; i < numel(x.shape); ++i) {
    Shape idx = unravel(i, x.shape);
    for (size_t d = 0; d < idx.size(); ++d)
      if (isReduced(at, d)) idx[d] = 0;
    r.at(idx) = f(r.at(idx), x.v[static_cast<size_t>(i)]);
  }
  if (!at.b("keepdim")) {
    Shape s;
    for (size_t d = 0; d < x.shape.size(); ++d)
      if (!isReduced(at, d)) s.push_back(x.shape[d]);
    r.shape = s;
  }
  return r;
}

/// Calls `f(idxWithoutDim, line)` for each line of `x` along `dim`.
template <typename F> void forLines(const Shape& shape, int64_t dim, F f) {
  Shape other = shape;
  other[static_cast<size_t>(dim)] = 1;
  for (int64_t i = 0; i < numel(other); ++i)
    f(unravel(i, other));
}

/// `x` with each line along `dim` replaced by its running `step`, from `start`.
template <typename Step> NdArray scanNd(const NdArray& x, int64_t dim, double start, Step step) {
  NdArray r = x;
  forLines(r.shape, dim, [&](Shape idx) {
    double acc = start;
    for (int64_t k = 0; k < r.shape[static_cast<size_t>(dim)]; ++k) {
      idx[static_cast<size_t>(dim)] = k;
      acc = step(acc, x.at(idx));
      r.at(idx) = acc;
    }
  });
  return r;
}

NdArray argReduceNd(const NdArray& x, const Attrs& at, bool isMax) {
  int64_t dim = at.i("dim");
  Shape os = x.shape;
  os[static_cast<size_t>(dim)] = 1;
  NdArray r = zerosNd(os);
  forLines(x.shape, dim, [&](Shape idx) {
    int64_t best = 0;
    Shape j = idx;
    double bv = x.at(j);
    for (int64_t k = 1; k < x.shape[static_cast<size_t>(dim)]; ++k) {
      j[static_cast<size_t>(dim)] = k;
      if (isMax ? x.at(j) > bv : x.at(j) < bv) {
        bv = x.at(j);
        best = k;
      }
    }
    r.at(idx) = static_cast<double>(best);
  });
  if (!at.b("keepdim")) r.shape.erase(r.shape.begin() + dim);
  return r;
}

NdArray permuteNd(const NdArray& x, const Shape& dims) {
  Shape s;
  for (int64_t d : dims)
    s.push_back(x.shape[static_cast<size_t>(d)]);
  NdArray r = zerosNd(s);
  for (int64_t i = 0; i < numel(s); ++i) {
    Shape idx = unravel(i, s), src(idx.size());
    for (size_t k = 0; k < dims.size(); ++k)
      src[static_cast<size_t>(dims[k])] = idx[k];
    r.v[static_cast<size_t>(i)] = x.at(src);
  }
  return r;
}

NdArray matmulNd(const NdArray& a, const NdArray& b) {
  size_t na = a.shape.size(), nb = b.shape.size();
  int64_t m = a.shape[na - 2], k = a.shape[na - 1], n = b.shape[nb - 1];
  NdArray ab{Shape(a.shape.begin(), a.shape.end() - 2), {}},
      bb{Shape(b.shape.begin(), b.shape.end() - 2), {}};
  Shape batch = broadcastShape({ab, bb});
  Shape out = batch;
  out.push_back(m);
  out.push_back(n);
  NdArray r = zerosNd(out);
  for (int64_t i = 0; i < numel(out); ++i) {
    Shape idx = unravel(i, out);
    double acc = 0;
    for (int64_t j = 0; j < k; ++j) {
      Shape ia(na), ib(nb);
      for (size_t d = 0; d + 2 < na; ++d)
        ia[d] = a.shape[d] == 1 ? 0 : idx[batch.size() - (na - 2) + d];
      for (size_t d = 0; d + 2 < nb; ++d)
        ib[d] = b.shape[d] == 1 ? 0 : idx[batch.size() - (nb - 2) + d];
      ia[na - 2] = idx[out.size() - 2];
      ia[na - 1] = j;
      ib[nb - 2] = j;
      ib[nb - 1] = idx[out.size() - 1];
      acc += a.at(ia) * b.at(ib);
    }
    r.v[static_cast<size_t>(i)] = acc;
  }
  return r;
}

/// Visits every (n, o, output position, c, kernel position) term of a 1-D or 2-D convolution with
/// the flat input, weight and output offsets it involves (padding terms skipped).
template <typename F> void convTerms(const Shape& x, const Shape& w, const Attrs& at, F f) {
  bool one = x.size() == 3;
  int64_t N = x[0], C = x[1], H = one ? 1 : x[2], W = x.back(), O = w[0], KH = one ? 1 : w[2],
          KW = w.back();
  const auto &st = at.ints("stride"), &pd = at.ints("padding"), &dl = at.ints("dilation");
  int64_t sh = one ? 1 : st[0], sw = st.back(), ph = one ? 0 : pd[0], pw = pd.back(),
          dh = one ? 1 : dl[0], dw = dl.back();
  int64_t g = at.i("groups"), cg = C / g, og = O / g;
  int64_t OH = windowOutputSize(H, KH, sh, ph, dh), OW = windowOutputSize(W, KW, sw, pw, dw);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox)
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * sh - ph + ky * dh, ix = ox * sw - pw + kx * dw;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                int64_t ci = (o / og) * cg + c;
                f(((n * C + ci) * H + iy) * W + ix, ((o * cg + c) * KH + ky) * KW + kx,
                  ((n * O + o) * OH + oy) * OW + ox);
              }
}

Shape convOutShape(const Shape& x, const Shape& w, const Attrs& at) {
  Shape s{x[0], w[0]};
  for (size_t i = 2; i < x.size(); ++i)
    s.push_back(windowOutputSize(x[i], w[i], at.ints("stride")[i - 2], at.ints("padding")[i - 2],
                                 at.ints("dilation")[i - 2]));
  return s;
}

Attrs convAttrs(Shape stride, Shape padding, Shape dilation, int64_t groups) {
  return Attrs{
      {"stride", stride}, {"padding", padding}, {"dilation", dilation}, {"groups", groups}};
}

/// Each matrix of x ([..., n, n]) inverted, or its determinant or log|det| (`op`), by
/// Gauss-Jordan elimination with partial pivoting in double.
NdArray gaussJordanNd(const NdArray& x, OpCode op) {
  const bool inverse = op == OpCode::Inverse;
  const size_t r = x.shape.size();
  const int64_t n = x.shape[r - 1];
  Shape batch(x.shape.begin(), x.shape.end() - 2);
  NdArray out = zerosNd(inverse ? x.shape : batch);
  for (int64_t k = 0; k < numel(batch); ++k) {
    std::vector<std::vector<double>> m(static_cast<size_t>(n),
                                       std::vector<double>(static_cast<size_t>(2 * n), 0.0));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j)
        m[i][j] = x.v[static_cast<size_t>((k * n + i) * n + j)];
      m[i][n + i] = 1;
    }
    double det = 1;
    for (int64_t c = 0; c < n; ++c) {
      int64_t p = c;
      for (int64_t i = c + 1; i < n; ++i)
        if (std::fabs(m[i][c]) > std::fabs(m[p][c])) p = i;
      if (p != c) {
        std::swap(m[p], m[c]);
        det = -det;
      }
      det *= m[c][c];
      for (int64_t j = 2 * n - 1; j >= c; --j)
        m[c][j] /= m[c][c];
      for (int64_t i = 0; i < n; ++i)
        if (i != c)
          for (int64_t j = 2 * n - 1; j >= c; --j)
            m[i][j] -= m[i][c] * m[c][j];
    }
    if (!inverse)
      out.v[static_cast<size_t>(k)] = op == OpCode::Det ? det : std::log(std::fabs(det));
    for (int64_t i = 0; inverse && i < n; ++i)
      for (int64_t j = 0; j < n; ++j)
        out.v[static_cast<size_t>((k * n + i) * n + j)] = m[i][n + j];
  }
  return out;
}

/// Each symmetric matrix's Cholesky factor (Cholesky-Banachiewicz, in double).
NdArray choleskyNd(const NdArray& x) {
  const size_t r = x.shape.size();
  const int64_t n = x.shape[r - 1];
  NdArray out = zerosNd(x.shape);
  for (int64_t k = 0; k < numel(x.shape) / std::max<int64_t>(n * n, 1); ++k) {
    auto a = [&](int64_t i, int64_t j) { return x.v[static_cast<size_t>((k * n + i) * n + j)]; };
    auto l = [&](int64_t i, int64_t j) -> double& {
      return out.v[static_cast<size_t>((k * n + i) * n + j)];
    };
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        double sum = a(i, j);
        for (int64_t p = 0; p < j; ++p)
          sum -= l(i, p) * l(j, p);
        l(i, j) = i == j ? std::sqrt(sum) : sum / l(j, j);
      }
  }
  return out;
}

/// Each symmetric matrix's eigenvalues, ascending, by cyclic Jacobi rotations in double.
NdArray eigvalshNd(const NdArray& x) {
  const size_t r = x.shape.size();
  const int64_t n = x.shape[r - 1];
  NdArray out = zerosNd(Shape(x.shape.begin(), x.shape.end() - 1));
  for (int64_t k = 0; k < numel(x.shape) / std::max<int64_t>(n * n, 1); ++k) {
    std::vector<double> a(x.v.begin() + k * n * n, x.v.begin() + (k + 1) * n * n);
    auto at = [&](int64_t i, int64_t j) -> double& { return a[static_cast<size_t>(i * n + j)]; };
    for (int sweep = 0; sweep < 100; ++sweep) {
      double off = 0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = i + 1; j < n; ++j)
          off += at(i, j) * at(i, j);
      if (off < 1e-30) break;
      for (int64_t p = 0; p < n; ++p)
        for (int64_t q = p + 1; q < n; ++q) {
          if (at(p, q) == 0) continue;
          const double theta = (at(q, q) - at(p, p)) / (2 * at(p, q));
          const double t = (theta >= 0 ? 1.0 : -1.0) /
                           (std::fabs(theta) + std::sqrt(theta * theta + 1)); // tan of the angle
          const double c = 1 / std::sqrt(t * t + 1), s = t * c;
          for (int64_t i = 0; i < n; ++i) { // A <- A J, then J^T A
            const double ip = at(i, p), iq = at(i, q);
            at(i, p) = c * ip - s * iq;
            at(i, q) = s * ip + c * iq;
          }
          for (int64_t j = 0; j < n; ++j) {
            const double pj = at(p, j), qj = at(q, j);
            at(p, j) = c * pj - s * qj;
            at(q, j) = s * pj + c * qj;
          }
        }
    }
    std::vector<double> w;
    for (int64_t i = 0; i < n; ++i)
      w.push_back(at(i, i));
    std::sort(w.begin(), w.end());
    std::copy(w.begin(), w.end(), out.v.begin() + k * n);
  }
  return out;
}

OpSample unarySample(OpCode op) {
  bool positive = op == OpCode::Log || op == OpCode::Sqrt || op == OpCode::Rsqrt ||
                  op == OpCode::Log1p || op == OpCode::Reciprocal || op == OpCode::Log2 ||
                  op == OpCode::Log10 || op == OpCode::Lgamma || op == OpCode::Digamma;
  bool unit = op == OpCode::Asin || op == OpCode::Acos || op == OpCode::Atanh ||
              op == OpCode::Erfinv; // (-1, 1)
  Tensor x = positive              ? uniform({3, 4}, 0.5, 2.0, 1)
             : unit                ? uniform({3, 4}, -0.9, 0.9, 1)
             : op == OpCode::Acosh ? uniform({3, 4}, 1.2, 3.0, 1)
                                   : normal({3, 4}, 1);
  OpSample s{"strided",
             {x},
             {},
             [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].t()}; },
             [op](const std::vector<NdArray>& in, const Attrs&) {
               return mapNd(
                   in, [op](const std::vector<double>& a) { return unaryReference(op, a[0]); });
             }};
  s.gradcheck = opInfo(op).differentiable && op != OpCode::Floor && op != OpCode::Ceil &&
                op != OpCode::Round && op != OpCode::Sign && op != OpCode::Trunc;
  return s;
}

/// Integral ops: int64 samples of both signs, shift amounts in [0, 8) (no shift past a dtype's
/// width; uint8 results wrap, as the reference's do when converted), the second operand
/// broadcast.
OpSample integralSample(OpCode op) {
  const bool unary = opInfo(op).kind == OpKind::Unary;
  const bool shift = op == OpCode::BitwiseLeftShift || op == OpCode::BitwiseRightShift;
  Tensor a = (normal(unary ? Shape{3, 4} : Shape{3, 1, 4}, 2) * 20).round().to(kInt64);
  Tensor b =
      shift ? randint(0, 8, {5, 4}, kInt64, gen(3)) : (normal({5, 4}, 3) * 20).round().to(kInt64);
  std::vector<Tensor> in = unary ? std::vector<Tensor>{a} : std::vector<Tensor>{a, b};
  OpSample s{"integers", in, {}, {}, [op, unary](const std::vector<NdArray>& in, const Attrs&) {
               return mapNd(in, [op, unary](const std::vector<double>& v) {
                 return unary ? unaryReference(op, v[0]) : binaryReference(op, v[0], v[1]);
               });
             }};
  s.gradcheck = false;
  return s;
}

OpSample binarySample(OpCode op) {
  bool positive = op == OpCode::Pow || op == OpCode::Div;
  Tensor a = positive ? uniform({3, 1, 4}, 0.5, 2.0, 2) : normal({3, 1, 4}, 2);
  Tensor b = positive ? uniform({5, 4}, 0.5, 2.0, 3) : normal({5, 4}, 3);
  if (op == OpCode::Zeta) { // exponents above 1, offsets away from the poles at 0, -1, ...
    a = uniform({3, 1, 4}, 1.5, 3.5, 2);
    b = uniform({5, 4}, 0.5, 2.0, 3);
  }
  if (op == OpCode::Fmod || op == OpCode::FloorDivide) { // divisors away from 0, both signs
    a = normal({3, 1, 4}, 2) * 4.0;
    b = uniform({5, 4}, 0.5, 2.0, 3) * normal({5, 4}, 3).sign();
  }
  OpSample s{"broadcast", {a, b}, {}, {}, [op](const std::vector<NdArray>& in, const Attrs&) {
               return mapNd(in, [op](const std::vector<double>& v) {
                 return binaryReference(op, v[0], v[1]);
               });
             }};
  s.gradcheck = opInfo(op).differentiable && op != OpCode::Zeta; // zeta: no gradient for a
  return s;
}

NdArray sliceNd(const NdArray& x, const Attrs& at) {
  size_t d = static_cast<size_t>(at.i("dim"));
  int64_t start = at.i("start"), end = at.i("end"), step = at.i("step");
  Shape s = x.shape;
  s[d] = (end - start + step - 1) / step;
  NdArray r = zerosNd(s);
  for (int64_t i = 0; i < numel(s); ++i) {
    Shape idx = unravel(i, s);
    idx[d] = start + idx[d] * step;
    r.v[static_cast<size_t>(i)] = x.at(idx);
  }
  return r;
}

} // namespace

namespace {
/// Reference special functions, computed differently from the kernels (Elementwise.cpp): digamma
/// and zeta in long double with their series started further out, erfinv by bisection on erf.
long double digammaReference(long double x) {
  if (x == 0) return std::signbit(static_cast<double>(x)) ? INFINITY : -INFINITY;
  if (x < 0) {
    if (x == std::floor(x)) return NAN;
    return digammaReference(1 - x) -
           3.14159265358979323846264L / std::tan(3.14159265358979323846264L * x);
  }
  long double shift = 0;
  for (; x < 40; x += 1)
    shift -= 1 / x;
  const long double z = 1 / (x * x);
  return shift + std::log(x) - 1 / (2 * x) - z / 12 + z * z / 120 - z * z * z / 252 +
         z * z * z * z / 240;
}
long double zetaReference(long double s, long double q) {
  if (s == 1 || (q <= 0 && q == std::floor(q))) return INFINITY;
  if (s < 1 || (q <= 0 && s != std::floor(s))) return NAN;
  // sum_{k < 60} (q + k)^-s, then the tail's integral, half-term and first two Bernoulli terms.
  long double sum = 0, w = q;
  for (int k = 0; k < 60; ++k, w += 1)
    sum += std::pow(w, -s);
  const long double first = std::pow(w, -s);
  return sum + w * first / (s - 1) + first / 2 + s * first / (12 * w) -
         s * (s + 1) * (s + 2) * first / (720 * w * w * w);
}
double erfinvReference(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return NAN;
  if (std::fabs(y) == 1) return std::copysign(INFINITY, y);
  double lo = -7, hi = 7;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}
} // namespace

double unaryReference(OpCode op, double x) {
  switch (op) {
  case OpCode::Neg:
    return -x;
  case OpCode::Abs:
    return std::fabs(x);
  case OpCode::Sign:
    return static_cast<double>((x > 0) - (x < 0));
  case OpCode::Exp:
    return std::exp(x);
  case OpCode::Log:
    return std::log(x);
  case OpCode::Log1p:
    return std::log1p(x);
  case OpCode::Expm1:
    return std::expm1(x);
  case OpCode::Sqrt:
    return std::sqrt(x);
  case OpCode::Rsqrt:
    return 1.0 / std::sqrt(x);
  case OpCode::Sin:
    return std::sin(x);
  case OpCode::Cos:
    return std::cos(x);
  case OpCode::Atan:
    return std::atan(x);
  case OpCode::Tan:
    return std::tan(x);
  case OpCode::Asin:
    return std::asin(x);
  case OpCode::Acos:
    return std::acos(x);
  case OpCode::Sinh:
    return std::sinh(x);
  case OpCode::Cosh:
    return std::cosh(x);
  case OpCode::Asinh:
    return std::asinh(x);
  case OpCode::Acosh:
    return std::acosh(x);
  case OpCode::Atanh:
    return std::atanh(x);
  case OpCode::Log2:
    return std::log2(x);
  case OpCode::Log10:
    return std::log10(x);
  case OpCode::Exp2:
    return std::exp2(x);
  case OpCode::Trunc:
    return std::trunc(x);
  case OpCode::Relu:
    return x <= 0 ? 0.0 : x;
  case OpCode::Tanh:
    return std::tanh(x);
  case OpCode::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case OpCode::Erf:
    return std::erf(x);
  case OpCode::Erfc:
    return std::erfc(x);
  case OpCode::Reciprocal:
    return 1.0 / x;
  case OpCode::Floor:
    return std::floor(x);
  case OpCode::Ceil:
    return std::ceil(x);
  case OpCode::Round:
    return std::nearbyint(x);
  case OpCode::LogicalNot:
    return x == 0 ? 1.0 : 0.0;
  case OpCode::Lgamma:
    return std::lgamma(x);
  case OpCode::Digamma:
    return static_cast<double>(digammaReference(x));
  case OpCode::Erfinv:
    return erfinvReference(x);
  case OpCode::BitwiseNot:
    return static_cast<double>(~static_cast<int64_t>(x));
  default:
    ADD_FAILURE() << "no unary reference for " << opName(op);
    return 0;
  }
}

double binaryReference(OpCode op, double a, double b) {
  switch (op) {
  case OpCode::Add:
    return a + b;
  case OpCode::Sub:
    return a - b;
  case OpCode::Mul:
    return a * b;
  case OpCode::Div:
    return a / b;
  case OpCode::Pow:
    return std::pow(a, b);
  case OpCode::Fmod:
    return std::fmod(a, b);
  case OpCode::Atan2:
    return std::atan2(a, b);
  case OpCode::FloorDivide:
    return std::floor(a / b);
  case OpCode::Maximum:
    return std::max(a, b);
  case OpCode::Minimum:
    return std::min(a, b);
  case OpCode::Eq:
    return a == b;
  case OpCode::Ne:
    return a != b;
  case OpCode::Lt:
    return a < b;
  case OpCode::Le:
    return a <= b;
  case OpCode::Gt:
    return a > b;
  case OpCode::Ge:
    return a >= b;
  case OpCode::LogicalAnd:
    return (a != 0) && (b != 0);
  case OpCode::LogicalOr:
    return (a != 0) || (b != 0);
  case OpCode::LogicalXor:
    return (a != 0) != (b != 0);
  case OpCode::BitwiseAnd:
    return static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
  case OpCode::BitwiseOr:
    return static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
  case OpCode::BitwiseXor:
    return static_cast<double>(static_cast<int64_t>(a) ^ static_cast<int64_t>(b));
  case OpCode::BitwiseLeftShift: // amounts in [0, 8): a * 2^b
    return a * std::exp2(b);
  case OpCode::BitwiseRightShift: // arithmetic: rounds toward minus infinity
    return std::floor(a / std::exp2(b));
  case OpCode::Zeta:
    return static_cast<double>(zetaReference(a, b));
  case OpCode::Gcd:
    return static_cast<double>(std::gcd(static_cast<int64_t>(a), static_cast<int64_t>(b)));
  case OpCode::Lcm:
    return static_cast<double>(std::lcm(static_cast<int64_t>(a), static_cast<int64_t>(b)));
  default:
    ADD_FAILURE() << "no binary reference for " << opName(op);
    return 0;
  }
}

bool integralOnly(OpCode op) {
  const OpInfo& info = opInfo(op);
  return (info.kind == OpKind::Unary && info.unaryDomain == UnaryDomain::Bitwise) ||
         (info.kind == OpKind::Binary && (info.binaryResult == BinaryResult::Bitwise ||
                                          info.binaryResult == BinaryResult::Integer));
}

std::vector<OpSample> samplesFor(OpCode op) {
  const OpInfo& info = opInfo(op);
  if (integralOnly(op)) return {integralSample(op)};
  if (info.kind == OpKind::Unary) return {unarySample(op)};
  if (info.kind == OpKind::Binary) return {binarySample(op)};
  auto identity = [](const std::vector<NdArray>& in, const Attrs&) { return in[0]; };
  switch (op) {
  case OpCode::Cast:
    return {{"to float64", {normal({4, 3}, 4)}, Attrs{{"dtype", kFloat64}}, {}, identity},
            {"to int32",
             {normal({4, 3}, 5) * 10},
             Attrs{{"dtype", kInt32}},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) {
               return mapNd(in, [](const std::vector<double>& a) { return std::trunc(a[0]); });
             },
             {},
             false}};
  case OpCode::StopGradient:
    return {{"strided",
             {normal({3, 4}, 50)},
             {},
             [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].t()}; },
             identity}};
  case OpCode::Where:
    return {{"broadcast",
             {normal({3, 4}, 6) > 0, normal({1, 4}, 7), normal({3, 1}, 8)},
             {},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) {
               return mapNd(in,
                            [](const std::vector<double>& a) { return a[0] != 0 ? a[1] : a[2]; });
             }}};
  case OpCode::Sum:
  case OpCode::Prod:
  case OpCode::AMax:
  case OpCode::AMin: {
    double init = op == OpCode::Sum    ? 0
                  : op == OpCode::Prod ? 1
                  : op == OpCode::AMax ? -INFINITY
                                       : INFINITY;
    std::function<double(double, double)> f =
        op == OpCode::Sum    ? [](double a, double b) { return a + b; }
        : op == OpCode::Prod ? [](double a, double b) { return a * b; }
        : op == OpCode::AMax ? [](double a, double b) { return std::max(a, b); }
                             : [](double a, double b) { return std::min(a, b); };
    auto ref = [init, f](const std::vector<NdArray>& in, const Attrs& at) {
      return reduceNd(in[0], at, init, f);
    };
    Tensor x = op == OpCode::Prod ? uniform({2, 3, 4}, 0.5, 1.5, 9) : normal({2, 3, 4}, 9);
    return {
        {"dims 0,2 keepdim", {x}, Attrs{{"dims", Shape{0, 2}}, {"keepdim", true}}, {}, ref},
        {"all", {x}, Attrs{{"dims", Shape{}}, {"keepdim", false}}, {}, ref},
        {"dim 1 of transposed",
         {x},
         Attrs{{"dims", Shape{1}}, {"keepdim", false}},
         [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].transpose(0, 2)}; },
         ref}};
  }
  case OpCode::ArgMax:
  case OpCode::ArgMin:
    return {{"dim 1",
             {normal({3, 5, 2}, 10)},
             Attrs{{"dim", int64_t{1}}, {"keepdim", false}},
             {},
             [op](const std::vector<NdArray>& in, const Attrs& at) {
               return argReduceNd(in[0], at, op == OpCode::ArgMax);
             }},
            {"dim 0 keepdim",
             {normal({4, 3}, 11)},
             Attrs{{"dim", int64_t{0}}, {"keepdim", true}},
             {},
             [op](const std::vector<NdArray>& in, const Attrs& at) {
               return argReduceNd(in[0], at, op == OpCode::ArgMax);
             }}};
  case OpCode::CumSum:
  case OpCode::CumProd:
  case OpCode::LogCumSumExp: {
    auto ref = [op](const std::vector<NdArray>& in, const Attrs& at) {
      return scanNd(in[0], at.i("dim"),
                    op == OpCode::CumSum    ? 0.0
                    : op == OpCode::CumProd ? 1.0
                                            : -INFINITY,
                    [op](double acc, double v) {
                      if (op == OpCode::CumSum) return acc + v;
                      if (op == OpCode::CumProd) return acc * v;
                      const double hi = std::max(acc, v);
                      return hi == -INFINITY ? hi
                                             : hi + std::log1p(std::exp(std::min(acc, v) - hi));
                    });
    };
    std::vector<OpSample> r = {
        {"dim 1", {normal({3, 5}, 12)}, Attrs{{"dim", int64_t{1}}}, {}, ref},
        {"dim 0 of a transpose",
         {normal({5, 3}, 13)},
         Attrs{{"dim", int64_t{0}}},
         [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].t()}; },
         ref}};
    if (op == OpCode::CumProd) // zeros: the gradient before, at and after a line's first one
      r.push_back({"zeros",
                   {from_vector(std::vector<double>{0.5, 0.0, 1.5, -2.0, 0.0, 1.2, -0.7, 1.1, 0.9,
                                                    0.0, 0.0, 1.3},
                                {3, 4})},
                   Attrs{{"dim", int64_t{1}}},
                   {},
                   ref});
    return r;
  }
  case OpCode::CumArgMax:
  case OpCode::CumArgMin: {
    auto ref = [op](const std::vector<NdArray>& in, const Attrs& at) {
      NdArray r = in[0];
      const int64_t dim = at.i("dim");
      forLines(r.shape, dim, [&](Shape idx) {
        double best = 0, bv = 0;
        for (int64_t k = 0; k < r.shape[static_cast<size_t>(dim)]; ++k) {
          idx[static_cast<size_t>(dim)] = k;
          const double v = in[0].at(idx);
          if (k == 0 || std::isnan(v) || (op == OpCode::CumArgMax ? v >= bv : v <= bv)) {
            best = static_cast<double>(k);
            bv = v;
          }
          r.at(idx) = best;
        }
      });
      return r;
    };
    return {{"dim 1", {normal({3, 5}, 14)}, Attrs{{"dim", int64_t{1}}}, {}, ref, {}, false},
            {"ties and NaNs",
             {from_vector(std::vector<double>{1, 3, 3, 2, NAN, 5, NAN, 1}, {2, 4})},
             Attrs{{"dim", int64_t{1}}},
             {},
             ref,
             {},
             false}};
  }
  case OpCode::Softmax:
  case OpCode::LogSoftmax: {
    auto ref = [op](const std::vector<NdArray>& in, const Attrs& at) {
      NdArray r = in[0];
      int64_t dim = at.i("dim");
      forLines(r.shape, dim, [&](Shape idx) {
        const int64_t n = r.shape[static_cast<size_t>(dim)];
        double m = -INFINITY, sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          idx[static_cast<size_t>(dim)] = k;
          m = std::max(m, in[0].at(idx));
        }
        for (int64_t k = 0; k < n; ++k) {
          idx[static_cast<size_t>(dim)] = k;
          sum += std::exp(in[0].at(idx) - m);
        }
        for (int64_t k = 0; k < n; ++k) {
          idx[static_cast<size_t>(dim)] = k;
          double z = in[0].at(idx) - m;
          r.at(idx) = op == OpCode::Softmax ? std::exp(z) / sum : z - std::log(sum);
        }
      });
      return r;
    };
    return {
        {"last dim", {normal({3, 7}, 14)}, Attrs{{"dim", int64_t{1}}}, {}, ref},
        {"dim 0 of 3-d", {normal({4, 3, 2}, 15)}, Attrs{{"dim", int64_t{0}}}, {}, ref},
        {"dim 1 of transposed",
         {normal({5, 4}, 16)},
         Attrs{{"dim", int64_t{1}}},
         [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].transpose(0, 1)}; },
         ref}};
  }
  case OpCode::ArgSort:
    return {{"descending",
             {normal({4, 6}, 13)},
             Attrs{{"dim", int64_t{1}}, {"descending", true}},
             {},
             [](const std::vector<NdArray>& in, const Attrs& at) {
               NdArray r = in[0];
               int64_t dim = at.i("dim");
               forLines(r.shape, dim, [&](Shape idx) {
                 int64_t n = r.shape[static_cast<size_t>(dim)];
                 std::vector<int64_t> order(static_cast<size_t>(n));
                 std::iota(order.begin(), order.end(), 0);
                 auto val = [&](int64_t k) {
                   Shape j = idx;
                   j[static_cast<size_t>(dim)] = k;
                   return in[0].at(j);
                 };
                 std::stable_sort(order.begin(), order.end(),
                                  [&](int64_t a, int64_t b) { return val(a) > val(b); });
                 for (int64_t k = 0; k < n; ++k) {
                   idx[static_cast<size_t>(dim)] = k;
                   r.at(idx) = static_cast<double>(order[static_cast<size_t>(k)]);
                 }
               });
               return r;
             }}};
  case OpCode::Reshape:
    return {{"copying reshape of a transpose",
             {normal({3, 4}, 14)},
             Attrs{{"shape", Shape{2, 6}}},
             [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].t()}; },
             [](const std::vector<NdArray>& in, const Attrs& at) {
               return NdArray{at.ints("shape"), in[0].v};
             }},
            {"view",
             {normal({2, 3, 4}, 15)},
             Attrs{{"shape", Shape{6, 4}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs& at) {
               return NdArray{at.ints("shape"), in[0].v};
             }}};
  case OpCode::Permute:
    return {{"3-d",
             {normal({2, 3, 4}, 16)},
             Attrs{{"dims", Shape{2, 0, 1}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs& at) {
               return permuteNd(in[0], at.ints("dims"));
             }}};
  case OpCode::Expand:
    return {{"leading and inner",
             {normal({3, 1}, 17)},
             Attrs{{"shape", Shape{2, 3, 4}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs& at) {
               return mapNd({in[0], zerosNd(at.ints("shape"))},
                            [](const std::vector<double>& a) { return a[0]; });
             }}};
  case OpCode::Slice:
    return {
        {"step 2",
         {normal({4, 7}, 18)},
         Attrs{
             {"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{6}}, {"step", int64_t{2}}},
         {},
         [](const std::vector<NdArray>& in, const Attrs& at) { return sliceNd(in[0], at); }},
        {"step 3 to the end",
         {normal({7, 2}, 19)},
         Attrs{
             {"dim", int64_t{0}}, {"start", int64_t{0}}, {"end", int64_t{7}}, {"step", int64_t{3}}},
         {},
         [](const std::vector<NdArray>& in, const Attrs& at) { return sliceNd(in[0], at); }}};
  case OpCode::Flip:
    return {{"two dims",
             {normal({3, 4, 2}, 20)},
             Attrs{{"dims", Shape{0, 2}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs& at) {
               NdArray r = in[0];
               for (int64_t i = 0; i < numel(r.shape); ++i) {
                 Shape idx = unravel(i, r.shape);
                 for (int64_t d : at.ints("dims"))
                   idx[static_cast<size_t>(d)] =
                       r.shape[static_cast<size_t>(d)] - 1 - idx[static_cast<size_t>(d)];
                 r.v[static_cast<size_t>(i)] = in[0].at(idx);
               }
               return r;
             }}};
  case OpCode::Pad: {
    auto ref = [](const std::vector<NdArray>& in, const Attrs& at) {
      const auto& p = at.ints("pads");
      Shape s = in[0].shape;
      for (size_t d = 0; d < s.size(); ++d)
        s[d] += p[2 * d] + p[2 * d + 1];
      NdArray r{s, std::vector<double>(static_cast<size_t>(numel(s)), at.f("value"))};
      for (int64_t i = 0; i < numel(s); ++i) {
        Shape idx = unravel(i, s);
        bool inside = true;
        for (size_t d = 0; d < s.size(); ++d) {
          idx[d] -= p[2 * d];
          inside = inside && idx[d] >= 0 && idx[d] < in[0].shape[d];
        }
        if (inside) r.v[static_cast<size_t>(i)] = in[0].at(idx);
      }
      return r;
    };
    return {
        {"grow", {normal({2, 3}, 21)}, Attrs{{"pads", Shape{1, 0, 2, 1}}, {"value", 0.5}}, {}, ref},
        {"crop and grow",
         {normal({4, 5}, 22)},
         Attrs{{"pads", Shape{-1, 2, 0, -2}}, {"value", 0.0}},
         {},
         ref}};
  }
  case OpCode::Cat:
    return {{"three along dim 1",
             {normal({2, 1}, 23), normal({2, 3}, 24), normal({2, 2}, 25)},
             Attrs{{"dim", int64_t{1}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) {
               NdArray r = zerosNd({2, 6});
               int64_t off = 0;
               for (const auto& t : in) {
                 for (int64_t i = 0; i < numel(t.shape); ++i) {
                   Shape idx = unravel(i, t.shape);
                   r.at({idx[0], idx[1] + off}) = t.v[static_cast<size_t>(i)];
                 }
                 off += t.shape[1];
               }
               return r;
             }}};
  case OpCode::Inverse:
  case OpCode::Det:
  case OpCode::LogAbsDet: {
    // Well-conditioned matrices (normal entries plus 3 on the diagonal); the batch read through
    // a transpose, so the kernel sees strides.
    Tensor a = normal({2, 4, 4}, 40) + eye(4, std::nullopt, kFloat64) * 3.0;
    return {
        {"strided batch",
         {a},
         {},
         [](const std::vector<Tensor>& in) { return std::vector<Tensor>{in[0].mT()}; },
         [op](const std::vector<NdArray>& in, const Attrs&) { return gaussJordanNd(in[0], op); }},
        {"empty matrices",
         {zeros({3, 0, 0}, kFloat64)},
         {},
         {},
         [op](const std::vector<NdArray>& in, const Attrs&) { return gaussJordanNd(in[0], op); }}};
  }
  case OpCode::Cholesky:
  case OpCode::EighValues:
  case OpCode::EighVectors: {
    // Symmetric matrices made from the lower triangle inside the recorded function (finite
    // differences then move both triangles, as the factorization's gradient assumes):
    // positive-definite for Cholesky, with well-separated eigenvalues for the eigenvectors'
    // gradient.
    Tensor b = normal({2, 4, 4}, 41);
    Tensor a = b.matmul(b.mT()) + eye(4, std::nullopt, kFloat64) * 2.0 +
               tensor({0.0, 1.0, 2.0, 3.0}).to(kFloat64).diag() * 3.0;
    auto symmetric = [](const std::vector<Tensor>& in) { // from the lower triangle, in its dtype
      return std::vector<Tensor>{in[0].tril() + in[0].tril(-1).mT()};
    };
    OpSample sample{"symmetric batch", {a}, {}, symmetric, {}};
    if (op == OpCode::Cholesky)
      sample.reference = [](const std::vector<NdArray>& in, const Attrs&) {
        return choleskyNd(in[0]);
      };
    else if (op == OpCode::EighValues)
      sample.reference = [](const std::vector<NdArray>& in, const Attrs&) {
        return eigvalshNd(in[0]);
      };
    else // eigenvectors are defined up to sign: V is orthogonal and A V = V diag(w)
      sample.check = [a](const Tensor& v) -> ::testing::AssertionResult {
        const double tol = v.dtype() == kFloat64 ? 1e-10 : 1e-4;
        Tensor vd = v.to(kFloat64), sym = a.tril() + a.tril(-1).mT();
        NdArray values = eigvalshNd(toNd(sym));
        Tensor w = from_blob(values.v.data(), values.shape, kFloat64).clone();
        Tensor eye4 = eye(4, std::nullopt, kFloat64);
        double orth = (vd.mT().matmul(vd) - eye4).abs().max().item<double>();
        double fit = (sym.matmul(vd) - vd * w.unsqueeze(-2)).abs().max().item<double>();
        if (orth > tol || fit > tol * 40)
          return ::testing::AssertionFailure() << "|V^T V - I| " << orth << ", |AV - VW| " << fit;
        return ::testing::AssertionSuccess();
      };
    return {sample};
  }
  case OpCode::QrQ:
  case OpCode::QrR:
  case OpCode::SvdU:
  case OpCode::SvdS:
  case OpCode::SvdVh: {
    // A tall batch and a wide matrix. Q and R, U and Vh are defined up to signs: checked by what
    // defines them (orthonormal columns or rows, R upper triangular, the product giving A); the
    // singular values against the square roots of A^T A's eigenvalues (Jacobi, in double).
    std::vector<OpSample> samples;
    for (const Tensor& a : {normal({2, 5, 3}, 42), normal({3, 5}, 43)}) {
      const std::string label = a.dim() == 3 ? "tall batch" : "wide";
      OpSample sample{label, {a}, {}, {}, {}};
      if (op == OpCode::SvdS) {
        sample.reference = [](const std::vector<NdArray>& in, const Attrs&) {
          Tensor x = from_blob(const_cast<double*>(in[0].v.data()), in[0].shape, kFloat64);
          const bool tall = x.size(-2) >= x.size(-1);
          Tensor gram = tall ? x.mT().matmul(x) : x.matmul(x.mT()); // k x k
          NdArray w = eigvalshNd(toNd(gram));
          NdArray out = w;
          const auto k = static_cast<size_t>(gram.size(-1));
          for (size_t b = 0; b < w.v.size() / k; ++b) // descending square roots
            for (size_t j = 0; j < k; ++j)
              out.v[b * k + j] = std::sqrt(std::max(w.v[b * k + k - 1 - j], 0.0));
          return out;
        };
      } else {
        sample.check = [a, op](const Tensor& f) -> ::testing::AssertionResult {
          const double tol = f.dtype() == kFloat64 ? 1e-10 : 2e-4;
          Tensor x = f.to(kFloat64);
          const bool columns = op == OpCode::QrQ || op == OpCode::SvdU; // orthonormal columns
          Tensor gram = columns ? x.mT().matmul(x) : x.matmul(x.mT());
          Tensor eye = ones({gram.size(-1)}, kFloat64).diag();
          double orth = op == OpCode::QrR ? 0 : (gram - eye).abs().max().item<double>();
          // The partner factors from the same dtype's factorization (the same signs).
          Tensor same = a.to(f.dtype());
          auto [q, r] = linalg_qr(same);
          auto [u, sv, vh] = linalg_svd(same, false);
          q = q.to(kFloat64), r = r.to(kFloat64), u = u.to(kFloat64), vh = vh.to(kFloat64);
          Tensor s = sv.to(kFloat64).unsqueeze(-2);
          Tensor rebuilt = op == OpCode::QrQ    ? x.matmul(r)
                           : op == OpCode::QrR  ? q.matmul(x)
                           : op == OpCode::SvdU ? (x * s).matmul(vh)
                                                : (u * s).matmul(x);
          double fit = (rebuilt - a).abs().max().item<double>();
          double lower = op == OpCode::QrR ? (x - x.triu()).abs().max().item<double>() : 0;
          if (orth > tol || fit > tol * 10 || lower != 0)
            return ::testing::AssertionFailure()
                   << "orthonormality " << orth << ", product " << fit << ", below R " << lower;
          return ::testing::AssertionSuccess();
        };
      }
      samples.push_back(sample);
    }
    return samples;
  }
  case OpCode::MatMul:
    return {{"batched broadcast",
             {normal({2, 1, 3, 4}, 26), normal({3, 4, 5}, 27)},
             {},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) { return matmulNd(in[0], in[1]); }},
            // A 2-D b shared by every batch: one product with the batch folded into the rows.
            {"shared 2-D weight",
             {normal({2, 3, 4, 5}, 90), normal({5, 6}, 91)},
             {},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) { return matmulNd(in[0], in[1]); }},
            // ... and with batches that do not follow one another in memory: one per batch.
            {"shared 2-D weight, permuted batches",
             {normal({3, 2, 4, 5}, 92), normal({6, 5}, 93)},
             {},
             [](const std::vector<Tensor>& in) {
               return std::vector<Tensor>{in[0].transpose(0, 1), in[1].t()};
             },
             [](const std::vector<NdArray>& in, const Attrs&) { return matmulNd(in[0], in[1]); }},
            {"transposed operands",
             {normal({4, 3}, 28), normal({5, 4}, 29)},
             {},
             [](const std::vector<Tensor>& in) {
               return std::vector<Tensor>{in[0].t(), in[1].t()};
             },
             [](const std::vector<NdArray>& in, const Attrs&) { return matmulNd(in[0], in[1]); }}};
  case OpCode::Conv: {
    auto ref = [](const std::vector<NdArray>& in, const Attrs& at) {
      NdArray r = zerosNd(convOutShape(in[0].shape, in[1].shape, at));
      convTerms(in[0].shape, in[1].shape, at, [&](int64_t xi, int64_t wi, int64_t yi) {
        r.v[static_cast<size_t>(yi)] +=
            in[0].v[static_cast<size_t>(xi)] * in[1].v[static_cast<size_t>(wi)];
      });
      return r;
    };
    return {{"2-d strided padded dilated grouped",
             {normal({2, 4, 7, 6}, 30), normal({6, 2, 3, 2}, 31)},
             convAttrs({2, 1}, {1, 1}, {1, 2}, 2),
             {},
             ref},
            {"1-d",
             {normal({2, 3, 9}, 32), normal({4, 3, 3}, 33)},
             convAttrs({2}, {1}, {1}, 1),
             {},
             ref},
            {"pointwise",
             {normal({2, 3, 4, 4}, 34), normal({5, 3, 1, 1}, 35)},
             convAttrs({1, 1}, {0, 0}, {1, 1}, 1),
             {},
             ref},
            // Output as large as the input: the kernels' shifted-plane im2col.
            {"same 5x3",
             {normal({2, 3, 5, 4}, 60), normal({4, 3, 5, 3}, 61)},
             convAttrs({1, 1}, {2, 1}, {1, 1}, 1),
             {},
             ref},
            {"same 3x3 grouped",
             {normal({2, 4, 4, 6}, 62), normal({4, 2, 3, 3}, 63)},
             convAttrs({1, 1}, {1, 1}, {1, 1}, 2),
             {},
             ref},
            {"same, kernel larger than the image",
             {normal({1, 2, 1, 2}, 66), normal({3, 2, 5, 5}, 67)},
             convAttrs({1, 1}, {2, 2}, {1, 1}, 1),
             {},
             ref}};
  }
  case OpCode::ConvInputGrad: {
    Attrs at = convAttrs({2, 1}, {1, 0}, {1, 1}, 2);
    at.set("input_shape", Shape{2, 4, 5, 4});
    return {{"grouped strided",
             {normal({2, 6, 3, 3}, 36), normal({6, 2, 3, 2}, 37)},
             at,
             {},
             [](const std::vector<NdArray>& in, const Attrs& a) {
               NdArray r = zerosNd(a.ints("input_shape"));
               convTerms(r.shape, in[1].shape, a, [&](int64_t xi, int64_t wi, int64_t yi) {
                 r.v[static_cast<size_t>(xi)] +=
                     in[0].v[static_cast<size_t>(yi)] * in[1].v[static_cast<size_t>(wi)];
               });
               return r;
             }}};
  }
  case OpCode::ConvWeightGrad: {
    Attrs at = convAttrs({1, 2}, {1, 1}, {2, 1}, 1);
    at.set("weight_shape", Shape{3, 2, 2, 3});
    Attrs same = convAttrs({1, 1}, {1, 1}, {1, 1}, 1);
    same.set("weight_shape", Shape{3, 2, 3, 3});
    auto ref = [](const std::vector<NdArray>& in, const Attrs& a) {
      NdArray r = zerosNd(a.ints("weight_shape"));
      convTerms(in[0].shape, r.shape, a, [&](int64_t xi, int64_t wi, int64_t yi) {
        r.v[static_cast<size_t>(wi)] +=
            in[0].v[static_cast<size_t>(xi)] * in[1].v[static_cast<size_t>(yi)];
      });
      return r;
    };
    return {{"dilated strided", {normal({2, 2, 5, 6}, 38), normal({2, 3, 5, 3}, 39)}, at, {}, ref},
            {"same 3x3", {normal({2, 2, 4, 5}, 64), normal({2, 3, 4, 5}, 65)}, same, {}, ref}};
  }
  case OpCode::Gather: {
    auto reference = [](const std::vector<NdArray>& in, const Attrs&) {
      NdArray r = zerosNd(in[1].shape);
      for (int64_t i = 0; i < numel(r.shape); ++i) {
        Shape idx = unravel(i, r.shape);
        r.v[static_cast<size_t>(i)] = in[0].at({idx[0], static_cast<int64_t>(in[1].at(idx))});
      }
      return r;
    };
    // One index per row (cross-entropy's pick): its gradient is a compare, not a scatter.
    return {{"dim 1",
             {normal({3, 5}, 40), indices({3, 4}, 5, 41)},
             Attrs{{"dim", int64_t{1}}},
             {},
             reference},
            {"one per row",
             {normal({4, 6}, 46), indices({4, 1}, 6, 47)},
             Attrs{{"dim", int64_t{1}}},
             {},
             reference}};
  }
  case OpCode::ScatterAdd:
  case OpCode::Scatter: {
    bool add = op == OpCode::ScatterAdd;
    // scatter (no accumulation) needs distinct targets per column for a deterministic result.
    Tensor index =
        add ? indices({4, 3}, 5, 42)
            : randperm(5, gen(43)).narrow(0, 0, 4).unsqueeze(1).expand({4, 3}).contiguous();
    return {{"dim 0",
             {normal({5, 3}, 44), index, normal({4, 3}, 45)},
             Attrs{{"dim", int64_t{0}}},
             {},
             [add](const std::vector<NdArray>& in, const Attrs&) {
               NdArray r = in[0];
               for (int64_t i = 0; i < numel(in[1].shape); ++i) {
                 Shape idx = unravel(i, in[1].shape);
                 double& t = r.at({static_cast<int64_t>(in[1].at(idx)), idx[1]});
                 t = add ? t + in[2].at(idx) : in[2].at(idx);
               }
               return r;
             }}};
  }
  case OpCode::ScatterProd:
  case OpCode::ScatterAmax:
  case OpCode::ScatterAmin:
    // Targets reached several times and not at all; no ties (normal values), so the gradients
    // have no kinks.
    return {{"dim 0",
             {normal({5, 3}, 47), indices({4, 3}, 5, 42), normal({4, 3}, 48)},
             Attrs{{"dim", int64_t{0}}},
             {},
             [op](const std::vector<NdArray>& in, const Attrs&) {
               NdArray r = in[0];
               for (int64_t i = 0; i < numel(in[1].shape); ++i) {
                 Shape idx = unravel(i, in[1].shape);
                 double& t = r.at({static_cast<int64_t>(in[1].at(idx)), idx[1]});
                 const double v = in[2].at(idx);
                 t = op == OpCode::ScatterProd   ? t * v
                     : op == OpCode::ScatterAmax ? std::max(t, v)
                                                 : std::min(t, v);
               }
               return r;
             }}};
  case OpCode::IndexSelect:
    return {{"dim 0 with repeats",
             {normal({5, 3}, 46), tensor({4, 0, 4, 2})},
             Attrs{{"dim", int64_t{0}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) {
               NdArray r = zerosNd({4, 3});
               for (int64_t i = 0; i < 12; ++i)
                 r.v[static_cast<size_t>(i)] =
                     in[0].at({static_cast<int64_t>(in[1].v[static_cast<size_t>(i / 3)]), i % 3});
               return r;
             }}};
  case OpCode::IndexAdd:
    return {{"dim 1 with repeats",
             {normal({3, 4}, 47), tensor({1, 3, 1}), normal({3, 3}, 48)},
             Attrs{{"dim", int64_t{1}}},
             {},
             [](const std::vector<NdArray>& in, const Attrs&) {
               NdArray r = in[0];
               for (int64_t i = 0; i < 9; ++i)
                 r.at({i / 3, static_cast<int64_t>(in[1].v[static_cast<size_t>(i % 3)])}) +=
                     in[2].v[static_cast<size_t>(i)];
               return r;
             }}};
  case OpCode::CheckIndex: {
    // Every valid index of a dim of 3, negative ones wrapped or, without wrap, none.
    auto attrs = [](bool wrap) {
      return Attrs{
          {"size", int64_t{3}}, {"dim", int64_t{1}}, {"wrap", wrap}, {"op", std::string("take")}};
    };
    auto reference = [](const std::vector<NdArray>& in, const Attrs& a) {
      NdArray r = in[0];
      for (double& v : r.v)
        v = v < 0 ? v + static_cast<double>(a.i("size")) : v;
      return r;
    };
    return {{"wrapped",
             {tensor({-3, -1, 0, 2, 1, -2}).reshape({2, 3})},
             attrs(true),
             {},
             reference,
             {},
             false},
            {"non-negative", {tensor({0, 2, 1, 2})}, attrs(false), {}, reference, {}, false}};
  }
  case OpCode::MaxPoolArgmax: {
    Attrs at{{"kernel_size", Shape{3, 2}},
             {"stride", Shape{2, 2}},
             {"padding", Shape{1, 1}},
             {"dilation", Shape{1, 1}},
             {"ceil_mode", true}};
    return {{"padded ceil mode",
             {normal({2, 2, 5, 6}, 49)},
             at,
             {},
             [](const std::vector<NdArray>& in, const Attrs& a) {
               const Shape& x = in[0].shape;
               const auto &k = a.ints("kernel_size"), &s = a.ints("stride"), &p = a.ints("padding");
               int64_t oh = windowOutputSize(x[2], k[0], s[0], p[0], 1, true),
                       ow = windowOutputSize(x[3], k[1], s[1], p[1], 1, true);
               NdArray r = zerosNd({x[0], x[1], oh, ow});
               for (int64_t i = 0; i < numel(r.shape); ++i) {
                 Shape o = unravel(i, r.shape);
                 double best = -INFINITY;
                 int64_t arg = -1;
                 for (int64_t ky = 0; ky < k[0]; ++ky)
                   for (int64_t kx = 0; kx < k[1]; ++kx) {
                     int64_t iy = o[2] * s[0] - p[0] + ky, ix = o[3] * s[1] - p[1] + kx;
                     if (iy >= 0 && iy < x[2] && ix >= 0 && ix < x[3] &&
                         in[0].at({o[0], o[1], iy, ix}) > best) {
                       best = in[0].at({o[0], o[1], iy, ix});
                       arg = iy * x[3] + ix;
                     }
                   }
                 r.v[static_cast<size_t>(i)] = static_cast<double>(arg);
               }
               return r;
             }}};
  }
  case OpCode::Full: {
    auto ref = [](const std::vector<NdArray>&, const Attrs& at) {
      const AttrValue& v = at.raw("value");
      double d = std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
                                                    : std::get<double>(v);
      return NdArray{at.ints("shape"),
                     std::vector<double>(static_cast<size_t>(numel(at.ints("shape"))), d)};
    };
    return {
        {"float", {}, Attrs{{"shape", Shape{2, 3}}, {"dtype", kFloat32}, {"value", 2.5}}, {}, ref},
        {"integer past 2^53",
         {},
         Attrs{{"shape", Shape{2}}, {"dtype", kInt64}, {"value", int64_t{(1LL << 53) + 1}}},
         {},
         ref},
        {"scalar", {}, Attrs{{"shape", Shape{}}, {"dtype", kBool}, {"value", 1.0}}, {}, ref}};
  }
  case OpCode::Uniform:
  case OpCode::Normal: {
    bool uni = op == OpCode::Uniform;
    Attrs at{{"shape", Shape{200, 500}}, {"dtype", kFloat32}};
    if (uni) {
      at.set("low", -1.0);
      at.set("high", 3.0);
    } else {
      at.set("mean", 2.0);
      at.set("std", 0.5);
    }
    Tensor key = tensor({7, 3}); // (seed, offset), int64
    OpSample s{"moments", {key}, at, {}, {}, [uni](const Tensor& t) -> ::testing::AssertionResult {
                 // 100k samples: the sample mean's standard error is < 0.004 for both; 0.02 is > 5
                 // sigma.
                 double mean = t.to(kFloat64).mean().item<double>();
                 double var = t.to(kFloat64).var().item<double>();
                 double wantMean = uni ? 1.0 : 2.0, wantVar = uni ? 16.0 / 12.0 : 0.25;
                 if (std::fabs(mean - wantMean) > 0.02 ||
                     std::fabs(var - wantVar) > 0.02 * wantVar * 5)
                   return ::testing::AssertionFailure() << "mean " << mean << " var " << var;
                 if (uni && (t.amin().item<double>() < -1.0 || t.amax().item<double>() >= 3.0))
                   return ::testing::AssertionFailure() << "out of [low, high)";
                 return ::testing::AssertionSuccess();
               }};
    s.gradcheck = false;
    return {s};
  }
  default:
    return {};
  }
}

} // namespace weft::test
