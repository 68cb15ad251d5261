// Aligned allocation and borrowed user buffers behind tensors.
#include "weft/runtime/Storage.h"

#include "weft/runtime/Error.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace weft {

std::shared_ptr<Storage> Storage::allocate(size_t nbytes, bool zero) {
  constexpr size_t kAlign = 64;
  size_t rounded = (nbytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded);
  WEFT_CHECK(p != nullptr, Value, "out of memory: cannot allocate ", nbytes, " bytes");
  if (zero)
    std::memset(p, 0, nbytes);
  return std::shared_ptr<Storage>(new Storage(p, nbytes, [](void* q) { std::free(q); }));
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
