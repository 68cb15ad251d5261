// Generated GEMM or OpenBLAS, by measurement: both run a probe of the matmul alone on scratch
// data, as the compiled program would run it (the generated kernel launched through a plan; the
// interpreter's matmul, OpenBLAS on weft's pool, reading a transposed B in place).
#include "GemmChoice.h"

#include "weft/codegen/Elementwise.h"
#include "weft/codegen/KernelCache.h"
#include "weft/ir/Lower.h"
#include "weft/passes/Fusion.h"
#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace weft {
namespace {

/// A GEMM as the choice sees it: rows (batch rows folded), K, N and B's layout.
struct GemmShape {
  int64_t m, k, n;
  bool transposed;
  auto operator<=>(const GemmShape&) const = default;
};

/// Seconds `run` takes: the median of a few runs after one to warm up (fewer runs for long ones).
template <typename F> double medianSeconds(F&& run) {
  using Clock = std::chrono::steady_clock;
  auto time = [&] {
    auto start = Clock::now();
    run();
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double first = time();
  const int reps = first > 0.02 ? 1 : 5;
  std::vector<double> t;
  for (int i = 0; i < reps; ++i)
    t.push_back(time());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Whether the generated GEMM beats OpenBLAS at `s`, or nullopt where the probe could not run
/// (it does not compile or load, memory runs out): then OpenBLAS, and nothing is remembered.
std::optional<bool> generatedIsFaster(const GemmShape& s, const codegen::CpuTarget& target) {
  ir::Graph probe("gemm_probe");
  const ir::ValueId x = probe.addArgument({DType::Float32, {s.m, s.k}}, "x");
  const ir::ValueId w =
      probe.addArgument({DType::Float32, s.transposed ? Shape{s.n, s.k} : Shape{s.k, s.n}}, "w");
  ir::ValueId b = w;
  if (s.transposed)
    b = probe.addNode(OpCode::Permute, {w}, Attrs().set("dims", Shape{1, 0}),
                      {DType::Float32, {s.k, s.n}});
  probe.addOutput(probe.addNode(OpCode::MatMul, {x, b}, {}, {DType::Float32, {s.m, s.n}}));
  ir::FusionGroup grp;
  grp.nodes = {s.transposed ? 1 : 0};
  if (s.transposed) grp.leaves = {0};
  grp.inputs = {x, w};
  grp.outputs = {probe.outputs()[0]};
  grp.shape = {s.m, s.n};
  auto compiled = codegen::compileElementwise(probe, std::span(&grp, 1), target);
  if (!compiled || compiled.value().kernelOf[0] < 0) return std::nullopt;
  KernelTable& table = compiled.value().table;
  table.loaded = hal::cpu().load(table.code, table.kernels);
  const std::vector<ir::FusedKernel> fused{{grp, 0}};
  const Plan generated = ir::lowerToPlan(probe, fused, std::move(table));
  const Plan blas = ir::lowerToPlan(probe);
  std::vector<Buffer> args;
  for (ir::ValueId v : probe.arguments()) {
    args.push_back(allocateBuffer(probe.type(v).shape, DType::Float32));
    float* p = args.back().ref.ptr<float>();
    for (int64_t i = 0; i < args.back().ref.numel(); ++i)
      p[i] = static_cast<float>((i * 7919) % 17) * 0.125f - 1.0f;
  }
  // Alternating, each warmed up: neither gets the caches the other left behind more often.
  const double tg = medianSeconds([&] { (void)runPlan(generated, args, {}); });
  const double tb = medianSeconds([&] { (void)runPlan(blas, args, {}); });
  const double tg2 = medianSeconds([&] { (void)runPlan(generated, args, {}); });
  return (tg + tg2) / 2 < tb;
}

} // namespace

passes::MatmulChooser matmulChooser(const codegen::CpuTarget& target) {
  const std::string mode = debugFlag("WEFT_GEMM").value_or("measure");
  WEFT_CHECK(mode == "measure" || mode == "generated" || mode == "blas", Value,
             "WEFT_GEMM must be generated, blas or measure, not '", mode, "'");
  if (mode == "generated") return [](const ir::Graph&, const ir::Node&) { return true; };
  if (mode == "blas" || target.codeTarget() != codegen::CpuTarget::host().codeTarget())
    return [](const ir::Graph&, const ir::Node&) { return false; };
  return [target](const ir::Graph& g, const ir::Node& mm) {
    const Shape& out = g.type(mm.result).shape;
    const ir::Node* bp = g.value(mm.operands[1]).producer >= 0
                             ? &g.nodes()[static_cast<size_t>(g.value(mm.operands[1]).producer)]
                             : nullptr;
    // Rows past 1024 change little (the threads split them; B is packed per launch either way):
    // the probe stops there, and batch sizes beyond share one answer.
    const GemmShape s{std::min<int64_t>(numel(out) / out.back(), 1024),
                      g.type(mm.operands[0]).shape.back(), out.back(),
                      bp != nullptr && bp->op == OpCode::Permute};
    // One probe at a time (two timed at once on the same cores would both be wrong); the answers
    // per cache directory, target and thread count.
    static std::mutex mu;
    static std::map<std::tuple<std::string, std::string, int, GemmShape>, bool> known;
    const auto memo =
        std::make_tuple(codegen::kernelCacheDir(), target.codeTarget(), getNumThreads(), s);
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = known.find(memo); it != known.end()) return it->second;
    const std::string key = "weft-gemm-choice 1 " + codegen::codegenVersion() + "\n" +
                            target.codeTarget() + "\nthreads " + std::to_string(getNumThreads()) +
                            "\n" + std::to_string(s.m) + " " + std::to_string(s.k) + " " +
                            std::to_string(s.n) + (s.transposed ? " transposed" : "") + "\n";
    if (auto cached = codegen::readCachedChoice(key); cached && cached->size() == 1)
      return known[memo] = (*cached)[0] == 1;
    std::optional<bool> generated;
    try {
      generated = generatedIsFaster(s, target);
    } catch (const std::exception&) { // the probe could not run: OpenBLAS, this time
    }
    if (!generated) return false;
    codegen::writeCachedChoice(key, {static_cast<uint8_t>(*generated ? 1 : 0)});
    return known[memo] = *generated;
  };
}

} // namespace weft
