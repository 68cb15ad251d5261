// What the codegen sources share about JIT compilation (MLIR types; never in a public header).
#pragma once

#include "weft/codegen/Jit.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>

namespace weft::codegen {

struct JitModule::Impl {
  std::unique_ptr<mlir::MLIRContext> context;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

/// A codegen failure as a diagnostic.
ir::Diagnostic failure(const std::string& what);

/// A context with the dialects generated kernels use (func, scf, memref, arith, math, cf, llvm).
std::unique_ptr<JitModule::Impl> newJitContext();

/// Lowers `module` (built in `impl`'s context) to the LLVM dialect, calling the C library for
/// transcendental math, and JIT-compiles it at O2 for this CPU.
ir::Result<std::shared_ptr<JitModule>> jitCompile(std::unique_ptr<JitModule::Impl> impl,
                                                  mlir::OwningOpRef<mlir::ModuleOp> module);

} // namespace weft::codegen
