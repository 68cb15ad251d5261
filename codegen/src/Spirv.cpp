// codegen's SPIR-V path for the op table's per-op shaders (weft/runtime/Shaders.h has their
// families and parameter layout): each is built with OpBuilder as a gpu.func whose arithmetic is
// the fused CPU kernels' own (BodyBuilder, loads and stores from KernelIO.h), lowered by MLIR's
// GPU, math, arith, scf and memref conversions to the SPIR-V dialect, serialized, and cached on
// disk under the device's target. Installed into the runtime when this library loads.
#include "SpirvFactor.h"
#include "SpirvGemm.h"
#include "SpirvLowering.h"
#include "SpirvShader.h"
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

std::string lowerToSpirv(mlir::MLIRContext& ctx, mlir::ModuleOp module,
                         const std::string& diagnostics, bool exactProducts,
                         const std::string& name, std::vector<uint32_t>& words) {
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
    if (mlir::failed(mlir::applyPatternsGreedily(module, std::move(patterns))))
      return "expanding math operations failed: " + diagnostics;
  }
  mlir::PassManager pm(&ctx);
  pm.addPass(mlir::createConvertMathToSPIRVPass());
  pm.addPass(mlir::createConvertGPUToSPIRVPass());
  mlir::OpPassManager& spv = pm.nest<mlir::spirv::ModuleOp>();
  spv.addPass(mlir::spirv::createSPIRVLowerABIAttributesPass());
  spv.addPass(mlir::spirv::createSPIRVUpdateVCEPass());
  if (mlir::failed(pm.run(module))) return "no SPIR-V lowering: " + diagnostics.substr(0, 400);
  mlir::spirv::ModuleOp spirvModule;
  module->walk([&](mlir::spirv::ModuleOp m) { spirvModule = m; });
  if (spirvModule && exactProducts) {
    // The factorizations round each product and sum as the CPU's LAPACK does: a driver fusing
    // l * u and its subtraction into one FMA (NVIDIA's does) leaves a residue where LAPACK finds
    // a pivot exactly zero, and a singular matrix is then no error.
    spirvModule->walk([&](mlir::Operation* op) {
      if (mlir::isa<mlir::spirv::FMulOp, mlir::spirv::FAddOp, mlir::spirv::FSubOp>(op))
        op->setAttr("no_contraction", mlir::UnitAttr::get(&ctx));
    });
  }
  if (spirvModule && debugFlag("WEFT_DUMP_SHADERS").value_or("0") == "1") {
    llvm::errs() << "// " << name << "\n";
    spirvModule->print(llvm::errs());
    llvm::errs() << "\n";
  }
  llvm::SmallVector<uint32_t, 0> spirvWords;
  if (!spirvModule || mlir::failed(mlir::spirv::serialize(spirvModule, spirvWords)))
    return "SPIR-V serialization failed: " + diagnostics;
  words.assign(spirvWords.begin(), spirvWords.end());
  return "";
}

std::unique_ptr<mlir::MLIRContext> newShaderContext() {
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect, mlir::gpu::GPUDialect, mlir::spirv::SPIRVDialect,
                  mlir::func::FuncDialect>();
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

namespace {

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
    if (key.hasStatus()) { // an integer division: a zero divisor is reported
      Value zero = bb.constantInteger(key.dtypes[1], 0);
      s.when(mlir::arith::CmpIOp::create(s.b(), s.loc(), mlir::arith::CmpIPredicate::eq, in[1],
                                         zero),
             [&] { s.recordBad(mlir::arith::ConstantOp::create(s.b(), s.loc(),
                                                               s.b().getI64IntegerAttr(0))); });
    }
    s.store(n, w.offsets.back(), bb.node(*one.node, in));
  });
}

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
  const DType in = key.dtypes[0], out = key.dtypes[1],
              f = in == DType::Float64 ? DType::Float64 : DType::Float32;
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

/// index_add through a stable ascending order of its index (ShaderKey{Scatter, IndexAdd}):
/// operands self, index, order (the index line's argsort), src, out. A point binary-searches the
/// order for the first index reaching its coordinate along `dim` and adds the src elements of
/// every index equal to it, in the order they come in the line (as the CPU adds them): work per
/// point in the log of the line and its matches, not the line. The first point reports an index
/// past either end of [0, dimSize).
void buildSortedScatter(ShaderBuilder& s, const ShaderKey& key) {
  mlir::OpBuilder& b = s.b();
  mlir::Location loc = s.loc();
  const DType out = key.dtypes[4], acc = accumulateType(out);
  using P = mlir::arith::CmpIPredicate;
  ir::Graph none;
  BodyBuilder bb(b, loc, none);
  s.forEachPoint([&](Value point) {
    Value dim = s.extra(0), size = s.extra(1);
    ShaderBuilder::Walk w = s.walk(point, dim, s.add(s.lineBase(), s.c(1 + 5 + 2)));
    Value n = s.lineLength(), li = s.lineStride(1), lo = s.lineStride(2), ls = s.lineStride(3);
    auto indexAt = [&](Value k) { // index[order[k]]
      Value j = s.index(s.load(2, s.add(w.offsets[2], s.mul(k, lo))));
      return s.load(1, s.add(w.offsets[1], s.mul(j, li)));
    };
    s.when(mlir::arith::CmpIOp::create(b, loc, P::eq, point, s.c(0)), [&] {
      Value size64 = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), size);
      Value first = indexAt(s.c(0));
      Value last = indexAt(mlir::arith::SubIOp::create(b, loc, n, s.c(1)));
      s.when(mlir::arith::CmpIOp::create(b, loc, P::uge, first, size64),
             [&] { s.recordBad(first); });
      s.when(mlir::arith::CmpIOp::create(b, loc, P::sge, last, size64),
             [&] { s.recordBad(last); });
    });
    Value coord = mlir::arith::IndexCastOp::create(b, loc, b.getI64Type(), w.coordinate);
    // lower_bound: the first k whose index is >= coord, in [0, n].
    auto search = mlir::scf::WhileOp::create(
        b, loc, mlir::TypeRange{b.getIndexType(), b.getIndexType()}, mlir::ValueRange{s.c(0), n},
        [&](mlir::OpBuilder& cb, mlir::Location, mlir::ValueRange range) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(cb.getInsertionBlock(), cb.getInsertionPoint());
          Value more = mlir::arith::CmpIOp::create(b, loc, P::ult, range[0], range[1]);
          mlir::scf::ConditionOp::create(b, loc, more, range);
        },
        [&](mlir::OpBuilder& db, mlir::Location, mlir::ValueRange range) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(db.getInsertionBlock(), db.getInsertionPoint());
          Value mid = s.add(range[0], mlir::arith::ShRUIOp::create(
                                          b, loc, mlir::arith::SubIOp::create(b, loc, range[1],
                                                                              range[0]),
                                          s.c(1)));
          Value below = mlir::arith::CmpIOp::create(b, loc, P::slt, indexAt(mid), coord);
          Value from = mlir::arith::SelectOp::create(b, loc, below, s.add(mid, s.c(1)), range[0]);
          Value to = mlir::arith::SelectOp::create(b, loc, below, range[1], mid);
          mlir::scf::YieldOp::create(b, loc, mlir::ValueRange{from, to});
        });
    Value start = bb.convert(s.load(0, w.offsets[0]), key.dtypes[0], acc);
    Value valid = w.inLimits;
    // Every k from there whose index equals coord, in order.
    auto sum = mlir::scf::WhileOp::create(
        b, loc, mlir::TypeRange{b.getIndexType(), registerType(b, acc)},
        mlir::ValueRange{search.getResult(0), start},
        [&](mlir::OpBuilder& cb, mlir::Location, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(cb.getInsertionBlock(), cb.getInsertionPoint());
          Value inLine = mlir::arith::AndIOp::create(
              b, loc, valid, mlir::arith::CmpIOp::create(b, loc, P::ult, it[0], n));
          // (reads index[order[min(k, n - 1)]]: defined even past the line's end)
          Value k = mlir::arith::MinUIOp::create(b, loc, it[0],
                                                 mlir::arith::SubIOp::create(b, loc, n, s.c(1)));
          Value same = mlir::arith::CmpIOp::create(b, loc, P::eq, indexAt(k), coord);
          mlir::scf::ConditionOp::create(b, loc, mlir::arith::AndIOp::create(b, loc, inLine, same),
                                         it);
        },
        [&](mlir::OpBuilder& db, mlir::Location, mlir::ValueRange it) {
          mlir::OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(db.getInsertionBlock(), db.getInsertionPoint());
          Value j = s.index(s.load(2, s.add(w.offsets[2], s.mul(it[0], lo))));
          Value x = bb.convert(s.load(3, s.add(w.offsets[3], s.mul(j, ls))), key.dtypes[3], acc);
          mlir::scf::YieldOp::create(
              b, loc,
              mlir::ValueRange{s.add(it[0], s.c(1)), combine(b, loc, OpCode::Sum, acc, it[1], x)});
        });
    s.store(4, w.offsets[4], roundTo(b, loc, bb.convert(sum.getResult(1), acc, out), out));
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
    if (key.op == OpCode::IndexAdd)
      buildSortedScatter(s, key);
    else
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
  case ShaderFamily::Factor:
    buildFactor(s, key);
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
  ctx.loadDialect<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::scf::SCFDialect>();
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

/// Why a float64 shader cannot be made, or "": GLSL's exp, log, sin and the other transcendental
/// instructions are 32-bit only, so float64 gets arithmetic, comparisons, sqrt and rounding; and
/// the random families draw in float32 (float64 draws are the CPU's).
std::string float64Refusal(const ShaderKey& key, mlir::ModuleOp module) {
  if (key.family == ShaderFamily::Random) return "float64 random numbers are drawn on the CPU";
  std::string refused;
  module->walk([&](mlir::Operation* op) {
    if (op->getDialect() == nullptr || op->getDialect()->getNamespace() != "math") return;
    const bool wide = llvm::any_of(op->getOperandTypes(), [](mlir::Type t) { return t.isF64(); });
    const llvm::StringRef name = op->getName().getStringRef();
    if (wide && refused.empty() &&
        !llvm::is_contained({"math.sqrt", "math.rsqrt", "math.absf", "math.floor", "math.ceil",
                             "math.round", "math.roundeven", "math.trunc", "math.fma",
                             "math.copysign"},
                            name))
      refused = "Vulkan computes " + name.str() + " in 32 bits only, so not in float64";
  });
  return refused;
}

hal::ShaderCode compile(const ShaderKey& key, const std::string& target) {
  hal::ShaderCode code;
  const bool float64 = llvm::is_contained(key.dtypes, DType::Float64);
  if (float64 && target.find("Float64") == std::string::npos) {
    code.error = "the device has no float64 in shaders";
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
  std::unique_ptr<mlir::MLIRContext> context = newShaderContext();
  mlir::MLIRContext& ctx = *context;
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
  if (float64) {
    if (std::string why = float64Refusal(key, *module); !why.empty()) {
      code.error = why;
      return code;
    }
  }
  if (std::string why = lowerToSpirv(ctx, *module, diagnostics,
                                     key.family == ShaderFamily::Factor, key.str(), code.words);
      !why.empty()) {
    code.error = why;
    return code;
  }
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
