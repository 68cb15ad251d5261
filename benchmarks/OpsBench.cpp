// weft-bench-ops: per-op overhead of eager weft next to eager LibTorch on tiny tensors; prints a
// table of nanoseconds per call, their ratio, and the heap allocations (operator new calls) each
// call makes in either library (see OpsBench.h).
//
//   weft-bench-ops [--threads N] [--iterations N]
#include "OpsBench.h"

#include <weft/weft.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {
std::atomic<long> gNewCalls{0};
} // namespace

// Counting replacements of the global allocation functions (the array, nothrow and aligned forms
// the library provides call or pair with these).
void* operator new(std::size_t n) {
  gNewCalls.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace bench {

long newCalls() {
  return gNewCalls.load(std::memory_order_relaxed);
}

std::vector<OpCost> weftOps(int threads, int iterations) {
  weft::setNumThreads(threads);
  weft::Generator g(1);
  weft::Tensor a = weft::randn({16}, weft::kFloat32, g), b = weft::randn({16}, weft::kFloat32, g);
  weft::Tensor m = weft::randn({4, 4}, weft::kFloat32, g),
               n = weft::randn({4, 4}, weft::kFloat32, g);
  weft::Tensor ga = a.clone().requires_grad_(), gb = b.clone().requires_grad_();
  weft::Tensor acc = weft::zeros({16});
  return timeOps(a, b, m, n, ga, gb, acc, iterations);
}

} // namespace bench

int main(int argc, char** argv) {
  int threads = 2, iterations = 20000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--threads") == 0)
      threads = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--iterations") == 0)
      iterations = std::max(10, std::atoi(argv[i + 1]));
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--iterations N]\n", argv[0]);
      return 2;
    }
  }
  std::vector<bench::OpCost> w = bench::weftOps(threads, iterations);
  std::vector<bench::OpCost> t = bench::torchOps(threads, iterations);
  std::printf("weft-bench-ops: eager per-op cost on 16-element float32 tensors, %d threads each, "
              "median of 7 rounds of %d calls\n\n",
              threads, iterations);
  std::printf("| %-40s | %10s | %12s | %13s | %11s | %15s |\n", "op", "weft ns", "LibTorch ns",
              "LibTorch/weft", "weft news", "LibTorch news");
  std::printf("|------------------------------------------|------------|--------------|------------"
              "---|-------------|-----------------|\n");
  const std::vector<std::string>& names = bench::opNames();
  for (size_t i = 0; i < names.size(); ++i)
    std::printf("| %-40s | %10.0f | %12.0f | %12.2fx | %11.1f | %15.1f |\n", names[i].c_str(),
                w[i].ns, t[i].ns, t[i].ns / w[i].ns, w[i].news, t[i].news);
  return 0;
}
