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

/// Calls of operator new so far in this process (OpsBench.cpp replaces it to count them).
long newCalls();

/// What one call of an op costs: nanoseconds (median of 7 rounds) and operator new calls.
struct OpCost {
  double ns = 0;
  double news = 0;
};

/// The cost of one call of `op`: 7 timed rounds of `iterations` calls, then one counted round.
template <typename Op> OpCost costPerCall(Op&& op, int iterations) {
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
  long before = newCalls();
  for (int i = 0; i < iterations; ++i)
    op();
  return {rounds[rounds.size() / 2], static_cast<double>(newCalls() - before) / iterations};
}

/// The cost of each of opNames() on `a`, `b` ([16]), `m`, `n` ([4, 4]), `ga`, `gb` ([16],
/// requiring grad) and `acc` ([16], written in place). One template for both libraries: weft
/// spells these ops as LibTorch does.
template <typename T>
std::vector<OpCost> timeOps(const T& a, const T& b, const T& m, const T& n, const T& ga,
                            const T& gb, T acc, int iterations) {
  std::vector<OpCost> ns;
  ns.push_back(costPerCall([&] { (void)(a + b); }, iterations));
  ns.push_back(costPerCall([&] { (void)(a * 2.0); }, iterations));
  ns.push_back(costPerCall([&] { (void)a.exp(); }, iterations));
  ns.push_back(costPerCall([&] { (void)a.sum(); }, iterations));
  ns.push_back(costPerCall([&] { (void)a.relu(); }, iterations));
  ns.push_back(costPerCall([&] { (void)a.reshape({4, 4}); }, iterations));
  ns.push_back(costPerCall([&] { (void)m.t(); }, iterations));
  ns.push_back(costPerCall([&] { (void)m.matmul(n); }, iterations));
  ns.push_back(costPerCall([&] { acc.add_(b); }, iterations));
  ns.push_back(costPerCall([&] { (void)(ga + gb); }, iterations));
  return ns;
}

/// The cost of each of opNames(), for weft and for LibTorch.
std::vector<OpCost> weftOps(int threads, int iterations);
std::vector<OpCost> torchOps(int threads, int iterations);

} // namespace bench
