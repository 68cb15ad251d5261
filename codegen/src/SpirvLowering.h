// From a module of gpu.funcs built with OpBuilder to SPIR-V words, for the op table's per-op
// shaders (Spirv.cpp) and the fused kernels of compiled programs (SpirvKernels.cpp) alike.
// Included only by those files.
#pragma once

#include "mlir/Dialect/SPIRV/IR/TargetAndABI.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::codegen {

/// The target environment a device's CodeObject target names ("spirv1.3 caps=Shader,Int64,...
/// exts=SPV_KHR_8bit_storage,..."); `error` says what it could not read.
mlir::spirv::TargetEnvAttr targetEnv(mlir::MLIRContext& ctx, const std::string& target,
                                     std::string& error);

/// A context with the dialects shader modules are built in and lowered through.
std::unique_ptr<mlir::MLIRContext> newShaderContext();

/// The module's single gpu.module as SPIR-V words, or why not ("" on success): math SPIR-V lacks
/// is expanded or approximated, then the GPU, math, arith, scf and memref conversions run.
/// `diagnostics` holds what the context reported so far (the caller's handler). With
/// `exactProducts`, no float multiply or add may be fused into an FMA by the driver. `name`
/// names the module in WEFT_DUMP_SHADERS=1 dumps.
std::string lowerToSpirv(mlir::MLIRContext& ctx, mlir::ModuleOp module,
                         const std::string& diagnostics, bool exactProducts,
                         const std::string& name, std::vector<uint32_t>& words);

} // namespace weft::codegen
