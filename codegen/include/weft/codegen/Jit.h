// JIT compilation through MLIR, behind a header with no MLIR or LLVM types.
#pragma once

#include "weft/ir/Types.h"

#include <cstdint>
#include <memory>

namespace weft::codegen {

/// An in-process compiled module; owns the machine code its function pointers point into.
class JitModule {
public:
  ~JitModule();
  JitModule(const JitModule&) = delete;
  JitModule& operator=(const JitModule&) = delete;
  /// The address of the C-interface entry of function `name`, or null if there is none.
  void* lookup(const char* name) const;
  /// The address of the packed wrapper of function `name` (`void(void** args)`), or null.
  void* lookupPacked(const char* name) const;

  struct Impl;
  explicit JitModule(std::unique_ptr<Impl> impl);

private:
  std::unique_ptr<Impl> impl_;
};

/// The day-one kernel: out[i] = a[i] + b[i] for i < n (float32). Keeps its module alive.
class AddKernel {
public:
  AddKernel(std::shared_ptr<JitModule> module, void* entry)
      : module_(std::move(module)), entry_(entry) {}
  void operator()(const float* a, const float* b, float* out, int64_t n) const;

private:
  std::shared_ptr<JitModule> module_;
  void* entry_;
};

/// Builds `out = a + b` over float32 vectors with MLIR's OpBuilder (func/scf/memref/arith), lowers
/// it to the LLVM dialect and JIT-compiles it: the proof that the MLIR toolchain works end to end.
ir::Result<AddKernel> jitAddKernel();

} // namespace weft::codegen
