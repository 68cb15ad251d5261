// torch.linalg's functions built from the factorizations and products: vector, matrix and general
// norms, rank, condition number, triangular and least-squares solves, multi_dot, tensorinv,
// tensorsolve and vecdot, and torch.linalg's names of the older functions. Each is a composite
// of traced ops, so it compiles and differentiates through its parts.
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"

#include <cmath>
#include <functional>
#include <limits>

namespace weft {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void checkFloatMatrices(const Tensor& a, const char* op) {
  WEFT_CHECK(a.defined(), Value, op, ": called with an undefined tensor");
  WEFT_CHECK(a.dim() >= 2, Shape, op, ": the input must have at least 2 dimensions, got ",
             shapeString(a.sizes()));
  WEFT_CHECK(a.dtype() == DType::Float32 || a.dtype() == DType::Float64, DType, op,
             ": expected a float32 or float64 input, got ", dtypeName(a.dtype()));
}

/// The two distinct dims a matrix norm reduces, wrapped.
std::pair<int64_t, int64_t> matrixDims(const Tensor& a, const Dims& dims, const char* op) {
  WEFT_CHECK(dims.size() == 2, Value, op, ": dim must be a 2-tuple, got ", dims.size(), " dims");
  const int64_t d0 = wrapDim(dims[0], a.dim(), op), d1 = wrapDim(dims[1], a.dim(), op);
  WEFT_CHECK(d0 != d1, Value, op, ": dims must be different, got (", dims[0], ", ", dims[1], ")");
  return {d0, d1};
}

/// Singular values of the matrices `a` holds in dims d0, d1 (moved last).
Tensor singularValuesOver(const Tensor& a, int64_t d0, int64_t d1) {
  return linalg_svdvals(a.movedim({d0, d1}, {-2, -1}));
}

/// `r`, reduced over dims d0 and d1 of its input, with those dims back as 1s where `keepdim`.
Tensor keepDims(Tensor r, int64_t d0, int64_t d1, bool keepdim) {
  if (!keepdim) return r;
  return r.unsqueeze(std::min(d0, d1)).unsqueeze(std::max(d0, d1));
}

/// A's triangle that a triangular solve reads: upper or lower, with ones on the diagonal where
/// `unitriangular` (the diagonal is then not read).
Tensor triangleOf(const Tensor& a, bool upper, bool unitriangular) {
  if (!unitriangular) return upper ? a.triu() : a.tril();
  return (upper ? a.triu(1) : a.tril(-1)) +
         eye(a.size(-1), std::nullopt, TensorOptions(a.dtype()).device(a.device()));
}

} // namespace

Tensor linalg_vector_norm(const Tensor& x, double ord, Dims dims, bool keepdim,
                          std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "linalg.vector_norm: called with an undefined tensor");
  WEFT_CHECK(isFloating(x.dtype()), DType,
             "linalg.vector_norm: expected a floating-point input, got ", dtypeName(x.dtype()));
  WEFT_CHECK(!std::isnan(ord), Value, "linalg.vector_norm: ord must not be NaN");
  if (std::isinf(ord) || ord < 0) {
    // No identity to start from: an empty reduction is an error, as PyTorch's.
    bool empty = x.numel() == 0 && dims.empty();
    for (int64_t d : dims)
      empty = empty || x.size(wrapDim(d, x.dim(), "linalg.vector_norm")) == 0;
    WEFT_CHECK(!empty, Value, "linalg.vector_norm cannot compute the ", ord,
               " norm on an empty tensor because the operation does not have an identity");
  }
  if (ord == -kInf) return x.abs().amin(std::move(dims), keepdim);
  if (ord == 0) return cast(x.ne(0), x.dtype()).sum(std::move(dims), keepdim);
  if (ord > 0) return x.norm(ord, std::move(dims), keepdim);
  // A negative order: a zero element makes its sum infinite and the norm 0, as PyTorch, with
  // gradient 0 for the whole slice (PyTorch's norm^(1 - ord) factor), not 0 * inf.
  Tensor a = x.abs(), zero = a.eq(0);
  Tensor norm = where(zero, ones_like(a), a).pow(ord).sum(dims, keepdim).pow(1.0 / ord);
  Tensor exact = a.detach().pow(ord).sum(dims, keepdim).pow(1.0 / ord); // NaNs included
  return where(zero.any(std::move(dims), keepdim), exact, norm);
}

Tensor linalg_matrix_norm(const Tensor& a, double ord, Dims dims, bool keepdim,
                          std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.matrix_norm");
  auto [d0, d1] = matrixDims(a, dims, "linalg.matrix_norm");
  if (ord == 2 || ord == -2) {
    Tensor s = singularValuesOver(a, d0, d1);
    return keepDims(ord > 0 ? s.amax({-1}) : s.amin({-1}), d0, d1, keepdim);
  }
  WEFT_CHECK(ord == 1 || ord == -1 || std::isinf(ord), Value, "linalg.matrix_norm: Order ", ord,
             " not supported (1, -1, 2, -2, inf or -inf)");
  // 1: the largest column sum of |A| (summed over d0, the largest over d1); inf: of the rows.
  const bool columns = ord == 1 || ord == -1;
  Tensor sums = a.abs().sum({columns ? d0 : d1}, true);
  Tensor r = ord > 0 ? sums.amax({columns ? d1 : d0}, true) : sums.amin({columns ? d1 : d0}, true);
  return keepdim ? r : r.squeeze(std::max(d0, d1)).squeeze(std::min(d0, d1));
}

Tensor linalg_matrix_norm(const Tensor& a, std::string_view ord, Dims dims, bool keepdim,
                          std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.matrix_norm");
  auto [d0, d1] = matrixDims(a, dims, "linalg.matrix_norm");
  WEFT_CHECK(ord == "fro" || ord == "nuc", Value, "linalg.matrix_norm: Order ", ord,
             " not supported ('fro' or 'nuc')");
  if (ord == "fro") return linalg_vector_norm(a, 2, {d0, d1}, keepdim);
  return keepDims(singularValuesOver(a, d0, d1).sum({-1}), d0, d1, keepdim);
}

Tensor linalg_norm(const Tensor& x, std::optional<double> ord, Dims dims, bool keepdim,
                   std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "linalg.norm: called with an undefined tensor");
  WEFT_CHECK(dims.size() <= 2, Value,
             "linalg.norm: If dim is specified, it must be of length 1 or 2. Got ", dims.size(),
             " dims");
  if (dims.size() == 2)
    return ord ? linalg_matrix_norm(x, *ord, std::move(dims), keepdim)
               : linalg_matrix_norm(x, "fro", std::move(dims), keepdim);
  if (!dims.empty() || !ord)
    return linalg_vector_norm(x, ord.value_or(2), std::move(dims), keepdim);
  WEFT_CHECK(x.dim() == 1 || x.dim() == 2, Value,
             "linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got ",
             x.dim(), "D");
  return x.dim() == 1 ? linalg_vector_norm(x, *ord, {}, keepdim)
                      : linalg_matrix_norm(x, *ord, {-2, -1}, keepdim);
}

Tensor linalg_norm(const Tensor& x, std::string_view ord, Dims dims, bool keepdim,
                   std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "linalg.norm: called with an undefined tensor");
  WEFT_CHECK(dims.size() == 2 || (dims.empty() && x.dim() == 2), Value, "linalg.norm: ord '", ord,
             "' needs a 2-D input or two dims, got a ", x.dim(), "-D input and ", dims.size(),
             " dims");
  return linalg_matrix_norm(x, ord, dims.empty() ? Dims{-2, -1} : std::move(dims), keepdim);
}

Tensor linalg_matrix_rank(const Tensor& a, std::optional<double> atol, std::optional<double> rtol,
                          bool hermitian, std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.matrix_rank");
  Tensor s = hermitian ? linalg_eigvalsh(a).abs() : linalg_svdvals(a);
  // PyTorch's tolerance: max(atol, rtol * largest singular value); rtol defaults to the machine
  // epsilon times the larger dimension, or to 0 where only atol is given.
  const double r =
      rtol.value_or(atol && *atol > 0 ? 0.0
                                      : machineEpsilon(a.dtype()) *
                                            static_cast<double>(std::max(a.size(-2), a.size(-1))));
  Tensor tol = s.numel() == 0 ? zeros({}, a.dtype()) : s.amax({-1}, true) * r;
  tol = tol.maximum(full({}, atol.value_or(0.0), a.dtype()));
  return cast(s.gt(tol), DType::Int64).sum({-1});
}

Tensor linalg_cond(const Tensor& a, std::optional<double> p, std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.cond");
  if (!p || *p == 2 || *p == -2) {
    Tensor s = linalg_svdvals(a), big = s.amax({-1}), small = s.amin({-1});
    return !p || *p == 2 ? big / small : small / big;
  }
  return linalg_matrix_norm(a, *p) * linalg_matrix_norm(a.inverse(), *p);
}

Tensor linalg_cond(const Tensor& a, std::string_view p, std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.cond");
  return linalg_matrix_norm(a, p) * linalg_matrix_norm(a.inverse(), p);
}

Tensor linalg_solve_triangular(const Tensor& a, const Tensor& b, bool upper, bool left,
                               bool unitriangular, std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.solve_triangular");
  WEFT_CHECK(b.defined() && b.dim() >= 2, Shape,
             "linalg.solve_triangular: B must have at least 2 dimensions");
  WEFT_CHECK(a.size(-1) == a.size(-2), Shape,
             "linalg.solve_triangular: A must be batches of square matrices, got ",
             shapeString(a.sizes()));
  WEFT_CHECK(b.size(left ? -2 : -1) == a.size(-1), Shape,
             "linalg.solve_triangular: incompatible shapes of A and B for the equation ",
             left ? "AX = B (" : "XA = B (", shapeString(a.sizes()), " and ",
             shapeString(b.sizes()), ")");
  // Through the inverse of A's triangle: the gradient reaches that triangle alone, as PyTorch's.
  Tensor inv = triangleOf(a, upper, unitriangular).inverse();
  return left ? inv.matmul(b) : b.matmul(inv);
}

std::pair<Tensor, Tensor> Tensor::triangular_solve(const Tensor& a, bool upper, bool transpose,
                                                   bool unitriangular,
                                                   std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("triangular_solve");
  checkFloatMatrices(a, "triangular_solve");
  WEFT_CHECK(dim() >= 2 && size(-2) == a.size(-1) && a.size(-1) == a.size(-2), Shape,
             "triangular_solve: incompatible shapes of A and b (", shapeString(a.sizes()), " and ",
             shapeString(sizes()), ")");
  Tensor t = triangleOf(a, upper, unitriangular);
  return {(transpose ? t.mT() : t).inverse().matmul(*this), a.clone()};
}

LstsqResult linalg_lstsq(const Tensor& a, const Tensor& b, std::optional<double> rcond,
                         std::string_view driver, std::source_location loc) {
  CallSite cs(loc);
  checkFloatMatrices(a, "linalg.lstsq");
  WEFT_CHECK(driver == "gelsy" || driver == "gelsd" || driver == "gelss" || driver == "gels", Value,
             "linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  WEFT_CHECK(b.defined() && b.dim() >= 2 && b.size(-2) == a.size(-2), Shape,
             "linalg.lstsq: B must be batches of matrices with as many rows as A (",
             shapeString(a.sizes()), " and ", shapeString(b.defined() ? b.sizes() : Shape{}), ")");
  WEFT_CHECK(b.dtype() == a.dtype(), DType, "linalg.lstsq: A and B must have the same dtype, got ",
             dtypeName(a.dtype()), " and ", dtypeName(b.dtype()));
  const int64_t m = a.size(-2), n = a.size(-1);
  const double tol =
      rcond.value_or(machineEpsilon(a.dtype()) * static_cast<double>(std::max(m, n)));
  // The least-squares solution of least norm, which every driver gives for a matrix of full rank
  // and gelsy, gelsd and gelss for any (gels assumes full rank).
  LstsqResult r;
  r.solution = linalg_pinv(a, tol).matmul(b);
  // What each driver reports, as PyTorch's CPU drivers: the rank (not gels), the singular values
  // (gelsd, gelss), the squared residuals per column where there are more rows than columns and
  // every matrix has full rank (not gelsy).
  r.rank = driver == "gels" ? zeros({0}, DType::Int64) : linalg_matrix_rank(a, std::nullopt, tol);
  r.singular_values =
      driver == "gelsd" || driver == "gelss" ? linalg_svdvals(a) : zeros({0}, a.dtype());
  r.residuals = zeros({0}, a.dtype());
  if (m > n && driver != "gelsy") {
    Tensor rank = r.rank.numel() > 0 ? r.rank : linalg_matrix_rank(a, std::nullopt, tol);
    if (readValue(rank.eq(n).all(), "linalg.lstsq's residuals").item<bool>())
      r.residuals = (a.matmul(r.solution) - b).square().sum({-2});
  }
  return r;
}

Tensor linalg_multi_dot(const std::vector<Tensor>& tensors, std::source_location loc) {
  CallSite cs(loc);
  const size_t n = tensors.size();
  WEFT_CHECK(n >= 2, Value, "multi_dot(): expected at least 2 tensors but got ", n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = tensors[i];
    WEFT_CHECK(t.defined(), Value, "multi_dot(): tensor ", i, " is undefined");
    const bool end = i == 0 || i + 1 == n;
    WEFT_CHECK(t.dim() == 2 || (end && t.dim() == 1), Shape, "multi_dot(): tensor ", i,
               " must be 2D", end ? " or 1D" : "", " but got ", t.dim(), "D");
  }
  // The first as a row and the last as a column where they are vectors, dropped again at the end.
  std::vector<Tensor> m(tensors);
  if (m.front().dim() == 1) m.front() = m.front().unsqueeze(0);
  if (m.back().dim() == 1) m.back() = m.back().unsqueeze(1);
  std::vector<int64_t> p{m[0].size(0)}; // matrix i is p[i] x p[i + 1]
  for (size_t i = 0; i < n; ++i) {
    WEFT_CHECK(m[i].size(0) == p.back(), Shape, "multi_dot(): tensors ", i - 1, " and ", i,
               " with shapes ", shapeString(tensors[i - 1].sizes()), " and ",
               shapeString(tensors[i].sizes()), " cannot be multiplied");
    p.push_back(m[i].size(1));
  }
  // The order of fewest multiply-adds (the textbook dynamic program over chain lengths).
  std::vector<std::vector<double>> cost(n, std::vector<double>(n, 0));
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      const size_t j = i + len;
      cost[i][j] = std::numeric_limits<double>::infinity();
      for (size_t k = i; k < j; ++k) {
        const double c = cost[i][k] + cost[k + 1][j] +
                         static_cast<double>(p[i]) * static_cast<double>(p[k + 1]) *
                             static_cast<double>(p[j + 1]);
        if (c < cost[i][j]) {
          cost[i][j] = c;
          split[i][j] = k;
        }
      }
    }
  std::function<Tensor(size_t, size_t)> product = [&](size_t i, size_t j) {
    return i == j ? m[i] : product(i, split[i][j]).matmul(product(split[i][j] + 1, j));
  };
  Tensor r = product(0, n - 1);
  if (tensors.back().dim() == 1) r = r.squeeze(1);
  if (tensors.front().dim() == 1) r = r.squeeze(0);
  return r;
}

Tensor linalg_tensorinv(const Tensor& a, int64_t ind, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "linalg.tensorinv: called with an undefined tensor");
  WEFT_CHECK(ind > 0 && ind <= a.dim(), Value,
             "linalg.tensorinv: Expected a strictly positive integer for 'ind' of at most the "
             "input's ",
             a.dim(), " dims, but got ", ind);
  const Shape& s = a.sizes();
  Shape rows(s.begin(), s.begin() + ind), cols(s.begin() + ind, s.end());
  WEFT_CHECK(numel(rows) == numel(cols), Value,
             "linalg.tensorinv: Expected self to satisfy the requirement "
             "prod(self.shape[ind:]) == prod(self.shape[:ind]), but got ",
             numel(cols), " != ", numel(rows));
  Shape out = cols;
  out.insert(out.end(), rows.begin(), rows.end());
  return a.reshape({numel(rows), numel(cols)}).inverse().reshape(out);
}

Tensor linalg_tensorsolve(const Tensor& a, const Tensor& b, Dims dims, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value,
             "linalg.tensorsolve: called with an undefined tensor");
  Tensor x = a;
  if (!dims.empty()) { // those dims of A go last
    Shape to;
    for (size_t i = 0; i < dims.size(); ++i)
      to.push_back(a.dim() - static_cast<int64_t>(dims.size() - i));
    x = a.movedim(dims, to);
  }
  WEFT_CHECK(x.dim() >= b.dim() &&
                 Shape(x.sizes().begin(), x.sizes().begin() + b.dim()) == b.sizes(),
             Shape, "linalg.tensorsolve: A's leading dims must be B's shape, got ",
             shapeString(x.sizes()), " and ", shapeString(b.sizes()));
  Shape rest(x.sizes().begin() + b.dim(), x.sizes().end());
  WEFT_CHECK(numel(rest) == b.numel(), Value,
             "linalg.tensorsolve: Expected self to satisfy the requirement "
             "prod(self.shape[other.ndim:]) == prod(self.shape[:other.ndim]), but got ",
             numel(rest), " != ", b.numel());
  return linalg_solve(x.reshape({b.numel(), numel(rest)}), b.reshape({-1})).reshape(rest);
}

Tensor linalg_vecdot(const Tensor& x, const Tensor& y, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && y.defined(), Value, "linalg.vecdot: called with an undefined tensor");
  return (x * y).sum({dim});
}

Tensor Tensor::matrix_exp(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("matrix_exp");
  checkFloatMatrices(*this, "matrix_exp");
  WEFT_CHECK(size(-1) == size(-2), Shape, "matrix_exp: expected a tensor of square matrices, got ",
             shapeString(sizes()));
  const int64_t n = size(-1);
  if (numel() == 0) return clone();
  // Higham's scaling and squaring with the [13/13] Pade approximant: A / 2^s has a 1-norm of at
  // most theta_13, exp(A) = r(A / 2^s)^(2^s). One s for the whole batch (its largest norm).
  const double theta13 = 5.371920351148152;
  const double norm =
      readValue(linalg_matrix_norm(*this, 1.0).amax(), "matrix_exp's scaling").item<double>();
  if (!std::isfinite(norm)) return *this * std::nan(""); // NaN throughout, as PyTorch's
  const int s = norm > theta13 ? static_cast<int>(std::ceil(std::log2(norm / theta13))) : 0;
  Tensor a = s > 0 ? *this / std::ldexp(1.0, s) : *this;
  // The approximant's coefficients, c_0 = 1, c_{j+1} = c_j (m - j) / ((2m - j)(j + 1)), m = 13;
  // p(A) = sum c_j A^j, q(A) = p(-A) = V - U with U the odd terms and V the even ones.
  double c[14];
  c[0] = 1;
  for (int j = 0; j < 13; ++j)
    c[j + 1] = c[j] * (13.0 - j) / ((26.0 - j) * (j + 1.0));
  Tensor id = eye(n, std::nullopt, TensorOptions(dtype()).device(device()));
  Tensor a2 = a.matmul(a), a4 = a2.matmul(a2), a6 = a4.matmul(a2);
  Tensor u = a.matmul(a6.matmul(a6 * c[13] + a4 * c[11] + a2 * c[9]) + a6 * c[7] + a4 * c[5] +
                      a2 * c[3] + id * c[1]);
  Tensor v = a6.matmul(a6 * c[12] + a4 * c[10] + a2 * c[8]) + a6 * c[6] + a4 * c[4] + a2 * c[2] +
             id * c[0];
  Tensor r = linalg_solve(v - u, v + u);
  for (int i = 0; i < s; ++i)
    r = r.matmul(r);
  return r;
}
Tensor matrix_exp(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined(), Value, "matrix_exp: called with an undefined tensor");
  return a.matrix_exp();
}
Tensor linalg_matrix_exp(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  return matrix_exp(a);
}

// torch.linalg's names of functions weft has under their older names.
Tensor linalg_inv(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  return inverse(a);
}
Tensor linalg_det(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  return det(a);
}
std::pair<Tensor, Tensor> linalg_slogdet(const Tensor& a, std::source_location loc) {
  CallSite cs(loc);
  return slogdet(a);
}
Tensor linalg_matrix_power(const Tensor& a, int64_t n, std::source_location loc) {
  CallSite cs(loc);
  return matrix_power(a, n);
}
Tensor linalg_cross(const Tensor& a, const Tensor& b, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return cross(a, b, dim);
}

} // namespace weft
