// The CPU thread pool that eager kernels split their work over.
#pragma once

#include <cstdint>
#include <functional>

namespace weft {

/// Threads kernels use: WEFT_NUM_THREADS if set, else the machine's hardware threads.
int getNumThreads();
/// Sets the number of threads kernels use, GEMMs included: OpenBLAS runs single-threaded inside
/// this pool (1 runs everything on the calling thread).
void setNumThreads(int n);

/// Runs `fn(begin, end)` over [0, n) split into chunks of at least `grain` elements, on the pool
/// and the calling thread. Safe to call from many threads at once; a call from inside a chunk runs
/// inline. Where chunks throw, the exception of the lowest one (the first failure in order) is
/// rethrown on the calling thread, once; chunks after it may be skipped. Chunks on the pool's
/// threads see the caller's CallSite, so a weft::Error they throw names the user's line.
void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

} // namespace weft
