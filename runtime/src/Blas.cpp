// Checking OpenBLAS's choice of kernels against the CPU, and correcting it (weft/runtime/Blas.h).
#include "weft/runtime/Blas.h"

#include "weft/runtime/DebugFlags.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

// OpenBLAS's own entry points; the last three exist only where it picks kernels at run time
// (DYNAMIC_ARCH, as Debian builds it), so they are weak: absent, weft leaves the choice alone.
extern "C" {
char* openblas_get_config(void) __attribute__((weak));
char* openblas_get_corename(void) __attribute__((weak));
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace weft {
namespace {

/// How capable an OpenBLAS core type's kernels are: the vector instructions they use.
int rank(std::string_view core) {
  std::string c(core);
  std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::tolower(ch); });
  // Cooper Lake's and Sapphire Rapids' kernels add bfloat16 GEMMs to Skylake-X's, which weft's
  // float32 and float64 calls do not use: the same rank, so weft leaves them be.
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return 4;
  if (c == "haswell" || c == "zen") return 3;
  if (c == "sandybridge" || c == "bulldozer" || c == "piledriver" || c == "steamroller" ||
      c == "excavator")
    return 2;
  return 1; // SSE-era kernels (Prescott, Core2, Nehalem, ...), or one weft does not know
}

BlasInfo setUp() {
  BlasInfo info;
  if (openblas_get_corename == nullptr) {
    info.library = "not OpenBLAS";
    info.chosen = "the library";
    return info;
  }
  info.library = openblas_get_config != nullptr ? openblas_get_config() : "OpenBLAS";
  info.core = openblas_get_corename();
  info.chosen = "OpenBLAS";
  const std::string wanted = debugFlag("WEFT_BLAS_CORE").value_or("auto");
  std::string target;
  if (wanted == "off") {
    info.chosen = "OpenBLAS (WEFT_BLAS_CORE=off)";
  } else if (wanted != "auto") {
    target = wanted;
    info.chosen = "WEFT_BLAS_CORE";
  } else if (std::getenv("OPENBLAS_CORETYPE") != nullptr) {
    info.chosen = "OPENBLAS_CORETYPE";
  } else {
    target = betterBlasCore(info.core, bestBlasCore());
    if (!target.empty())
      info.chosen = "weft: OpenBLAS chose " + info.core + ", kernels for a lesser CPU than this";
  }
  if (target.empty()) return info;
  if (!bestBlasCore().empty() && !betterBlasCore(bestBlasCore(), target).empty()) {
    info.chosen += " (not applied: this CPU cannot run " + target + "'s kernels)";
    return info;
  }
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) {
    info.chosen += " (not applied: this OpenBLAS has one set of kernels)";
    return info;
  }
  // OpenBLAS reads OPENBLAS_CORETYPE when it picks its kernels: picked again, before weft's first
  // BLAS call, they are the named core's.
  ::setenv("OPENBLAS_CORETYPE", target.c_str(), 1);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  info.core = openblas_get_corename();
  return info;
}

} // namespace

std::string_view betterBlasCore(std::string_view detected, std::string_view best) {
  return !best.empty() && rank(best) > rank(detected) ? best : std::string_view();
}

std::string_view bestBlasCore() {
  __builtin_cpu_init();
  // __builtin_cpu_supports also asks whether the OS saves the registers (XCR0), as OpenBLAS does.
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512cd");
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  if (__builtin_cpu_supports("avx")) return "Sandybridge";
  return "";
}

const BlasInfo& blasInfo() {
  static const BlasInfo info = setUp();
  return info;
}

} // namespace weft
