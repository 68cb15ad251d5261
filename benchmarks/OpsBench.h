// weft-bench-ops: what one eager op costs on a tensor so small that the kernel's work is nothing
// next to the framework's own (dispatch, type inference, allocation, autograd recording), for
// weft (OpsBench.cpp) and LibTorch (OpsBenchTorch.cpp), kept in separate files so neither
// library's headers see the other's.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace bench {

/// The ops both sides time, in order: each on float32 tensors of 16 elements ([4, 4] where it
/// says), the result dropped.
inline const std::vector<std::string>& opNames() {
  static const std::vector<std::string> names = {
      "a + b",         "a * 2.0",
      "a.exp()",       "a.sum()",
      "a.relu()",      "a.reshape({4,4})",
      "a.t() ([4,4])", "a.matmul(b) [4,4]",
      "a.add_(b)",     "a + b (requires_grad: records a node)"};
  return names;
}

/// Nanoseconds per call of `op` (median of 7 rounds of `iterations` calls).
template <typename Op> double nsPerCall(Op&& op, int iterations) {
  for (int i = 0; i < iterations / 10; ++i)
    op();
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i)
      op();
    rounds.push_back(
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() /
        iterations);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

/// ns per call of each of opNames() on `a`, `b` ([16]), `m`, `n` ([4, 4]), `ga`, `gb` ([16],
/// requiring grad) and `acc` ([16], written in place). One template for both libraries: weft
/// spells these ops as LibTorch does.
template <typename T>
std::vector<double> timeOps(const T& a, const T& b, const T& m, const T& n, const T& ga,
                            const T& gb, T acc, int iterations) {
  std::vector<double> ns;
  ns.push_back(nsPerCall([&] { (void)(a + b); }, iterations));
  ns.push_back(nsPerCall([&] { (void)(a * 2.0); }, iterations));
  ns.push_back(nsPerCall([&] { (void)a.exp(); }, iterations));
  ns.push_back(nsPerCall([&] { (void)a.sum(); }, iterations));
  ns.push_back(nsPerCall([&] { (void)a.relu(); }, iterations));
  ns.push_back(nsPerCall([&] { (void)a.reshape({4, 4}); }, iterations));
  ns.push_back(nsPerCall([&] { (void)m.t(); }, iterations));
  ns.push_back(nsPerCall([&] { (void)m.matmul(n); }, iterations));
  ns.push_back(nsPerCall([&] { acc.add_(b); }, iterations));
  ns.push_back(nsPerCall([&] { (void)(ga + gb); }, iterations));
  return ns;
}

/// ns per call of each of opNames(), for weft and for LibTorch.
std::vector<double> weftOps(int threads, int iterations);
std::vector<double> torchOps(int threads, int iterations);

} // namespace bench
