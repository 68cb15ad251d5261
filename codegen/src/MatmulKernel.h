// A generated GEMM with its epilogue: a float32 matmul kernel whose result the group's elementwise
// nodes (bias, activation, residual add) consume while it is still in cache, one register tile at a
// time. Included only by Elementwise.cpp, whose kernels it shares the ABI, the cache and the body
// builder with.
//
// The schedule is the one of BLAS libraries. Columns go in blocks whose B, packed panel after
// panel (each K x NR, contiguous: no cache-set conflicts between its rows), fits in L2. Per block,
// per MR rows of A (a row tile), each panel's MR x NR product is a linalg.matmul of static shape
// [MR, K] x [K, NR] on views of A and the panel, written into the tile's rows; then the epilogue
// computes the group's nodes over those rows (one loop per row over the block's columns) and
// stores its outputs, while the rows are in L1. A launch covers a range of row tiles (threads
// split the rows) and packs B itself. The matmuls become register tiles by the transform schedule
// in Jit.cpp (kGemmSchedule): K in steps of 1, each step one row of the panel times MR broadcast
// elements of A into MR x NR accumulators held in vector registers over all of K, so sums run
// over K in order, one FMA per step (on targets with FMA). K is not blocked: for K in the
// thousands one panel's rows no longer stay in L1.
#pragma once

#include "JitInternal.h"
#include "KernelBody.h"
#include "KernelIO.h"
#include "weft/codegen/Jit.h"
#include "weft/ir/Graph.h"
#include "weft/passes/Fusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace weft::codegen {

/// Bytes of packed B a generated GEMM keeps per column block (a quarter of a 1 MB L2).
inline constexpr int64_t kPackedBytes = int64_t{256} << 10;

/// The register tile of a generated GEMM on `target`: MR rows of NR columns (NR a multiple of the
/// vector width), as many accumulators as leave registers for a row of B and a broadcast.
struct MatmulTile {
  int64_t rows, cols;
};
inline MatmulTile matmulTile(const CpuTarget& target) {
  auto has = [&](const char* f) { return target.features.find(f) != std::string::npos; };
  if (has("+avx512f")) return {8, 32};             // 16 of 32 zmm registers accumulate
  if (has("+avx2") && has("+fma")) return {6, 16}; // 12 of 16 ymm
  return {4, 8}; // 8 of 16 xmm (without FMA each step multiplies, then adds)
}

/// The row tiles a matmul kernel's launch splits over the threads (its KernelInfo::rows).
inline int64_t matmulRowTiles(const ir::Graph& g, const ir::Node& mm, const CpuTarget& target) {
  const Shape& out = g.type(mm.result).shape;
  const int64_t m = numel(out) / out.back(), mr = matmulTile(target).rows;
  return (m + mr - 1) / mr;
}

/// A [rows, cols] view (row stride `stride`) of the 1-D float32 memref `m` from element `offset`.
inline mlir::Value matrixView(mlir::OpBuilder& b, mlir::Location loc, mlir::Value m,
                              mlir::Value offset, int64_t rows, int64_t cols, int64_t stride) {
  auto layout =
      mlir::StridedLayoutAttr::get(b.getContext(), mlir::ShapedType::kDynamic, {stride, 1});
  auto type = mlir::MemRefType::get({rows, cols}, b.getF32Type(), layout);
  return mlir::memref::ReinterpretCastOp::create(
      b, loc, type, m, mlir::OpFoldResult(offset),
      llvm::SmallVector<mlir::OpFoldResult>{b.getIndexAttr(rows), b.getIndexAttr(cols)},
      llvm::SmallVector<mlir::OpFoldResult>{b.getIndexAttr(stride), b.getIndexAttr(1)});
}

/// func @name(inputs..., outputs..., lo, hi): the GEMM of `grp`'s matmul root over row tiles
/// [lo, hi), then its epilogue per tile. Fails for a group that is not a matmul kernel.
inline mlir::LogicalResult buildMatmulKernel(mlir::OpBuilder& b, mlir::ModuleOp module,
                                             const ir::Graph& g, const ir::FusionGroup& grp,
                                             const std::string& name, const CpuTarget& target) {
  const ir::Node* mm = passes::matmulRoot(g, grp);
  if (mm == nullptr) return mlir::failure();
  mlir::Location loc = b.getUnknownLoc();
  auto [entry, lo, hi] = declareKernel(b, module, g, grp, name);
  const Shape& shape = grp.shape;
  const int64_t k = g.type(mm->operands[0]).shape.back(), n = shape.back(), m = numel(shape) / n;
  const auto [mr, nr] = matmulTile(target);
  auto argOf = [&](ir::ValueId v) {
    auto i = std::find(grp.inputs.begin(), grp.inputs.end(), v) - grp.inputs.begin();
    return entry->getArgument(static_cast<unsigned>(i));
  };
  const std::optional<passes::MatmulB> mb = passes::matmulB(g, grp, mm->operands[1]);
  mlir::Value a = argOf(mm->operands[0]), bm = argOf(mb->input);
  mlir::Type f32 = b.getF32Type();
  auto idx = [&](mlir::OpBuilder& ob, int64_t v) -> mlir::Value {
    return mlir::arith::ConstantIndexOp::create(ob, loc, v);
  };
  auto add = [&](mlir::OpBuilder& ob, mlir::Value x, mlir::Value y) -> mlir::Value {
    return mlir::arith::AddIOp::create(ob, loc, x, y);
  };
  auto mul = [&](mlir::OpBuilder& ob, mlir::Value x, mlir::Value y) -> mlir::Value {
    return mlir::arith::MulIOp::create(ob, loc, x, y);
  };
  auto minIdx = [&](mlir::OpBuilder& ob, mlir::Value x, mlir::Value y) -> mlir::Value {
    return mlir::arith::MinSIOp::create(ob, loc, x, y);
  };
  // A counted loop whose body gets the builder and the induction variable.
  auto forLoop = [&](mlir::OpBuilder& ob, mlir::Value from, mlir::Value to, mlir::Value step,
                     const std::function<void(mlir::OpBuilder&, mlir::Value)>& body) {
    mlir::scf::ForOp::create(
        ob, loc, from, to, step, mlir::ValueRange{},
        [&](mlir::OpBuilder& ib, mlir::Location, mlir::Value iv, mlir::ValueRange) {
          body(ib, iv);
          mlir::scf::YieldOp::create(ib, loc);
        });
  };

  mlir::Value zero = idx(b, 0), one = idx(b, 1), kv = idx(b, k), nv = idx(b, n), nrv = idx(b, nr);
  // Columns go in blocks of `nb` (whole panels) whose packed B takes about kPackedBytes: it stays
  // in L2 while every row tile reads it, and a launch holds that much (and MR rows of the block)
  // on the heap whatever N and K are.
  const int64_t panels = (n + nr - 1) / nr;
  const int64_t nb = std::clamp<int64_t>(kPackedBytes / (k * 4) / nr, 1, panels) * nr;
  if (k * nb * 4 > (int64_t{64} << 20)) return mlir::failure(); // K in the millions: OpenBLAS
  mlir::Value nbv = idx(b, nb);
  mlir::Value rowLo = mul(b, lo, idx(b, mr)), rowHi = minIdx(b, mul(b, hi, idx(b, mr)), idx(b, m));
  mlir::Value panel = mlir::memref::AllocOp::create(b, loc, mlir::MemRefType::get({k * nb}, f32),
                                                    b.getI64IntegerAttr(64));
  mlir::Value tile = mlir::memref::AllocOp::create(b, loc, mlir::MemRefType::get({mr * nb}, f32),
                                                   b.getI64IntegerAttr(64));
  mlir::Value fzero = mlir::arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));

  bool ok = true;
  forLoop(b, zero, idx(b, (n + nb - 1) / nb), one, [&](mlir::OpBuilder& bb0, mlir::Value block) {
    mlir::Value c0 = mul(bb0, block, nbv);
    mlir::Value blockCols = minIdx(bb0, nbv, mlir::arith::SubIOp::create(bb0, loc, nv, c0));
    mlir::Value blockPanels =
        mlir::arith::DivUIOp::create(bb0, loc, add(bb0, blockCols, idx(bb0, nr - 1)), nrv);
    // Pack each panel's columns [j0, j0 + NR) of B, zeros past N, a row of the panel at a time
    // (from a transposed B: NR streams along its rows, each line read for 16 steps of k).
    forLoop(bb0, zero, blockPanels, one, [&](mlir::OpBuilder& pb, mlir::Value jo) {
      mlir::Value j0 = add(pb, c0, mul(pb, jo, nrv)), base = mul(pb, jo, idx(pb, k * nr));
      mlir::Value cols = minIdx(pb, nrv, mlir::arith::SubIOp::create(pb, loc, nv, j0));
      forLoop(pb, zero, kv, one, [&](mlir::OpBuilder& kb, mlir::Value kk) {
        mlir::Value panelAt = add(kb, base, mul(kb, kk, nrv)), rowAt = mul(kb, kk, nv);
        forLoop(kb, zero, nrv, one, [&](mlir::OpBuilder& cb, mlir::Value c) {
          mlir::Value col = minIdx(cb, add(cb, j0, c), idx(cb, n - 1));
          mlir::Value at = mb->leaf >= 0 ? add(cb, mul(cb, col, kv), kk) : add(cb, rowAt, col);
          mlir::Value x = mlir::memref::LoadOp::create(cb, loc, bm, mlir::ValueRange{at});
          mlir::Value inside =
              mlir::arith::CmpIOp::create(cb, loc, mlir::arith::CmpIPredicate::slt, c, cols);
          x = mlir::arith::SelectOp::create(cb, loc, inside, x, fzero);
          mlir::memref::StoreOp::create(cb, loc, x, panel, mlir::ValueRange{add(cb, panelAt, c)});
        });
      });
    });
    {
      // Per row tile: every panel's product into the tile, then the epilogue over its rows.
      mlir::OpBuilder& pb = bb0;
      forLoop(pb, rowLo, rowHi, idx(pb, mr), [&](mlir::OpBuilder& ib, mlir::Value i0) {
        mlir::Value rows = minIdx(ib, idx(ib, mr), mlir::arith::SubIOp::create(ib, loc, rowHi, i0));
        // `count` rows from row `first` times panel `jo` over all of K, stored to the tile's rows
        // from `tileRow` at the panel's columns: a linalg.matmul on static [count, K] x [K, NR]
        // views, which the schedule (kGemmSchedule) turns into the register tile.
        auto microKernel = [&](mlir::OpBuilder& mb, mlir::Value first, int64_t count,
                               mlir::Value tileRow, mlir::Value jo) {
          mlir::Value av = matrixView(mb, loc, a, mul(mb, first, kv), count, k, k);
          mlir::Value pv = matrixView(mb, loc, panel, mul(mb, jo, idx(mb, k * nr)), k, nr, nr);
          mlir::Value tv = matrixView(
              mb, loc, tile, add(mb, mul(mb, tileRow, nbv), mul(mb, jo, nrv)), count, nr, nb);
          auto tensor = [&](int64_t rows, int64_t cols) {
            return mlir::RankedTensorType::get({rows, cols}, f32);
          };
          mlir::Value ta =
              mlir::bufferization::ToTensorOp::create(mb, loc, tensor(count, k), av, true, false);
          mlir::Value tb =
              mlir::bufferization::ToTensorOp::create(mb, loc, tensor(k, nr), pv, true, false);
          mlir::Value tc =
              mlir::bufferization::ToTensorOp::create(mb, loc, tensor(count, nr), tv, true, true);
          auto fill =
              mlir::linalg::FillOp::create(mb, loc, mlir::ValueRange{fzero}, mlir::ValueRange{tc});
          fill->setAttr(kGemmTag, mb.getUnitAttr());
          auto product = mlir::linalg::MatmulOp::create(mb, loc, mlir::TypeRange{tensor(count, nr)},
                                                        mlir::ValueRange{ta, tb},
                                                        mlir::ValueRange{fill.getResult(0)});
          product->setAttr(k == 1 ? kGemmWholeTag : kGemmTag, mb.getUnitAttr());
          mlir::bufferization::MaterializeInDestinationOp::create(
              mb, loc, mlir::Type(), product.getResult(0), tv, true, true);
        };
        mlir::Value full =
            mlir::arith::CmpIOp::create(ib, loc, mlir::arith::CmpIPredicate::eq, rows, idx(ib, mr));
        forLoop(ib, zero, blockPanels, one, [&](mlir::OpBuilder& jb, mlir::Value jo) {
          mlir::scf::IfOp::create(
              jb, loc, full,
              [&](mlir::OpBuilder& tb, mlir::Location) {
                microKernel(tb, i0, mr, idx(tb, 0), jo);
                mlir::scf::YieldOp::create(tb, loc);
              },
              [&](mlir::OpBuilder& eb, mlir::Location) {
                forLoop(eb, zero, rows, one, [&](mlir::OpBuilder& rb, mlir::Value r) {
                  microKernel(rb, add(rb, i0, r), 1, r, jo);
                });
                mlir::scf::YieldOp::create(eb, loc);
              });
        });
        // The epilogue over the tile's rows (their columns in the block: one long loop per row).
        forLoop(ib, zero, rows, one, [&](mlir::OpBuilder& rb, mlir::Value r) {
          mlir::Value row = add(rb, i0, r);
          // The row's index in each leading dim of the group's shape.
          std::vector<mlir::Value> ivs(shape.size());
          mlir::Value rem = row;
          for (size_t d = shape.size() - 1; d-- > 0;) {
            mlir::Value extent = idx(rb, shape[d]);
            ivs[d] = mlir::arith::RemUIOp::create(rb, loc, rem, extent);
            rem = mlir::arith::DivUIOp::create(rb, loc, rem, extent);
          }
          forLoop(rb, zero, blockCols, one, [&](mlir::OpBuilder& cb, mlir::Value cc) {
            mlir::Value c = add(cb, c0, cc);
            ivs.back() = c;
            // The element's index, for outputs and full-shape inputs alike: an output written over
            // an input is then stored where it was loaded by the same expression, which LLVM needs
            // to see to vectorize the loop (else the two may overlap at some distance).
            mlir::Value at = add(cb, mul(cb, row, nv), ivs.back());
            BodyBuilder bb(cb, loc, g);
            std::map<ir::ValueId, mlir::Value> values;
            values[mm->result] = mlir::memref::LoadOp::create(
                cb, loc, tile, mlir::ValueRange{add(cb, mul(cb, r, nbv), cc)});
            auto valueOf = [&](ir::ValueId v) {
              if (auto it = values.find(v); it != values.end()) return it->second;
              auto i = std::find(grp.inputs.begin(), grp.inputs.end(), v) - grp.inputs.begin();
              if (i == static_cast<std::ptrdiff_t>(grp.inputs.size()) ||
                  !broadcastsTo(g.type(v).shape, shape))
                return mlir::Value{};
              mlir::Value x = loadElement(
                  cb, loc, entry->getArgument(static_cast<unsigned>(i)),
                  g.type(v).shape == shape
                      ? at
                      : linearIndex(cb, loc, ivs, broadcastStrides(g.type(v).shape, shape)),
                  g.type(v).dtype);
              values[v] = x;
              return x;
            };
            std::vector<int32_t> order; // the leaves but B's transpose, then the epilogue
            std::copy_if(grp.leaves.begin(), grp.leaves.end(), std::back_inserter(order),
                         [&](int32_t i) { return i != mb->leaf; });
            order.insert(order.end(), grp.nodes.begin() + 1, grp.nodes.end());
            for (int32_t i : order) {
              const ir::Node& node = g.nodes()[static_cast<size_t>(i)];
              if (passes::isViewLeaf(g, node)) { // a view of an input: read through it
                values[node.result] = loadViewLeaf(cb, loc, g, grp, entry, node, ivs, shape);
                if (!values[node.result]) {
                  ok = false;
                  return;
                }
                continue;
              }
              std::vector<mlir::Value> in;
              for (ir::ValueId o : node.operands)
                in.push_back(valueOf(o));
              mlir::Value r = std::any_of(in.begin(), in.end(), [](mlir::Value x) { return !x; })
                                  ? mlir::Value{}
                                  : bb.node(node, in);
              if (!r) {
                ok = false;
                return;
              }
              values[node.result] = r;
            }
            for (size_t o = 0; o < grp.outputs.size(); ++o) {
              mlir::Value r = valueOf(grp.outputs[o]);
              if (!r) {
                ok = false;
                return;
              }
              storeOutput(cb, loc, entry, grp, o, r, at, g.type(grp.outputs[o]).dtype);
            }
          });
        });
      });
    }
  });
  mlir::memref::DeallocOp::create(b, loc, panel);
  mlir::memref::DeallocOp::create(b, loc, tile);
  mlir::func::ReturnOp::create(b, loc);
  return mlir::success(ok);
}

} // namespace weft::codegen
