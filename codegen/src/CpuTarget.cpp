// What the CPU's code generator can do, as the passes ask it. No MLIR here.
#include "weft/codegen/Jit.h"
#include "weft/passes/Fusion.h"

namespace weft::codegen {

std::string CpuTarget::name() const {
  return "cpu " + cpu;
}

bool kernelsCompute(const ir::Graph& g, const ir::Node& n) {
  if (n.op == OpCode::Gcd || n.op == OpCode::Lcm || n.op == OpCode::Lgamma ||
      n.op == OpCode::Digamma || n.op == OpCode::Erfinv || n.op == OpCode::Zeta)
    return false;
  return !((n.op == OpCode::Pow || n.op == OpCode::Fmod || n.op == OpCode::FloorDivide) &&
           !isFloating(g.type(n.result).dtype));
}

bool CpuTarget::computes(const ir::Graph& g, const ir::Node& n) const {
  return kernelsCompute(g, n);
}

bool CpuTarget::generatesGemm(const ir::Graph& g, const ir::Node& n) const {
  return passes::isGemm(g, n);
}

} // namespace weft::codegen
