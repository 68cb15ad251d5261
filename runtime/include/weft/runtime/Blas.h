// The BLAS the CPU kernels call (OpenBLAS) and the kernels it chose for this CPU. OpenBLAS picks
// its kernels from the CPUs it knew when it was released: Debian 12's 0.3.21 does not know
// Sapphire or Emerald Rapids and runs its SSE3 kernels there, 3-10x slower. weft checks the
// choice against the CPU's own features once, before its first BLAS call, and where OpenBLAS
// chose kernels for a lesser CPU than this one, switches it to the best it has that this CPU runs.
#pragma once

#include <string>
#include <string_view>

namespace weft {

struct BlasInfo {
  std::string library; ///< "OpenBLAS 0.3.21 ...", its configuration
  std::string core;    ///< the kernels it runs ("SkylakeX")
  std::string chosen;  ///< who chose them: "OpenBLAS", or why weft did
};

/// The BLAS and its kernels, set up once (as the thread pool's first use does). Choosing again
/// replaces OpenBLAS's kernel table: no other BLAS call may run meanwhile, so a program that
/// calls BLAS itself from other threads calls this first. A core type WEFT_BLAS_CORE names that
/// this CPU cannot run is not applied (`chosen` says so).
const BlasInfo& blasInfo();

/// The OpenBLAS core type whose kernels suit a CPU better than `detected` does, given the CPU's
/// best core type `best` (bestBlasCore()); "" where `detected` is as good.
std::string_view betterBlasCore(std::string_view detected, std::string_view best);
/// The best OpenBLAS core type for this CPU's float32 and float64 GEMMs (AVX-512: "SkylakeX",
/// AVX2 and FMA: "Haswell", AVX: "Sandybridge"; "" for less).
std::string_view bestBlasCore();

} // namespace weft
