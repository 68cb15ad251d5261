// The program the pipeline compiles, and the pass manager's way of running passes on it.
#include "weft/passes/Program.h"

#include "weft/ir/Lower.h"
#include "weft/ir/TextFormat.h"
#include "weft/passes/Pass.h"

namespace weft::passes {

std::vector<ir::Graph*> Program::graphs() {
  std::vector<ir::Graph*> r = {&graph};
  if (backward) r.push_back(&*backward);
  return r;
}
std::vector<const ir::Graph*> Program::graphs() const {
  std::vector<const ir::Graph*> r = {&graph};
  if (backward) r.push_back(&*backward);
  return r;
}

std::string printProgram(const Program& p) {
  std::string text = ir::printGraph(p.graph);
  if (p.backward) text += ir::printGraph(*p.backward);
  for (size_t i = 0; i < p.outputAxes.size(); ++i) {
    const MaybeAxis& a = p.outputAxes[i];
    text += "// output " + std::to_string(i);
    if (!a) {
      text += ": no dynamic dimension\n";
      continue;
    }
    text += ": rows along axis " + std::to_string(a->axis);
    if (a->factor > 1) text += " (x" + std::to_string(a->factor) + ")";
    text += "\n";
  }
  const std::vector<const ir::Graph*> graphs = p.graphs();
  for (size_t i = 0; i < p.executables.size() && i < graphs.size(); ++i)
    text += ir::printPlan(*graphs[i], p.executables[i].plan);
  return text;
}

ir::Result<bool> Pass::run(Program& p) {
  bool changed = false;
  for (ir::Graph* g : p.graphs()) {
    ir::Result<bool> r = run(*g);
    if (!r) return r;
    changed = changed || r.value();
  }
  return changed;
}

ir::Result<bool> ProgramPass::run(ir::Graph& g) {
  return runOnGraph(g, [this](Program& p) { return run(p); });
}

} // namespace weft::passes
