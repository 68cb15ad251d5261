// Output sizes of convolution and pooling windows, shared by shape inference and kernels, and a
// convolution's geometry.
#pragma once

#include "weft/runtime/Attrs.h"
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

/// A convolution's problem in 2-D form (1-D convolutions get a height of 1), as every device's
/// kernels read it.
struct ConvShape {
  int64_t n, c, h, w; // input
  int64_t o, kh, kw;  // weight: o x (c / groups) x kh x kw
  int64_t oh, ow;     // output spatial
  int64_t sh, sw, ph, pw, dh, dw, groups;
  int64_t cg() const { return c / groups; }
  int64_t og() const { return o / groups; }
  int64_t colRows() const { return cg() * kh * kw; }
  int64_t colCols() const { return oh * ow; }
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0; }
};

inline ConvShape convShape(const Shape& x, const Shape& w, const Attrs& at) {
  const auto &st = at.ints("stride"), &pd = at.ints("padding"), &dl = at.ints("dilation");
  bool one = x.size() == 3;
  ConvShape s{};
  s.n = x[0];
  s.c = x[1];
  s.h = one ? 1 : x[2];
  s.w = x.back();
  s.o = w[0];
  s.kh = one ? 1 : w[2];
  s.kw = w.back();
  s.sh = one ? 1 : st[0];
  s.sw = st.back();
  s.ph = one ? 0 : pd[0];
  s.pw = pd.back();
  s.dh = one ? 1 : dl[0];
  s.dw = dl.back();
  s.groups = at.i("groups");
  s.oh = windowOutputSize(s.h, s.kh, s.sh, s.ph, s.dh);
  s.ow = windowOutputSize(s.w, s.kw, s.sw, s.pw, s.dw);
  return s;
}

} // namespace weft
