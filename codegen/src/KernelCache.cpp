// The kernel cache: one file per kernel, named by the hash of its key, one per linked set of
// kernels (the shared object a compilation loads, keyed by its kernels' symbols), one per
// decision (a GEMM shape's choice) and one per whole program (a graph's executable). A file holds
// "WEFTKRN1", the whole key, the bytes and a checksum of all, so a damaged file, a truncated write
// or a hash collision is detected and the entry is built again. The cache keeps within a size
// limit: past it, the entries used longest ago are removed (a hit marks an entry used).
#include "weft/codegen/KernelCache.h"

#include "CodegenSourceHash.h"
#include "CompilerSourceHash.h"
#include "weft/runtime/DebugFlags.h"

#include "weft/runtime/Hash.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/BLAKE3.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace weft::codegen {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'K', 'R', 'N', '1'};

std::atomic<int64_t> hits{0}, misses{0}, rejected{0}, writeFailures{0}, linkedHits{0},
    executableHits{0};

/// Creates `dir` and its parents (mkdir -p); false if it cannot.
bool makeDirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at)
    if (at == dir.size() || dir[at] == '/') {
      std::string part = dir.substr(0, at);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  struct stat st {};
  return stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string entryPath(const std::string& dir, const std::string& key, const char* ext) {
  return dir + "/" + hashHex(key) + ext;
}

void putU64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

} // namespace

std::string hashHex(const std::string& text) {
  uint64_t h = fnv1a64(text.data(), text.size());
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string digestHex(std::span<const uint8_t> bytes) {
  const auto digest = llvm::BLAKE3::hash<32>(llvm::ArrayRef<uint8_t>(bytes.data(), bytes.size()));
  std::string hex;
  for (uint8_t b : digest) {
    constexpr char kDigits[] = "0123456789abcdef";
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

KernelCacheStats kernelCacheStats() {
  return {hits.load(),          misses.load(),     rejected.load(),
          writeFailures.load(), linkedHits.load(), executableHits.load()};
}

void resetKernelCacheStats() {
  hits = 0;
  misses = 0;
  rejected = 0;
  writeFailures = 0;
  linkedHits = 0;
  executableHits = 0;
}

std::string kernelCacheDir() {
  if (debugFlag("WEFT_KERNEL_CACHE").value_or("1") == "0") return "";
  if (auto dir = debugFlag("WEFT_CACHE_DIR"); dir && !dir->empty()) return *dir + "/kernels";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg == '/')
    return std::string(xdg) + "/weft/kernels";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/')
    return std::string(home) + "/.cache/weft/kernels";
  return "";
}

namespace {

/// A directory beside kernelCacheDir(): `linked` for linked sets of kernels, `choices` for
/// decisions, `executables` for whole programs.
std::string siblingCacheDir(const char* name) {
  std::string dir = kernelCacheDir(); // .../kernels
  return dir.empty() ? dir : dir.substr(0, dir.size() - std::string("kernels").size()) + name;
}

/// The cache's size limit in bytes: WEFT_CACHE_MAX_MB (a fraction allowed), else 1 GiB; 0 for
/// none (WEFT_CACHE_MAX_MB=0). A value that is not a size is said once on stderr, and 1 GiB used.
uint64_t cacheLimitBytes() {
  double mb = 1024;
  if (auto v = debugFlag("WEFT_CACHE_MAX_MB"); v && !v->empty()) {
    char* end = nullptr;
    const double parsed = std::strtod(v->c_str(), &end);
    if (end != v->c_str() && *end == '\0' && std::isfinite(parsed) && parsed >= 0 &&
        parsed < 1e12) {
      mb = parsed;
    } else {
      static std::once_flag warned;
      std::call_once(warned, [&] {
        std::fprintf(stderr,
                     "[weft] WEFT_CACHE_MAX_MB=%s is not a size in megabytes (0 for no limit); "
                     "the kernel cache keeps to 1024 MB\n",
                     v->c_str());
      });
    }
  }
  return static_cast<uint64_t>(mb * 1024 * 1024);
}

std::mutex trimMutex;
uint64_t writtenSinceTrim = 0; // guarded by trimMutex
bool wroteBefore = false;      // guarded by trimMutex
bool trimming = false;         // guarded by trimMutex: a thread of this process is trimming

/// Whether `name` is an entry of the cache's `kind` directory as writeEntry names them (16 hex
/// digits and the kind's extension), or one's temporary file: nothing else there is touched.
bool isEntryName(const std::string& name, const char* ext, bool& temporary) {
  const size_t n = std::strlen(ext);
  if (name.size() < 16 + n || name.compare(16, n, ext) != 0) return false;
  if (!std::all_of(name.begin(), name.begin() + 16,
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return false;
  temporary = name.size() > 16 + n;
  return !temporary || name.compare(16 + n, 5, ".tmp-") == 0;
}

/// Adds up the entries of every kind; past the limit, removes the entries used longest ago (by
/// modification time, which a hit renews) until the cache holds three quarters of it. A temporary
/// file older than an hour (its writer died) goes too. Another process may remove an entry this
/// one is about to read: the read misses and the entry is built again. Marks the cache trimmed
/// (the file `trimmed` in it, by its time).
void trim(uint64_t limit) {
  const std::string root = siblingCacheDir("");
  if (root.empty()) return;
  const std::string stamp = root + "trimmed";
  if (int fd = open(stamp.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644); fd >= 0) close(fd);
  utimensat(AT_FDCWD, stamp.c_str(), nullptr, 0);
  struct File {
    std::string path;
    uint64_t size;
    timespec used;
  };
  std::vector<File> files;
  uint64_t total = 0;
  const time_t now = time(nullptr);
  const std::pair<const char*, const char*> kinds[] = {
      {"kernels", ".wk"}, {"linked", ".wl"}, {"choices", ".wc"}, {"executables", ".wx"}};
  for (const auto& [kind, ext] : kinds) {
    const std::string dir = siblingCacheDir(kind);
    DIR* d = dir.empty() ? nullptr : opendir(dir.c_str());
    if (d == nullptr) continue;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name, path = dir + "/" + name;
      struct stat st {};
      bool temporary = false;
      if (!isEntryName(name, ext, temporary) || lstat(path.c_str(), &st) != 0 ||
          !S_ISREG(st.st_mode))
        continue;
      if (temporary) {
        if (now - st.st_mtim.tv_sec > 3600) unlink(path.c_str());
        continue;
      }
      files.push_back({path, static_cast<uint64_t>(st.st_size), st.st_mtim});
      total += static_cast<uint64_t>(st.st_size);
    }
    closedir(d);
  }
  if (total <= limit) return;
  std::sort(files.begin(), files.end(), [](const File& a, const File& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec < b.used.tv_sec
                                          : a.used.tv_nsec < b.used.tv_nsec;
  });
  for (const File& f : files) {
    if (total <= limit / 4 * 3) break;
    if (unlink(f.path.c_str()) == 0 || errno == ENOENT) total -= f.size;
  }
}

/// Keeps the cache near its limit after a write of `bytes` (a soft limit). Reading a large
/// cache's directories takes a while (0.8 s for 110,000 entries here), so not at every write:
/// when this process has written an eighth of the limit since it last trimmed the cache, or at
/// its first write when no process has trimmed it for an hour. Between trims the cache may
/// exceed the limit by what the processes wrote since.
void keepWithinLimit(uint64_t bytes) {
  const uint64_t limit = cacheLimitBytes();
  if (limit == 0) return; // no limit
  {
    // Decided under the lock, trimmed outside it: the other threads' writes do not wait for it
    // (nor trim too).
    std::lock_guard<std::mutex> lock(trimMutex);
    writtenSinceTrim += bytes;
    bool due = writtenSinceTrim >= limit / 8;
    if (!wroteBefore && !due) {
      struct stat st {};
      const std::string stamp = siblingCacheDir("") + "trimmed";
      due = stat(stamp.c_str(), &st) != 0 || time(nullptr) - st.st_mtim.tv_sec > 3600;
    }
    wroteBefore = true;
    if (!due || trimming) return;
    writtenSinceTrim = 0;
    trimming = true;
  }
  trim(limit);
  std::lock_guard<std::mutex> lock(trimMutex);
  trimming = false;
}

/// Reads the entry for `key` in `dir` (files named <hash><ext>); counts a hit or miss where
/// `count` says, and a damaged entry always.
std::optional<std::vector<uint8_t>> readEntry(const std::string& dir, const char* ext,
                                              const std::string& key, bool count) {
  if (dir.empty()) {
    if (count) ++misses;
    return std::nullopt;
  }
  const std::string path = entryPath(dir, key, ext);
  struct stat st {};
  std::ifstream in(path, std::ios::binary);
  if (!in || stat(path.c_str(), &st) != 0) {
    if (count) ++misses;
    return std::nullopt;
  }
  // Not a plain file, or larger than any entry weft writes: rejected below as damaged.
  constexpr off_t kLargest = off_t{1} << 32;
  const bool plain = S_ISREG(st.st_mode) && st.st_size <= kLargest;
  std::string bytes(plain ? static_cast<size_t>(st.st_size) : 0, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) bytes.clear(); // unreadable: rejected below as damaged
  // magic, key length, key, object length, object, checksum
  auto reject = [&] {
    ++rejected;
    if (count) ++misses;
    return std::nullopt;
  };
  size_t at = sizeof kMagic;
  auto u64 = [&](uint64_t& v) {
    if (bytes.size() - at < sizeof v) return false;
    std::memcpy(&v, bytes.data() + at, sizeof v);
    at += sizeof v;
    return true;
  };
  uint64_t keyLen = 0, objLen = 0, sum = 0;
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0 ||
      !u64(keyLen) || keyLen > bytes.size() - at)
    return reject();
  if (bytes.compare(at, keyLen, key) != 0 || keyLen != key.size()) return reject();
  at += keyLen;
  if (!u64(objLen) || objLen > bytes.size() - at) return reject();
  size_t objAt = at;
  at += objLen;
  uint64_t expected = fnv1a64(bytes.data(), at);
  if (!u64(sum) || sum != expected || at != bytes.size()) return reject();
  if (count) ++hits;
  utimensat(AT_FDCWD, path.c_str(), nullptr, 0); // used now: the last to go when the cache is full
  return std::vector<uint8_t>(bytes.begin() + static_cast<std::ptrdiff_t>(objAt),
                              bytes.begin() + static_cast<std::ptrdiff_t>(objAt + objLen));
}

void writeEntry(const std::string& dir, const char* ext, const std::string& key,
                const std::vector<uint8_t>& object) {
  if (dir.empty()) return;
  if (!makeDirs(dir)) {
    ++writeFailures;
    return;
  }
  std::string bytes(kMagic, sizeof kMagic);
  putU64(bytes, key.size());
  bytes += key;
  putU64(bytes, object.size());
  bytes.append(reinterpret_cast<const char*>(object.data()), object.size());
  putU64(bytes, fnv1a64(bytes.data(), bytes.size()));
  std::string path = entryPath(dir, key, ext);
  std::string tmp = path + ".tmp-" + std::to_string(getpid()) + "-" +
                    std::to_string(reinterpret_cast<uintptr_t>(&bytes));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      out.close();
      unlink(tmp.c_str());
      ++writeFailures;
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    ++writeFailures;
    return;
  }
  keepWithinLimit(bytes.size());
}

} // namespace

std::optional<std::vector<uint8_t>> readCachedKernel(const std::string& key) {
  return readEntry(kernelCacheDir(), ".wk", key, true);
}

void writeCachedKernel(const std::string& key, const std::vector<uint8_t>& object) {
  writeEntry(kernelCacheDir(), ".wk", key, object);
}

std::optional<std::vector<uint8_t>> readCachedLinked(const std::string& key, int64_t kernels) {
  auto entry = readEntry(siblingCacheDir("linked"), ".wl", key, false);
  if (entry) { // counted per kernel (kernels read from the cache), not per file
    hits += kernels;
    ++linkedHits;
  }
  return entry;
}

void writeCachedLinked(const std::string& key, const std::vector<uint8_t>& sharedObject) {
  writeEntry(siblingCacheDir("linked"), ".wl", key, sharedObject);
}

std::string codegenVersion() {
  return WEFT_CODEGEN_SOURCE_HASH " llvm " LLVM_VERSION_STRING;
}

std::string compilerVersion() {
  return WEFT_COMPILER_SOURCE_HASH " llvm " LLVM_VERSION_STRING;
}

std::optional<std::vector<uint8_t>> readCachedExecutable(const std::string& key) {
  return readEntry(siblingCacheDir("executables"), ".wx", key, false);
}

void writeCachedExecutable(const std::string& key, const std::vector<uint8_t>& bytes) {
  writeEntry(siblingCacheDir("executables"), ".wx", key, bytes);
}

void countExecutableHit(int64_t kernels) {
  hits += kernels;
  ++executableHits;
}

std::optional<std::vector<uint8_t>> readCachedChoice(const std::string& key) {
  return readEntry(siblingCacheDir("choices"), ".wc", key, false);
}

void writeCachedChoice(const std::string& key, const std::vector<uint8_t>& value) {
  writeEntry(siblingCacheDir("choices"), ".wc", key, value);
}

} // namespace weft::codegen
