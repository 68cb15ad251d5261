// compile()'s executables in the disk cache: their keys, reading and writing them.
#include "ExecutableCache.h"

#include "weft/codegen/KernelCache.h"
#include "weft/ir/TextFormat.h"
#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/ThreadPool.h"

#include <cstring>

namespace weft {

std::string executableKey(const ir::Graph& g, const std::string& target, bool codegen) {
  for (const char* watch :
       {"WEFT_PRINT_IR_AFTER", "WEFT_PRINT_PLAN", "WEFT_DUMP_DIR", "WEFT_LOG_FALLBACKS"})
    if (auto v = debugFlag(watch); v && !v->empty() && *v != "0") return "";
  if (codegen::kernelCacheDir().empty()) return "";
  std::string key = "weft-executable 1 " + codegen::compilerVersion() + "\n" + target +
                    "\nthreads " + std::to_string(getNumThreads()) + "\n";
  key += codegen ? "code\n" : "interpreted\n";
  for (const char* setting : {"WEFT_GEMM", "WEFT_SKIP_PASSES"})
    key += std::string(setting) + "=" + debugFlag(setting).value_or("") + "\n";
  // Without source locations: no step of an executable carries one.
  return key + "graph " + codegen::digestHex(ir::keyBytes(g, false)) + "\n";
}

std::optional<Executable> readExecutable(const std::string& key, hal::Device& device,
                                         size_t& numKernels) {
  if (key.empty()) return std::nullopt;
  std::optional<std::vector<uint8_t>> bytes = codegen::readCachedExecutable(key);
  uint64_t kernels = 0;
  if (!bytes || bytes->size() < sizeof kernels) return std::nullopt;
  std::memcpy(&kernels, bytes->data(), sizeof kernels);
  try {
    Executable e = Executable::load(std::span(*bytes).subspan(sizeof kernels), device);
    numKernels += kernels;
    codegen::countExecutableHit(static_cast<int64_t>(kernels));
    return e;
  } catch (const Error&) {
    return std::nullopt;
  }
}

void writeExecutable(const std::string& key, const Executable& program, uint64_t kernels) {
  if (key.empty()) return;
  std::vector<uint8_t> bytes(sizeof kernels);
  std::memcpy(bytes.data(), &kernels, sizeof kernels);
  std::vector<uint8_t> saved = program.save();
  bytes.insert(bytes.end(), saved.begin(), saved.end());
  codegen::writeCachedExecutable(key, bytes);
}

} // namespace weft
