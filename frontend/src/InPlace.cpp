// In-place forms of methods computed out of place (x.sinc_() writes x.sinc() into x), random fills
// of other distributions, and fill_diagonal_. Each goes through the same write as the op table's
// in-place forms (assignInPlace): shape and dtype checked, the version bumped, the autograd
// history taken over, and inside compile() a traced assignment.
#include "InPlace.h"

#include "weft/Functions.h"

#include <cmath>
#include <numbers>
#include <utility>

namespace weft {
namespace {

/// self = f(self): `f` computes from inPlaceSource(self, other) (a recorded copy where autograd
/// records the op, so its node never saves memory the write overwrites).
template <typename F>
Tensor& inPlace(Tensor& self, const char* op, F&& f, const Tensor& other = {}) {
  WEFT_CHECK(self.defined(), Value, op, ": called on an undefined tensor");
  return assignInPlace(self, f(inPlaceSource(self, other)), op);
}

/// Checks that `self` is a floating tensor for a random fill `op`.
void checkFloating(const Tensor& self, const char* op) {
  WEFT_CHECK(self.defined(), Value, op, ": called on an undefined tensor");
  WEFT_CHECK(self.is_floating_point(), DType, op, ": expected a floating tensor, got ",
             dtypeName(self.dtype()));
}

/// float_power computes in float64: only a float64 tensor holds its result.
void checkFloat64Base(const Tensor& self) {
  WEFT_CHECK(!self.defined() || self.dtype() == DType::Float64, DType,
             "the base given to float_power_ has dtype ", dtypeName(self.dtype()),
             " but the operation's result requires dtype float64");
}

/// The largest count an integral `dtype` holds (geometric_'s draws are clamped to it).
double largestCount(DType dtype) {
  // int64's, rounded down to a double (rounding to nearest would give 2^63, past it).
  return dtype == DType::Int64 ? std::nextafter(0x1p63, 0.0)
                               : static_cast<double>(highestInteger(dtype));
}

/// Uniform samples on [0, 1) of `self`'s shape, in its dtype where floating (else float64, which
/// holds every integer a random fill of an integer tensor draws).
Tensor uniformLike(const Tensor& self) {
  return rand(self.sizes(), self.is_floating_point() ? self.dtype() : DType::Float64);
}

} // namespace

Tensor& Tensor::cauchy_(double median, double sigma, std::source_location loc) {
  CallSite cs(loc);
  checkFloating(*this, "cauchy_");
  WEFT_CHECK(sigma > 0, Value, "cauchy_: expects sigma > 0.0, but found sigma=", sigma);
  return copy_((uniformLike(*this) - 0.5).mul(std::numbers::pi).tan() * sigma + median);
}

Tensor& Tensor::exponential_(double lambd, std::source_location loc) {
  CallSite cs(loc);
  checkFloating(*this, "exponential_");
  WEFT_CHECK(lambd > 0, Value, "exponential_: expects lambda > 0.0, but found lambda=", lambd);
  return copy_(uniformLike(*this).neg().log1p() * (-1.0 / lambd)); // u in [0, 1): finite
}

Tensor& Tensor::log_normal_(double mean, double std, std::source_location loc) {
  CallSite cs(loc);
  checkFloating(*this, "log_normal_");
  WEFT_CHECK(std > 0, Value, "log_normal_: expects std > 0.0, but found std=", std);
  return copy_((randn(sizes(), dtype()) * std + mean).exp());
}

Tensor& Tensor::geometric_(double p, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "geometric_: called on an undefined tensor");
  WEFT_CHECK(p > 0 && p < 1, Value, "geometric_: p must be in (0, 1), got ", p);
  WEFT_CHECK(dtype() != DType::Bool, DType, "geometric_: not implemented for bool tensors");
  // Trials to the first success: ceil(log(1 - u) / log(1 - p)), at least 1 (u in [0, 1)).
  Tensor trials = (uniformLike(*this).neg().log1p() / std::log1p(-p)).ceil().clamp_min(1.0);
  // An integer tensor holds at most its type's largest count (a tiny p draws beyond it).
  if (!is_floating_point()) trials = trials.clamp_max(largestCount(dtype()));
  return copy_(trials);
}

Tensor& Tensor::random_(int64_t from, int64_t to, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "random_: called on an undefined tensor");
  WEFT_CHECK(from < to, Value, "random_ expects 'from' to be less than 'to', but got from=", from,
             " >= to=", to);
  // fitsDType takes any value for bool (as a fill converts it): a draw is 0 or 1.
  const bool inRange = dtype() == DType::Bool ? from >= 0 && to <= 2
                                              : fitsDType(static_cast<double>(from), dtype()) &&
                                                    fitsDType(static_cast<double>(to - 1), dtype());
  WEFT_CHECK(is_floating_point() || inRange, Value, "random_ expects 'from' and 'to - 1' within ",
             dtypeName(dtype()), "'s range, got from=", from, " to=", to);
  // floor(u * (to - from)) + from in float64 (exact for ranges up to 2^53), clamped below `to`
  // against rounding at the top.
  Tensor u = rand(sizes(), DType::Float64);
  const auto span = static_cast<double>(to) - static_cast<double>(from);
  Tensor drawn = (u * span).floor().add(static_cast<double>(from));
  return copy_(drawn.clamp_max(static_cast<double>(to - 1)));
}

Tensor& Tensor::random_(int64_t to, std::source_location loc) {
  return random_(0, to, loc);
}

Tensor& Tensor::fill_diagonal_(Scalar value, bool wrap, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "fill_diagonal_: called on an undefined tensor");
  const Shape& s = sizes();
  WEFT_CHECK(s.size() >= 2, Shape, "fill_diagonal_: dimensions must larger than 1");
  if (s.size() > 2)
    for (int64_t d : s)
      WEFT_CHECK(d == s[0], Shape,
                 "fill_diagonal_: all dimensions of input must be of equal length");
  // Element (i, i, ..., i) of the row-major layout lies at i * step; a matrix's diagonal ends at
  // min(rows, cols) elements, or with `wrap` runs on through every step of a tall matrix.
  int64_t step = 0, unit = 1;
  for (size_t d = s.size(); d-- > 0;) {
    step += unit;
    unit *= s[d];
  }
  const int64_t n = numel();
  int64_t limit = std::min(s[0], s[1]) * step;
  if (wrap && s.size() == 2 && s[0] > s[1]) limit = n;
  Tensor position = arange(n, DType::Int64);
  Tensor mask = position.remainder(step).eq(0).logical_and(position.lt(limit)).reshape(s);
  return masked_fill_(mask, value);
}

Tensor& Tensor::absolute_(std::source_location loc) {
  CallSite cs(loc);
  return abs_();
}
Tensor& Tensor::negative_(std::source_location loc) {
  CallSite cs(loc);
  return neg_();
}
Tensor& Tensor::sgn_(std::source_location loc) {
  CallSite cs(loc);
  return sign_();
}
Tensor& Tensor::fix_(std::source_location loc) {
  CallSite cs(loc);
  return trunc_();
}
Tensor& Tensor::arccos_(std::source_location loc) {
  CallSite cs(loc);
  return acos_();
}
Tensor& Tensor::arcsin_(std::source_location loc) {
  CallSite cs(loc);
  return asin_();
}
Tensor& Tensor::arctan_(std::source_location loc) {
  CallSite cs(loc);
  return atan_();
}
Tensor& Tensor::arccosh_(std::source_location loc) {
  CallSite cs(loc);
  return acosh_();
}
Tensor& Tensor::arcsinh_(std::source_location loc) {
  CallSite cs(loc);
  return asinh_();
}
Tensor& Tensor::arctanh_(std::source_location loc) {
  CallSite cs(loc);
  return atanh_();
}
Tensor& Tensor::conj_physical_(std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "conj_physical_: called on an undefined tensor");
  return *this; // real tensors are their own conjugate
}
Tensor& Tensor::square_(std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "square_", [](const Tensor& x) { return x.square(); });
}
Tensor& Tensor::frac_(std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "frac_", [](const Tensor& x) { return x.frac(); });
}
Tensor& Tensor::sinc_(std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "sinc_", [](const Tensor& x) { return x.sinc(); });
}
Tensor& Tensor::deg2rad_(std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "deg2rad_", [](const Tensor& x) { return x.deg2rad(); });
}
Tensor& Tensor::rad2deg_(std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "rad2deg_", [](const Tensor& x) { return x.rad2deg(); });
}
Tensor& Tensor::logit_(std::optional<double> eps, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "logit_", [&](const Tensor& x) { return x.logit(eps); });
}
Tensor& Tensor::nan_to_num_(std::optional<double> nan, std::optional<double> posinf,
                            std::optional<double> neginf, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "nan_to_num_",
                 [&](const Tensor& x) { return x.nan_to_num(nan, posinf, neginf); });
}
Tensor& Tensor::polygamma_(int64_t n, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "polygamma_", [&](const Tensor& x) { return x.polygamma(n); });
}
Tensor& Tensor::mvlgamma_(int64_t p, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "mvlgamma_", [&](const Tensor& x) { return x.mvlgamma(p); });
}
Tensor& Tensor::clip_(std::optional<Scalar> min, std::optional<Scalar> max,
                      std::source_location loc) {
  CallSite cs(loc);
  return clamp_(min, max);
}
Tensor& Tensor::renorm_(double p, int64_t dim, double maxnorm, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "renorm_", [&](const Tensor& x) { return x.renorm(p, dim, maxnorm); });
}
Tensor& Tensor::cumsum_(int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "cumsum_", [&](const Tensor& x) { return x.cumsum(dim); });
}
Tensor& Tensor::cumprod_(int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "cumprod_", [&](const Tensor& x) { return x.cumprod(dim); });
}
Tensor& Tensor::tril_(int64_t diagonal, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "tril_", [&](const Tensor& x) { return x.tril(diagonal); });
}
Tensor& Tensor::triu_(int64_t diagonal, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "triu_", [&](const Tensor& x) { return x.triu(diagonal); });
}

// Comparisons and logical ops: the bool result written as 1 or 0 in this tensor's dtype.
#define WEFT_IN_PLACE_BINARY(name, call)                                                           \
  Tensor& Tensor::name##_(const Tensor& other, std::source_location loc) {                         \
    CallSite cs(loc);                                                                              \
    return inPlace(                                                                                \
        *this, #name "_", [&](const Tensor& x) { return x.call(other); }, other);                  \
  }
#define WEFT_IN_PLACE_BINARY_SCALAR(name, call)                                                    \
  WEFT_IN_PLACE_BINARY(name, call)                                                                 \
  Tensor& Tensor::name##_(Scalar other, std::source_location loc) {                                \
    CallSite cs(loc);                                                                              \
    return inPlace(*this, #name "_", [&](const Tensor& x) { return x.call(other); });              \
  }
WEFT_IN_PLACE_BINARY_SCALAR(eq, eq)
WEFT_IN_PLACE_BINARY_SCALAR(ne, ne)
WEFT_IN_PLACE_BINARY_SCALAR(lt, lt)
WEFT_IN_PLACE_BINARY_SCALAR(le, le)
WEFT_IN_PLACE_BINARY_SCALAR(gt, gt)
WEFT_IN_PLACE_BINARY_SCALAR(ge, ge)
WEFT_IN_PLACE_BINARY_SCALAR(greater, gt)
WEFT_IN_PLACE_BINARY_SCALAR(greater_equal, ge)
WEFT_IN_PLACE_BINARY_SCALAR(less, lt)
WEFT_IN_PLACE_BINARY_SCALAR(less_equal, le)
WEFT_IN_PLACE_BINARY_SCALAR(not_equal, ne)
WEFT_IN_PLACE_BINARY_SCALAR(copysign, copysign)
WEFT_IN_PLACE_BINARY(logical_and, logical_and)
WEFT_IN_PLACE_BINARY(logical_or, logical_or)
WEFT_IN_PLACE_BINARY(logical_xor, logical_xor)
WEFT_IN_PLACE_BINARY(atan2, atan2)
WEFT_IN_PLACE_BINARY(arctan2, atan2)
WEFT_IN_PLACE_BINARY(hypot, hypot)
WEFT_IN_PLACE_BINARY(ldexp, ldexp)
WEFT_IN_PLACE_BINARY(xlogy, xlogy)
WEFT_IN_PLACE_BINARY(heaviside, heaviside)
#undef WEFT_IN_PLACE_BINARY_SCALAR
#undef WEFT_IN_PLACE_BINARY

Tensor& Tensor::float_power_(const Tensor& exponent, std::source_location loc) {
  CallSite cs(loc);
  checkFloat64Base(*this);
  return inPlace(
      *this, "float_power_", [&](const Tensor& x) { return x.float_power(exponent); }, exponent);
}
Tensor& Tensor::float_power_(Scalar exponent, std::source_location loc) {
  CallSite cs(loc);
  checkFloat64Base(*this);
  return inPlace(*this, "float_power_", [&](const Tensor& x) { return x.float_power(exponent); });
}

Tensor& Tensor::true_divide_(const Tensor& other, std::source_location loc) {
  CallSite cs(loc);
  return div_(other);
}
Tensor& Tensor::true_divide_(Scalar other, std::source_location loc) {
  CallSite cs(loc);
  return div_(other);
}
Tensor& Tensor::divide_(const Tensor& other, std::source_location loc) {
  CallSite cs(loc);
  return div_(other);
}
Tensor& Tensor::divide_(Scalar other, std::source_location loc) {
  CallSite cs(loc);
  return div_(other);
}
Tensor& Tensor::multiply_(const Tensor& other, std::source_location loc) {
  CallSite cs(loc);
  return mul_(other);
}
Tensor& Tensor::multiply_(Scalar other, std::source_location loc) {
  CallSite cs(loc);
  return mul_(other);
}
Tensor& Tensor::subtract_(const Tensor& other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  return sub_(other, alpha);
}
Tensor& Tensor::subtract_(Scalar other, Scalar alpha, std::source_location loc) {
  CallSite cs(loc);
  return inPlace(*this, "subtract_", [&](const Tensor& x) { return x.sub(other, alpha); });
}

Tensor& Tensor::addmm_(const Tensor& mat1, const Tensor& mat2, Scalar beta, Scalar alpha,
                       std::source_location loc) {
  CallSite cs(loc);
  return inPlace(
      *this, "addmm_", [&](const Tensor& x) { return x.addmm(mat1, mat2, beta, alpha); }, mat1);
}
Tensor& Tensor::addmv_(const Tensor& mat, const Tensor& vec, Scalar beta, Scalar alpha,
                       std::source_location loc) {
  CallSite cs(loc);
  return inPlace(
      *this, "addmv_", [&](const Tensor& x) { return x.addmv(mat, vec, beta, alpha); }, mat);
}
Tensor& Tensor::addr_(const Tensor& vec1, const Tensor& vec2, Scalar beta, Scalar alpha,
                      std::source_location loc) {
  CallSite cs(loc);
  return inPlace(
      *this, "addr_", [&](const Tensor& x) { return x.addr(vec1, vec2, beta, alpha); }, vec1);
}
Tensor& Tensor::baddbmm_(const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha,
                         std::source_location loc) {
  CallSite cs(loc);
  return inPlace(
      *this, "baddbmm_", [&](const Tensor& x) { return x.baddbmm(batch1, batch2, beta, alpha); },
      batch1);
}
Tensor& Tensor::addbmm_(const Tensor& batch1, const Tensor& batch2, Scalar beta, Scalar alpha,
                        std::source_location loc) {
  CallSite cs(loc);
  return inPlace(
      *this, "addbmm_", [&](const Tensor& x) { return x.addbmm(batch1, batch2, beta, alpha); },
      batch1);
}

} // namespace weft
