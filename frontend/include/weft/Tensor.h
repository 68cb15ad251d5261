// The user-facing tensor: a handle over shared strided storage, with LibTorch's spelling.
#pragma once

#include "weft/TensorMethodsMacros.h"
#include "weft/runtime/DType.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/TensorRef.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft {

struct TensorImpl;
class Tensor;
namespace autograd {
class Node;
}
namespace indexing {
struct TensorIndex;
}

/// dtype constants spelled as in LibTorch.
inline constexpr DType kFloat32 = DType::Float32, kFloat = DType::Float32,
                       kFloat64 = DType::Float64, kDouble = DType::Float64,
                       kFloat16 = DType::Float16, kHalf = DType::Float16,
                       kBFloat16 = DType::BFloat16, kInt32 = DType::Int32, kInt = DType::Int32,
                       kInt64 = DType::Int64, kLong = DType::Int64, kBool = DType::Bool,
                       kUInt8 = DType::UInt8, kByte = DType::UInt8;

/// A number given where a tensor could be (`x + 2`): it takes part in type promotion the way
/// PyTorch's wrapped numbers do (it never widens a tensor's dtype within a category).
class Scalar {
public:
  Scalar(double v) : d_(v), kind_(Kind::Float) {}   // NOLINT: implicit by design
  Scalar(float v) : d_(v), kind_(Kind::Float) {}    // NOLINT
  Scalar(int v) : i_(v), d_(v), kind_(Kind::Int) {} // NOLINT
  Scalar(int64_t v) : i_(v), d_(static_cast<double>(v)), kind_(Kind::Int) {} // NOLINT
  Scalar(bool v) : i_(v), d_(v), kind_(Kind::Bool) {}                        // NOLINT
  /// The dtype PyTorch gives such a number (int64, float64 or bool).
  DType dtype() const {
    return kind_ == Kind::Float ? DType::Float64 : kind_ == Kind::Int ? DType::Int64 : DType::Bool;
  }
  double toDouble() const { return d_; }
  /// The value as LibTorch's Scalar converts it (a float truncated toward zero): a ValueError where
  /// the type cannot hold it (NaN or an infinity as an integer, a value past the type's range).
  int64_t toLong() const { return to<int64_t>(); }
  float toFloat() const { return to<float>(); }
  int toInt() const { return to<int>(); }
  bool toBool() const { return kind_ == Kind::Float ? d_ != 0 : i_ != 0; }
  /// The value as T (a number type or bool), as Scalar::to<T>().
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) {
      return toBool();
    } else if constexpr (std::is_floating_point_v<T>) {
      WEFT_CHECK(!std::isfinite(d_) || std::fabs(d_) <= std::numeric_limits<T>::max(), Value,
                 "value cannot be converted to a ", sizeof(T) * 8,
                 "-bit float without overflow: ", d_);
      return static_cast<T>(d_);
    } else {
      if (kind_ != Kind::Float) {
        WEFT_CHECK(std::in_range<T>(i_), Value, "value cannot be converted to a ", sizeof(T) * 8,
                   "-bit integer without overflow: ", i_);
        return static_cast<T>(i_);
      }
      // [lowest, max + 1) in doubles: both ends are exact (0 or powers of two).
      const double lowest = static_cast<double>(std::numeric_limits<T>::lowest());
      const double past = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
      WEFT_CHECK(d_ >= lowest && d_ < past, Value, "value cannot be converted to a ", sizeof(T) * 8,
                 "-bit integer without overflow: ", d_);
      return static_cast<T>(d_);
    }
  }
  bool isFloatingPoint() const { return kind_ == Kind::Float; }
  /// An integer (a bool too where `includeBool`), and a bool.
  bool isIntegral(bool includeBool) const {
    return kind_ == Kind::Int || (includeBool && kind_ == Kind::Bool);
  }
  bool isBoolean() const { return kind_ == Kind::Bool; }

private:
  enum class Kind : uint8_t { Float, Int, Bool };
  int64_t i_ = 0;
  double d_ = 0;
  Kind kind_;
};

/// A list of integers given as LibTorch takes sizes and dims (its IntArrayRef): one integer
/// (`ones(3)`, `x.view(-1)`, `x.sum(1)`), a braced list (`{2, 3}`), a std::vector<int64_t> or a
/// Shape. It holds its values, and is a Shape.
class IntArrayRef : public Shape {
public:
  IntArrayRef() = default;
  /// One integer, of any integer type but bool (x.var(false) is no dim: LibTorch's `unbiased` is
  /// `correction` here; nor is x.sum(1.5)).
  template <typename T,
            typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  IntArrayRef(T value) : Shape{static_cast<int64_t>(value)} {} // NOLINT: implicit by design
  IntArrayRef(std::initializer_list<int64_t> values) : Shape(values) {} // NOLINT
  IntArrayRef(const Shape& values) : Shape(values) {}                   // NOLINT
  IntArrayRef(Shape&& values) : Shape(std::move(values)) {}             // NOLINT
  IntArrayRef(const std::vector<int64_t>& values) : Shape(values) {}    // NOLINT
};
/// The dims a reduction works on (empty: every dim).
using Dims = IntArrayRef;

/// Options for factories, spelled like torch::TensorOptions. A factory whose dtype PyTorch infers
/// from its arguments (arange, full) does so only when no dtype was given.
struct TensorOptions {
  DType dtype_ = DType::Float32; ///< the dtype (float32 unless given)
  bool has_dtype_ = false;       ///< whether a dtype was given
  bool requires_grad_ = false;   ///< whether the tensor is a leaf requiring grad
  Device device_;                ///< where the tensor lives
  TensorOptions() = default;
  TensorOptions(DType t) : dtype_(t), has_dtype_(true) {} // NOLINT: implicit like LibTorch's
  TensorOptions& dtype(DType t) {
    dtype_ = t;
    has_dtype_ = true;
    return *this;
  }
  TensorOptions& requires_grad(bool r = true) {
    requires_grad_ = r;
    return *this;
  }
  TensorOptions& device(Device d) {
    device_ = d;
    return *this;
  }
};

/// A gradient hook: receives the gradient and may return a replacement (or an undefined tensor).
using GradHook = std::function<Tensor(const Tensor&)>;

/// A multi-dimensional array with define-by-run autograd. Copies share the same tensor (like
/// torch::Tensor); use clone() for a deep copy. A handle may be shared across threads; writing to
/// one tensor from several threads at once is a data race, as in PyTorch.
class Tensor {
public:
  /// An undefined tensor (defined() is false).
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  /// False for a default-constructed tensor.
  bool defined() const { return impl_ != nullptr; }
  const Shape& sizes() const;
  const Shape& strides() const;
  /// Size of dimension `dim` (negative counts from the end).
  int64_t size(int64_t dim, WEFT_LOC) const;
  int64_t stride(int64_t dim, WEFT_LOC) const;
  int64_t dim() const;
  int64_t numel() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  /// Where its memory is (a traced tensor: the CPU).
  Device device() const;
  bool is_cpu() const { return device().is_cpu(); }
  bool is_vulkan() const { return device().is_vulkan(); }
  /// Its dtype, its device and whether it requires grad, as options for factories.
  TensorOptions options() const;
  int64_t storage_offset() const;
  bool is_contiguous() const;
  bool is_floating_point() const { return isFloating(dtype()); }
  /// dim(), numel() and the bytes of one element, under PyTorch's older names.
  int64_t ndimension() const { return dim(); }
  int64_t nelement() const { return numel(); }
  int64_t element_size() const;
  /// Whether `other` has this tensor's shape.
  bool is_same_size(const Tensor& other) const;
  /// This tensor on the CPU: itself if it is there, else a copy (gradients flow back).
  Tensor cpu(WEFT_LOC) const;
  /// Pointer to the first element (of the view, not the storage): a DeviceError for a tensor
  /// whose device's memory the host cannot read (call .cpu() first).
  void* data_ptr() const;
  template <typename T> T* data_ptr(WEFT_LOC) const;
  /// The strided view of this tensor's memory that kernels take.
  TensorRef ref() const;
  /// The shared implementation (for weft's own rooms).
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  /// True if both handles refer to one tensor.
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  /// True if both tensors view one storage (LibTorch's is_alias_of; traced tensors alias nothing).
  bool is_alias_of(const Tensor& other) const;

  // ---- conversion and values ----
  Tensor to(DType dtype, WEFT_LOC) const;
  /// This tensor on `device` (and as `dtype`): itself if it is there already, else a copy that
  /// gradients flow back through to this tensor's device. The one way between devices: ops on
  /// tensors of two devices are a DeviceError.
  Tensor to(Device device, WEFT_LOC) const;
  Tensor to(Device device, DType dtype, WEFT_LOC) const;
  Tensor contiguous(WEFT_LOC) const;
  Tensor clone(WEFT_LOC) const;
  /// The value of a one-element tensor, as T or (untyped) as a Scalar of its dtype's kind.
  template <typename T> T item(WEFT_LOC) const;
  Scalar item(WEFT_LOC) const;
  /// All elements in row-major order, converted to T.
  template <typename T> std::vector<T> to_vector(WEFT_LOC) const;
  std::string toString() const;

  // ---- views (share storage) ----
  Tensor view(IntArrayRef shape, WEFT_LOC) const;
  Tensor reshape(IntArrayRef shape, WEFT_LOC) const;
  Tensor permute(IntArrayRef dims, WEFT_LOC) const;
  Tensor transpose(int64_t dim0, int64_t dim1, WEFT_LOC) const;
  Tensor t(WEFT_LOC) const;
  /// Transpose of the last two dims.
  Tensor mT(WEFT_LOC) const;
  Tensor slice(int64_t dim = 0, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1, WEFT_LOC) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length, WEFT_LOC) const;
  Tensor select(int64_t dim, int64_t index, WEFT_LOC) const;
  Tensor expand(IntArrayRef shape, WEFT_LOC) const;
  Tensor squeeze(WEFT_LOC) const;
  Tensor squeeze(int64_t dim, WEFT_LOC) const;
  Tensor unsqueeze(int64_t dim, WEFT_LOC) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1, WEFT_LOC) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes, WEFT_LOC) const;
  Tensor flip(Dims dims, WEFT_LOC) const;
  /// view(other.sizes()), reshape(other.sizes()).
  Tensor view_as(const Tensor& other, WEFT_LOC) const;
  Tensor reshape_as(const Tensor& other, WEFT_LOC) const;
  /// Copies of this tensor with `src` written over a slice (dim, start, end, step), the index
  /// `index` of `dim`, or a diagonal: out of place, differentiable in both.
  Tensor slice_scatter(const Tensor& src, int64_t dim = 0, std::optional<int64_t> start = {},
                       std::optional<int64_t> end = {}, int64_t step = 1, WEFT_LOC) const;
  Tensor select_scatter(const Tensor& src, int64_t dim, int64_t index, WEFT_LOC) const;
  Tensor diagonal_scatter(const Tensor& src, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1,
                          WEFT_LOC) const;
  /// This tensor summed down to `shape` (which it must broadcast to), as the gradient of expand.
  Tensor sum_to_size(IntArrayRef shape, WEFT_LOC) const;
  /// narrow() copied into a tensor of its own.
  Tensor narrow_copy(int64_t dim, int64_t start, int64_t length, WEFT_LOC) const;
  /// The tensor tiled `repeats[i]` times along dim i (more repeats than dims add leading dims).
  Tensor repeat(IntArrayRef repeats, WEFT_LOC) const;
  /// roll() by one shift along one dim (none: the flattened tensor).
  Tensor roll(int64_t shift, std::optional<int64_t> dim = std::nullopt, WEFT_LOC) const;
  /// tensor_split() along dim 1 (dim 0 for 1-D), dim 0 (rank 2 or more) and dim 2 (rank 3 or
  /// more); `sections` must divide the dim.
  std::vector<Tensor> hsplit(int64_t sections, WEFT_LOC) const;
  std::vector<Tensor> hsplit(const std::vector<int64_t>& indices, WEFT_LOC) const;
  std::vector<Tensor> vsplit(int64_t sections, WEFT_LOC) const;
  std::vector<Tensor> vsplit(const std::vector<int64_t>& indices, WEFT_LOC) const;
  std::vector<Tensor> dsplit(int64_t sections, WEFT_LOC) const;
  std::vector<Tensor> dsplit(const std::vector<int64_t>& indices, WEFT_LOC) const;
  /// LibTorch-style indexing: integers, Slice, None, Ellipsis, bools, bool masks, integer tensors.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices, WEFT_LOC) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices, WEFT_LOC) const;
  /// x[i] is x.select(0, i), x[t] is x.index({t}), as in LibTorch (errors name no caller's line:
  /// an operator[] takes no location).
  Tensor operator[](int64_t index) const;
  Tensor operator[](const Tensor& index) const;
  /// Writes `values` (broadcast) where `indices` point, as LibTorch's x.index_put_({...}, v); with
  /// `accumulate`, adds them there instead (repeated positions add up).
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                     bool accumulate = false, WEFT_LOC);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, Scalar value, WEFT_LOC);

  // ---- elementwise ----
  // One method per unary op (x.exp()) with its in-place form (x.exp_()), and per binary op with a
  // plain API (x.maximum(other), and with a number: x.gt(0.5)), generated from their rows in the op
  // table, weft/runtime/Ops.inc, which lists them.
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  Tensor s(WEFT_LOC) const;                                                                        \
  Tensor& s##_(WEFT_LOC);
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_BINARY_METHOD_##api(s)
#define WEFT_BINARY_METHOD_Method(s)                                                               \
  Tensor s(const Tensor& other, WEFT_LOC) const;                                                   \
  Tensor s(Scalar other, WEFT_LOC) const;
#define WEFT_BINARY_METHOD_Custom(s)
#define WEFT_OP(N, s, kind, n, v)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_BINARY_METHOD_Method
#undef WEFT_BINARY_METHOD_Custom
#undef WEFT_OP
  /// self + value * t1 * t2 and self + value * t1 / t2 (value truncated for an integer result;
  /// addcdiv of two integer tensors is an error, as in PyTorch).
  Tensor addcmul(const Tensor& t1, const Tensor& t2, Scalar value = 1, WEFT_LOC) const;
  Tensor addcdiv(const Tensor& t1, const Tensor& t2, Scalar value = 1, WEFT_LOC) const;
  /// The p-norm over `dims` (empty: all): p = 2 (default), 1, infinity or any other positive p
  /// (float16/bfloat16 summed in float; a zero norm has gradient 0).
  Tensor norm(double p = 2, Dims dims = {}, bool keepdim = false, WEFT_LOC) const;
  /// Division rounded as torch.div's rounding_mode: "trunc" (toward zero) or "floor" (toward minus
  /// infinity, floor_divide); integers stay integers (a divisor of 0 is then an error).
  Tensor div(const Tensor& other, std::string_view rounding_mode, WEFT_LOC) const;
  Tensor div(Scalar other, std::string_view rounding_mode, WEFT_LOC) const;
  /// self + alpha * other, self - alpha * other.
  Tensor add(const Tensor& other, Scalar alpha = 1, WEFT_LOC) const;
  Tensor add(Scalar other, Scalar alpha = 1, WEFT_LOC) const;
  Tensor sub(const Tensor& other, Scalar alpha = 1, WEFT_LOC) const;
  Tensor sub(Scalar other, Scalar alpha = 1, WEFT_LOC) const;
  /// to(other.dtype()).
  Tensor type_as(const Tensor& other, WEFT_LOC) const;
  /// New tensors of this tensor's dtype.
  Tensor new_zeros(IntArrayRef shape, WEFT_LOC) const;
  Tensor new_ones(IntArrayRef shape, WEFT_LOC) const;
  Tensor new_full(IntArrayRef shape, Scalar value, WEFT_LOC) const;
  Tensor new_empty(IntArrayRef shape, WEFT_LOC) const;
  /// Tensors are real: conj, conj_physical, resolve_conj and resolve_neg are the tensor itself;
  /// is_complex, is_conj and is_neg are false.
  Tensor conj(WEFT_LOC) const;
  Tensor conj_physical(WEFT_LOC) const;
  Tensor resolve_conj(WEFT_LOC) const;
  Tensor resolve_neg(WEFT_LOC) const;
  bool is_complex() const {
    return false;
  }
  bool is_conj() const {
    return false;
  }
  bool is_neg() const {
    return false;
  }
  /// Whether the dtype holds negative numbers (bool and uint8 do not).
  bool is_signed() const;
  /// The one element's truth (an error for zero or several elements).
  bool is_nonzero(WEFT_LOC) const;
  /// The last two dims swapped (the conjugate transpose of real matrices).
  Tensor adjoint(WEFT_LOC) const;
  Tensor mH(WEFT_LOC) const;
  /// True everywhere (tensors are real).
  Tensor isreal(WEFT_LOC) const;
  /// This tensor itself (torch.positive; a bool tensor is an error, as there).
  Tensor positive(WEFT_LOC) const;
  /// pow() in float64.
  Tensor float_power(const Tensor& exponent, WEFT_LOC) const;
  Tensor float_power(Scalar exponent, WEFT_LOC) const;

  // ---- reductions (empty dims = all) ----
  Tensor sum(WEFT_LOC) const;
  Tensor sum(Dims dims, bool keepdim = false, std::optional<DType> dtype = std::nullopt,
             WEFT_LOC) const;
  Tensor mean(WEFT_LOC) const;
  Tensor mean(Dims dims, bool keepdim = false, WEFT_LOC) const;
  Tensor prod(WEFT_LOC) const;
  Tensor prod(int64_t dim, bool keepdim = false, WEFT_LOC) const;
  Tensor amax(Dims dims = {}, bool keepdim = false, WEFT_LOC) const;
  Tensor amin(Dims dims = {}, bool keepdim = false, WEFT_LOC) const;
  Tensor max(WEFT_LOC) const;
  Tensor min(WEFT_LOC) const;
  /// Max/min along `dim`: (values, indices) as torch.max(x, dim).
  std::pair<Tensor, Tensor> max(int64_t dim, bool keepdim = false, WEFT_LOC) const;
  std::pair<Tensor, Tensor> min(int64_t dim, bool keepdim = false, WEFT_LOC) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, WEFT_LOC) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false, WEFT_LOC) const;
  Tensor var(Dims dims = {}, int64_t correction = 1, bool keepdim = false, WEFT_LOC) const;
  Tensor std(Dims dims = {}, int64_t correction = 1, bool keepdim = false, WEFT_LOC) const;
  /// The distinct values, sorted (weft::unique also gives inverse indices and counts).
  Tensor unique(bool sorted = true, WEFT_LOC) const;
  /// Each run of equal consecutive values (or slices along `dim`) once, with where each element
  /// went and the runs' lengths where asked (else empty), as torch.unique_consecutive.
  std::tuple<Tensor, Tensor, Tensor> unique_consecutive(bool return_inverse = false,
                                                        bool return_counts = false,
                                                        std::optional<int64_t> dim = std::nullopt,
                                                        WEFT_LOC) const;
  /// The values sorted along dim 0.
  Tensor msort(WEFT_LOC) const;
  /// Whether any (all) elements are nonzero, over `dims` (empty: all): bool, uint8 for a uint8
  /// input, as torch.any and torch.all.
  Tensor any(Dims dims = {}, bool keepdim = false, WEFT_LOC) const;
  Tensor all(Dims dims = {}, bool keepdim = false, WEFT_LOC) const;
  /// Elementwise NaN, infinity and finiteness tests: bool (integers are never NaN or infinite).
  Tensor isnan(WEFT_LOC) const;
  Tensor isinf(WEFT_LOC) const;
  Tensor isfinite(WEFT_LOC) const;
  /// torch.histogram: (counts or summed `weight`, the bins+1 edges) of `bins` equal bins over
  /// `range` (default: the elements' own; one value v: [v - 0.5, v + 0.5]); with `density`, each
  /// bin divided by the total and its width.
  std::pair<Tensor, Tensor> histogram(int64_t bins = 100,
                                      std::optional<std::pair<double, double>> range = std::nullopt,
                                      const Tensor& weight = {}, bool density = false,
                                      WEFT_LOC) const;
  /// The values sorted along `dim` and their indices (ties keep their order).
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false, WEFT_LOC) const;
  Tensor argsort(int64_t dim = -1, bool descending = false, WEFT_LOC) const;
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, WEFT_LOC) const;

  // ---- linear algebra and indexing ----
  Tensor mm(const Tensor& other, WEFT_LOC) const;
  Tensor bmm(const Tensor& other, WEFT_LOC) const;
  /// The QR factorization of each matrix [..., m, n] (Householder, LAPACK's signs): with `some`,
  /// the reduced Q [..., m, k] and R [..., k, n], k = min(m, n); else the complete one, which
  /// weft computes only where it is the reduced one (m <= n).
  std::pair<Tensor, Tensor> qr(bool some = true, WEFT_LOC) const;
  /// torch.svd: U, S and V (not V^T) of each matrix, reduced with `some` (else only square
  /// matrices); without `compute_uv`, U and V are zero-filled as in PyTorch.
  std::tuple<Tensor, Tensor, Tensor> svd(bool some = true, bool compute_uv = true, WEFT_LOC) const;
  /// The pseudo-inverse through the SVD: singular values below rcond times the largest count as 0.
  Tensor pinverse(double rcond = 1e-15, WEFT_LOC) const;
  /// (X, a copy of A) with AX = this (A^T X = this where `transpose`), A upper or lower
  /// triangular, as torch.triangular_solve (linalg_solve_triangular is its newer form).
  std::pair<Tensor, Tensor> triangular_solve(const Tensor& a, bool upper = true,
                                             bool transpose = false, bool unitriangular = false,
                                             WEFT_LOC) const;
  /// The exponential of each square matrix (Pade 13 with scaling and squaring; the scaling reads
  /// the values, so inside compile() it specializes on them or runs eagerly).
  Tensor matrix_exp(WEFT_LOC) const;
  /// src scattered in along `dim` (as scatter_add places it), each target reduced with what
  /// reaches it by `reduce`: "sum", "prod", "mean", "amax" or "amin"; without `include_self`, a
  /// target reached by src starts from src alone. Gradients as PyTorch's (amax/amin split among
  /// ties), but that a left-out self is no tie (PyTorch 1.13 counts it, and its share is lost).
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src,
                        std::string_view reduce, bool include_self = true, WEFT_LOC) const;
  /// Slice i of `source` along `dim` reduced into slice index[i] of this tensor by `reduce`
  /// ("prod", "mean", "amax" or "amin"), as torch.Tensor.index_reduce.
  Tensor index_reduce(int64_t dim, const Tensor& index, const Tensor& source,
                      std::string_view reduce, bool include_self = true, WEFT_LOC) const;
  /// Every window of `size` elements along `dim`, `step` apart, as a new last dim (a copy, where
  /// PyTorch returns a view).
  Tensor unfold(int64_t dim, int64_t size, int64_t step, WEFT_LOC) const;
  /// This tensor with the elements where `mask` (broadcast to its shape) is true replaced by
  /// `source`'s first elements in row-major order; `source` needs at least as many elements as
  /// `mask` has true.
  Tensor masked_scatter(const Tensor& mask, const Tensor& source, WEFT_LOC) const;
  Tensor& masked_scatter_(const Tensor& mask, const Tensor& source, WEFT_LOC);
  /// index_put_ out of place.
  Tensor index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& values,
                   bool accumulate = false, WEFT_LOC) const;
  Tensor index_put(const std::vector<indexing::TensorIndex>& indices, Scalar value, WEFT_LOC) const;
  /// `source`'s elements written at the positions `index` names in this tensor as if it were
  /// 1-D (negative positions count from the end); with `accumulate`, added there instead (each
  /// repeat adds).
  Tensor put(const Tensor& index, const Tensor& source, bool accumulate = false, WEFT_LOC) const;
  Tensor& put_(const Tensor& index, const Tensor& source, bool accumulate = false, WEFT_LOC);
  /// x where |x| > lambd, else 0.
  Tensor hardshrink(double lambd = 0.5, WEFT_LOC) const;
  /// Samples 1 with probability self (elementwise, in [0, 1]), else 0, from the default generator.
  Tensor bernoulli(WEFT_LOC) const;
  /// `num_samples` category indices (int64) per row of this tensor of non-negative weights (1-D,
  /// or 2-D: one distribution per row), drawn with probability proportional to the weights;
  /// without `replacement`, each category at most once per row (zero weights last). From the
  /// default generator (weft::multinomial takes one).
  Tensor multinomial(int64_t num_samples, bool replacement = false, WEFT_LOC) const;

  // ---- in place (bump the version counter) ----
  Tensor& add_(const Tensor& other, Scalar alpha = 1, WEFT_LOC);
  Tensor& add_(Scalar other, Scalar alpha = 1, WEFT_LOC);
  Tensor& sub_(const Tensor& other, Scalar alpha = 1, WEFT_LOC);
  Tensor& sub_(Scalar other, Scalar alpha = 1, WEFT_LOC);
  Tensor& mul_(const Tensor& other, WEFT_LOC);
  Tensor& mul_(Scalar other, WEFT_LOC);
  Tensor& div_(const Tensor& other, WEFT_LOC);
  Tensor& div_(Scalar other, WEFT_LOC);
  Tensor& fmod_(const Tensor& other, WEFT_LOC);
  Tensor& fmod_(Scalar other, WEFT_LOC);
  Tensor& floor_divide_(const Tensor& other, WEFT_LOC);
  Tensor& floor_divide_(Scalar other, WEFT_LOC);
  /// Bitwise (integers and bool), shifts, gcd and lcm (integers), in place.
  Tensor& bitwise_and_(const Tensor& other, WEFT_LOC);
  Tensor& bitwise_and_(Scalar other, WEFT_LOC);
  Tensor& bitwise_or_(const Tensor& other, WEFT_LOC);
  Tensor& bitwise_or_(Scalar other, WEFT_LOC);
  Tensor& bitwise_xor_(const Tensor& other, WEFT_LOC);
  Tensor& bitwise_xor_(Scalar other, WEFT_LOC);
  Tensor& bitwise_left_shift_(const Tensor& other, WEFT_LOC);
  Tensor& bitwise_left_shift_(Scalar other, WEFT_LOC);
  Tensor& bitwise_right_shift_(const Tensor& other, WEFT_LOC);
  Tensor& bitwise_right_shift_(Scalar other, WEFT_LOC);
  Tensor& gcd_(const Tensor& other, WEFT_LOC);
  Tensor& gcd_(Scalar other, WEFT_LOC);
  Tensor& lcm_(const Tensor& other, WEFT_LOC);
  Tensor& lcm_(Scalar other, WEFT_LOC);
  Tensor& zero_(WEFT_LOC);
  Tensor& fill_(Scalar value, WEFT_LOC);
  Tensor& copy_(const Tensor& src, WEFT_LOC);
  Tensor& pow_(const Tensor& exponent, WEFT_LOC);
  Tensor& pow_(Scalar exponent, WEFT_LOC);
  Tensor& addcmul_(const Tensor& t1, const Tensor& t2, Scalar value = 1, WEFT_LOC);
  Tensor& addcdiv_(const Tensor& t1, const Tensor& t2, Scalar value = 1, WEFT_LOC);
  Tensor& scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                          std::string_view reduce, bool include_self = true, WEFT_LOC);
  Tensor& index_reduce_(int64_t dim, const Tensor& index, const Tensor& source,
                        std::string_view reduce, bool include_self = true, WEFT_LOC);
  /// Overwritten with samples from the default generator: uniform on [from, to), normal with
  /// `mean` and `std`, 1 with probability p (else 0). Like any write, an error on a leaf that
  /// requires grad outside NoGradGuard; the values carry no gradient.
  Tensor& uniform_(double from = 0, double to = 1, WEFT_LOC);
  Tensor& normal_(double mean = 0, double std = 1, WEFT_LOC);
  Tensor& bernoulli_(double p = 0.5, WEFT_LOC);
  /// Overwritten with samples of other distributions (float tensors): Cauchy with `median` and
  /// `sigma`, exponential with rate `lambd`, log-normal whose log has `mean` and `std`, and the
  /// geometric number of trials to the first success of probability p (1, 2, ...).
  Tensor& cauchy_(double median = 0, double sigma = 1, WEFT_LOC);
  Tensor& exponential_(double lambd = 1, WEFT_LOC);
  Tensor& log_normal_(double mean = 1, double std = 2, WEFT_LOC);
  Tensor& geometric_(double p, WEFT_LOC);
  /// Overwritten with integers drawn uniformly from [from, to): random_(to) draws from [0, to).
  Tensor& random_(int64_t from, int64_t to, WEFT_LOC);
  Tensor& random_(int64_t to, WEFT_LOC);
  /// The main diagonal of a matrix (or of every dim at once, all of equal size) set to `value`;
  /// with `wrap`, a tall matrix's diagonal starts again every columns + 1 rows.
  Tensor& fill_diagonal_(Scalar value, bool wrap = false, WEFT_LOC);

  /// The tensor itself (real tensors are their own conjugate).
  Tensor& conj_physical_(WEFT_LOC);
  /// float_power() in place (a float64 tensor only: it holds the result).
  Tensor& float_power_(const Tensor& exponent, WEFT_LOC);
  Tensor& float_power_(Scalar exponent, WEFT_LOC);

  // ---- the methods of weft/TensorMethods.inc, with their in-place forms and other names ----
#define WEFT_METHOD(name, params, args, forms, ...)                                                \
  __VA_ARGS__ name(WEFT_PARAMS params WEFT_LOC) const;                                             \
  WEFT_HAS_IN_PLACE_##forms(Tensor& name##_(WEFT_PARAMS params WEFT_LOC);)
#define WEFT_FUNCTION WEFT_METHOD
#define WEFT_ALIAS(alias, name, params, args, forms, ...)                                          \
  WEFT_METHOD(alias, params, args, forms, __VA_ARGS__)
#define WEFT_IN_PLACE(name, params, args) Tensor& name##_(WEFT_PARAMS params WEFT_LOC);
#include "weft/TensorMethods.inc"
#undef WEFT_METHOD
#undef WEFT_FUNCTION
#undef WEFT_ALIAS
#undef WEFT_IN_PLACE

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& requires_grad_(bool requires_grad = true, WEFT_LOC);
  /// The accumulated gradient (undefined until a backward pass reaches this leaf).
  Tensor grad() const;
  /// Replaces the stored gradient (an undefined tensor clears it).
  void set_grad(const Tensor& grad);
  /// Mutable access to the gradient, like LibTorch's mutable_grad().
  Tensor& mutable_grad();
  void backward(const Tensor& gradient = {}, std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false, WEFT_LOC) const;
  /// A tensor sharing this one's storage with no autograd history.
  Tensor detach(WEFT_LOC) const;
  Tensor& detach_(WEFT_LOC);
  bool is_leaf() const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  /// Output index of this tensor in its grad_fn.
  uint32_t output_nr() const;
  /// Calls `hook` with this tensor's gradient during backward; its result (if defined) replaces it.
  void register_hook(GradHook hook, WEFT_LOC) const;
  /// Keeps .grad() for a non-leaf tensor.
  void retain_grad(WEFT_LOC) const;
  /// Whether retain_grad() was called on this non-leaf tensor.
  bool retains_grad() const;
  /// The in-place version counter of this tensor's storage.
  uint64_t _version() const;
  /// Makes this tensor use `data`'s memory, shape and dtype, keeping its identity and autograd
  /// state (LibTorch's set_data: nn::Module::to converts parameters with it).
  void set_data(const Tensor& data, WEFT_LOC) const;

private:
  void checkDefined(const char* what) const;
  std::shared_ptr<TensorImpl> impl_;
};

// ---- operators ----
/// A tensor operand and the line that wrote the operator: operators cannot take a location
/// parameter, so the operand's implicit conversion records it (errors and traced graphs name it).
struct LocatedTensor {
  LocatedTensor(const Tensor& t, // NOLINT: implicit, so `a + b` reads as usual
                std::source_location where = std::source_location::current())
      : tensor(t), loc(where) {}
  const Tensor& tensor;     ///< the operand
  std::source_location loc; ///< the line of the expression
};
/// The left side of a compound assignment (`a += b`), with the line that wrote it.
struct LocatedTarget {
  LocatedTarget(Tensor& t, // NOLINT: implicit, as LocatedTensor
                std::source_location where = std::source_location::current())
      : tensor(t), loc(where) {}
  Tensor& tensor;           ///< the tensor written
  std::source_location loc; ///< the line of the expression
};
Tensor operator-(LocatedTensor a);
/// ~ & | ^ << >> are PyTorch's bitwise operators: integers bit by bit, bool logically (~ is
/// logical_not there), shifts on integers only; floating-point operands are an error.
Tensor operator~(LocatedTensor a);
Tensor operator+(LocatedTensor a, const Tensor& b);
Tensor operator-(LocatedTensor a, const Tensor& b);
Tensor operator*(LocatedTensor a, const Tensor& b);
Tensor operator/(LocatedTensor a, const Tensor& b);
Tensor operator%(LocatedTensor a, const Tensor& b);
Tensor operator==(LocatedTensor a, const Tensor& b);
Tensor operator!=(LocatedTensor a, const Tensor& b);
Tensor operator<(LocatedTensor a, const Tensor& b);
Tensor operator<=(LocatedTensor a, const Tensor& b);
Tensor operator>(LocatedTensor a, const Tensor& b);
Tensor operator>=(LocatedTensor a, const Tensor& b);
Tensor operator&(LocatedTensor a, const Tensor& b);
Tensor operator|(LocatedTensor a, const Tensor& b);
Tensor operator^(LocatedTensor a, const Tensor& b);
Tensor operator<<(LocatedTensor a, const Tensor& b);
Tensor operator>>(LocatedTensor a, const Tensor& b);
Tensor operator&(LocatedTensor a, Scalar b);
Tensor operator|(LocatedTensor a, Scalar b);
Tensor operator^(LocatedTensor a, Scalar b);
Tensor operator<<(LocatedTensor a, Scalar b);
Tensor operator>>(LocatedTensor a, Scalar b);
Tensor operator&(Scalar a, LocatedTensor b);
Tensor operator|(Scalar a, LocatedTensor b);
Tensor operator^(Scalar a, LocatedTensor b);
Tensor operator<<(Scalar a, LocatedTensor b);
Tensor operator>>(Scalar a, LocatedTensor b);
Tensor operator+(LocatedTensor a, Scalar b);
Tensor operator-(LocatedTensor a, Scalar b);
Tensor operator*(LocatedTensor a, Scalar b);
Tensor operator/(LocatedTensor a, Scalar b);
Tensor operator%(LocatedTensor a, Scalar b);
Tensor operator==(LocatedTensor a, Scalar b);
Tensor operator!=(LocatedTensor a, Scalar b);
Tensor operator<(LocatedTensor a, Scalar b);
Tensor operator<=(LocatedTensor a, Scalar b);
Tensor operator>(LocatedTensor a, Scalar b);
Tensor operator>=(LocatedTensor a, Scalar b);
Tensor operator+(Scalar a, LocatedTensor b);
Tensor operator-(Scalar a, LocatedTensor b);
Tensor operator*(Scalar a, LocatedTensor b);
Tensor operator/(Scalar a, LocatedTensor b);
Tensor operator%(Scalar a, LocatedTensor b);
Tensor& operator+=(LocatedTarget a, const Tensor& b);
Tensor& operator-=(LocatedTarget a, const Tensor& b);
Tensor& operator*=(LocatedTarget a, const Tensor& b);
Tensor& operator/=(LocatedTarget a, const Tensor& b);
Tensor& operator+=(LocatedTarget a, Scalar b);
Tensor& operator-=(LocatedTarget a, Scalar b);
Tensor& operator*=(LocatedTarget a, Scalar b);
Tensor& operator/=(LocatedTarget a, Scalar b);
Tensor& operator%=(LocatedTarget a, const Tensor& b);
Tensor& operator%=(LocatedTarget a, Scalar b);
Tensor& operator&=(LocatedTarget a, const Tensor& b);
Tensor& operator|=(LocatedTarget a, const Tensor& b);
Tensor& operator^=(LocatedTarget a, const Tensor& b);
Tensor& operator<<=(LocatedTarget a, const Tensor& b);
Tensor& operator>>=(LocatedTarget a, const Tensor& b);
Tensor& operator&=(LocatedTarget a, Scalar b);
Tensor& operator|=(LocatedTarget a, Scalar b);
Tensor& operator^=(LocatedTarget a, Scalar b);
Tensor& operator<<=(LocatedTarget a, Scalar b);
Tensor& operator>>=(LocatedTarget a, Scalar b);
/// Prints like PyTorch: "tensor([1., 2.], requires_grad=True)".
std::ostream& operator<<(std::ostream& os, const Tensor& t);
/// Prints the number (an integer, a bool as true/false, a float as C++ streams it).
std::ostream& operator<<(std::ostream& os, const Scalar& s);
/// The arguments streamed one after another into a string, as LibTorch's c10::str.
template <typename... Args> std::string str(const Args&... args) {
  return detail::concat(args...);
}

/// The dtype PyTorch's type promotion gives `a op b` (dims, zero-dim tensors and scalars ranked).
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, Scalar b);

} // namespace weft
