// Element types, their sizes and names, and PyTorch's type-promotion lattice.
#pragma once

#include "weft/runtime/Half.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft {

/// The element types a tensor can hold; `WEFT_DTYPES(X)` lists them with their C++ storage type.
#define WEFT_DTYPES(X)                                                                             \
  X(Bool, bool, "bool")                                                                            \
  X(UInt8, uint8_t, "uint8")                                                                       \
  X(Int32, int32_t, "int32")                                                                       \
  X(Int64, int64_t, "int64")                                                                       \
  X(Float16, Half, "float16")                                                                      \
  X(BFloat16, BFloat16, "bfloat16")                                                                \
  X(Float32, float, "float32")                                                                     \
  X(Float64, double, "float64")

/// An element type.
enum class DType : uint8_t {
#define WEFT_X(name, type, str) name,
  WEFT_DTYPES(WEFT_X)
#undef WEFT_X
};

/// Number of dtypes.
inline constexpr int kNumDTypes = 8;

/// Size of one element in bytes.
size_t elementSize(DType t);
/// The dtype's name as PyTorch prints it without the "torch." prefix ("float32").
std::string_view dtypeName(DType t);
/// True for float16, bfloat16, float32 and float64.
bool isFloating(DType t);
/// True for uint8, int32 and int64 (not bool).
bool isIntegral(DType t);
/// Whether `value` converts to `t` without overflow, as PyTorch requires of fill values: integers
/// take finite values in their range, floats any value up to their largest finite one (or a
/// non-finite one), bool anything.
bool fitsDType(double value, DType t);
/// The lowest or highest value of integer (or bool) dtype `t`: where max and min start.
int64_t lowestInteger(DType t);
int64_t highestInteger(DType t);
/// The largest finite value of floating dtype `t` (torch.finfo(t).max).
double largestFinite(DType t);
/// PyTorch's promote_types: the smallest dtype both values fit in.
DType promoteTypes(DType a, DType b);
/// The dtype a float-only op computes an integral or bool input in (the default float dtype).
inline constexpr DType kDefaultFloat = DType::Float32;

/// Maps a C++ storage type to its dtype.
template <typename T> struct DTypeOf;
#define WEFT_X(name, type, str)                                                                    \
  template <> struct DTypeOf<type> { static constexpr DType value = DType::name; };
WEFT_DTYPES(WEFT_X)
#undef WEFT_X

/// The type kernels compute in for a storage type: float for the 16-bit floats, itself otherwise.
template <typename T> struct ComputeTypeOf { using type = T; };
template <> struct ComputeTypeOf<Half> { using type = float; };
template <> struct ComputeTypeOf<BFloat16> { using type = float; };
template <typename T> using ComputeType = typename ComputeTypeOf<T>::type;

/// Calls `fn(T{})` with the storage type of `t` (a value of that type, used only for its type).
template <typename Fn> decltype(auto) visitDType(DType t, Fn&& fn) {
  switch (t) {
#define WEFT_X(name, type, str)                                                                    \
  case DType::name:                                                                                \
    return fn(type{});
    WEFT_DTYPES(WEFT_X)
#undef WEFT_X
  }
  return fn(float{}); // unreachable: every enumerator is handled above
}

} // namespace weft
