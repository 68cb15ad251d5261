// The pass registry and the pass manager.
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"
#include "weft/runtime/DebugFlags.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <utility>

namespace weft::passes {
namespace {

using TargetPtr = std::shared_ptr<const Target>;

const std::vector<std::pair<std::string, std::function<std::unique_ptr<Pass>(const TargetPtr&)>>>&
registry() {
  static const std::vector<
      std::pair<std::string, std::function<std::unique_ptr<Pass>(const TargetPtr&)>>>
      r = {
          {"autodiff", [](const TargetPtr&) { return createAutodiff(); }},
          {"cse", [](const TargetPtr&) { return createCommonSubexpressionElimination(); }},
          {"dce", [](const TargetPtr&) { return createDeadCodeElimination(); }},
          {"expand-softmax", [](const TargetPtr&) { return createExpandSoftmax(); }},
          {"fold", [](const TargetPtr&) { return createConstantFolding(); }},
          {"fuse", [](const TargetPtr& t) { return createFuse(t); }},
          // fuse, every matmul it may leading its readers' group (compile() measures per shape)
          {"fuse-matmul",
           [](const TargetPtr& t) {
             return createFuse(t,
                               [](const ir::Graph&, const std::vector<const ir::Node*>& matmuls) {
                                 return std::vector<bool>(matmuls.size(), true);
                               });
           }},
          {"hoist", [](const TargetPtr&) { return createHoist(); }},
          {"lower", [](const TargetPtr&) { return createLower(); }},
          {"mask-rows", [](const TargetPtr&) { return createMaskRows(); }},
          {"output-grads", [](const TargetPtr&) { return createOutputGradients(); }},
          {"plan-memory", [](const TargetPtr&) { return createPlanMemory(); }},
          {"remat", [](const TargetPtr& t) { return createRematerialize(t); }},
          {"simplify", [](const TargetPtr&) { return createAlgebraicSimplification(); }},
          {"split", [](const TargetPtr&) { return createSplit(); }},
          {"split-sums", [](const TargetPtr&) { return createSplitSums(); }},
      };
  return r;
}

} // namespace

const std::vector<std::string>& compilePipeline() {
  static const std::vector<std::string> names = {
      "output-grads", "mask-rows", "split", "simplify",   "fold",  "simplify",
      "cse",          "dce",       "remat", "dce",        "hoist", "expand-softmax",
      "split-sums",   "fuse",      "lower", "plan-memory"};
  return names;
}

std::unique_ptr<Pass> createPass(std::string_view name, std::shared_ptr<const Target> target) {
  for (const auto& [n, make] : registry())
    if (n == name) return make(target);
  return nullptr;
}

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const auto& entry : registry())
    names.push_back(entry.first);
  return names;
}

PassManager::PassManager()
    : printAfter_(debugFlag("WEFT_PRINT_IR_AFTER").value_or("")),
      dumpDir_(debugFlag("WEFT_DUMP_DIR").value_or("")),
      timePasses_(debugFlag("WEFT_TIME_PASSES").value_or("0") == "1") {}

PassManager& PassManager::add(std::unique_ptr<Pass> pass) {
  // WEFT_SKIP_PASSES names graph passes to leave out, separated by commas. The program passes
  // stay: without them a compiled function would lose its gradients, masking or executable.
  std::string skip = "," + debugFlag("WEFT_SKIP_PASSES").value_or("") + ",";
  if (!pass->onProgram() && skip.find("," + std::string(pass->name()) + ",") != std::string::npos)
    return *this;
  passes_.push_back(std::move(pass));
  return *this;
}

ir::Result<bool> PassManager::run(ir::Graph& g) {
  return runOnGraph(g, [this](Program& p) { return run(p); });
}

namespace {

/// The first problem the verifier finds in one of `p`'s graphs.
std::optional<ir::Diagnostic> verifyProgram(Program& p) {
  for (ir::Graph* g : p.graphs())
    if (std::vector<ir::Diagnostic> problems = ir::verify(*g); !problems.empty())
      return problems[0];
  return std::nullopt;
}

} // namespace

ir::Result<bool> PassManager::run(Program& p) {
  bool changed = false;
  auto dump = [&](const std::string& tag) {
    if (dumpDir_.empty()) return;
    // One count across every pass manager of the process: the program's and each graph's dumps
    // (which share the traced graph's name) never overwrite each other.
    static std::atomic<int> dumps{0};
    char prefix[16];
    std::snprintf(prefix, sizeof(prefix), "%02d-", dumps++);
    std::ofstream(dumpDir_ + "/" + p.graph.name() + "." + prefix + tag + ".wir")
        << printProgram(p);
  };
  dump("input");
  // Passes read attributes and shapes the verifier has checked (Attrs accessors cannot fail on
  // them): a graph that does not verify is a diagnostic here, before any pass runs.
  if (std::optional<ir::Diagnostic> problem = verifyProgram(p))
    return ir::diag(problem->kind, "the graph does not verify: ", problem->message);
  for (const auto& pass : passes_) {
    // A graph pass renumbers values: the program's gradients and probe must have been used first.
    if (!pass->onProgram() && p.probe)
      return ir::diag(ErrorKind::Value, pass->name(),
                      ": the graph passes run after mask-rows (the probe trace matches the graph "
                      "only until then)");
    if (!pass->onProgram() && !p.seeds.empty() && !p.backward)
      return ir::diag(ErrorKind::Value, pass->name(),
                      ": a program with output gradients is split before the graph passes (they "
                      "renumber the values its gradients refer to)");
    auto start = std::chrono::steady_clock::now();
    ir::Result<bool> r = pass->run(p);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    // An internal error names the pass that found it (for the report); an error in the user's
    // program reads as the pass wrote it (it names the user's line).
    if (!r && r.diagnostic().kind != ErrorKind::Internal) return r.diagnostic();
    if (!r) return ir::diag(r.diagnostic().kind, pass->name(), ": ", r.diagnostic().message);
    changed = changed || r.value();
    if (timePasses_)
      std::fprintf(stderr, "[weft] pass %-14s %8.3f ms  %s\n", std::string(pass->name()).c_str(),
                   ms, r.value() ? "changed" : "unchanged");
    if (std::optional<ir::Diagnostic> problem = verifyProgram(p))
      return ir::diag(ErrorKind::Internal,
                      "internal error, please report: the graph does not verify after pass '",
                      pass->name(), "': ", problem->message);
    if (printAfter_ == "all" || printAfter_ == pass->name())
      std::fprintf(stderr, "// ----- after %s (%s)\n%s", std::string(pass->name()).c_str(),
                   r.value() ? "changed" : "unchanged", printProgram(p).c_str());
    dump(std::string(pass->name()));
  }
  return changed;
}

} // namespace weft::passes
