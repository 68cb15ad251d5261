// A horizontal kernel: an optimizer's update over many parameters (FusionGroup::parts) as one
// launch, one linalg.generic per part. Included only by Elementwise.cpp (one MLIR translation unit
// less to compile), whose kernels it shares the ABI and the body builder with.
#pragma once

#include "KernelBody.h"
#include "KernelIO.h"
#include "weft/ir/Graph.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace weft::codegen {

/// A horizontal kernel (FusionGroup::parts): its index space is the parts' elements one after
/// another, [lo, hi) a range of it. Per part, one linalg.generic on tensors over the elements of
/// that range it holds: each input the part reads a 1-D view of its memref there (a value of one
/// element at stride 0), each output likewise (or the view of the input it is written over, whose
/// value the body reads from the output's block argument, so every element is read before any is
/// written), the body the part's nodes (those of its shape).
inline mlir::LogicalResult buildPartsKernel(mlir::OpBuilder& b, mlir::ModuleOp module,
                                            const ir::Graph& g, const ir::FusionGroup& grp,
                                            const std::string& name) {
  mlir::Location loc = b.getUnknownLoc();
  auto [entry, lo, hi] = declareKernel(b, module, g, grp, name);
  mlir::MLIRContext* ctx = b.getContext();
  std::map<ir::ValueId, const ir::Node*> nodeOf;
  for (int32_t i : grp.leaves)
    nodeOf[g.nodes()[static_cast<size_t>(i)].result] = &g.nodes()[static_cast<size_t>(i)];
  for (int32_t i : grp.nodes)
    nodeOf[g.nodes()[static_cast<size_t>(i)].result] = &g.nodes()[static_cast<size_t>(i)];
  std::map<ir::ValueId, size_t> inputOf;
  for (size_t i = 0; i < grp.inputs.size(); ++i)
    inputOf[grp.inputs[i]] = i;
  std::map<size_t, size_t> writtenBy; // input -> the output written over it
  for (size_t k = 0; k < grp.inPlace.size() && k < grp.outputs.size(); ++k)
    if (grp.inPlace[k] >= 0) writtenBy[static_cast<size_t>(grp.inPlace[k])] = k;
  auto index = [&](int64_t v) -> mlir::Value {
    return mlir::arith::ConstantIndexOp::create(b, loc, v);
  };
  auto tensor1d = [&](DType t) {
    return mlir::RankedTensorType::get({mlir::ShapedType::kDynamic}, memoryType(b, t));
  };
  bool ok = true;
  int64_t offset = 0;
  for (const Shape& part : grp.parts) {
    const int64_t count = numel(part);
    // The part's range within [lo, hi): [max(lo - offset, 0), min(hi - offset, count)), empty
    // where they do not meet.
    mlir::Value at = index(offset);
    mlir::Value from =
        mlir::arith::MaxSIOp::create(b, loc, mlir::arith::SubIOp::create(b, loc, lo, at), index(0));
    mlir::Value to = mlir::arith::MinSIOp::create(
        b, loc, mlir::arith::SubIOp::create(b, loc, hi, at), index(count));
    mlir::Value size = mlir::arith::MaxSIOp::create(
        b, loc, mlir::arith::SubIOp::create(b, loc, to, from), index(0));
    offset += count;
    auto ofPart = [&](ir::ValueId v) {
      return numel(g.type(v).shape) == 1 || numel(g.type(v).shape) == count;
    };
    // Memref argument `arg` over the range (one element: its only one, at stride 0).
    auto view = [&](unsigned arg, DType t, bool scalar) -> mlir::Value {
      auto type = mlir::MemRefType::get(
          {mlir::ShapedType::kDynamic}, memoryType(b, t),
          mlir::StridedLayoutAttr::get(ctx, mlir::ShapedType::kDynamic, {scalar ? 0 : 1}));
      return mlir::memref::ReinterpretCastOp::create(
          b, loc, type, entry->getArgument(arg),
          scalar ? mlir::OpFoldResult(b.getIndexAttr(0)) : mlir::OpFoldResult(from),
          llvm::SmallVector<mlir::OpFoldResult>{size},
          llvm::SmallVector<mlir::OpFoldResult>{b.getIndexAttr(scalar ? 0 : 1)});
    };
    // The inputs the part's outputs read, as eval below reaches them.
    std::set<size_t> reads;
    std::function<void(ir::ValueId)> reach = [&](ir::ValueId v) {
      if (!ofPart(v)) return;
      if (auto in = inputOf.find(v); in != inputOf.end()) {
        reads.insert(in->second);
      } else if (auto node = nodeOf.find(v); node != nodeOf.end()) {
        for (ir::ValueId o : node->second->operands)
          reach(o);
      }
    };
    std::vector<size_t> outputs; // of this part
    for (size_t k = 0; k < grp.outputs.size(); ++k)
      if (g.type(grp.outputs[k]).shape == part) {
        outputs.push_back(k);
        reach(grp.outputs[k]);
      }
    if (outputs.empty()) continue;
    std::vector<mlir::Value> ins, outs, outViews;
    std::vector<ir::ValueId> inValues;
    for (size_t i : reads) {
      if (writtenBy.count(i) != 0) continue; // read from its output's block argument
      const ir::TensorType& type = g.type(grp.inputs[i]);
      mlir::Value m = view(static_cast<unsigned>(i), type.dtype, numel(type.shape) == 1);
      ins.push_back(
          mlir::bufferization::ToTensorOp::create(b, loc, tensor1d(type.dtype), m, true, false));
      inValues.push_back(grp.inputs[i]);
    }
    std::map<size_t, size_t> outArg; // input written over -> its output's block argument
    for (size_t j = 0; j < outputs.size(); ++j) {
      const size_t k = outputs[j];
      const int32_t over = k < grp.inPlace.size() ? grp.inPlace[k] : -1;
      if (over >= 0) outArg[static_cast<size_t>(over)] = ins.size() + j;
      const DType t = g.type(grp.outputs[k]).dtype;
      outViews.push_back(
          view(static_cast<unsigned>(over >= 0 ? static_cast<size_t>(over) : grp.inputs.size() + k),
               t, false));
      outs.push_back(mlir::bufferization::ToTensorOp::create(b, loc, tensor1d(t), outViews.back(),
                                                             true, true));
    }
    for (size_t i : reads) // an input written over by another part's output is no operand here
      if (writtenBy.count(i) != 0 && outArg.count(i) == 0) return mlir::failure();
    std::vector<mlir::AffineMap> maps(ins.size() + outs.size(), b.getMultiDimIdentityMap(1));
    std::vector<mlir::Type> resultTypes;
    for (mlir::Value o : outs)
      resultTypes.push_back(o.getType());
    auto generic = mlir::linalg::GenericOp::create(
        b, loc, resultTypes, ins, outs, maps,
        std::vector<mlir::utils::IteratorType>{mlir::utils::IteratorType::parallel},
        [&](mlir::OpBuilder& lb, mlir::Location, mlir::ValueRange args) {
          std::map<ir::ValueId, mlir::Value> values;
          for (size_t j = 0; j < inValues.size(); ++j)
            values[inValues[j]] = fromMemory(lb, loc, args[j], g.type(inValues[j]).dtype);
          for (const auto& [i, arg] : outArg)
            values[grp.inputs[i]] = fromMemory(lb, loc, args[arg], g.type(grp.inputs[i]).dtype);
          std::function<mlir::Value(ir::ValueId)> eval = [&](ir::ValueId v) -> mlir::Value {
            if (auto it = values.find(v); it != values.end()) return it->second;
            if (!ofPart(v)) return {}; // another part's
            mlir::Value r;
            if (auto node = nodeOf.find(v); node != nodeOf.end()) {
              std::vector<mlir::Value> in;
              for (ir::ValueId o : node->second->operands) {
                in.push_back(eval(o));
                if (!in.back()) return {};
              }
              r = BodyBuilder(lb, loc, g).node(*node->second, in);
            }
            if (r) values[v] = r;
            return r;
          };
          std::vector<mlir::Value> yields;
          for (size_t j = 0; j < outputs.size(); ++j) {
            mlir::Value r = eval(grp.outputs[outputs[j]]);
            if (!r) {
              ok = false;
              r = args[ins.size() + j];
            } else {
              r = toMemory(lb, loc, r, g.type(grp.outputs[outputs[j]]).dtype);
            }
            yields.push_back(r);
          }
          mlir::linalg::YieldOp::create(lb, loc, yields);
        });
    for (size_t j = 0; j < outs.size(); ++j)
      mlir::bufferization::MaterializeInDestinationOp::create(
          b, loc, mlir::Type(), generic->getResult(static_cast<unsigned>(j)), outViews[j], true,
          true);
  }
  mlir::func::ReturnOp::create(b, loc);
  return mlir::success(ok);
}

} // namespace weft::codegen
