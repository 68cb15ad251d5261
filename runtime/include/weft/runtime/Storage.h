// Reference-counted byte storage that tensors and views share, with the in-place version counter.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace weft {

/// A block of memory owned by weft or borrowed from the user. Shared through std::shared_ptr, whose
/// reference count is atomic, so storage may be shared across threads.
class Storage {
public:
  /// Allocates `nbytes` of 64-byte aligned memory; `zero` fills it with zeros.
  static std::shared_ptr<Storage> allocate(size_t nbytes, bool zero = false);
  /// The most one allocation may ask for: the machine's memory and swap. allocate() refuses more
  /// (whatever the kernel's overcommit policy, which may grant it and kill the process later).
  static size_t allocationLimit();
  /// Wraps memory the user owns; `deleter` (if any) runs when the last reference goes.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes,
                                         std::function<void(void*)> deleter = {});
  /// Lets only allocate() and borrow() construct (through std::make_shared: one heap block).
  class Key {
    friend class Storage;
    Key() = default;
  };
  /// `cachedSize` > 0: weft's block of that size, returned to the block cache when freed;
  /// otherwise borrowed memory that `deleter` (if any) frees.
  Storage(Key, void* data, size_t nbytes, size_t cachedSize, std::function<void(void*)> deleter)
      : data_(data), nbytes_(nbytes), cachedSize_(cachedSize), deleter_(std::move(deleter)) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The first byte.
  void* data() const { return data_; }
  /// Its size in bytes.
  size_t nbytes() const { return nbytes_; }
  /// Counts in-place writes, so autograd can tell that a saved tensor changed.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  /// Records one in-place write.
  void bumpVersion() { version_.fetch_add(1, std::memory_order_acq_rel); }

private:
  void* data_;
  size_t nbytes_;
  size_t cachedSize_;
  std::function<void(void*)> deleter_;
  std::atomic<uint64_t> version_{0};
};

/// Bytes of storage weft allocated that are alive now, the most alive at once since the last
/// resetPeakMemory(), and freed blocks the caching allocator keeps for reuse (borrowed user
/// buffers are not counted).
struct MemoryStats {
  int64_t currentBytes = 0;
  int64_t peakBytes = 0;
  int64_t cachedBytes = 0;
};
MemoryStats memoryStats();
/// Starts a new peak measurement at the current level.
void resetPeakMemory();
/// Returns the caching allocator's idle blocks to the system (WEFT_CPU_CACHE_MB caps them).
void emptyCache();

} // namespace weft
