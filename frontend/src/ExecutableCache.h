// compile()'s executables in the disk cache (beside codegen's kernels): their keys, reading and
// writing them.
#pragma once

#include "weft/codegen/Jit.h"
#include "weft/ir/Graph.h"
#include "weft/runtime/Executable.h"

#include <cstdint>
#include <optional>
#include <string>

namespace weft {

/// The disk cache's key for the executable graph `g` becomes: the graph entering the graph passes,
/// the target, the compiler's version, the threads (GEMM choices are measured per thread count),
/// whether code is generated and the settings that change what the pipeline builds. Empty, so
/// nothing is cached, when the cache is off or a setting asks to watch the pipeline at work (it
/// would have nothing to show).
std::string executableKey(const ir::Graph& g, const std::string& target, bool codegen);

/// The executable cached under `key`, its code loaded on `device` (its kernels counted into
/// `numKernels`), or nullopt. An entry that does not load (code for another CPU) is built again.
std::optional<Executable> readExecutable(const std::string& key, hal::Device& device,
                                         size_t& numKernels);

/// Caches `program`, which runs `kernels` generated kernels, under `key`.
void writeExecutable(const std::string& key, const Executable& program, uint64_t kernels);

} // namespace weft
