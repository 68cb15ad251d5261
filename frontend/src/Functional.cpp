// Composite ops built from primitives: shape ops, convolution, pooling, embedding, activations,
// pointwise arithmetic (square, clamp_min/max, nan_to_num, lerp, addcmul, addcdiv, logaddexp,
// frac, deg2rad, rad2deg, hypot, fmax/fmin, float_power, logaddexp2, ldexp, sinc, logit, xlogy,
// signbit, copysign, heaviside), comparisons (isclose, allclose, equal), type_as and new_*
// factories.
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/runtime/ConvGeometry.h"

#include <cmath>
#include <limits>
#include <numbers>

namespace weft {
namespace {

/// A per-spatial-dim option given as one value for all dims or one per dim.
std::vector<int64_t> expandParam(std::vector<int64_t> v, size_t n, const char* op,
                                 const char* name) {
  if (v.size() == 1 && n > 1) v.assign(n, v[0]);
  WEFT_CHECK(v.size() == n, Value, op, ": ", name, " must have 1 or ", n, " values, got ",
             v.size());
  return v;
}

Attrs convAttrs(Shape stride, Shape padding, Shape dilation, int64_t groups) {
  return Attrs{{"stride", std::move(stride)},
               {"padding", std::move(padding)},
               {"dilation", std::move(dilation)},
               {"groups", groups}};
}

/// Adds a batch dim to unbatched input (C, *S) and removes it from the result.
template <typename Fn> Tensor batched(const Tensor& x, int64_t spatial, Fn fn) {
  WEFT_CHECK(x.defined(), Value, "expected a defined input tensor");
  if (x.dim() == spatial + 1) return fn(x.unsqueeze(0)).squeeze(0);
  return fn(x);
}

Tensor addBias(const Tensor& y, const Tensor& bias, const char* op) {
  if (!bias.defined()) return y;
  WEFT_CHECK(bias.dim() == 1 && bias.size(0) == y.size(1), Shape, op, ": bias of shape ",
             shapeString(bias.sizes()), " does not match ", y.size(1), " output channels");
  Shape s(static_cast<size_t>(y.dim()), 1);
  s[1] = y.size(1);
  return y + bias.reshape(s);
}

Tensor convNd(const Tensor& x, const Tensor& w, const Tensor& bias, size_t sp,
              std::vector<int64_t> stride, std::vector<int64_t> padding,
              std::vector<int64_t> dilation, int64_t groups, const char* op) {
  WEFT_CHECK(w.defined(), Value, op, ": weight is an undefined tensor");
  Attrs at = convAttrs(expandParam(std::move(stride), sp, op, "stride"),
                       expandParam(std::move(padding), sp, op, "padding"),
                       expandParam(std::move(dilation), sp, op, "dilation"), groups);
  return autograd::name_grad_fn(
      batched(x, static_cast<int64_t>(sp),
              [&](const Tensor& xb) { return addBias(conv(xb, w, at), bias, op); }),
      "ConvolutionBackward0", x);
}

Tensor convTransposeNd(const Tensor& x, const Tensor& w, const Tensor& bias, size_t sp,
                       std::vector<int64_t> stride, std::vector<int64_t> padding,
                       std::vector<int64_t> outputPadding, int64_t groups,
                       std::vector<int64_t> dilation, const char* op) {
  WEFT_CHECK(w.defined(), Value, op, ": weight is an undefined tensor");
  stride = expandParam(std::move(stride), sp, op, "stride");
  padding = expandParam(std::move(padding), sp, op, "padding");
  outputPadding = expandParam(std::move(outputPadding), sp, op, "output_padding");
  dilation = expandParam(std::move(dilation), sp, op, "dilation");
  Attrs at = convAttrs(stride, padding, dilation, groups);
  return batched(x, static_cast<int64_t>(sp), [&](const Tensor& xb) {
    WEFT_CHECK(xb.dim() == static_cast<int64_t>(sp) + 2 && w.dim() == xb.dim(), Shape, op,
               ": expected input and weight of rank ", sp + 2, ", got ", shapeString(xb.sizes()),
               " and ", shapeString(w.sizes()));
    WEFT_CHECK(xb.size(1) == w.size(0), Shape, op, ": input ", shapeString(xb.sizes()), " has ",
               xb.size(1), " channels, but weight ", shapeString(w.sizes()), " expects ",
               w.size(0));
    // The transposed convolution is the input gradient of the convolution it transposes.
    Shape inputShape{xb.size(0), w.size(1) * groups};
    for (size_t i = 0; i < sp; ++i) {
      WEFT_CHECK(
          outputPadding[i] < stride[i] || outputPadding[i] < dilation[i], Value, op,
          ": output padding must be smaller than either stride or dilation, got output_padding=",
          outputPadding[i], " stride=", stride[i], " dilation=", dilation[i]);
      int64_t k = w.size(static_cast<int64_t>(2 + i));
      inputShape.push_back((xb.size(static_cast<int64_t>(2 + i)) - 1) * stride[i] - 2 * padding[i] +
                           dilation[i] * (k - 1) + outputPadding[i] + 1);
    }
    return addBias(conv_input_grad(xb, w, at, inputShape), bias, op);
  });
}

Tensor maxPoolNd(const Tensor& x, size_t sp, std::vector<int64_t> k, std::vector<int64_t> stride,
                 std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil,
                 const char* op) {
  k = expandParam(std::move(k), sp, op, "kernel_size");
  stride = stride.empty() ? k : expandParam(std::move(stride), sp, op, "stride");
  Attrs at{{"kernel_size", k},
           {"stride", stride},
           {"padding", expandParam(std::move(padding), sp, op, "padding")},
           {"dilation", expandParam(std::move(dilation), sp, op, "dilation")},
           {"ceil_mode", ceil}};
  return batched(x, static_cast<int64_t>(sp), [&](const Tensor& xb) {
    Tensor idx = dispatch(OpCode::MaxPoolArgmax, {xb}, at);
    Tensor values = xb.flatten(2).gather(2, idx.flatten(2));
    return values.reshape(idx.sizes());
  });
}

Tensor avgPoolNd(const Tensor& x, size_t sp, std::vector<int64_t> k, std::vector<int64_t> stride,
                 std::vector<int64_t> padding, const char* op) {
  k = expandParam(std::move(k), sp, op, "kernel_size");
  stride = stride.empty() ? k : expandParam(std::move(stride), sp, op, "stride");
  padding = expandParam(std::move(padding), sp, op, "padding");
  for (size_t i = 0; i < sp; ++i)
    WEFT_CHECK(padding[i] * 2 <= k[i], Value, op,
               ": pad should be at most half of effective kernel size, got pad=", padding[i],
               " kernel_size=", k[i]);
  return batched(x, static_cast<int64_t>(sp), [&](const Tensor& xb) {
    WEFT_CHECK(xb.dim() == static_cast<int64_t>(sp) + 2, Shape, op, ": expected a ", sp + 1,
               "-D or ", sp + 2, "-D input, got ", shapeString(xb.sizes()));
    WEFT_CHECK(xb.is_floating_point(), DType, op, ": expected a floating-point input, got ",
               dtypeName(xb.dtype()));
    // Averaging is a depthwise convolution with a constant kernel (zeros in the padding count).
    Shape ws{xb.size(1), 1};
    ws.insert(ws.end(), k.begin(), k.end());
    Tensor w = full(ws, 1.0 / static_cast<double>(numel(k)), xb.dtype());
    return conv(xb, w, convAttrs(stride, padding, std::vector<int64_t>(sp, 1), xb.size(1)));
  });
}

} // namespace

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t stride, int64_t padding,
              int64_t dilation, int64_t groups, std::source_location loc) {
  CallSite cs(loc);
  return convNd(x, w, bias, 1, {stride}, {padding}, {dilation}, groups, "conv1d");
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, ExpandingArray stride,
              ExpandingArray padding, ExpandingArray dilation, int64_t groups,
              std::source_location loc) {
  CallSite cs(loc);
  return convNd(x, w, bias, 2, std::move(stride), std::move(padding), std::move(dilation), groups,
                "conv2d");
}
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& bias, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation,
                        std::source_location loc) {
  CallSite cs(loc);
  return convTransposeNd(x, w, bias, 1, {stride}, {padding}, {output_padding}, groups, {dilation},
                         "conv_transpose1d");
}
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& bias, ExpandingArray stride,
                        ExpandingArray padding, ExpandingArray output_padding, int64_t groups,
                        ExpandingArray dilation, std::source_location loc) {
  CallSite cs(loc);
  return convTransposeNd(x, w, bias, 2, std::move(stride), std::move(padding),
                         std::move(output_padding), groups, std::move(dilation),
                         "conv_transpose2d");
}
Tensor max_pool1d(const Tensor& x, int64_t k, std::optional<int64_t> stride, int64_t padding,
                  int64_t dilation, bool ceil_mode, std::source_location loc) {
  CallSite cs(loc);
  return maxPoolNd(x, 1, {k}, {stride.value_or(k)}, {padding}, {dilation}, ceil_mode, "max_pool1d");
}
Tensor max_pool2d(const Tensor& x, ExpandingArray k, ExpandingArray stride, ExpandingArray padding,
                  ExpandingArray dilation, bool ceil_mode, std::source_location loc) {
  CallSite cs(loc);
  return autograd::name_grad_fn(maxPoolNd(x, 2, std::move(k), std::move(stride), std::move(padding),
                                          std::move(dilation), ceil_mode, "max_pool2d"),
                                "MaxPool2DWithIndicesBackward0", x);
}
Tensor avg_pool1d(const Tensor& x, int64_t k, std::optional<int64_t> stride, int64_t padding,
                  std::source_location loc) {
  CallSite cs(loc);
  return avgPoolNd(x, 1, {k}, {stride.value_or(k)}, {padding}, "avg_pool1d");
}
Tensor avg_pool2d(const Tensor& x, ExpandingArray k, ExpandingArray stride, ExpandingArray padding,
                  std::source_location loc) {
  CallSite cs(loc);
  return autograd::name_grad_fn(
      avgPoolNd(x, 2, std::move(k), std::move(stride), std::move(padding), "avg_pool2d"),
      "AvgPool2DBackward0", x);
}

Tensor gelu(const Tensor& x, bool tanhApprox, std::source_location loc) {
  CallSite cs(loc);
  if (tanhApprox) {
    Tensor inner = (x + x * x * x * 0.044715) * std::sqrt(2.0 / M_PI);
    return autograd::name_grad_fn(x * 0.5 * (inner.tanh() + 1.0), "GeluBackward0", x);
  }
  return autograd::name_grad_fn(x * 0.5 * ((x * M_SQRT1_2).erf() + 1.0), "GeluBackward0", x);
}

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!tensors.empty(), Value, "cat: expected a non-empty list of Tensors");
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < tensors.size(); ++i) {
    WEFT_CHECK(tensors[i].defined(), Value, "cat: tensor ", i, " is undefined");
    if (ref == nullptr && !(tensors[i].dim() == 1 && tensors[i].numel() == 0)) ref = &tensors[i];
  }
  DType t = tensors[0].dtype();
  for (const Tensor& x : tensors)
    t = promoteTypes(t, x.dtype());
  std::vector<Tensor> in;
  for (const Tensor& x : tensors)
    in.push_back(x.to(t));
  int64_t d = ref ? wrapDim(dim, ref->dim(), "cat") : 0;
  return dispatch(OpCode::Cat, in, Attrs{{"dim", d}});
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(!tensors.empty(), Value, "stack: expects a non-empty TensorList");
  for (size_t i = 0; i < tensors.size(); ++i)
    WEFT_CHECK(tensors[i].defined() && tensors[i].sizes() == tensors[0].sizes(), Shape,
               "stack: expects each tensor to be equal size, but got ",
               shapeString(tensors[0].sizes()), " at entry 0 and ",
               tensors[i].defined() ? shapeString(tensors[i].sizes()) : "undefined", " at entry ",
               i);
  int64_t d = wrapDim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (const Tensor& t : tensors)
    u.push_back(t.unsqueeze(d));
  return autograd::name_grad_fn(cat(u, d), "StackBackward0");
}

namespace {
/// split and chunk need a dimension to cut along.
void checkSplittable(const Tensor& x, const char* op) {
  WEFT_CHECK(x.defined() && x.dim() > 0, Value, op, ": expects at least a 1-dimensional tensor");
}
} // namespace

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  checkSplittable(x, "split");
  WEFT_CHECK(size > 0 || (size == 0 && x.size(dim) == 0), Value,
             "split: split_size must be positive, got ", size);
  int64_t d = wrapDim(dim, x.dim(), "split"), n = x.size(d);
  std::vector<Tensor> parts;
  for (int64_t s = 0; s < n; s += size)
    parts.push_back(x.narrow(d, s, std::min(size, n - s)));
  if (parts.empty()) parts.push_back(x);
  return parts;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim,
                          std::source_location loc) {
  CallSite cs(loc);
  checkSplittable(x, "split");
  int64_t d = wrapDim(dim, x.dim(), "split"), total = 0;
  for (int64_t s : sizes) {
    WEFT_CHECK(s >= 0, Value, "split: split sizes must be non-negative, got ", s);
    total += s;
  }
  WEFT_CHECK(total == x.size(d), Shape, "split: split sizes sum to ", total, " but dimension ", d,
             " has size ", x.size(d));
  std::vector<Tensor> parts;
  int64_t off = 0;
  for (int64_t s : sizes) {
    parts.push_back(x.narrow(d, off, s));
    off += s;
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  checkSplittable(x, "chunk");
  WEFT_CHECK(chunks > 0, Value, "chunk: number of chunks must be positive, got ", chunks);
  int64_t d = wrapDim(dim, x.dim(), "chunk"), n = x.size(d);
  if (n == 0) { // as torch.chunk: `chunks` empty pieces
    WEFT_CHECK(chunks <= (int64_t{1} << 20), Value, "chunk: ", chunks,
               " chunks of an empty dimension is too many tensors to make");
    return std::vector<Tensor>(static_cast<size_t>(chunks), x.narrow(d, 0, 0));
  }
  return split(x, n / chunks + (n % chunks != 0 ? 1 : 0), d);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& padding, double value,
           std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "pad: input is an undefined tensor");
  WEFT_CHECK(padding.size() % 2 == 0 && padding.size() / 2 <= static_cast<size_t>(x.dim()), Value,
             "pad: padding length must be divisible by 2 and at most twice the input rank (",
             x.dim(), "), got ", padding.size());
  Shape pads(2 * static_cast<size_t>(x.dim()), 0);
  for (size_t i = 0; i < padding.size() / 2; ++i) { // PyTorch lists the last dim first
    size_t d = static_cast<size_t>(x.dim()) - 1 - i;
    pads[2 * d] = padding[2 * i];
    pads[2 * d + 1] = padding[2 * i + 1];
  }
  return pad_dims(x, pads, value);
}

Tensor nonzero(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "nonzero: input is an undefined tensor");
  if (currentTrace() != nullptr) { // a data-dependent shape: only with value specialization
    Tensor value = readValue(x, "nonzero (or indexing with a boolean mask)");
    TraceScope paused(nullptr);
    return nonzero(value);
  }
  std::vector<bool> flags;
  {
    Tensor b = x.to(DType::Bool).contiguous();
    const bool* p = b.data_ptr<bool>();
    flags.assign(p, p + b.numel());
  }
  std::vector<int64_t> out;
  Shape strides = contiguousStrides(x.sizes());
  int64_t count = 0;
  for (size_t i = 0; i < flags.size(); ++i) {
    if (!flags[i]) continue;
    ++count;
    auto rem = static_cast<int64_t>(i);
    for (size_t d = 0; d < x.sizes().size(); ++d) {
      out.push_back(x.sizes()[d] == 0 ? 0 : rem / strides[d]);
      rem %= std::max<int64_t>(strides[d], 1);
    }
  }
  return from_vector(out, {count, x.dim()}).to(x.device());
}

Tensor embedding(const Tensor& weight, const Tensor& indices, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(weight.defined() && weight.dim() == 2, Shape, "embedding: weight must be 2-D, got ",
             weight.defined() ? shapeString(weight.sizes()) : "undefined");
  WEFT_CHECK(indices.defined() &&
                 (indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32),
             DType, "embedding: expected int64 or int32 indices, got ",
             indices.defined() ? dtypeName(indices.dtype()) : "undefined");
  Shape s = indices.sizes();
  s.push_back(weight.size(1));
  // No negative index, as PyTorch's; checked here, so that an error names embedding.
  Tensor rows =
      check_index(indices.reshape({-1}).to(DType::Int64), weight.size(0), 0, false, "embedding");
  return autograd::name_grad_fn(index_select(weight, 0, rows).reshape(s), "EmbeddingBackward0",
                                weight);
}

Tensor one_hot(const Tensor& indices, int64_t numClasses, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(indices.defined() && indices.dtype() == DType::Int64, DType,
             "one_hot: expected an int64 tensor, got ",
             indices.defined() ? dtypeName(indices.dtype()) : "undefined");
  if (numClasses < 0 && indices.numel() > 0) // inferred: a read of the values
    numClasses = std::max<int64_t>(indices.amax().item<int64_t>() + 1, 0);
  WEFT_CHECK(numClasses >= 0, Value,
             "one_hot: can not infer total number of classes from an empty tensor");
  // Each class value is an index into the new last dim of num_classes, checked (eagerly and
  // compiled) as one.
  Tensor classes = check_index(indices, numClasses, indices.dim(), false, "one_hot");
  return (classes.unsqueeze(-1) ==
          arange(numClasses, TensorOptions(kInt64).device(classes.device())))
      .to(DType::Int64);
}

Tensor Tensor::square(std::source_location loc) const {
  CallSite cs(loc);
  Tensor x = dtype() == DType::Bool ? cast(*this, DType::Int64) : *this; // as pow(x, 2)
  return x * x;
}
Tensor Tensor::nan_to_num(std::optional<double> nan, std::optional<double> posinf,
                          std::optional<double> neginf, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(defined(), Value, "nan_to_num: called on an undefined tensor");
  if (!isFloating(dtype())) return clone();
  const double inf = std::numeric_limits<double>::infinity(), big = largestFinite(dtype());
  // Every mask from the input: a replacement is never replaced again (nan=inf stays inf).
  Tensor r = where(isnan(), full({}, nan.value_or(0.0), dtype()), *this);
  r = where(eq(inf), full({}, posinf.value_or(big), dtype()), r);
  return where(eq(-inf), full({}, neginf.value_or(-big), dtype()), r);
}
namespace {
void checkLerp(const Tensor& self, const Tensor& end, const Tensor* weight) {
  WEFT_CHECK(self.defined() && end.defined() && (weight == nullptr || weight->defined()), Value,
             "lerp: called with an undefined tensor");
  WEFT_CHECK(isFloating(self.dtype()), DType, "lerp: expected a floating-point input, got ",
             dtypeName(self.dtype()));
  WEFT_CHECK(end.dtype() == self.dtype() && (weight == nullptr || weight->dtype() == self.dtype()),
             DType, "lerp: expected end", weight != nullptr ? " and weight" : "", " of dtype ",
             dtypeName(self.dtype()), ", got ", dtypeName(end.dtype()),
             weight != nullptr ? std::string(" and ") + std::string(dtypeName(weight->dtype()))
                               : std::string());
}
} // namespace
Tensor Tensor::lerp(const Tensor& end, const Tensor& weight, std::source_location loc) const {
  CallSite cs(loc);
  checkLerp(*this, end, &weight);
  Tensor diff = end - *this;
  return where(weight.abs().lt(0.5), *this + weight * diff, end - diff * (1.0 - weight));
}
Tensor Tensor::lerp(const Tensor& end, Scalar weight, std::source_location loc) const {
  CallSite cs(loc);
  checkLerp(*this, end, nullptr);
  const double w = weight.toDouble();
  Tensor diff = end - *this;
  return std::abs(w) < 0.5 ? *this + diff * w : end - diff * (1.0 - w);
}
namespace {
/// addcmul/addcdiv's `value` in the result's dtype: truncated for integers, as PyTorch.
Scalar addcValue(const Tensor& self, const Tensor& t1, const Tensor& t2, Scalar value) {
  WEFT_CHECK(self.defined() && t1.defined() && t2.defined(), Value,
             "addcmul/addcdiv: called with an undefined tensor");
  const DType t = promoteTypes(self.dtype(), promoteTypes(t1.dtype(), t2.dtype()));
  return isFloating(t) ? value : Scalar(static_cast<int64_t>(value.toDouble()));
}
} // namespace
// As PyTorch's kernels: self + value * t1 * t2 and self + value * t1 / t2, in that order.
Tensor Tensor::addcmul(const Tensor& t1, const Tensor& t2, Scalar value,
                       std::source_location loc) const {
  CallSite cs(loc);
  return *this + t1 * addcValue(*this, t1, t2, value) * t2;
}
Tensor Tensor::addcdiv(const Tensor& t1, const Tensor& t2, Scalar value,
                       std::source_location loc) const {
  CallSite cs(loc);
  addcValue(*this, t1, t2, value);
  WEFT_CHECK(isFloating(t1.dtype()) || isFloating(t2.dtype()), DType,
             "addcdiv: integer division is not supported (as in PyTorch): convert t1 or t2 to a "
             "floating-point dtype");
  return *this + t1 * value / t2;
}

Tensor logaddexp(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "logaddexp: called with an undefined tensor");
  const DType t = result_type(a, b);
  WEFT_CHECK(isFloating(t), DType, "logaddexp: expected floating-point inputs, got ",
             dtypeName(a.dtype()), " and ", dtypeName(b.dtype()));
  Tensor x = a.to(t), y = b.to(t);
  Tensor r = maximum(x, y) + (x - y).abs().neg().exp().log1p();
  return where(x.eq(y).logical_and(x.isinf()), x, r); // inf - inf would be NaN
}
Tensor Tensor::frac(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("frac");
  WEFT_CHECK(isFloating(dtype()), DType, "frac: expected a floating-point input, got ",
             dtypeName(dtype()));
  return *this - trunc();
}

Tensor isclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equalNan,
               std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "isclose: called with an undefined tensor");
  WEFT_CHECK(a.dtype() == b.dtype(), DType, "isclose: ", dtypeName(a.dtype()), " did not match ",
             dtypeName(b.dtype()));
  WEFT_CHECK(rtol >= 0 && atol >= 0, Value,
             "isclose: rtol and atol must be greater than or equal to zero, got ", rtol, " and ",
             atol);
  Tensor close = a.eq(b);
  if (equalNan && isFloating(a.dtype())) close = close.logical_or(a.isnan().logical_and(b.isnan()));
  // Integers compare in float64; infinities only by equality above.
  Tensor x = isFloating(a.dtype()) ? a : a.to(DType::Float64);
  Tensor y = isFloating(b.dtype()) ? b : b.to(DType::Float64);
  Tensor error = (x - y).abs();
  return close.logical_or(error.isfinite().logical_and(error.le(y.abs() * rtol + atol)));
}
bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equalNan,
              std::source_location loc) {
  CallSite cs(loc);
  return isclose(a, b, rtol, atol, equalNan).all().item<bool>();
}
bool equal(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "equal: called with an undefined tensor");
  return a.sizes() == b.sizes() && a.eq(b).all().item<bool>();
}

Tensor Tensor::type_as(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(other.defined(), Value, "type_as: other is an undefined tensor");
  return to(other.dtype());
}
Tensor Tensor::new_zeros(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("new_zeros");
  return zeros(std::move(shape), dtype());
}
Tensor Tensor::new_ones(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("new_ones");
  return ones(std::move(shape), dtype());
}
Tensor Tensor::new_full(IntArrayRef shape, Scalar value, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("new_full");
  return full(std::move(shape), value, dtype());
}
Tensor Tensor::new_empty(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("new_empty");
  return empty(std::move(shape), dtype());
}

#define WEFT_ITSELF(name)                                                                          \
  Tensor Tensor::name(std::source_location loc) const {                                            \
    CallSite cs(loc);                                                                              \
    checkDefined(#name);                                                                           \
    return *this;                                                                                  \
  }
WEFT_ITSELF(conj)
WEFT_ITSELF(conj_physical)
WEFT_ITSELF(resolve_conj)
WEFT_ITSELF(resolve_neg)
#undef WEFT_ITSELF
bool Tensor::is_signed() const {
  checkDefined("is_signed");
  return dtype() != DType::Bool && dtype() != DType::UInt8;
}
bool Tensor::is_nonzero(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("is_nonzero");
  WEFT_CHECK(numel() == 1, Value, "Boolean value of Tensor with ",
             numel() == 0 ? "no values" : "more than one value", " is ambiguous");
  return item<double>() != 0;
}
Tensor Tensor::angle(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("angle");
  Tensor x = floatingOrFloat32(*this);
  // NaN stays NaN; the gradient is 0 everywhere, as PyTorch's for real inputs (sign() * 0 keeps
  // the result differentiable, its gradient 0).
  Tensor pi = where(x.lt(0), full({}, std::numbers::pi, x.dtype()), zeros({}, x.dtype()));
  return where(x.ne(x), x.detach(), pi) + x.sign() * 0.0;
}
namespace {
/// Where `x` is the infinity `inf` (false everywhere for integers).
Tensor isInfinity(const Tensor& x, double inf, const char* op) {
  WEFT_CHECK(x.defined(), Value, op, ": called on an undefined tensor");
  return isFloating(x.dtype()) ? x.eq(inf) : zeros(x.sizes(), DType::Bool);
}
} // namespace
Tensor Tensor::isposinf(std::source_location loc) const {
  CallSite cs(loc);
  return isInfinity(*this, std::numeric_limits<double>::infinity(), "isposinf");
}
Tensor Tensor::isneginf(std::source_location loc) const {
  CallSite cs(loc);
  return isInfinity(*this, -std::numeric_limits<double>::infinity(), "isneginf");
}
Tensor Tensor::isreal(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("isreal");
  return ones(sizes(), DType::Bool);
}
Tensor Tensor::prelu(const Tensor& weight, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("prelu");
  WEFT_CHECK(weight.defined(), Value, "prelu: the weight is undefined");
  WEFT_CHECK(weight.dim() <= 1, Shape, "prelu: expected the weight to be 0-D or 1-D, got ",
             weight.dim(), "-D");
  const int64_t channels = dim() >= 2 ? size(1) : 1;
  WEFT_CHECK(weight.numel() == 1 || weight.numel() == channels, Shape,
             "prelu: mismatch of parameter numbers and input channel size. Found parameter "
             "numbers = ",
             weight.numel(), " and channel size = ", channels, ".");
  Shape ws(static_cast<size_t>(std::max<int64_t>(dim() - 1, 0)), 1);
  if (!ws.empty()) ws[0] = weight.numel();
  Tensor w = weight.reshape(ws.empty() ? Shape{} : ws);
  return autograd::name_grad_fn(where(gt(0), *this, w * *this), "PreluBackward0", *this);
}
Tensor Tensor::positive(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("positive");
  WEFT_CHECK(dtype() != DType::Bool, DType, "positive: the `+` operator, on a bool tensor is not ",
             "supported");
  return *this;
}

Tensor floatingOrFloat32(const Tensor& x) {
  return isFloating(x.dtype()) ? x : x.to(DType::Float32);
}

Tensor Tensor::deg2rad(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("deg2rad");
  return floatingOrFloat32(*this) * (std::numbers::pi / 180.0);
}
Tensor Tensor::rad2deg(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("rad2deg");
  return floatingOrFloat32(*this) * (180.0 / std::numbers::pi);
}

namespace {

/// `a` and `b` in their floating result type (integers promote to float32), for `op`.
std::pair<Tensor, Tensor> floatingPair(const Tensor& a, const Tensor& b, const char* op) {
  WEFT_CHECK(a.defined() && b.defined(), Value, op, ": called with an undefined tensor");
  DType t = result_type(a, b);
  if (!isFloating(t)) t = DType::Float32;
  return {a.to(t), b.to(t)};
}

} // namespace

Tensor hypot(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "hypot: called with an undefined tensor");
  WEFT_CHECK(isFloating(result_type(a, b)), DType, "hypot: expected floating-point inputs, got ",
             dtypeName(a.dtype()), " and ", dtypeName(b.dtype()));
  auto [x, y] = floatingPair(a, b, "hypot");
  // sqrt(x^2 + y^2) (overflowing where a square does: beyond about 1.8e19 in float32); an
  // infinite side makes it infinite even beside a NaN, as the C library's hypot.
  Tensor r = (x * x + y * y).sqrt();
  return where(x.isinf().logical_or(y.isinf()), full({}, INFINITY, r.dtype()), r);
}

namespace {

/// fmax (`larger`) or fmin of `a` and `b` in their result type: the larger (smaller), a NaN only
/// where both are; ties and a NaN `b` pick a, which gets the gradient there (as PyTorch's).
Tensor pickIgnoringNaN(const Tensor& a, const Tensor& b, bool larger, const char* op) {
  WEFT_CHECK(a.defined() && b.defined(), Value, op, ": called with an undefined tensor");
  const DType t = result_type(a, b);
  Tensor x = a.to(t), y = b.to(t);
  return where((larger ? x.ge(y) : x.le(y)).logical_or(y.isnan()), x, y);
}

} // namespace

Tensor fmax(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  return pickIgnoringNaN(a, b, true, "fmax");
}
Tensor fmin(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  return pickIgnoringNaN(a, b, false, "fmin");
}

Tensor Tensor::float_power(const Tensor& exponent, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("float_power");
  WEFT_CHECK(exponent.defined(), Value, "float_power: called with an undefined tensor");
  return to(DType::Float64).pow(exponent.to(DType::Float64));
}
Tensor Tensor::float_power(Scalar exponent, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("float_power");
  return to(DType::Float64).pow(exponent.toDouble());
}

Tensor logaddexp2(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(a.defined() && b.defined(), Value, "logaddexp2: called with an undefined tensor");
  const DType t = result_type(a, b);
  WEFT_CHECK(isFloating(t), DType, "logaddexp2: expected floating-point inputs, got ",
             dtypeName(a.dtype()), " and ", dtypeName(b.dtype()));
  Tensor x = a.to(t), y = b.to(t);
  Tensor r = maximum(x, y) + (x - y).abs().neg().exp2().log1p() * (1.0 / std::numbers::ln2);
  return where(x.eq(y).logical_and(x.isinf()), x, r); // inf - inf would be NaN
}

Tensor ldexp(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  auto [x, y] = floatingPair(a, b, "ldexp");
  return x * y.exp2();
}

Tensor Tensor::sinc(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("sinc");
  const Tensor x = floatingOrFloat32(*this);
  // sin(pi x) / (pi x), 1 at 0; the quotient reads 1 there instead of 0, so its unused branch
  // never divides by zero (whose NaN would reach the gradient).
  Tensor zero = x.eq(0.0), safe = where(zero, full({}, 1.0, x.dtype()), x) * std::numbers::pi;
  return where(zero, full({}, 1.0, x.dtype()), safe.sin() / safe);
}

Tensor Tensor::polygamma(int64_t n, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("polygamma");
  WEFT_CHECK(n >= 0, Value, "polygamma(n, x) does not support negative n, got ", n);
  const Tensor x = floatingOrFloat32(*this);
  if (n == 0) return x.digamma();
  // (-1)^(n+1) n! zeta(n + 1, x), in float32 for 16-bit inputs (n + 1 may not fit them).
  const double order = static_cast<double>(n) + 1, factorial = std::tgamma(order);
  const Tensor wide = x.element_size() < 4 ? x.to(DType::Float32) : x;
  Tensor r = full({}, order, wide.dtype()).zeta(wide) * (n % 2 == 1 ? factorial : -factorial);
  return r.to(x.dtype());
}
Tensor polygamma(int64_t n, const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return x.polygamma(n);
}

Tensor Tensor::mvlgamma(int64_t p, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("mvlgamma");
  WEFT_CHECK(p >= 1, Value, "mvlgamma: p has to be greater than or equal to 1, got ", p);
  const Tensor x = floatingOrFloat32(*this);
  if (currentTrace() == nullptr && x.numel() > 0) // PyTorch's domain check (it reads values)
    WEFT_CHECK(x.gt((static_cast<double>(p) - 1) / 2).all().item<bool>(), Value,
               "mvlgamma: all elements must be greater than (p-1)/2");
  // p (p - 1) / 4 log(pi) + sum_{i < p} lgamma(x - i / 2): one op over a new last dim of p terms
  // (the allocation refuses an absurd p).
  Tensor halves = arange(p, TensorOptions(x.dtype()).device(x.device())) * 0.5;
  Tensor sum = (x.unsqueeze(-1) - halves).lgamma().sum({-1});
  const double pd = static_cast<double>(p);
  return sum + pd * (pd - 1) / 4 * std::log(std::numbers::pi);
}

Tensor Tensor::logit(std::optional<double> eps, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("logit");
  Tensor z = floatingOrFloat32(*this);
  if (eps) z = z.clamp(*eps, 1.0 - *eps);
  // log(z) - log(1 - z): at 0 and 1 an infinite gradient, as PyTorch's 1 / (z (1 - z)).
  return z.log() - z.neg().log1p();
}

namespace {
/// x * log(y) (xlogy), or x * log1p(y) (xlog1py): 0 where x is 0 (unless y is NaN). x reaches the
/// product only where it counts, so its gradient there is 0 (PyTorch: xlogy(0, y) = 0); y's is
/// x / y there, 0 / y (NaN at y = 0), as PyTorch's.
Tensor xTimesLog(const Tensor& a, const Tensor& b, bool plusOne, const char* op) {
  auto [x, y] = floatingPair(a, b, op);
  Tensor zero = x.eq(0.0).logical_and(y.isnan().logical_not());
  Tensor kept = where(zero, full({}, 0.0, x.dtype()), x);
  return where(zero, full({}, 0.0, x.dtype()), kept * (plusOne ? y.log1p() : y.log()));
}
} // namespace

Tensor xlogy(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  return xTimesLog(a, b, false, "xlogy");
}

Tensor xlog1py(const Tensor& a, const Tensor& b, std::source_location loc) {
  CallSite cs(loc);
  return xTimesLog(a, b, true, "xlog1py");
}

Tensor Tensor::signbit(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("signbit");
  if (dtype() == DType::Bool) return zeros(sizes(), DType::Bool);
  if (!isFloating(dtype())) return lt(0);
  // Negative, or a zero whose reciprocal is -inf (-0.0). A NaN counts as positive: its sign bit
  // is not visible to comparisons.
  return lt(0).logical_or(eq(0).logical_and(reciprocal().lt(0)));
}

Tensor Tensor::copysign(const Tensor& other, std::source_location loc) const {
  CallSite cs(loc);
  auto [x, y] = floatingPair(*this, other, "copysign");
  return where(y.signbit(), x.abs().neg(), x.abs());
}
Tensor Tensor::copysign(Scalar other, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("copysign");
  const Tensor x = floatingOrFloat32(*this);
  return std::signbit(other.toDouble()) ? x.abs().neg() : x.abs();
}

Tensor Tensor::heaviside(const Tensor& values, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("heaviside");
  WEFT_CHECK(values.defined() && values.dtype() == dtype(), DType,
             "heaviside: not implemented for tensors with different dtypes (", dtypeName(dtype()),
             " and ", values.defined() ? dtypeName(values.dtype()) : "undefined", ")");
  return where(eq(0), values, gt(0).to(dtype()));
}

Tensor Tensor::hardshrink(double lambd, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("hardshrink");
  return where(abs().le(lambd), zeros({}, dtype()), *this); // NaN passes, as PyTorch
}

} // namespace weft
