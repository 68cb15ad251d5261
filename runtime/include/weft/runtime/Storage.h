// Reference-counted byte storage that tensors and views share, with the in-place version counter.
// A storage is a device-neutral buffer: the device that made it, its handle and offset as that
// device names them, its size, and a host address only where the CPU may read it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace weft {

namespace hal {
class Device;
}

/// A block of memory owned by weft or borrowed from the user, on one device. Shared through
/// std::shared_ptr, whose reference count is atomic, so storage may be shared across threads.
class Storage {
public:
  /// Allocates `nbytes` of 64-byte aligned memory; `zero` fills it with zeros.
  static std::shared_ptr<Storage> allocate(size_t nbytes, bool zero = false);
  /// The most one allocation may ask for: the machine's memory and swap. allocate() refuses more
  /// (whatever the kernel's overcommit policy, which may grant it and kill the process later).
  static size_t allocationLimit();
  /// Wraps host memory the user owns; `deleter` (if any) runs when the last reference goes.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes,
                                         std::function<void(void*)> deleter = {});
  /// Memory `device` made: `handle` and `offset` (bytes) name it as the device does, `host` is
  /// where the CPU may read and write it (null where it may not); `release` runs when the last
  /// reference goes. How devices other than the CPU hand out their buffers.
  static std::shared_ptr<Storage> onDevice(hal::Device& device, uint64_t handle, size_t offset,
                                           size_t nbytes, void* host,
                                           std::function<void()> release);
  /// Lets only allocate() and borrow() construct (through std::make_shared: one heap block).
  class Key {
    friend class Storage;
    Key() = default;
  };
  /// `cachedSize` > 0: weft's block of that size, returned to the block cache when freed;
  /// otherwise memory borrowed or made by a device, which `release` (if any) frees.
  Storage(Key, hal::Device& device, uint64_t handle, size_t offset, void* data, size_t nbytes,
          size_t cachedSize, std::function<void()> release)
      : device_(&device), handle_(handle), offset_(offset), data_(data), nbytes_(nbytes),
        cachedSize_(cachedSize), release_(std::move(release)) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The device the memory is on.
  hal::Device& device() const { return *device_; }
  /// The device's name for the memory (the CPU: its address) and the offset in bytes into it.
  uint64_t handle() const { return handle_; }
  size_t offset() const { return offset_; }
  /// The first byte as the CPU sees it, or null where the device's memory is not host-visible.
  void* data() const { return data_; }
  /// Its size in bytes.
  size_t nbytes() const { return nbytes_; }
  /// Counts in-place writes, so autograd can tell that a saved tensor changed.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  /// Records one in-place write.
  void bumpVersion() { version_.fetch_add(1, std::memory_order_acq_rel); }

private:
  hal::Device* device_;
  uint64_t handle_;
  size_t offset_;
  void* data_;
  size_t nbytes_;
  size_t cachedSize_;
  std::function<void()> release_;
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
