// Element type facts and PyTorch's promote_types lattice.
#include "weft/runtime/DType.h"

#include <cmath>
#include <limits>

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

int64_t lowestInteger(DType t) {
  switch (t) {
  case DType::Int32:
    return std::numeric_limits<int32_t>::min();
  case DType::Int64:
    return std::numeric_limits<int64_t>::min();
  default: // bool, uint8
    return 0;
  }
}
int64_t highestInteger(DType t) {
  switch (t) {
  case DType::Bool:
    return 1;
  case DType::UInt8:
    return 255;
  case DType::Int32:
    return std::numeric_limits<int32_t>::max();
  default:
    return std::numeric_limits<int64_t>::max();
  }
}

bool fitsDType(double value, DType t) {
  switch (t) {
  case DType::Bool:
    return true;
  case DType::UInt8:
    return value >= 0 && value <= 255;
  case DType::Int32:
    return value >= -0x1p31 && value < 0x1p31;
  case DType::Int64:
    return value >= -0x1p63 && value < 0x1p63;
  case DType::Float16:
    return !std::isfinite(value) || std::abs(value) <= largestFinite(t);
  case DType::BFloat16:
  case DType::Float32:
    return !std::isfinite(value) || std::abs(value) <= std::numeric_limits<float>::max();
  case DType::Float64:
    return true;
  }
  return false;
}

double largestFinite(DType t) {
  switch (t) {
  case DType::Float16:
    return 65504.0;
  case DType::BFloat16:
    return 0x1.fep127; // 3.3895313892515355e38
  case DType::Float32:
    return std::numeric_limits<float>::max();
  default:
    return std::numeric_limits<double>::max();
  }
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
