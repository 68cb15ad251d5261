// From an MLIR module of kernels to CPU machine code: lowering to the LLVM dialect, LLVM IR with a
// packed entry per kernel, O2 for the chosen CPU, a position-independent object, and lld to link
// objects into the shared object the runtime loads.
#include "JitInternal.h"
#include "weft/runtime/DebugFlags.h"

#include "lld/Common/Driver.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/TransformOps/DialectExtension.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Transform/IR/TransformDialect.h"
#include "mlir/Dialect/Transform/LoopExtension/LoopExtension.h"
#include "mlir/Dialect/Transform/Transforms/TransformInterpreterUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Vector/TransformOps/VectorTransformOps.h"
#include "mlir/Dialect/Vector/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/Transforms/SubsetOpInterfaceImpl.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <link.h>
#include <mutex>
#include <unistd.h>

LLD_HAS_DRIVER(elf)

namespace weft::codegen {
namespace {

void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// The first word of a code target: the runtime's name for the triple's architecture.
std::string archWord(const std::string& triple) {
  return triple.substr(0, triple.find('-'));
}

/// With WEFT_DUMP_DIR set: writes `module` to <dir>/kernels-<n>.<tag>.mlir.
void dumpModule(mlir::ModuleOp module, int n, const char* tag) {
  std::string dir = debugFlag("WEFT_DUMP_DIR").value_or("");
  if (dir.empty()) return;
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  std::ofstream(dir + "/kernels-" + std::to_string(n) + "." + tag + ".mlir") << text;
}

/// With WEFT_DUMP_DIR set: writes the optimized LLVM IR of kernel set `n` to
/// <dir>/kernels-<n>.opt.ll (to see what LLVM vectorized).
void dumpLlvm(const llvm::Module& m, int n) {
  std::string dir = debugFlag("WEFT_DUMP_DIR").value_or("");
  if (dir.empty()) return;
  std::string text;
  llvm::raw_string_ostream os(text);
  m.print(os, nullptr);
  std::ofstream(dir + "/kernels-" + std::to_string(n) + ".opt.ll") << text;
}

/// Adds `void symbol(void** args)` calling `_mlir_ciface_<func>` with the values args[i] point
/// to, and hides every other definition, so that kernels from many objects link side by side.
bool addPackedEntries(llvm::Module& m, std::span<const KernelEntry> entries) {
  llvm::LLVMContext& ctx = m.getContext();
  std::vector<llvm::Function*> wrappers;
  for (const KernelEntry& e : entries) {
    llvm::Function* body = m.getFunction("_mlir_ciface_" + e.function);
    if (body == nullptr) return false;
    auto* ptr = llvm::PointerType::getUnqual(ctx);
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr}, false);
    auto* w = llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, e.symbol, m);
    llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", w));
    std::vector<llvm::Value*> args;
    for (unsigned i = 0; i < body->arg_size(); ++i) {
      llvm::Value* slot = b.CreateLoad(ptr, b.CreateConstGEP1_64(ptr, w->getArg(0), i));
      args.push_back(b.CreateLoad(body->getArg(i)->getType(), slot));
    }
    b.CreateCall(body, args);
    b.CreateRetVoid();
    wrappers.push_back(w);
  }
  for (llvm::Function& f : m.functions())
    if (!f.isDeclaration() && std::find(wrappers.begin(), wrappers.end(), &f) == wrappers.end())
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  return true;
}

} // namespace

ir::Diagnostic failure(const std::string& what) {
  return ir::diag(ErrorKind::Internal, "codegen: ", what);
}

namespace {

/// The dialects kernels are built and lowered in: registered and loaded in every context.
template <typename... Dialects> struct DialectList {
  static void insert(mlir::DialectRegistry& registry) { registry.insert<Dialects...>(); }
  static void load(mlir::MLIRContext& context) { context.loadDialect<Dialects...>(); }
};
using KernelDialects =
    DialectList<mlir::affine::AffineDialect, mlir::arith::ArithDialect,
                mlir::bufferization::BufferizationDialect, mlir::cf::ControlFlowDialect,
                mlir::func::FuncDialect, mlir::linalg::LinalgDialect, mlir::LLVM::LLVMDialect,
                mlir::math::MathDialect, mlir::memref::MemRefDialect, mlir::scf::SCFDialect,
                mlir::tensor::TensorDialect, mlir::vector::VectorDialect>;

} // namespace

std::unique_ptr<mlir::MLIRContext> newContext() {
  mlir::DialectRegistry registry;
  KernelDialects::insert(registry);
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::linalg::registerTilingInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::vector::registerBufferizableOpInterfaceExternalModels(registry);
  registry.insert<mlir::transform::TransformDialect>(); // the generated GEMMs' schedule
  mlir::linalg::registerTransformDialectExtension(registry);
  mlir::vector::registerTransformDialectExtension(registry);
  mlir::transform::registerLoopExtension(registry);
  mlir::vector::registerSubsetOpInterfaceExternalModels(registry); // hoisting the accumulators
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  // One thread per context: kernels are compiled in parallel, each in its own context.
  auto context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  // The transform dialect loads only where a schedule is parsed (a module with a GEMM), as it
  // and its extensions take time to load.
  KernelDialects::load(*context);
  return context;
}

CpuTarget CpuTarget::host() {
  initNativeTarget();
  CpuTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = llvm::sys::getHostCPUName().str();
  std::vector<std::string> on;
  for (const auto& f : llvm::sys::getHostCPUFeatures())
    if (f.second) on.push_back(f.first().str());
  std::sort(on.begin(), on.end()); // a StringMap's order is not stable
  for (const std::string& f : on)
    t.features += (t.features.empty() ? "+" : ",+") + f;
  return t;
}

ir::Result<CpuTarget> CpuTarget::named(const std::string& cpu) {
  initNativeTarget();
  CpuTarget t;
  t.triple = llvm::sys::getProcessTriple();
  t.cpu = cpu;
  if (archWord(t.triple) != "x86_64")
    return ir::diag(ErrorKind::Value, "codegen: named CPU targets are x86-64 only so far");
  llvm::SmallVector<llvm::StringRef, 64> features;
  if (llvm::X86::parseArchX86(cpu, true) != llvm::X86::CK_None)
    llvm::X86::getFeaturesForCPU(cpu, features, true);
  if (features.empty())
    return ir::diag(ErrorKind::Value, "codegen: LLVM knows no x86-64 CPU called '", cpu,
                    "' (try x86-64-v2, x86-64-v3, x86-64-v4 or a CPU name such as znver4)");
  std::vector<std::string> on(features.begin(), features.end());
  std::sort(on.begin(), on.end());
  for (const std::string& f : on)
    t.features += (t.features.empty() ? "" : ",") + f;
  return t;
}

std::string CpuTarget::codeTarget() const {
  return archWord(triple) + " " + cpu + " " + features;
}

namespace {

/// The transform schedule of generated GEMMs (MatmulKernel.h): each marked linalg.matmul, of
/// static shape [MR, K] x [K, NR] (or [1, K] x [K, NR] for a tile's last rows), is tiled by 1 along
/// K and vectorized (with K = 1, vectorized whole), and so is the zero fill of its accumulator; the
/// accumulator's reads and writes move out of the K loop (it stays in registers), and each step's
/// contraction becomes MR outer products: a broadcast element of A times a row of the panel, added
/// with one FMA per vector of NR.
constexpr const char* kGemmSchedule = R"mlir(
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %mm = transform.structured.match ops{["linalg.matmul"]} attributes{weft.gemm} in %root
        : (!transform.any_op) -> !transform.any_op
    %step, %k = transform.structured.tile_using_for %mm tile_sizes [0, 0, 1]
        : (!transform.any_op) -> (!transform.any_op, !transform.any_op)
    transform.structured.vectorize %step : !transform.any_op
    %fill = transform.structured.match ops{["linalg.fill"]} attributes{weft.gemm} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %fill : !transform.any_op
    %whole = transform.structured.match ops{["linalg.matmul"]} attributes{weft.gemm_whole}
        in %root : (!transform.any_op) -> !transform.any_op
    transform.structured.vectorize %whole : !transform.any_op
    %f = transform.structured.match ops{["func.func"]} in %root
        : (!transform.any_op) -> !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %k : !transform.any_op
    transform.apply_patterns to %f {
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_multi_reduction lowering_strategy = "innerparallel"
      transform.apply_patterns.vector.lower_transfer max_transfer_rank = 1
      transform.apply_patterns.vector.lower_shape_cast
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
)mlir";

} // namespace

mlir::LogicalResult scheduleGemms(mlir::ModuleOp module) {
  bool any = false;
  module->walk([&](mlir::linalg::FillOp op) { any = any || op->hasAttr(kGemmTag); });
  if (!any) return mlir::success();
  mlir::OwningOpRef<mlir::ModuleOp> schedule =
      mlir::parseSourceString<mlir::ModuleOp>(kGemmSchedule, module->getContext());
  if (!schedule) return mlir::failure();
  auto* entry = schedule->lookupSymbol("__transform_main");
  if (entry == nullptr) return mlir::failure();
  // Without the interpreter's expensive checks (handle invalidation): the schedule is fixed and
  // tested, and they cost compile time on every GEMM kernel.
  return mlir::transform::applyTransformNamedSequence(
      module, entry, *schedule, mlir::transform::TransformOptions().enableExpensiveChecks(false));
}

ir::Result<std::vector<uint8_t>> compileToObject(mlir::ModuleOp module, const CpuTarget& target,
                                                 std::span<const KernelEntry> entries) {
  static std::atomic<int> counter{0};
  int n = counter++;
  // MLIR's errors become the failure's text rather than lines on stderr: a kernel that fails runs
  // in the interpreter, and WEFT_LOG_FALLBACKS=1 says why.
  std::string errors;
  mlir::ScopedDiagnosticHandler collect(module->getContext(), [&](mlir::Diagnostic& d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error && errors.size() < 4096)
      errors += (errors.empty() ? "" : "; ") + d.str();
    return mlir::success();
  });
  auto failure = [&](const std::string& what) {
    return codegen::failure(errors.empty() ? what : what + ": " + errors);
  };
  dumpModule(module, n, "input");
  if (mlir::failed(mlir::verify(module))) return failure("the generated module does not verify");
  if (mlir::failed(scheduleGemms(module))) return failure("the GEMM schedule failed");
  dumpModule(module, n, "scheduled");
  mlir::PassManager pm(module->getContext());
  // Kernels built as linalg on tensors (buildGenericKernel, buildRowKernel, the GEMMs' vectorized
  // matmuls): their tensors become the memrefs they view (in place: cleanup drops the self-copies
  // left), the generics loop nests, the register tiles' 2-D transfers row by row.
  bool linalg = false;
  module->walk([&](mlir::Operation* op) {
    linalg = linalg || mlir::isa<mlir::bufferization::ToTensorOp>(op);
  });
  if (linalg) {
    pm.addPass(mlir::bufferization::createOneShotBufferizePass());
    pm.addPass(mlir::createCSEPass()); // first: a tile's slice written in place copies to itself
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addNestedPass<mlir::func::FuncOp>(mlir::createConvertLinalgToLoopsPass());
    pm.addNestedPass<mlir::func::FuncOp>(
        mlir::createConvertVectorToSCFPass(mlir::VectorTransferToSCFOptions().enableFullUnroll()));
    pm.addPass(mlir::memref::createExpandStridedMetadataPass());
    pm.addPass(mlir::createLowerAffinePass());
  }
  pm.addPass(mlir::createConvertMathToLibmPass()); // the C library's functions, as eager calls
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::createConvertVectorToLLVMPass()); // generated GEMMs' register tiles
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createUBToLLVMConversionPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(module))) return failure("lowering to the LLVM dialect failed");
  dumpModule(module, n, "llvm");

  initNativeTarget();
  std::string error;
  llvm::Triple triple(target.triple);
  const llvm::Target* llvmTarget = llvm::TargetRegistry::lookupTarget(triple, error);
  if (llvmTarget == nullptr) return failure("no LLVM target for " + target.triple + ": " + error);
  // Position-independent, for a shared object; without the CPU and its features LLVM's cost model
  // knows no vector registers and leaves every loop scalar.
  std::unique_ptr<llvm::TargetMachine> machine(llvmTarget->createTargetMachine(
      triple, target.cpu, target.features, llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Default));
  if (!machine) return failure("cannot create a target machine for " + target.codeTarget());

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = mlir::translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule) return failure("translation to LLVM IR failed");
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(triple);
  if (!addPackedEntries(*llvmModule, entries))
    return failure("a kernel's C interface is missing after lowering");
  useVectorMath(*llvmModule, target); // after: it sets attributes on every function, entries too
  if (llvm::Error e = mlir::makeOptimizingTransformer(2, 0, machine.get())(llvmModule.get())) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << e;
    return failure("LLVM optimization failed: " + msg);
  }
  dumpLlvm(*llvmModule, n);
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager emit;
  if (machine->addPassesToEmitFile(emit, os, nullptr, llvm::CodeGenFileType::ObjectFile))
    return failure("the target machine cannot emit object files");
  emit.run(*llvmModule);
  return std::vector<uint8_t>(object.begin(), object.end());
}

namespace {
/// The file of glibc's libmvec, which generated kernels call (see VectorMath.cpp): the shared
/// object names it as a dependency, so it loads wherever the kernels do. Empty if there is none.
const std::string& libmvecPath() {
  static const std::string path = [] {
    std::string p;
    void* handle = dlopen("libmvec.so.1", RTLD_LAZY);
    link_map* map = nullptr;
    if (handle != nullptr && dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
        map->l_name != nullptr)
      p = map->l_name;
    if (handle != nullptr) dlclose(handle);
    return p;
  }();
  return path;
}
} // namespace

ir::Result<std::vector<uint8_t>> linkSharedObject(std::span<const std::vector<uint8_t>> objects) {
  // lld reads and writes files: a private directory for this link, removed afterwards.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/weft-link-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return failure("cannot create a directory to link in");
  std::vector<std::string> paths;
  bool written = true;
  for (size_t i = 0; i < objects.size() && written; ++i) {
    paths.push_back(dir + "/k" + std::to_string(i) + ".o");
    std::ofstream out(paths.back(), std::ios::binary);
    out.write(reinterpret_cast<const char*>(objects[i].data()),
              static_cast<std::streamsize>(objects[i].size()));
    written = static_cast<bool>(out);
  }
  std::string output = dir + "/kernels.so";
  std::vector<const char*> args = {"ld.lld",      "-shared", "--build-id=none", "-z",
                                   "noexecstack", "-o",      output.c_str()};
  for (const std::string& p : paths)
    args.push_back(p.c_str());
  if (!libmvecPath().empty()) {
    args.push_back("--no-as-needed");
    args.push_back(libmvecPath().c_str());
  }
  std::string messages;
  lld::Result result{1, true};
  if (written) {
    static std::mutex lldMutex; // lld keeps global state: one link at a time
    std::lock_guard<std::mutex> lock(lldMutex);
    llvm::raw_string_ostream out(messages), err(messages);
    result = lld::lldMain(args, out, err, {{lld::Gnu, &lld::elf::link}});
  }
  std::vector<uint8_t> bytes;
  if (written && result.retCode == 0) {
    std::ifstream in(output, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  for (const std::string& p : paths)
    unlink(p.c_str());
  unlink(output.c_str());
  rmdir(dir.c_str());
  if (!written) return failure("cannot write kernel objects to " + dir);
  if (result.retCode != 0) return failure("linking kernels failed: " + messages);
  if (bytes.empty()) return failure("the linker wrote no shared object");
  return bytes;
}

} // namespace weft::codegen
