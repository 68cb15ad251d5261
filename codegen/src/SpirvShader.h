// What every per-op shader is built with (Spirv.cpp): the parameters and index space of
// Shaders.h's layout (ShaderBuilder), loops whose results stay defined, reductions' identities and
// combines, and joining one value across a workgroup. Included only by Spirv.cpp, split from it to
// keep each file one subject (every file including MLIR headers costs a gigabyte to compile).
#pragma once

#include "KernelBody.h"
#include "KernelIO.h"
#include "weft/runtime/Shaders.h"

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

/// Result `k` of `loop`, or its initial value where the loop runs no iteration: MLIR's SCF to
/// SPIR-V lowering carries results through variables the body stores, which a loop of no
/// iteration leaves undefined.
inline Value resultOf(mlir::OpBuilder& b, mlir::Location loc, mlir::scf::ForOp loop, unsigned k) {
  Value ran = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt,
                                          loop.getLowerBound(), loop.getUpperBound());
  return mlir::arith::SelectOp::create(b, loc, ran, loop.getResult(k), loop.getInitArgs()[k]);
}

/// Builds one shader's gpu.func body: parameters, the index space, loops.
class ShaderBuilder {
public:
  ShaderBuilder(mlir::OpBuilder& b, mlir::Location loc, const ShaderKey& key, mlir::Block* entry,
                bool subgroups)
      : b_(b), loc_(loc), key_(key), entry_(entry), operands_(static_cast<int>(key.dtypes.size())),
        subgroups_(subgroups) {}
  /// Whether the target has subgroup reductions (GroupNonUniformArithmetic).
  bool subgroups() const { return subgroups_; }

  mlir::OpBuilder& b() { return b_; }
  mlir::Location loc() const { return loc_; }
  Value c(int64_t v) { return mlir::arith::ConstantIndexOp::create(b_, loc_, v); }
  /// Parameter `i` (an index value) as an index.
  Value p(Value i) {
    Value v = mlir::memref::LoadOp::create(b_, loc_, entry_->getArgument(0), mlir::ValueRange{i});
    return mlir::arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), v);
  }
  Value p(int64_t i) { return p(c(i)); }
  Value add(Value a, Value x) { return mlir::arith::AddIOp::create(b_, loc_, a, x); }
  Value mul(Value a, Value x) { return mlir::arith::MulIOp::create(b_, loc_, a, x); }
  Value memref(int k) { return entry_->getArgument(static_cast<unsigned>(k + 1)); }
  Value status() { return entry_->getArgument(static_cast<unsigned>(operands_ + 1)); }
  DType dtype(int k) const { return key_.dtypes[static_cast<size_t>(k)]; }
  Value load(int k, Value at) { return loadElement(b_, loc_, memref(k), at, dtype(k)); }
  void store(int k, Value at, Value v) {
    mlir::memref::StoreOp::create(b_, loc_, toMemory(b_, loc_, v, dtype(k)), memref(k),
                                  mlir::ValueRange{at});
  }

  /// Where the params of the line and of the family's extras start.
  Value rank() { return p(1); }
  Value lineBase() { return add(add(c(2 + operands_), rank()), mul(rank(), c(operands_))); }
  Value lineLength() { return p(lineBase()); }
  Value lineStride(int k) { return p(add(lineBase(), c(1 + k))); }
  Value extra(int i) { return p(add(lineBase(), c(1 + operands_ + i))); }

  /// Each operand's offset at index-space point `point`, and (for `dim` >= 0 given as a value) the
  /// point's coordinate along that dim and whether every other coordinate lies below the extent
  /// the params list from `limitsAt` on.
  struct Walk {
    std::vector<Value> offsets;
    Value coordinate, inLimits;
  };
  Walk walk(Value point, Value dim = {}, Value limitsAt = {}) {
    Value r = rank();
    std::vector<Value> init{point};
    for (int k = 0; k < operands_; ++k)
      init.push_back(p(add(c(2), add(r, mul(c(k), add(r, c(1)))))));
    init.push_back(c(0));
    init.push_back(mlir::arith::ConstantOp::create(b_, loc_, b_.getBoolAttr(true)));
    auto loop = mlir::scf::ForOp::create(
        b_, loc_, c(0), r, c(1), init,
        [&](mlir::OpBuilder& nb, mlir::Location, Value k, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b_);
          b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value d = mlir::arith::SubIOp::create(b_, loc_,
                                                mlir::arith::SubIOp::create(b_, loc_, r, k), c(1));
          Value size = p(add(c(2), d));
          Value rem = it[0];
          Value idx = mlir::arith::RemUIOp::create(b_, loc_, rem, size);
          std::vector<Value> next{mlir::arith::DivUIOp::create(b_, loc_, rem, size)};
          for (int j = 0; j < operands_; ++j) {
            Value base = add(c(2), add(r, mul(c(j), add(r, c(1)))));
            next.push_back(
                add(it[static_cast<size_t>(1 + j)], mul(idx, p(add(base, add(c(1), d))))));
          }
          Value coord = it[static_cast<size_t>(1 + operands_)];
          Value ok = it[static_cast<size_t>(2 + operands_)];
          if (dim) {
            Value here =
                mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::eq, d, dim);
            coord = mlir::arith::SelectOp::create(b_, loc_, here, idx, coord);
            Value below = mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::ult,
                                                      idx, p(add(limitsAt, d)));
            ok = mlir::arith::AndIOp::create(b_, loc_, ok,
                                             mlir::arith::OrIOp::create(b_, loc_, here, below));
          }
          next.push_back(coord);
          next.push_back(ok);
          mlir::scf::YieldOp::create(b_, loc_, next);
        });
    Walk w;
    for (int k = 0; k < operands_; ++k)
      w.offsets.push_back(resultOf(b_, loc_, loop, static_cast<unsigned>(1 + k)));
    w.coordinate = resultOf(b_, loc_, loop, static_cast<unsigned>(1 + operands_));
    w.inLimits = resultOf(b_, loc_, loop, static_cast<unsigned>(2 + operands_));
    return w;
  }

  /// for (i = first; i < count; i += step) body(i)
  void forEach(Value first, Value count, Value step, const std::function<void(Value)>& body) {
    mlir::scf::ForOp::create(b_, loc_, first, count, step, mlir::ValueRange{},
                             [&](mlir::OpBuilder& nb, mlir::Location, Value i, mlir::ValueRange) {
                               mlir::OpBuilder::InsertionGuard guard(b_);
                               b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                               body(i);
                               mlir::scf::YieldOp::create(b_, loc_);
                             });
  }
  /// Every point of the index space, spread over all invocations.
  void forEachPoint(const std::function<void(Value)>& body) {
    Value step = mul(mlir::gpu::GridDimOp::create(b_, loc_, mlir::gpu::Dimension::x),
                     mlir::gpu::BlockDimOp::create(b_, loc_, mlir::gpu::Dimension::x));
    forEach(mlir::gpu::GlobalIdOp::create(b_, loc_, mlir::gpu::Dimension::x), p(0), step, body);
  }
  /// `then()` where `cond` holds.
  void when(Value cond, const std::function<void()>& then) {
    mlir::scf::IfOp::create(b_, loc_, cond, [&](mlir::OpBuilder& nb, mlir::Location) {
      mlir::OpBuilder::InsertionGuard guard(b_);
      b_.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
      then();
      mlir::scf::YieldOp::create(b_, loc_);
    });
  }
  /// Records index `v` (int64) out of range in the status buffer: [1, low word, high word].
  void recordBad(Value v) {
    mlir::Type i32 = b_.getI32Type();
    auto st = [&](int64_t at, Value x) {
      mlir::memref::StoreOp::create(b_, loc_, x, status(), mlir::ValueRange{c(at)});
    };
    st(0, mlir::arith::ConstantOp::create(b_, loc_, b_.getIntegerAttr(i32, 1)));
    st(1, mlir::arith::TruncIOp::create(b_, loc_, i32, v));
    st(2,
       mlir::arith::TruncIOp::create(
           b_, loc_, i32,
           mlir::arith::ShRUIOp::create(
               b_, loc_, v, mlir::arith::ConstantOp::create(b_, loc_, b_.getI64IntegerAttr(32)))));
  }
  /// `v` (an int64 register) as an index.
  Value index(Value v) { return mlir::arith::IndexCastOp::create(b_, loc_, b_.getIndexType(), v); }

private:
  mlir::OpBuilder& b_;
  mlir::Location loc_;
  const ShaderKey& key_;
  mlir::Block* entry_;
  int operands_;
  bool subgroups_;
};

/// A graph of one node computing `op` on arguments of `inputs`' dtypes into `out`: what
/// BodyBuilder computes a Map shader's element with, as the fused kernels compute it.
struct OneNode {
  ir::Graph g;
  const ir::Node* node = nullptr;
  OneNode(OpCode op, std::span<const DType> inputs, DType out) {
    std::vector<ir::ValueId> args;
    for (size_t i = 0; i < inputs.size(); ++i)
      args.push_back(g.addArgument(ir::TensorType{inputs[i], {}}, "x" + std::to_string(i)));
    g.addNode(op, args, Attrs{}, ir::TensorType{out, {}});
    node = &g.nodes().back();
  }
};

inline bool isFloatType(DType t) {
  return isFloating(t);
}

/// The identity of a reduction's combine in register type `t` of dtype `dt`.
inline Value identity(BodyBuilder& bb, OpCode op, DType dt) {
  const double inf = std::numeric_limits<double>::infinity();
  switch (op) {
  case OpCode::Prod:
    return bb.constantFloat(dt, 1.0);
  case OpCode::AMax:
    return isFloatType(dt) ? bb.constantFloat(dt, -inf)
                           : bb.constantInteger(dt, dt == DType::Int64   ? INT64_MIN
                                                    : dt == DType::Int32 ? INT32_MIN
                                                                         : 0);
  case OpCode::AMin:
    return isFloatType(dt) ? bb.constantFloat(dt, inf)
                           : bb.constantInteger(dt, dt == DType::Int64   ? INT64_MAX
                                                    : dt == DType::Int32 ? INT32_MAX
                                                    : dt == DType::Bool  ? 1
                                                                         : 255);
  default:
    return bb.constantFloat(dt, 0.0);
  }
}

/// acc (+) v for the reductions, NaN-propagating for amax/amin as PyTorch's.
inline Value combine(mlir::OpBuilder& b, mlir::Location loc, OpCode op, DType dt, Value acc,
                     Value v) {
  using namespace mlir::arith;
  const bool f = isFloatType(dt), u = isUnsigned(dt);
  switch (op) {
  case OpCode::Sum:
    return f ? AddFOp::create(b, loc, acc, v).getResult()
             : AddIOp::create(b, loc, acc, v).getResult();
  case OpCode::Prod:
    return f ? MulFOp::create(b, loc, acc, v).getResult()
             : MulIOp::create(b, loc, acc, v).getResult();
  case OpCode::AMax:
  case OpCode::AMin: {
    const bool max = op == OpCode::AMax;
    if (!f)
      return max ? (u ? MaxUIOp::create(b, loc, acc, v).getResult()
                      : MaxSIOp::create(b, loc, acc, v).getResult())
                 : (u ? MinUIOp::create(b, loc, acc, v).getResult()
                      : MinSIOp::create(b, loc, acc, v).getResult());
    Value better = CmpFOp::create(b, loc, max ? CmpFPredicate::OGT : CmpFPredicate::OLT, v, acc);
    Value nan = CmpFOp::create(b, loc, CmpFPredicate::UNO, v, v);
    return SelectOp::create(b, loc, OrIOp::create(b, loc, better, nan), v, acc);
  }
  default:
    return acc;
  }
}

inline mlir::gpu::AllReduceOperation groupOp(OpCode op, DType dt) {
  using K = mlir::gpu::AllReduceOperation;
  const bool f = isFloatType(dt), u = isUnsigned(dt);
  switch (op) {
  case OpCode::Prod:
    return K::MUL;
  case OpCode::AMax:
    return f ? K::MAXNUMF : u ? K::MAXUI : K::MAXSI;
  case OpCode::AMin:
    return f ? K::MINNUMF : u ? K::MINUI : K::MINSI;
  default:
    return K::ADD;
  }
}

/// The register dtype a reduction accumulates in: float32 for the floats but float64 (itself),
/// int32 for bool and uint8 (held in 32 bits: workgroup memory and subgroup operations
/// take no i1, and 8-bit ones need a device feature), the output's otherwise.
inline DType accumulateType(DType out) {
  if (out == DType::Float64) return out;
  if (isFloatType(out)) return DType::Float32;
  if (out == DType::Bool || out == DType::UInt8) return DType::Int32;
  return out;
}

/// Joins one value of every invocation of a workgroup by a reduction: 32-bit values through a
/// subgroup operation per subgroup, whose first invocation writes its subgroup's slot of workgroup
/// memory (every slot starts as the identity: a driver may run fewer subgroups than the workgroup
/// could hold); others (int64, whose subgroup operations need a device feature) a slot per
/// invocation. Every invocation then reads the joined value. Float amax/amin also carry whether
/// any value was NaN (the subgroup operations drop NaN).
class WorkgroupJoin {
public:
  WorkgroupJoin(ShaderBuilder& s, OpCode op, DType acc, uint32_t size)
      : s_(s), op_(op), acc_(acc), size_(size) {
    mlir::OpBuilder& b = s.b();
    auto shared = [&](mlir::Type t) {
      return mlir::memref::AllocOp::create(
          b, s.loc(),
          mlir::MemRefType::get({static_cast<int64_t>(size)}, t, mlir::MemRefLayoutAttrInterface{},
                                mlir::spirv::StorageClassAttr::get(
                                    b.getContext(), mlir::spirv::StorageClass::Workgroup)));
    };
    slots_ = shared(registerType(b, acc));
    nanMatters_ = isFloatType(acc) && (op == OpCode::AMax || op == OpCode::AMin);
    if (nanMatters_) nanSlots_ = shared(b.getI32Type());
    tid_ = mlir::gpu::ThreadIdOp::create(b, s.loc(), mlir::gpu::Dimension::x);
  }
  Value tid() const { return tid_; }

  Value join(Value mine) {
    mlir::OpBuilder& b = s_.b();
    mlir::Location loc = s_.loc();
    ir::Graph none;
    BodyBuilder bb(b, loc, none);
    Value zero32 = mlir::arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    const bool grouped = s_.subgroups() && registerType(b, acc_).getIntOrFloatBitWidth() == 32;
    mlir::memref::StoreOp::create(b, loc, grouped ? identity(bb, op_, acc_) : mine, slots_,
                                  mlir::ValueRange{tid_});
    if (nanMatters_) {
      Value isNan =
          mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, mine, mine);
      mlir::memref::StoreOp::create(
          b, loc,
          grouped ? zero32
                  : mlir::arith::ExtUIOp::create(b, loc, b.getI32Type(), isNan).getResult(),
          nanSlots_, mlir::ValueRange{tid_});
    }
    mlir::gpu::BarrierOp::create(b, loc);
    Value count = s_.c(size_);
    if (grouped) {
      Value joined = mlir::gpu::SubgroupReduceOp::create(b, loc, mine, groupOp(op_, acc_), false);
      Value sg = mlir::gpu::SubgroupIdOp::create(b, loc, mlir::IntegerAttr{});
      Value lane = mlir::gpu::LaneIdOp::create(b, loc, mlir::IntegerAttr{});
      Value nanFlag;
      if (nanMatters_)
        nanFlag = mlir::gpu::SubgroupReduceOp::create(
            b, loc,
            mlir::arith::ExtUIOp::create(
                b, loc, b.getI32Type(),
                mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, mine, mine)),
            mlir::gpu::AllReduceOperation::MAXUI, false);
      s_.when(mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, lane, s_.c(0)),
              [&] {
                mlir::memref::StoreOp::create(b, loc, joined, slots_, mlir::ValueRange{sg});
                if (nanMatters_)
                  mlir::memref::StoreOp::create(b, loc, nanFlag, nanSlots_, mlir::ValueRange{sg});
              });
      mlir::gpu::BarrierOp::create(b, loc);
      count = mlir::arith::MinUIOp::create(
          b, loc, count, mlir::gpu::NumSubgroupsOp::create(b, loc, mlir::IntegerAttr{}));
    }
    std::vector<Value> init{identity(bb, op_, acc_)};
    if (nanMatters_) init.push_back(zero32);
    auto all = mlir::scf::ForOp::create(
        b, loc, s_.c(0), count, s_.c(1), init,
        [&](mlir::OpBuilder& nb, mlir::Location, Value g, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value v = mlir::memref::LoadOp::create(b, loc, slots_, mlir::ValueRange{g});
          std::vector<Value> next{combine(b, loc, op_, acc_, it[0], v)};
          if (nanMatters_)
            next.push_back(mlir::arith::MaxUIOp::create(
                b, loc, it[1],
                mlir::memref::LoadOp::create(b, loc, nanSlots_, mlir::ValueRange{g})));
          mlir::scf::YieldOp::create(b, loc, next);
        });
    Value r = resultOf(b, loc, all, 0);
    if (nanMatters_) {
      Value any = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne,
                                              resultOf(b, loc, all, 1), zero32);
      r = mlir::arith::SelectOp::create(
          b, loc, any, bb.constantFloat(acc_, std::numeric_limits<double>::quiet_NaN()), r);
    }
    mlir::gpu::BarrierOp::create(b, loc); // every invocation has read the slots: free for reuse
    return r;
  }

private:
  ShaderBuilder& s_;
  OpCode op_;
  DType acc_;
  uint32_t size_;
  Value slots_, nanSlots_, tid_;
  bool nanMatters_ = false;
};

} // namespace weft::codegen
