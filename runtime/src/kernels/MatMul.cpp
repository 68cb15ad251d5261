// Batched matrix multiply with broadcast batch dims: OpenBLAS for floats, a plain loop for
// integers.
#include "Gemm.h"
#include "Loops.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Storage.h"

#include <optional>

namespace weft::kernels {
namespace {

/// A matrix operand in a layout BLAS accepts: row-major with leading dimension `ld`, maybe
/// transposed.
struct BlasMatrix {
  const void* data;
  bool transposed;
  int64_t ld;
};

/// How to hand the (rows x cols) matrix at `p` with `rowStride`/`colStride` to BLAS, if it can be.
std::optional<BlasMatrix> blasLayout(const void* p, int64_t rows, int64_t cols, int64_t rowStride,
                                     int64_t colStride) {
  if (colStride == 1 || cols == 1) {
    int64_t ld = rows == 1 ? std::max<int64_t>(cols, 1) : rowStride;
    if (ld >= std::max<int64_t>(cols, 1)) return BlasMatrix{p, false, ld};
  }
  if (rowStride == 1 || rows == 1) {
    int64_t ld = cols == 1 ? std::max<int64_t>(rows, 1) : colStride;
    if (ld >= std::max<int64_t>(rows, 1)) return BlasMatrix{p, true, ld};
  }
  return std::nullopt;
}

/// A contiguous float/double copy of `ref` (any dtype), kept alive by the returned storage.
std::shared_ptr<Storage> contiguousAs(const TensorRef& ref, DType dtype, TensorRef& result) {
  auto s = Storage::allocate(static_cast<size_t>(ref.numel()) * elementSize(dtype));
  result = TensorRef{s->data(), dtype, ref.shape, contiguousStrides(ref.shape)};
  copyCast(ref, result);
  return s;
}

template <typename T>
void matmulBlas(const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  const int64_t nd = out.dim(), m = out.shape[nd - 2], n = out.shape[nd - 1],
                k = a.shape[a.dim() - 1];
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  TensorRef ab = a, bb = b;
  ab.shape.resize(a.shape.size() - 2);
  bb.shape.resize(b.shape.size() - 2);
  Shape as = broadcastStrides(ab, batch), bs = broadcastStrides(bb, batch);
  const int64_t numBatch = numel(batch);
  if (k == 0) return fill(out, 0.0); // empty sums (out may be laid out: fill follows its strides)
  // A b shared by every batch (a linear layer on [batch, ..., features]) and an a whose batches
  // follow one another row after row: one product with the batch folded into the rows.
  const int64_t lda = a.strides[a.dim() - 2];
  bool foldRows = numBatch > 1 && a.strides[a.dim() - 1] == 1 && lda >= k && out.isContiguous();
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1, next = m * lda; foldRows && d >= 0;
       --d) {
    auto u = static_cast<size_t>(d);
    if (batch[u] == 1) continue;
    foldRows = bs[u] == 0 && as[u] == next;
    next *= batch[u];
  }
  if (foldRows) {
    auto lb = blasLayout(b.data, k, n, b.strides[b.dim() - 2], b.strides[b.dim() - 1]);
    WEFT_INTERNAL_ASSERT(lb.has_value(),
                         "matmul operands must be made BLAS-compatible by the caller");
    parallelGemm<T>(false, lb->transposed, numBatch * m, n, k, a.ptr<T>(), lda,
                    static_cast<const T*>(lb->data), lb->ld, T(0), out.ptr<T>(), n);
    return;
  }
  // One product at a time, each split across the threads; or, with several, one per thread.
  // The output may be laid out (PlanStep::outputStrides): each product where its rows lie, or,
  // where its columns are contiguous, computed transposed (C^T = B^T A^T).
  const int64_t crs = out.strides[nd - 2], ccs = out.strides[nd - 1];
  auto product = [&](int64_t i, bool split) {
    int64_t aoff = 0, boff = 0, coff = 0, rem = i;
    for (size_t d = batch.size(); d-- > 0;) {
      aoff += (rem % batch[d]) * as[d];
      boff += (rem % batch[d]) * bs[d];
      coff += (rem % batch[d]) * out.strides[d];
      rem /= batch[d];
    }
    auto la = blasLayout(a.ptr<T>() + aoff, m, k, a.strides[a.dim() - 2], a.strides[a.dim() - 1]);
    auto lb = blasLayout(b.ptr<T>() + boff, k, n, b.strides[b.dim() - 2], b.strides[b.dim() - 1]);
    auto lc = blasLayout(out.ptr<T>() + coff, m, n, crs, ccs);
    WEFT_INTERNAL_ASSERT(la && lb && lc,
                         "matmul operands must be made BLAS-compatible by the caller");
    T* cp = out.ptr<T>() + coff;
    auto run = split ? &parallelGemm<T> : &gemm<T>;
    if (!lc->transposed)
      run(la->transposed, lb->transposed, m, n, k, static_cast<const T*>(la->data), la->ld,
          static_cast<const T*>(lb->data), lb->ld, T(0), cp, lc->ld);
    else
      run(!lb->transposed, !la->transposed, n, m, k, static_cast<const T*>(lb->data), lb->ld,
          static_cast<const T*>(la->data), la->ld, T(0), cp, lc->ld);
  };
  if (numBatch == 1) return product(0, true);
  parallelFor(numBatch, std::max<int64_t>(1, kGemmSplitWork / std::max<int64_t>(1, m * n * k)),
              [&](int64_t b0, int64_t e0) {
                for (int64_t i = b0; i < e0; ++i)
                  product(i, false);
              });
}

template <typename T>
void matmulLoop(const TensorRef& a, const TensorRef& b, const TensorRef& out) {
  const int64_t nd = out.dim(), m = out.shape[nd - 2], n = out.shape[nd - 1],
                k = a.shape[a.dim() - 1];
  Shape batch(out.shape.begin(), out.shape.end() - 2);
  TensorRef ab = a, bb = b;
  ab.shape.resize(a.shape.size() - 2);
  bb.shape.resize(b.shape.size() - 2);
  Shape as = broadcastStrides(ab, batch), bs = broadcastStrides(bb, batch);
  const int64_t am = a.strides[a.dim() - 2], ak = a.strides[a.dim() - 1];
  const int64_t bk = b.strides[b.dim() - 2], bn = b.strides[b.dim() - 1];
  parallelFor(numel(batch) * m, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t i = row / m, r = row % m, aoff = 0, boff = 0, rem = i;
      for (size_t d = batch.size(); d-- > 0;) {
        aoff += (rem % batch[d]) * as[d];
        boff += (rem % batch[d]) * bs[d];
        rem /= batch[d];
      }
      for (int64_t c = 0; c < n; ++c) {
        using U = std::make_unsigned_t<std::conditional_t<std::is_same_v<T, uint8_t>, uint32_t, T>>;
        U acc = 0; // wraps on overflow, as PyTorch's integer matmul does
        for (int64_t j = 0; j < k; ++j)
          acc += static_cast<U>(a.ptr<T>()[aoff + r * am + j * ak]) *
                 static_cast<U>(b.ptr<T>()[boff + j * bk + c * bn]);
        out.ptr<T>()[(i * m + r) * n + c] = static_cast<T>(acc);
      }
    }
  });
}

} // namespace

void MatMul(std::span<const TensorRef> in, const TensorRef& out, const Attrs& at) {
  const TensorRef &a = in[0], &b = in[1];
  if (out.numel() == 0) return;
  if (!out.isContiguous()) {
    // A laid-out output (PlanStep::outputStrides): BLAS writes a float product where it lies if
    // its rows or its columns are contiguous; anything else is computed row-major and copied.
    const int64_t nd = out.dim();
    const bool floats = out.dtype == DType::Float32 || out.dtype == DType::Float64;
    if (!floats || nd < 2 ||
        !blasLayout(out.data, out.shape[nd - 2], out.shape[nd - 1], out.strides[nd - 2],
                    out.strides[nd - 1])) {
      auto s = Storage::allocate(static_cast<size_t>(out.numel()) * elementSize(out.dtype));
      TensorRef dense{s->data(), out.dtype, out.shape, contiguousStrides(out.shape)};
      MatMul(in, dense, at);
      copyCast(dense, out);
      return;
    }
  }
  switch (out.dtype) {
  case DType::Float32:
  case DType::Float64: {
    // Operands BLAS cannot read directly (e.g. a slice with a step) are copied first.
    auto fits = [](const TensorRef& t) {
      int64_t nd = t.dim();
      return blasLayout(t.data, t.shape[nd - 2], t.shape[nd - 1], t.strides[nd - 2],
                        t.strides[nd - 1])
          .has_value();
    };
    TensorRef ac = a, bc = b;
    std::shared_ptr<Storage> ha, hb;
    if (!fits(a)) ha = contiguousAs(a, a.dtype, ac);
    if (!fits(b)) hb = contiguousAs(b, b.dtype, bc);
    if (out.dtype == DType::Float32)
      matmulBlas<float>(ac, bc, out);
    else
      matmulBlas<double>(ac, bc, out);
    return;
  }
  case DType::Float16:
  case DType::BFloat16: {
    // 16-bit floats multiply in float32 (as PyTorch's CPU kernels accumulate) and round once.
    TensorRef af, bf, of{nullptr, DType::Float32, out.shape, out.strides};
    auto ha = contiguousAs(a, DType::Float32, af), hb = contiguousAs(b, DType::Float32, bf);
    auto ho = Storage::allocate(static_cast<size_t>(out.numel()) * sizeof(float));
    of.data = ho->data();
    matmulBlas<float>(af, bf, of);
    copyCast(of, out);
    return;
  }
  case DType::UInt8:
    return matmulLoop<uint8_t>(a, b, out);
  case DType::Int32:
    return matmulLoop<int32_t>(a, b, out);
  case DType::Int64:
    return matmulLoop<int64_t>(a, b, out);
  case DType::Bool:
    break;
  }
  WEFT_INTERNAL_ASSERT(false, "matmul kernel called with dtype ", dtypeName(out.dtype));
}

} // namespace weft::kernels
