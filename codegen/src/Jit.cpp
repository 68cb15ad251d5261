// Builds a trivial elementwise kernel with OpBuilder, lowers it to LLVM and JIT-compiles it.
#include "JitInternal.h"
#include "weft/runtime/DebugFlags.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <fstream>
#include <mutex>

namespace weft::codegen {

JitModule::JitModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JitModule::~JitModule() = default;

void* JitModule::lookupPacked(const char* name) const {
  auto sym = impl_->engine->lookupPacked(name);
  if (!sym) {
    llvm::consumeError(sym.takeError());
    return nullptr;
  }
  return reinterpret_cast<void*>(*sym);
}

void* JitModule::lookup(const char* name) const {
  auto sym = impl_->engine->lookup(std::string("_mlir_ciface_") + name);
  if (!sym) {
    llvm::consumeError(sym.takeError());
    return nullptr;
  }
  return *sym;
}

namespace {

/// The ABI of a rank-1 memref argument of the C interface.
struct MemRef1D {
  const float* allocated;
  const float* aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
};
using AddCInterface = void (*)(MemRef1D*, MemRef1D*, MemRef1D*);

void initNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// func.func @weft_add(%a, %b, %out: memref<?xf32>): a loop of load, addf, store.
mlir::OwningOpRef<mlir::ModuleOp> buildAddModule(mlir::MLIRContext& ctx) {
  mlir::OpBuilder b(&ctx);
  mlir::Location loc = b.getUnknownLoc();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto vec = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, b.getF32Type());
  auto fn = mlir::func::FuncOp::create(b, loc, "weft_add", b.getFunctionType({vec, vec, vec}, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  mlir::Block* entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  mlir::Value zero = mlir::arith::ConstantIndexOp::create(b, loc, 0);
  mlir::Value one = mlir::arith::ConstantIndexOp::create(b, loc, 1);
  mlir::Value n = mlir::memref::DimOp::create(b, loc, entry->getArgument(2), zero);
  mlir::scf::ForOp::create(
      b, loc, zero, n, one, mlir::ValueRange{},
      [&](mlir::OpBuilder& nb, mlir::Location l, mlir::Value i, mlir::ValueRange) {
        mlir::Value x =
            mlir::memref::LoadOp::create(nb, l, entry->getArgument(0), mlir::ValueRange{i});
        mlir::Value y =
            mlir::memref::LoadOp::create(nb, l, entry->getArgument(1), mlir::ValueRange{i});
        mlir::Value s = mlir::arith::AddFOp::create(nb, l, x, y);
        mlir::memref::StoreOp::create(nb, l, s, entry->getArgument(2), mlir::ValueRange{i});
        mlir::scf::YieldOp::create(nb, l);
      });
  mlir::func::ReturnOp::create(b, loc);
  return module;
}

} // namespace

ir::Diagnostic failure(const std::string& what) {
  return ir::diag(ErrorKind::Internal, "codegen: ", what);
}

std::unique_ptr<JitModule::Impl> newJitContext() {
  initNativeTarget();
  auto impl = std::make_unique<JitModule::Impl>();
  mlir::DialectRegistry registry;
  registry.insert<mlir::arith::ArithDialect, mlir::cf::ControlFlowDialect, mlir::func::FuncDialect,
                  mlir::LLVM::LLVMDialect, mlir::math::MathDialect, mlir::memref::MemRefDialect,
                  mlir::scf::SCFDialect>();
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  // One thread: compile() runs under its own lock, and LLVM worker threads would only add
  // startup cost for kernels this small.
  impl->context =
      std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  impl->context->loadAllAvailableDialects();
  return impl;
}

namespace {

/// With WEFT_DUMP_DIR set: writes `module` to <dir>/kernels-<n>.<tag>.mlir.
void dumpModule(mlir::ModuleOp module, int n, const char* tag) {
  std::string dir = debugFlag("WEFT_DUMP_DIR").value_or("");
  if (dir.empty()) return;
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os);
  std::ofstream(dir + "/kernels-" + std::to_string(n) + "." + tag + ".mlir") << text;
}

} // namespace

ir::Result<std::shared_ptr<JitModule>> jitCompile(std::unique_ptr<JitModule::Impl> impl,
                                                  mlir::OwningOpRef<mlir::ModuleOp> module) {
  static std::atomic<int> counter{0};
  int n = counter++;
  dumpModule(*module, n, "input");
  if (mlir::failed(mlir::verify(*module))) return failure("the generated module does not verify");
  mlir::PassManager pm(impl->context.get());
  pm.addPass(mlir::createConvertMathToLibmPass()); // the C library's functions, as eager calls
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
  if (mlir::failed(pm.run(*module))) return failure("lowering to the LLVM dialect failed");
  dumpModule(*module, n, "llvm");

  // Optimized and compiled for this CPU: without the target machine LLVM's cost model knows no
  // vector registers and leaves every loop scalar.
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    llvm::consumeError(builder.takeError());
    return failure("cannot describe the host CPU to LLVM");
  }
  auto machine = builder->createTargetMachine();
  if (!machine) {
    llvm::consumeError(machine.takeError());
    return failure("cannot create a target machine for the host CPU");
  }
  // `transformer` is a function_ref: the function it refers to must outlive create().
  std::function<llvm::Error(llvm::Module*)> optimize =
      mlir::makeOptimizingTransformer(2, 0, machine->get());
  mlir::ExecutionEngineOptions options;
  options.transformer = optimize;
  auto engine = mlir::ExecutionEngine::create(*module, options, std::move(*machine));
  if (!engine) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << engine.takeError();
    return failure("JIT compilation failed: " + msg);
  }
  impl->engine = std::move(*engine);
  return std::make_shared<JitModule>(std::move(impl));
}

ir::Result<AddKernel> jitAddKernel() {
  std::unique_ptr<JitModule::Impl> impl = newJitContext();
  mlir::OwningOpRef<mlir::ModuleOp> module = buildAddModule(*impl->context);
  auto jit = jitCompile(std::move(impl), std::move(module));
  if (!jit) return jit.diagnostic();
  void* entry = jit.value()->lookup("weft_add");
  if (entry == nullptr) return failure("the compiled module has no C interface for weft_add");
  return AddKernel(jit.value(), entry);
}

void AddKernel::operator()(const float* a, const float* b, float* out, int64_t n) const {
  MemRef1D ma{a, a, 0, n, 1}, mb{b, b, 0, n, 1}, mo{out, out, 0, n, 1};
  reinterpret_cast<AddCInterface>(entry_)(&ma, &mb, &mo);
}

} // namespace weft::codegen
