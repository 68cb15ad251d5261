// Every environment variable weft reads, declared in one place.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace weft {

/// The WEFT_* environment variables. Each row: name, what it does.
#define WEFT_DEBUG_FLAGS(X)                                                                        \
  X(WEFT_NUM_THREADS, "threads for CPU kernels and OpenBLAS (default: hardware threads)")          \
  X(WEFT_BLAS_CORE,                                                                                \
    "OpenBLAS's kernels: auto (default: corrected where OpenBLAS chose kernels for a lesser CPU), " \
    "off (OpenBLAS's own choice), or a core type (SkylakeX, Haswell, ...)")                        \
  X(WEFT_CPU_CACHE_MB, "cap on idle blocks the CPU caching allocator keeps (default 2048)")        \
  X(WEFT_PRINT_IR_AFTER, "print the graph after the named pass, or after every pass with 'all'")   \
  X(WEFT_PRINT_PLAN, "1: print each compiled plan's steps and memory plan (as weft-opt --lower)")  \
  X(WEFT_DUMP_DIR,                                                                                 \
    "write the graph before and after every pass, and generated MLIR and LLVM IR, into this dir")  \
  X(WEFT_TIME_PASSES,                                                                              \
    "1: print how long each pass took, and tracing, passes and codegen per compilation")           \
  X(WEFT_SKIP_PASSES, "comma-separated passes the pipeline leaves out (to bisect a problem)")      \
  X(WEFT_LOG_RECOMPILES, "log every compile() recompilation with its reason (1 to enable)")        \
  X(WEFT_LOG_FALLBACKS, "1: log each kernel codegen could not lower (it runs in the interpreter)") \
  X(WEFT_CODEGEN, "0: compiled functions run every op in the interpreter, without generated code") \
  X(WEFT_GEMM,                                                                                     \
    "generated or blas: how compiled float32 matmuls with elementwise readers run, for every "     \
    "shape (default: measured once per shape)")                                                    \
  X(WEFT_CACHE_DIR,                                                                                \
    "where compiled kernels and programs are cached (default $XDG_CACHE_HOME/weft or "             \
    "~/.cache/weft)")                                                                              \
  X(WEFT_KERNEL_CACHE,                                                                             \
    "0: compile every program and kernel anew, neither reading nor writing the disk cache")        \
  X(WEFT_CACHE_MAX_MB,                                                                             \
    "the disk cache's soft size limit in MB (default 1024, 0: none): past it, the entries used "   \
    "longest ago go")                                                                              \
  X(WEFT_PROFILE,                                                                                  \
    "1: time every step of compiled plans by op, and the buffers held at their peak; tables on "   \
    "stderr at exit. A file name (trace.json): a Chrome trace of every eager op (with the "        \
    "caller's line), plan step and GPU dispatch (timed on the device), written at exit")          \
  X(WEFT_VULKAN_DEVICE,                                                                            \
    "the Vulkan device vulkan:0 names: an index into the driver's list, or part of its name "      \
    "(default: discrete GPUs first, lavapipe last)")                                               \
  X(WEFT_VK_VALIDATE,                                                                              \
    "1: the Khronos validation layer checks every Vulkan call (messages on stderr)")              \
  X(WEFT_DUMP_SHADERS,                                                                             \
    "1: print each per-op GPU shader codegen makes, as the SPIR-V dialect, to stderr")

/// The value of a WEFT_* environment variable, if set.
std::optional<std::string> debugFlag(std::string_view name);
/// Human-readable list of every flag and what it does.
std::string debugFlagsHelp();

} // namespace weft
