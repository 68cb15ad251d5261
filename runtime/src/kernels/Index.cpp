// Indexing kernels: gather, scatter, scatter_add, index_select and index_add along one dim.
#include "Loops.h"
#include "weft/runtime/Kernels.h"

namespace weft::kernels {
namespace {

/// Reads index `v`, checking it against `size` (negative indices count from the end).
inline int64_t checkedIndex(int64_t v, int64_t size, int64_t dim, const char* op) {
  if (v < -size || v >= size)
    WEFT_FAIL(Index, op, ": index ", v, " is out of bounds for dimension ", dim, " with size ", size);
  return v < 0 ? v + size : v;
}

/// Walks every position of `shape` with three operands: `target` (dim zeroed: the indexed tensor),
/// `index` and `other`, calling `fn(targetPtr, targetDimStride, index, otherPtr)`. `parallel` only
/// when writes cannot collide.
template <typename T, typename Fn>
void indexLoop(const Shape& shape, const TensorRef& target, int64_t dim, const TensorRef& index,
               const Shape& indexStrides, const TensorRef& other, bool parallel, Fn fn) {
  Shape ts = target.strides;
  ts[dim] = 0;
  std::array<Shape, 3> strides{ts, indexStrides, other.strides};
  LoopNest<3> nest(shape, strides,
                   {static_cast<char*>(target.data), static_cast<char*>(index.data), static_cast<char*>(other.data)},
                   {static_cast<int64_t>(sizeof(T)), 8, static_cast<int64_t>(sizeof(T))});
  const int64_t dimStride = target.strides[dim] * static_cast<int64_t>(sizeof(T));
  const int64_t size = target.shape[dim];
  auto run = [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t ix = checkedIndex(*reinterpret_cast<const int64_t*>(p[1] + j * s[1]), size, dim, "index");
      fn(reinterpret_cast<T*>(p[0] + j * s[0] + ix * dimStride), reinterpret_cast<T*>(p[2] + j * s[2]));
    }
  };
  if (parallel)
    nest.parallel(kElementwiseGrain, run);
  else
    nest.forRange(0, nest.numel(), run);
}

} // namespace

void Gather(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef &x = in[0], &index = in[1];
  int64_t dim = at.i("dim");
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(index.shape, x, dim, index, index.strides, out, true, [](T* src, T* dst) { *dst = *src; });
  });
}

void Scatter(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyCast(in[0], out);
  int64_t dim = at.i("dim");
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(in[1].shape, out, dim, in[1], in[1].strides, in[2], false, [](T* dst, T* src) { *dst = *src; });
  });
}

void ScatterAdd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyCast(in[0], out);
  int64_t dim = at.i("dim");
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(in[1].shape, out, dim, in[1], in[1].strides, in[2], false, [](T* dst, T* src) {
      if constexpr (std::is_same_v<T, bool>)
        *dst = *dst || *src;
      else
        *dst = convert<T>(static_cast<ComputeType<T>>(*dst) + static_cast<ComputeType<T>>(*src));
    });
  });
}

void IndexSelect(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef &x = in[0], &index = in[1];
  int64_t dim = at.i("dim");
  Shape istr(out.shape.size(), 0); // the 1-D index walks along `dim` of the output
  istr[dim] = index.strides.empty() ? 0 : index.strides[0];
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(out.shape, x, dim, index, istr, out, true, [](T* src, T* dst) { *dst = *src; });
  });
}

void IndexAdd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyCast(in[0], out);
  const TensorRef &index = in[1], &src = in[2];
  int64_t dim = at.i("dim");
  Shape istr(src.shape.size(), 0);
  istr[dim] = index.strides.empty() ? 0 : index.strides[0];
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(src.shape, out, dim, index, istr, src, false, [](T* dst, T* s) {
      if constexpr (std::is_same_v<T, bool>)
        *dst = *dst || *s;
      else
        *dst = convert<T>(static_cast<ComputeType<T>>(*dst) + static_cast<ComputeType<T>>(*s));
    });
  });
}

} // namespace weft::kernels
