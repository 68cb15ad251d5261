// "plan-memory": the memory plan of each lowered executable (runtime planMemory: liveness, buffer
// reuse, in-place writes where legal, one arena per call).
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

namespace weft::passes {
namespace {

class PlanMemory : public ProgramPass {
public:
  std::string_view name() const override { return "plan-memory"; }
  ir::Result<bool> run(Program& p) override {
    bool changed = false;
    for (Executable& e : p.executables) {
      if (e.plan.arenaOffset.size() == static_cast<size_t>(e.plan.numSlots)) continue; // planned
      planMemory(e.plan);
      changed = true;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> createPlanMemory() {
  return std::make_unique<PlanMemory>();
}

} // namespace weft::passes
