// What the codegen sources share about compiling to machine code (MLIR types; never in a public
// header).
#pragma once

#include "weft/codegen/Jit.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace llvm {
class Module;
}

namespace weft::codegen {

/// A codegen failure as a diagnostic.
ir::Diagnostic failure(const std::string& what);

/// A single-threaded context with the dialects generated kernels use (func, scf, memref, arith,
/// vector, math, cf, llvm).
std::unique_ptr<mlir::MLIRContext> newContext();

/// A function of a module (with llvm.emit_c_interface) and the symbol of its packed entry
/// (`void symbol(void** args)`, hal::KernelInfo's ABI).
struct KernelEntry {
  std::string function, symbol;
};

/// The attributes that mark a generated GEMM's linalg ops (MatmulKernel.h) for its schedule
/// (Jit.cpp's kGemmSchedule, which names them too): its zero fills and matmuls; matmuls with
/// K = 1 are vectorized whole (there is no loop over K to keep the accumulators in registers over).
inline constexpr const char* kGemmTag = "weft.gemm";
inline constexpr const char* kGemmWholeTag = "weft.gemm_whole";

/// Applies the generated GEMMs' transform schedule to the linalg ops marked "weft.gemm" or
/// "weft.gemm_whole" in `module` (MatmulKernel.h builds them): register tiles held over K.
/// Nothing to do without any.
mlir::LogicalResult scheduleGemms(mlir::ModuleOp module);

/// Lowers `module` to the LLVM dialect (transcendental math calls the C library, or libmvec for
/// the functions the eager kernels compute there: see useVectorMath), adds the packed entries,
/// optimizes at O2 for `target` and emits a position-independent relocatable object. Only the
/// entries are visible outside the object.
ir::Result<std::vector<uint8_t>> compileToObject(mlir::ModuleOp module, const CpuTarget& target,
                                                 std::span<const KernelEntry> entries);

/// Makes the calls of `m` to the functions of weft/runtime/VectorMathFunctions.h compute through
/// libmvec's forms for `target`, as the eager kernels do on that CPU, vectorizable by LLVM; on an
/// AVX-512 target the kernels of `m` prefer 512-bit vectors (the width of those forms).
void useVectorMath(llvm::Module& m, const CpuTarget& target);

} // namespace weft::codegen
