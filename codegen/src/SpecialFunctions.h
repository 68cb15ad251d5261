// The special functions and the integer ops with loops, as generated code computes them: lgamma,
// digamma, erfinv and the Hurwitz zeta in a float register type (the GPU's float32: the eager
// kernels' algorithms, specialised to its precision), integer pow, fmod, floor_divide, gcd and lcm
// with the eager kernels' wrapping and signs. Included only by KernelBody.h; the CPU's code
// generator leaves these ops to the eager kernels (CpuTarget.cpp), so the GPU shaders build them.
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>

namespace weft::codegen {

/// Scalar arithmetic on one float type, spelled briefly: the special functions below are long
/// formulas.
class FloatMath {
public:
  using Value = mlir::Value;
  FloatMath(mlir::OpBuilder& b, mlir::Location loc, mlir::Type type) : b_(b), l_(loc), t_(type) {}

  Value c(double v) { return mlir::arith::ConstantOp::create(b_, l_, b_.getFloatAttr(t_, v)); }
  Value add(Value x, Value y) { return mlir::arith::AddFOp::create(b_, l_, x, y); }
  Value sub(Value x, Value y) { return mlir::arith::SubFOp::create(b_, l_, x, y); }
  Value mul(Value x, Value y) { return mlir::arith::MulFOp::create(b_, l_, x, y); }
  Value div(Value x, Value y) { return mlir::arith::DivFOp::create(b_, l_, x, y); }
  Value abs(Value x) { return mlir::math::AbsFOp::create(b_, l_, x); }
  Value log(Value x) { return mlir::math::LogOp::create(b_, l_, x); }
  Value exp(Value x) { return mlir::math::ExpOp::create(b_, l_, x); }
  Value sqrt(Value x) { return mlir::math::SqrtOp::create(b_, l_, x); }
  Value floor(Value x) { return mlir::math::FloorOp::create(b_, l_, x); }
  Value erf(Value x) { return mlir::math::ErfOp::create(b_, l_, x); }
  Value erfc(Value x) { return mlir::math::ErfcOp::create(b_, l_, x); }
  Value copysign(Value x, Value y) { return mlir::math::CopySignOp::create(b_, l_, x, y); }
  /// x to the nearest integer, halves away from 0 (std::round).
  Value round(Value x) { return copysign(floor(add(abs(x), c(0.5))), x); }
  Value select(Value cond, Value x, Value y) {
    return mlir::arith::SelectOp::create(b_, l_, cond, x, y);
  }
  Value cmp(mlir::arith::CmpFPredicate p, Value x, Value y) {
    return mlir::arith::CmpFOp::create(b_, l_, p, x, y);
  }
  Value lt(Value x, Value y) { return cmp(mlir::arith::CmpFPredicate::OLT, x, y); }
  Value le(Value x, Value y) { return cmp(mlir::arith::CmpFPredicate::OLE, x, y); }
  Value eq(Value x, Value y) { return cmp(mlir::arith::CmpFPredicate::OEQ, x, y); }
  Value ne(Value x, Value y) { return cmp(mlir::arith::CmpFPredicate::UNE, x, y); }
  Value isNan(Value x) { return cmp(mlir::arith::CmpFPredicate::UNO, x, x); }
  Value isInf(Value x) { return eq(abs(x), c(std::numeric_limits<double>::infinity())); }
  Value isInteger(Value x) { return eq(x, floor(x)); }
  Value both(Value p, Value q) { return mlir::arith::AndIOp::create(b_, l_, p, q); }
  Value either(Value p, Value q) { return mlir::arith::OrIOp::create(b_, l_, p, q); }
  Value no(Value p) {
    return mlir::arith::XOrIOp::create(
        b_, l_, p, mlir::arith::ConstantOp::create(b_, l_, b_.getBoolAttr(true)));
  }
  /// sin(pi r) and cos(pi r) for |r| <= 1/2 by their Taylor series (to r^13 and r^14: under 1e-9
  /// there), not by the device's sin and cos, which Vulkan requires only to 2^-11 absolutely: the
  /// reflection formulas divide by them near the poles.
  Value sinPi(Value r) {
    Value y = mul(c(3.14159265358979323846), r), y2 = mul(y, y);
    return mul(y, poly(y2, {1, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                            1.0 / 6227020800.0}));
  }
  Value cosPi(Value r) {
    Value y = mul(c(3.14159265358979323846), r), y2 = mul(y, y);
    return poly(y2, {1, -0.5, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600,
                     -1.0 / 87178291200.0});
  }
  /// c[0] + x (c[1] + x (c[2] + ...)).
  Value poly(Value x, std::initializer_list<double> coefficients) {
    Value r;
    for (auto it = std::rbegin(coefficients); it != std::rend(coefficients); ++it)
      r = r ? add(c(*it), mul(x, r)) : c(*it);
    return r;
  }
  mlir::OpBuilder& b() { return b_; }
  mlir::Location loc() { return l_; }
  mlir::Type type() { return t_; }

private:
  mlir::OpBuilder& b_;
  mlir::Location l_;
  mlir::Type t_;
};

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

/// Walks `y` up by ones while it is below `bound` (at most `bound` steps, without branches: `y`
/// is then at or past it), folding each value it passes into `acc` with `step`.
inline mlir::Value walkUp(FloatMath& m, mlir::Value& y, int bound, mlir::Value acc,
                          const std::function<mlir::Value(mlir::Value, mlir::Value)>& step) {
  for (int i = 0; i < bound; ++i) {
    mlir::Value below = m.lt(y, m.c(bound));
    acc = m.select(below, step(acc, y), acc);
    y = m.select(below, m.add(y, m.c(1)), y);
  }
  return acc;
}

/// log|gamma(x)|: for x >= 0 the recurrence lgamma(x) = lgamma(x + k) - log(x (x+1) ... (x+k-1))
/// up to 8, then Stirling's series; below 0 the reflection log(pi / |sin(pi x)|) - lgamma(1 - x),
/// the sine taken of x's distance to the nearest integer. +inf at 0, the negative integers and
/// +-inf; NaN stays NaN.
inline mlir::Value lgammaOf(FloatMath& m, mlir::Value x) {
  using Value = mlir::Value;
  Value negative = m.lt(x, m.c(0));
  Value y = m.select(negative, m.sub(m.c(1), x), x);
  Value product = walkUp(m, y, 8, m.c(1), [&](Value p, Value v) { return m.mul(p, v); });
  Value z = m.div(m.c(1), y);
  Value series = m.mul(z, m.poly(m.mul(z, z), {1.0 / 12, -1.0 / 360, 1.0 / 1260, -1.0 / 1680}));
  Value stirling = m.add(m.sub(m.mul(m.sub(y, m.c(0.5)), m.log(y)), y),
                         m.add(m.c(0.91893853320467274178), series)); // + log(2 pi) / 2
  Value positive = m.sub(stirling, m.log(m.abs(product)));
  Value sine = m.abs(m.sinPi(m.sub(x, m.round(x))));
  Value reflected = m.sub(m.log(m.div(m.c(kPi), sine)), positive);
  return m.select(m.isInf(x), m.c(kInf), m.select(negative, reflected, positive));
}

/// digamma (psi), as the eager kernel: -inf at +0 (+inf at -0), NaN at the negative integers and
/// -inf, the reflection psi(1 - x) - pi / tan(pi x) below 0, the recurrence up to 10, then the
/// asymptotic series log x - 1/(2x) - sum B_2n / (2n x^2n).
inline mlir::Value digammaOf(FloatMath& m, mlir::Value x) {
  using Value = mlir::Value;
  Value negative = m.lt(x, m.c(0));
  Value y = m.select(negative, m.sub(m.c(1), x), x);
  Value shift =
      walkUp(m, y, 10, m.c(0), [&](Value sh, Value v) { return m.sub(sh, m.div(m.c(1), v)); });
  Value z = m.div(m.c(1), m.mul(y, y));
  Value series = m.mul(
      z, m.poly(z, {1.0 / 12, -1.0 / 120, 1.0 / 252, -1.0 / 240, 1.0 / 132, -691.0 / 32760}));
  Value psi = m.sub(m.sub(m.add(shift, m.log(y)), m.div(m.c(0.5), y)), series);
  Value r0 = m.sub(x, m.round(x));
  Value reflected = m.sub(psi, m.div(m.mul(m.c(kPi), m.cosPi(r0)), m.sinPi(r0))); // pi / tan
  Value r = m.select(negative, m.select(m.isInteger(x), m.c(kNan), reflected), psi);
  return m.select(m.eq(x, m.c(0)), m.copysign(m.c(kInf), m.sub(m.c(0), x)), r);
}

/// The inverse error function, as the eager kernel: +-inf at +-1, NaN outside [-1, 1], -0 kept.
/// A first guess within ~10% (the Taylor series in the middle, the asymptote in the tails), then
/// three Halley steps on erf(x) = |y|, written as erfc(x) = 1 - |y| past 0.5 (1 - |y| is exact
/// there, so the tails keep their precision).
inline mlir::Value erfinvOf(FloatMath& m, mlir::Value y) {
  using Value = mlir::Value;
  Value a = m.abs(y), r = m.sub(m.c(1), a);
  Value tail = m.lt(m.c(0.5), a);
  Value w = m.sub(m.c(0), m.log(m.mul(r, m.add(m.c(1), a))));
  Value c = m.mul(m.c(0.886226925452758), a);
  Value middle = m.mul(c, m.poly(m.mul(c, c), {1, 1.0 / 3, 7.0 / 30, 127.0 / 630}));
  Value t = m.sqrt(w);
  Value asymptote =
      m.sub(t, m.div(m.sub(m.log(t), m.c(0.1207822376352452)), m.mul(m.c(2), t)));
  Value x = m.select(m.lt(w, m.c(2)), middle, asymptote);
  for (int i = 0; i < 3; ++i) {
    Value f = m.select(tail, m.sub(r, m.erfc(x)), m.sub(m.erf(x), a)); // erf(x) - |y|
    Value step = m.div(f, m.mul(m.c(1.12837916709551257390), m.exp(m.sub(m.c(0), m.mul(x, x)))));
    x = m.sub(x, m.div(step, m.add(m.c(1), m.mul(x, step))));
  }
  Value r0 = m.select(m.eq(y, m.c(0)), y, m.copysign(x, y));
  Value r1 = m.select(m.eq(a, m.c(1)), m.copysign(m.c(kInf), y), r0);
  return m.select(m.either(m.isNan(y), m.lt(m.c(1), a)), m.c(kNan), r1);
}

/// |a|^-s, with the sign (-1)^s of a negative a (s is then an integer).
inline mlir::Value inversePower(FloatMath& m, mlir::Value a, mlir::Value s) {
  mlir::Value p = m.exp(m.mul(m.sub(m.c(0), s), m.log(m.abs(a))));
  mlir::Value half = m.mul(s, m.c(0.5));
  mlir::Value odd = m.ne(half, m.floor(half));
  return m.select(m.both(m.lt(a, m.c(0)), odd), m.sub(m.c(0), p), p);
}

/// The Hurwitz zeta function sum_k (k + q)^-s, as the eager kernel: direct terms until q + k
/// passes 9 (at least 9; through nested loops of at most 4096 steps, as some drivers cap a loop's
/// trips), then the Euler-Maclaurin tail; NaN below s = 1, inf at s = 1 and at q a non-positive
/// integer, trigamma's reflection for s = 2 below 0, NaN for q below -1e6.
inline mlir::Value zetaOf(FloatMath& m, mlir::Value s, mlir::Value q0) {
  using Value = mlir::Value;
  mlir::OpBuilder& b = m.b();
  mlir::Location l = m.loc();
  Value nonPositive = m.le(q0, m.c(0));
  Value reflect = m.both(nonPositive, m.eq(s, m.c(2)));
  Value q = m.select(reflect, m.sub(m.c(1), q0), q0);
  // How many direct terms: max(9, floor(9 - q) + 1), q clamped so the count stays finite.
  Value qc = m.select(m.lt(q, m.c(-1e6)), m.c(-1e6), m.select(m.lt(m.c(9), q), m.c(9), q));
  Value count = mlir::arith::FPToSIOp::create(
      b, l, b.getI32Type(), m.add(m.floor(m.sub(m.c(9), qc)), m.c(1)));
  auto i32 = [&](int32_t v) {
    return mlir::arith::ConstantOp::create(b, l, b.getI32IntegerAttr(v)).getResult();
  };
  count = mlir::arith::MaxSIOp::create(b, l, count, i32(9));
  auto idx = [&](Value v) {
    return mlir::arith::IndexCastOp::create(b, l, b.getIndexType(), v).getResult();
  };
  constexpr int32_t kBlock = 4096;
  Value blocks = mlir::arith::DivSIOp::create(
      b, l, mlir::arith::AddIOp::create(b, l, count, i32(kBlock - 1)), i32(kBlock));
  Value start = inversePower(m, q, s);
  auto zero = [&] { return mlir::arith::ConstantIndexOp::create(b, l, 0).getResult(); };
  auto oneStep = [&] { return mlir::arith::ConstantIndexOp::create(b, l, 1).getResult(); };
  auto outer = mlir::scf::ForOp::create(
      b, l, zero(), idx(blocks), oneStep(), mlir::ValueRange{start, q, start},
      [&](mlir::OpBuilder& ob, mlir::Location, Value block, mlir::ValueRange acc) {
        mlir::OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(ob.getInsertionBlock(), ob.getInsertionPoint());
        Value done = mlir::arith::MulIOp::create(
            b, l, mlir::arith::IndexCastOp::create(b, l, b.getI32Type(), block), i32(kBlock));
        Value n = mlir::arith::MinSIOp::create(
            b, l, i32(kBlock), mlir::arith::SubIOp::create(b, l, count, done));
        auto inner = mlir::scf::ForOp::create(
            b, l, zero(), idx(n), oneStep(), mlir::ValueRange{acc[0], acc[1], acc[2]},
            [&](mlir::OpBuilder& ib, mlir::Location, Value, mlir::ValueRange it) {
              mlir::OpBuilder::InsertionGuard g2(b);
              b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
              Value a = m.add(it[1], m.c(1));
              Value term = inversePower(m, a, s);
              mlir::scf::YieldOp::create(b, l, mlir::ValueRange{m.add(it[0], term), a, term});
            });
        mlir::scf::YieldOp::create(b, l, inner.getResults());
      });
  // (The loops run at least once: their results are defined.)
  Value sum = outer.getResult(0), w = outer.getResult(1), term = outer.getResult(2);
  // The tail from w: w^(1-s) / (s - 1) - w^-s / 2 + sum_j B_2j / (2j)! (s)_(2j-1) / w^(s+2j-1),
  // each term added until one no longer changes the sum.
  sum = m.add(sum, m.sub(m.div(m.mul(term, w), m.sub(s, m.c(1))), m.mul(m.c(0.5), term)));
  Value rising = m.c(1), k = m.c(0);
  Value converged = m.ne(m.c(0), m.c(0));
  for (double d : {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                   7.47242496e10, -2.950130727918164224e12}) {
    rising = m.mul(rising, m.add(s, k));
    term = m.div(term, w);
    Value t = m.div(m.mul(rising, term), m.c(d));
    Value next = m.add(sum, t);
    sum = m.select(converged, sum, next);
    converged = m.either(converged, m.lt(m.abs(m.div(t, next)), m.c(6e-8)));
    k = m.add(k, m.c(1));
    rising = m.mul(rising, m.add(s, k));
    term = m.div(term, w);
    k = m.add(k, m.c(1));
  }
  // trigamma's reflection: psi1(q) = pi^2 / sin^2(pi q) - psi1(1 - q).
  Value sine = m.sinPi(m.sub(q0, m.round(q0)));
  Value r = m.select(reflect, m.sub(m.div(m.c(kPi * kPi), m.mul(sine, sine)), sum), sum);
  // The domain, as the eager kernel's checks in order.
  r = m.select(m.both(nonPositive, m.lt(q0, m.c(-1e6))), m.c(kNan), r);
  r = m.select(m.both(nonPositive, m.no(m.isInteger(s))), m.c(kNan), r);
  r = m.select(m.both(nonPositive, m.isInteger(q0)), m.c(kInf), r);
  r = m.select(m.eq(q0, m.c(kInf)), m.c(0), r);
  r = m.select(m.lt(s, m.c(1)), m.c(kNan), r);
  r = m.select(m.eq(s, m.c(1)), m.c(kInf), r);
  return m.select(m.either(m.isNan(s), m.isNan(q0)), m.add(s, q0), r);
}

/// Integer ops with the eager kernels' semantics, on registers of one integer type.
class IntegerMath {
public:
  using Value = mlir::Value;
  IntegerMath(mlir::OpBuilder& b, mlir::Location loc, mlir::Type type, bool isUnsigned)
      : b_(b), l_(loc), t_(type), u_(isUnsigned) {}

  Value c(int64_t v) { return mlir::arith::ConstantOp::create(b_, l_, b_.getIntegerAttr(t_, v)); }
  Value select(Value p, Value x, Value y) { return mlir::arith::SelectOp::create(b_, l_, p, x, y); }
  Value cmp(mlir::arith::CmpIPredicate p, Value x, Value y) {
    return mlir::arith::CmpIOp::create(b_, l_, p, x, y);
  }
  Value eq(Value x, Value y) { return cmp(mlir::arith::CmpIPredicate::eq, x, y); }
  Value ne(Value x, Value y) { return cmp(mlir::arith::CmpIPredicate::ne, x, y); }
  Value negative(Value x) {
    if (u_) return mlir::arith::ConstantOp::create(b_, l_, b_.getBoolAttr(false));
    return cmp(mlir::arith::CmpIPredicate::slt, x, c(0));
  }
  Value neg(Value x) { return mlir::arith::SubIOp::create(b_, l_, c(0), x); }
  /// |x| as the unsigned bits (the minimum's magnitude is its own bits).
  Value magnitude(Value x) { return u_ ? x : select(negative(x), neg(x), x); }
  /// y with a zero replaced by 1 (what a division by zero divides by instead; it is reported).
  Value safe(Value y) { return select(eq(y, c(0)), c(1), y); }

  /// x ** y: 1 or -1 or 0 for a negative exponent, else by squaring with wrapping products.
  Value pow(Value x, Value y) {
    const unsigned width = t_.getIntOrFloatBitWidth();
    Value result = c(1), base = x;
    for (unsigned bit = 0; bit + (u_ ? 0 : 1) < width; ++bit) {
      Value set = ne(mlir::arith::AndIOp::create(
                         b_, l_, mlir::arith::ShRUIOp::create(b_, l_, y, c(bit)), c(1)),
                     c(0));
      result = select(set, mlir::arith::MulIOp::create(b_, l_, result, base), result);
      base = mlir::arith::MulIOp::create(b_, l_, base, base);
    }
    if (u_) return result;
    Value odd = ne(mlir::arith::AndIOp::create(b_, l_, y, c(1)), c(0));
    Value small = select(eq(x, c(1)), c(1),
                         select(eq(x, c(-1)), select(odd, c(-1), c(1)), c(0)));
    return select(negative(y), small, result);
  }
  /// C's x % y (0 for y = -1, where the minimum % -1 overflows).
  Value fmod(Value x, Value y) {
    y = safe(y);
    if (u_) return mlir::arith::RemUIOp::create(b_, l_, x, y);
    return select(eq(y, c(-1)), c(0), mlir::arith::RemSIOp::create(b_, l_, x, y));
  }
  /// The quotient rounded down (the minimum / -1 wraps to itself).
  Value floorDivide(Value x, Value y) {
    y = safe(y);
    if (u_) return mlir::arith::DivUIOp::create(b_, l_, x, y);
    Value minusOne = eq(y, c(-1));
    Value d = select(minusOne, c(1), y);
    Value q = mlir::arith::DivSIOp::create(b_, l_, x, d);
    Value inexact = ne(mlir::arith::RemSIOp::create(b_, l_, x, d), c(0));
    Value signsDiffer = mlir::arith::XOrIOp::create(b_, l_, negative(x), negative(d));
    Value down = mlir::arith::AndIOp::create(b_, l_, inexact, signsDiffer);
    q = select(down, mlir::arith::SubIOp::create(b_, l_, q, c(1)), q);
    return select(minusOne, neg(x), q);
  }
  /// The greatest common divisor of |x| and |y| by Euclid's algorithm on the magnitudes.
  Value gcd(Value x, Value y) {
    auto loop = mlir::scf::WhileOp::create(
        b_, l_, mlir::TypeRange{t_, t_}, mlir::ValueRange{magnitude(x), magnitude(y)},
        [&](mlir::OpBuilder& nb, mlir::Location, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          mlir::scf::ConditionOp::create(b_, l_, ne(it[0], c(0)), it);
        },
        [&](mlir::OpBuilder& nb, mlir::Location, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value r = mlir::arith::RemUIOp::create(b_, l_, it[1], it[0]);
          mlir::scf::YieldOp::create(b_, l_, mlir::ValueRange{r, it[0]});
        });
    return loop.getResult(1);
  }
  /// The least common multiple: 0 if either is 0, |x / gcd * y| wrapping.
  Value lcm(Value x, Value y) {
    Value g = gcd(x, y);
    Value m = mlir::arith::MulIOp::create(
        b_, l_, mlir::arith::DivUIOp::create(b_, l_, magnitude(x), safe(g)), magnitude(y));
    return select(eq(g, c(0)), c(0), magnitude(m));
  }

private:
  mlir::OpBuilder& b_;
  mlir::Location l_;
  mlir::Type t_;
  bool u_;
};

} // namespace weft::codegen
