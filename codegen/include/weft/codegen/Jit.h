// CPU code generation behind a header with no MLIR or LLVM types: the target code is built for,
// and linking kernel objects into one shared object that the runtime's CPU device loads.
#pragma once

#include "weft/ir/Types.h"
#include "weft/passes/Target.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace weft::codegen {

/// Whether generated kernels compute elementwise node `n`: every op in every dtype but those the
/// interpreter's kernels loop for: integer pow (square and multiply), gcd and lcm (Euclid),
/// integer fmod and floor_divide (which report a zero divisor), and the special functions
/// (lgamma, digamma, erfinv, zeta; loops in double).
bool kernelsCompute(const ir::Graph& g, const ir::Node& n);

/// The CPU code is built for, in LLVM's spelling, and what its code generator can do, as the
/// passes ask (passes::Target).
struct CpuTarget : passes::Target {
  std::string triple;   ///< "x86_64-unknown-linux-gnu"
  std::string cpu;      ///< "znver4", "x86-64-v3"
  std::string features; ///< "+avx2,+fma,-avx512f,..."

  std::string name() const override;
  /// kernelsCompute.
  bool computes(const ir::Graph& g, const ir::Node& n) const override;
  /// Row kernels and column sums: yes.
  bool reducesInKernels() const override { return true; }
  /// A float32 matmul [..., M, K] by [K, N] (passes::isGemm).
  bool generatesGemm(const ir::Graph& g, const ir::Node& n) const override;
  /// Yes: kernels take strided memref views.
  bool readsViews() const override { return true; }

  /// This machine's CPU with every feature it has (what JIT compilation uses).
  static CpuTarget host();
  /// A CPU LLVM knows by name: a feature level ("x86-64-v2", "x86-64-v3", "x86-64-v4") or a CPU
  /// ("skylake-avx512", "znver4"), with the features it implies; a diagnostic for an unknown one.
  static ir::Result<CpuTarget> named(const std::string& cpu);
  /// The target string a code object carries and the runtime checks ("x86_64 znver4 +avx,...").
  std::string codeTarget() const;
};

/// Links relocatable objects (built with position-independent code) into one ELF shared object,
/// in process with lld. It names glibc's libmvec (generated kernels' vector math) as a
/// dependency; the C math library's symbols are left to the loader.
ir::Result<std::vector<uint8_t>> linkSharedObject(std::span<const std::vector<uint8_t>> objects);

} // namespace weft::codegen
