// "output-grads": the gradients of a program's outputs, appended to its graph, so that autograd
// outside the compiled function can differentiate through it (each output's gradient is a seed
// argument; the graph computes what eager backward would).
#include "weft/passes/GraphBuilder.h"
#include "weft/passes/Pass.h"
#include "weft/passes/Program.h"

namespace weft::passes {
namespace {

/// Appends `p`'s output gradients to its graph; false when no output depends on a `wrt` value.
ir::Result<bool> appendOutputGradients(Program& p) {
  ir::Graph& g = p.graph;
  if (p.differentiableOutputs > g.outputs().size())
    return ir::diag(ErrorKind::Internal, "the program names ", p.differentiableOutputs,
                    " differentiable outputs of ", g.outputs().size());
  for (ir::ValueId v : p.wrt)
    if (static_cast<size_t>(v) >= g.values().size() || !g.isInput(v))
      return ir::diag(ErrorKind::Internal, "a gradient is asked for %", v,
                      ", which is not an argument or state of the graph");
  std::vector<bool> depends = differentiablyDependsOn(g, p.wrt, p.customRules);
  GraphBuilder b(g);
  GValue loss; // sum over the seeded outputs of sum(output * seed): its gradients are theirs
  for (size_t i = 0; i < p.differentiableOutputs; ++i) {
    ir::ValueId o = g.outputs()[i];
    if (!depends[static_cast<size_t>(o)]) continue;
    p.seededOutputs.push_back(i);
    p.seeds.push_back(g.addArgument(g.type(o), "g" + std::to_string(i)));
    GValue term = reduce_op(OpCode::Sum, b.value(o) * b.value(p.seeds.back()), {}, false);
    loss = loss.defined() ? loss + term : term;
  }
  if (p.seeds.empty()) return false;
  if (b.error()) return *b.error();
  auto grads = appendGradients(g, loss.id, p.wrt, ir::kNoValue, p.customRules);
  if (!grads) return grads.diagnostic();
  p.grads = std::move(grads.value());
  return true;
}

class OutputGradients : public ProgramPass {
public:
  std::string_view name() const override { return "output-grads"; }
  ir::Result<bool> run(Program& p) override {
    if (p.wrt.empty() || !p.seeds.empty()) return false; // nothing asked for, or done
    if (p.backward || !p.executables.empty())
      return ir::diag(ErrorKind::Value, "output-grads runs before split and lower");
    ir::Result<bool> r = appendOutputGradients(p);
    if (!r || !p.probe) return r;
    // The probe is the same function at another number of rows: it must get the same gradients
    // for mask-rows to compare the two.
    if (p.probe->wrt.size() != p.wrt.size())
      return ir::diag(ErrorKind::Internal, "the probe asks for other gradients than the program");
    ir::Result<bool> probe = appendOutputGradients(*p.probe);
    if (!probe) return probe;
    if (p.probe->seededOutputs != p.seededOutputs)
      return ir::diag(ErrorKind::Value, "dynamic_dim: other outputs are differentiable with ",
                      p.probeRows, " rows than with ", p.rows);
    return r;
  }
};

} // namespace

std::unique_ptr<Pass> createOutputGradients() {
  return std::make_unique<OutputGradients>();
}

} // namespace weft::passes
