// Reductions and their composites: sum, mean, prod, amax/amin, max/min, arg*, var/std,
// logsumexp, norm, any/all, cumsum, sort, topk, softmax, log_softmax, nansum, count_nonzero,
// median, nanmean, aminmax, msort, kthvalue and quantile.
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/runtime/VjpRules.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft {
namespace {

/// argmax/argmin along `d`, or over the flattened tensor when `d` is not given.
Tensor argExtremum(OpCode op, const Tensor& x, std::optional<int64_t> d, bool keepdim) {
  WEFT_CHECK(x.defined(), Value, opName(op), ": called on an undefined tensor");
  if (!d) return dispatch(op, {x.reshape({-1})}, Attrs{{"dim", int64_t{0}}, {"keepdim", false}});
  return dispatch(op, {x},
                  Attrs{{"dim", wrapDim(*d, x.dim(), opName(op).data())}, {"keepdim", keepdim}});
}

/// max(dim)/min(dim): the values at the chosen indices (kept dims), so the gradient reaches that
/// one element as in torch.max(x, dim), not every tie.
std::pair<Tensor, Tensor> valuesAt(const Tensor& x, const Tensor& index, int64_t d, bool keepdim) {
  Tensor values = x.gather(d, index);
  if (keepdim || x.dim() == 0) return {values, index};
  return {values.squeeze(d), index.squeeze(d)};
}

/// What softmax-like composites subtract before exp() so it cannot overflow: the max of `x` over
/// `dims` (kept, no gradient); zeros for an empty `x` (no max, nothing to shift).
Tensor expShift(const Tensor& x, const Shape& dims) {
  if (x.numel() > 0) return x.amax(dims, true).detach();
  return zeros(rules::keptShape(x.sizes(), Attrs{{"dims", dims}}), x.dtype());
}

/// `total`, a sum of `x` over `dims`, divided by the number of elements summed less `correction`
/// (clamped at 0). Inside a trace with a dynamic dimension the count is a graph value counted from
/// x's shape, so that it counts only the valid rows once padded rows are masked.
Tensor divideByCount(const Tensor& total, const Tensor& x, const Shape& dims, bool keepdim,
                     int64_t correction) {
  TraceContext* tc = currentTrace();
  if (tc != nullptr && tc->dynamicDim) {
    Tensor count =
        reduce_op(OpCode::Sum, fullOf({}, 1, total.dtype()).expand(x.sizes()), dims, keepdim);
    if (correction != 0) count = (count - correction).clamp(0);
    return total / count;
  }
  int64_t count = 1;
  for (size_t d = 0; d < x.sizes().size(); ++d)
    if (dims.empty() || std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) != dims.end())
      count *= x.sizes()[d];
  return total / static_cast<double>(std::max<int64_t>(count - correction, 0));
}

/// Whether `t` is a 16-bit float, whose statistics PyTorch computes in float32 (its opmath): a
/// sum or a count past 65504 would be infinite, a mean of 65536 elements a division by infinity.
bool sixteenBit(const Tensor& t) {
  return t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16;
}

/// f(v) where v is not 0, and 0 with gradient 0 where it is (f(0) = 0): a root's infinite
/// derivative at 0 does not reach v's gradient as 0 * inf = NaN, as PyTorch masks it in norms.
template <typename F> Tensor zeroAtZero(const Tensor& v, F f) {
  Tensor zero = v.eq(0);
  return where(zero, zeros_like(v), f(where(zero, ones_like(v), v)));
}

} // namespace

Tensor Tensor::sum(std::source_location loc) const {
  CallSite cs(loc);
  return sum({}, false);
}
Tensor Tensor::sum(Dims dims, bool keepdim, std::optional<DType> dtype,
                   std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("sum");
  DType t = dtype.value_or(isFloating(this->dtype()) ? this->dtype() : DType::Int64);
  Shape wd = wrapDims(dims, dim(), "sum");
  return autograd::name_grad_fn(reduce_op(OpCode::Sum, to(t), wd, keepdim),
                                wd.empty() ? "SumBackward0" : "SumBackward1", *this);
}
Tensor sum(const Tensor& x, Dims dims, bool keepdim, std::source_location loc) {
  CallSite cs(loc);
  return x.sum(std::move(dims), keepdim);
}
Tensor Tensor::mean(std::source_location loc) const {
  CallSite cs(loc);
  return mean({}, false);
}
Tensor Tensor::mean(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("mean");
  WEFT_CHECK(isFloating(dtype()), DType,
             "mean(): could not infer output dtype. Input dtype must be a floating "
             "point dtype, got ",
             dtypeName(dtype()));
  if (sixteenBit(*this)) return cast(cast(*this, DType::Float32).mean(dims, keepdim), dtype());
  Shape wd = wrapDims(dims, dim(), "mean");
  return autograd::name_grad_fn(
      divideByCount(reduce_op(OpCode::Sum, *this, wd, keepdim), *this, wd, keepdim, 0),
      wd.empty() ? "MeanBackward0" : "MeanBackward1", *this);
}
Tensor mean(const Tensor& x, Dims dims, bool keepdim, std::source_location loc) {
  CallSite cs(loc);
  return x.mean(std::move(dims), keepdim);
}
Tensor Tensor::prod(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("prod");
  return reduce_op(OpCode::Prod, to(isFloating(dtype()) ? dtype() : DType::Int64), {}, false);
}
Tensor Tensor::prod(int64_t d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("prod");
  return reduce_op(OpCode::Prod, to(isFloating(dtype()) ? dtype() : DType::Int64),
                   {wrapDim(d, dim(), "prod")}, keepdim);
}
Tensor Tensor::amax(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("amax");
  return reduce_op(OpCode::AMax, *this, wrapDims(dims, dim(), "amax"), keepdim);
}
Tensor Tensor::amin(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("amin");
  return reduce_op(OpCode::AMin, *this, wrapDims(dims, dim(), "amin"), keepdim);
}
Tensor Tensor::max(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("max");
  WEFT_CHECK(numel() > 0, Value,
             "max(): Expected reduction dim to be specified for input.numel() == 0.");
  return autograd::name_grad_fn(amax(), "MaxBackward1", *this);
}
Tensor Tensor::min(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("min");
  WEFT_CHECK(numel() > 0, Value,
             "min(): Expected reduction dim to be specified for input.numel() == 0.");
  return autograd::name_grad_fn(amin(), "MinBackward1", *this);
}
std::pair<Tensor, Tensor> Tensor::max(int64_t d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  auto r = valuesAt(*this, argmax(d, true), d, keepdim);
  autograd::name_grad_fn(r.first, "MaxBackward0", *this);
  return r;
}
std::pair<Tensor, Tensor> Tensor::min(int64_t d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  auto r = valuesAt(*this, argmin(d, true), d, keepdim);
  autograd::name_grad_fn(r.first, "MinBackward0", *this);
  return r;
}
Tensor Tensor::argmax(std::optional<int64_t> d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  return argExtremum(OpCode::ArgMax, *this, d, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  return argExtremum(OpCode::ArgMin, *this, d, keepdim);
}
Tensor Tensor::var(Dims dims, int64_t correction, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("var");
  WEFT_CHECK(isFloating(dtype()), DType, "var: expected a floating-point input, got ",
             dtypeName(dtype()));
  if (sixteenBit(*this))
    return cast(cast(*this, DType::Float32).var(dims, correction, keepdim), dtype());
  Tensor mu = mean(dims, true);
  Tensor d = *this - mu;
  Shape wd = wrapDims(dims, dim(), "var");
  return autograd::name_grad_fn(
      divideByCount(reduce_op(OpCode::Sum, d * d, wd, keepdim), *this, wd, keepdim, correction),
      "VarBackward0", *this);
}
Tensor Tensor::std(Dims dims, int64_t correction, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  // A constant slice's std is 0 with gradient 0 (as PyTorch), not (x - mean) / 0.
  return autograd::name_grad_fn(zeroAtZero(var(std::move(dims), correction, keepdim),
                                           [](const Tensor& v) { return v.sqrt(); }),
                                "StdBackward0", *this);
}
Tensor Tensor::logsumexp(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("logsumexp");
  Tensor x = isFloating(dtype()) ? *this : to(kDefaultFloat);
  Shape wd = wrapDims(dims, dim(), "logsumexp");
  Tensor m = expShift(x, wd);
  m = where(m.abs() == std::numeric_limits<double>::infinity(), zeros_like(m),
            m); // all -inf rows stay -inf
  Tensor r = (x - m).exp().sum(wd, true).log() + m;
  r = keepdim ? r : reduce_op(OpCode::Sum, r, wd, false); // sum over size-1 dims drops them
  return autograd::name_grad_fn(r, "LogsumexpBackward0", *this);
}
Tensor Tensor::norm(double p, Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "norm: called on an undefined tensor");
  WEFT_CHECK(isFloating(dtype()), DType, "norm: expected a floating-point input, got ",
             dtypeName(dtype()));
  WEFT_CHECK(p > 0, Value, "norm: p must be positive, got ", p);
  // 16-bit floats sum in float (a float16 square overflows from 256 on), rounded once at the end.
  const bool narrow = dtype() == DType::Float16 || dtype() == DType::BFloat16;
  Tensor x = narrow ? cast(*this, DType::Float32) : *this, r;
  if (std::isinf(p)) {
    // An empty tensor has no magnitudes to take the largest of: its slices' norms are 0 (as
    // PyTorch's), and the sum gives that (or the same empty result) where amax would refuse.
    r = numel() == 0 ? x.abs().sum(std::move(dims), keepdim)
                     : x.abs().amax(std::move(dims), keepdim);
  } else if (p == 1) {
    r = x.abs().sum(std::move(dims), keepdim);
  } else {
    // The root of a zero sum is 0 with gradient 0 (as PyTorch), not 0 * (1 / 0); below p = 1, so
    // is a zero element's |x|^p.
    auto power = [p](const Tensor& v) { return v.pow(p); };
    Tensor s = (p == 2  ? x * x
                : p < 1 ? zeroAtZero(x.abs(), power)
                        : x.abs().pow(p))
                   .sum(std::move(dims), keepdim);
    r = zeroAtZero(s, [p](const Tensor& v) { return p == 2 ? v.sqrt() : v.pow(1.0 / p); });
  }
  return autograd::name_grad_fn(narrow ? cast(r, dtype()) : r, "NormBackward1", *this);
}
namespace {
/// any/all: whether the count of elements that are nonzero (any) or zero (all) over `dims` is
/// nonzero (zero); in uint8 for a uint8 input, as torch.any/torch.all.
Tensor anyOrAll(const Tensor& x, bool any, Shape dims, bool keepdim, const char* name) {
  WEFT_CHECK(x.defined(), Value, name, ": called on an undefined tensor");
  Shape wd = wrapDims(dims, x.dim(), name);
  Tensor count = reduce_op(OpCode::Sum, cast(any ? x.ne(0) : x.eq(0), DType::Int64), wd, keepdim);
  Tensor r = any ? count.gt(0) : count.eq(0);
  return x.dtype() == DType::UInt8 ? cast(r, DType::UInt8) : r;
}
} // namespace
Tensor Tensor::any(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  return anyOrAll(*this, true, std::move(dims), keepdim, "any");
}
Tensor Tensor::all(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  return anyOrAll(*this, false, std::move(dims), keepdim, "all");
}
Tensor any(const Tensor& x, Dims dims, bool keepdim, std::source_location loc) {
  return x.any(std::move(dims), keepdim, loc);
}
Tensor all(const Tensor& x, Dims dims, bool keepdim, std::source_location loc) {
  return x.all(std::move(dims), keepdim, loc);
}
Tensor Tensor::isnan(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("isnan");
  return ne(*this); // only NaN differs from itself
}
Tensor Tensor::isinf(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("isinf");
  if (!isFloating(dtype())) return zeros(sizes(), DType::Bool);
  return abs().eq(std::numeric_limits<double>::infinity());
}
Tensor Tensor::isfinite(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("isfinite");
  if (!isFloating(dtype())) return ones(sizes(), DType::Bool);
  return abs().lt(std::numeric_limits<double>::infinity()); // false for NaN too
}
Tensor isnan(const Tensor& x, std::source_location loc) {
  return x.isnan(loc);
}
Tensor isinf(const Tensor& x, std::source_location loc) {
  return x.isinf(loc);
}
Tensor isfinite(const Tensor& x, std::source_location loc) {
  return x.isfinite(loc);
}
Tensor Tensor::cumsum(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cumsum");
  Tensor x = isFloating(dtype()) ? *this : to(DType::Int64);
  return dispatch(OpCode::CumSum, {x}, Attrs{{"dim", wrapDim(d, dim(), "cumsum")}});
}
namespace {
/// Per bin of `bins` equal ones over [lo, hi], how many elements of `x` fall in it (or the sum of
/// their `weight`): PyTorch's linear bins, (x - lo) * bins / (hi - lo) rounded down, hi itself in
/// the last; elements outside count nowhere.
Tensor binnedSums(const Tensor& x, int64_t bins, double lo, double hi, const Tensor& weight) {
  Tensor flat = x.flatten(), inside = flat.ge(lo).logical_and(flat.le(hi));
  Tensor bin = ((flat - lo) * static_cast<double>(bins) / (hi - lo)).floor();
  bin = where(inside, bin.clamp(0.0, static_cast<double>(bins - 1)), zeros_like(bin));
  Tensor counted = weight.defined()
                       ? where(inside, weight.flatten().to(x.dtype()), zeros({}, x.dtype()))
                       : inside.to(x.dtype());
  return zeros({bins}, x.dtype()).scatter_add(0, bin.to(DType::Int64), counted);
}
} // namespace

Tensor Tensor::histc(int64_t bins, double min, double max, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("histc");
  WEFT_CHECK(isFloating(dtype()), DType, "histc: expected a floating-point input, got ",
             dtypeName(dtype()));
  WEFT_CHECK(bins > 0, Value, "torch.histc(): bins must be > 0, but got ", bins);
  WEFT_CHECK(!(min > max), Value, "torch.histc(): max must be larger than min");
  double lo = min, hi = max;
  if (lo == hi && numel() > 0) { // the elements' own range
    lo = amin().item<double>();
    hi = amax().item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  WEFT_CHECK(std::isfinite(lo) && std::isfinite(hi), Value, "torch.histc(): range of [", lo, ", ",
             hi, "] is not finite");
  return binnedSums(*this, bins, lo, hi, {});
}
std::pair<Tensor, Tensor> Tensor::histogram(int64_t bins,
                                            std::optional<std::pair<double, double>> range,
                                            const Tensor& weight, bool density,
                                            std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("histogram");
  WEFT_CHECK(isFloating(dtype()), DType, "torch.histogram: expected a floating-point input, got ",
             dtypeName(dtype()));
  WEFT_CHECK(bins > 0, Value, "torch.histogram(): bins must be > 0, but got ", bins);
  WEFT_CHECK(!weight.defined() || weight.dtype() == dtype(), DType,
             "torch.histogram: if weight tensor is provided, it should have the same dtype as "
             "the input tensor, got ",
             dtypeName(weight.dtype()), " and ", dtypeName(dtype()));
  WEFT_CHECK(!weight.defined() || weight.sizes() == sizes(), Shape,
             "torch.histogram: if weight tensor is provided it should have the same shape as the "
             "input tensor, got ",
             shapeString(weight.sizes()), " and ", shapeString(sizes()));
  double lo = range ? range->first : 0, hi = range ? range->second : 0;
  if (!range && numel() > 0) { // the elements' own range
    Tensor x = readValue(*this, "histogram's range");
    lo = x.amin().item<double>();
    hi = x.amax().item<double>();
  }
  WEFT_CHECK(std::isfinite(lo) && std::isfinite(hi), Value, "torch.histogram: range of [", lo, ", ",
             hi, "] is not finite");
  WEFT_CHECK(lo <= hi, Value, "torch.histogram: min should not exceed max, but got min ", lo,
             " max ", hi);
  if (lo == hi) { // one value: a bin of width 1 around it
    lo -= 0.5;
    hi += 0.5;
  }
  Tensor edges = linspace(lo, hi, bins + 1, dtype());
  Tensor hist = binnedSums(*this, bins, lo, hi, weight);
  if (density) hist = hist / (hist.sum() * edges.diff());
  return {hist, edges};
}
std::pair<Tensor, Tensor> histogram(const Tensor& x, int64_t bins,
                                    std::optional<std::pair<double, double>> range,
                                    const Tensor& weight, bool density, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "histogram: called with an undefined tensor");
  return x.histogram(bins, range, weight, density);
}
Tensor Tensor::bincount(const Tensor& weights, int64_t minlength, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("bincount");
  WEFT_CHECK(dim() == 1 && !isFloating(dtype()) && dtype() != DType::Bool, DType,
             "bincount only supports 1-d non-negative integral inputs.");
  WEFT_CHECK(minlength >= 0, Value, "bincount: minlength should be >= 0, got ", minlength);
  WEFT_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == size(0)), Shape,
             "bincount: weights should be 1-d and have the same length as input");
  int64_t length = minlength;
  if (numel() > 0) {
    WEFT_CHECK(amin().item<int64_t>() >= 0, Value,
               "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(length, amax().item<int64_t>() + 1);
  }
  const DType out = !weights.defined()            ? DType::Int64
                    : isFloating(weights.dtype()) ? weights.dtype()
                                                  : DType::Float64;
  Tensor w = weights.defined() ? weights.to(out) : ones({size(0)}, out);
  return zeros({length}, out).scatter_add(0, to(DType::Int64), w);
}
Tensor Tensor::cumprod(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cumprod");
  Tensor x = isFloating(dtype()) ? *this : to(DType::Int64);
  return dispatch(OpCode::CumProd, {x}, Attrs{{"dim", wrapDim(d, dim(), "cumprod")}});
}
namespace {
/// cummax/cummin: the values at the running extremum's index, so the gradient reaches that one
/// element, as in PyTorch.
std::pair<Tensor, Tensor> cumExtremum(OpCode op, const Tensor& x, int64_t d, const char* name) {
  const int64_t at = wrapDim(d, x.dim(), name);
  Tensor index = dispatch(op, {x}, Attrs{{"dim", at}});
  return {x.gather(at, index), index};
}
} // namespace
std::pair<Tensor, Tensor> Tensor::cummax(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cummax");
  return cumExtremum(OpCode::CumArgMax, *this, d, "cummax");
}
std::pair<Tensor, Tensor> Tensor::cummin(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("cummin");
  return cumExtremum(OpCode::CumArgMin, *this, d, "cummin");
}
Tensor Tensor::logcumsumexp(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("logcumsumexp");
  WEFT_CHECK(isFloating(dtype()), DType, "logcumsumexp: expected a floating-point input, got ",
             dtypeName(dtype()));
  return dispatch(OpCode::LogCumSumExp, {*this}, Attrs{{"dim", wrapDim(d, dim(), "logcumsumexp")}});
}
Tensor Tensor::argsort(int64_t d, bool descending, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("argsort");
  return dispatch(OpCode::ArgSort, {*this},
                  Attrs{{"dim", wrapDim(d, dim(), "argsort")}, {"descending", descending}});
}
std::pair<Tensor, Tensor> Tensor::sort(int64_t d, bool descending, std::source_location loc) const {
  CallSite cs(loc);
  Tensor idx = argsort(d, descending);
  return {gather(d, idx), idx};
}
std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t d, bool largest,
                                       std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("topk");
  d = wrapDim(d, dim(), "topk");
  Tensor x = dim() == 0 ? reshape({1}) : *this; // a scalar's one dimension
  int64_t n = x.size(d);
  WEFT_CHECK(k >= 0 && k <= n, Index, "topk: k (", k, ") is out of range for dimension ", d,
             " of size ", n);
  if (dim() == 0) k = 1; // as torch.topk: a scalar's top 0 is the scalar too
  Tensor idx = x.argsort(d, largest).narrow(d, 0, k);
  Tensor values = x.gather(d, idx);
  if (dim() == 0) return {values.reshape({}), idx.reshape({})};
  return {values, idx};
}
Tensor Tensor::softmax(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("softmax");
  Tensor x = isFloating(dtype()) ? *this : to(kDefaultFloat);
  return dispatch(OpCode::Softmax, {x}, Attrs{{"dim", wrapDim(d, dim(), "softmax")}});
}
Tensor Tensor::log_softmax(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("log_softmax");
  Tensor x = isFloating(dtype()) ? *this : to(kDefaultFloat);
  return dispatch(OpCode::LogSoftmax, {x}, Attrs{{"dim", wrapDim(d, dim(), "log_softmax")}});
}

} // namespace weft

namespace weft {

Tensor Tensor::nansum(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("nansum");
  if (!isFloating(dtype())) return sum(dims, keepdim);
  return where(isnan(), full({}, 0.0, dtype()), *this).sum(dims, keepdim);
}
Tensor Tensor::count_nonzero(Dims dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("count_nonzero");
  return ne(0).sum(dims, false, DType::Int64);
}

namespace {
/// The lower median along `d` and its index: with NaNs, the first NaN (median), or the median of
/// the other values, a NaN only where all are (nanmedian).
std::pair<Tensor, Tensor> medianAlong(const Tensor& self, int64_t d, bool keepdim, bool skipNan,
                                      const char* op) {
  WEFT_CHECK(self.dtype() != DType::Bool, DType, op, ": not implemented for bool tensors");
  d = wrapDim(d, self.dim(), op);
  Tensor x = self.dim() == 0 ? self.reshape({1}) : self;
  const int64_t n = x.size(d);
  WEFT_CHECK(n > 0, Index, op, ": expected reduction dim ", d, " to have non-zero size");
  auto [sorted, order] = x.sort(d);
  Shape kept = x.sizes();
  kept[static_cast<size_t>(d)] = 1;
  // NaNs sort last, in their order.
  Tensor at = full(kept, (n - 1) / 2, DType::Int64);
  if (isFloating(self.dtype())) {
    Tensor nans = x.isnan().sum({d}, true, DType::Int64);
    at = skipNan ? (nans.neg() + (n - 1)).clamp(0, std::nullopt).floor_divide(2)
                 : where(nans.gt(0), nans.neg() + n, at);
  }
  Tensor values = sorted.gather(d, at), indices = order.gather(d, at);
  if (self.dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {values.squeeze(d), indices.squeeze(d)};
  return {values, indices};
}

/// `value`, the median of all of 1-D `x`, with PyTorch's gradient: shared evenly by the elements
/// equal to it, or by the NaNs where it is NaN (amax's rule, over those elements alone), where
/// median(dim) picks one.
Tensor sharedByEqual(const Tensor& x, const Tensor& value) {
  if (!isFloating(x.dtype())) return value;
  const double inf = std::numeric_limits<double>::infinity();
  Tensor v = value.detach();
  Tensor equal = x.eq(v).logical_or(x.isnan().logical_and(v.isnan()));
  // The other elements are filled with what cannot tie with the median: -inf, or inf where the
  // median is -inf.
  return where(v.eq(-inf), where(equal, x, inf).amin(), where(equal, x, -inf).amax());
}
} // namespace

std::pair<Tensor, Tensor> Tensor::median(int64_t d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("median");
  return medianAlong(*this, d, keepdim, false, "median");
}
std::pair<Tensor, Tensor> Tensor::nanmedian(int64_t d, bool keepdim,
                                            std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("nanmedian");
  return medianAlong(*this, d, keepdim, true, "nanmedian");
}
Tensor Tensor::nanmedian(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("nanmedian");
  if (numel() == 0 && isFloating(dtype())) return sum() + std::nan("");
  Tensor flat = flatten();
  return sharedByEqual(flat, flat.nanmedian(0).first);
}
Tensor Tensor::median(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("median");
  // An empty tensor's median is NaN (still a function of it, as in PyTorch).
  if (numel() == 0 && isFloating(dtype())) return sum() + std::nan("");
  Tensor flat = flatten();
  return sharedByEqual(flat, flat.median(0).first);
}

Tensor Tensor::nanmean(Dims dims, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("nanmean");
  WEFT_CHECK(isFloating(dtype()), DType,
             "nanmean: expected input to have floating point dtype but got ", dtypeName(dtype()));
  Tensor counted = isnan().logical_not().sum(dims, keepdim).to(dtype());
  return nansum(std::move(dims), keepdim) / counted;
}

std::pair<Tensor, Tensor> Tensor::aminmax(std::optional<int64_t> d, bool keepdim,
                                          std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("aminmax");
  if (!d) {
    WEFT_CHECK(numel() > 0, Index, "aminmax: cannot compute aminmax over an empty dimension as ",
               "the operation has no identity");
    Tensor lo = reshape({-1}).amin({0}), hi = reshape({-1}).amax({0});
    if (!keepdim) return {lo, hi};
    Shape ones(static_cast<size_t>(dim()), 1);
    return {lo.reshape(ones), hi.reshape(ones)};
  }
  const int64_t at = wrapDim(*d, dim(), "aminmax");
  WEFT_CHECK(dim() == 0 || size(at) > 0, Index, "aminmax: cannot compute aminmax over an empty ",
             "dimension as the operation has no identity");
  if (dim() == 0) return {amin({}, keepdim), amax({}, keepdim)};
  return {amin({at}, keepdim), amax({at}, keepdim)};
}

Tensor Tensor::msort(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("msort");
  return sort(0).first;
}

std::pair<Tensor, Tensor> Tensor::kthvalue(int64_t k, int64_t d, bool keepdim,
                                           std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("kthvalue");
  const int64_t at = wrapDim(d, dim(), "kthvalue");
  Tensor x = dim() == 0 ? reshape({1}) : *this;
  WEFT_CHECK(k >= 1 && k <= x.size(at), Index,
             "kthvalue: selected number k out of range for dimension ", at, " (k = ", k, ", size ",
             x.size(at), ")");
  auto [sorted, order] = x.sort(at); // NaNs last, as they count as the largest
  Tensor values = sorted.narrow(at, k - 1, 1), indices = order.narrow(at, k - 1, 1);
  if (dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {values.squeeze(at), indices.squeeze(at)};
  return {values, indices};
}

namespace {
/// quantile's and nanquantile's (`op`) checks of their input and arguments.
void checkQuantile(const Tensor& x, double q, std::string_view interpolation, const char* op) {
  WEFT_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, DType, op,
             ": input tensor must be either float or double dtype, got ", dtypeName(x.dtype()));
  WEFT_CHECK(x.numel() > 0, Value, op, ": input tensor must be non-empty");
  WEFT_CHECK(q >= 0 && q <= 1, Value, op, ": q must be in the range [0, 1] but got ", q);
  WEFT_CHECK(interpolation == "linear" || interpolation == "lower" || interpolation == "higher" ||
                 interpolation == "nearest" || interpolation == "midpoint",
             Value, op, ": interpolation must be one of linear, lower, higher, midpoint or ",
             "nearest, got '", interpolation, "'");
}
/// A quantile `r` of `x`, computed keeping dim `at` of the slices read (all of x flattened when
/// `d` is none), shaped as torch.quantile returns it.
Tensor quantileShaped(const Tensor& x, const Tensor& r, std::optional<int64_t> d, bool keepdim,
                      int64_t at) {
  if (!d) return keepdim ? r.reshape(Shape(static_cast<size_t>(x.dim()), 1)) : r.reshape({});
  if (x.dim() == 0) return r.reshape({});
  return keepdim ? r : r.squeeze(at);
}
} // namespace

Tensor Tensor::quantile(double q, std::optional<int64_t> d, bool keepdim,
                        std::string_view interpolation, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("quantile");
  checkQuantile(*this, q, interpolation, "quantile");
  Tensor x = !d ? reshape({-1}) : dim() == 0 ? reshape({1}) : *this;
  const int64_t at = d ? wrapDim(*d, std::max<int64_t>(dim(), 1), "quantile") : 0;
  const int64_t n = x.size(at);
  WEFT_CHECK(n > 0, Value, "quantile: input tensor must be non-empty");
  Tensor sorted = x.sort(at).first; // NaNs last
  const double pos = q * static_cast<double>(n - 1);
  int64_t lo = static_cast<int64_t>(std::floor(pos)), hi = static_cast<int64_t>(std::ceil(pos));
  if (interpolation == "nearest") lo = hi = static_cast<int64_t>(std::nearbyint(pos));
  Tensor below = sorted.narrow(at, lo, 1), above = sorted.narrow(at, hi, 1);
  Tensor r = interpolation == "lower"      ? below
             : interpolation == "higher"   ? above
             : interpolation == "nearest"  ? below
             : interpolation == "midpoint" ? below.lerp(above, 0.5)
                                           : below.lerp(above, pos - static_cast<double>(lo));
  // A slice holding a NaN: its last sorted value, a NaN.
  r = where(x.isnan().any({at}, true), sorted.narrow(at, n - 1, 1), r);
  return quantileShaped(*this, r, d, keepdim, at);
}

// ---- statistics pairs, sorted searches, membership, integration ----

std::pair<Tensor, Tensor> var_mean(const Tensor& x, Dims dims, int64_t correction, bool keepdim,
                                   std::source_location loc) {
  CallSite cs(loc);
  return {x.var(dims, correction, keepdim), x.mean(dims, keepdim)};
}
std::pair<Tensor, Tensor> std_mean(const Tensor& x, Dims dims, int64_t correction, bool keepdim,
                                   std::source_location loc) {
  CallSite cs(loc);
  return {x.std(dims, correction, keepdim), x.mean(dims, keepdim)};
}

Tensor searchsorted(const Tensor& sorted_sequence, const Tensor& values, bool out_int32, bool right,
                    std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(sorted_sequence.defined() && values.defined(), Value,
             "searchsorted: called with an undefined tensor");
  const Tensor& seq = sorted_sequence;
  WEFT_CHECK(seq.dim() >= 1, Shape,
             "searchsorted: boundaries tensor should be 1 dimension or the first N-1 dimensions "
             "of boundaries tensor and input value tensor must match, but we got boundaries "
             "tensor ",
             shapeString(seq.sizes()), " and input value tensor ", shapeString(values.sizes()));
  if (seq.dim() > 1) {
    const Shape &s = seq.sizes(), &v = values.sizes();
    WEFT_CHECK(v.size() == s.size() && std::equal(s.begin(), s.end() - 1, v.begin()), Shape,
               "searchsorted: boundaries tensor should be 1 dimension or the first N-1 "
               "dimensions of boundaries tensor and input value tensor must match, but we got "
               "boundaries tensor ",
               shapeString(s), " and input value tensor ", shapeString(v));
  }
  DType t = promoteTypes(seq.dtype(), values.dtype());
  // The insertion point is how many boundaries are not at or above the value (left) or not above
  // it (right), as PyTorch's binary search decides (so a NaN value goes last): one comparison per
  // value and boundary, so it traces into a plain graph.
  Tensor b = seq.to(t), v = values.to(t).unsqueeze(-1);
  if (seq.dim() > 1) b = b.unsqueeze(-2);
  Tensor below = (right ? b.gt(v) : b.ge(v)).logical_not();
  return below.sum({-1}).to(out_int32 ? kInt32 : kInt64);
}
Tensor bucketize(const Tensor& input, const Tensor& boundaries, bool out_int32, bool right,
                 std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(input.defined() && boundaries.defined(), Value,
             "bucketize: called with an undefined tensor");
  WEFT_CHECK(boundaries.dim() == 1, Shape,
             "bucketize: boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(),
             ")");
  return searchsorted(boundaries, input, out_int32, right);
}

Tensor isin(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert,
            std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(elements.defined() && test_elements.defined(), Value,
             "isin: called with an undefined tensor");
  DType t = promoteTypes(elements.dtype(), test_elements.dtype());
  Tensor found = elements.to(t).unsqueeze(-1).eq(test_elements.to(t).reshape({-1})).any({-1});
  return invert ? found.logical_not() : found;
}
Tensor isin(const Tensor& elements, Scalar test_element, bool assume_unique, bool invert,
            std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(elements.defined(), Value, "isin: called with an undefined tensor");
  Tensor found = elements.eq(test_element);
  return invert ? found.logical_not() : found;
}

Tensor trapezoid(const Tensor& y, const Tensor& x, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(y.defined() && x.defined(), Value, "trapezoid: called with an undefined tensor");
  WEFT_CHECK(y.dim() >= 1, Shape, "trapezoid: the input must have at least one dimension");
  const int64_t d = wrapDim(dim, y.dim(), "trapezoid");
  const int64_t n = y.size(d);
  if (n == 0) return y.sum({d});
  // The spacing: x's differences along `dim`. A 1-D x runs along it; a wider one is lined up
  // with y from the right (leading 1s), as broadcasting does.
  Tensor dx;
  if (x.dim() == 1) {
    WEFT_CHECK(x.numel() == n, Shape,
               "trapezoid: there must be one `x` value for each sample point, got ", x.numel(),
               " and ", n);
    Shape s(static_cast<size_t>(y.dim()), 1);
    s[static_cast<size_t>(d)] = n - 1;
    dx = x.diff().reshape(s);
  } else {
    WEFT_CHECK(x.dim() <= y.dim(), Shape, "trapezoid: x of shape ", shapeString(x.sizes()),
               " has more dimensions than y of shape ", shapeString(y.sizes()));
    Shape s(static_cast<size_t>(y.dim() - x.dim()), 1);
    s.insert(s.end(), x.sizes().begin(), x.sizes().end());
    dx = x.reshape(s).diff(1, d);
  }
  Tensor mid = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * dx;
  return mid.sum({d}) / 2.0;
}
Tensor trapezoid(const Tensor& y, Scalar dx, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(y.defined(), Value, "trapezoid: called with an undefined tensor");
  WEFT_CHECK(y.dim() >= 1, Shape, "trapezoid: the input must have at least one dimension");
  const int64_t d = wrapDim(dim, y.dim(), "trapezoid");
  const int64_t n = y.size(d);
  if (n == 0) return y.sum({d});
  // dx (sum of the ends halved, plus the inner points), as torch.trapezoid.
  Tensor inner = y.sum({d}) - (y.select(d, 0) + y.select(d, n - 1)) / 2.0;
  return inner * dx;
}
Tensor trapz(const Tensor& y, const Tensor& x, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return trapezoid(y, x, dim);
}
Tensor trapz(const Tensor& y, double dx, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return trapezoid(y, dx, dim);
}

// ---- unique ----

std::tuple<Tensor, Tensor, Tensor> unique(const Tensor& x, bool sorted, bool return_inverse,
                                          bool return_counts, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "unique: called with an undefined tensor");
  if (currentTrace() != nullptr) { // how many values come out depends on the values
    Tensor value = readValue(x, "unique");
    TraceScope paused(nullptr);
    return unique(value, sorted, return_inverse, return_counts);
  }
  // Sorted (always: PyTorch's CPU unique sorts either way), each value where it differs from the
  // one before (NaNs never equal: each is its own value, as in PyTorch).
  Tensor flat = x.detach().reshape({-1});
  auto [s, order] = flat.sort(0);
  const int64_t n = s.numel();
  Tensor first =
      n == 0 ? zeros({0}, DType::Bool)
             : cat({ones({1}, DType::Bool), s.narrow(0, 1, n - 1).ne(s.narrow(0, 0, n - 1))});
  Tensor values = s.masked_select(first);
  Tensor inverse, counts;
  if (return_inverse) {
    // The running count of firsts, minus one, is each sorted element's value index.
    Tensor group = first.to(DType::Int64).cumsum(0) - 1;
    inverse = zeros({n}, DType::Int64).scatter(0, order, group).reshape(x.sizes());
  } else {
    inverse = zeros({0}, DType::Int64);
  }
  if (return_counts) {
    Tensor starts = cat({nonzero(first).reshape({-1}), full({1}, n, DType::Int64)});
    counts = starts.diff();
  } else {
    counts = zeros({0}, DType::Int64);
  }
  return {values, inverse, counts};
}
Tensor Tensor::unique(bool sorted, std::source_location loc) const {
  CallSite cs(loc);
  return std::get<0>(weft::unique(*this, sorted, false, false));
}

std::tuple<Tensor, Tensor, Tensor> unique_consecutive(const Tensor& x, bool return_inverse,
                                                      bool return_counts,
                                                      std::optional<int64_t> dim,
                                                      std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "unique_consecutive: called with an undefined tensor");
  if (currentTrace() != nullptr) { // how many values come out depends on the values
    Tensor value = readValue(x, "unique_consecutive");
    TraceScope paused(nullptr);
    return unique_consecutive(value, return_inverse, return_counts, dim);
  }
  // Slices along `d` as rows (each element its own row without a dim); a run starts where a row
  // differs from the one before it in any element (NaN differs from NaN, as in PyTorch).
  WEFT_CHECK(!dim || x.dim() > 0, Value,
             "unique_consecutive: a dim of a 0-dimensional tensor (pass no dim)");
  const int64_t d = dim ? wrapDim(*dim, x.dim(), "unique_consecutive") : 0;
  Tensor t = x.detach();
  const int64_t n = dim ? t.size(d) : t.numel();
  Tensor rows = dim ? t.movedim(d, 0).reshape({n, n == 0 ? 0 : t.numel() / n}) : t.reshape({n, 1});
  Tensor first = n == 0 ? zeros({0}, DType::Bool)
                        : cat({ones({1}, DType::Bool),
                               rows.narrow(0, 1, n - 1).ne(rows.narrow(0, 0, n - 1)).any({1})});
  Tensor starts = nonzero(first).reshape({-1});
  Tensor values = dim ? t.index_select(d, starts) : t.reshape({-1}).index_select(0, starts);
  Tensor inverse = zeros({0}, DType::Int64), counts = zeros({0}, DType::Int64);
  if (return_inverse) {
    inverse = first.to(DType::Int64).cumsum(0) - 1;
    if (!dim) inverse = inverse.reshape(x.sizes());
  }
  if (return_counts) counts = cat({starts, full({1}, n, DType::Int64)}).diff();
  return {values, inverse, counts};
}
std::tuple<Tensor, Tensor, Tensor> Tensor::unique_consecutive(bool return_inverse,
                                                              bool return_counts,
                                                              std::optional<int64_t> dim,
                                                              std::source_location loc) const {
  CallSite cs(loc);
  return weft::unique_consecutive(*this, return_inverse, return_counts, dim);
}

Tensor Tensor::nanquantile(double q, std::optional<int64_t> d, bool keepdim,
                           std::string_view interpolation, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("nanquantile");
  checkQuantile(*this, q, interpolation, "nanquantile");
  Tensor x = !d ? reshape({-1}) : dim() == 0 ? reshape({1}) : *this;
  const int64_t at = d ? wrapDim(*d, std::max<int64_t>(dim(), 1), "nanquantile") : 0;
  Tensor sorted = x.sort(at).first; // NaNs last: each slice's first `count` values are numbers
  // Each slice's rank q (count - 1), in the input's dtype as PyTorch computes it.
  Tensor count = x.isnan().logical_not().sum({at}, true).to(dtype());
  Tensor rank = (count - 1.0).clamp_min(0.0) * q;
  Tensor lo = interpolation == "nearest" ? rank.round() : rank.floor();
  Tensor hi = interpolation == "nearest" ? lo : rank.ceil();
  Tensor below = sorted.gather(at, lo.to(DType::Int64)),
         above = sorted.gather(at, hi.to(DType::Int64));
  Tensor r = interpolation == "lower" || interpolation == "nearest" ? below
             : interpolation == "higher"                            ? above
             : interpolation == "midpoint"                          ? below.lerp(above, 0.5)
                                                                    : below.lerp(above, rank - lo);
  r = where(count.eq(0.0), full({}, std::nan(""), dtype()), r); // nothing but NaN
  return quantileShaped(*this, r, d, keepdim, at);
}

std::pair<Tensor, Tensor> Tensor::mode(int64_t d, bool keepdim, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("mode");
  const int64_t at = wrapDim(d, std::max<int64_t>(dim(), 1), "mode");
  Tensor x = dim() == 0 ? reshape({1}) : *this;
  const int64_t n = x.size(at);
  WEFT_CHECK(n > 0, Index, "mode: cannot compute the mode of an empty dimension ", at);
  auto [sorted, order] = x.sort(at); // equal values side by side, NaNs last
  // Runs of equal values (NaN equal to NaN) in sorted order: where each position's run starts,
  // and so how long the run is up to it; the longest run ends at the first maximum, which for
  // runs of equal length is the smallest value's.
  Shape along(static_cast<size_t>(x.dim()), 1);
  along[static_cast<size_t>(at)] = n;
  Tensor pos =
      arange(n, TensorOptions(DType::Int64).device(x.device())).reshape(along).expand(x.sizes());
  Tensor prev = sorted.narrow(at, 0, n - 1), next = sorted.narrow(at, 1, n - 1);
  Tensor same = next.eq(prev).logical_or(next.isnan().logical_and(prev.isnan()));
  Tensor starts =
      cat({full(sorted.narrow(at, 0, 1).sizes(), 1, DType::Bool), same.logical_not()}, at);
  Tensor runStart = where(starts, pos, zeros({}, DType::Int64)).cummax(at).first;
  Tensor best = (pos - runStart).argmax(at, true); // the longest run's last position
  Tensor values = sorted.gather(at, best);
  // Its last occurrence: the largest original index in the run.
  Tensor inRun = pos.ge(runStart.gather(at, best)).logical_and(pos.le(best));
  Tensor indices = where(inRun, order, full({}, int64_t{-1}, DType::Int64)).amax({at}, true);
  if (dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (!keepdim) return {values.squeeze(at), indices.squeeze(at)};
  return {values, indices};
}

} // namespace weft
