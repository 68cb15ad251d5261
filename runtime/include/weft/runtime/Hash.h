// A 64-bit FNV-1a hash: checksums of saved executables and cached kernels, and cache file names.
// Detects damage, not tampering by someone who can also rewrite the checksum.
#pragma once

#include <cstddef>
#include <cstdint>

namespace weft {

inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 1469598103934665603ULL) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ULL;
  }
  return h;
}

} // namespace weft
