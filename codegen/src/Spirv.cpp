// codegen's SPIR-V path for the op table's per-op shaders (weft/runtime/Shaders.h has their
// families and parameter layout): each is built with OpBuilder as a gpu.func whose arithmetic is
// the fused CPU kernels' own (BodyBuilder, loads and stores from KernelIO.h), lowered by MLIR's
// GPU, math, arith, scf and memref conversions to the SPIR-V dialect, serialized, and cached on
// disk under the device's target. Installed into the runtime when this library loads.
#include "KernelBody.h"
#include "KernelIO.h"
#include "weft/codegen/KernelCache.h"
#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Shaders.h"

#include "mlir/Conversion/GPUToSPIRV/GPUToSPIRVPass.h"
#include "mlir/Conversion/MathToSPIRV/MathToSPIRVPass.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVDialect.h"
#include "mlir/Dialect/SPIRV/IR/SPIRVOps.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/Dialect/SPIRV/Transforms/Passes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/SPIRV/Serialization.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace weft::codegen {
namespace {

using mlir::Value;
using hal::ShaderFamily;
using hal::ShaderKey;

/// The target environment a device's CodeObject target names:
/// "spirv1.3 caps=Shader,Int64,... exts=SPV_KHR_8bit_storage,...".
mlir::spirv::TargetEnvAttr targetEnv(mlir::MLIRContext& ctx, const std::string& target,
                                      std::string& error) {
  std::istringstream in(target);
  std::string word;
  mlir::spirv::Version version = mlir::spirv::Version::V_1_3;
  std::vector<mlir::spirv::Capability> caps{mlir::spirv::Capability::Shader};
  std::vector<mlir::spirv::Extension> exts{
      mlir::spirv::Extension::SPV_KHR_storage_buffer_storage_class};
  auto list = [](const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
      if (!item.empty()) out.push_back(item);
    return out;
  };
  while (in >> word) {
    if (word == "spirv1.0") version = mlir::spirv::Version::V_1_0;
    else if (word == "spirv1.3") version = mlir::spirv::Version::V_1_3;
    else if (word == "spirv1.5") version = mlir::spirv::Version::V_1_5;
    else if (word.rfind("caps=", 0) == 0) {
      for (const std::string& c : list(word.substr(5))) {
        auto cap = mlir::spirv::symbolizeCapability(c);
        if (!cap) error = "unknown SPIR-V capability " + c;
        else caps.push_back(*cap);
      }
    } else if (word.rfind("exts=", 0) == 0) {
      for (const std::string& e : list(word.substr(5))) {
        auto ext = mlir::spirv::symbolizeExtension(e);
        if (!ext) error = "unknown SPIR-V extension " + e;
        else exts.push_back(*ext);
      }
    }
  }
  auto vce = mlir::spirv::VerCapExtAttr::get(version, caps, exts, &ctx);
  return mlir::spirv::TargetEnvAttr::get(vce, mlir::spirv::getDefaultResourceLimits(&ctx),
                                         mlir::spirv::ClientAPI::Vulkan,
                                         mlir::spirv::Vendor::Unknown,
                                         mlir::spirv::DeviceType::Unknown,
                                         mlir::spirv::TargetEnvAttr::kUnknownDeviceID);
}

/// Result `k` of `loop`, or its initial value where the loop runs no iteration: MLIR's SCF to
/// SPIR-V lowering carries results through variables the body stores, which a loop of no
/// iteration leaves undefined.
Value resultOf(mlir::OpBuilder& b, mlir::Location loc, mlir::scf::ForOp loop, unsigned k) {
  Value ran = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt,
                                          loop.getLowerBound(), loop.getUpperBound());
  return mlir::arith::SelectOp::create(b, loc, ran, loop.getResult(k), loop.getInitArgs()[k]);
}

/// Builds one shader's gpu.func body: parameters, the index space, loops.
class ShaderBuilder {
public:
  ShaderBuilder(mlir::OpBuilder& b, mlir::Location loc, const ShaderKey& key, mlir::Block* entry,
                bool subgroups)
      : b_(b), loc_(loc), key_(key), entry_(entry),
        operands_(static_cast<int>(key.dtypes.size())), subgroups_(subgroups) {}
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
          Value d = mlir::arith::SubIOp::create(b_, loc_, mlir::arith::SubIOp::create(b_, loc_, r, k),
                                                c(1));
          Value size = p(add(c(2), d));
          Value rem = it[0];
          Value idx = mlir::arith::RemUIOp::create(b_, loc_, rem, size);
          std::vector<Value> next{mlir::arith::DivUIOp::create(b_, loc_, rem, size)};
          for (int j = 0; j < operands_; ++j) {
            Value base = add(c(2), add(r, mul(c(j), add(r, c(1)))));
            next.push_back(add(it[static_cast<size_t>(1 + j)], mul(idx, p(add(base, add(c(1), d))))));
          }
          Value coord = it[static_cast<size_t>(1 + operands_)];
          Value ok = it[static_cast<size_t>(2 + operands_)];
          if (dim) {
            Value here = mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::eq, d, dim);
            coord = mlir::arith::SelectOp::create(b_, loc_, here, idx, coord);
            Value below = mlir::arith::CmpIOp::create(b_, loc_, mlir::arith::CmpIPredicate::ult,
                                                      idx, p(add(limitsAt, d)));
            ok = mlir::arith::AndIOp::create(
                b_, loc_, ok, mlir::arith::OrIOp::create(b_, loc_, here, below));
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
    st(2, mlir::arith::TruncIOp::create(
              b_, loc_, i32,
              mlir::arith::ShRUIOp::create(
                  b_, loc_, v,
                  mlir::arith::ConstantOp::create(b_, loc_, b_.getI64IntegerAttr(32)))));
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

bool isFloatType(DType t) {
  return isFloating(t);
}

/// The identity of a reduction's combine in register type `t` of dtype `dt`.
Value identity(BodyBuilder& bb, OpCode op, DType dt) {
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
Value combine(mlir::OpBuilder& b, mlir::Location loc, OpCode op, DType dt, Value acc, Value v) {
  using namespace mlir::arith;
  const bool f = isFloatType(dt), u = isUnsigned(dt);
  switch (op) {
  case OpCode::Sum:
    return f ? AddFOp::create(b, loc, acc, v).getResult() : AddIOp::create(b, loc, acc, v).getResult();
  case OpCode::Prod:
    return f ? MulFOp::create(b, loc, acc, v).getResult() : MulIOp::create(b, loc, acc, v).getResult();
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

mlir::gpu::AllReduceOperation groupOp(OpCode op, DType dt) {
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

/// The register dtype a reduction accumulates in: float32 for the floats (float64 is not a device
/// dtype), int32 for bool and uint8 (held in 32 bits: workgroup memory and subgroup operations
/// take no i1, and 8-bit ones need a device feature), the output's otherwise.
DType accumulateType(DType out) {
  if (isFloatType(out)) return DType::Float32;
  if (out == DType::Bool || out == DType::UInt8) return DType::Int32;
  return out;
}

void buildMap(ShaderBuilder& s, const ShaderKey& key) {
  const int n = static_cast<int>(key.dtypes.size()) - 1;
  OneNode one(key.op, std::span<const DType>(key.dtypes.data(), static_cast<size_t>(n)),
              key.dtypes.back());
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    std::vector<Value> in;
    for (int k = 0; k < n; ++k)
      in.push_back(s.load(k, w.offsets[static_cast<size_t>(k)]));
    BodyBuilder bb(s.b(), s.loc(), one.g);
    s.store(n, w.offsets.back(), bb.node(*one.node, in));
  });
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
      Value isNan = mlir::arith::CmpFOp::create(b, loc, mlir::arith::CmpFPredicate::UNO, mine, mine);
      mlir::memref::StoreOp::create(
          b, loc,
          grouped ? zero32 : mlir::arith::ExtUIOp::create(b, loc, b.getI32Type(), isNan).getResult(),
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
                b, loc, it[1], mlir::memref::LoadOp::create(b, loc, nanSlots_, mlir::ValueRange{g})));
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

/// One workgroup per point; its invocations stride over the line (or over one chunk of it) and
/// their partial results are joined (WorkgroupJoin); the first invocation writes the result.
void buildReduce(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType in = key.dtypes[0], out = key.dtypes[1], acc = accumulateType(out);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  WorkgroupJoin group(s, key.op, acc, key.workgroupSize);
  Value tid = group.tid();
  Value wg = s.c(key.workgroupSize);
  s.forEach(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x), s.p(0),
            mlir::gpu::GridDimOp::create(b, loc, mlir::gpu::Dimension::x), [&](Value point) {
              ShaderBuilder::Walk w = s.walk(point);
              Value n = s.lineLength(), stride = s.lineStride(0);
              // A line split in chunks (extra p: the chunk's length, the number of chunks, the
              // index space's last dim): this point's chunk of it.
              Value chunk = s.extra(0), chunks = s.extra(1);
              Value split = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne,
                                                        chunk, s.c(0));
              Value chunkStart = s.mul(mlir::arith::RemUIOp::create(
                                           b, loc, point,
                                           mlir::arith::MaxUIOp::create(b, loc, chunks, s.c(1))),
                                       chunk);
              Value start = mlir::arith::SelectOp::create(b, loc, split, chunkStart, s.c(0));
              Value end = mlir::arith::SelectOp::create(
                  b, loc, split, mlir::arith::MinUIOp::create(b, loc, n, s.add(chunkStart, chunk)),
                  n);
              auto loop = mlir::scf::ForOp::create(
                  b, loc, s.add(start, tid), end, wg, mlir::ValueRange{identity(bb, key.op, acc)},
                  [&](mlir::OpBuilder& nb, mlir::Location, Value j, mlir::ValueRange it) {
                    mlir::OpBuilder::InsertionGuard guard(b);
                    b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
                    Value v = s.load(0, s.add(w.offsets[0], s.mul(j, stride)));
                    v = bb.convert(v, in, acc);
                    mlir::scf::YieldOp::create(b, loc, combine(b, loc, key.op, acc, it[0], v));
                  });
              Value r = group.join(resultOf(b, loc, loop, 0));
              s.when(mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, tid,
                                                 s.c(0)),
                     [&] { s.store(1, w.offsets[1], roundTo(b, loc, bb.convert(r, acc, out), out)); });
            });
}

/// One invocation per point walks its line: the first NaN, else the first extreme.
void buildArgReduce(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType in = key.dtypes[0];
  const DType acc = accumulateType(in);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  const bool max = key.op == OpCode::ArgMax;
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value n = s.lineLength(), stride = s.lineStride(0);
    Value first = bb.convert(s.load(0, w.offsets[0]), in, acc);
    auto loop = mlir::scf::ForOp::create(
        b, loc, s.c(1), n, s.c(1), mlir::ValueRange{first, s.c(0)},
        [&](mlir::OpBuilder& nb, mlir::Location, Value j, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value v = bb.convert(s.load(0, s.add(w.offsets[0], s.mul(j, stride))), in, acc);
          Value take;
          if (isFloatType(acc)) {
            using P = mlir::arith::CmpFPredicate;
            Value bestNan = mlir::arith::CmpFOp::create(b, loc, P::UNO, it[0], it[0]);
            Value vNan = mlir::arith::CmpFOp::create(b, loc, P::UNO, v, v);
            Value better = mlir::arith::CmpFOp::create(b, loc, max ? P::OGT : P::OLT, v, it[0]);
            take = mlir::arith::AndIOp::create(
                b, loc,
                mlir::arith::XOrIOp::create(b, loc, bestNan,
                                            mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true))),
                mlir::arith::OrIOp::create(b, loc, vNan, better));
          } else {
            take = bb.compare(max ? OpCode::Gt : OpCode::Lt, v, it[0], acc);
          }
          mlir::scf::YieldOp::create(
              b, loc,
              mlir::ValueRange{mlir::arith::SelectOp::create(b, loc, take, v, it[0]),
                               mlir::arith::SelectOp::create(b, loc, take, j, it[1])});
        });
    Value idx = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), resultOf(b, loc, loop, 1));
    s.store(1, w.offsets[1], idx);
  });
}

/// softmax / log_softmax in float32, one workgroup per line: its invocations stride over the line
/// three times (the maximum, the sum of exponentials, the results), joining the first two
/// (WorkgroupJoin).
void buildNormalize(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType in = key.dtypes[0], out = key.dtypes[1], f = DType::Float32;
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  const bool log = key.op == OpCode::LogSoftmax;
  WorkgroupJoin maxJoin(s, OpCode::AMax, f, key.workgroupSize),
      sumJoin(s, OpCode::Sum, f, key.workgroupSize);
  Value tid = maxJoin.tid(), wg = s.c(key.workgroupSize);
  s.forEach(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x), s.p(0),
            mlir::gpu::GridDimOp::create(b, loc, mlir::gpu::Dimension::x), [&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value n = s.lineLength(), si = s.lineStride(0), so = s.lineStride(1);
    auto at = [&](Value j) {
      return bb.convert(s.load(0, s.add(w.offsets[0], s.mul(j, si))), in, f);
    };
    auto over = [&](Value init, const std::function<Value(Value, Value)>& step) {
      auto loop = mlir::scf::ForOp::create(
          b, loc, tid, n, wg, mlir::ValueRange{init},
          [&](mlir::OpBuilder& nb, mlir::Location, Value j, mlir::ValueRange it) {
            mlir::OpBuilder::InsertionGuard guard(b);
            b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
            mlir::scf::YieldOp::create(b, loc, step(it[0], at(j)));
          });
      return resultOf(b, loc, loop, 0);
    };
    Value m = maxJoin.join(
        over(bb.constantFloat(f, -std::numeric_limits<double>::infinity()),
             [&](Value acc, Value v) { return combine(b, loc, OpCode::AMax, f, acc, v); }));
    Value sum = sumJoin.join(over(bb.constantFloat(f, 0.0), [&](Value acc, Value v) {
      return mlir::arith::AddFOp::create(
          b, loc, acc, mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, v, m)));
    }));
    Value logSum = mlir::math::LogOp::create(b, loc, sum);
    s.forEach(tid, n, wg, [&](Value j) {
      Value d = mlir::arith::SubFOp::create(b, loc, at(j), m);
      Value r = log ? mlir::arith::SubFOp::create(b, loc, d, logSum).getResult()
                    : mlir::arith::DivFOp::create(b, loc, mlir::math::ExpOp::create(b, loc, d), sum)
                          .getResult();
      s.store(1, s.add(w.offsets[1], s.mul(j, so)), roundTo(b, loc, bb.convert(r, f, out), out));
    });
  });
}

/// The scans, one invocation per line, in order: cumsum, cumprod, logcumsumexp (in float32, as
/// the CPU's logAddExp), cum_argmax / cum_argmin (int64: the last position of the extreme so far,
/// a NaN winning).
void buildScan(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType in = key.dtypes[0], out = key.dtypes[1];
  const bool arg = key.op == OpCode::CumArgMax || key.op == OpCode::CumArgMin;
  const DType acc = arg ? accumulateType(in) : accumulateType(out);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  using P = mlir::arith::CmpFPredicate;
  auto isNan = [&](Value v) { return mlir::arith::CmpFOp::create(b, loc, P::UNO, v, v).getResult(); };
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value n = s.lineLength(), si = s.lineStride(0), so = s.lineStride(1);
    std::vector<Value> init;
    if (key.op == OpCode::LogCumSumExp)
      init = {bb.constantFloat(acc, -std::numeric_limits<double>::infinity())};
    else if (arg)
      init = {identity(bb, OpCode::AMax, acc), s.c(0)};
    else
      init = {identity(bb, key.op == OpCode::CumProd ? OpCode::Prod : OpCode::Sum, acc)};
    mlir::scf::ForOp::create(
        b, loc, s.c(0), n, s.c(1), init,
        [&](mlir::OpBuilder& nb, mlir::Location, Value j, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value v = bb.convert(s.load(0, s.add(w.offsets[0], s.mul(j, si))), in, acc);
          Value at = s.add(w.offsets[1], s.mul(j, so));
          if (arg) {
            const bool max = key.op == OpCode::CumArgMax;
            Value take = mlir::arith::OrIOp::create(
                b, loc,
                mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, j, s.c(0)),
                isFloatType(acc)
                    ? mlir::arith::CmpFOp::create(b, loc, max ? P::OGE : P::OLE, v, it[0]).getResult()
                    : bb.compare(max ? OpCode::Ge : OpCode::Le, v, it[0], acc));
            if (isFloatType(acc)) take = mlir::arith::OrIOp::create(b, loc, take, isNan(v));
            Value best = mlir::arith::SelectOp::create(b, loc, take, j, it[1]);
            s.store(1, at, mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), best));
            mlir::scf::YieldOp::create(
                b, loc,
                mlir::ValueRange{mlir::arith::SelectOp::create(b, loc, take, v, it[0]), best});
            return;
          }
          Value r;
          if (key.op == OpCode::LogCumSumExp) { // as the CPU's logAddExp
            Value a = it[0];
            Value anyNan = mlir::arith::OrIOp::create(b, loc, isNan(a), isNan(v));
            Value lo = mlir::arith::MinimumFOp::create(b, loc, a, v);
            Value hi = mlir::arith::MaximumFOp::create(b, loc, a, v);
            Value inf = bb.constantFloat(acc, std::numeric_limits<double>::infinity());
            Value infinite = mlir::arith::CmpFOp::create(
                b, loc, P::OEQ, mlir::math::AbsFOp::create(b, loc, lo), inf);
            Value same = mlir::arith::AndIOp::create(
                b, loc, mlir::arith::CmpFOp::create(b, loc, P::OEQ, lo, hi), infinite);
            Value general = mlir::arith::AddFOp::create(
                b, loc, hi,
                mlir::math::Log1pOp::create(
                    b, loc, mlir::math::ExpOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, lo, hi))));
            r = mlir::arith::SelectOp::create(
                b, loc, anyNan, mlir::arith::AddFOp::create(b, loc, a, v),
                mlir::arith::SelectOp::create(b, loc, same, lo, general));
          } else {
            r = combine(b, loc, key.op == OpCode::CumProd ? OpCode::Prod : OpCode::Sum, acc,
                        it[0], v);
          }
          s.store(1, at, roundTo(b, loc, bb.convert(r, acc, out), out));
          mlir::scf::YieldOp::create(b, loc, r);
        });
  });
}

/// argsort, one invocation per element: its place in its line is the number of elements that
/// sort before it (a stable sort: an equal one before it in the line too), where NaN sorts above
/// every number, as the CPU's stable sort orders them. Extra p: dim, descending, then the shape
/// (walk's limits: every point lies inside them).
void buildSort(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType in = key.dtypes[0], acc = accumulateType(in);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  using P = mlir::arith::CmpFPredicate;
  auto greater = [&](Value a, Value c) -> Value { // greaterNan(a, c)
    if (!isFloatType(acc)) return bb.compare(OpCode::Gt, a, c, acc);
    Value na = mlir::arith::CmpFOp::create(b, loc, P::UNO, a, a);
    Value nc = mlir::arith::CmpFOp::create(b, loc, P::UNO, c, c);
    Value t = mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    Value nanCase = mlir::arith::AndIOp::create(b, loc, na, mlir::arith::XOrIOp::create(b, loc, nc, t));
    return mlir::arith::SelectOp::create(b, loc, mlir::arith::OrIOp::create(b, loc, na, nc), nanCase,
                                         mlir::arith::CmpFOp::create(b, loc, P::OGT, a, c));
  };
  s.forEachPoint([&](Value point) {
    Value dim = s.extra(0);
    Value descending = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne,
                                                   s.extra(1), s.c(0));
    ShaderBuilder::Walk w = s.walk(point, dim, s.add(s.lineBase(), s.c(1 + 2 + 2)));
    Value n = s.lineLength(), si = s.lineStride(0), so = s.lineStride(1);
    Value j = w.coordinate;
    Value base = mlir::arith::SubIOp::create(b, loc, w.offsets[0], s.mul(j, si));
    Value mine = bb.convert(s.load(0, w.offsets[0]), in, acc);
    auto less = [&](Value x, Value y) { // x sorts before y
      return mlir::arith::SelectOp::create(b, loc, descending, greater(x, y), greater(y, x))
          .getResult();
    };
    auto loop = mlir::scf::ForOp::create(
        b, loc, s.c(0), n, s.c(1), mlir::ValueRange{s.c(0)},
        [&](mlir::OpBuilder& nb, mlir::Location, Value k, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value other = bb.convert(s.load(0, s.add(base, s.mul(k, si))), in, acc);
          Value t = mlir::arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
          Value tie = mlir::arith::AndIOp::create(
              b, loc, mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ult, k, j),
              mlir::arith::XOrIOp::create(b, loc, less(mine, other), t));
          Value before = mlir::arith::OrIOp::create(b, loc, less(other, mine), tie);
          mlir::scf::YieldOp::create(
              b, loc,
              mlir::ValueRange{mlir::arith::SelectOp::create(b, loc, before, s.add(it[0], s.c(1)),
                                                             it[0])});
        });
    Value place = resultOf(b, loc, loop, 0);
    s.store(1, s.add(w.offsets[1], s.mul(place, so)),
            mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), j));
  });
}

/// An int64 index checked against [0, size): out of range, recorded and clamped.
Value checkedIndex(ShaderBuilder& s, Value v, Value size) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  Value size64 = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), size);
  Value bad = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::uge, v, size64);
  s.when(bad, [&] { s.recordBad(v); });
  Value zero = mlir::arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  return s.index(mlir::arith::SelectOp::create(b, loc, bad, zero, v));
}

void buildGather(ShaderBuilder& s, const ShaderKey&) {
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value v = s.load(1, w.offsets[1]);
    Value i = checkedIndex(s, v, s.extra(1));
    s.store(2, w.offsets[2], s.load(0, s.add(w.offsets[0], s.mul(i, s.extra(0)))));
  });
}

/// out = self + the src elements whose index names this point, in the line's order.
void buildScatter(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType out = key.dtypes[3], acc = accumulateType(out);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  s.forEachPoint([&](Value point) {
    Value dim = s.extra(0), size = s.extra(1);
    ShaderBuilder::Walk w = s.walk(point, dim, s.add(s.lineBase(), s.c(1 + 4 + 2)));
    Value n = mlir::arith::SelectOp::create(b, loc, w.inLimits, s.lineLength(), s.c(0));
    Value coord = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), w.coordinate);
    Value start = bb.convert(s.load(0, w.offsets[0]), key.dtypes[0], acc);
    Value li = s.lineStride(1), ls = s.lineStride(2);
    auto loop = mlir::scf::ForOp::create(
        b, loc, s.c(0), n, s.c(1), mlir::ValueRange{start},
        [&](mlir::OpBuilder& nb, mlir::Location, Value j, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value v = s.load(1, s.add(w.offsets[1], s.mul(j, li)));
          checkedIndex(s, v, size);
          Value hit = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::eq, v, coord);
          auto pick = mlir::scf::IfOp::create(
              b, loc, hit,
              [&](mlir::OpBuilder& tb, mlir::Location) {
                mlir::OpBuilder::InsertionGuard g2(b);
                b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
                Value x = bb.convert(s.load(2, s.add(w.offsets[2], s.mul(j, ls))), key.dtypes[2],
                                     acc);
                // Each src element reaching this position, in order: added, multiplied, the
                // larger or smaller kept (a NaN wins), or (scatter) the last one.
                const OpCode step = key.op == OpCode::ScatterProd   ? OpCode::Prod
                                    : key.op == OpCode::ScatterAmax ? OpCode::AMax
                                    : key.op == OpCode::ScatterAmin ? OpCode::AMin
                                                                    : OpCode::Sum;
                mlir::scf::YieldOp::create(b, loc,
                                           key.op == OpCode::Scatter
                                               ? x
                                               : combine(b, loc, step, acc, it[0], x));
              },
              [&](mlir::OpBuilder& eb, mlir::Location) {
                mlir::scf::YieldOp::create(eb, loc, it[0]);
              });
          mlir::scf::YieldOp::create(b, loc, pick.getResult(0));
        });
    s.store(3, w.offsets[3], roundTo(b, loc, bb.convert(resultOf(b, loc, loop, 0), acc, out), out));
  });
}

void buildCheckIndex(ShaderBuilder& s, const ShaderKey&) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value v = s.load(0, w.offsets[0]);
    Value size = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), s.extra(0));
    Value wrap = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::ne, s.extra(1),
                                             s.c(0));
    Value zero = mlir::arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
    Value negative = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::slt, v, zero);
    Value wrapped = mlir::arith::SelectOp::create(
        b, loc, mlir::arith::AndIOp::create(b, loc, wrap, negative),
        mlir::arith::AddIOp::create(b, loc, v, size), v);
    Value bad = mlir::arith::CmpIOp::create(b, loc, mlir::arith::CmpIPredicate::uge, wrapped, size);
    s.when(bad, [&] { s.recordBad(v); });
    s.store(1, w.offsets[1], wrapped);
  });
}

/// Where one element of a GEMM operand lies, and whether it exists (zero where not).
struct Element {
  Value inside, at;
};

/// The operands of a GEMM-shaped shader (Shaders.h's MatMul family) as the tiles load them: plain
/// strided matrices for matmul; for the convolutions, their operands' elements computed from the
/// geometry (an implicit im2col: no column matrix is ever written):
///   conv:             out[o, p]   = sum_k  w[o, k] x^[k, p]    k = (c, ky, kx), p = (oy, ox)
///   conv_input_grad:  dx[c, s]    = sum_k  w[o, c, ky, kx] g^[k, s]   k = (o, ky, kx), s = (iy, ix)
///   conv_weight_grad: dw[o, k]    = sum_q  g[o, q] x^[q, k]    q = (n, oy, ox)
/// with the batch points (sample, group) or (group). A is operand 0 for matmul, 1 for the
/// convolutions; B the other. fetchA(off, r, c) is A[r, c] at the batch point's operand offsets
/// `off`, fetchB likewise, outAt(off, r, c) where C[r, c] goes.
struct GemmOperands {
  Value m, n, k;
  int aOperand, bOperand;
  std::function<Element(const std::vector<Value>&, Value, Value)> fetchA, fetchB;
  std::function<Value(const std::vector<Value>&, Value, Value)> outAt;
};

/// Calls `body` with the operands of `op`'s GEMM (their parameters loaded here, at the function's
/// entry).
void withGemmOperands(ShaderBuilder& s, OpCode op,
                      const std::function<void(const GemmOperands&)>& body) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  using P = mlir::arith::CmpIPredicate;
  const int extras = op == OpCode::MatMul ? 9 : 28;
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
  auto divu = [&](Value x, Value y) { return mlir::arith::DivUIOp::create(b, loc, x, y).getResult(); };
  auto remu = [&](Value x, Value y) { return mlir::arith::RemUIOp::create(b, loc, x, y).getResult(); };
  auto sub = [&](Value x, Value y) { return mlir::arith::SubIOp::create(b, loc, x, y).getResult(); };
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
      Value ok = all({cmp(P::ult, kk, k), cmp(P::ult, sp, n), cmp(P::sge, ty, zero),
                      cmp(P::sge, tx2, zero), cmp(P::eq, remu(py, g(7)), zero),
                      cmp(P::eq, remu(px, g(8)), zero), cmp(P::ult, oy, g(3)),
                      cmp(P::ult, ox, g(4))});
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
  body(GemmOperands{m, n, k, op == OpCode::MatMul ? 0 : 1, op == OpCode::MatMul ? 1 : 0, fetchA,
                    fetchB, outAt});
}

/// C = A B per batch point (GemmOperands): 16 x 16 output tiles, one per workgroup (x: columns,
/// y: rows, z and a loop: the batch), K walked in slabs of 16 through workgroup memory. For
/// integer matmuls.
void buildMatMul(ShaderBuilder& s, const ShaderKey& key) {
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
  Value tx = mlir::gpu::ThreadIdOp::create(b, loc, D::x), ty = mlir::gpu::ThreadIdOp::create(b, loc, D::y);
  Value row = s.add(s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::y), s.c(kTile)), ty);
  Value col = s.add(s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::x), s.c(kTile)), tx);
  Value slot = s.add(s.mul(ty, s.c(kTile)), tx);
  auto lt = [&](Value x, Value y) { return mlir::arith::CmpIOp::create(b, loc, P::ult, x, y).getResult(); };
  withGemmOperands(s, key.op, [&](const GemmOperands& gm) {
  s.forEach(mlir::gpu::BlockIdOp::create(b, loc, D::z), s.p(0),
            mlir::gpu::GridDimOp::create(b, loc, D::z), [&](Value batch) {
              const std::vector<Value> off = s.walk(batch).offsets;
              Value slabs = mlir::arith::DivUIOp::create(b, loc, s.add(gm.k, s.c(kTile - 1)), s.c(kTile));
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
                      sum = isFloatType(f)
                                ? mlir::math::FmaOp::create(b, loc, x, y, sum).getResult()
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
/// workgroup of 16 x 16 invocations,
/// each holding an 8 x 8 register tile (rows ty + 16 i, columns tx + 16 j: neighbouring
/// invocations read neighbouring words of workgroup memory and write neighbouring words of C), K
/// in slabs of 16 staged through workgroup memory (A's slab stored K-major), loads outside the
/// matrices masked without branches; in float32 registers (16-bit floats widened as they load).
void buildBlockedMatMul(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  constexpr int64_t kBlock = hal::kMatMulBlock, kSlab = 16, kThreads = 256, kReg = kBlock / 16;
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
  Value tx = mlir::gpu::ThreadIdOp::create(b, loc, D::x), ty = mlir::gpu::ThreadIdOp::create(b, loc, D::y);
  Value tid = s.add(s.mul(ty, s.c(16)), tx);
  Value row0 = s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::y), s.c(kBlock));
  Value col0 = s.mul(mlir::gpu::BlockIdOp::create(b, loc, D::x), s.c(kBlock));
  auto lt = [&](Value x, Value y) { return mlir::arith::CmpIOp::create(b, loc, P::ult, x, y).getResult(); };
  auto both = [&](Value x, Value y) { return mlir::arith::AndIOp::create(b, loc, x, y).getResult(); };
  Value zero = bb.constantFloat(f, 0.0);
  withGemmOperands(s, key.op, [&](const GemmOperands& gm) {
  Value m = gm.m, n = gm.n, k = gm.k;
  s.forEach(mlir::gpu::BlockIdOp::create(b, loc, D::z), s.p(0),
            mlir::gpu::GridDimOp::create(b, loc, D::z), [&](Value batch) {
              const std::vector<Value> off = s.walk(batch).offsets;
              Value slabs = mlir::arith::DivUIOp::create(b, loc, s.add(k, s.c(kSlab - 1)), s.c(kSlab));
              std::vector<Value> init(static_cast<size_t>(kReg * kReg), zero);
              auto loop = mlir::scf::ForOp::create(
                  b, loc, s.c(0), slabs, s.c(1), init,
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
                      auto stage = [&](int operand, Value inside, Value at, Value slab,
                                       Value slot) {
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

/// max_pool's argmax: per output point (n, c, oy, ox), the flat index iy * w + ix of its window's
/// largest element (a NaN wins, as the CPU's); extra p: h, w, oh, ow, kh, kw, strides, pads,
/// dilations, then x's strides along h and w.
void buildPool(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  using P = mlir::arith::CmpIPredicate;
  const DType in = key.dtypes[0], acc = accumulateType(in);
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  std::vector<Value> e;
  for (int i = 0; i < 14; ++i)
    e.push_back(s.extra(i));
  auto cmp = [&](P p, Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, loc, p, x, y).getResult();
  };
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value ox = mlir::arith::RemUIOp::create(b, loc, point, e[3]);
    Value oy = mlir::arith::RemUIOp::create(b, loc, mlir::arith::DivUIOp::create(b, loc, point, e[3]),
                                            e[2]);
    Value y0 = mlir::arith::SubIOp::create(b, loc, s.mul(oy, e[6]), e[8]);
    Value x0 = mlir::arith::SubIOp::create(b, loc, s.mul(ox, e[7]), e[9]);
    Value none64 = mlir::arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(-1));
    auto outer = mlir::scf::ForOp::create(
        b, loc, s.c(0), e[4], s.c(1), mlir::ValueRange{identity(bb, OpCode::AMax, acc), none64},
        [&](mlir::OpBuilder& nb, mlir::Location, Value ky, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value iy = s.add(y0, s.mul(ky, e[10]));
          auto inner = mlir::scf::ForOp::create(
              b, loc, s.c(0), e[5], s.c(1), mlir::ValueRange{it[0], it[1]},
              [&](mlir::OpBuilder& ib, mlir::Location, Value kx, mlir::ValueRange jt) {
                mlir::OpBuilder::InsertionGuard g2(b);
                b.setInsertionPoint(ib.getInsertionBlock(), ib.getInsertionPoint());
                Value ix = s.add(x0, s.mul(kx, e[11]));
                Value ok = mlir::arith::AndIOp::create(
                    b, loc,
                    mlir::arith::AndIOp::create(b, loc, cmp(P::sge, iy, s.c(0)),
                                                cmp(P::slt, iy, e[0])),
                    mlir::arith::AndIOp::create(b, loc, cmp(P::sge, ix, s.c(0)),
                                                cmp(P::slt, ix, e[1])));
                auto pick = mlir::scf::IfOp::create(
                    b, loc, ok,
                    [&](mlir::OpBuilder& tb, mlir::Location) {
                      mlir::OpBuilder::InsertionGuard g3(b);
                      b.setInsertionPoint(tb.getInsertionBlock(), tb.getInsertionPoint());
                      Value at = s.add(w.offsets[0], s.add(s.mul(iy, e[12]), s.mul(ix, e[13])));
                      Value v = bb.convert(s.load(0, at), in, acc);
                      Value first = mlir::arith::CmpIOp::create(
                          b, loc, P::slt, jt[1],
                          mlir::arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
                      Value better =
                          isFloatType(acc)
                              ? mlir::arith::OrIOp::create(
                                    b, loc,
                                    mlir::arith::CmpFOp::create(
                                        b, loc, mlir::arith::CmpFPredicate::OGT, v, jt[0]),
                                    mlir::arith::CmpFOp::create(
                                        b, loc, mlir::arith::CmpFPredicate::UNO, v, v))
                                    .getResult()
                              : bb.compare(OpCode::Gt, v, jt[0], acc);
                      better = mlir::arith::OrIOp::create(b, loc, first, better);
                      Value flat = mlir::arith::IndexCastOp::create(
                          b, loc, b.getI64Type(), s.add(s.mul(iy, e[1]), ix));
                      mlir::scf::YieldOp::create(
                          b, loc,
                          mlir::ValueRange{mlir::arith::SelectOp::create(b, loc, better, v, jt[0]),
                                           mlir::arith::SelectOp::create(b, loc, better, flat,
                                                                         jt[1])});
                    },
                    [&](mlir::OpBuilder& eb, mlir::Location) {
                      mlir::scf::YieldOp::create(eb, loc, mlir::ValueRange{jt[0], jt[1]});
                    });
                mlir::scf::YieldOp::create(b, loc,
                                           mlir::ValueRange{pick.getResult(0), pick.getResult(1)});
              });
          mlir::scf::YieldOp::create(
              b, loc,
              mlir::ValueRange{resultOf(b, loc, inner, 0), resultOf(b, loc, inner, 1)});
        });
    s.store(1, w.offsets[1], resultOf(b, loc, outer, 1));
  });
}

/// uniform / normal: element i of a draw under key (seed, offset) from Philox 4x32-10 with counter
/// (i, 0, offset) and key seed, as the CPU's kernels draw it (weft/runtime/Philox.h), computed in
/// float32 (the CPU rounds from double: a last-bit difference). Operands: the key (int64 [2]),
/// the output; extra p: the key's stride, then the two parameters (low and high, or mean and std)
/// as float32 bits.
void buildRandom(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType out = key.dtypes[1];
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  mlir::Type i32 = b.getI32Type(), i64 = b.getI64Type(), f32 = b.getF32Type();
  auto u32 = [&](uint32_t v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(i32, static_cast<int32_t>(v)))
        .getResult();
  };
  auto fc = [&](float v) {
    return mlir::arith::ConstantOp::create(b, loc, b.getFloatAttr(f32, v)).getResult();
  };
  auto param = [&](int i) {
    Value v = mlir::arith::IndexCastOp::create(b, loc, i32, s.extra(i));
    return mlir::arith::BitcastOp::create(b, loc, f32, v).getResult();
  };
  Value pa = param(1), pb = param(2);
  s.forEachPoint([&](Value point) {
    ShaderBuilder::Walk w = s.walk(point);
    Value seed = s.load(0, w.offsets[0]);
    Value offset = s.load(0, s.add(w.offsets[0], s.extra(0)));
    auto lo = [&](Value v) { return mlir::arith::TruncIOp::create(b, loc, i32, v).getResult(); };
    auto hi = [&](Value v) {
      return mlir::arith::TruncIOp::create(
                 b, loc, i32,
                 mlir::arith::ShRUIOp::create(
                     b, loc, v, mlir::arith::ConstantOp::create(b, loc, b.getIntegerAttr(i64, 32))))
          .getResult();
    };
    std::array<Value, 4> c{mlir::arith::IndexCastOp::create(b, loc, i32, point), u32(0), lo(offset),
                           hi(offset)};
    std::array<Value, 2> k{lo(seed), hi(seed)};
    for (int round = 0; round < 10; ++round) {
      auto p0 = mlir::arith::MulUIExtendedOp::create(b, loc, u32(0xD2511F53u), c[0]);
      auto p1 = mlir::arith::MulUIExtendedOp::create(b, loc, u32(0xCD9E8D57u), c[2]);
      auto x3 = [&](Value a1, Value a2, Value a3) {
        return mlir::arith::XOrIOp::create(b, loc, mlir::arith::XOrIOp::create(b, loc, a1, a2), a3)
            .getResult();
      };
      c = {x3(p1.getHigh(), c[1], k[0]), p1.getLow(), x3(p0.getHigh(), c[3], k[1]), p0.getLow()};
      k = {mlir::arith::AddIOp::create(b, loc, k[0], u32(0x9E3779B9u)),
           mlir::arith::AddIOp::create(b, loc, k[1], u32(0xBB67AE85u))};
    }
    // A uniform float in (0, 1] from 24 bits: ((bits >> 8) + 1) / 2^24.
    auto uniform = [&](Value bits) {
      Value top = mlir::arith::AddIOp::create(
          b, loc, mlir::arith::ShRUIOp::create(b, loc, bits, u32(8)), u32(1));
      return mlir::arith::MulFOp::create(b, loc, mlir::arith::UIToFPOp::create(b, loc, f32, top),
                                         fc(1.0f / 16777216.0f))
          .getResult();
    };
    Value r;
    if (key.op == OpCode::Uniform) {
      Value oneMinus = mlir::arith::SubFOp::create(b, loc, fc(1.0f), uniform(c[0]));
      r = mlir::arith::AddFOp::create(
          b, loc, pa,
          mlir::arith::MulFOp::create(b, loc, mlir::arith::SubFOp::create(b, loc, pb, pa), oneMinus));
    } else {
      Value radius = mlir::math::SqrtOp::create(
          b, loc,
          mlir::arith::MulFOp::create(b, loc, fc(-2.0f), mlir::math::LogOp::create(b, loc, uniform(c[0]))));
      Value angle = mlir::math::CosOp::create(
          b, loc, mlir::arith::MulFOp::create(b, loc, fc(6.283185307179586f), uniform(c[1])));
      r = mlir::arith::AddFOp::create(
          b, loc, pa,
          mlir::arith::MulFOp::create(b, loc, pb, mlir::arith::MulFOp::create(b, loc, radius, angle)));
    }
    s.store(1, w.offsets[1], roundTo(b, loc, bb.convert(r, DType::Float32, out), out));
  });
}

/// The shader `key` as a module of one gpu.func, "main".
mlir::OwningOpRef<mlir::ModuleOp> shaderModule(mlir::MLIRContext& ctx, const ShaderKey& key,
                                               mlir::spirv::TargetEnvAttr env, bool subgroups) {
  mlir::OpBuilder b(&ctx);
  mlir::Location loc = b.getUnknownLoc();
  auto module = mlir::ModuleOp::create(loc);
  module->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  module->setAttr(mlir::spirv::getTargetEnvAttrName(), env);
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = mlir::gpu::GPUModuleOp::create(b, loc, "k");
  b.setInsertionPointToStart(gpuModule.getBody());
  auto dyn = [&](mlir::Type t) { return mlir::MemRefType::get({mlir::ShapedType::kDynamic}, t); };
  std::vector<mlir::Type> args{dyn(b.getI32Type())};
  for (DType t : key.dtypes)
    args.push_back(dyn(memoryType(b, t)));
  if (key.hasStatus()) args.push_back(dyn(b.getI32Type()));
  auto func = mlir::gpu::GPUFuncOp::create(b, loc, "main", b.getFunctionType(args, {}));
  func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  const bool tiled = key.family == ShaderFamily::MatMul;
  func->setAttr(mlir::spirv::getEntryPointABIAttrName(),
                mlir::spirv::getEntryPointABIAttr(
                    &ctx, tiled ? llvm::ArrayRef<int32_t>{16, 16, 1}
                                : llvm::ArrayRef<int32_t>{static_cast<int32_t>(key.workgroupSize),
                                                          1, 1}));
  mlir::Block* entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  ShaderBuilder s(b, loc, key, entry, subgroups);
  switch (key.family) {
  case ShaderFamily::Map:
    buildMap(s, key);
    break;
  case ShaderFamily::Reduce:
    buildReduce(s, key);
    break;
  case ShaderFamily::ArgReduce:
    buildArgReduce(s, key);
    break;
  case ShaderFamily::Normalize:
    buildNormalize(s, key);
    break;
  case ShaderFamily::Scan:
    buildScan(s, key);
    break;
  case ShaderFamily::Gather:
    buildGather(s, key);
    break;
  case ShaderFamily::Scatter:
    buildScatter(s, key);
    break;
  case ShaderFamily::CheckIndex:
    buildCheckIndex(s, key);
    break;
  case ShaderFamily::MatMul:
    if (hal::blockedMatMul(key))
      buildBlockedMatMul(s, key);
    else
      buildMatMul(s, key);
    break;
  case ShaderFamily::Pool:
    buildPool(s, key);
    break;
  case ShaderFamily::Random:
    buildRandom(s, key);
    break;
  case ShaderFamily::Sort:
    buildSort(s, key);
    break;
  }
  mlir::gpu::ReturnOp::create(b, loc);
  return module;
}

/// Whether the op's element computation has a SPIR-V lowering BodyBuilder can build.
bool computes(const ShaderKey& key) {
  if (key.family != ShaderFamily::Map) return true;
  const int n = static_cast<int>(key.dtypes.size()) - 1;
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::arith::ArithDialect, mlir::math::MathDialect>();
  mlir::OpBuilder b(&ctx);
  auto module = mlir::ModuleOp::create(b.getUnknownLoc());
  b.setInsertionPointToEnd(module.getBody());
  OneNode one(key.op, std::span<const DType>(key.dtypes.data(), static_cast<size_t>(n)),
              key.dtypes.back());
  std::vector<Value> in;
  for (int k = 0; k < n; ++k) {
    mlir::Type t = registerType(b, key.dtypes[static_cast<size_t>(k)]);
    mlir::Attribute zero = t.isInteger() ? mlir::Attribute(b.getIntegerAttr(t, 0))
                                         : mlir::Attribute(b.getFloatAttr(t, 0.0));
    in.push_back(mlir::arith::ConstantOp::create(b, b.getUnknownLoc(), mlir::cast<mlir::TypedAttr>(zero)));
  }
  BodyBuilder bb(b, b.getUnknownLoc(), one.g);
  bool ok = static_cast<bool>(bb.node(*one.node, in));
  module->erase();
  return ok;
}

hal::ShaderCode compile(const ShaderKey& key, const std::string& target) {
  hal::ShaderCode code;
  for (DType t : key.dtypes)
    if (t == DType::Float64) {
      code.error = "float64 is not a dtype of GPU devices";
      return code;
    }
  if (!computes(key)) {
    code.error = "codegen builds no element computation for it";
    return code;
  }
  const std::string cacheKey =
      "spirv-op|" + key.str() + "|" + target + "|" + codegenVersion();
  if (auto cached = readCachedKernel(cacheKey); cached && cached->size() % 4 == 0) {
    code.words.resize(cached->size() / 4);
    std::memcpy(code.words.data(), cached->data(), cached->size());
    if (hal::isSpirv(code.words)) return code; // else compiled again below
    code.words.clear();
  }
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::gpu::GPUDialect, mlir::spirv::SPIRVDialect,
                  mlir::func::FuncDialect>();
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic& d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return mlir::success();
  });
  std::string error;
  mlir::spirv::TargetEnvAttr env = targetEnv(ctx, target, error);
  if (!error.empty()) {
    code.error = error;
    return code;
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      shaderModule(ctx, key, env, target.find("GroupNonUniformArithmetic") != std::string::npos);
  if (mlir::failed(mlir::verify(*module))) {
    code.error = "the generated shader does not verify: " + diagnostics;
    return code;
  }
  // Math operations SPIR-V has no instruction for: trunc as floor or ceil by sign, the others
  // expanded (exp2, ...) or approximated by polynomials (erf, erfc, atan2) as MLIR provides them.
  {
    module->walk([&](mlir::math::TruncOp t) {
      mlir::OpBuilder tb(t);
      Value x = t.getOperand();
      Value zero = mlir::arith::ConstantOp::create(tb, t.getLoc(), tb.getFloatAttr(x.getType(), 0.0));
      Value negative = mlir::arith::CmpFOp::create(tb, t.getLoc(), mlir::arith::CmpFPredicate::OLT,
                                                   x, zero);
      Value r = mlir::arith::SelectOp::create(tb, t.getLoc(), negative,
                                              mlir::math::CeilOp::create(tb, t.getLoc(), x),
                                              mlir::math::FloorOp::create(tb, t.getLoc(), x));
      t.replaceAllUsesWith(r);
      t.erase();
    });
    mlir::RewritePatternSet patterns(&ctx);
    mlir::math::populateExpansionPatterns(patterns, {"exp2", "round", "roundeven"});
    mlir::populateMathPolynomialApproximationPatterns(patterns, [](llvm::StringRef op) {
      return op == "math.erf" || op == "math.erfc" || op == "math.atan2" || op == "erf" ||
             op == "erfc" || op == "atan2";
    });
    if (mlir::failed(mlir::applyPatternsGreedily(*module, std::move(patterns)))) {
      code.error = "expanding math operations failed: " + diagnostics;
      return code;
    }
  }
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::createConvertMathToSPIRVPass());
  pm.addPass(mlir::createConvertGPUToSPIRVPass());
  mlir::OpPassManager& spv = pm.nest<mlir::spirv::ModuleOp>();
  spv.addPass(mlir::spirv::createSPIRVLowerABIAttributesPass());
  spv.addPass(mlir::spirv::createSPIRVUpdateVCEPass());
  if (mlir::failed(pm.run(*module))) {
    code.error = "no SPIR-V lowering: " + diagnostics.substr(0, 400);
    return code;
  }
  mlir::spirv::ModuleOp spirvModule;
  module->walk([&](mlir::spirv::ModuleOp m) { spirvModule = m; });
  if (spirvModule && debugFlag("WEFT_DUMP_SHADERS").value_or("0") == "1") {
    llvm::errs() << "// " << key.str() << "\n";
    spirvModule->print(llvm::errs());
    llvm::errs() << "\n";
  }
  llvm::SmallVector<uint32_t, 0> words;
  if (!spirvModule || mlir::failed(mlir::spirv::serialize(spirvModule, words))) {
    code.error = "SPIR-V serialization failed: " + diagnostics;
    return code;
  }
  code.words.assign(words.begin(), words.end());
  std::vector<uint8_t> bytes(code.words.size() * 4);
  std::memcpy(bytes.data(), code.words.data(), bytes.size());
  writeCachedKernel(cacheKey, bytes);
  return code;
}

/// Installs the shader source into the runtime when this library loads.
const bool kInstalled = [] {
  hal::setShaderSource({&compile, &kernelCacheDir});
  return true;
}();

} // namespace
} // namespace weft::codegen
