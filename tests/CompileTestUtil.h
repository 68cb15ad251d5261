// What the compile() tests share: reading a tensor's values, and checks of a compiled function's
// text form and memory plan.
#pragma once

#include "TestUtil.h"

#include "weft/codegen/Jit.h"
#include "weft/ir/Graph.h"
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/Executable.h"
#include "weft/runtime/View.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace weft::test {

inline std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

/// Every compiled graph must verify and print back exactly through the parser.
inline ::testing::AssertionResult roundTrips(const CompiledFunction& cf) {
  std::string text = cf.graph_text();
  auto parsed = ir::parseGraph(text);
  if (!parsed) return ::testing::AssertionFailure() << parsed.diagnostic().message << "\n" << text;
  if (!ir::verify(parsed.value()).empty())
    return ::testing::AssertionFailure() << ir::verify(parsed.value())[0].message;
  // The kernels print as comments, which the parser skips: fusing the parsed graph again must
  // find the same ones, with the matmuls that led kernels when compiled leading them again (which
  // do was measured per shape; the text does not say).
  std::set<int64_t> leaders;
  for (size_t at = text.find("nodes(%"); at != std::string::npos; at = text.find("nodes(%", at + 1))
    leaders.insert(std::stoll(text.substr(at + 7)));
  auto led = [&](const ir::Graph& g, const std::vector<const ir::Node*>& matmuls) {
    std::vector<bool> r;
    for (const ir::Node* n : matmuls)
      r.push_back(leaders.count(n - g.nodes().data()) > 0);
    return r;
  };
  if (!passes::createFuse(std::make_shared<codegen::CpuTarget>(), led)->run(parsed.value()))
    return ::testing::AssertionFailure() << "fuse failed";
  if (ir::printGraph(parsed.value()) != text)
    return ::testing::AssertionFailure() << "printed differently after parsing:\n" << text;
  return ::testing::AssertionSuccess();
}

/// An independent check of a compiled program's memory plan: each planned buffer lies inside the
/// arena, and two planned buffers alive at the same step never share bytes, except an output
/// written where an input read for the last time by that step was (same offset, same size). With
/// `reuses`, some memory also serves two buffers (the planner did reuse).
inline ::testing::AssertionResult arenaIsSound(const CompiledFunction& cf, bool reuses = true) {
  const Plan& plan = cf.executable()->plan;
  const auto n = static_cast<size_t>(plan.numSlots);
  if (plan.arenaOffset.size() != n) return ::testing::AssertionFailure() << "no memory plan";
  std::vector<int64_t> def(n, -1), last(n, -1), bytes(n, 0);
  std::vector<int32_t> base(n);
  std::iota(base.begin(), base.end(), 0);
  auto write = [&](int32_t s, int64_t at, DType t, const Shape& shape) {
    def[static_cast<size_t>(s)] = last[static_cast<size_t>(s)] = at;
    bytes[static_cast<size_t>(s)] = numel(shape) * static_cast<int64_t>(elementSize(t));
  };
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& st = plan.steps[i];
    const auto at = static_cast<int64_t>(i);
    for (int32_t s : st.inputs)
      last[static_cast<size_t>(base[static_cast<size_t>(s)])] =
          std::max(last[static_cast<size_t>(base[static_cast<size_t>(s)])], at);
    if (st.kernel >= 0)
      for (size_t k = 0; k < st.kernelOutputs.size(); ++k)
        write(st.kernelOutputs[k], at, st.kernelTypes[k].first, st.kernelTypes[k].second);
    else if (isViewOp(st.op))
      base[static_cast<size_t>(st.output)] = base[static_cast<size_t>(st.inputs[0])];
    else
      write(st.output, at, st.dtype, st.shape);
  }
  for (const auto& [index, slot] : plan.stateUpdates)
    last[static_cast<size_t>(base[static_cast<size_t>(slot)])] =
        static_cast<int64_t>(plan.steps.size());
  std::vector<size_t> planned;
  int64_t total = 0;
  for (size_t s = 0; s < n; ++s)
    if (plan.arenaOffset[s] >= 0) {
      planned.push_back(s);
      total += bytes[s];
      if (plan.arenaOffset[s] + bytes[s] > plan.arenaBytes)
        return ::testing::AssertionFailure() << "slot " << s << " ends past the arena";
    }
  for (size_t a : planned)
    for (size_t b : planned) {
      if (a >= b || def[a] > last[b] || def[b] > last[a]) continue; // not alive together
      int64_t oa = plan.arenaOffset[a], ob = plan.arenaOffset[b];
      if (oa + bytes[a] <= ob || ob + bytes[b] <= oa) continue; // apart
      bool handOff = oa == ob && bytes[a] == bytes[b] && (def[b] == last[a] || def[a] == last[b]);
      if (!handOff)
        return ::testing::AssertionFailure() << "slots " << a << " and " << b << " overlap";
    }
  if (cf.planned_bytes() != plan.arenaBytes)
    return ::testing::AssertionFailure() << "planned_bytes() is not the arena's size";
  if (reuses && (planned.empty() || plan.arenaBytes >= total))
    return ::testing::AssertionFailure()
           << "no buffer shares memory (" << plan.arenaBytes << " of " << total << " bytes)";
  return ::testing::AssertionSuccess();
}

} // namespace weft::test
