// Indexing kernels: gather, scatter, scatter_add, index_select and index_add along one dim, and
// check_index. All run in parallel without atomics (see indexLoop).
#include "Loops.h"
#include "weft/runtime/Kernels.h"

#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

namespace weft::kernels {

void outOfBounds(int64_t v, const IndexedDim& at, bool wrap) {
  const std::string where = at.dim < 0
                                ? detail::concat("a tensor of ", at.size, " elements")
                                : detail::concat("dimension ", at.dim, " with size ", at.size);
  if (at.size == 0)
    WEFT_FAIL(Index, at.op, ": index ", v, " is out of bounds for ", where,
              at.dim < 0 ? " (the tensor is empty)" : " (the dimension is empty)");
  WEFT_FAIL(Index, at.op, ": index ", v, " is out of bounds for ", where, " (valid indices are ",
            wrap ? -at.size : 0, " to ", at.size - 1, ")");
}

namespace {

/// Index `v`, which must lie in [0, size): one unsigned compare, negative ones included (the
/// primitives take no negative index, as PyTorch's gather, scatter, index_select and index_add).
inline int64_t checkedIndex(int64_t v, const IndexedDim& at) {
  if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(at.size)) [[unlikely]]
    outOfBounds(v, at, false);
  return v;
}

/// Checks every value of a 1-D `index` (for a kernel whose loop reads none of them: an empty
/// output still fails on a bad index, as PyTorch's index_select and index_add do).
void checkAll(const TensorRef& index, const IndexedDim& at) {
  const int64_t n = index.numel(), stride = index.strides.empty() ? 0 : index.strides[0];
  for (int64_t i = 0; i < n; ++i)
    checkedIndex(index.ptr<int64_t>()[i * stride], at);
}

/// Walks every position of `shape` with three operands: `target` (the indexed tensor; its `dim`
/// coordinate comes from the index, checked, `op` naming the op in errors), `index` and `other`,
/// calling `fn(targetPtr, otherPtr)`.
/// Positions are visited in lines along `dim`, whole lines per thread: positions on different
/// lines differ in some other coordinate, so their targets never collide and writes need no locks.
template <typename T, typename Fn>
void indexLoop(std::string_view op, const Shape& shape, const TensorRef& target, int64_t dim,
               const TensorRef& index, const Shape& indexStrides, const TensorRef& other, Fn fn) {
  // Move `dim` last in every operand so that a line is a contiguous range of linear positions.
  auto moveLast = [dim](Shape v) {
    int64_t x = v[static_cast<size_t>(dim)];
    v.erase(v.begin() + dim);
    v.push_back(x);
    return v;
  };
  Shape ts = target.strides;
  ts[static_cast<size_t>(dim)] = 0;
  std::array<Shape, 3> strides{moveLast(ts), moveLast(indexStrides), moveLast(other.strides)};
  LoopNest<3> nest(moveLast(shape), strides,
                   {static_cast<char*>(target.data), static_cast<char*>(index.data),
                    static_cast<char*>(other.data)},
                   {static_cast<int64_t>(sizeof(T)), 8, static_cast<int64_t>(sizeof(T))});
  const int64_t dimStride =
      target.strides[static_cast<size_t>(dim)] * static_cast<int64_t>(sizeof(T));
  const IndexedDim at{target.shape[static_cast<size_t>(dim)], dim, op};
  const int64_t line = std::max<int64_t>(shape[static_cast<size_t>(dim)], 1);
  auto run = [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t ix = checkedIndex(*reinterpret_cast<const int64_t*>(p[1] + j * s[1]), at);
      fn(reinterpret_cast<T*>(p[0] + j * s[0] + ix * dimStride),
         reinterpret_cast<T*>(p[2] + j * s[2]));
    }
  };
  const int64_t lines = numel(shape) / line;
  parallelFor(lines, std::max<int64_t>(1, kElementwiseGrain / line),
              [&](int64_t b, int64_t e) { nest.forRange(b * line, e * line, run); });
}

/// *dst += *src, as scatter_add and index_add accumulate (bools: or).
template <typename T> void accumulate(T* dst, const T* src) {
  if constexpr (std::is_same_v<T, bool>)
    *dst = *dst || *src;
  else
    *dst = convert<T>(static_cast<ComputeType<T>>(*dst) + static_cast<ComputeType<T>>(*src));
}

/// index_select / index_add on contiguous tensors: `x` viewed as [outer, size, inner] around
/// `dim`. Whole rows of `inner` elements move at once (an embedding lookup is one memcpy per row),
/// where the general loop walks element by element along `dim`.
struct RowView {
  int64_t outer = 1, inner = 1;
};
std::optional<RowView> rowView(const TensorRef& a, const TensorRef& b, const TensorRef& index,
                               int64_t dim) {
  if (!a.isContiguous() || !b.isContiguous() || index.shape.size() > 1) return std::nullopt;
  RowView v;
  for (int64_t d = 0; d < dim; ++d)
    v.outer *= a.shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(dim) + 1; d < a.shape.size(); ++d)
    v.inner *= a.shape[d];
  return v;
}

} // namespace

void Gather(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef &x = in[0], &index = in[1];
  int64_t dim = at.i("dim");
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>("gather", index.shape, x, dim, index, index.strides, out,
                 [](T* src, T* dst) { *dst = *src; });
  });
}

namespace {
/// self with src scattered in along the attribute `dim`, each target combined with what reaches
/// it by `combine(dst, src)` in the compute type, in order; `op` names the op in errors.
template <typename Combine>
void scatterCombining(std::string_view op, std::span<const TensorRef> in, const TensorRef& out,
                      const Attrs& at, Combine combine) {
  copyCast(in[0], out);
  const int64_t dim = at.i("dim");
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = ComputeType<T>;
    indexLoop<T>(op, in[1].shape, out, dim, in[1], in[1].strides, in[2], [&](T* dst, T* src) {
      if constexpr (std::is_same_v<Combine, std::nullptr_t>)
        *dst = *src;
      else
        *dst = convert<T>(combine(static_cast<C>(*dst), static_cast<C>(*src)));
    });
  });
}
/// The larger (`max`) or smaller of a and b, NaN where either is (as amax and amin).
template <typename C> C extremum(C a, C b, bool max) {
  if constexpr (std::is_floating_point_v<C>)
    if (b != b) return b;
  return (max ? b > a : b < a) ? b : a;
}
} // namespace

void Scatter(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scatterCombining("scatter", in, out, at, nullptr);
}

void ScatterAdd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyCast(in[0], out);
  int64_t dim = at.i("dim");
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>("scatter_add", in[1].shape, out, dim, in[1], in[1].strides, in[2],
                 [](T* dst, T* src) { accumulate(dst, src); });
  });
}

// The reductions serve scatter_reduce (and index_reduce through it): their errors name it.
void ScatterProd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scatterCombining("scatter_reduce", in, out, at, [](auto a, auto b) {
    using C = decltype(a);
    if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
      // Integers wrap around on overflow, as PyTorch's (unsigned arithmetic: defined).
      using U = std::make_unsigned_t<C>;
      return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  });
}
void ScatterAmax(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scatterCombining("scatter_reduce", in, out, at,
                   [](auto a, auto b) { return extremum(a, b, true); });
}
void ScatterAmin(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  scatterCombining("scatter_reduce", in, out, at,
                   [](auto a, auto b) { return extremum(a, b, false); });
}

namespace {
/// Copies rows `[b, e)` of index_select's [outer, n, inner] result from `src` ([outer, size,
/// inner]), each index checked as it is read; `bytes` per row (a compile-time B where nonzero, so
/// a row of one element is a plain load and store).
template <size_t B>
void selectRows(char* dst, const char* src, const TensorRef& index, const IndexedDim& at,
                size_t bytes, int64_t b, int64_t e) {
  const int64_t n = index.numel(), stride = index.strides.empty() ? 0 : index.strides[0];
  const int64_t* ix = index.ptr<int64_t>();
  int64_t o = b / n, i = b % n;
  for (int64_t r = b; r < e; ++r) {
    const int64_t row = o * at.size + checkedIndex(ix[i * stride], at);
    std::memcpy(dst + static_cast<size_t>(r) * bytes, src + static_cast<size_t>(row) * bytes,
                B != 0 ? B : bytes);
    if (++i == n) {
      i = 0;
      ++o;
    }
  }
}
} // namespace

void IndexSelect(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef &x = in[0], &index = in[1];
  int64_t dim = at.i("dim");
  const IndexedDim to{x.shape[static_cast<size_t>(dim)], dim, "index_select"};
  if (out.numel() == 0) return checkAll(index, to);
  if (auto v = rowView(x, out, index, dim)) {
    const auto bytes = static_cast<size_t>(v->inner) * elementSize(x.dtype);
    const char* src = static_cast<const char*>(x.data);
    char* dst = static_cast<char*>(out.data);
    parallelFor(v->outer * index.numel(),
                std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(v->inner, 1)),
                [&](int64_t b, int64_t e) {
                  if (bytes == 4)
                    selectRows<4>(dst, src, index, to, bytes, b, e);
                  else if (bytes == 8)
                    selectRows<8>(dst, src, index, to, bytes, b, e);
                  else
                    selectRows<0>(dst, src, index, to, bytes, b, e);
                });
    return;
  }
  Shape istr(out.shape.size(), 0); // the 1-D index walks along `dim` of the output
  istr[dim] = index.strides.empty() ? 0 : index.strides[0];
  visitDType(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(to.op, out.shape, x, dim, index, istr, out, [](T* src, T* dst) { *dst = *src; });
  });
}

void IndexAdd(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  copyCast(in[0], out);
  const TensorRef &index = in[1], &src = in[2];
  int64_t dim = at.i("dim");
  const IndexedDim to{out.shape[static_cast<size_t>(dim)], dim, "index_add"};
  if (src.numel() == 0) return checkAll(index, to);
  if (auto v = rowView(out, src, index, dim); v && out.dtype == src.dtype) {
    // Repeated indices add into one row: the threads split the columns, never the rows.
    const int64_t n = index.numel(), stride = index.strides.empty() ? 0 : index.strides[0];
    const int64_t* ix = index.ptr<int64_t>();
    constexpr int64_t kBlock = 256; // columns per task
    const int64_t blocks = (v->inner + kBlock - 1) / kBlock;
    visitDType(out.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* o = out.ptr<T>();
      const T* s = src.ptr<T>();
      parallelFor(v->outer * blocks,
                  std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n * kBlock, 1)),
                  [&](int64_t b, int64_t e) {
                    for (int64_t t = b; t < e; ++t) {
                      const int64_t outer = t / blocks, c0 = (t % blocks) * kBlock,
                                    c1 = std::min(v->inner, c0 + kBlock);
                      for (int64_t i = 0; i < n; ++i) {
                        T* d = o + (outer * to.size + checkedIndex(ix[i * stride], to)) * v->inner;
                        const T* r = s + (outer * n + i) * v->inner;
                        for (int64_t c = c0; c < c1; ++c)
                          accumulate(d + c, r + c);
                      }
                    }
                  });
    });
    return;
  }
  Shape istr(src.shape.size(), 0);
  istr[dim] = index.strides.empty() ? 0 : index.strides[0];
  visitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    indexLoop<T>(to.op, src.shape, out, dim, index, istr, src,
                 [](T* dst, T* s) { accumulate(dst, s); });
  });
}

void CheckIndex(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const IndexedDim to{at.i("size"), at.i("dim"), at.get<std::string>("op")};
  const bool wrap = at.b("wrap");
  LoopNest<2> nest(out.shape, {in[0].strides, out.strides},
                   {static_cast<char*>(in[0].data), static_cast<char*>(out.data)}, {8, 8});
  nest.parallel(kElementwiseGrain,
                [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
                  for (int64_t j = 0; j < n; ++j) {
                    const int64_t v = *reinterpret_cast<const int64_t*>(p[0] + j * s[0]);
                    const int64_t w = wrap && v < 0 ? v + to.size : v;
                    if (static_cast<uint64_t>(w) >= static_cast<uint64_t>(to.size)) [[unlikely]]
                      outOfBounds(v, to, wrap);
                    *reinterpret_cast<int64_t*>(p[1] + j * s[1]) = w;
                  }
                });
}

} // namespace weft::kernels
