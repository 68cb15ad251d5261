// Element type facts and PyTorch's promote_types lattice.
#include "weft/runtime/DType.h"

namespace weft {

size_t elementSize(DType t) {
  return visitDType(t, [](auto v) { return sizeof(v); });
}

std::string_view dtypeName(DType t) {
  switch (t) {
#define WEFT_X(name, type, str)                                                                    \
  case DType::name:                                                                                \
    return str;
    WEFT_DTYPES(WEFT_X)
#undef WEFT_X
  }
  return "?";
}

bool isFloating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

bool isIntegral(DType t) {
  return t == DType::UInt8 || t == DType::Int32 || t == DType::Int64;
}

DType promoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  bool fa = isFloating(a), fb = isFloating(b);
  if (fa != fb) return fa ? a : b;
  if (fa) {
    // float16 with bfloat16 promotes to float32, as in PyTorch.
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    auto rank = [](DType t) { return t == DType::Float64 ? 3 : t == DType::Float32 ? 2 : 1; };
    return rank(a) >= rank(b) ? a : b;
  }
  // Integral: uint8 with a signed type gives the signed type (int8 is not a weft dtype).
  auto rank = [](DType t) { return t == DType::Int64 ? 3 : t == DType::Int32 ? 2 : 1; };
  return rank(a) >= rank(b) ? a : b;
}

} // namespace weft
