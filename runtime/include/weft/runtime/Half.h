// 16-bit floating-point storage types (IEEE half and bfloat16); arithmetic happens in float.
#pragma once

#include <cstdint>
#include <cstring>

namespace weft {

/// Bit-level float <-> 32-bit pattern helpers.
inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// IEEE 754 binary16, converted to and from float with round-to-nearest-even.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f) : bits(fromFloat(f)) {} // NOLINT: implicit like a builtin float type
  operator float() const { return toFloat(bits); }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatBits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) // inf or nan
      return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
    if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
      return static_cast<uint16_t>(sign | 0x7c00u);
    if (absx < 0x38800000u) { // subnormal half (or zero): scale by 2^24 and round
      float scaled = bitsFloat(absx) * 16777216.0f;
      // nearbyint-like rounding half to even for values < 1024
      uint32_t r = static_cast<uint32_t>(scaled);
      float frac = scaled - static_cast<float>(r);
      if (frac > 0.5f || (frac == 0.5f && (r & 1u))) ++r;
      return static_cast<uint16_t>(sign | r);
    }
    uint32_t mant = absx & 0x007fffffu;
    uint32_t exp = (absx >> 23) - 112u; // rebias 127 -> 15
    uint32_t h = (exp << 10) | (mant >> 13);
    uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
      ++h; // may carry into the exponent, which is the correct rounding
    return static_cast<uint16_t>(sign | h);
  }
  static float toFloat(uint16_t h) {
    uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0) {                                                // zero or subnormal
      float v = static_cast<float>(mant) * 5.9604644775390625e-8f; // 2^-24
      return (sign != 0u) ? -v : v;
    }
    if (exp == 31) return bitsFloat(sign | 0x7f800000u | (mant << 13));
    return bitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
  }
};

/// bfloat16: the upper half of a float, rounded to nearest even.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) : bits(fromFloat(f)) {} // NOLINT: implicit like a builtin float type
  operator float() const { return bitsFloat(static_cast<uint32_t>(bits) << 16); }

  static uint16_t fromFloat(float f) {
    uint32_t x = floatBits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
      return static_cast<uint16_t>((x >> 16) | 0x40u); // quiet nan
    uint32_t lsb = (x >> 16) & 1u;
    x += 0x7fffu + lsb;
    return static_cast<uint16_t>(x >> 16);
  }
};

} // namespace weft
