// Movement kernels: materialise a view (reshape, permute, expand, slice, flip), pad and cat.
#include "Loops.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Storage.h"
#include "weft/runtime/View.h"

namespace weft::kernels {
namespace {

void copyView(OpCode op, const TensorRef& in, const TensorRef& out, const Attrs& at) {
  auto view = computeView(op, in.shape, in.strides, at);
  if (view) {
    copyCast(applyView(in, *view), out);
    return;
  }
  // A reshape that cannot be a view: the input copied in its own shape into the contiguous
  // output (the elements in the same order), or where the output is strided, through a
  // contiguous copy.
  if (out.isContiguous()) {
    TensorRef o = out;
    o.shape = in.shape;
    o.strides = contiguousStrides(in.shape);
    copyCast(in, o);
    return;
  }
  auto tmp = Storage::allocate(static_cast<size_t>(in.numel()) * elementSize(in.dtype));
  TensorRef c{tmp->data(), in.dtype, in.shape, contiguousStrides(in.shape)};
  copyCast(in, c);
  c.shape = out.shape;
  c.strides = contiguousStrides(out.shape);
  copyCast(c, out);
}

/// `ref` restricted to [start, start + len) along `dim`.
TensorRef narrowRef(const TensorRef& ref, int64_t dim, int64_t start, int64_t len) {
  TensorRef r = ref;
  r.data = static_cast<char*>(ref.data) +
           start * ref.strides[dim] * static_cast<int64_t>(elementSize(ref.dtype));
  r.shape[dim] = len;
  return r;
}

} // namespace

void Reshape(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyView(OpCode::Reshape, in[0], out, at);
}
void Permute(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyView(OpCode::Permute, in[0], out, at);
}
void Expand(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyView(OpCode::Expand, in[0], out, at);
}
void Slice(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyView(OpCode::Slice, in[0], out, at);
}
void Flip(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyView(OpCode::Flip, in[0], out, at);
}
void StopGradient(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  copyCast(in[0], out);
}

void Pad(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const auto& pads = at.ints("pads"); // [lo0, hi0, lo1, hi1, ...], negative values crop
  fill(out, at.f("value"));
  TensorRef src = in[0], dst = out;
  for (int64_t d = 0; d < src.dim(); ++d) {
    int64_t lo = pads[2 * d], hi = pads[2 * d + 1];
    int64_t srcStart = std::max<int64_t>(0, -lo);
    int64_t len = src.shape[d] - srcStart - std::max<int64_t>(0, -hi);
    if (len <= 0) return; // everything cropped away: the output is all `value`
    src = narrowRef(src, d, srcStart, len);
    dst = narrowRef(dst, d, std::max<int64_t>(0, lo), len);
  }
  copyCast(src, dst);
}

void Cat(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  int64_t dim = at.i("dim"), offset = 0;
  for (const TensorRef& t : in) {
    if (t.numel() == 0 && t.dim() == 1 && out.dim() != 1)
      continue; // legacy empty [0] tensors are skipped, as in torch.cat
    copyCast(t, narrowRef(out, dim, offset, t.shape[dim]));
    offset += t.shape[dim];
  }
}

} // namespace weft::kernels
