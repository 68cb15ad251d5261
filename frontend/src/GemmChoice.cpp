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

/// Multiply-adds below which a GEMM runs in OpenBLAS unmeasured: it takes microseconds either
/// way, and its probe (a kernel compiled, about 0.1 s) would cost more compile time than
/// generated code could save in tens of thousands of calls.
constexpr int64_t kMinMeasuredWork = int64_t{1} << 20;

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

/// Adds to `g` a probe of `s`: the matmul alone, reading its own arguments; returns its group.
ir::FusionGroup addProbe(ir::Graph& g, const GemmShape& s) {
  const ir::ValueId x = g.addArgument({DType::Float32, {s.m, s.k}}, "x");
  const ir::ValueId w =
      g.addArgument({DType::Float32, s.transposed ? Shape{s.n, s.k} : Shape{s.k, s.n}}, "w");
  ir::FusionGroup grp;
  ir::ValueId b = w;
  if (s.transposed) {
    grp.leaves = {static_cast<int32_t>(g.nodes().size())};
    b = g.addNode(OpCode::Permute, {w}, Attrs().set("dims", Shape{1, 0}),
                  {DType::Float32, {s.k, s.n}});
  }
  grp.nodes = {static_cast<int32_t>(g.nodes().size())};
  const ir::ValueId y = g.addNode(OpCode::MatMul, {x, b}, {}, {DType::Float32, {s.m, s.n}});
  g.addOutput(y);
  grp.inputs = {x, w};
  grp.outputs = {y};
  grp.shape = {s.m, s.n};
  return grp;
}

/// Per shape, whether the generated GEMM beats OpenBLAS there, or nullopt where its probe could
/// not run (it does not compile or load, memory runs out): then OpenBLAS, and nothing is
/// remembered. The probes' kernels compile together (in parallel, from one graph holding them
/// all: a kernel is keyed by what it computes, so each is also its own probe's), then each probe
/// runs alone, generated and OpenBLAS alternating.
std::vector<std::optional<bool>> generatedIsFaster(const std::vector<GemmShape>& shapes,
                                                   const codegen::CpuTarget& target) {
  std::vector<std::optional<bool>> result(shapes.size());
  ir::Graph all("gemm_probes");
  std::vector<ir::FusionGroup> groups;
  for (const GemmShape& s : shapes)
    groups.push_back(addProbe(all, s));
  auto compiled = codegen::compileElementwise(all, groups, target);
  if (!compiled) return result;
  KernelTable& table = compiled.value().table;
  // The CPU code generator's GEMM against OpenBLAS: both run on the CPU, where the code runs.
  hal::Device& cpu = hal::device(Device::cpu());
  table.load(cpu);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const int32_t kernel = compiled.value().kernelOf[i];
    if (kernel < 0) continue;
    try {
      ir::Graph probe("gemm_probe");
      const std::vector<ir::FusedKernel> fused{{addProbe(probe, shapes[i]), kernel}};
      const Plan generated = ir::lowerToPlan(probe, fused, table);
      const Plan blas = ir::lowerToPlan(probe);
      std::vector<Buffer> args;
      for (ir::ValueId v : probe.arguments()) {
        args.push_back(allocateBuffer(cpu, probe.type(v).shape, DType::Float32));
        float* p = args.back().ref.ptr<float>();
        for (int64_t j = 0; j < args.back().ref.numel(); ++j)
          p[j] = static_cast<float>((j * 7919) % 17) * 0.125f - 1.0f;
      }
      // Alternating, each warmed up: neither gets the caches the other left behind more often.
      const double tg = medianSeconds([&] { (void)runPlan(cpu, generated, args, {}); });
      const double tb = medianSeconds([&] { (void)runPlan(cpu, blas, args, {}); });
      const double tg2 = medianSeconds([&] { (void)runPlan(cpu, generated, args, {}); });
      result[i] = (tg + tg2) / 2 < tb;
    } catch (const std::exception&) { // this probe could not run: OpenBLAS, this time
    }
  }
  return result;
}

/// The shape the choice sees for matmul `mm` of `g` (rows past 1024 change little: the threads
/// split them, and B is packed per launch either way; the probe stops there).
GemmShape gemmShape(const ir::Graph& g, const ir::Node& mm) {
  const Shape& out = g.type(mm.result).shape;
  const int32_t bp = g.value(mm.operands[1]).producer;
  return {std::min<int64_t>(numel(out) / out.back(), 1024), g.type(mm.operands[0]).shape.back(),
          out.back(), bp >= 0 && g.nodes()[static_cast<size_t>(bp)].op == OpCode::Permute};
}

} // namespace

passes::MatmulChooser matmulChooser(const codegen::CpuTarget& target) {
  const std::string mode = debugFlag("WEFT_GEMM").value_or("measure");
  WEFT_CHECK(mode == "measure" || mode == "generated" || mode == "blas", Value,
             "WEFT_GEMM must be generated, blas or measure, not '", mode, "'");
  if (mode == "generated" || mode == "blas" ||
      target.codeTarget() != codegen::CpuTarget::host().codeTarget()) {
    const bool all = mode == "generated";
    return [all](const ir::Graph&, const std::vector<const ir::Node*>& matmuls) {
      return std::vector<bool>(matmuls.size(), all);
    };
  }
  return [target](const ir::Graph& g, const std::vector<const ir::Node*>& matmuls) {
    // One measurement at a time (two timed at once on the same cores would both be wrong); the
    // answers per cache directory, target and thread count, in memory and in the kernel cache.
    static std::mutex mu;
    static std::map<std::tuple<std::string, std::string, int, GemmShape>, bool> known;
    std::lock_guard<std::mutex> lock(mu);
    auto memoOf = [&](const GemmShape& s) {
      return std::make_tuple(codegen::kernelCacheDir(), target.codeTarget(), getNumThreads(), s);
    };
    auto keyOf = [&](const GemmShape& s) {
      return "weft-gemm-choice 2 " + codegen::codegenVersion() + "\n" + target.codeTarget() +
             "\nthreads " + std::to_string(getNumThreads()) + "\n" + std::to_string(s.m) + " " +
             std::to_string(s.k) + " " + std::to_string(s.n) + (s.transposed ? " transposed" : "") +
             "\n";
    };
    // Small by all of its rows (the shape caps them).
    auto small = [&](const ir::Node& mm) {
      const Shape& out = g.type(mm.result).shape;
      return numel(out) * g.type(mm.operands[0]).shape.back() < kMinMeasuredWork;
    };
    // The shapes neither this process nor the cache knows, measured together.
    std::vector<GemmShape> measure;
    for (const ir::Node* n : matmuls) {
      const GemmShape s = gemmShape(g, *n);
      if (small(*n) || known.count(memoOf(s)) > 0 ||
          std::find(measure.begin(), measure.end(), s) != measure.end())
        continue;
      if (auto cached = codegen::readCachedChoice(keyOf(s)); cached && cached->size() == 1)
        known[memoOf(s)] = (*cached)[0] == 1;
      else
        measure.push_back(s);
    }
    std::vector<std::optional<bool>> answers(measure.size());
    try {
      answers = generatedIsFaster(measure, target);
    } catch (const std::exception&) { // the probes could not be built or loaded: OpenBLAS
    }
    for (size_t i = 0; i < measure.size(); ++i)
      if (answers[i]) {
        codegen::writeCachedChoice(keyOf(measure[i]), {static_cast<uint8_t>(*answers[i] ? 1 : 0)});
        known[memoOf(measure[i])] = *answers[i];
      }
    std::vector<bool> chosen;
    for (const ir::Node* n : matmuls) {
      const GemmShape s = gemmShape(g, *n);
      auto it = known.find(memoOf(s));
      chosen.push_back(!small(*n) && it != known.end() && it->second);
    }
    return chosen;
  };
}

} // namespace weft
