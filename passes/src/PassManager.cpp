// The pass registry and the pass manager.
#include "weft/ir/TextFormat.h"
#include "weft/ir/Verifier.h"
#include "weft/passes/Autodiff.h"
#include "weft/passes/Pass.h"
#include "weft/runtime/DebugFlags.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <utility>

namespace weft::passes {
namespace {

const std::vector<std::pair<std::string, std::function<std::unique_ptr<Pass>()>>>& registry() {
  static const std::vector<std::pair<std::string, std::function<std::unique_ptr<Pass>()>>> r = {
      {"autodiff", createAutodiff},
      {"cse", createCommonSubexpressionElimination},
      {"dce", createDeadCodeElimination},
      {"expand-softmax", createExpandSoftmax},
      {"fold", createConstantFolding},
      {"fuse", [] { return createFuse(); }},
      // fuse, every matmul it may leading its readers' group (compile() measures per shape)
      {"fuse-matmul",
       [] {
         return createFuse([](const ir::Graph&, const std::vector<const ir::Node*>& matmuls) {
           return std::vector<bool>(matmuls.size(), true);
         });
       }},
      {"hoist", createHoist},
      {"remat", createRematerialize},
      {"simplify", createAlgebraicSimplification},
      {"split-sums", createSplitSums},
  };
  return r;
}

} // namespace

const std::vector<std::string>& compilePipeline() {
  static const std::vector<std::string> names = {
      "simplify", "fold",  "simplify",       "cse",        "dce", "remat",
      "dce",      "hoist", "expand-softmax", "split-sums", "fuse"};
  return names;
}

std::unique_ptr<Pass> createPass(std::string_view name) {
  for (const auto& [n, make] : registry())
    if (n == name) return make();
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
  // WEFT_SKIP_PASSES names passes to leave out, separated by commas.
  std::string skip = "," + debugFlag("WEFT_SKIP_PASSES").value_or("") + ",";
  if (skip.find("," + std::string(pass->name()) + ",") != std::string::npos) return *this;
  passes_.push_back(std::move(pass));
  return *this;
}

ir::Result<bool> PassManager::run(ir::Graph& g) {
  bool changed = false;
  auto dump = [&](const std::string& tag) {
    if (dumpDir_.empty()) return;
    char prefix[16];
    std::snprintf(prefix, sizeof(prefix), "%02d-", dumpCounter_++);
    std::ofstream(dumpDir_ + "/" + g.name() + "." + prefix + tag + ".weft") << ir::printGraph(g);
  };
  dump("input");
  // Passes read attributes and shapes the verifier has checked (Attrs accessors cannot fail on
  // them): a graph that does not verify is a diagnostic here, before any pass runs.
  if (std::vector<ir::Diagnostic> problems = ir::verify(g); !problems.empty())
    return ir::diag(problems[0].kind, "the graph does not verify: ", problems[0].message);
  for (const auto& pass : passes_) {
    auto start = std::chrono::steady_clock::now();
    ir::Result<bool> r = pass->run(g);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r) return ir::diag(r.diagnostic().kind, pass->name(), ": ", r.diagnostic().message);
    changed = changed || r.value();
    if (timePasses_)
      std::fprintf(stderr, "[weft] pass %-14s %8.3f ms  %s\n", std::string(pass->name()).c_str(),
                   ms, r.value() ? "changed" : "unchanged");
    std::vector<ir::Diagnostic> problems = ir::verify(g);
    if (!problems.empty())
      return ir::diag(ErrorKind::Internal,
                      "internal error, please report: the graph does not verify after pass '",
                      pass->name(), "': ", problems[0].message);
    if (printAfter_ == "all" || printAfter_ == pass->name())
      std::fprintf(stderr, "// ----- after %s (%s)\n%s", std::string(pass->name()).c_str(),
                   r.value() ? "changed" : "unchanged", ir::printGraph(g).c_str());
    dump(std::string(pass->name()));
  }
  return changed;
}

} // namespace weft::passes
