// Convolution forward, input gradient and weight gradient (1-D and 2-D, strided, padded, dilated,
// grouped) by per-sample im2col + GEMM, and max-pool argmax. Samples are spread over the threads,
// each with an im2col workspace of one sample, so memory does not grow with the batch.
#include "Gemm.h"
#include "Loops.h"
#include "weft/runtime/ConvGeometry.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Storage.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

namespace weft::kernels {
namespace {

/// The im2col workspace of one sample and group, in bytes of `elem`-byte elements.
std::shared_ptr<Storage> workspace(const ConvShape& s, size_t elem) {
  auto bytes = checkedMul(s.colRows(), s.colCols());
  bytes = bytes ? checkedMul(*bytes, static_cast<int64_t>(elem)) : bytes;
  WEFT_CHECK(bytes.has_value(), Value, "conv: the im2col workspace of ", s.colRows(), " x ",
             s.colCols(), " elements does not fit in memory");
  return Storage::allocate(static_cast<size_t>(*bytes));
}

/// A contiguous copy of `ref` when it is not contiguous; `ref` itself otherwise.
TensorRef contiguous(const TensorRef& ref, std::shared_ptr<Storage>& holder) {
  if (ref.isContiguous()) return ref;
  holder = Storage::allocate(static_cast<size_t>(ref.numel()) * elementSize(ref.dtype));
  TensorRef c{holder->data(), ref.dtype, ref.shape, contiguousStrides(ref.shape)};
  copyCast(ref, c);
  return c;
}

/// The output columns [lo, hi) of a row whose input index ix = ox * stride - pad + k * dil lies in
/// [0, size): the rest read zero padding.
std::pair<int64_t, int64_t> insideRange(int64_t outSize, int64_t size, int64_t stride, int64_t pad,
                                        int64_t k, int64_t dil) {
  int64_t first = pad - k * dil; // ix >= 0  <=>  ox * stride >= first
  int64_t lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  int64_t last = size - 1 + pad - k * dil; // ix < size  <=>  ox * stride <= last
  int64_t hi = last < 0 ? 0 : last / stride + 1;
  lo = std::min(lo, outSize);
  return {lo, std::max(lo, std::min(hi, outSize))};
}

/// A "same" convolution (stride and dilation 1, output as large as the input): row (ci, ky, kx)
/// of the column matrix is channel ci's plane shifted by (ky - ph, kx - pw), so it is one copy of
/// the plane with the elements whose source lies outside zeroed: those before or after the copied
/// range (rows above or below the image) and the columns the shift wrapped around.
template <typename T> void im2colSame(const ConvShape& s, const T* x, T* col) {
  const int64_t n = s.h * s.w;
  parallelFor(s.colRows(), 1, [&](int64_t b, int64_t e) { // inline inside a parallel region
    for (int64_t r = b; r < e; ++r) {
      const int64_t ci = r / (s.kh * s.kw), dy = (r / s.kw) % s.kh - s.ph, dx = r % s.kw - s.pw;
      const int64_t shift = dy * s.w + dx;
      const int64_t lo = std::clamp<int64_t>(-shift, 0, n),
                    hi = std::clamp<int64_t>(n - shift, lo, n);
      const T* plane = x + ci * n;
      T* dst = col + r * n;
      for (int64_t p = 0; p < lo; ++p)
        dst[p] = T(0);
      if (lo < hi) // else the shift (a kernel larger than the image) points outside the plane
        std::copy(plane + lo + shift, plane + hi + shift, dst + lo);
      for (int64_t p = hi; p < n; ++p)
        dst[p] = T(0);
      // Output column ox reads input column ox + dx: outside the image for the first -dx columns
      // or the last dx.
      const int64_t c0 = dx < 0 ? 0 : s.w - std::min(dx, s.w),
                    c1 = dx < 0 ? std::min(-dx, s.w) : s.w;
      for (int64_t oy = 0; oy < s.h; ++oy)
        for (int64_t ox = c0; ox < c1; ++ox)
          dst[oy * s.w + ox] = T(0);
    }
  });
}

/// col[(ci, ky, kx), (oy, ox)] = x[ci, oy*sh - ph + ky*dh, ox*sw - pw + kx*dw] (0 outside). Rows
/// of a small image are a few elements each: plain loops, not std::fill/std::copy, which become
/// memset/memmove calls costing more than the elements.
template <typename T> void im2col(const ConvShape& s, const T* x, T* col) {
  if (s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1 && s.oh == s.h && s.ow == s.w)
    return im2colSame(s, x, col);
  parallelFor(s.colRows(), 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t ci = r / (s.kh * s.kw), ky = (r / s.kw) % s.kh, kx = r % s.kw;
      // Plain variables, not a structured binding: clang's OpenMP cannot capture those.
      const std::pair<int64_t, int64_t> inside = insideRange(s.ow, s.w, s.sw, s.pw, kx, s.dw);
      const int64_t lo = inside.first, hi = inside.second;
      const int64_t sw = s.sw, shift = kx * s.dw - s.pw;
      for (int64_t oy = 0; oy < s.oh; ++oy) {
        T* dst = col + r * s.colCols() + oy * s.ow;
        const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
        if (iy < 0 || iy >= s.h) {
          for (int64_t ox = 0; ox < s.ow; ++ox)
            dst[ox] = T(0);
          continue;
        }
        const T* src = x + (ci * s.h + iy) * s.w + shift;
        for (int64_t ox = 0; ox < lo; ++ox)
          dst[ox] = T(0);
        if (sw == 1) {
#pragma omp simd
          for (int64_t ox = lo; ox < hi; ++ox)
            dst[ox] = src[ox];
        } else {
          for (int64_t ox = lo; ox < hi; ++ox)
            dst[ox] = src[ox * sw];
        }
        for (int64_t ox = hi; ox < s.ow; ++ox)
          dst[ox] = T(0);
      }
    }
  });
}

/// The column matrix of sample `n`, group `g` of input `x`: the input itself for a pointwise
/// convolution (no workspace), else its im2col in `ws`.
template <typename T>
const T* columns(const ConvShape& s, const T* x, int64_t n, int64_t g, Storage* ws) {
  const T* xs = x + (n * s.c + g * s.cg()) * s.h * s.w;
  if (ws == nullptr) return xs;
  im2col(s, xs, static_cast<T*>(ws->data()));
  return static_cast<T*>(ws->data());
}

/// The adjoint of im2col: x[...] += col[...]. Channels are independent, so they run in parallel.
template <typename T> void col2im(const ConvShape& s, const T* col, T* x) {
  parallelFor(s.cg(), 1, [&](int64_t b, int64_t e) {
    for (int64_t ci = b; ci < e; ++ci)
      for (int64_t ky = 0; ky < s.kh; ++ky)
        for (int64_t kx = 0; kx < s.kw; ++kx) {
          const T* row = col + ((ci * s.kh + ky) * s.kw + kx) * s.colCols();
          // Plain variables, not a structured binding: clang's OpenMP cannot capture those.
          const std::pair<int64_t, int64_t> inside = insideRange(s.ow, s.w, s.sw, s.pw, kx, s.dw);
          const int64_t lo = inside.first, hi = inside.second;
          const int64_t sw = s.sw, shift = kx * s.dw - s.pw;
          for (int64_t oy = 0; oy < s.oh; ++oy) {
            const int64_t iy = oy * s.sh - s.ph + ky * s.dh;
            if (iy < 0 || iy >= s.h) continue;
            T* dst = x + (ci * s.h + iy) * s.w + shift;
            const T* src = row + oy * s.ow;
            if (sw == 1) { // a constant stride: the loop vectorizes
#pragma omp simd
              for (int64_t ox = lo; ox < hi; ++ox)
                dst[ox] += src[ox];
            } else {
              for (int64_t ox = lo; ox < hi; ++ox)
                dst[ox * sw] += src[ox];
            }
          }
        }
  });
}

/// One window element of max-pool argmax for `n` outputs side by side: the element `q[j * step]`
/// (`Step` is `step` as a constant when nonzero) replaces output j's best so far where it is
/// larger or NaN (so ties keep the first, NaNs the last, as PyTorch's kernel); `first` starts the
/// search.
template <typename T, typename C, typename Offset, int64_t Step>
void windowStep(const T* q, int64_t step, int64_t n, Offset k, bool first, C* bv, Offset* bk) {
  const int64_t st = Step != 0 ? Step : step;
  if (first) {
    for (int64_t j = 0; j < n; ++j) {
      bv[j] = static_cast<C>(q[j * st]);
      bk[j] = 0;
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const C v = static_cast<C>(q[j * st]);
    bool better = v > bv[j]; // bitwise |: || would branch
    if constexpr (std::is_floating_point_v<C>) better = better | (v != v);
    const Offset mask = -static_cast<Offset>(better);
    bk[j] ^= (bk[j] ^ k) & mask;
    bv[j] = bitSelect(better, v, bv[j]);
  }
}

/// Runs `fn(tag, inputs, out)` in float32 or float64. 16-bit floats compute in float32 (as
/// PyTorch's CPU kernels accumulate) and round once into `out`.
template <typename Fn> void floatTypes(std::span<const TensorRef> in, const TensorRef& out, Fn fn) {
  if (out.dtype == DType::Float32) return fn(float{}, in, out);
  if (out.dtype == DType::Float64) return fn(double{}, in, out);
  WEFT_INTERNAL_ASSERT(out.dtype == DType::Float16 || out.dtype == DType::BFloat16,
                       "convolution kernel called with dtype ", dtypeName(out.dtype));
  std::vector<std::shared_ptr<Storage>> holders;
  std::vector<TensorRef> f32;
  for (const TensorRef& t : in) {
    holders.push_back(Storage::allocate(static_cast<size_t>(t.numel()) * sizeof(float)));
    f32.push_back(
        TensorRef{holders.back()->data(), DType::Float32, t.shape, contiguousStrides(t.shape)});
    copyCast(t, f32.back());
  }
  auto ho = Storage::allocate(static_cast<size_t>(out.numel()) * sizeof(float));
  TensorRef o{ho->data(), DType::Float32, out.shape, contiguousStrides(out.shape)};
  fn(float{}, std::span<const TensorRef>(f32), o);
  copyCast(o, out);
}

} // namespace

void Conv(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  convThen(in, out, at, {});
}

void convThen(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at,
              const std::function<void(int64_t, int64_t)>& afterSamples) {
  ConvShape s = convShape(in[0].shape, in[1].shape, at);
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  WEFT_INTERNAL_ASSERT(!afterSamples || out.dtype == DType::Float32 || out.dtype == DType::Float64,
                       "a conv epilogue over ", dtypeName(out.dtype), " (computed in float32)");
  floatTypes(in, out, [&](auto tag, std::span<const TensorRef> args, const TensorRef& y) {
    using T = decltype(tag);
    std::shared_ptr<Storage> hx, hw;
    TensorRef x = contiguous(args[0], hx), w = contiguous(args[1], hw);
    parallelFor(s.n, 1, [&](int64_t n0, int64_t n1) {
      std::shared_ptr<Storage> ws;
      if (!s.pointwise()) ws = workspace(s, sizeof(T));
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t g = 0; g < s.groups; ++g) {
          const T* col = columns(s, x.ptr<T>(), n, g, ws.get());
          const T* wg = w.ptr<T>() + g * s.og() * s.colRows();
          T* yg = y.ptr<T>() + (n * s.o + g * s.og()) * s.colCols();
          parallelGemm<T>(false, false, s.og(), s.colCols(), s.colRows(), wg, s.colRows(), col,
                          s.colCols(), T(0), yg, s.colCols());
          if (afterSamples && g == s.groups - 1) afterSamples(n, n + 1);
        }
    });
  });
}

void ConvInputGrad(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  // in[0] = gradient of the conv output, in[1] = weight, out = gradient of the conv input.
  ConvShape s = convShape(at.ints("input_shape"), in[1].shape, at);
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  floatTypes(in, out, [&](auto tag, std::span<const TensorRef> args, const TensorRef& gx) {
    using T = decltype(tag);
    std::shared_ptr<Storage> hg, hw;
    TensorRef gy = contiguous(args[0], hg), w = contiguous(args[1], hw);
    std::memset(gx.data, 0, static_cast<size_t>(gx.numel()) * sizeof(T));
    parallelFor(s.n, 1, [&](int64_t n0, int64_t n1) {
      std::shared_ptr<Storage> ws;
      if (!s.pointwise()) ws = workspace(s, sizeof(T));
      for (int64_t n = n0; n < n1; ++n)
        for (int64_t g = 0; g < s.groups; ++g) {
          const T* wg = w.ptr<T>() + g * s.og() * s.colRows();
          const T* gyg = gy.ptr<T>() + (n * s.o + g * s.og()) * s.colCols();
          T* xg = gx.ptr<T>() + (n * s.c + g * s.cg()) * s.h * s.w;
          if (!ws) { // the column matrix is the input itself: accumulate straight into it
            parallelGemm<T>(true, false, s.colRows(), s.colCols(), s.og(), wg, s.colRows(), gyg,
                            s.colCols(), T(1), xg, s.colCols());
            continue;
          }
          T* col = static_cast<T*>(ws->data());
          parallelGemm<T>(true, false, s.colRows(), s.colCols(), s.og(), wg, s.colRows(), gyg,
                          s.colCols(), T(0), col, s.colCols());
          col2im(s, col, xg);
        }
    });
  });
}

void ConvWeightGrad(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  // in[0] = conv input, in[1] = gradient of the conv output, out = gradient of the weight.
  ConvShape s = convShape(in[0].shape, at.ints("weight_shape"), at);
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  floatTypes(in, out, [&](auto tag, std::span<const TensorRef> args, const TensorRef& gw) {
    using T = decltype(tag);
    std::shared_ptr<Storage> hx, hg;
    TensorRef x = contiguous(args[0], hx), gy = contiguous(args[1], hg);
    // Each thread sums its samples' products into a partial gradient of its own; the partials
    // are added at the end (the first thread's is the output itself).
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(getNumThreads(), s.n));
    const int64_t per = (s.n + chunks - 1) / chunks;
    const size_t wbytes = static_cast<size_t>(gw.numel()) * sizeof(T);
    std::vector<std::shared_ptr<Storage>> partials(static_cast<size_t>(chunks));
    parallelFor(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T* acc = gw.ptr<T>();
        if (c > 0) {
          partials[static_cast<size_t>(c)] = Storage::allocate(wbytes);
          acc = static_cast<T*>(partials[static_cast<size_t>(c)]->data());
        }
        std::memset(acc, 0, wbytes);
        std::shared_ptr<Storage> ws;
        if (!s.pointwise()) ws = workspace(s, sizeof(T));
        for (int64_t n = c * per; n < std::min(s.n, (c + 1) * per); ++n)
          for (int64_t g = 0; g < s.groups; ++g) {
            const T* col = columns(s, x.ptr<T>(), n, g, ws.get());
            const T* gyg = gy.ptr<T>() + (n * s.o + g * s.og()) * s.colCols();
            parallelGemm<T>(false, true, s.og(), s.colRows(), s.colCols(), gyg, s.colCols(), col,
                            s.colCols(), T(1), acc + g * s.og() * s.colRows(), s.colRows());
          }
      }
    });
    for (int64_t c = 1; c < chunks; ++c) {
      const T* p = static_cast<const T*>(partials[static_cast<size_t>(c)]->data());
      T* o = gw.ptr<T>();
      for (int64_t j = 0; j < gw.numel(); ++j)
        o[j] += p[j];
    }
  });
}

void MaxPoolArgmax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef& x = in[0];
  const auto &k = at.ints("kernel_size"), &st = at.ints("stride"), &pd = at.ints("padding"),
             &dl = at.ints("dilation");
  bool one = x.dim() == 3;
  int64_t h = one ? 1 : x.shape[2], w = x.shape.back();
  int64_t kh = one ? 1 : k[0], kw = k.back(), sh = one ? 1 : st[0], sw = st.back();
  int64_t ph = one ? 0 : pd[0], pw = pd.back(), dh = one ? 1 : dl[0], dw = dl.back();
  int64_t oh = one ? 1 : out.shape[2], ow = out.shape.back();
  int64_t planes = x.shape[0] * x.shape[1];
  WEFT_INTERNAL_ASSERT(out.isContiguous());
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    if constexpr (!std::is_same_v<T, bool>) {
      // Window offsets as wide as the values, so masks and values vectorise together.
      using Offset = std::conditional_t<sizeof(C) == 8, int64_t, int32_t>;
      int64_t* o = out.ptr<int64_t>();
      const int64_t s0 = x.strides[0], s1 = x.strides[1], sy = one ? 0 : x.strides[2],
                    sx = x.strides.back(), channels = x.shape[1];
      const T* data = x.ptr<T>();
      // Every window inside the input (no padding, and ceil mode adding no partial window): no
      // bounds tests, and the first element starts the search.
      const bool inside = ph == 0 && pw == 0 && (oh - 1) * sh + (kh - 1) * dh < h &&
                          (ow - 1) * sw + (kw - 1) * dw < w &&
                          (kh - 1) * dh * w + (kw - 1) * dw <= std::numeric_limits<Offset>::max();
      parallelFor(planes, 1, [=](int64_t b, int64_t e) {
        for (int64_t pl = b; pl < e; ++pl) {
          const T* base = data + (pl / channels) * s0 + (pl % channels) * s1;
          int64_t* dst = o + pl * oh * ow;
          if (inside) {
            // Window element by window element over a row of outputs: the outputs are
            // independent, so the inner loop vectorises (with the window step a constant where
            // it is 1 or 2, so the loads need no gather).
            constexpr int64_t kRow = 128;
            C bv[kRow];
            Offset bk[kRow]; // the winner's offset from its window's corner, in input elements
            const int64_t step = sw * sx;
            for (int64_t oy = 0; oy < oh; ++oy)
              for (int64_t ox0 = 0; ox0 < ow; ox0 += kRow) {
                const int64_t n = std::min(kRow, ow - ox0);
                const T* p = base + oy * sh * sy + ox0 * step;
                for (int64_t ky = 0; ky < kh; ++ky)
                  for (int64_t kx = 0; kx < kw; ++kx) {
                    const T* q = p + ky * dh * sy + kx * dw * sx;
                    const auto k = static_cast<Offset>(ky * dh * w + kx * dw);
                    const bool first = ky == 0 && kx == 0;
                    if (step == 1)
                      windowStep<T, C, Offset, 1>(q, 1, n, k, first, bv, bk);
                    else if (step == 2)
                      windowStep<T, C, Offset, 2>(q, 2, n, k, first, bv, bk);
                    else
                      windowStep<T, C, Offset, 0>(q, step, n, k, first, bv, bk);
                  }
                for (int64_t j = 0; j < n; ++j)
                  dst[oy * ow + ox0 + j] = oy * sh * w + (ox0 + j) * sw + bk[j];
              }
            continue;
          }
          for (int64_t oy = 0; oy < oh; ++oy) {
            const int64_t y0 = oy * sh - ph;
            for (int64_t ox = 0; ox < ow; ++ox) {
              const int64_t x0 = ox * sw - pw;
              int64_t best = -1;
              C bv{};
              for (int64_t ky = 0; ky < kh; ++ky) {
                const int64_t iy = y0 + ky * dh;
                if (iy < 0 || iy >= h) continue;
                for (int64_t kx = 0; kx < kw; ++kx) {
                  const int64_t ix = x0 + kx * dw;
                  if (ix < 0 || ix >= w) continue;
                  const C v = static_cast<C>(base[iy * sy + ix * sx]);
                  // As windowStep: the larger value or a NaN wins.
                  bool better = best < 0 || v > bv;
                  if constexpr (std::is_floating_point_v<C>) better = better || v != v;
                  best = better ? iy * w + ix : best;
                  bv = better ? v : bv;
                }
              }
              dst[oy * ow + ox] = best;
            }
          }
        }
      });
    } else {
      WEFT_INTERNAL_ASSERT(false, "max pool on bool");
    }
  });
}

} // namespace weft::kernels
