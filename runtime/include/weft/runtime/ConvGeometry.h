// Output sizes of convolution and pooling windows, shared by shape inference and kernels.
#pragma once

#include <cstdint>

namespace weft {

/// Output length of a sliding window: input `n`, window `k`, `stride`, symmetric `pad`, `dilation`;
/// `ceilMode` rounds up as pooling's ceil_mode does (a window may not start in the right padding).
inline int64_t windowOutputSize(int64_t n, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                                bool ceilMode = false) {
  int64_t span = n + 2 * pad - dilation * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (out - 1) * stride >= n + pad) --out;
  return out;
}

} // namespace weft
