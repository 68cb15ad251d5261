// A generated kernel's arguments: the function with its flat memrefs and row bounds, and loading
// and storing one element of them. Shared by the kernel builders (Elementwise.cpp,
// MatmulKernel.h); included only by Elementwise.cpp.
#pragma once

#include "KernelBody.h"
#include "weft/ir/Graph.h"
#include "weft/runtime/View.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace weft::codegen {

/// Strides (in elements) to read a contiguous value of `shape` at each index of `out`: the
/// shapes right-aligned, 0 where `shape` broadcasts.
inline std::vector<int64_t> broadcastStrides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  Shape cs = contiguousStrides(shape);
  size_t offset = out.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1) strides[offset + d] = cs[d];
  return strides;
}

/// Whether a value of `shape` broadcasts to `out` (right-aligned, 1 or equal per dim): a kernel
/// computing at `out` reads it at broadcastStrides. An input that does not is read only through
/// view leaves (viewRead).
inline bool broadcastsTo(const Shape& shape, const Shape& out) {
  if (shape.size() > out.size()) return false;
  const size_t offset = out.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && shape[d] != out[offset + d]) return false;
  return true;
}

/// Where a kernel reads a view leaf's operand (passes::isViewLeaf), at each index of `over` (the
/// shape it is read at, of the view's rank, to which the view's shape broadcasts): a stride per
/// dim in the operand's row-major memory (0 where the view broadcasts) and the view's offset.
struct ViewRead {
  std::vector<int64_t> strides;
  int64_t offset = 0;
};
inline std::optional<ViewRead> viewRead(const ir::Graph& g, const ir::Node& leaf,
                                        const Shape& over) {
  if (leaf.operands.size() != 1) return std::nullopt; // codegen never throws: no .at()
  const Shape& in = g.type(leaf.operands[0]).shape;
  std::optional<ViewGeometry> view = computeView(leaf.op, in, contiguousStrides(in), leaf.attrs);
  if (!view || view->shape.size() != over.size()) return std::nullopt;
  ViewRead r{std::vector<int64_t>(over.size(), 0), view->offset};
  for (size_t d = 0; d < over.size(); ++d) {
    if (view->shape[d] == over[d])
      r.strides[d] = view->strides[d];
    else if (view->shape[d] != 1)
      return std::nullopt;
  }
  return r;
}

/// A kernel function being built: its entry block and the bounds of its outer loop.
struct KernelFunction {
  mlir::Block* entry;
  mlir::Value lo, hi;
};

/// The function of one group's kernel: func @name(inputs..., outputs..., lo, hi), each a flat
/// memref, its entry block the insertion point of `b`.
inline KernelFunction declareKernel(mlir::OpBuilder& b, mlir::ModuleOp module, const ir::Graph& g,
                                    const ir::FusionGroup& grp, const std::string& name) {
  mlir::Location loc = b.getUnknownLoc();
  b.setInsertionPointToEnd(module.getBody());
  std::vector<mlir::Type> argTypes;
  auto flat = [&](ir::ValueId v) {
    return mlir::MemRefType::get({numel(g.type(v).shape)}, memoryType(b, g.type(v).dtype));
  };
  for (ir::ValueId v : grp.inputs)
    argTypes.push_back(flat(v));
  for (ir::ValueId v : grp.outputs)
    argTypes.push_back(flat(v));
  argTypes.push_back(b.getIndexType());
  argTypes.push_back(b.getIndexType());
  auto fn = mlir::func::FuncOp::create(b, loc, name, b.getFunctionType(argTypes, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  mlir::Block* entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  const auto bounds = static_cast<unsigned>(grp.inputs.size() + grp.outputs.size());
  return {entry, entry->getArgument(bounds), entry->getArgument(bounds + 1)};
}

/// The linear index of `ivs` (one per dim) with element `strides` (0: broadcast).
inline mlir::Value linearIndex(mlir::OpBuilder& b, mlir::Location loc,
                               const std::vector<mlir::Value>& ivs, const Shape& strides) {
  mlir::Value idx = mlir::arith::ConstantIndexOp::create(b, loc, 0);
  for (size_t d = 0; d < strides.size(); ++d) {
    if (strides[d] == 0) continue;
    mlir::Value s = mlir::arith::ConstantIndexOp::create(b, loc, strides[d]);
    idx = mlir::arith::AddIOp::create(b, loc, idx, mlir::arith::MulIOp::create(b, loc, ivs[d], s));
  }
  return idx;
}

/// An element of `dtype` as held in memory (memoryType) in a register as kernels compute with it
/// (bool: i8 in memory, i1 here; 16-bit floats as f32).
inline mlir::Value fromMemory(mlir::OpBuilder& b, mlir::Location loc, mlir::Value x, DType dtype) {
  if (dtype == DType::Bool)
    x = mlir::arith::CmpIOp::create(
        b, loc, mlir::arith::CmpIPredicate::ne, x,
        mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI8Type(), 0)));
  if (dtype == DType::Float16) x = mlir::arith::ExtFOp::create(b, loc, b.getF32Type(), x);
  if (dtype == DType::BFloat16) { // the upper half of a float
    mlir::Value wide = mlir::arith::ExtUIOp::create(b, loc, b.getI32Type(), x);
    x = mlir::arith::BitcastOp::create(
        b, loc, b.getF32Type(),
        mlir::arith::ShLIOp::create(
            b, loc, wide,
            mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI32Type(), 16))));
  }
  return x;
}

/// Loads element `at` of `memref` holding `dtype` into a register (fromMemory).
inline mlir::Value loadElement(mlir::OpBuilder& b, mlir::Location loc, mlir::Value memref,
                               mlir::Value at, DType dtype) {
  return fromMemory(b, loc, mlir::memref::LoadOp::create(b, loc, memref, mlir::ValueRange{at}),
                    dtype);
}

/// A register value of `dtype` as memory holds it (the inverse of fromMemory).
inline mlir::Value toMemory(mlir::OpBuilder& b, mlir::Location loc, mlir::Value r, DType dtype) {
  if (dtype == DType::Bool) r = mlir::arith::ExtUIOp::create(b, loc, b.getI8Type(), r);
  // 16-bit floats: `r` is already rounded to its type (BodyBuilder::node), so these are exact.
  if (dtype == DType::Float16) r = mlir::arith::TruncFOp::create(b, loc, b.getF16Type(), r);
  if (dtype == DType::BFloat16)
    r = mlir::arith::TruncIOp::create(
        b, loc, b.getI16Type(),
        mlir::arith::ShRUIOp::create(
            b, loc, mlir::arith::BitcastOp::create(b, loc, b.getI32Type(), r),
            mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(b.getI32Type(), 16))));
  return r;
}

/// The value of view leaf `leaf` of `grp` (passes::isViewLeaf) at index `ivs` of `over`: its
/// operand, an input of the group, loaded where the view puts that index (viewRead). Null where
/// the operand is not an input or the view does not fit `over`.
inline mlir::Value loadViewLeaf(mlir::OpBuilder& b, mlir::Location loc, const ir::Graph& g,
                                const ir::FusionGroup& grp, mlir::Block* entry,
                                const ir::Node& leaf, const std::vector<mlir::Value>& ivs,
                                const Shape& over) {
  std::optional<ViewRead> read = viewRead(g, leaf, over);
  if (!read || ivs.size() != over.size()) return {};
  auto in = std::find(grp.inputs.begin(), grp.inputs.end(), leaf.operands[0]);
  if (in == grp.inputs.end()) return {};
  mlir::Value at =
      mlir::arith::AddIOp::create(b, loc, linearIndex(b, loc, ivs, read->strides),
                                  mlir::arith::ConstantIndexOp::create(b, loc, read->offset));
  return loadElement(b, loc, entry->getArgument(static_cast<unsigned>(in - grp.inputs.begin())), at,
                     g.type(leaf.result).dtype);
}

/// Stores output k of `grp` at `at`: through the memref of the input it is written over, if any
/// (the same address as that input's load, so LLVM vectorizes without a runtime overlap check
/// failing on it), else through its own.
inline void storeOutput(mlir::OpBuilder& b, mlir::Location loc, mlir::Block* entry,
                        const ir::FusionGroup& grp, size_t k, mlir::Value r, mlir::Value at,
                        DType dtype) {
  r = toMemory(b, loc, r, dtype);
  int32_t over = k < grp.inPlace.size() ? grp.inPlace[k] : -1;
  auto arg = static_cast<unsigned>(over >= 0 ? over : static_cast<int32_t>(grp.inputs.size() + k));
  mlir::memref::StoreOp::create(b, loc, r, entry->getArgument(arg), mlir::ValueRange{at});
}

} // namespace weft::codegen
