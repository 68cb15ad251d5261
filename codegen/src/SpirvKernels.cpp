// The fused elementwise groups of programs compiled for a GPU device, as SPIR-V kernels: one
// gpu.func per group, its invocations striding over the elements of the group's shape (the sizes
// built in), its scalar computation the CPU kernels' own (computeNodes, BodyBuilder), lowered as
// the per-op shaders are (lowerToSpirv). Kernels are cached on disk by their group's key, as the CPU's are.
#include "weft/codegen/Spirv.h"

#include "GroupKernel.h"
#include "KernelIO.h"
#include "SpirvLowering.h"
#include "weft/codegen/KernelCache.h"
#include "weft/runtime/Shaders.h"
#include "weft/runtime/ThreadPool.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <limits>

namespace weft::codegen {
namespace {

using mlir::Value;

/// Why `grp` cannot be one SPIR-V kernel, or "": each invocation computes the group's nodes at
/// one element of its shape, so every output has that shape and every input broadcasts to it.
std::string cannotBuild(const ir::Graph& g, const ir::FusionGroup& grp, const SpirvTarget& target) {
  if (passes::matmulRoot(g, grp) != nullptr) return "a matmul leads it";
  if (grp.inputs.size() + grp.outputs.size() > target.maxOperands())
    return "it reads and writes " + std::to_string(grp.inputs.size() + grp.outputs.size()) +
           " buffers, more than a shader binds on the device";
  if (numel(grp.shape) == 0) return "it is empty"; // (the interpreter's steps do nothing)
  if (numel(grp.shape) >= std::numeric_limits<int32_t>::max())
    return "its shape " + shapeString(grp.shape) + " has 2^31 elements or more";
  for (int32_t i : grp.leaves)
    if (passes::isViewLeaf(g, g.nodes()[static_cast<size_t>(i)])) return "it reads a view";
  for (int32_t i : grp.nodes) {
    const ir::Node& n = g.nodes()[static_cast<size_t>(i)];
    if (passes::isRowReduction(g, n) || passes::isColumnReduction(g, n)) return "it reduces";
  }
  if (grp.inPlace.size() > grp.outputs.size()) return "it writes over more inputs than outputs";
  if (!grp.parts.empty()) return ""; // each part's values are checked as its body is built
  for (ValueId v : grp.outputs)
    if (g.type(v).shape != grp.shape) return "an output's shape is not the group's";
  for (ValueId v : grp.inputs)
    if (!broadcastsTo(g.type(v).shape, grp.shape))
      return "an input does not broadcast to the group's shape";
  for (int32_t over : grp.inPlace)
    if (over >= 0 && (static_cast<size_t>(over) >= grp.inputs.size() ||
                      g.type(grp.inputs[static_cast<size_t>(over)]).shape != grp.shape))
      return "it writes over an input of another shape";
  return "";
}

/// The body of a horizontal kernel (FusionGroup::parts) at `point` of its index space, the parts'
/// elements one after another: the part holding the point computes its outputs there, each value
/// it reads having the part's elements or one (read at offset 0), all of them before it stores
/// any (outputs are written over inputs). A part reading an input another part's output is
/// written over fails (that part's invocations may have written it already), as on the CPU. False where a part reads a
/// value of another size or a node codegen cannot compute.
bool buildParts(mlir::OpBuilder& b, mlir::Location loc, const ir::Graph& g,
                const ir::FusionGroup& grp, mlir::Block* entry, const std::vector<Value>& offsets,
                Value point,
                const std::function<void(mlir::OpBuilder&, size_t, Value, Value)>& store) {
  std::map<ValueId, const ir::Node*> nodeOf;
  for (int32_t i : grp.leaves)
    nodeOf[g.nodes()[static_cast<size_t>(i)].result] = &g.nodes()[static_cast<size_t>(i)];
  for (int32_t i : grp.nodes)
    nodeOf[g.nodes()[static_cast<size_t>(i)].result] = &g.nodes()[static_cast<size_t>(i)];
  std::map<size_t, size_t> writtenBy; // input -> the output written over it
  for (size_t k = 0; k < grp.inPlace.size() && k < grp.outputs.size(); ++k)
    if (grp.inPlace[k] >= 0) writtenBy[static_cast<size_t>(grp.inPlace[k])] = k;
  bool ok = true;
  int64_t start = 0;
  for (const Shape& part : grp.parts) {
    const int64_t count = numel(part), at = start;
    start += count;
    std::vector<size_t> outputs; // of this part
    for (size_t k = 0; k < grp.outputs.size(); ++k)
      if (g.type(grp.outputs[k]).shape == part) outputs.push_back(k);
    if (outputs.empty()) continue;
    using P = mlir::arith::CmpIPredicate;
    Value from = mlir::arith::ConstantIndexOp::create(b, loc, at);
    Value inside = mlir::arith::AndIOp::create(
        b, loc, mlir::arith::CmpIOp::create(b, loc, P::uge, point, from),
        mlir::arith::CmpIOp::create(
            b, loc, P::ult, point, mlir::arith::ConstantIndexOp::create(b, loc, at + count)));
    mlir::scf::IfOp::create(b, loc, inside, [&](mlir::OpBuilder& ib, mlir::Location) {
      Value local = mlir::arith::SubIOp::create(ib, loc, point, from);
      BodyBuilder bb(ib, loc, g);
      std::map<ValueId, Value> values;
      std::function<Value(ValueId)> eval = [&](ValueId v) -> Value {
        if (auto it = values.find(v); it != values.end()) return it->second;
        const int64_t n = numel(g.type(v).shape);
        if (n != 1 && n != count) return {}; // another part's
        Value r;
        auto in = std::find(grp.inputs.begin(), grp.inputs.end(), v);
        if (in != grp.inputs.end()) {
          const auto i = static_cast<size_t>(in - grp.inputs.begin());
          // Another part's invocations may already have written over it: no such kernel.
          if (auto over = writtenBy.find(i);
              over != writtenBy.end() &&
              std::find(outputs.begin(), outputs.end(), over->second) == outputs.end())
            return {};
          Value where = n == 1 ? offsets[i] : mlir::arith::AddIOp::create(ib, loc, offsets[i], local);
          r = loadElement(ib, loc, entry->getArgument(static_cast<unsigned>(1 + i)), where,
                          g.type(v).dtype);
        } else if (auto node = nodeOf.find(v); node != nodeOf.end()) {
          std::vector<Value> operands;
          for (ValueId o : node->second->operands) {
            operands.push_back(eval(o));
            if (!operands.back()) return {};
          }
          r = bb.node(*node->second, operands);
        }
        if (r) values[v] = r;
        return r;
      };
      // Every value first, then the stores: an output written over an input another output
      // reads must not be stored before that read.
      std::vector<Value> results;
      for (size_t k : outputs) {
        results.push_back(eval(grp.outputs[k]));
        ok = ok && results.back();
      }
      for (size_t j = 0; ok && j < outputs.size(); ++j)
        store(ib, outputs[j], results[j], local);
      mlir::scf::YieldOp::create(ib, loc);
    });
  }
  return ok;
}

/// The module of `grp`'s kernel: gpu.func "main"(params, inputs..., outputs...), each a flat
/// memref, params[k] operand k's offset in elements; a grid-stride loop over the group's points,
/// each invocation loading its inputs (broadcast: their strides are 0 where they broadcast),
/// computing the nodes and storing the outputs. Null where the computation cannot be built.
mlir::OwningOpRef<mlir::ModuleOp> kernelModule(mlir::MLIRContext& ctx, const ir::Graph& g,
                                               const ir::FusionGroup& grp,
                                               mlir::spirv::TargetEnvAttr env,
                                               uint32_t workgroupSize) {
  mlir::OpBuilder b(&ctx);
  mlir::Location loc = b.getUnknownLoc();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  (*module)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  (*module)->setAttr(mlir::spirv::getTargetEnvAttrName(), env);
  b.setInsertionPointToEnd(module->getBody());
  auto gpuModule = mlir::gpu::GPUModuleOp::create(b, loc, "k");
  b.setInsertionPointToStart(gpuModule.getBody());
  auto flat = [&](mlir::Type t) { return mlir::MemRefType::get({mlir::ShapedType::kDynamic}, t); };
  std::vector<mlir::Type> args{flat(b.getI32Type())};
  for (ValueId v : grp.inputs)
    args.push_back(flat(memoryType(b, g.type(v).dtype)));
  for (ValueId v : grp.outputs)
    args.push_back(flat(memoryType(b, g.type(v).dtype)));
  auto func = mlir::gpu::GPUFuncOp::create(b, loc, "main", b.getFunctionType(args, {}));
  func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  func->setAttr(mlir::spirv::getEntryPointABIAttrName(),
                mlir::spirv::getEntryPointABIAttr(
                    &ctx, llvm::ArrayRef<int32_t>{static_cast<int32_t>(workgroupSize), 1, 1}));
  mlir::Block* entry = &func.getBody().front();
  b.setInsertionPointToStart(entry);
  auto c = [&](int64_t v) -> Value { return mlir::arith::ConstantIndexOp::create(b, loc, v); };
  auto param = [&](size_t k) -> Value {
    Value v = mlir::memref::LoadOp::create(b, loc, entry->getArgument(0),
                                           mlir::ValueRange{c(static_cast<int64_t>(k))});
    return mlir::arith::IndexCastOp::create(b, loc, b.getIndexType(), v);
  };
  std::vector<Value> offsets;
  for (size_t k = 0; k < grp.inputs.size() + grp.outputs.size(); ++k)
    offsets.push_back(param(k));
  const Shape& shape = grp.shape;
  Value step = mlir::arith::MulIOp::create(
      b, loc, mlir::gpu::GridDimOp::create(b, loc, mlir::gpu::Dimension::x),
      mlir::gpu::BlockDimOp::create(b, loc, mlir::gpu::Dimension::x));
  Value first = mlir::gpu::GlobalIdOp::create(b, loc, mlir::gpu::Dimension::x);
  bool built = true;
  auto store = [&](mlir::OpBuilder& nb, size_t k, Value v, Value at) {
    const size_t operand = grp.inputs.size() + k;
    mlir::memref::StoreOp::create(
        nb, loc, toMemory(nb, loc, v, g.type(grp.outputs[k]).dtype),
        entry->getArgument(static_cast<unsigned>(1 + operand)),
        mlir::ValueRange{mlir::arith::AddIOp::create(nb, loc, offsets[operand], at)});
  };
  mlir::scf::ForOp::create(
      b, loc, first, c(std::max<int64_t>(numel(shape), 1)), step, mlir::ValueRange{}, // [] is 1
      [&](mlir::OpBuilder& nb, mlir::Location, Value point, mlir::ValueRange) {
        if (!grp.parts.empty()) {
          built = buildParts(nb, loc, g, grp, entry, offsets, point, store);
          mlir::scf::YieldOp::create(nb, loc);
          return;
        }
        std::vector<Value> coords; // the point's index along each dim, made where one is read
        auto coordinates = [&]() -> const std::vector<Value>& {
          if (!coords.empty() || shape.empty()) return coords;
          coords.resize(shape.size());
          Value rest = point;
          for (size_t d = shape.size(); d-- > 0;) {
            coords[d] = mlir::arith::RemUIOp::create(nb, loc, rest, c(shape[d]));
            rest = mlir::arith::DivUIOp::create(nb, loc, rest, c(shape[d]));
          }
          return coords;
        };
        std::map<ValueId, Value> values;
        for (size_t i = 0; i < grp.inputs.size(); ++i) {
          const ir::TensorType& t = g.type(grp.inputs[i]);
          Value at = t.shape == shape           ? point
                     : numel(t.shape) == 1      ? c(0)
                                                : linearIndex(nb, loc, coordinates(),
                                                              broadcastStrides(t.shape, shape));
          at = mlir::arith::AddIOp::create(nb, loc, offsets[i], at);
          values[grp.inputs[i]] =
              loadElement(nb, loc, entry->getArgument(static_cast<unsigned>(1 + i)), at, t.dtype);
        }
        if (!computeNodes(nb, loc, g, grp, values)) built = false;
        for (size_t k = 0; built && k < grp.outputs.size(); ++k) {
          auto it = values.find(grp.outputs[k]);
          if (it == values.end()) {
            built = false;
            break;
          }
          store(nb, k, it->second, point);
        }
        mlir::scf::YieldOp::create(nb, loc);
      });
  mlir::gpu::ReturnOp::create(b, loc);
  if (!built) return {};
  return module;
}

/// `grp`'s kernel as SPIR-V words, or why there is none.
std::string buildKernel(const ir::Graph& g, const ir::FusionGroup& grp, const SpirvTarget& target,
                        std::vector<uint32_t>& words) {
  if (std::string why = cannotBuild(g, grp, target); !why.empty()) return why;
  std::unique_ptr<mlir::MLIRContext> ctx = newShaderContext();
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(ctx.get(), [&](mlir::Diagnostic& d) {
    llvm::raw_string_ostream os(diagnostics);
    os << d << "\n";
    return mlir::success();
  });
  std::string error;
  mlir::spirv::TargetEnvAttr env = targetEnv(*ctx, target.code, error);
  if (!error.empty()) return error;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      kernelModule(*ctx, g, grp, env, target.workgroupSize);
  if (!module) return cannotLower(g, grp);
  if (mlir::failed(mlir::verify(*module)))
    return "the generated kernel does not verify: " + diagnostics;
  return lowerToSpirv(*ctx, *module, diagnostics, false, "kernel " + shapeString(grp.shape),
                      words);
}

} // namespace

ir::Result<GroupKernels> compileSpirvKernels(const ir::Graph& g,
                                             std::span<const ir::FusionGroup> groups,
                                             const SpirvTarget& target) {
  GroupKernels result;
  result.kernelOf.assign(groups.size(), -1);
  result.failures.assign(groups.size(), "");
  if (groups.empty()) return result;
  const std::string targetKey =
      "spirv " + target.code + " wg" + std::to_string(target.workgroupSize);
  const GroupKeys named = keysOf(g, groups, targetKey);
  const std::vector<std::string>& keys = named.keys;
  const std::vector<std::string>& symbols = named.symbols;
  const std::vector<size_t>& distinct = named.distinct;
  // Each kernel from the disk cache, or compiled in parallel (each in its own context).
  std::vector<std::vector<uint32_t>> words(distinct.size());
  std::vector<std::string> errors(distinct.size());
  std::vector<size_t> missing;
  for (size_t i = 0; i < distinct.size(); ++i) {
    std::optional<std::vector<uint8_t>> cached = readCachedKernel(keys[distinct[i]]);
    if (cached && cached->size() % 4 == 0) {
      words[i].resize(cached->size() / 4);
      std::memcpy(words[i].data(), cached->data(), cached->size());
      if (hal::isSpirv(words[i])) continue;
    }
    missing.push_back(i);
  }
  std::atomic<size_t> next{0};
  const auto workers = std::min<int64_t>(getNumThreads(), static_cast<int64_t>(missing.size()));
  parallelFor(std::max<int64_t>(workers, 1), 1, [&](int64_t, int64_t) {
    for (size_t m; (m = next.fetch_add(1)) < missing.size();) {
      const size_t i = missing[m], k = distinct[i];
      errors[i] = buildKernel(g, groups[k], target, words[i]);
      if (!errors[i].empty()) continue;
      std::vector<uint8_t> bytes(words[i].size() * 4);
      std::memcpy(bytes.data(), words[i].data(), bytes.size());
      writeCachedKernel(keys[k], bytes);
    }
  });
  std::vector<hal::SpirvKernel> kernels;
  for (size_t i = 0; i < distinct.size(); ++i) {
    const size_t k = distinct[i];
    if (!errors[i].empty()) {
      for (size_t j = 0; j < groups.size(); ++j)
        if (symbols[j] == symbols[k]) result.failures[j] = errors[i];
      continue;
    }
    const auto bindings = static_cast<uint32_t>(1 + groups[k].inputs.size() + groups[k].outputs.size());
    kernels.push_back(hal::SpirvKernel{symbols[k], bindings, target.workgroupSize, std::move(words[i])});
  }
  if (kernels.empty()) return result;
  result.table.code = {hal::CodeObject{hal::kSpirvKernelsFormat, target.code,
                                       hal::packSpirvKernels(kernels), {}}};
  for (size_t k = 0; k < groups.size(); ++k) {
    if (!result.failures[k].empty()) continue;
    result.kernelOf[k] = static_cast<int32_t>(result.table.kernels.size());
    result.table.kernels.push_back(
        hal::KernelInfo{symbols[k], std::max<int64_t>(numel(groups[k].shape), 1), 1});
  }
  return result;
}

} // namespace weft::codegen
