// Movement kernels: materialise a view (reshape, permute, expand, slice, flip), pad and cat.
#include "Loops.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Storage.h"
#include "weft/runtime/View.h"

namespace weft::kernels {
namespace {

/// `ref` restricted to [start, start + len) along `dim` (on any device).
TensorRef narrowRef(const TensorRef& ref, int64_t dim, int64_t start, int64_t len) {
  TensorRef r = ref;
  const int64_t bytes = start * ref.strides[dim] * static_cast<int64_t>(elementSize(ref.dtype));
  r.byteOffset += bytes;
  if (ref.data != nullptr) r.data = static_cast<char*>(ref.data) + bytes;
  r.shape[dim] = len;
  return r;
}

} // namespace

void movement(OpCode op, std::span<const TensorRef> in, const TensorRef& out, const Attrs& at,
              const CopyFill& with) {
  switch (op) {
  case OpCode::Pad: {
    const auto& pads = at.ints("pads"); // [lo0, hi0, lo1, hi1, ...], negative values crop
    with.fill(out, at.f("value"));
    TensorRef src = in[0], dst = out;
    for (int64_t d = 0; d < src.dim(); ++d) {
      int64_t lo = pads[2 * d], hi = pads[2 * d + 1];
      int64_t srcStart = std::max<int64_t>(0, -lo);
      int64_t len = src.shape[d] - srcStart - std::max<int64_t>(0, -hi);
      if (len <= 0) return; // everything cropped away: the output is all `value`
      src = narrowRef(src, d, srcStart, len);
      dst = narrowRef(dst, d, std::max<int64_t>(0, lo), len);
    }
    return with.copy(src, dst);
  }
  case OpCode::Cat: {
    int64_t dim = at.i("dim"), offset = 0;
    for (const TensorRef& t : in) {
      if (t.numel() == 0 && t.dim() == 1 && out.dim() != 1)
        continue; // legacy empty [0] tensors are skipped, as in torch.cat
      with.copy(t, narrowRef(out, dim, offset, t.shape[dim]));
      offset += t.shape[dim];
    }
    return;
  }
  default: // a view, copied
    break;
  }
  const TensorRef& x = in[0];
  auto view = computeView(op, x.shape, x.strides, at);
  if (view) return with.copy(applyView(x, *view), out);
  // A reshape that cannot be a view: the input copied in its own shape into the contiguous
  // output (the elements in the same order), or where the output is strided, through a
  // contiguous copy on the output's device.
  if (out.isContiguous()) {
    TensorRef o = out;
    o.shape = x.shape;
    o.strides = contiguousStrides(x.shape);
    return with.copy(x, o);
  }
  hal::Device& device = out.buffer != nullptr ? out.buffer->device() : hal::cpu();
  auto tmp = device.allocate(static_cast<size_t>(x.numel()) * elementSize(x.dtype));
  TensorRef c = refInto(*tmp, 0, x.dtype, x.shape, contiguousStrides(x.shape));
  with.copy(x, c);
  c.shape = out.shape;
  c.strides = contiguousStrides(out.shape);
  with.copy(c, out);
}

namespace {
const CopyFill kOnCpu{&copyCast, &fill};
} // namespace

void Reshape(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Reshape, in, out, at, kOnCpu);
}
void Permute(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Permute, in, out, at, kOnCpu);
}
void Expand(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Expand, in, out, at, kOnCpu);
}
void Slice(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Slice, in, out, at, kOnCpu);
}
void Flip(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Flip, in, out, at, kOnCpu);
}
void StopGradient(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  copyCast(in[0], out);
}
void Pad(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Pad, in, out, at, kOnCpu);
}
void Cat(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  movement(OpCode::Cat, in, out, at, kOnCpu);
}

} // namespace weft::kernels
