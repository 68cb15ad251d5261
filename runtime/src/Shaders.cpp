// The per-op shaders' names and the hook through which codegen provides them.
#include "weft/runtime/Shaders.h"

#include <mutex>

namespace weft::hal {
namespace {

std::mutex& sourceMutex() {
  static std::mutex m;
  return m;
}
ShaderSource& source() {
  static ShaderSource s;
  return s;
}

const char* familyName(ShaderFamily f) {
  switch (f) {
  case ShaderFamily::Map:
    return "map";
  case ShaderFamily::Reduce:
    return "reduce";
  case ShaderFamily::ArgReduce:
    return "argreduce";
  case ShaderFamily::Normalize:
    return "normalize";
  case ShaderFamily::Scan:
    return "scan";
  case ShaderFamily::Gather:
    return "gather";
  case ShaderFamily::ScatterAdd:
    return "scatter_add";
  case ShaderFamily::CheckIndex:
    return "check_index";
  case ShaderFamily::MatMul:
    return "matmul";
  case ShaderFamily::Pool:
    return "pool";
  case ShaderFamily::Random:
    return "random";
  }
  return "?";
}

} // namespace

std::string ShaderKey::str() const {
  std::string s = std::string(familyName(family)) + " " + std::string(opName(op)) + " ";
  for (size_t i = 0; i < dtypes.size(); ++i) {
    if (i > 0) s += i + 1 == dtypes.size() ? "->" : ",";
    s += dtypeName(dtypes[i]);
  }
  return s + " wg" + std::to_string(workgroupSize);
}

void setShaderSource(const ShaderSource& s) {
  std::lock_guard<std::mutex> lock(sourceMutex());
  source() = s;
}

ShaderSource shaderSource() {
  std::lock_guard<std::mutex> lock(sourceMutex());
  return source();
}

} // namespace weft::hal
