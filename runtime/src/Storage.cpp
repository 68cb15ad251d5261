// Aligned allocation and borrowed user buffers behind tensors.
#include "weft/runtime/Storage.h"

#include "weft/runtime/Error.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

namespace weft {
namespace {

std::atomic<int64_t> gCurrentBytes{0};
std::atomic<int64_t> gPeakBytes{0};

void track(int64_t delta) {
  int64_t now = gCurrentBytes.fetch_add(delta) + delta;
  int64_t peak = gPeakBytes.load();
  while (now > peak && !gPeakBytes.compare_exchange_weak(peak, now)) {
  }
}

} // namespace

MemoryStats memoryStats() { return {gCurrentBytes.load(), gPeakBytes.load()}; }

void resetPeakMemory() { gPeakBytes.store(gCurrentBytes.load()); }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, bool zero) {
  constexpr size_t kAlign = 64;
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  WEFT_CHECK(p != nullptr, Value, "out of memory: cannot allocate ", nbytes, " bytes");
  if (zero)
    std::memset(p, 0, nbytes);
  auto bytes = static_cast<int64_t>(rounded);
  track(bytes);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, [bytes](void* q) {
    std::free(q);
    track(-bytes);
  }));
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes,
                                         std::function<void(void*)> deleter) {
  return std::shared_ptr<Storage>(new Storage(data, nbytes, std::move(deleter)));
}

Storage::~Storage() {
  if (deleter_)
    deleter_(data_);
}

} // namespace weft
