// The factorization shaders (Shaders.h's Factor family): LU with partial pivoting (inverse, det,
// logabsdet), Cholesky, and Householder QR (qr_q, qr_r), each as LAPACK's unblocked routine
// (getf2 and getri, potf2, geqr2 and org2r) computes it, so that pivots, errors and signs are the
// CPU kernels' own: a workgroup per matrix, its invocations sharing each step's rows or columns,
// a barrier between steps. Included only by Spirv.cpp, split from it to keep each file one
// subject.
#pragma once

#include "SpirvShader.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/IR/Builders.h"

#include <functional>
#include <vector>

namespace weft::codegen {

/// What the factorization shaders are written with: a matrix's elements in its operand, loops
/// that carry values, and a barrier over the factors in the work buffer.
class FactorBuilder {
public:
  FactorBuilder(ShaderBuilder& s, DType dt, Value tid, Value size)
      : s_(s), b_(s.b()), loc_(s.loc()), dt_(dt), tid_(tid), size_(size), none_(), bb_(b_, loc_, none_) {}

  Value tid() const { return tid_; }
  Value c(int64_t v) { return s_.c(v); }
  Value f(double v) { return bb_.constantFloat(dt_, v); }
  Value add(Value a, Value x) { return s_.add(a, x); }
  Value sub(Value a, Value x) { return mlir::arith::SubIOp::create(b_, loc_, a, x); }
  Value mul(Value a, Value x) { return s_.mul(a, x); }
  Value fadd(Value a, Value x) { return mlir::arith::AddFOp::create(b_, loc_, a, x); }
  Value fsub(Value a, Value x) { return mlir::arith::SubFOp::create(b_, loc_, a, x); }
  Value fmul(Value a, Value x) { return mlir::arith::MulFOp::create(b_, loc_, a, x); }
  Value fdiv(Value a, Value x) { return mlir::arith::DivFOp::create(b_, loc_, a, x); }
  Value icmp(mlir::arith::CmpIPredicate p, Value a, Value x) {
    return mlir::arith::CmpIOp::create(b_, loc_, p, a, x);
  }
  Value fcmp(mlir::arith::CmpFPredicate p, Value a, Value x) {
    return mlir::arith::CmpFOp::create(b_, loc_, p, a, x);
  }
  Value select(Value cond, Value a, Value x) {
    return mlir::arith::SelectOp::create(b_, loc_, cond, a, x);
  }

  /// Element (i, j) of a matrix of operand `k` starting at `base`, `rows` and `cols` apart.
  struct Matrix {
    FactorBuilder* fb;
    int k;
    Value base, rows, cols;
    Value at(Value i, Value j) const { return fb->add(base, fb->add(fb->mul(i, rows), fb->mul(j, cols))); }
    Value get(Value i, Value j) const { return fb->s_.load(k, at(i, j)); }
    void set(Value i, Value j, Value v) const { fb->s_.store(k, at(i, j), v); }
  };
  Matrix matrix(int k, Value base, Value rows, Value cols) { return {this, k, base, rows, cols}; }

  /// for (i = first; i < end; i += step) carried = body(i, carried); the final carried values.
  std::vector<Value> loop(Value first, Value end, Value step, std::vector<Value> init,
                          const std::function<std::vector<Value>(Value, mlir::ValueRange)>& body) {
    auto l = mlir::scf::ForOp::create(
        b_, loc_, first, end, step, init,
        [&](mlir::OpBuilder& nb, mlir::Location, Value i, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          mlir::scf::YieldOp::create(b_, loc_, body(i, it));
        });
    std::vector<Value> r;
    for (unsigned k = 0; k < init.size(); ++k)
      r.push_back(resultOf(b_, loc_, l, k));
    return r;
  }
  /// The sum of term(i) over [first, end), in registers of the factors' dtype.
  Value sum(Value first, Value end, const std::function<Value(Value)>& term) {
    return loop(first, end, c(1), {f(0.0)}, [&](Value i, mlir::ValueRange it) {
      return std::vector<Value>{fadd(it[0], term(i))};
    })[0];
  }
  /// body(i) for this invocation's share of [first, end).
  void share(Value first, Value end, const std::function<void(Value)>& body) {
    s_.forEach(add(first, tid_), end, size_, body);
  }
  /// body(i, j) for this invocation's share of the rows x cols elements.
  void shareElements(Value rows, Value cols, const std::function<void(Value, Value)>& body) {
    share(c(0), mul(rows, cols), [&](Value e) {
      body(mlir::arith::DivUIOp::create(b_, loc_, e, cols), mlir::arith::RemUIOp::create(b_, loc_, e, cols));
    });
  }
  /// then() in invocation 0 alone.
  void first(const std::function<void()>& then) {
    s_.when(icmp(mlir::arith::CmpIPredicate::eq, tid_, c(0)), then);
  }
  /// Waits for the workgroup, every write to the work and output buffers before it visible
  /// after it (gpu.barrier orders workgroup memory only).
  void barrier() {
    using S = mlir::spirv::MemorySemantics;
    mlir::spirv::ControlBarrierOp::create(
        b_, loc_, mlir::spirv::Scope::Workgroup, mlir::spirv::Scope::Workgroup,
        S::AcquireRelease | S::UniformMemory | S::WorkgroupMemory);
  }

private:
  ShaderBuilder& s_;
  mlir::OpBuilder& b_;
  mlir::Location loc_;
  DType dt_;
  Value tid_, size_;
  ir::Graph none_;
  BodyBuilder bb_;
};

/// LU with partial pivoting of A^T, as the CPU's getrf factors the row-major matrix read
/// column-major (so the pivots, and the first zero pivot a singular matrix reports, are the
/// CPU's): the factors in `w`; then det (the product of U's diagonal, negated per row exchange),
/// logabsdet (the sum of log |U's diagonal|) or the inverse (LU X = P solved column by column in
/// the output, which holds P's rows as they were exchanged, and transposed: X = (A^T)^-1).
inline void buildLu(ShaderBuilder& s, FactorBuilder& fb, OpCode op, const FactorBuilder::Matrix& a,
                    const FactorBuilder::Matrix& w, const FactorBuilder::Matrix& out, Value n) {
  using IP = mlir::arith::CmpIPredicate;
  using FP = mlir::arith::CmpFPredicate;
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const bool inverse = op == OpCode::Inverse;
  fb.shareElements(n, n, [&](Value i, Value j) {
    w.set(i, j, a.get(j, i));
    if (inverse) out.set(i, j, fb.select(fb.icmp(IP::eq, i, j), fb.f(1.0), fb.f(0.0)));
  });
  fb.barrier();
  auto abs = [&](Value v) { return mlir::math::AbsFOp::create(b, loc, v).getResult(); };
  Value zero = fb.c(0);
  std::vector<Value> done = fb.loop(
      fb.c(0), n, fb.c(1), {zero, zero}, [&](Value k, mlir::ValueRange it) {
        // The pivot: the first largest |w[i][k]|, i >= k (as idamax; a NaN is never larger).
        Value p = fb.loop(fb.add(k, fb.c(1)), n, fb.c(1), {k, abs(w.get(k, k))},
                          [&](Value i, mlir::ValueRange best) {
                            Value v = abs(w.get(i, k));
                            Value larger = fb.fcmp(FP::OGT, v, best[1]);
                            return std::vector<Value>{fb.select(larger, i, best[0]),
                                                      fb.select(larger, v, best[1])};
                          })[0];
        Value pivot = w.get(p, k);
        Value swapped = fb.icmp(IP::ne, p, k);
        fb.barrier(); // every invocation has read column k
        s.when(swapped, [&] {
          fb.share(fb.c(0), n, [&](Value j) {
            Value t = w.get(k, j);
            w.set(k, j, w.get(p, j));
            w.set(p, j, t);
            if (inverse) {
              Value o = out.get(k, j);
              out.set(k, j, out.get(p, j));
              out.set(p, j, o);
            }
          });
        });
        fb.barrier();
        Value usable = fb.fcmp(FP::UNE, pivot, fb.f(0.0));
        s.when(usable, [&] {
          fb.share(fb.add(k, fb.c(1)), n, [&](Value i) {
            Value l = fb.fdiv(w.get(i, k), pivot);
            w.set(i, k, l);
            s.forEach(fb.add(k, fb.c(1)), n, fb.c(1), [&](Value j) {
              w.set(i, j, fb.fsub(w.get(i, j), fb.fmul(l, w.get(k, j))));
            });
          });
        });
        fb.barrier();
        Value firstZero = mlir::arith::AndIOp::create(
            b, loc, fb.icmp(IP::eq, it[0], zero), mlir::arith::XOrIOp::create(
                b, loc, usable, mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true))));
        Value info = fb.select(firstZero, fb.add(k, fb.c(1)), it[0]);
        Value exchanges = fb.select(swapped, fb.add(it[1], fb.c(1)), it[1]);
        return std::vector<Value>{info, exchanges};
      });
  Value info = done[0];
  Value odd = fb.icmp(IP::ne, mlir::arith::RemUIOp::create(b, loc, done[1], fb.c(2)), zero);
  if (op == OpCode::Det || op == OpCode::LogAbsDet) {
    fb.first([&] {
      Value r;
      if (op == OpCode::Det) {
        r = fb.loop(fb.c(0), n, fb.c(1), {fb.f(1.0)}, [&](Value i, mlir::ValueRange it) {
              return std::vector<Value>{fb.fmul(it[0], w.get(i, i))};
            })[0];
        r = fb.select(odd, mlir::arith::NegFOp::create(b, loc, r), r);
      } else {
        r = fb.sum(fb.c(0), n, [&](Value i) {
          return mlir::math::LogOp::create(b, loc, abs(w.get(i, i))).getResult();
        });
      }
      out.set(zero, zero, r);
    });
    return;
  }
  // The inverse: forward substitution with L's unit diagonal, back substitution with U, a
  // column of the output per invocation.
  fb.first([&] { s.when(fb.icmp(IP::ne, info, zero), [&] {
    s.recordBad(mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), info));
  }); });
  fb.share(fb.c(0), n, [&](Value col) {
    s.forEach(fb.c(0), n, fb.c(1), [&](Value i) {
      out.set(i, col, fb.fsub(out.get(i, col), fb.sum(fb.c(0), i, [&](Value k) {
        return fb.fmul(w.get(i, k), out.get(k, col));
      })));
    });
    s.forEach(fb.c(0), n, fb.c(1), [&](Value t) {
      Value i = fb.sub(fb.sub(n, t), fb.c(1));
      Value r = fb.fsub(out.get(i, col), fb.sum(fb.add(i, fb.c(1)), n, [&](Value k) {
        return fb.fmul(w.get(i, k), out.get(k, col));
      }));
      out.set(i, col, fb.fdiv(r, w.get(i, i)));
    });
  });
  fb.barrier();
  fb.shareElements(n, n, [&](Value i, Value j) {
    s.when(fb.icmp(IP::ult, i, j), [&] {
      Value t = out.get(i, j);
      out.set(i, j, out.get(j, i));
      out.set(j, i, t);
    });
  });
}

/// Cholesky of A's lower triangle into out (L, zeros above), column by column as potf2: the
/// first column whose pivot is not positive (or NaN) is LAPACK's info.
inline void buildCholesky(ShaderBuilder& s, FactorBuilder& fb, const FactorBuilder::Matrix& a,
                          const FactorBuilder::Matrix& out, Value n) {
  using IP = mlir::arith::CmpIPredicate;
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  fb.shareElements(n, n, [&](Value i, Value j) {
    s.when(fb.icmp(IP::ugt, j, i), [&] { out.set(i, j, fb.f(0.0)); });
  });
  Value zero = fb.c(0);
  Value info = fb.loop(fb.c(0), n, fb.c(1), {zero}, [&](Value j, mlir::ValueRange it) {
    Value d = fb.fsub(a.get(j, j), fb.sum(zero, j, [&](Value k) {
      Value l = out.get(j, k);
      return fb.fmul(l, l);
    }));
    Value positive = fb.fcmp(mlir::arith::CmpFPredicate::OGT, d, fb.f(0.0));
    Value ljj = mlir::math::SqrtOp::create(b, loc, d);
    fb.share(fb.add(j, fb.c(1)), n, [&](Value i) {
      Value r = fb.fsub(a.get(i, j), fb.sum(zero, j, [&](Value k) {
        return fb.fmul(out.get(i, k), out.get(j, k));
      }));
      out.set(i, j, fb.fdiv(r, ljj));
    });
    fb.first([&] { out.set(j, j, ljj); });
    fb.barrier();
    Value firstBad = mlir::arith::AndIOp::create(
        b, loc, fb.icmp(IP::eq, it[0], zero),
        mlir::arith::XOrIOp::create(b, loc, positive,
                                    mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true))));
    return std::vector<Value>{fb.select(firstBad, fb.add(j, fb.c(1)), it[0])};
  })[0];
  fb.first([&] { s.when(fb.icmp(IP::ne, info, zero), [&] {
    s.recordBad(mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), info));
  }); });
}

/// Householder QR as geqr2: for each column j < min(m, n) the reflector H = I - tau v v^T
/// (v[j] = 1, v below it kept in w) with dlarfg's choice beta = -sign(alpha) |x| (tau 0 where
/// the column below the diagonal is zero), applied to the columns right of it. qr_r is the
/// upper triangle of w's first min(m, n) rows; qr_q is H_0 ... H_{k-1} applied to the identity's
/// first k columns, last reflector first, as org2r.
inline void buildQr(ShaderBuilder& s, FactorBuilder& fb, OpCode op, const FactorBuilder::Matrix& a,
                    const FactorBuilder::Matrix& w, Value tauAt, const FactorBuilder::Matrix& out,
                    Value m, Value n) {
  using IP = mlir::arith::CmpIPredicate;
  using FP = mlir::arith::CmpFPredicate;
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  Value k = mlir::arith::MinUIOp::create(b, loc, m, n);
  auto tauOf = [&](Value j) { return s.load(1, fb.add(tauAt, j)); };
  // Column `col` of `x` times reflector j: x[j:, col] -= tau v (v . x[j:, col]), v = [1; w[j+1:, j]].
  auto reflect = [&](const FactorBuilder::Matrix& x, Value j, Value col, Value tau) {
    Value dot = fb.fadd(x.get(j, col), fb.sum(fb.add(j, fb.c(1)), m, [&](Value i) {
      return fb.fmul(w.get(i, j), x.get(i, col));
    }));
    Value t = fb.fmul(tau, dot);
    x.set(j, col, fb.fsub(x.get(j, col), t));
    s.forEach(fb.add(j, fb.c(1)), m, fb.c(1), [&](Value i) {
      x.set(i, col, fb.fsub(x.get(i, col), fb.fmul(w.get(i, j), t)));
    });
  };
  fb.shareElements(m, n, [&](Value i, Value j) { w.set(i, j, a.get(i, j)); });
  fb.barrier();
  s.forEach(fb.c(0), k, fb.c(1), [&](Value j) {
    Value alpha = w.get(j, j);
    Value below = fb.sum(fb.add(j, fb.c(1)), m, [&](Value i) {
      Value x = w.get(i, j);
      return fb.fmul(x, x);
    });
    Value plain = fb.fcmp(FP::OEQ, below, fb.f(0.0));
    Value norm = mlir::math::SqrtOp::create(b, loc, fb.fadd(fb.fmul(alpha, alpha), below));
    Value beta = mlir::arith::NegFOp::create(b, loc, mlir::math::CopySignOp::create(b, loc, norm, alpha));
    Value tau = fb.select(plain, fb.f(0.0), fb.fdiv(fb.fsub(beta, alpha), beta));
    Value scale = fb.select(plain, fb.f(1.0), fb.fdiv(fb.f(1.0), fb.fsub(alpha, beta)));
    fb.barrier(); // every invocation has read column j
    fb.share(fb.add(j, fb.c(1)), m, [&](Value i) { w.set(i, j, fb.fmul(w.get(i, j), scale)); });
    fb.first([&] { s.store(1, fb.add(tauAt, j), tau); });
    fb.barrier();
    fb.share(fb.add(j, fb.c(1)), n, [&](Value col) { reflect(w, j, col, tau); });
    fb.first([&] { w.set(j, j, fb.select(plain, alpha, beta)); });
    fb.barrier();
  });
  if (op == OpCode::QrR) {
    fb.shareElements(k, n, [&](Value i, Value j) {
      out.set(i, j, fb.select(fb.icmp(IP::uge, j, i), w.get(i, j), fb.f(0.0)));
    });
    return;
  }
  fb.shareElements(m, k, [&](Value i, Value j) {
    out.set(i, j, fb.select(fb.icmp(IP::eq, i, j), fb.f(1.0), fb.f(0.0)));
  });
  fb.barrier();
  s.forEach(fb.c(0), k, fb.c(1), [&](Value t) {
    Value j = fb.sub(fb.sub(k, t), fb.c(1));
    fb.share(fb.c(0), k, [&](Value col) { reflect(out, j, col, tauOf(j)); });
    fb.barrier();
  });
}

/// The Factor family: a workgroup per matrix of the batch (Shaders.h).
inline void buildFactor(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  Value tid = mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x);
  FactorBuilder fb(s, key.dtypes[0], tid, s.c(key.workgroupSize));
  Value m = s.extra(0), n = s.extra(1);
  s.forEach(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x), s.p(0),
            mlir::gpu::GridDimOp::create(b, loc, mlir::gpu::Dimension::x), [&](Value point) {
    ShaderBuilder::Walk at = s.walk(point);
    FactorBuilder::Matrix a = fb.matrix(0, at.offsets[0], s.extra(2), s.extra(3));
    FactorBuilder::Matrix out = fb.matrix(2, at.offsets[2], s.extra(4), s.extra(5));
    FactorBuilder::Matrix w = fb.matrix(1, at.offsets[1], n, s.c(1));
    switch (key.op) {
    case OpCode::Cholesky:
      buildCholesky(s, fb, a, out, n);
      break;
    case OpCode::QrQ:
    case OpCode::QrR:
      buildQr(s, fb, key.op, a, w, s.add(at.offsets[1], s.mul(m, n)), out, m, n);
      break;
    default:
      buildLu(s, fb, key.op, a, w, out, n);
      break;
    }
  });
}

} // namespace weft::codegen
