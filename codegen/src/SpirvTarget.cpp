#include "weft/codegen/Jit.h"
#include "weft/codegen/Spirv.h"
#include "weft/runtime/Shaders.h"

namespace weft::codegen {

bool SpirvTarget::has(const std::string& capability) const {
  return hal::targetList(code, "caps=").count(capability) != 0;
}

bool SpirvTarget::computes(const ir::Graph& g, const ir::Node& n) const {
  if (!kernelsCompute(g, n)) return false;
  auto holds = [&](DType t) {
    switch (t) {
    case DType::Float64:
      return false;
    case DType::Int64:
      return has("Int64");
    case DType::Float16:
      return has("Float16");
    case DType::BFloat16:
      return has("Int16");
    case DType::Float32:
    case DType::Int32:
    case DType::Bool:
    case DType::UInt8:
      return true;
    }
    return false;
  };
  if (!holds(g.type(n.result).dtype)) return false;
  for (ir::ValueId v : n.operands)
    if (!holds(g.type(v).dtype)) return false;
  return true;
}

} // namespace weft::codegen
