// Random fills of other distributions, fill_diagonal_, and the in-place forms that check more than
// the generated ones (TensorMethods.cpp). Each goes through the same write as the op table's
// in-place forms (assignInPlace): shape and dtype checked, the version bumped, the autograd
// history taken over, and inside compile() a traced assignment.
#include "InPlace.h"

#include "weft/Functions.h"

#include <cmath>
#include <numbers>
#include <utility>

namespace weft {
namespace {

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
  Tensor position = arange(n, TensorOptions(DType::Int64).device(device()));
  Tensor mask = position.remainder(step).eq(0).logical_and(position.lt(limit)).reshape(s);
  return masked_fill_(mask, value);
}

Tensor& Tensor::conj_physical_(std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "conj_physical_: called on an undefined tensor");
  return *this; // real tensors are their own conjugate
}

Tensor& Tensor::float_power_(const Tensor& exponent, std::source_location loc) {
  CallSite cs(loc);
  checkFloat64Base(*this);
  return inPlaceOf(
      *this, "float_power_", [&](const Tensor& x) { return x.float_power(exponent); }, exponent);
}
Tensor& Tensor::float_power_(Scalar exponent, std::source_location loc) {
  CallSite cs(loc);
  checkFloat64Base(*this);
  return inPlaceOf(*this, "float_power_", [&](const Tensor& x) { return x.float_power(exponent); });
}

} // namespace weft
