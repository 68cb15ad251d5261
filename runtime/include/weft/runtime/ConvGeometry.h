// Output sizes of convolution and pooling windows, shared by shape inference and kernels.
#pragma once

#include "weft/runtime/TensorRef.h"

#include <cstdint>

namespace weft {

/// Whether windowOutputSize's arithmetic fits in int64 for these (non-negative) sizes.
inline bool windowFits(int64_t n, int64_t k, int64_t pad, int64_t dilation) {
  auto padding = checkedMul(pad, 2);
  return padding && checkedAdd(n, *padding) && checkedMul(dilation, k - 1);
}

/// Output length of a sliding window: input `n`, window `k`, `stride`, symmetric `pad`, `dilation`;
/// `ceilMode` rounds up as pooling's ceil_mode does (a window may not start in the right padding).
inline int64_t windowOutputSize(int64_t n, int64_t k, int64_t stride, int64_t pad, int64_t dilation,
                                bool ceilMode = false) {
  int64_t span = n + 2 * pad - dilation * (k - 1) - 1;
  if (span < 0) return 0;
  int64_t out = span / stride + (ceilMode && span % stride != 0 ? 1 : 0) + 1;
  // The last window starts at (out - 1) * stride; written as a division, which cannot overflow.
  if (ceilMode && out - 1 > (n + pad - 1) / stride) --out;
  return out;
}

} // namespace weft
