// Fused elementwise kernels, one per group, built with OpBuilder: plain, column and horizontal
// kernels as linalg generics on tensors, row kernels as a loop over the rows with one linalg
// generic per pass along each row, GEMM-led kernels as loops over packed panels whose register
// tiles are linalg matmuls (MatmulKernel.h).
// One module per kernel, compiled to an object (or read from the disk cache), all linked into one
// shared object. Transcendental functions call the C library, as the eager kernels do, so fused and
// eager results agree bit for bit.
#include "weft/codegen/Elementwise.h"

#include "GroupKernel.h"
#include "JitInternal.h"
#include "KernelBody.h"
#include "KernelIO.h"
#include "MatmulKernel.h"
#include "PartsKernel.h"
#include "weft/codegen/KernelCache.h"
#include "weft/ir/TextFormat.h"
#include "weft/passes/Fusion.h"
#include "weft/runtime/ThreadPool.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace weft::codegen {
namespace {

using ir::ValueId;

/// Loops over dims [outer.size(), last) of `shape` around `body(ivs)` (ivs: `outer`, the indices
/// of the dims before, then the loops'), dim 0 over [lo, hi) and the others over their whole
/// extent.
void loopNest(mlir::OpBuilder& b, mlir::Location loc, const Shape& shape, size_t last,
              mlir::Value lo, mlir::Value hi,
              const std::function<void(mlir::OpBuilder&, std::vector<mlir::Value>&)>& body,
              std::vector<mlir::Value> outer = {}) {
  std::vector<mlir::Value> ivs = std::move(outer);
  std::function<void(mlir::OpBuilder&, size_t)> nest = [&](mlir::OpBuilder& nb, size_t d) {
    if (d == last) {
      body(nb, ivs);
      return;
    }
    mlir::Value from = d == 0 ? lo : mlir::arith::ConstantIndexOp::create(nb, loc, 0).getResult();
    mlir::Value to =
        d == 0 ? hi : mlir::arith::ConstantIndexOp::create(nb, loc, shape[d]).getResult();
    mlir::Value step = mlir::arith::ConstantIndexOp::create(nb, loc, 1);
    mlir::scf::ForOp::create(
        nb, loc, from, to, step, mlir::ValueRange{},
        [&](mlir::OpBuilder& ib, mlir::Location, mlir::Value iv, mlir::ValueRange) {
          ivs.push_back(iv);
          nest(ib, d + 1);
          ivs.pop_back();
          mlir::scf::YieldOp::create(ib, loc);
        });
  };
  nest(b, ivs.size());
}

/// Whether a kernel over `grp.shape` reads a view leaf across its rows: the leaf's stride along the
/// last dim spans more than a cache line and the one along the dim before is smaller (a
/// transpose). Each element of such a read touches another cache line; walking the last two dims
/// in blocks (buildGenericKernel's tiles) lets the lines a block's first row loads serve its
/// other rows.
bool readsAcrossRows(const ir::Graph& g, const ir::FusionGroup& grp) {
  const size_t r = grp.shape.size();
  if (r < 2) return false;
  for (int32_t i : grp.leaves) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!passes::isViewLeaf(g, n)) continue;
    std::optional<ViewRead> read = viewRead(g, n, grp.shape);
    if (!read) continue;
    const auto bytes = static_cast<int64_t>(elementSize(g.type(n.result).dtype));
    const int64_t inner = std::abs(read->strides[r - 1]) * bytes,
                  next = std::abs(read->strides[r - 2]) * bytes;
    if (inner > 64 && next < inner) return true;
  }
  return false;
}

/// The column sums (passes::isColumnReduction) a kernel stores, each with its output's index (one
/// nothing reads is not computed); nullopt where one does not sum a value of the group's shape.
/// Their memory is their outputs' (a sum is never written over an input).
struct ColumnSums {
  std::vector<std::pair<size_t, const ir::Node*>> sums;

  static std::optional<ColumnSums> of(const ir::Graph& g, const ir::FusionGroup& grp) {
    ColumnSums c;
    for (int32_t i : grp.nodes) {
      const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
      if (!passes::isColumnReduction(g, n)) continue;
      if (g.type(n.operands[0]).shape != grp.shape || grp.shape.size() < 3) return std::nullopt;
      auto out = std::find(grp.outputs.begin(), grp.outputs.end(), n.result);
      if (out != grp.outputs.end())
        c.sums.emplace_back(static_cast<size_t>(out - grp.outputs.begin()), &n);
    }
    return c;
  }
  /// Zeroes row `i` (an index of dim 0) of every sum.
  void zeroRow(mlir::OpBuilder& b, mlir::Location loc, const ir::Graph& g,
               const ir::FusionGroup& grp, mlir::Block* entry, mlir::Value i) const {
    const int64_t width = grp.shape.back();
    mlir::Value rowStart =
        mlir::arith::MulIOp::create(b, loc, i, mlir::arith::ConstantIndexOp::create(b, loc, width));
    mlir::scf::ForOp::create(
        b, loc, mlir::arith::ConstantIndexOp::create(b, loc, 0),
        mlir::arith::ConstantIndexOp::create(b, loc, width),
        mlir::arith::ConstantIndexOp::create(b, loc, 1), mlir::ValueRange{},
        [&](mlir::OpBuilder& zb, mlir::Location, mlir::Value c, mlir::ValueRange) {
          mlir::Value at = mlir::arith::AddIOp::create(zb, loc, rowStart, c);
          for (const auto& [k, n] : sums) {
            mlir::Value z = BodyBuilder(zb, loc, g).constantFloat(g.type(n->result).dtype, 0.0);
            mlir::memref::StoreOp::create(zb, loc, z, memref(grp, entry, k), at);
          }
          mlir::scf::YieldOp::create(zb, loc);
        });
  }
  static mlir::Value memref(const ir::FusionGroup& grp, mlir::Block* entry, size_t k) {
    return entry->getArgument(static_cast<unsigned>(grp.inputs.size() + k));
  }
};

/// Whether buildKernel builds `grp` as one linalg.generic (buildGenericKernel): every output has
/// the group's shape or is a column sum (ColumnSums), and every input written over has the
/// group's shape.
bool isGenericKernel(const ir::Graph& g, const ir::FusionGroup& grp) {
  const std::optional<ColumnSums> columns = ColumnSums::of(g, grp);
  if (!columns) return false;
  for (size_t k = 0; k < grp.outputs.size(); ++k)
    if (g.type(grp.outputs[k]).shape != grp.shape &&
        std::none_of(columns->sums.begin(), columns->sums.end(),
                     [&](const auto& sum) { return sum.first == k; }))
      return false;
  for (int32_t over : grp.inPlace)
    if (over >= 0 && (static_cast<size_t>(over) >= grp.inputs.size() ||
                      g.type(grp.inputs[static_cast<size_t>(over)]).shape != grp.shape))
      return false;
  return grp.inPlace.size() <= grp.outputs.size();
}

/// A plain kernel as one linalg.generic on tensors over rows [lo, hi) of the group's shape (a
/// kernel of rank 0: of shape [1]):
/// - each input, and each view leaf's operand, is a strided view of its flat memref there (stride
///   0 where it broadcasts, the view's strides for a leaf), read as a tensor;
/// - each output is such a view of its memref, or of the input it is written over, whose value
///   the body reads from the output's block argument (the input is no operand of its own);
/// - a column sum's output is a view of its memref as [rows, last dim], zeroed, which the body
///   adds its operand to (the dims between the first and the last are reductions: each index of
///   dim 0 sums its rows in order, as ColumnSums does);
/// - the body computes the group's nodes (computeNodes) and yields its outputs, which are
///   materialized in those views.
/// A kernel reading a view across its rows (readsAcrossRows) is tiled: the last two dims in
/// blocks of 64 x 64 (measured best at 256^2 to 2048^2 float32), the others one index at a time.
/// Bufferization writes the outputs in place and linalg's loops lower the generic (each tile's)
/// to a loop nest (compileToObject).
mlir::LogicalResult buildGenericKernel(mlir::OpBuilder& b, mlir::Location loc, const ir::Graph& g,
                                       const ir::FusionGroup& grp, mlir::Block* entry,
                                       mlir::Value lo, mlir::Value hi) {
  const Shape shape = grp.shape.empty() ? Shape{1} : grp.shape;
  const size_t rank = shape.size();
  mlir::MLIRContext* ctx = b.getContext();
  mlir::Value rows = mlir::arith::SubIOp::create(b, loc, hi, lo);
  std::vector<int64_t> viewShape(shape.begin(), shape.end());
  viewShape[0] = mlir::ShapedType::kDynamic;
  auto tensorOf = [&](DType t) { return mlir::RankedTensorType::get(viewShape, memoryType(b, t)); };
  // Memref `m` seen over rows [lo, hi) of the group's shape with `strides` from `offset`.
  auto view = [&](mlir::Value m, const std::vector<int64_t>& strides, int64_t offset,
                  DType t) -> mlir::Value {
    mlir::Value start = mlir::arith::AddIOp::create(
        b, loc,
        mlir::arith::MulIOp::create(b, loc, lo,
                                    mlir::arith::ConstantIndexOp::create(b, loc, strides[0])),
        mlir::arith::ConstantIndexOp::create(b, loc, offset));
    llvm::SmallVector<mlir::OpFoldResult> sizes{rows}, steps;
    for (size_t d = 1; d < rank; ++d)
      sizes.push_back(b.getIndexAttr(shape[d]));
    for (int64_t st : strides)
      steps.push_back(b.getIndexAttr(st));
    auto layout = mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, strides);
    auto type = mlir::MemRefType::get(viewShape, memoryType(b, t), layout);
    return mlir::memref::ReinterpretCastOp::create(b, loc, type, m, mlir::OpFoldResult(start),
                                                   sizes, steps);
  };
  std::vector<int32_t> writtenBy(grp.inputs.size(), -1); // the output written over each input
  for (size_t k = 0; k < grp.inPlace.size() && k < grp.outputs.size(); ++k)
    if (grp.inPlace[k] >= 0)
      writtenBy[static_cast<size_t>(grp.inPlace[k])] = static_cast<int32_t>(k);
  // The values the group reads as they are (not through a view leaf), or returns.
  std::set<ValueId> read(grp.outputs.begin(), grp.outputs.end());
  for (const std::vector<int32_t>* list : {&grp.leaves, &grp.nodes})
    for (int32_t i : *list)
      if (!passes::isViewLeaf(g, g.nodes()[static_cast<size_t>(i)]))
        read.insert(g.nodes()[static_cast<size_t>(i)].operands.begin(),
                    g.nodes()[static_cast<size_t>(i)].operands.end());
  // Every view is `restrict` (one-shot bufferization takes no other), though an input may be
  // read through several views (x + x.t()): sound because inputs are only read, and the fuse
  // pass never writes an output over an input read through a view or sharing its memory
  // (passes::readsAcross), nor does the memory planner give a kernel's output an input's memory
  // (canWriteOverInput).
  std::vector<mlir::Value> ins, outViews, outs;
  std::vector<std::pair<ValueId, DType>> inValues; // what each `ins` block argument is
  for (size_t i = 0; i < grp.inputs.size(); ++i) {
    ValueId v = grp.inputs[i];
    if (writtenBy[i] >= 0 || read.count(v) == 0 || !broadcastsTo(g.type(v).shape, shape)) continue;
    mlir::Value m = view(entry->getArgument(static_cast<unsigned>(i)),
                         broadcastStrides(g.type(v).shape, shape), 0, g.type(v).dtype);
    ins.push_back(
        mlir::bufferization::ToTensorOp::create(b, loc, tensorOf(g.type(v).dtype), m, true, false));
    inValues.emplace_back(v, g.type(v).dtype);
  }
  for (int32_t i : grp.leaves) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!passes::isViewLeaf(g, n)) continue;
    std::optional<ViewRead> leaf = viewRead(g, n, grp.shape); // one operand, if any
    if (!leaf) return mlir::failure();
    auto in = std::find(grp.inputs.begin(), grp.inputs.end(), n.operands[0]);
    if (in == grp.inputs.end()) return mlir::failure();
    if (grp.shape.empty()) leaf->strides = {0}; // its one element, over shape [1]
    mlir::Value m = view(entry->getArgument(static_cast<unsigned>(in - grp.inputs.begin())),
                         leaf->strides, leaf->offset, g.type(n.result).dtype);
    ins.push_back(mlir::bufferization::ToTensorOp::create(b, loc, tensorOf(g.type(n.result).dtype),
                                                          m, true, false));
    inValues.emplace_back(n.result, g.type(n.result).dtype);
  }
  const std::optional<ColumnSums> columns = ColumnSums::of(g, grp);
  if (!columns) return mlir::failure();
  std::vector<const ir::Node*> sumOf(grp.outputs.size(), nullptr); // the column sum per output
  for (const auto& [k, node] : columns->sums)
    sumOf[k] = node;
  std::vector<mlir::AffineMap> maps;
  const auto dims = static_cast<unsigned>(rank);
  for (size_t j = 0; j < ins.size(); ++j)
    maps.push_back(b.getMultiDimIdentityMap(dims));
  for (size_t k = 0; k < grp.outputs.size(); ++k) {
    const DType t = g.type(grp.outputs[k]).dtype;
    if (sumOf[k] != nullptr) { // [rows, last dim], zeroed
      const int64_t width = shape.back();
      auto type = mlir::MemRefType::get(
          {mlir::ShapedType::kDynamic, width}, memoryType(b, t),
          mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, {width, 1}));
      mlir::Value start = mlir::arith::MulIOp::create(
          b, loc, lo, mlir::arith::ConstantIndexOp::create(b, loc, width));
      outViews.push_back(mlir::memref::ReinterpretCastOp::create(
          b, loc, type, entry->getArgument(static_cast<unsigned>(grp.inputs.size() + k)),
          mlir::OpFoldResult(start),
          llvm::SmallVector<mlir::OpFoldResult>{rows, b.getIndexAttr(width)},
          llvm::SmallVector<mlir::OpFoldResult>{b.getIndexAttr(width), b.getIndexAttr(1)}));
      mlir::Value sums = mlir::bufferization::ToTensorOp::create(
          b, loc,
          mlir::RankedTensorType::get({mlir::ShapedType::kDynamic, width}, memoryType(b, t)),
          outViews.back(), true, true);
      mlir::Value zero = BodyBuilder(b, loc, g).constantFloat(t, 0.0);
      outs.push_back(
          mlir::linalg::FillOp::create(b, loc, mlir::ValueRange{zero}, mlir::ValueRange{sums})
              ->getResult(0));
      maps.push_back(mlir::AffineMap::get(
          dims, 0, {b.getAffineDimExpr(0), b.getAffineDimExpr(dims - 1)}, ctx));
      continue;
    }
    const int32_t over = k < grp.inPlace.size() ? grp.inPlace[k] : -1;
    auto arg =
        static_cast<unsigned>(over >= 0 ? over : static_cast<int32_t>(grp.inputs.size() + k));
    outViews.push_back(view(entry->getArgument(arg), broadcastStrides(shape, shape), 0, t));
    outs.push_back(
        mlir::bufferization::ToTensorOp::create(b, loc, tensorOf(t), outViews.back(), true, true));
    maps.push_back(b.getMultiDimIdentityMap(dims));
  }
  std::vector<mlir::utils::IteratorType> iterators(rank, mlir::utils::IteratorType::parallel);
  if (!columns->sums.empty())
    for (size_t d = 1; d + 1 < rank; ++d)
      iterators[d] = mlir::utils::IteratorType::reduction;
  std::vector<mlir::Type> resultTypes;
  for (mlir::Value o : outs)
    resultTypes.push_back(o.getType());
  bool ok = true;
  auto generic = mlir::linalg::GenericOp::create(
      b, loc, resultTypes, ins, outs, maps, iterators,
      [&](mlir::OpBuilder& nb, mlir::Location, mlir::ValueRange args) {
        std::map<ValueId, mlir::Value> values;
        for (size_t j = 0; j < inValues.size(); ++j)
          values[inValues[j].first] = fromMemory(nb, loc, args[j], inValues[j].second);
        for (size_t i = 0; i < grp.inputs.size(); ++i)
          if (writtenBy[i] >= 0)
            values[grp.inputs[i]] =
                fromMemory(nb, loc, args[ins.size() + static_cast<size_t>(writtenBy[i])],
                           g.type(grp.inputs[i]).dtype);
        ok = computeNodes(nb, loc, g, grp, values);
        std::vector<mlir::Value> yields;
        for (size_t k = 0; ok && k < grp.outputs.size(); ++k) {
          if (sumOf[k] != nullptr) { // the sum so far plus this element's operand
            auto it = values.find(sumOf[k]->operands[0]);
            ok = it != values.end();
            if (ok)
              yields.push_back(
                  mlir::arith::AddFOp::create(nb, loc, args[ins.size() + k], it->second));
            continue;
          }
          auto it = values.find(grp.outputs[k]);
          ok = it != values.end();
          if (ok) yields.push_back(toMemory(nb, loc, it->second, g.type(grp.outputs[k]).dtype));
        }
        if (!ok)
          yields = std::vector<mlir::Value>(args.begin() + static_cast<std::ptrdiff_t>(ins.size()),
                                            args.end());
        mlir::linalg::YieldOp::create(nb, loc, yields);
      });
  std::vector<mlir::Value> results(generic->getResults().begin(), generic->getResults().end());
  if (ok && rank >= 2 && readsAcrossRows(g, grp)) {
    llvm::SmallVector<mlir::OpFoldResult> tiles(rank, b.getIndexAttr(1));
    tiles[rank - 2] = tiles[rank - 1] = b.getIndexAttr(64);
    mlir::IRRewriter rewriter(b);
    rewriter.setInsertionPoint(generic);
    auto tiled =
        mlir::scf::tileUsingSCF(rewriter, llvm::cast<mlir::TilingInterface>(generic.getOperation()),
                                mlir::scf::SCFTilingOptions().setTileSizes(tiles));
    if (mlir::failed(tiled)) return mlir::failure();
    results.assign(tiled->replacements.begin(), tiled->replacements.end());
    rewriter.eraseOp(generic);
    b.setInsertionPointToEnd(entry);
  }
  for (size_t k = 0; k < outs.size(); ++k)
    mlir::bufferization::MaterializeInDestinationOp::create(b, loc, mlir::Type(), results[k],
                                                            outViews[k], true, true);
  mlir::func::ReturnOp::create(b, loc);
  return mlir::success(ok);
}

/// func @k<i>(inputs..., outputs..., lo, hi): one elementwise group over rows [lo, hi) of its
/// shape, as one linalg.generic (buildGenericKernel); a group that is not one fails (the
/// interpreter runs its nodes).
mlir::LogicalResult buildKernel(mlir::OpBuilder& b, mlir::ModuleOp module, const ir::Graph& g,
                                const ir::FusionGroup& grp, const std::string& name) {
  mlir::Location loc = b.getUnknownLoc();
  auto [entry, lo, hi] = declareKernel(b, module, g, grp, name);
  if (!isGenericKernel(g, grp)) return mlir::failure();
  return buildGenericKernel(b, loc, g, grp, entry, lo, hi);
}

/// Rows summed in blocks of this many elements in the element type, the blocks added in double
/// (as the eager sum does).
constexpr int64_t kSumBlock = 1024;

/// A row kernel (passes::isRowKernel): loops over the rows (all dims but the last, dim 0 over
/// [lo, hi)), and per row one pass along it per stage (passes::rowStages), each pass one
/// linalg.generic on tensors over the row (a 1-D strided view of each operand and output; a
/// reduction when the pass accumulates). Pass s computes the full-shape values of stage s that
/// an output or a reduction of stage s + 1 needs, recomputing the earlier-stage values they read
/// (elementwise, cheaper than storing them), accumulates those reductions into 0-d tensors (sums:
/// in the element type, reassociated so LLVM vectorizes them, blocks of kSumBlock added in double;
/// amax/amin: NaN-propagating) and yields those outputs. Values of the reduced shape are computed
/// once per row, between the passes, from the accumulators; they are stored at the end. Column
/// sums (ColumnSums) add their operands up in the last pass's generic.
mlir::LogicalResult buildRowKernel(mlir::OpBuilder& b, mlir::ModuleOp module, const ir::Graph& g,
                                   const ir::FusionGroup& grp, const std::string& name) {
  mlir::Location loc = b.getUnknownLoc();
  auto [entry, lo, hi] = declareKernel(b, module, g, grp, name);
  const Shape& shape = grp.shape;
  const size_t rank = shape.size();
  const size_t numIn = grp.inputs.size(), numOut = grp.outputs.size();
  if (rank < 2) return mlir::failure();
  const int64_t len = shape.back();
  Shape reduced = shape;
  reduced.back() = 1;

  // What computes each value: a node of the group or a leaf, or an input (its position).
  const std::vector<int32_t> stages = passes::rowStages(g, grp);
  const int32_t lastPass = passes::lastRowPass(g, grp, stages);
  const std::optional<ColumnSums> columns = ColumnSums::of(g, grp);
  if (!columns) return mlir::failure();
  std::vector<bool> columnOutput(grp.outputs.size(), false);
  for (const auto& [k, n] : columns->sums)
    columnOutput[k] = true;
  std::map<ValueId, const ir::Node*> nodeOf;
  std::map<ValueId, int32_t> stageOf;
  std::map<ValueId, size_t> inputOf;
  for (size_t j = 0; j < grp.nodes.size(); ++j) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(grp.nodes[j])];
    if (passes::isColumnReduction(g, n)) continue; // added up in the last pass
    if (g.type(n.result).shape != shape && g.type(n.result).shape != reduced)
      return mlir::failure();
    nodeOf[n.result] = &n;
    stageOf[n.result] = stages[j];
  }
  for (int32_t i : grp.leaves)
    nodeOf[g.nodes()[static_cast<size_t>(i)].result] = &g.nodes()[static_cast<size_t>(i)];
  for (size_t i = 0; i < numIn; ++i)
    inputOf[grp.inputs[i]] = i;
  auto isFull = [&](ValueId v) { return g.type(v).shape == shape; };
  for (size_t k = 0; k < grp.inPlace.size() && k < numOut; ++k) // read and written in one place
    if (const int32_t over = grp.inPlace[k];
        over >= 0 &&
        (static_cast<size_t>(over) >= numIn ||
         g.type(grp.inputs[static_cast<size_t>(over)]).shape != g.type(grp.outputs[k]).shape))
      return mlir::failure();

  // The generics' operands along the row: each input that varies along it (its stride there not
  // 0) and each view leaf, with where index (outer..., j) of the row lies in its memref.
  struct AlongRow {
    ValueId value;
    DType dtype;
    unsigned arg;                 ///< the entry block argument it is read from
    std::vector<int64_t> strides; ///< per dim of the group's shape
    int64_t offset = 0;
    int32_t input = -1; ///< its index among the inputs (-1: a view leaf)
  };
  std::vector<AlongRow> alongRow;
  for (size_t i = 0; i < numIn; ++i) {
    ValueId v = grp.inputs[i];
    if (!broadcastsTo(g.type(v).shape, shape)) continue; // read only through a view leaf
    std::vector<int64_t> strides = broadcastStrides(g.type(v).shape, shape);
    if (strides.back() != 0)
      alongRow.push_back(
          {v, g.type(v).dtype, static_cast<unsigned>(i), strides, 0, static_cast<int32_t>(i)});
  }
  for (int32_t i : grp.leaves) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!passes::isViewLeaf(g, n)) continue;
    std::optional<ViewRead> read = viewRead(g, n, shape); // one operand, if any
    if (!read) return mlir::failure();
    auto in = std::find(grp.inputs.begin(), grp.inputs.end(), n.operands[0]);
    if (in == grp.inputs.end()) return mlir::failure();
    alongRow.push_back({n.result, g.type(n.result).dtype,
                        static_cast<unsigned>(in - grp.inputs.begin()), read->strides, read->offset,
                        -1});
  }
  // Accumulators live in stack slots at the function's entry (one per reduction and NaN flag of
  // each pass), which LLVM promotes to registers.
  mlir::OpBuilder slots(b.getContext());

  bool ok = true;
  auto rowBody = [&](mlir::OpBuilder& rb, std::vector<mlir::Value>& outer) {
    mlir::Value zero = mlir::arith::ConstantIndexOp::create(rb, loc, 0);
    // Per scope (the row, or one pass's generic body) the values computed there; a body's scope
    // starts as a copy of the row's.
    using Scope = std::map<ValueId, mlir::Value>;
    Scope row;
    // `v` in `scope`, computed where the builder is: `along` the row (in a generic's body, where
    // the operands along the row are in scope), or once for the whole row.
    std::function<mlir::Value(mlir::OpBuilder&, Scope&, bool, ValueId)> eval =
        [&](mlir::OpBuilder& ob, Scope& scope, bool along, ValueId v) -> mlir::Value {
      if (auto it = scope.find(v); it != scope.end()) return it->second;
      mlir::Value r;
      if (auto in = inputOf.find(v); in != inputOf.end()) {
        if (!broadcastsTo(g.type(v).shape, shape)) return {}; // read only through a view leaf
        std::vector<int64_t> strides = broadcastStrides(g.type(v).shape, shape);
        if (strides.back() != 0) return {}; // varies along the row: a generic's operand
        std::vector<mlir::Value> ivs = outer;
        ivs.push_back(zero);
        r = loadElement(ob, loc, entry->getArgument(static_cast<unsigned>(in->second)),
                        linearIndex(ob, loc, ivs, strides), g.type(v).dtype);
      } else if (auto node = nodeOf.find(v); node != nodeOf.end()) {
        const ir::Node& n = *node->second;
        if (passes::isRowReduction(g, n)) return {}; // known only after its pass (in `row`)
        if (!along && isFull(v)) return {};          // varies along the row
        if (passes::isViewLeaf(g, n)) {
          if (along) return {};                 // a generic's operand, in scope there
          std::vector<mlir::Value> ivs = outer; // a reduced-shape leaf: once per row
          ivs.push_back(zero);
          r = loadViewLeaf(ob, loc, g, grp, entry, n, ivs, shape);
          if (r) scope[v] = r;
          return r;
        }
        std::vector<mlir::Value> in;
        for (ValueId o : n.operands) {
          in.push_back(eval(ob, scope, along, o));
          if (!in.back()) return {};
        }
        r = BodyBuilder(ob, loc, g).node(n, in);
      }
      if (r) scope[v] = r;
      return r;
    };
    // Values of the whole row: the inputs that do not vary along it, and the reduced-shape
    // nodes whose reductions are known (stage <= s), in order.
    for (ValueId v : grp.inputs)
      if (broadcastsTo(g.type(v).shape, shape) &&
          broadcastStrides(g.type(v).shape, shape).back() == 0 && !eval(rb, row, false, v))
        ok = false;
    auto computeRowValues = [&](int32_t s) {
      for (size_t j = 0; j < grp.nodes.size(); ++j) {
        const ir::Node& n = g.nodes()[static_cast<size_t>(grp.nodes[j])];
        if (stages[j] <= s && !isFull(n.result) && !passes::isRowReduction(g, n) &&
            !passes::isColumnReduction(g, n) && !eval(rb, row, false, n.result))
          ok = false;
      }
    };
    for (int32_t pass = 0; ok && pass <= lastPass; ++pass) {
      computeRowValues(pass);
      std::vector<const ir::Node*> reductions;
      std::vector<size_t> stored; // outputs of this pass
      for (size_t j = 0; j < grp.nodes.size(); ++j) {
        const ir::Node& n = g.nodes()[static_cast<size_t>(grp.nodes[j])];
        if (passes::isRowReduction(g, n) && stages[j] == pass + 1) reductions.push_back(&n);
      }
      for (size_t k = 0; k < numOut; ++k) {
        auto it = stageOf.find(grp.outputs[k]);
        if (isFull(grp.outputs[k]) && it != stageOf.end() && it->second == pass)
          stored.push_back(k);
      }
      const bool addColumns = pass == lastPass && !columns->sums.empty();
      if (reductions.empty() && stored.empty() && !addColumns) continue;
      // Each reduction's accumulator: its type, its start, and how an element joins it. An
      // extremum also carries whether it saw a NaN (slot flagOf[r] after the accumulators): its
      // max/min assumes none (nnan, nsz), so LLVM vectorizes it, and a NaN seen makes the result
      // NaN. That holds while nothing reads the accumulator before that select (a NaN makes it
      // poison, which the select never picks) and the flag's compare carries no fast-math flag.
      // The sign of a zero extremum may differ from eager's (-0 and +0 compare equal).
      std::vector<mlir::Value> inits;
      std::vector<size_t> flagOf(reductions.size(), 0);
      for (const ir::Node* n : reductions) {
        DType t = g.type(n->result).dtype;
        const double start = n->op == OpCode::Sum    ? 0.0
                             : n->op == OpCode::AMax ? -std::numeric_limits<double>::infinity()
                                                     : std::numeric_limits<double>::infinity();
        inits.push_back(BodyBuilder(rb, loc, g).constantFloat(t, start));
      }
      for (size_t r = 0; r < reductions.size(); ++r)
        if (reductions[r]->op != OpCode::Sum) {
          flagOf[r] = inits.size();
          inits.push_back(BodyBuilder(rb, loc, g).constantFloat(DType::Bool, 0.0));
        }
      std::vector<mlir::Value> accSlots;
      for (mlir::Value init : inits) {
        slots.setInsertionPointToStart(entry); // before the row loops, whenever they were built
        accSlots.push_back(
            mlir::memref::AllocaOp::create(slots, loc, mlir::MemRefType::get({}, init.getType())));
      }
      auto combine = [&](mlir::OpBuilder& ob, const ir::Node& n, mlir::Value acc, mlir::Value x) {
        if (n.op == OpCode::Sum) {
          auto add = mlir::arith::AddFOp::create(ob, loc, acc, x);
          add.setFastmath(mlir::arith::FastMathFlags::reassoc);
          return mlir::Value(add);
        }
        const auto noNaN = mlir::arith::FastMathFlags::nnan | mlir::arith::FastMathFlags::nsz;
        if (n.op == OpCode::AMax) {
          auto max = mlir::arith::MaxNumFOp::create(ob, loc, acc, x);
          max.setFastmath(noNaN);
          return mlir::Value(max);
        }
        auto min = mlir::arith::MinNumFOp::create(ob, loc, acc, x);
        min.setFastmath(noNaN);
        return mlir::Value(min);
      };
      auto sawNaN = [&](mlir::OpBuilder& ob, mlir::Value flag, mlir::Value x) {
        return mlir::Value(mlir::arith::OrIOp::create(
            ob, loc, flag,
            mlir::arith::CmpFOp::create(ob, loc, mlir::arith::CmpFPredicate::UNO, x, x)));
      };
      // The inputs an output of this pass is written over: read from that output's operand.
      std::vector<int32_t> writtenBy(numIn, -1);
      for (size_t s = 0; s < stored.size(); ++s)
        if (int32_t over = stored[s] < grp.inPlace.size() ? grp.inPlace[stored[s]] : -1; over >= 0)
          writtenBy[static_cast<size_t>(over)] = static_cast<int32_t>(s);
      // One linalg.generic over elements [from, from + size) of the row (`size` a constant where
      // `fixed`), its accumulators starting at `start`: reads the operands along the row, computes
      // the values its reductions, outputs and column sums need, and yields the accumulators
      // joined with this element's, the outputs, and the column sums plus this element's.
      // Returns the accumulators after it.
      auto passGeneric = [&](mlir::OpBuilder& ob, mlir::Value from, mlir::Value size,
                             std::optional<int64_t> fixed, const std::vector<mlir::Value>& start) {
        mlir::MLIRContext* ctx = ob.getContext();
        const int64_t extent = fixed.value_or(mlir::ShapedType::kDynamic);
        mlir::OpFoldResult length = fixed ? mlir::OpFoldResult(ob.getIndexAttr(*fixed)) : size;
        // Memref `m` from `at` along the row with `stride`, as a tensor.
        auto rowView = [&](mlir::Value m, mlir::Value at, int64_t stride, DType t, bool write,
                           std::vector<mlir::Value>* views) {
          auto layout = mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, {stride});
          auto type = mlir::MemRefType::get({extent}, memoryType(ob, t), layout);
          mlir::Value view = mlir::memref::ReinterpretCastOp::create(
              ob, loc, type, m, mlir::OpFoldResult(at),
              llvm::SmallVector<mlir::OpFoldResult>{length},
              llvm::SmallVector<mlir::OpFoldResult>{ob.getIndexAttr(stride)});
          if (views) views->push_back(view);
          return mlir::Value(mlir::bufferization::ToTensorOp::create(
              ob, loc, mlir::RankedTensorType::get({extent}, memoryType(ob, t)), view, true,
              write));
        };
        std::vector<mlir::Value> ivs = outer;
        ivs.push_back(from);
        std::vector<mlir::Value> ins, outs, destinations;
        std::vector<const AlongRow*> inOf;
        for (const AlongRow& a : alongRow) {
          if (a.input >= 0 && writtenBy[static_cast<size_t>(a.input)] >= 0) continue;
          mlir::Value at =
              mlir::arith::AddIOp::create(ob, loc, linearIndex(ob, loc, ivs, a.strides),
                                          mlir::arith::ConstantIndexOp::create(ob, loc, a.offset));
          ins.push_back(
              rowView(entry->getArgument(a.arg), at, a.strides.back(), a.dtype, false, nullptr));
          inOf.push_back(&a);
        }
        for (size_t r = 0; r < accSlots.size(); ++r) {
          mlir::memref::StoreOp::create(ob, loc, start[r], accSlots[r], mlir::ValueRange{});
          outs.push_back(mlir::bufferization::ToTensorOp::create(
              ob, loc, mlir::RankedTensorType::get({}, start[r].getType()), accSlots[r], true,
              true));
          destinations.push_back(accSlots[r]);
        }
        mlir::Value at = linearIndex(ob, loc, ivs, contiguousStrides(shape));
        for (size_t k : stored) {
          const int32_t over = k < grp.inPlace.size() ? grp.inPlace[k] : -1;
          auto arg = static_cast<unsigned>(over >= 0 ? over : static_cast<int32_t>(numIn + k));
          outs.push_back(rowView(entry->getArgument(arg), at, 1, g.type(grp.outputs[k]).dtype, true,
                                 &destinations));
        }
        if (addColumns) {
          mlir::Value columnAt = mlir::arith::AddIOp::create(
              ob, loc,
              mlir::arith::MulIOp::create(ob, loc, outer[0],
                                          mlir::arith::ConstantIndexOp::create(ob, loc, len)),
              from);
          for (const auto& [k, n] : columns->sums)
            outs.push_back(rowView(ColumnSums::memref(grp, entry, k), columnAt, 1,
                                   g.type(n->result).dtype, true, &destinations));
        }
        const size_t accBase = ins.size(), storedBase = accBase + accSlots.size(),
                     columnBase = storedBase + stored.size();
        std::vector<mlir::AffineMap> maps(ins.size(), ob.getMultiDimIdentityMap(1));
        maps.insert(maps.end(), accSlots.size(), mlir::AffineMap::get(1, 0, ctx));
        maps.insert(maps.end(), outs.size() - accSlots.size(), ob.getMultiDimIdentityMap(1));
        std::vector<mlir::Type> resultTypes;
        for (mlir::Value o : outs)
          resultTypes.push_back(o.getType());
        auto generic = mlir::linalg::GenericOp::create(
            ob, loc, resultTypes, ins, outs, maps,
            {reductions.empty() ? mlir::utils::IteratorType::parallel
                                : mlir::utils::IteratorType::reduction},
            [&](mlir::OpBuilder& nb, mlir::Location, mlir::ValueRange args) {
              Scope scope = row;
              for (size_t j = 0; j < ins.size(); ++j)
                scope[inOf[j]->value] = fromMemory(nb, loc, args[j], inOf[j]->dtype);
              for (size_t i = 0; i < numIn; ++i)
                if (writtenBy[i] >= 0)
                  scope[grp.inputs[i]] =
                      fromMemory(nb, loc, args[storedBase + static_cast<size_t>(writtenBy[i])],
                                 g.type(grp.inputs[i]).dtype);
              std::vector<mlir::Value> yields(args.begin() + static_cast<std::ptrdiff_t>(accBase),
                                              args.end());
              bool bodyOk = true;
              for (size_t r = 0; r < reductions.size(); ++r) {
                mlir::Value x = eval(nb, scope, true, reductions[r]->operands[0]);
                if (!x) {
                  bodyOk = false;
                  break;
                }
                yields[r] = combine(nb, *reductions[r], args[accBase + r], x);
                if (reductions[r]->op != OpCode::Sum)
                  yields[flagOf[r]] = sawNaN(nb, args[accBase + flagOf[r]], x);
              }
              for (size_t s = 0; bodyOk && s < stored.size(); ++s) {
                mlir::Value x = eval(nb, scope, true, grp.outputs[stored[s]]);
                bodyOk = static_cast<bool>(x);
                if (x)
                  yields[storedBase - accBase + s] =
                      toMemory(nb, loc, x, g.type(grp.outputs[stored[s]]).dtype);
              }
              for (size_t c = 0; bodyOk && addColumns && c < columns->sums.size(); ++c) {
                mlir::Value x = eval(nb, scope, true, columns->sums[c].second->operands[0]);
                bodyOk = static_cast<bool>(x);
                if (x)
                  yields[columnBase - accBase + c] =
                      mlir::arith::AddFOp::create(nb, loc, args[columnBase + c], x);
              }
              if (!bodyOk) { // the kernel fails; the body only has to verify
                ok = false;
                yields.assign(args.begin() + static_cast<std::ptrdiff_t>(accBase), args.end());
              }
              mlir::linalg::YieldOp::create(nb, loc, yields);
            });
        std::vector<mlir::Value> after;
        for (size_t o = 0; o < outs.size(); ++o)
          mlir::bufferization::MaterializeInDestinationOp::create(
              ob, loc, mlir::Type(), generic->getResult(static_cast<unsigned>(o)), destinations[o],
              true, true);
        for (mlir::Value slot : accSlots)
          after.push_back(mlir::memref::LoadOp::create(ob, loc, slot, mlir::ValueRange{}));
        return after;
      };
      std::vector<mlir::Value> results;
      if (len <= kSumBlock) {
        results = passGeneric(rb, zero, {}, len, inits);
      } else {
        // Blocks of kSumBlock: sums restart at 0 in each and are added in double after it.
        std::vector<mlir::Value> outerInits = inits;
        for (size_t r = 0; r < reductions.size(); ++r)
          if (reductions[r]->op == OpCode::Sum)
            outerInits[r] = BodyBuilder(rb, loc, g).constantFloat(DType::Float64, 0.0);
        mlir::Value end = mlir::arith::ConstantIndexOp::create(rb, loc, len);
        mlir::Value block = mlir::arith::ConstantIndexOp::create(rb, loc, kSumBlock);
        auto blocks = mlir::scf::ForOp::create(
            rb, loc, zero, end, block, outerInits,
            [&](mlir::OpBuilder& bb, mlir::Location, mlir::Value from, mlir::ValueRange accs) {
              mlir::Value to = mlir::arith::MinSIOp::create(
                  bb, loc, mlir::arith::AddIOp::create(bb, loc, from, block), end);
              std::vector<mlir::Value> start(accs.begin(), accs.end());
              for (size_t r = 0; r < reductions.size(); ++r)
                if (reductions[r]->op == OpCode::Sum) start[r] = inits[r];
              std::vector<mlir::Value> next = passGeneric(
                  bb, from, mlir::arith::SubIOp::create(bb, loc, to, from), std::nullopt, start);
              for (size_t r = 0; r < reductions.size(); ++r) {
                if (reductions[r]->op != OpCode::Sum) continue;
                BodyBuilder conv(bb, loc, g);
                next[r] = mlir::arith::AddFOp::create(
                    bb, loc, accs[r],
                    conv.convert(next[r], g.type(reductions[r]->result).dtype, DType::Float64));
              }
              mlir::scf::YieldOp::create(bb, loc, next);
            });
        results.assign(blocks.getResults().begin(), blocks.getResults().end());
        for (size_t r = 0; r < reductions.size(); ++r)
          if (reductions[r]->op == OpCode::Sum)
            results[r] =
                BodyBuilder(rb, loc, g)
                    .convert(results[r], DType::Float64, g.type(reductions[r]->result).dtype);
      }
      for (size_t r = 0; r < reductions.size(); ++r)
        if (reductions[r]->op != OpCode::Sum) // NaN if one was seen
          results[r] = mlir::arith::SelectOp::create(
              rb, loc, results[flagOf[r]],
              BodyBuilder(rb, loc, g)
                  .constantFloat(g.type(reductions[r]->result).dtype,
                                 std::numeric_limits<double>::quiet_NaN()),
              results[r]);
      for (size_t r = 0; r < reductions.size(); ++r)
        row[reductions[r]->result] = results[r];
    }
    if (!ok) return;
    // The reduced-shape outputs, once per row.
    computeRowValues(lastPass + 1);
    std::vector<mlir::Value> ivs = outer;
    ivs.push_back(zero);
    mlir::Value at = linearIndex(rb, loc, ivs, contiguousStrides(reduced));
    for (size_t k = 0; ok && k < numOut; ++k) {
      if (isFull(grp.outputs[k]) || columnOutput[k]) continue;
      mlir::Value r = eval(rb, row, false, grp.outputs[k]);
      if (!r) {
        ok = false;
        return;
      }
      storeOutput(rb, loc, entry, grp, k, r, at, g.type(grp.outputs[k]).dtype);
    }
  };
  if (columns->sums.empty()) {
    loopNest(b, loc, shape, rank - 1, lo, hi, rowBody);
  } else { // per index of dim 0, its sums' rows zeroed before its rows
    loopNest(b, loc, shape, 1, lo, hi, [&](mlir::OpBuilder& ob, std::vector<mlir::Value>& outer) {
      columns->zeroRow(ob, loc, g, grp, entry, outer[0]);
      loopNest(ob, loc, shape, rank - 1, lo, hi, rowBody, outer);
    });
  }
  mlir::func::ReturnOp::create(b, loc);
  return mlir::success(ok);
}

/// The module of one group's kernel, as function "kernel".
mlir::OwningOpRef<mlir::ModuleOp> kernelModule(mlir::MLIRContext& ctx, const ir::Graph& g,
                                               const ir::FusionGroup& grp,
                                               const CpuTarget& target) {
  mlir::OpBuilder b(&ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(b.getUnknownLoc());
  if (passes::matmulRoot(g, grp) != nullptr) {
    if (mlir::failed(buildMatmulKernel(b, *module, g, grp, "kernel", target))) return {};
    return module;
  }
  auto build = !grp.parts.empty()            ? &buildPartsKernel
               : passes::isRowKernel(g, grp) ? &buildRowKernel
                                             : &buildKernel;
  if (mlir::failed(build(b, *module, g, grp, "kernel"))) return {};
  return module;
}

/// Whether a value `grp` reads or computes is of dtype `t`.
bool usesDType(const ir::Graph& g, const ir::FusionGroup& grp, DType t) {
  auto is = [&](ValueId v) { return g.type(v).dtype == t; };
  auto computes = [&](int32_t i) { return is(g.nodes()[static_cast<size_t>(i)].result); };
  return std::any_of(grp.inputs.begin(), grp.inputs.end(), is) ||
         std::any_of(grp.nodes.begin(), grp.nodes.end(), computes) ||
         std::any_of(grp.leaves.begin(), grp.leaves.end(), computes);
}

} // namespace

ir::Result<GroupKernels> compileElementwise(const ir::Graph& g,
                                            std::span<const ir::FusionGroup> groups,
                                            const CpuTarget& target) {
  GroupKernels result;
  result.kernelOf.assign(groups.size(), -1);
  result.failures.assign(groups.size(), "");
  if (groups.empty()) return result;
  // Each kernel's key and symbol; the distinct kernels, from the disk cache or compiled in
  // parallel (each in its own context).
  const GroupKeys named = keysOf(g, groups, target.codeTarget());
  const std::vector<std::string>& keys = named.keys;
  const std::vector<std::string>& symbols = named.symbols;
  const std::vector<size_t>& distinct = named.distinct;
  if (distinct.empty()) return result;
  // The linked set, when these kernels were linked before: no objects to read, no link. (The
  // version in the key changes with how kernels are linked, e.g. what linkSharedObject adds.)
  auto linkedKeyOf = [&](const std::vector<size_t>& kernels) {
    std::string key = "weft-linked 1\n" + target.codeTarget() + "\n";
    for (size_t i : kernels)
      key += symbols[i] + "\n";
    return key;
  };
  std::optional<std::vector<uint8_t>> linked =
      readCachedLinked(linkedKeyOf(distinct), static_cast<int64_t>(distinct.size()));
  std::vector<size_t> built = distinct; // the kernels in the linked set
  if (!linked) {
    std::vector<std::vector<uint8_t>> objects(distinct.size());
    std::vector<size_t> missing;
    for (size_t i = 0; i < objects.size(); ++i) {
      if (auto cached = readCachedKernel(keys[distinct[i]]))
        objects[i] = std::move(*cached);
      else
        missing.push_back(i);
    }
    std::vector<std::string> errors(distinct.size());
    // Each thread takes the next kernel left when it is done with one: kernels take from a few
    // milliseconds to a few hundred (GEMMs), so fixed shares of them would leave threads idle.
    std::atomic<size_t> next{0};
    const auto workers = std::min<int64_t>(getNumThreads(), static_cast<int64_t>(missing.size()));
    parallelFor(workers, 1, [&](int64_t, int64_t) {
      for (size_t m; (m = next.fetch_add(1)) < missing.size();) {
        size_t i = missing[m], k = distinct[i];
        if (usesDType(g, groups[k], DType::Float16) &&
            target.features.find("+f16c") == std::string::npos) {
          errors[i] = "float16 needs the F16C instructions, which target '" + target.cpu +
                      "' lacks (without them LLVM calls runtime functions kernels cannot link)";
          continue;
        }
        std::unique_ptr<mlir::MLIRContext> ctx = newContext();
        mlir::OwningOpRef<mlir::ModuleOp> module = kernelModule(*ctx, g, groups[k], target);
        if (!module) {
          errors[i] = cannotLower(g, groups[k]);
          continue;
        }
        KernelEntry entry{"kernel", symbols[k]};
        auto object = compileToObject(*module, target, std::span(&entry, 1));
        if (!object) {
          errors[i] = object.diagnostic().message;
          continue;
        }
        objects[i] = std::move(object.value());
        writeCachedKernel(keys[k], objects[i]);
      }
    });
    // A kernel LLVM failed on leaves its groups to the interpreter; the others link.
    built.clear();
    std::vector<std::vector<uint8_t>> builtObjects;
    for (size_t i = 0; i < distinct.size(); ++i) {
      if (!errors[i].empty()) {
        for (size_t k = 0; k < groups.size(); ++k)
          if (symbols[k] == symbols[distinct[i]]) result.failures[k] = errors[i];
        continue;
      }
      built.push_back(distinct[i]);
      builtObjects.push_back(std::move(objects[i]));
    }
    if (built.empty()) return result;
    auto shared = linkSharedObject(builtObjects);
    if (!shared) return shared.diagnostic();
    writeCachedLinked(linkedKeyOf(built), shared.value());
    linked = std::move(shared.value());
  }
  if (built.empty()) return result;
  result.table.code = {
      hal::CodeObject{"elf-shared-object", target.codeTarget(), std::move(*linked), {}}};
  for (size_t k = 0; k < groups.size(); ++k) {
    if (!result.failures[k].empty()) continue;
    result.kernelOf[k] = static_cast<int32_t>(result.table.kernels.size());
    if (const ir::Node* mm = passes::matmulRoot(g, groups[k])) {
      // Row tiles; each launch packs B again, so a thread takes at least 2^19 multiply-adds.
      const int64_t tiles = matmulRowTiles(g, *mm, target);
      const int64_t work = numel(g.type(mm->operands[0]).shape) / tiles * groups[k].shape.back();
      result.table.kernels.push_back(
          hal::KernelInfo{symbols[k], tiles, std::max<int64_t>(1, (int64_t{1} << 19) / work)});
      continue;
    }
    const Shape& s = groups[k].shape;
    int64_t rows = s.empty() ? 1 : s[0];
    int64_t rowSize = s.empty() ? 1 : numel(s) / std::max<int64_t>(s[0], 1);
    // About 64K elements per chunk keep the threads busy without splitting small tensors.
    int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(rowSize, 1));
    result.table.kernels.push_back(hal::KernelInfo{symbols[k], rows, grain});
  }
  return result;
}

} // namespace weft::codegen
