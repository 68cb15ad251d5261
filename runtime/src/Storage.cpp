// Aligned allocation and borrowed user buffers behind tensors.
#include "weft/runtime/Storage.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"

#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

namespace weft {
namespace {

/// Blocks from this size up are cached on free and reused: fresh pages cost a page fault each
/// (several microseconds on a VM), far more than the kernels that fill them.
constexpr size_t kCachedMin = size_t{1} << 16;
constexpr size_t kHugePage = size_t{2} << 20;

/// Rounds a large request up to one of 8 sizes per power of two (at most 12.5% waste), so freed
/// blocks match later requests exactly.
size_t bucketSize(size_t n) {
  if (n < kCachedMin) return (n + 63) / 64 * 64;
  size_t p = size_t{1} << (63 - __builtin_clzll(n));
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

/// The CPU caching allocator: free lists of large blocks by exact size, bounded in total bytes.
class BlockCache {
public:
  static BlockCache& get() {
    static BlockCache* cache = new BlockCache(); // never destroyed: tensors may outlive statics
    return *cache;
  }

  void* allocate(size_t size) {
    if (size >= kCachedMin) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_ -= size;
        return p;
      }
    }
    size_t align = size >= kHugePage ? kHugePage : 64;
    void* p = nullptr;
    if (posix_memalign(&p, align, size) != 0) // unlike aligned_alloc, any size is allowed
      return nullptr;
    if (size >= kHugePage)
      madvise(p, size, MADV_HUGEPAGE); // 512x fewer page faults where the kernel allows it
    return p;
  }

  void release(void* p, size_t size) {
    if (size >= kCachedMin) {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + size <= limit_) {
        free_.emplace(size, p);
        cached_ += size;
        return;
      }
    }
    std::free(p);
  }

  void emptyCache() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [size, p] : free_)
      std::free(p);
    free_.clear();
    cached_ = 0;
  }

  int64_t cachedBytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(cached_);
  }

private:
  BlockCache() {
    if (auto env = debugFlag("WEFT_CPU_CACHE_MB"))
      limit_ = static_cast<size_t>(std::max(0L, std::atol(env->c_str()))) << 20;
  }
  std::mutex mu_;
  std::unordered_multimap<size_t, void*> free_;
  size_t cached_ = 0;
  size_t limit_ = size_t{2} << 30; // 2 GiB of idle blocks at most
};

std::atomic<int64_t> gCurrentBytes{0};
std::atomic<int64_t> gPeakBytes{0};

void track(int64_t delta) {
  int64_t now = gCurrentBytes.fetch_add(delta) + delta;
  int64_t peak = gPeakBytes.load();
  while (now > peak && !gPeakBytes.compare_exchange_weak(peak, now)) {
  }
}

} // namespace

MemoryStats memoryStats() {
  return {gCurrentBytes.load(), gPeakBytes.load(), BlockCache::get().cachedBytes()};
}

void resetPeakMemory() {
  gPeakBytes.store(gCurrentBytes.load());
}

void emptyCache() {
  BlockCache::get().emptyCache();
}

size_t Storage::allocationLimit() {
  static const size_t limit = [] {
    struct sysinfo info {};
    if (sysinfo(&info) != 0) return size_t{1} << 62;
    return (static_cast<size_t>(info.totalram) + info.totalswap) * info.mem_unit;
  }();
  return limit;
}

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, bool zero) {
  WEFT_CHECK(nbytes <= allocationLimit(), Value, "out of memory: cannot allocate ", nbytes,
             " bytes, more than this machine's memory and swap (", allocationLimit(), " bytes)");
  size_t size = bucketSize(std::max<size_t>(nbytes, 1));
  void* p = BlockCache::get().allocate(size);
  WEFT_CHECK(p != nullptr, Value, "out of memory: cannot allocate ", nbytes, " bytes");
  if (zero) std::memset(p, 0, nbytes);
  track(static_cast<int64_t>(size));
  try {
    return std::make_shared<Storage>(Key{}, hal::cpu(), reinterpret_cast<uint64_t>(p), 0, p, nbytes,
                                     size, nullptr);
  } catch (...) { // the block goes back where it came from
    BlockCache::get().release(p, size);
    track(-static_cast<int64_t>(size));
    throw;
  }
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes,
                                         std::function<void(void*)> deleter) {
  std::function<void()> release;
  if (deleter) release = [data, d = std::move(deleter)] { d(data); };
  return std::make_shared<Storage>(Key{}, hal::cpu(), reinterpret_cast<uint64_t>(data), 0, data,
                                   nbytes, 0, std::move(release));
}

std::shared_ptr<Storage> Storage::onDevice(hal::Device& device, uint64_t handle, size_t offset,
                                           size_t nbytes, void* host,
                                           std::function<void()> release) {
  return std::make_shared<Storage>(Key{}, device, handle, offset, host, nbytes, 0,
                                   std::move(release));
}

Storage::~Storage() {
  if (cachedSize_ > 0) {
    BlockCache::get().release(data_, cachedSize_);
    track(-static_cast<int64_t>(cachedSize_));
  } else if (release_) {
    release_();
  }
}

} // namespace weft
