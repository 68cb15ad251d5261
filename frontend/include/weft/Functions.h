// Free functions over tensors: factories, random numbers, math, shape ops and composite ops.
#pragma once

#include "weft/Tensor.h"

#include <atomic>
#include <string_view>
#include <utility>
#include <vector>

namespace weft {

/// A size per spatial dimension (kernel, stride, padding, dilation): one integer for every
/// dimension, or a list, as LibTorch's ExpandingArray (`conv2d(x, w, b, 1, 1)`, `max_pool2d(x,
/// 2)`).
struct ExpandingArray : std::vector<int64_t> {
  ExpandingArray() = default;
  ExpandingArray(int64_t v) : std::vector<int64_t>{v} {} // NOLINT: implicit by design
  ExpandingArray(std::initializer_list<int64_t> v) : std::vector<int64_t>(v) {}
  ExpandingArray(std::vector<int64_t> v) : std::vector<int64_t>(std::move(v)) {} // NOLINT
};

// ---- factories ----
Tensor empty(IntArrayRef shape, TensorOptions options = {}, WEFT_LOC);
Tensor zeros(IntArrayRef shape, TensorOptions options = {}, WEFT_LOC);
Tensor ones(IntArrayRef shape, TensorOptions options = {}, WEFT_LOC);
Tensor full(IntArrayRef shape, Scalar value, TensorOptions options = {}, WEFT_LOC);
Tensor zeros_like(const Tensor& t, WEFT_LOC);
Tensor ones_like(const Tensor& t, WEFT_LOC);
Tensor full_like(const Tensor& t, Scalar value, WEFT_LOC);
/// [start, end) in steps of `step`: int64 when every bound is an integer, else float32, unless the
/// options give a dtype.
Tensor arange(Scalar end, TensorOptions options = {}, WEFT_LOC);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = {}, WEFT_LOC);
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {}, WEFT_LOC);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions options = {},
           WEFT_LOC);
/// The row and column indices of the lower (upper) triangle of a row x col matrix, on or below
/// (above) diagonal `offset`: [2, n], int64 unless the options say int32.
Tensor tril_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = {},
                    WEFT_LOC);
Tensor triu_indices(int64_t row, int64_t col, int64_t offset = 0, TensorOptions options = {},
                    WEFT_LOC);
/// A tensor over memory the caller owns (no copy); `deleter` runs when the last view goes.
Tensor from_blob(void* data, IntArrayRef shape, TensorOptions options = {},
                 std::function<void(void*)> deleter = {}, WEFT_LOC);
/// A copy of `values` with `shape` (1-D when empty).
template <typename T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape = {}, WEFT_LOC);
/// 1-D tensors from literals, as torch::tensor({...}): floats become float32, integers int64.
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {}, WEFT_LOC);
Tensor tensor(std::initializer_list<int> values, TensorOptions options = kInt64, WEFT_LOC);
Tensor tensor(std::initializer_list<bool> values, WEFT_LOC);
/// A 0-dim tensor holding `value` (dtype from the scalar unless given).
Tensor scalar_tensor(Scalar value, std::optional<DType> dtype = std::nullopt, WEFT_LOC);

// ---- random numbers (Philox 4x32-10: the same seed draws the same numbers everywhere) ----
/// An explicit random stream: a seed and a counter of draws. Copies share the counter. Inside a
/// compiled function, making, reseeding or moving a generator is redone on every call, as eager
/// code does it.
class Generator {
public:
  explicit Generator(uint64_t seed = 0);
  uint64_t seed() const { return state_->seed; }
  /// Restarts the stream at `seed`.
  void manual_seed(uint64_t seed);
  /// Reserves the next draw: returns the offset it uses.
  uint64_t next_offset() { return state_->offset.fetch_add(1); }
  /// The offset the next draw will use.
  uint64_t offset() const { return state_->offset.load(); }
  /// Moves the stream to `offset`.
  void set_offset(uint64_t offset);
  /// True if both handles are one stream.
  bool operator==(const Generator& other) const { return state_ == other.state_; }

private:
  friend struct TraceContext;
  /// Moves the stream without recording it in a trace (tracing gives back what it drew).
  void setState(uint64_t seed, uint64_t offset) {
    state_->seed.store(seed);
    state_->offset.store(offset);
  }
  struct State {
    explicit State(uint64_t s) : seed(s) {}
    std::atomic<uint64_t> seed;
    std::atomic<uint64_t> offset{0};
  };
  std::shared_ptr<State> state_;
};
/// The process-wide default generator.
Generator& default_generator();
/// Reseeds the default generator.
void manual_seed(uint64_t seed);
Tensor rand(IntArrayRef shape, TensorOptions options = {},
            std::optional<Generator> gen = std::nullopt, WEFT_LOC);
Tensor randn(IntArrayRef shape, TensorOptions options = {},
             std::optional<Generator> gen = std::nullopt, WEFT_LOC);
Tensor randint(int64_t low, int64_t high, IntArrayRef shape, TensorOptions options = kInt64,
               std::optional<Generator> gen = std::nullopt, WEFT_LOC);
/// randint(0, high, shape, ...), as LibTorch's randint(high, size).
Tensor randint(int64_t high, IntArrayRef shape, TensorOptions options = kInt64,
               std::optional<Generator> gen = std::nullopt, WEFT_LOC);
/// 1 with probability p (elementwise), else 0, in p's dtype.
Tensor bernoulli(const Tensor& p, std::optional<Generator> gen = std::nullopt, WEFT_LOC);
Tensor bernoulli(IntArrayRef shape, double p, TensorOptions options = {},
                 std::optional<Generator> gen = std::nullopt, WEFT_LOC);
Tensor randperm(int64_t n, std::optional<Generator> gen = std::nullopt, WEFT_LOC);
/// Tensor::multinomial as a function.
Tensor multinomial(const Tensor& weights, int64_t num_samples, bool replacement = false,
                   std::optional<Generator> gen = std::nullopt, WEFT_LOC);

// ---- elementwise math ----
// One function per unary op and per binary op with a plain API, generated from their rows in the
// op table (weft/runtime/Ops.inc), as the Tensor methods of the same names.
#define WEFT_UNARY(N, s, d, low, k, v) Tensor s(const Tensor& x, WEFT_LOC);
#define WEFT_BINARY(N, s, r, api, low, k, va, vb) WEFT_BINARY_FUNCTION_##api(s)
#define WEFT_BINARY_FUNCTION_Method(s)                                                             \
  Tensor s(const Tensor& a, const Tensor& b, WEFT_LOC);                                            \
  Tensor s(const Tensor& a, Scalar b, WEFT_LOC);
#define WEFT_BINARY_FUNCTION_Custom(s)
#define WEFT_OP(N, s, kind, n, v)
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_BINARY_FUNCTION_Method
#undef WEFT_BINARY_FUNCTION_Custom
#undef WEFT_OP
// The functions of the methods in weft/TensorMethods.inc that have one (weft::name(x, ...)).
#define WEFT_METHOD(name, params, args, forms, ...)                                                \
  WEFT_HAS_FUNCTION_##forms(__VA_ARGS__ name(const Tensor& self, WEFT_PARAMS params WEFT_LOC);)
#define WEFT_FUNCTION(name, params, args, forms, ...)                                              \
  __VA_ARGS__ name(const Tensor& self, WEFT_PARAMS params WEFT_LOC);
#define WEFT_ALIAS(alias, name, params, args, forms, ...)                                          \
  WEFT_METHOD(alias, params, args, forms, __VA_ARGS__)
#define WEFT_IN_PLACE(name, params, args)
#include "weft/TensorMethods.inc"
#undef WEFT_METHOD
#undef WEFT_FUNCTION
#undef WEFT_ALIAS
#undef WEFT_IN_PLACE
Tensor gelu(const Tensor& x, bool tanh_approximation = false, WEFT_LOC);
/// a + alpha * b, a - alpha * b (torch.add, torch.sub).
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1, WEFT_LOC);
Tensor add(const Tensor& a, Scalar b, Scalar alpha = 1, WEFT_LOC);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1, WEFT_LOC);
Tensor sub(const Tensor& a, Scalar b, Scalar alpha = 1, WEFT_LOC);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b, WEFT_LOC);
Tensor where(const Tensor& condition, Scalar a, const Tensor& b, WEFT_LOC);
Tensor where(const Tensor& condition, const Tensor& a, Scalar b, WEFT_LOC);
/// x.triu(diagonal), x.tril(diagonal).
Tensor triu(const Tensor& x, int64_t diagonal = 0, WEFT_LOC);
Tensor tril(const Tensor& x, int64_t diagonal = 0, WEFT_LOC);
/// Elementwise `a` or `b` converted to `dtype`, recorded for autograd.
Tensor cast(const Tensor& x, DType dtype, WEFT_LOC);

// ---- shapes ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0, WEFT_LOC);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0, WEFT_LOC);
/// Constant padding in PyTorch's order: (last-dim left, last-dim right, next-to-last left, ...).
Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, double value = 0.0, WEFT_LOC);
/// The tensors expanded to their common broadcast shape.
std::vector<Tensor> broadcast_tensors(const std::vector<Tensor>& tensors, WEFT_LOC);
/// Coordinate grids of 0-d or 1-D tensors: indexing "ij" (matrix) or "xy" (Cartesian: the first
/// two outputs' dims swapped).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, std::string_view indexing = "ij",
                             WEFT_LOC);
/// `x` with at least 1, 2 or 3 dims (a 1-D [n] as [1, n] and [1, n, 1], a 2-D as [m, n, 1]).
Tensor atleast_1d(const Tensor& x, WEFT_LOC);
Tensor atleast_2d(const Tensor& x, WEFT_LOC);
Tensor atleast_3d(const Tensor& x, WEFT_LOC);
/// cat along dim 1 (dim 0 for 1-D tensors), dim 0 of atleast_2d, dim 2 of atleast_3d; column_stack
/// makes 0-D and 1-D tensors columns first.
Tensor hstack(const std::vector<Tensor>& tensors, WEFT_LOC);
Tensor vstack(const std::vector<Tensor>& tensors, WEFT_LOC);
Tensor row_stack(const std::vector<Tensor>& tensors, WEFT_LOC);
Tensor dstack(const std::vector<Tensor>& tensors, WEFT_LOC);
Tensor column_stack(const std::vector<Tensor>& tensors, WEFT_LOC);
/// The tensors (0-D, 1-D as a row, or 2-D) as the blocks of a block-diagonal matrix.
Tensor block_diag(const std::vector<Tensor>& tensors, WEFT_LOC);
/// Every combination of one element of each 1-D tensor, [n, tensors] (a copy of a lone tensor).
Tensor cartesian_prod(const std::vector<Tensor>& tensors, WEFT_LOC);

// ---- reductions and friends ----
Tensor sum(const Tensor& x, Dims dims = {}, bool keepdim = false, WEFT_LOC);
Tensor mean(const Tensor& x, Dims dims = {}, bool keepdim = false, WEFT_LOC);
Tensor any(const Tensor& x, Dims dims = {}, bool keepdim = false, WEFT_LOC);
Tensor all(const Tensor& x, Dims dims = {}, bool keepdim = false, WEFT_LOC);
Tensor isnan(const Tensor& x, WEFT_LOC);
Tensor isinf(const Tensor& x, WEFT_LOC);
Tensor isfinite(const Tensor& x, WEFT_LOC);
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins = 100,
                                    std::optional<std::pair<double, double>> range = std::nullopt,
                                    const Tensor& weight = {}, bool density = false, WEFT_LOC);
/// The distinct values of x, sorted, and on request each element's index among them (x's shape)
/// and each value's count (empty tensors where not asked for). Eager: compile() runs it on the
/// traced values (the count of results depends on them).
std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse,
                                          bool return_counts = false, WEFT_LOC);
std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse = false,
                                                      bool return_counts = false,
                                                      std::optional<int64_t> dim = std::nullopt,
                                                      WEFT_LOC);
/// The n-th derivative of digamma at x, as torch.polygamma(n, x).
Tensor polygamma(int64_t n, const Tensor& x, WEFT_LOC);
/// (var, mean) and (std, mean) over `dims` (empty: all), as torch.var_mean / torch.std_mean.
std::pair<Tensor, Tensor> var_mean(const Tensor& x, Dims dims = {}, int64_t correction = 1,
                                   bool keepdim = false, WEFT_LOC);
std::pair<Tensor, Tensor> std_mean(const Tensor& x, Dims dims = {}, int64_t correction = 1,
                                   bool keepdim = false, WEFT_LOC);
/// Where each value would be inserted to keep `sorted_sequence` (1-D, or rows matching `values`'
/// leading dims) sorted: before equal boundaries, or after them with `right`. One comparison per
/// value and boundary, so it compiles.
Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32 = false,
                    bool right = false, WEFT_LOC);
/// The bucket of each input value among 1-D `boundaries`: searchsorted(boundaries, input).
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32 = false,
                 bool right = false, WEFT_LOC);
/// Whether each element is among `test_elements` (bool, elements' shape).
Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique = false,
            bool invert = false, WEFT_LOC);
Tensor isin(const Tensor& elements, Scalar test_element, bool assume_unique = false,
            bool invert = false, WEFT_LOC);
/// The trapezoidal rule along `dim`, at sample points `x` or spacing `dx`.
Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim = -1, WEFT_LOC);
Tensor trapezoid(const Tensor& y, Scalar dx = 1, int64_t dim = -1, WEFT_LOC);
Tensor trapz(const Tensor& y, const Tensor& x, int64_t dim = -1, WEFT_LOC);
Tensor trapz(const Tensor& y, double dx = 1, int64_t dim = -1, WEFT_LOC);

// ---- linear algebra, convolution, pooling, indexing ----
/// Contracts `dims_a` of a with `dims_b` of b (or a's last `dims` dims with b's first): a's free
/// dims, then b's.
Tensor tensordot(const Tensor& a, const Tensor& b, const std::vector<int64_t>& dims_a,
                 const std::vector<int64_t>& dims_b, WEFT_LOC);
Tensor tensordot(const Tensor& a, const Tensor& b, int64_t dims = 2, WEFT_LOC);
/// The p-norm distance between each row of x1 [..., P, M] and each of x2 [..., R, M].
Tensor cdist(const Tensor& x1, const Tensor& x2, double p = 2, WEFT_LOC);
/// torch.linalg.cholesky's spelling of cholesky().
Tensor linalg_cholesky(const Tensor& a, bool upper = false, WEFT_LOC);
/// The eigenvalues (ascending, [..., n]) and eigenvectors (columns of [..., n, n]) of each
/// symmetric matrix, from its lower triangle ("L") or upper ("U"), as torch.linalg.eigh;
/// linalg_eigvalsh the eigenvalues alone. float32 and float64. With "L" the eigenvectors' signs
/// are PyTorch's (the same LAPACK call); "U" reads the upper triangle as the transpose's lower, so
/// its eigenvalues are PyTorch's but an eigenvector may have the other sign.
std::pair<Tensor, Tensor> linalg_eigh(const Tensor& a, std::string_view uplo = "L", WEFT_LOC);
Tensor linalg_eigvalsh(const Tensor& a, std::string_view uplo = "L", WEFT_LOC);
/// torch.linalg.qr: mode "reduced" (Q [..., m, k], R [..., k, n]), "r" (R alone, Q empty) or
/// "complete" (where it equals the reduced one: m <= n).
std::pair<Tensor, Tensor> linalg_qr(const Tensor& a, std::string_view mode = "reduced", WEFT_LOC);
/// torch.linalg.svd: U, S (descending) and Vh, through LAPACK's gesdd with PyTorch's signs and
/// gradients. `full_matrices` (PyTorch's default) is supported where it changes nothing (square
/// matrices); pass false for the reduced factors of others.
std::tuple<Tensor, Tensor, Tensor> linalg_svd(const Tensor& a, bool full_matrices = true, WEFT_LOC);
/// The singular values alone.
Tensor linalg_svdvals(const Tensor& a, WEFT_LOC);
/// torch.linalg.pinv: the pseudo-inverse, singular values at or below rtol times the largest
/// counting as 0.
Tensor linalg_pinv(const Tensor& a, std::optional<double> rtol = std::nullopt, WEFT_LOC);
/// X with AX = B, for a batch of square A and B a batch of vectors (one dim fewer than A) or of
/// matrices: inverse(A) @ B.
Tensor linalg_solve(const Tensor& a, const Tensor& b, WEFT_LOC);
/// torch.linalg's norms. vector_norm: ord 2 (default), any other p (a negative one too), inf
/// (the largest |x|), -inf (the smallest) or 0 (how many are not 0), over `dims` (empty: all).
/// matrix_norm over two dims: "fro" (default), "nuc" (sum of singular values), 2 and -2 (largest
/// and smallest), 1 and -1 (largest and smallest column sum of |A|), inf and -inf (row sums).
/// norm: as torch.linalg.norm, a vector norm for one dim (or none and no ord: all elements), a
/// matrix norm for two (or none, an ord and a 2-D input).
Tensor linalg_vector_norm(const Tensor& x, double ord = 2, Dims dims = {}, bool keepdim = false,
                          WEFT_LOC);
Tensor linalg_matrix_norm(const Tensor& a, std::string_view ord = "fro", Dims dims = {-2, -1},
                          bool keepdim = false, WEFT_LOC);
Tensor linalg_matrix_norm(const Tensor& a, double ord, Dims dims = {-2, -1}, bool keepdim = false,
                          WEFT_LOC);
Tensor linalg_norm(const Tensor& x, std::optional<double> ord = std::nullopt, Dims dims = {},
                   bool keepdim = false, WEFT_LOC);
Tensor linalg_norm(const Tensor& x, std::string_view ord, Dims dims = {}, bool keepdim = false,
                   WEFT_LOC);
/// How many singular values (hermitian: |eigenvalues|) exceed max(atol, rtol * the largest), as
/// int64; rtol defaults to the machine epsilon times the larger dimension (0 if an atol above 0
/// is given).
Tensor linalg_matrix_rank(const Tensor& a, std::optional<double> atol = std::nullopt,
                          std::optional<double> rtol = std::nullopt, bool hermitian = false,
                          WEFT_LOC);
/// The condition number: largest over smallest singular value (p none or 2; -2 the inverse), or
/// norm(A, p) * norm(inverse(A), p) for the other matrix norms.
Tensor linalg_cond(const Tensor& a, std::optional<double> p = std::nullopt, WEFT_LOC);
Tensor linalg_cond(const Tensor& a, std::string_view p, WEFT_LOC);
/// X with AX = B (left) or XA = B, A upper or lower triangular (the other triangle is not read,
/// nor the diagonal where `unitriangular`: ones), B a batch of matrices.
Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left = true,
                               bool unitriangular = false, WEFT_LOC);
/// torch.linalg.lstsq's result: the solution, then what the driver reports (each empty where it
/// reports nothing): squared residuals per column, rank, singular values.
struct LstsqResult {
  Tensor solution, residuals, rank, singular_values;
};
/// The least-squares solution of AX = B of least norm (singular values at or below rcond times
/// the largest count as 0; default: the machine epsilon times the larger dimension), with what
/// PyTorch's CPU `driver` reports besides: the rank (not "gels"), the singular values ("gelsd",
/// "gelss") and the residuals (not "gelsy", more rows than columns and full rank only).
LstsqResult linalg_lstsq(const Tensor& a, const Tensor& b,
                         std::optional<double> rcond = std::nullopt,
                         std::string_view driver = "gelsy", WEFT_LOC);
/// The product of a chain of matrices in the order of fewest multiply-adds; the first may be a
/// row vector and the last a column vector (1-D), whose dims the result then drops.
Tensor linalg_multi_dot(const std::vector<Tensor>& tensors, WEFT_LOC);
/// The inverse of `a` as a linear map from its first `ind` dims to the rest, shaped rest + first.
Tensor linalg_tensorinv(const Tensor& a, int64_t ind = 2, WEFT_LOC);
/// X with tensordot(A, X, X.dim()) = B; `dims` of A are moved last first.
Tensor linalg_tensorsolve(const Tensor& a, const Tensor& b, Dims dims = {}, WEFT_LOC);
/// Dot products along `dim`.
Tensor linalg_vecdot(const Tensor& x, const Tensor& y, int64_t dim = -1, WEFT_LOC);
/// torch.linalg's names of inverse, det, slogdet, matrix_power and cross (along dim -1).
Tensor linalg_inv(const Tensor& a, WEFT_LOC);
Tensor linalg_det(const Tensor& a, WEFT_LOC);
std::pair<Tensor, Tensor> linalg_slogdet(const Tensor& a, WEFT_LOC);
Tensor linalg_matrix_power(const Tensor& a, int64_t n, WEFT_LOC);
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim = -1, WEFT_LOC);
/// Tensor::matrix_exp.
Tensor matrix_exp(const Tensor& a, WEFT_LOC);
Tensor linalg_matrix_exp(const Tensor& a, WEFT_LOC);
/// Einstein summation as torch.einsum: "ij,jk->ik", "bhqd,bhkd->bhqk", "...i,...i->...", "ii->i";
/// without "->" the output is the labels used once, in alphabetical order. Contractions run as
/// batched matmuls, one operand pair at a time from the left.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands, WEFT_LOC);
/// N-d convolution on (N, C, L) or (N, C, H, W) with weight (O, C/groups, k...) and optional bias.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, int64_t stride = 1,
              int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, WEFT_LOC);
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
              ExpandingArray stride = {1}, ExpandingArray padding = {0},
              ExpandingArray dilation = {1}, int64_t groups = 1, WEFT_LOC);
/// Transposed convolution with weight (C_in, C_out/groups, k...), as torch.nn.functional.
Tensor conv_transpose1d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                        int64_t groups = 1, int64_t dilation = 1, WEFT_LOC);
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = {},
                        ExpandingArray stride = {1}, ExpandingArray padding = {0},
                        ExpandingArray output_padding = {0}, int64_t groups = 1,
                        ExpandingArray dilation = {1}, WEFT_LOC);
Tensor max_pool1d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0,
                  int64_t dilation = 1, bool ceil_mode = false, WEFT_LOC);
Tensor max_pool2d(const Tensor& x, ExpandingArray kernel_size, ExpandingArray stride = {},
                  ExpandingArray padding = {0}, ExpandingArray dilation = {1},
                  bool ceil_mode = false, WEFT_LOC);
Tensor avg_pool1d(const Tensor& x, int64_t kernel_size,
                  std::optional<int64_t> stride = std::nullopt, int64_t padding = 0, WEFT_LOC);
/// Average pooling; padded zeros count in the divisor (count_include_pad=true, PyTorch's default).
Tensor avg_pool2d(const Tensor& x, ExpandingArray kernel_size, ExpandingArray stride = {},
                  ExpandingArray padding = {0}, WEFT_LOC);
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src,
                      std::string_view reduce, bool include_self = true, WEFT_LOC);
Tensor index_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                    std::string_view reduce, bool include_self = true, WEFT_LOC);
/// `index` (int64) checked against dimension `dim` (-1: a flattened tensor) of `size`, eagerly and
/// compiled alike (the check_index op): an index out of bounds is an IndexError naming `op`, the
/// index and the size; with `wrap`, negative indices count from the end and come back in
/// [0, size). For composites that index, so that their errors name them.
Tensor check_index(const Tensor& index, int64_t size, int64_t dim, bool wrap, const char* op);
/// Rows of `weight` picked by integer `indices`: shape indices.shape + [embedding_dim].
Tensor embedding(const Tensor& weight, const Tensor& indices, WEFT_LOC);
/// int64 one-hot encoding with `num_classes` (-1: max index + 1).
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1, WEFT_LOC);

} // namespace weft
