// A work-sharing pool: each parallelFor is a job whose chunks the caller and the workers claim.
#include "weft/runtime/ThreadPool.h"
#include "weft/runtime/Blas.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Error.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <source_location>
#include <thread>
#include <utility>
#include <vector>

namespace weft {
namespace {

thread_local bool tInsideParallel = false;

/// Polls `ready` for up to about 50 microseconds; true once it holds. Every 64 polls it yields
/// the core: the scheduler may have put the thread this one waits for (or the caller that will
/// hand it work) on the same core, and a spin that never yields would hold it off for the whole
/// 50 us (a GEMM split over two threads then ran at one thread's speed).
template <typename Ready> bool spinUntil(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::yield();
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

struct Job {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk, numChunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> remaining;
  std::mutex mu;
  std::condition_variable done;
  std::exception_ptr error;         // the first chunk's to throw (guarded by mu)
  int64_t errorChunk = -1;          // which chunk threw it (guarded by mu)
  std::atomic<int64_t> failedBelow; // chunks from here on are skipped: one before threw
  /// The caller's call site: an error a worker throws names the user's line, as on the caller.
  std::optional<std::source_location> site;

  Job(const std::function<void(int64_t, int64_t)>* f, int64_t n_, int64_t chunk_, int64_t k)
      : fn(f), n(n_), chunk(chunk_), numChunks(k), remaining(k), failedBelow(k) {
    if (const std::source_location* s = CallSite::current()) site = *s;
  }

  /// Claims and runs chunks until none is left. Where chunks throw, the lowest one's error is
  /// kept: each chunk stops at its first failure, so that is the first in order, whatever the
  /// number of threads (a bad index is reported as a single-threaded loop would report it).
  void work() {
    std::optional<CallSite> guard; // on the caller's thread, its own CallSite stays outermost
    if (site) guard.emplace(*site);
    for (int64_t c; (c = next.fetch_add(1)) < numChunks;) {
      if (c < failedBelow.load(std::memory_order_relaxed)) runChunk(c);
      if (remaining.fetch_sub(1) == 1) {
        std::lock_guard<std::mutex> lock(mu);
        done.notify_all();
      }
    }
  }

private:
  void runChunk(int64_t c) {
    int64_t b = c * chunk, e = std::min(n, b + chunk);
    bool saved = tInsideParallel;
    tInsideParallel = true;
    try {
      (*fn)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error || c < errorChunk) {
        error = std::current_exception();
        errorChunk = c;
        failedBelow.store(std::min(failedBelow.load(), c + 1));
      }
    }
    tInsideParallel = saved;
  }
};

class Pool {
public:
  static Pool& get() {
    static Pool* pool = new Pool(); // never destroyed: workers may outlive static destructors
    return *pool;
  }

  int threads() const { return threads_.load(); }
  void setThreads(int n) { threads_.store(std::max(1, n)); }

  void run(const std::shared_ptr<Job>& job, int helpers) {
    bool sleeping = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (static_cast<int>(workers_.size()) < helpers)
        workers_.emplace_back([this] { loop(); });
      for (int h = 0; h < helpers; ++h)
        queue_.push_back(job);
      queued_.fetch_add(helpers, std::memory_order_release);
      sleeping = sleepers_ > 0;
    }
    if (sleeping) wake_.notify_all(); // spinning workers see the queue without a system call
  }

private:
  Pool() {
    int n = static_cast<int>(std::thread::hardware_concurrency());
    if (auto env = debugFlag("WEFT_NUM_THREADS")) n = std::max(1, std::atoi(env->c_str()));
    threads_.store(std::max(1, n));
    // OpenBLAS's kernels fit for this CPU (weft/runtime/Blas.h), before weft's first BLAS call.
    (void)blasInfo();
    // GEMMs run inside this pool (kernels/Gemm.h splits them), so OpenBLAS keeps to the thread
    // that calls it instead of starting workers of its own that would compete for the cores.
    openblas_set_num_threads(1);
  }

  void loop() {
    tInsideParallel = true;
    for (;;) {
      // Eager steps launch kernels back to back: a worker that just finished one spins briefly
      // for the next instead of sleeping, which would cost a futex wake per kernel.
      spinUntil([this] { return queued_.load(std::memory_order_acquire) > 0; });
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++sleepers_;
        wake_.wait(lock, [this] { return !queue_.empty(); });
        --sleepers_;
        job = std::move(queue_.front());
        queue_.pop_front();
        queued_.fetch_sub(1, std::memory_order_relaxed);
      }
      job->work();
    }
  }

  std::atomic<int> threads_;
  std::atomic<int> queued_{0};
  int sleepers_ = 0; // guarded by mu_
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::thread> workers_; // detached at exit: the pool lives for the whole process
};

} // namespace

int getNumThreads() {
  return Pool::get().threads();
}

void setNumThreads(int n) {
  Pool::get().setThreads(n);
}

void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int threads = getNumThreads();
  if (tInsideParallel || threads == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  int64_t numChunks = std::min<int64_t>(threads, (n + grain - 1) / grain);
  int64_t chunk = (n + numChunks - 1) / numChunks;
  numChunks = (n + chunk - 1) / chunk;
  auto job = std::make_shared<Job>(&fn, n, chunk, numChunks);
  Pool::get().run(job, static_cast<int>(numChunks - 1));
  job->work();
  spinUntil([&] { return job->remaining.load() == 0; });
  std::unique_lock<std::mutex> lock(job->mu);
  job->done.wait(lock, [&] { return job->remaining.load() == 0; });
  // Taken out of the job: a worker may drop the job's last reference later, and the exception
  // must be freed on this thread, which reads it (its reference count is invisible to TSan).
  if (std::exception_ptr error = std::exchange(job->error, nullptr)) std::rethrow_exception(error);
}

} // namespace weft
