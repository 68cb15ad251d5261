// The GEMM-shaped shaders (Shaders.h's MatMul family): matmul, and the convolutions as implicit
// GEMMs, in 128 x 128 blocks (floating) or 16 x 16 tiles (integers). Included only by Spirv.cpp,
// split from it to keep each file one subject.
#pragma once

#include "SpirvShader.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVAttributes.h"
#include "mlir/IR/Builders.h"

#include <functional>
#include <limits>
#include <vector>

namespace weft::codegen {

using hal::ShaderFamily;
using hal::ShaderKey;
using mlir::Value;

/// Where one element of a GEMM operand lies, and whether it exists (zero where not).
struct Element {
  Value inside, at;
};

/// The operands of a GEMM-shaped shader (Shaders.h's MatMul family) as the tiles load them: plain
/// strided matrices for matmul; for the convolutions, their operands' elements computed from the
/// geometry (an implicit im2col: no column matrix is ever written):
///   conv:             out[o, p]   = sum_k  w[o, k] x^[k, p]    k = (c, ky, kx), p = (oy, ox)
///   conv_input_grad:  dx[c, s]    = sum_k  w[o, c, ky, kx] g^[k, s]   k = (o, ky, kx), s = (iy,
///   ix) conv_weight_grad: dw[o, k]    = sum_q  g[o, q] x^[q, k]    q = (n, oy, ox)
/// with the batch points (sample, group) or (group). A is operand 0 for matmul, 1 for the
/// convolutions; B the other. fetchA(off, r, c) is A[r, c] at the batch point's operand offsets
/// `off`, fetchB likewise, outAt(off, r, c) where C[r, c] goes.
struct GemmOperands {
  Value m, n, k;
  /// Split-K (the blocked GEMM's): K is walked in `splits` parts, part j writing its partial
  /// product `j * splitStride` elements past where C goes; 1 and 0 where K is not split.
  Value splits, splitStride;
  int aOperand, bOperand;
  std::function<Element(const std::vector<Value>&, Value, Value)> fetchA, fetchB;
  std::function<Value(const std::vector<Value>&, Value, Value)> outAt;
};

/// Calls `body` with the operands of `op`'s GEMM (their parameters loaded here, at the function's
/// entry).
inline void withGemmOperands(ShaderBuilder& s, OpCode op,
                             const std::function<void(const GemmOperands&)>& body) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  using P = mlir::arith::CmpIPredicate;
  const int extras = (op == OpCode::MatMul ? 9 : 28) + 2; // then splits and splitStride
  std::vector<Value> e;
  for (int i = 0; i < extras; ++i)
    e.push_back(s.extra(i));
  Value m = e[0], n = e[1], k = e[2];
  auto cmp = [&](P p, Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  auto all = [&](std::initializer_list<Value> conds) {
    Value r;
    for (Value c : conds)
      r = r ? mlir::arith::AndIOp::create(b, loc, r, c).getResult() : c;
    return r;
  };
  auto divu = [&](Value x, Value y) {
    return mlir::arith::DivUIOp::create(b, loc, x, y).getResult();
  };
  auto remu = [&](Value x, Value y) {
    return mlir::arith::RemUIOp::create(b, loc, x, y).getResult();
  };
  auto sub = [&](Value x, Value y) {
    return mlir::arith::SubIOp::create(b, loc, x, y).getResult();
  };
  auto dot4 = [&](Value base, int at, Value i0, Value i1, Value i2, Value i3) {
    return s.add(base, s.add(s.add(s.mul(i0, e[static_cast<size_t>(at)]),
                                   s.mul(i1, e[static_cast<size_t>(at + 1)])),
                             s.add(s.mul(i2, e[static_cast<size_t>(at + 2)]),
                                   s.mul(i3, e[static_cast<size_t>(at + 3)]))));
  };
  // The conv geometry (Shaders.h): cg, h, w, oh, ow, kh, kw, strides, pads, dilations, then the
  // strides of operand 0, operand 1 and the output (4 each).
  auto g = [&](int i) { return e[static_cast<size_t>(3 + i)]; };
  Value zero = s.c(0);
  // (c, ky, kx) or (o, ky, kx) of a K or column index over the window.
  auto window = [&](Value idx) {
    Value area = s.mul(g(5), g(6));
    Value r = remu(idx, area);
    return std::array<Value, 3>{divu(idx, area), divu(r, g(6)), remu(r, g(6))};
  };
  // Input row and column a window position reads for output (oy, ox), and whether they exist.
  auto reads = [&](Value oy, Value ox, Value ky, Value kx) {
    Value iy = sub(s.add(s.mul(oy, g(7)), s.mul(ky, g(11))), g(9));
    Value ix = sub(s.add(s.mul(ox, g(8)), s.mul(kx, g(12))), g(10));
    Value ok = all({cmp(P::sge, iy, zero), cmp(P::slt, iy, g(1)), cmp(P::sge, ix, zero),
                    cmp(P::slt, ix, g(2))});
    return std::array<Value, 3>{iy, ix, ok};
  };
  std::function<Element(const std::vector<Value>&, Value, Value)> fetchA, fetchB;
  std::function<Value(const std::vector<Value>&, Value, Value)> outAt;
  switch (op) {
  case OpCode::Conv:
    fetchA = [&](const std::vector<Value>& off, Value o, Value kk) {
      auto [c, ky, kx] = window(kk);
      return Element{all({cmp(P::ult, o, m), cmp(P::ult, kk, k)}), dot4(off[1], 20, o, c, ky, kx)};
    };
    fetchB = [&](const std::vector<Value>& off, Value kk, Value p) {
      auto [c, ky, kx] = window(kk);
      auto [iy, ix, ok] = reads(divu(p, g(4)), remu(p, g(4)), ky, kx);
      return Element{all({cmp(P::ult, kk, k), cmp(P::ult, p, n), ok}),
                     dot4(off[0], 16, zero, c, iy, ix)};
    };
    outAt = [&](const std::vector<Value>& off, Value o, Value p) {
      return dot4(off[2], 24, zero, o, divu(p, g(4)), remu(p, g(4)));
    };
    break;
  case OpCode::ConvInputGrad:
    fetchA = [&](const std::vector<Value>& off, Value c, Value kk) {
      auto [o, ky, kx] = window(kk);
      return Element{all({cmp(P::ult, c, m), cmp(P::ult, kk, k)}), dot4(off[1], 20, o, c, ky, kx)};
    };
    fetchB = [&](const std::vector<Value>& off, Value kk, Value sp) {
      auto [o, ky, kx] = window(kk);
      Value ty = sub(s.add(divu(sp, g(2)), g(9)), s.mul(ky, g(11)));
      Value tx2 = sub(s.add(remu(sp, g(2)), g(10)), s.mul(kx, g(12)));
      Value py = mlir::arith::SelectOp::create(b, loc, cmp(P::sge, ty, zero), ty, zero);
      Value px = mlir::arith::SelectOp::create(b, loc, cmp(P::sge, tx2, zero), tx2, zero);
      Value oy = divu(py, g(7)), ox = divu(px, g(8));
      Value ok =
          all({cmp(P::ult, kk, k), cmp(P::ult, sp, n), cmp(P::sge, ty, zero),
               cmp(P::sge, tx2, zero), cmp(P::eq, remu(py, g(7)), zero),
               cmp(P::eq, remu(px, g(8)), zero), cmp(P::ult, oy, g(3)), cmp(P::ult, ox, g(4))});
      return Element{ok, dot4(off[0], 16, zero, o, oy, ox)};
    };
    outAt = [&](const std::vector<Value>& off, Value c, Value sp) {
      return dot4(off[2], 24, zero, c, divu(sp, g(2)), remu(sp, g(2)));
    };
    break;
  case OpCode::ConvWeightGrad: {
    auto sample = [&](Value q) {
      Value area = s.mul(g(3), g(4));
      Value r = remu(q, area);
      return std::array<Value, 3>{divu(q, area), divu(r, g(4)), remu(r, g(4))};
    };
    fetchA = [&, sample](const std::vector<Value>& off, Value o, Value q) {
      auto [nb, oy, ox] = sample(q);
      return Element{all({cmp(P::ult, o, m), cmp(P::ult, q, k)}), dot4(off[1], 20, nb, o, oy, ox)};
    };
    fetchB = [&, sample](const std::vector<Value>& off, Value q, Value kk) {
      auto [nb, oy, ox] = sample(q);
      auto [c, ky, kx] = window(kk);
      auto [iy, ix, ok] = reads(oy, ox, ky, kx);
      return Element{all({cmp(P::ult, q, k), cmp(P::ult, kk, n), ok}),
                     dot4(off[0], 16, nb, c, iy, ix)};
    };
    outAt = [&](const std::vector<Value>& off, Value o, Value kk) {
      auto [c, ky, kx] = window(kk);
      return dot4(off[2], 24, o, c, ky, kx);
    };
    break;
  }
  default: // matmul: a, b, out with row and column strides
    fetchA = [&](const std::vector<Value>& off, Value r, Value c) {
      return Element{all({cmp(P::ult, r, m), cmp(P::ult, c, k)}),
                     s.add(off[0], s.add(s.mul(r, e[3]), s.mul(c, e[4])))};
    };
    fetchB = [&](const std::vector<Value>& off, Value r, Value c) {
      return Element{all({cmp(P::ult, r, k), cmp(P::ult, c, n)}),
                     s.add(off[1], s.add(s.mul(r, e[5]), s.mul(c, e[6])))};
    };
    outAt = [&](const std::vector<Value>& off, Value r, Value c) {
      return s.add(off[2], s.add(s.mul(r, e[7]), s.mul(c, e[8])));
    };
  }
  body(GemmOperands{m, n, k, e[static_cast<size_t>(extras - 2)], e[static_cast<size_t>(extras - 1)],
                    op == OpCode::MatMul ? 0 : 1, op == OpCode::MatMul ? 1 : 0, fetchA, fetchB,
                    outAt});
}

/// C = A B per batch point (GemmOperands): 16 x 16 output tiles, one per workgroup (x: columns,
/// y: rows, z and a loop: the batch), K walked in slabs of 16 through workgroup memory. For
/// integer matmuls (never split).
inline void buildMatMul(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  constexpr int64_t kTile = 16;
  const DType out = key.dtypes[2], f = accumulateType(out);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  auto tileType = mlir::MemRefType::get(
      {kTile * kTile}, registerType(b, f), mlir::MemRefLayoutAttrInterface{},
      mlir::spirv::StorageClassAttr::get(b.getContext(), mlir::spirv::StorageClass::Workgroup));
  Value as = mlir::memref::AllocOp::create(b, loc, tileType);
  Value bs = mlir::memref::AllocOp::create(b, loc, tileType);
  using D = mlir::gpu::Dimension;
  using P = mlir::arith::CmpIPredicate;
  Value tx = mlir::gpu::ThreadIdOp::create(b, loc, D::x),
        ty = mlir::gpu::ThreadIdOp::create(b, loc, D::y);
  Value row = s.add(s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::y), s.c(kTile)), ty);
  Value col = s.add(s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::x), s.c(kTile)), tx);
  Value slot = s.add(s.mul(ty, s.c(kTile)), tx);
  auto lt = [&](Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, P::ult, x, y).getResult();
  };
  withGemmOperands(s, key.op, [&](const GemmOperands& gm) {
    s.forEach(
        mlir::gpu::BlockIdOp::create(b, loc, D::z), s.p(0),
        mlir::gpu::GridDimOp::create(b, loc, D::z), [&](Value batch) {
          const std::vector<Value> off = s.walk(batch).offsets;
          Value slabs =
              mlir::arith::DivUIOp::create(b, loc, s.add(gm.k, s.c(kTile - 1)), s.c(kTile));
          auto loop = mlir::scf::ForOp::create(
              b, loc, s.c(0), slabs, s.c(1), mlir::ValueRange{bb.constantFloat(f, 0.0)},
              [&](mlir::OpBuilder& nb, mlir::Location, Value t, mlir::ValueRange it) {
                mlir::OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                Value k0 = s.mul(t, s.c(kTile));
                // A[row, k0 + tx] and B[k0 + ty, col], zero where they do not exist.
                auto fetch = [&](int operand, const Element& el, Value tile) {
                  auto v = mlir::scf::IfOp::create(
                      b, loc, el.inside,
                      [&](mlir::OpBuilder& tb, mlir::Location) {
                        mlir::OpBuilder::InsertionGuard g2(b);
                        b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
                        mlir::scf::YieldOp::create(
                            b, loc, bb.convert(s.load(operand, el.at), key.dtypes[operand], f));
                      },
                      [&](mlir::OpBuilder& eb, mlir::Location) {
                        mlir::OpBuilder::InsertionGuard g2(b);
                        b.setInsertionPoint(eb.getInsertionBlock(), eb.getInsertionPoint());
                        mlir::scf::YieldOp::create(b, loc, bb.constantFloat(f, 0.0));
                      });
                  mlir::memref::StoreOp::create(b, loc, v.getResult(0), tile,
                                                mlir::ValueRange{slot});
                };
                fetch(gm.aOperand, gm.fetchA(off, row, s.add(k0, tx)), as);
                fetch(gm.bOperand, gm.fetchB(off, s.add(k0, ty), col), bs);
                mlir::gpu::BarrierOp::create(b, loc);
                Value sum = it[0];
                for (int64_t q = 0; q < kTile; ++q) {
                  Value x = mlir::memref::LoadOp::create(
                      b, loc, as, mlir::ValueRange{s.add(s.mul(ty, s.c(kTile)), s.c(q))});
                  Value y = mlir::memref::LoadOp::create(
                      b, loc, bs, mlir::ValueRange{s.add(s.c(q * kTile), tx)});
                  sum = isFloatType(f) ? mlir::math::FmaOp::create(b, loc, x, y, sum).getResult()
                                       : mlir::arith::AddIOp::create(
                                             b, loc, sum, mlir::arith::MulIOp::create(b, loc, x, y))
                                             .getResult();
                }
                mlir::gpu::BarrierOp::create(b, loc);
                mlir::scf::YieldOp::create(b, loc, sum);
              });
          Value inside = mlir::arith::AndIOp::create(b, loc, lt(row, gm.m), lt(col, gm.n));
          s.when(inside, [&] {
            s.store(2, gm.outAt(off, row, col),
                    roundTo(b, loc, bb.convert(resultOf(b, loc, loop, 0), f, out), out));
          });
        });
  });
}

/// C = A B (GemmOperands) for floating matmuls and convolutions: a 128 x 128 block of C per
/// workgroup of 16 x 16 invocations (64 x 64 with key.block = kMatMulSmallBlock, 4 x 4 tiles),
/// each holding an 8 x 8 register tile (rows ty + 16 i, columns tx + 16 j: neighbouring
/// invocations read neighbouring words of workgroup memory and write neighbouring words of C), K
/// in slabs of 16 staged through workgroup memory (A's slab stored K-major), loads outside the
/// matrices masked without branches; in float32 registers (16-bit floats widened as they load).
/// With split-K, z and its loop walk (batch point, part) pairs, each part a run of K's slabs.
inline void buildBlockedMatMul(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  constexpr int64_t kSlab = 16, kThreads = 256;
  const int64_t kBlock = key.block == hal::kMatMulSmallBlock ? key.block : hal::kMatMulBlock,
                kReg = kBlock / 16;
  const DType out = key.dtypes[2], f = DType::Float32;
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  using D = mlir::gpu::Dimension;
  using P = mlir::arith::CmpIPredicate;
  auto slabType = mlir::MemRefType::get(
      {kSlab * kBlock}, b.getF32Type(), mlir::MemRefLayoutAttrInterface{},
      mlir::spirv::StorageClassAttr::get(b.getContext(), mlir::spirv::StorageClass::Workgroup));
  Value as = mlir::memref::AllocOp::create(b, loc, slabType);
  Value bs = mlir::memref::AllocOp::create(b, loc, slabType);
  Value tx = mlir::gpu::ThreadIdOp::create(b, loc, D::x),
        ty = mlir::gpu::ThreadIdOp::create(b, loc, D::y);
  Value tid = s.add(s.mul(ty, s.c(16)), tx);
  Value row0 = s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::y), s.c(kBlock));
  Value col0 = s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::x), s.c(kBlock));
  auto lt = [&](Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, P::ult, x, y).getResult();
  };
  auto both = [&](Value x, Value y) {
    return mlir::arith::AndIOp::create(b, loc, x, y).getResult();
  };
  Value zero = bb.constantFloat(f, 0.0);
  withGemmOperands(s, key.op, [&](const GemmOperands& gm) {
    Value m = gm.m, n = gm.n, k = gm.k;
    auto ceilDiv = [&](Value x, Value y) {
      return mlir::arith::DivUIOp::create(b, loc, s.add(x, mlir::arith::SubIOp::create(
                                                              b, loc, y, s.c(1))),
                                          y)
          .getResult();
    };
    auto min = [&](Value x, Value y) {
      return mlir::arith::MinUIOp::create(b, loc, x, y).getResult();
    };
    s.forEach(
        mlir::gpu::BlockIdOp::create(b, loc, D::z), s.mul(s.p(0), gm.splits),
        mlir::gpu::GridDimOp::create(b, loc, D::z), [&](Value point) {
          Value batch = mlir::arith::DivUIOp::create(b, loc, point, gm.splits);
          Value part = mlir::arith::RemUIOp::create(b, loc, point, gm.splits);
          std::vector<Value> off = s.walk(batch).offsets;
          off[2] = s.add(off[2], s.mul(part, gm.splitStride));
          Value slabs = ceilDiv(k, s.c(kSlab));
          Value perPart = ceilDiv(slabs, gm.splits);
          Value first = min(slabs, s.mul(part, perPart));
          Value last = min(slabs, s.add(first, perPart));
          std::vector<Value> init(static_cast<size_t>(kReg * kReg), zero);
          auto loop = mlir::scf::ForOp::create(
              b, loc, first, last, s.c(1), init,
              [&](mlir::OpBuilder& nb, mlir::Location, Value t, mlir::ValueRange it) {
                mlir::OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                Value k0 = s.mul(t, s.c(kSlab));
                // Stage the slabs: A[row0 .. +128, k0 .. +8] as as[kk * 128 + r], and
                // B[k0 .. +8, col0 .. +128] as bs[kk * 128 + c]; kBlock * kSlab / 256 each.
                for (int64_t q = 0; q < kBlock * kSlab / kThreads; ++q) {
                  Value el = s.add(tid, s.c(q * kThreads));
                  // Without branches: an element outside the matrix loads the operand's
                  // first one (always there) and stages 0.
                  auto stage = [&](int operand, Value inside, Value at, Value slab, Value slot) {
                    Value safe = mlir::arith::SelectOp::create(b, loc, inside, at,
                                                               off[static_cast<size_t>(operand)]);
                    Value v = bb.convert(s.load(operand, safe), key.dtypes[operand], f);
                    mlir::memref::StoreOp::create(
                        b, loc, mlir::arith::SelectOp::create(b, loc, inside, v, zero), slab,
                        mlir::ValueRange{slot});
                  };
                  { // A: consecutive invocations walk K (a row-major A's contiguous dim)
                    Value r = mlir::arith::DivUIOp::create(b, loc, el, s.c(kSlab));
                    Value c = mlir::arith::RemUIOp::create(b, loc, el, s.c(kSlab));
                    Value gr = s.add(row0, r), gc = s.add(k0, c);
                    const Element a = gm.fetchA(off, gr, gc);
                    stage(gm.aOperand, a.inside, a.at, as, s.add(s.mul(c, s.c(kBlock)), r));
                  }
                  { // B: consecutive invocations walk N
                    Value r = mlir::arith::DivUIOp::create(b, loc, el, s.c(kBlock));
                    Value c = mlir::arith::RemUIOp::create(b, loc, el, s.c(kBlock));
                    Value gr = s.add(k0, r), gc = s.add(col0, c);
                    const Element bEl = gm.fetchB(off, gr, gc);
                    stage(gm.bOperand, bEl.inside, bEl.at, bs, el);
                  }
                }
                mlir::gpu::BarrierOp::create(b, loc);
                std::vector<Value> acc(it.begin(), it.end());
                for (int64_t kk = 0; kk < kSlab; ++kk) {
                  std::vector<Value> av, bv;
                  for (int64_t i = 0; i < kReg; ++i) {
                    av.push_back(mlir::memref::LoadOp::create(
                        b, loc, as, mlir::ValueRange{s.add(ty, s.c(kk * kBlock + 16 * i))}));
                    bv.push_back(mlir::memref::LoadOp::create(
                        b, loc, bs, mlir::ValueRange{s.add(tx, s.c(kk * kBlock + 16 * i))}));
                  }
                  for (int64_t i = 0; i < kReg; ++i)
                    for (int64_t j = 0; j < kReg; ++j) {
                      Value& a = acc[static_cast<size_t>(i * kReg + j)];
                      a = mlir::math::FmaOp::create(b, loc, av[static_cast<size_t>(i)],
                                                    bv[static_cast<size_t>(j)], a);
                    }
                }
                mlir::gpu::BarrierOp::create(b, loc);
                mlir::scf::YieldOp::create(b, loc, acc);
              });
          for (int64_t i = 0; i < kReg; ++i)
            for (int64_t j = 0; j < kReg; ++j) {
              Value r = s.add(row0, s.add(ty, s.c(16 * i)));
              Value c = s.add(col0, s.add(tx, s.c(16 * j)));
              Value v = resultOf(b, loc, loop, static_cast<unsigned>(i * kReg + j));
              s.when(both(lt(r, m), lt(c, n)), [&] {
                s.store(2, gm.outAt(off, r, c), roundTo(b, loc, bb.convert(v, f, out), out));
              });
            }
        });
  });
}

} // namespace weft::codegen
