// Philox 4x32-10, the counter-based generator behind every random op (eager, traced, CPU, GPU).
#pragma once

#include <array>
#include <cstdint>

namespace weft {

/// Four 32-bit random words for `counter` under `key`. Pure function: the same inputs always
/// give the same words, which is what makes random ops reproducible on every backend.
inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                          std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * counter[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return counter;
}

/// A uniform float in (0, 1] from 24 random bits (never 0, so log() of it is finite).
inline float uniformFromBits(uint32_t bits) {
  return static_cast<float>((bits >> 8) + 1) * (1.0f / 16777216.0f);
}
/// A uniform double in (0, 1] from 53 random bits.
inline double uniformFromBits(uint32_t hi, uint32_t lo) {
  uint64_t v = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(v + 1) * (1.0 / 9007199254740992.0);
}

} // namespace weft
