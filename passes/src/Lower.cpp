// "lower": each graph of the program becomes the runtime executable that runs it, its fuse-pass
// kernels launches of generated code (from the program's kernel compiler) and every other node an
// interpreter step.
#include "weft/ir/Lower.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

namespace weft::passes {
namespace {

class Lower : public ProgramPass {
public:
  explicit Lower(KernelCompiler compile) : compile_(std::move(compile)) {}
  std::string_view name() const override { return "lower"; }
  ir::Result<bool> run(Program& p) override {
    if (!p.executables.empty()) return false; // lowered already
    for (ir::Graph* g : p.graphs()) {
      const std::vector<ir::FusionGroup>& groups = g->kernels();
      GeneratedKernels generated;
      if (compile_) {
        ir::Result<GeneratedKernels> r = compile_(*g);
        if (!r) return r.diagnostic();
        generated = std::move(r.value());
      } else { // no code: each kernel one launch of a table without code (weft-opt)
        for (size_t k = 0; k < groups.size(); ++k)
          generated.kernelOf.push_back(static_cast<int32_t>(k));
      }
      std::vector<ir::FusedKernel> fused;
      if (!generated.kernelOf.empty()) {
        if (generated.kernelOf.size() != groups.size())
          return ir::diag(ErrorKind::Internal, "the kernel compiler returned ",
                          generated.kernelOf.size(), " kernels for ", groups.size(), " groups");
        for (size_t k = 0; k < groups.size(); ++k)
          fused.push_back({groups[k], generated.kernelOf[k]});
      }
      p.executables.push_back(
          ir::executableOf(*g, ir::lowerSteps(*g, fused, std::move(generated.table))));
    }
    return true;
  }

private:
  KernelCompiler compile_;
};

} // namespace

std::unique_ptr<Pass> createLower(KernelCompiler compile) {
  return std::make_unique<Lower>(std::move(compile));
}

} // namespace weft::passes
