// The on-disk cache of compiled kernel objects: a kernel whose IR, target and compiler were
// compiled before, by this process or another, is read back instead of compiled again.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace weft::codegen {

/// What the kernel cache did since the process started (or resetKernelCacheStats()).
struct KernelCacheStats {
  int64_t hits = 0;     ///< kernels read from the cache
  int64_t misses = 0;   ///< kernels compiled (absent, or the cache is off)
  int64_t rejected = 0; ///< entries found damaged or for another key, then rebuilt
  int64_t writeFailures = 0;
  int64_t linkedHits = 0;     ///< compilations whose linked kernels came whole from the cache
  int64_t executableHits = 0; ///< programs read whole from the cache (their kernels are hits)
};
KernelCacheStats kernelCacheStats();
void resetKernelCacheStats();

/// The cache directory: WEFT_CACHE_DIR, else $XDG_CACHE_HOME/weft, else $HOME/.cache/weft; empty
/// when WEFT_KERNEL_CACHE=0 or no directory can be named. Its entries of every kind together are
/// kept near WEFT_CACHE_MAX_MB (default 1024; 0: no limit): past it, the entries used longest ago
/// are removed (a read that finds an entry renews it), checked after a process has written an
/// eighth of the limit, or at its first write when no process has checked for an hour. Files in
/// the cache's directories that weft did not name are left alone.
std::string kernelCacheDir();

/// The object cached under `key` (the kernel's MLIR, its target and the compiler's version), or
/// nullopt; a damaged entry, or one for another key with the same hash, is counted as rejected.
std::optional<std::vector<uint8_t>> readCachedKernel(const std::string& key);
/// Stores `object` under `key` (atomically: readers see the old entry or the whole new one).
void writeCachedKernel(const std::string& key, const std::vector<uint8_t>& object);

/// The linked shared object of a set of kernels cached under `key` (their symbols and the
/// target), or nullopt; a hit counts `kernels` hits. Damaged entries count as rejected.
std::optional<std::vector<uint8_t>> readCachedLinked(const std::string& key, int64_t kernels);
/// Stores a linked shared object under `key`, as writeCachedKernel does.
void writeCachedLinked(const std::string& key, const std::vector<uint8_t>& sharedObject);

/// What identifies this code generator in cache keys: a hash of its sources and LLVM's version.
std::string codegenVersion();

/// A small decision remembered under `key` (a GEMM's choice between generated code and OpenBLAS),
/// or nullopt; not counted in KernelCacheStats (nothing is compiled either way).
std::optional<std::vector<uint8_t>> readCachedChoice(const std::string& key);
/// Stores a decision under `key`, as writeCachedKernel stores objects.
void writeCachedChoice(const std::string& key, const std::vector<uint8_t>& value);

/// A whole compiled program (an executable's bytes and what the compiler reported of it) cached
/// under `key` (the graph entering the pass pipeline, the target, compilerVersion() and the
/// settings that change what it becomes), or nullopt. Not counted: the caller counts a hit with
/// countExecutableHit() once the bytes load. Damaged entries count as rejected.
std::optional<std::vector<uint8_t>> readCachedExecutable(const std::string& key);
/// Stores a compiled program under `key`, as writeCachedKernel stores objects.
void writeCachedExecutable(const std::string& key, const std::vector<uint8_t>& bytes);
/// Counts a program read whole from the cache, and its `kernels` as kernel hits.
void countExecutableHit(int64_t kernels);

/// What identifies the whole compiler in executable cache keys: a hash of the sources of the IR,
/// the passes, the runtime (memory planning, lowering, the executable format), the code
/// generator and compile() itself, and LLVM's version.
std::string compilerVersion();

/// The BLAKE3 digest of `bytes` as 64 hex digits: what a key holds of a large input (a whole
/// graph), so that entries stay small and collisions are out of reach.
std::string digestHex(std::span<const uint8_t> bytes);

/// A 64-bit FNV-1a hash of `text` as 16 hex digits: cache file names and kernel symbols.
std::string hashHex(const std::string& text);

} // namespace weft::codegen
