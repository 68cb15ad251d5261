// nn::functional: layers, activations and losses as compositions of primitives, so each gets its
// gradient from the primitives' rules and compiles like any other code.
#include "weft/nn/Functional.h"

#include "weft/Autograd.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace weft::nn::functional {
namespace {

Tensor reduce(const Tensor& loss, Reduction r) {
  switch (r) {
  case Reduction::None:
    return loss;
  case Reduction::Mean:
    return loss.mean();
  case Reduction::Sum:
    return loss.sum();
  }
  return loss;
}

void checkSameShape(const Tensor& input, const Tensor& target, const char* op) {
  WEFT_CHECK(input.defined() && target.defined(), Value, op, ": undefined input or target");
  WEFT_CHECK(input.sizes() == target.sizes(), Shape, op, ": input shape ",
             shapeString(input.sizes()), " and target shape ", shapeString(target.sizes()),
             " differ");
}

/// Shape with 1 everywhere but `dim` of a rank-`rank` tensor, where it is `size`.
Shape alongDim(int64_t rank, int64_t dim, int64_t size) {
  Shape s(static_cast<size_t>(rank), 1);
  s[static_cast<size_t>(dim)] = size;
  return s;
}

/// How many elements of `x` lie along `dims`, as a 0-d float64 tensor (a 16-bit float cannot
/// hold a count past 65504) to divide by where PyTorch divides by a size. Traced, it is ones
/// summed over those dims (constant-folded), so that under compile()'s dynamic_dim the padded
/// rows do not count, as in mean().
Tensor countAlong(const Tensor& x, const Shape& dims) {
  Shape along(static_cast<size_t>(x.dim()), 1);
  for (int64_t d : dims)
    along[static_cast<size_t>(d)] = x.size(d);
  if (autograd::tracing(x)) return full({}, 1.0, DType::Float64).expand(along).sum();
  return full({}, static_cast<double>(numel(along)), DType::Float64);
}

/// `t`, its grad_fn shown as PyTorch names the op (autograd::name_grad_fn).
Tensor named(const Tensor& t, const char* name, const Tensor& input) {
  return autograd::name_grad_fn(t, name, input);
}

/// The trailing `n` dimensions of a rank-`rank` tensor.
Shape trailingDims(int64_t rank, size_t n) {
  Shape dims;
  for (int64_t d = rank - static_cast<int64_t>(n); d < rank; ++d)
    dims.push_back(d);
  return dims;
}

void checkTrailing(const Tensor& x, const Shape& normalized, const char* op) {
  WEFT_CHECK(x.defined(), Value, op, ": undefined input");
  bool ok = normalized.size() <= static_cast<size_t>(x.dim());
  for (size_t i = 0; ok && i < normalized.size(); ++i)
    ok = x.sizes()[x.sizes().size() - normalized.size() + i] == normalized[i];
  WEFT_CHECK(ok, Shape, op, ": normalized_shape ", shapeString(normalized),
             " does not match the trailing dimensions of input ", shapeString(x.sizes()));
}

Tensor affine(Tensor y, const Tensor& weight, const Tensor& bias) {
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

/// Per-element class weights for `target` (1 where there are none) and the mask of targets that
/// count (not ignore_index), for nll_loss and cross_entropy.
struct Picked {
  Tensor logp;   ///< -log p of each target's class (0 where ignored)
  Tensor weight; ///< its class weight (0 where ignored)
};
Picked pickTargets(const Tensor& logp, const Tensor& target, const Tensor& weight,
                   int64_t ignoreIndex, const char* op) {
  WEFT_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32, DType, op,
             ": class-index targets must be int64, got ", dtypeName(target.dtype()));
  bool batched = logp.dim() >= 2;
  Shape expected = logp.sizes();
  expected.erase(expected.begin() + (batched ? 1 : 0));
  WEFT_CHECK(target.sizes() == expected, Shape, op, ": target shape ", shapeString(target.sizes()),
             " does not fit input ", shapeString(logp.sizes()), " (expected ",
             shapeString(expected), ")");
  int64_t classDim = batched ? 1 : 0;
  Tensor t = target.to(DType::Int64);
  Tensor keep = t != ignoreIndex;
  // A target out of bounds names the loss, as PyTorch's; ignored ones may be anything.
  Tensor safe =
      check_index(where(keep, t, zeros_like(t)), logp.size(classDim), classDim, false, op);
  Tensor picked = -logp.gather(classDim, safe.unsqueeze(classDim)).squeeze(classDim);
  Tensor w = keep.to(logp.dtype());
  if (weight.defined()) {
    WEFT_CHECK(weight.dim() == 1 && weight.size(0) == logp.size(classDim), Shape, op,
               ": weight must have one value per class (", logp.size(classDim), "), got ",
               shapeString(weight.sizes()));
    w = w * weight.index_select(0, safe.reshape({-1})).reshape(safe.sizes());
  }
  return {picked * w, w};
}

Tensor reduceWeighted(const Picked& p, Reduction r) {
  if (r == Reduction::Mean) return p.logp.sum() / p.weight.sum();
  return reduce(p.logp, r);
}

/// `x` where `taken`, 0 elsewhere: the input of a where() branch, so that the branch's value where
/// it is not taken (exp overflowing to inf) cannot turn its zero gradient there into 0 * inf.
Tensor takenOnly(const Tensor& taken, const Tensor& x) {
  return where(taken, x, 0.0);
}

/// log(1 + exp(-|x|)), which never overflows, with |x|'s derivative at 0 taken as 1, as PyTorch's
/// log_sigmoid and binary_cross_entropy_with_logits backward take it: their derivatives at 0 are
/// then sigmoid(0) = 0.5 and 0.5 - target (abs's 0 at 0 would lose the 0.5).
Tensor log1pExpNegAbs(const Tensor& x) {
  return where(x < 0, x, x.neg()).exp().log1p();
}

/// PyTorch's EPSILON of binary_cross_entropy and cosine_embedding_loss: a float 1e-12.
constexpr double kFloatEps12 = static_cast<double>(1e-12f);

/// log(p) and log(1 - p) as binary_cross_entropy takes them: clamped at -100 (a probability of
/// exactly 0 or 1 has a finite loss), with derivatives 1/p and -1/(1 - p) where p (1 - p) is at
/// least PyTorch's EPSILON and (1 - p) / EPSILON and -p / EPSILON nearer 0 or 1, which make the
/// loss's gradient PyTorch's (p - target) / max(p (1 - p), EPSILON): finite at exactly 0 and 1.
std::pair<Tensor, Tensor> clampedLogs(const Tensor& p) {
  Tensor edge = (1.0 - p) * p < kFloatEps12;
  Tensor inner = where(edge, 0.5, p);           // the logs' inputs where they are taken
  Tensor fixed = p.detach(), moved = p - fixed; // moved: 0, with derivative 1
  Tensor logp = where(edge, fixed.log().clamp(-100.0) + moved * ((1.0 - p) * (1.0 / kFloatEps12)),
                      inner.log().clamp(-100.0));
  Tensor log1mp = where(edge, (1.0 - fixed).log().clamp(-100.0) - moved * (p * (1.0 / kFloatEps12)),
                        (1.0 - inner).log().clamp(-100.0));
  return {logp, log1mp};
}

/// The checks every dropout makes, in every mode (an error does not wait for training).
void checkDropout(const Tensor& x, double p, const char* op) {
  WEFT_CHECK(p >= 0 && p <= 1, Value, op, ": dropout probability has to be between 0 and 1, ",
             "but got ", p);
  WEFT_CHECK(x.defined(), Value, op, ": undefined input");
  WEFT_CHECK(x.is_floating_point(), DType, op, ": expected a floating input, got ",
             dtypeName(x.dtype()));
}

/// x's shape with 1 from dim `from` on: one draw per channel (per sample and channel).
Shape channelNoise(const Tensor& x, int64_t from) {
  Shape noise = x.sizes();
  std::fill(noise.begin() + from, noise.end(), 1);
  return noise;
}

/// The noise shape of feature dropout: (N, C, 1, ...), for inputs of 2 or more dims.
Shape featureNoise(const Tensor& x, const char* op) {
  WEFT_CHECK(x.dim() >= 2, Shape, op,
             ": feature dropout needs an input of at least 2 dims (N, C, *), got shape ",
             shapeString(x.sizes()));
  return channelNoise(x, 2);
}

/// The noise shape of dropout2d/3d: per channel of a `batched`-dim input, or of an unbatched one
/// (a dim fewer, channels first), as LibTorch's.
Shape batchedFeatureNoise(const Tensor& x, int64_t batched, const char* op, const char* layout) {
  WEFT_CHECK(x.dim() == batched || x.dim() == batched - 1, Shape, op,
             ": expected an input of shape ", layout, " or one without its batch dim, got ",
             shapeString(x.sizes()), " (dropout drops elements of other shapes)");
  return channelNoise(x, x.dim() == batched ? 2 : 1);
}

/// ATen's _dropout_impl (ATen/native/Dropout.cpp) with one draw per element of `noise` (x's shape,
/// or 1 along the dims a draw covers): the kept scaled by 1/(1-p) and the dropped zeroed, or with
/// `alpha` PyTorch's affine fill; written into `x` when `inplace`.
Tensor applyDropout(const Tensor& x, double p, bool training, bool inplace, const Shape& noise,
                    bool alpha) {
  if (!training || p == 0 || x.numel() == 0) return x;
  Tensor out = x; // a handle to x's memory, for the in-place forms
  if (p == 1) return inplace ? out.mul_(0.0) : x * 0.0;
  Tensor keep = bernoulli(noise, 1 - p, TensorOptions().dtype(x.dtype()).device(x.device()));
  if (!alpha) {
    Tensor scale = keep * (1.0 / (1 - p));
    return inplace ? out.mul_(scale) : x * scale;
  }
  // SELU's scale * alpha: a dropped element becomes -kAlpha before the affine a x + b.
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1) * (1 - p));
  Tensor shift = (keep - 1.0) * (kAlpha * a) + kAlpha * a * p;
  return inplace ? out.mul_(keep * a).add_(shift) : x * (keep * a) + shift;
}

} // namespace

// ---- layers ----

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && weight.defined() && weight.dim() == 2, Shape,
             "linear: expected a 2-D weight (out_features, in_features)");
  WEFT_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), Shape, "linear: input ",
             shapeString(x.sizes()), " does not end in in_features = ", weight.size(1));
  Tensor y = x.matmul(weight.t());
  if (!bias.defined()) return y;
  return x.dim() == 2 ? named(y + bias, "AddmmBackward0", x) : y + bias; // as PyTorch's addmm
}

Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias,
                std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(weight.defined() && weight.dim() == 3, Shape,
             "bilinear: expected a 3-D weight (out, in1, in2)");
  int64_t out = weight.size(0), in1 = weight.size(1), in2 = weight.size(2);
  WEFT_CHECK(x1.defined() && x2.defined() && x1.size(-1) == in1 && x2.size(-1) == in2, Shape,
             "bilinear: inputs ", shapeString(x1.sizes()), " and ", shapeString(x2.sizes()),
             " do not end in ", in1, " and ", in2);
  // (.., in1) @ (in1, out * in2) -> (.., out, in2), then the dot product with x2.
  Tensor t = x1.matmul(weight.permute({1, 0, 2}).reshape({in1, out * in2}));
  Shape s = x1.sizes();
  s.back() = out;
  s.push_back(in2);
  Tensor y = (t.reshape(s) * x2.unsqueeze(-2)).sum({-1});
  return bias.defined() ? y + bias : y;
}

Tensor dropout(const Tensor& x, double p, bool training, bool inplace, std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "dropout");
  return applyDropout(x, p, training, inplace, x.sizes(), false);
}

Tensor feature_dropout(const Tensor& x, double p, bool training, bool inplace,
                       std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "feature_dropout");
  return applyDropout(x, p, training, inplace, featureNoise(x, "feature_dropout"), false);
}

Tensor dropout2d(const Tensor& x, double p, bool training, bool inplace, std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "dropout2d");
  Shape noise = batchedFeatureNoise(x, 4, "dropout2d", "(N, C, H, W)");
  return applyDropout(x, p, training, inplace, noise, false);
}

Tensor dropout3d(const Tensor& x, double p, bool training, bool inplace, std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "dropout3d");
  Shape noise = batchedFeatureNoise(x, 5, "dropout3d", "(N, C, D, H, W)");
  return applyDropout(x, p, training, inplace, noise, false);
}

Tensor alpha_dropout(const Tensor& x, double p, bool training, bool inplace,
                     std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "alpha_dropout");
  return applyDropout(x, p, training, inplace, x.sizes(), true);
}

Tensor feature_alpha_dropout(const Tensor& x, double p, bool training, bool inplace,
                             std::source_location loc) {
  CallSite cs(loc);
  checkDropout(x, p, "feature_alpha_dropout");
  return applyDropout(x, p, training, inplace, featureNoise(x, "feature_alpha_dropout"), true);
}

Tensor batch_norm(const Tensor& x, const Tensor& runningMean, const Tensor& runningVar,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && x.dim() >= 2, Shape, "batch_norm: expected input of 2 or more dims");
  int64_t c = x.size(1);
  Shape dims{0};
  for (int64_t d = 2; d < x.dim(); ++d)
    dims.push_back(d);
  Shape bshape = alongDim(x.dim(), 1, c);
  Tensor mean, var;
  if (training) {
    int64_t n = x.numel() / std::max<int64_t>(c, 1);
    WEFT_CHECK(n > 1, Value, "batch_norm: expected more than 1 value per channel when training, ",
               "got input ", shapeString(x.sizes()));
    mean = x.mean(dims, true);
    var = (x - mean).pow(2).mean(dims, true);
    if (runningMean.defined() && runningVar.defined()) {
      NoGradGuard guard;
      Tensor count = countAlong(x, dims);       // the valid rows' count under dynamic_dim
      Tensor rm = runningMean, rv = runningVar; // handles to the same buffers, written in place
      rm.mul_(1 - momentum).add_(mean.reshape({c}), momentum);
      rv.mul_(1 - momentum).add_(var.reshape({c}) * (count / (count - 1)), momentum);
    }
  } else {
    WEFT_CHECK(runningMean.defined() && runningVar.defined(), Value,
               "batch_norm: evaluation needs running_mean and running_var");
    mean = runningMean.reshape(bshape);
    var = runningVar.reshape(bshape);
  }
  Tensor y = (x - mean) * (var + eps).rsqrt();
  return named(affine(y, weight.defined() ? weight.reshape(bshape) : weight,
                      bias.defined() ? bias.reshape(bshape) : bias),
               "NativeBatchNormBackward0", x);
}

Tensor layer_norm(const Tensor& x, IntArrayRef normalized, const Tensor& weight, const Tensor& bias,
                  double eps, std::source_location loc) {
  CallSite cs(loc);
  checkTrailing(x, normalized, "layer_norm");
  Shape dims = trailingDims(x.dim(), normalized.size());
  Tensor mean = x.mean(dims, true);
  Tensor centered = x - mean;
  Tensor var = (centered * centered).mean(dims, true);
  return named(affine(centered * (var + eps).rsqrt(), weight, bias), "NativeLayerNormBackward0", x);
}

Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                  double eps, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && x.dim() >= 2, Shape, "group_norm: expected input of 2 or more dims");
  int64_t c = x.size(1);
  WEFT_CHECK(groups > 0 && c % groups == 0, Value, "group_norm: ", c,
             " channels are not divisible into ", groups, " groups");
  Tensor g = x.reshape({x.size(0), groups, -1});
  Tensor mean = g.mean({2}, true);
  Tensor centered = g - mean;
  Tensor var = (centered * centered).mean({2}, true);
  Tensor y = (centered * (var + eps).rsqrt()).reshape(x.sizes());
  Shape bshape = alongDim(x.dim(), 1, c);
  return named(affine(y, weight.defined() ? weight.reshape(bshape) : weight,
                      bias.defined() ? bias.reshape(bshape) : bias),
               "NativeGroupNormBackward0", x);
}

Tensor rms_norm(const Tensor& x, IntArrayRef normalized, const Tensor& weight,
                std::optional<double> eps, std::source_location loc) {
  CallSite cs(loc);
  checkTrailing(x, normalized, "rms_norm");
  double e = eps.value_or(x.dtype() == DType::Float64 ? std::numeric_limits<double>::epsilon()
                                                      : std::numeric_limits<float>::epsilon());
  Shape dims = trailingDims(x.dim(), normalized.size());
  Tensor y = x * ((x * x).mean(dims, true) + e).rsqrt();
  return weight.defined() ? y * weight : y;
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> paddingIdx,
                 std::source_location loc) {
  CallSite cs(loc);
  Tensor out = weft::embedding(weight, indices);
  if (!paddingIdx) return named(out, "EmbeddingBackward0", weight);
  int64_t n = weight.size(0), pad = *paddingIdx;
  WEFT_CHECK(pad >= -n && pad < n, Index, "embedding: padding_idx ", pad,
             " must be within num_embeddings (", n, ")");
  if (pad < 0) pad += n;
  // The padding row's value, without a gradient path to it.
  return named(where((indices == pad).unsqueeze(-1), out.detach(), out), "EmbeddingBackward0",
               weight);
}

Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray outputSize, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), Shape,
             "adaptive_avg_pool2d: expected a 3-D or 4-D input, got ",
             x.defined() ? shapeString(x.sizes()) : "undefined");
  if (outputSize.size() == 1) outputSize.push_back(outputSize[0]);
  WEFT_CHECK(outputSize.size() == 2 && outputSize[0] > 0 && outputSize[1] > 0, Value,
             "adaptive_avg_pool2d: output_size must be 1 or 2 positive values");
  Tensor y = x;
  for (int64_t axis : {-2, -1}) { // rows, then columns: PyTorch's windows [floor, ceil)
    int64_t in = y.size(axis), out = outputSize[axis == -2 ? 0 : 1];
    if (in == out) continue;
    std::vector<Tensor> parts;
    for (int64_t i = 0; i < out; ++i) {
      int64_t start = i * in / out, end = ((i + 1) * in + out - 1) / out;
      parts.push_back(y.narrow(axis, start, end - start).mean({axis}, true));
    }
    y = cat(parts, axis);
  }
  bool global = outputSize[0] == 1 && outputSize[1] == 1; // PyTorch takes a mean there
  return named(y, global ? "MeanBackward1" : "AdaptiveAvgPool2DBackward0", x);
}

Tensor pixel_shuffle(const Tensor& x, int64_t r, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && x.dim() >= 3, Shape, "pixel_shuffle: expected at least 3 dims");
  WEFT_CHECK(r > 0 && x.size(-3) % (r * r) == 0, Value, "pixel_shuffle: ", x.size(-3),
             " channels are not divisible by upscale_factor^2 = ", r * r);
  Shape batch(x.sizes().begin(), x.sizes().end() - 3);
  int64_t c = x.size(-3) / (r * r), h = x.size(-2), w = x.size(-1);
  int64_t b = x.numel() / std::max<int64_t>(c * r * r * h * w, 1);
  Tensor y = x.reshape({b, c, r, r, h, w}).permute({0, 1, 4, 2, 5, 3});
  Shape out = batch;
  for (int64_t s : {c, h * r, w * r})
    out.push_back(s);
  return named(y.reshape(out), "PixelShuffleBackward0", x);
}

Tensor interpolate(const Tensor& x, const InterpolateOptions& o, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && x.dim() >= 3, Shape,
             "interpolate: expected an input of 3 or more dims (N, C, spatial...), got ",
             x.defined() ? shapeString(x.sizes()) : "an undefined tensor");
  WEFT_CHECK(x.is_floating_point(), DType, "interpolate: expected a floating input, got ",
             dtypeName(x.dtype()));
  const std::string& mode = o.mode();
  const bool linear = mode == "linear" || mode == "bilinear" || mode == "trilinear";
  WEFT_CHECK(linear || mode == "nearest", Value, "interpolate: unsupported mode '", mode,
             "' (nearest, linear, bilinear, trilinear)");
  const size_t spatial = static_cast<size_t>(x.dim() - 2);
  WEFT_CHECK(!linear || (mode == "linear") == (spatial == 1), Shape, "interpolate: mode '", mode,
             "' does not fit an input of shape ", shapeString(x.sizes()));
  WEFT_CHECK(!linear || mode != "bilinear" || spatial == 2, Shape,
             "interpolate: bilinear expects a 4-D input, got ", shapeString(x.sizes()));
  WEFT_CHECK(!linear || mode != "trilinear" || spatial == 3, Shape,
             "interpolate: trilinear expects a 5-D input, got ", shapeString(x.sizes()));
  WEFT_CHECK(o.size().empty() != o.scale_factor().empty(), Value,
             "interpolate: give exactly one of size and scale_factor");
  WEFT_CHECK(!(mode == "nearest" && o.align_corners()), Value,
             "interpolate: align_corners only applies to the linear modes");
  auto perDim = [&](const auto& v, const char* what) {
    WEFT_CHECK(v.size() == 1 || v.size() == spatial, Value, "interpolate: ", what, " has ",
               v.size(), " values for ", spatial, " spatial dims");
    return v.size() == 1 ? std::vector(spatial, v[0]) : v;
  };
  std::vector<int64_t> outSize;
  std::vector<double> scale; // source positions per output position, per dim
  if (!o.size().empty()) {
    outSize = perDim(o.size(), "size");
  } else {
    std::vector<double> factors = perDim(o.scale_factor(), "scale_factor");
    for (size_t i = 0; i < spatial; ++i) {
      WEFT_CHECK(factors[i] > 0 && std::isfinite(factors[i]), Value,
                 "interpolate: scale_factor must be positive and finite, got ", factors[i]);
      const double n =
          std::floor(static_cast<double>(x.size(static_cast<int64_t>(i) + 2)) * factors[i]);
      WEFT_CHECK(n < 1e12, Value, "interpolate: scale_factor ", factors[i], " is too large");
      outSize.push_back(static_cast<int64_t>(n));
      scale.push_back(1.0 / factors[i]); // PyTorch's scale with scale_factor given
    }
  }
  Tensor y = x;
  for (size_t i = 0; i < spatial; ++i) {
    const auto d = static_cast<int64_t>(i) + 2;
    const int64_t in = x.size(d), out = outSize[i];
    WEFT_CHECK(out > 0 && in > 0, Value, "interpolate: input and output sizes must be positive, ",
               "got ", in, " -> ", out, " along dim ", d);
    WEFT_CHECK(static_cast<double>(y.numel()) / static_cast<double>(in) * static_cast<double>(out) <
                   1e12,
               Value, "interpolate: an output of size ", out, " along dim ", d, " is too large");
    const double s = scale.empty() ? static_cast<double>(in) / static_cast<double>(out) : scale[i];
    Shape along(static_cast<size_t>(x.dim()), 1);
    along[static_cast<size_t>(d)] = out;
    if (!linear) { // PyTorch's nearest_idx: exact for the same size and for twice it, else in float
      const auto fs = static_cast<float>(s);
      std::vector<int64_t> src(static_cast<size_t>(out));
      for (int64_t j = 0; j < out; ++j)
        src[static_cast<size_t>(j)] =
            out == in ? j
            : out == 2 * in
                ? j >> 1
                : std::min(static_cast<int64_t>(std::floor(static_cast<float>(j) * fs)), in - 1);
      y = y.index_select(d, from_vector(src).to(y.device()));
      continue;
    }
    std::vector<int64_t> lo(static_cast<size_t>(out)), hi(static_cast<size_t>(out));
    std::vector<double> w(static_cast<size_t>(out));
    for (int64_t j = 0; j < out; ++j) {
      double pos = o.align_corners()
                       ? (out > 1 ? static_cast<double>(j) * static_cast<double>(in - 1) /
                                        static_cast<double>(out - 1)
                                  : 0.0)
                       : std::max((static_cast<double>(j) + 0.5) * s - 0.5, 0.0);
      const auto k = std::min(static_cast<int64_t>(std::floor(pos)), in - 1);
      lo[static_cast<size_t>(j)] = k;
      hi[static_cast<size_t>(j)] = std::min(k + 1, in - 1);
      w[static_cast<size_t>(j)] = pos - static_cast<double>(k);
    }
    Tensor weight = from_vector(w, along).to(x.device(), x.dtype());
    Tensor a = y.index_select(d, from_vector(lo).to(y.device())),
           b = y.index_select(d, from_vector(hi).to(y.device()));
    y = a * (1.0 - weight) + b * weight;
  }
  return y;
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& mask, double dropoutP, bool causal,
                                    std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(q.defined() && k.defined() && v.defined() && q.dim() >= 2 && k.dim() >= 2, Shape,
             "scaled_dot_product_attention: expected q, k, v of at least 2 dims");
  Tensor scores =
      q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(q.size(-1))));
  int64_t l = q.size(-2), s = k.size(-2);
  if (causal) // position i attends to keys 0..i
    scores =
        scores.masked_fill(ones({l, s}, TensorOptions(kBool).device(scores.device())).triu(1),
                           -std::numeric_limits<double>::infinity());
  if (mask.defined())
    scores = mask.dtype() == DType::Bool
                 ? scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity())
                 : scores + mask;
  Tensor attn = scores.softmax(-1);
  if (dropoutP > 0) attn = dropout(attn, dropoutP, true);
  return attn.matmul(v);
}

// ---- activations ----

Tensor leaky_relu(const Tensor& x, double slope, std::source_location loc) {
  CallSite cs(loc);
  return named(where(x > 0, x, x * slope), "LeakyReluBackward0", x);
}

Tensor elu(const Tensor& x, double alpha, std::source_location loc) {
  CallSite cs(loc);
  // x <= 0 takes the exponential, as PyTorch's kernel decides, so NaN takes x (gradient 1).
  Tensor negative = x <= 0;
  return named(where(negative, takenOnly(negative, x).expm1() * alpha, x), "EluBackward0", x);
}

Tensor silu(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return named(x * x.sigmoid(), "SiluBackward0", x);
}

Tensor softplus(const Tensor& x, double beta, double threshold, std::source_location loc) {
  CallSite cs(loc);
  Tensor bx = x * beta;
  Tensor linear = bx > threshold;
  return named(where(linear, x, takenOnly(linear.logical_not(), bx).exp().log1p() * (1.0 / beta)),
               "SoftplusBackward0", x);
}

Tensor mish(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return named(x * softplus(x).tanh(), "MishBackward0", x);
}

Tensor hardtanh(const Tensor& x, double lo, double hi, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(lo <= hi, Value, "hardtanh: min_val ", lo, " is larger than max_val ", hi);
  // PyTorch's gradient: 1 strictly between the bounds (and for NaN), 0 at them, where clamp's
  // gradient is 1.
  Tensor outside = (x <= lo).logical_or(x >= hi);
  return named(where(outside, x.clamp(lo, hi).detach(), x), "HardtanhBackward0", x);
}

// ---- losses ----

Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossOptions& o,
                std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "mse_loss");
  Tensor d = input - target;
  return named(reduce(d * d, o.reduction()), "MseLossBackward0", input);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossOptions& o,
               std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "l1_loss");
  return reduce((input - target).abs(), o.reduction());
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o,
                      std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "smooth_l1_loss");
  WEFT_CHECK(o.beta() >= 0, Value, "smooth_l1_loss: beta must be non-negative, got ", o.beta());
  Tensor d = (input - target).abs();
  if (o.beta() == 0) return named(reduce(d, o.reduction()), "SmoothL1LossBackward0", input);
  return named(
      reduce(where(d < o.beta(), d * d * (0.5 / o.beta()), d - 0.5 * o.beta()), o.reduction()),
      "SmoothL1LossBackward0", input);
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o,
                  std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "huber_loss");
  WEFT_CHECK(o.delta() > 0, Value, "huber_loss: delta must be positive, got ", o.delta());
  Tensor d = (input - target).abs();
  return named(
      reduce(where(d < o.delta(), d * d * 0.5, (d - 0.5 * o.delta()) * o.delta()), o.reduction()),
      "HuberLossBackward0", input);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o,
                std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(input.defined() && target.defined() && input.dim() >= 1, Value,
             "nll_loss: expected a defined input of at least 1 dim and a target");
  return named(reduceWeighted(pickTargets(input, target, o.weight(), o.ignore_index(), "nll_loss"),
                              o.reduction()),
               "NllLossBackward0", input);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyLossOptions& o,
                     std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(input.defined() && target.defined() && input.dim() >= 1, Value,
             "cross_entropy: expected a defined input of at least 1 dim and a target");
  double eps = o.label_smoothing();
  WEFT_CHECK(eps >= 0 && eps <= 1, Value, "cross_entropy: label_smoothing must be in [0, 1], got ",
             eps);
  int64_t classDim = input.dim() >= 2 ? 1 : 0, classes = input.size(classDim);
  Tensor logp = input.log_softmax(classDim);
  Tensor w = o.weight().defined() ? o.weight().reshape(alongDim(input.dim(), classDim, classes))
                                  : Tensor();
  if (target.is_floating_point()) { // class probabilities
    checkSameShape(input, target, "cross_entropy");
    Tensor t = eps > 0 ? target * (1 - eps) + eps / static_cast<double>(classes) : target;
    Tensor per = -(w.defined() ? logp * t * w : logp * t).sum({classDim});
    return reduce(per, o.reduction()); // PyTorch's mean: the sum over the samples' count
  }
  Picked p = pickTargets(logp, target, o.weight(), o.ignore_index(), "cross_entropy");
  Tensor nll = reduceWeighted(p, o.reduction());
  if (eps == 0) return named(nll, "NllLossBackward0", input);
  // PyTorch's label smoothing: the mean of -log p over classes, counted like the nll part.
  Tensor keep = target.to(DType::Int64) != o.ignore_index();
  Tensor smooth = -(w.defined() ? logp * w : logp).sum({classDim});
  smooth = where(keep, smooth, zeros_like(smooth));
  Tensor s = o.reduction() == Reduction::Mean ? smooth.sum() / p.weight.sum()
                                              : reduce(smooth, o.reduction());
  return nll * (1 - eps) + s * (eps / static_cast<double>(classes));
}

Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o,
                            std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "binary_cross_entropy");
  auto [logx, log1mx] = clampedLogs(input);
  Tensor loss = -(target * logx + (1.0 - target) * log1mx);
  if (o.weight().defined()) loss = loss * o.weight();
  return named(reduce(loss, o.reduction()), "BinaryCrossEntropyBackward0", input);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& o,
                                        std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "binary_cross_entropy_with_logits");
  // log(1 + exp(-x)) computed without overflow: log1p(exp(-|x|)) + max(-x, 0), whose derivative
  // at 0 is -0.5 (the gradient is sigmoid(x) - target there too).
  Tensor softplusNeg = log1pExpNegAbs(input) + where(input < 0, input.neg(), 0.0);
  Tensor logWeight = o.pos_weight().defined() ? (o.pos_weight() - 1.0) * target + 1.0 : Tensor();
  Tensor loss =
      (1.0 - target) * input + (logWeight.defined() ? logWeight * softplusNeg : softplusNeg);
  if (o.weight().defined()) loss = loss * o.weight();
  return named(reduce(loss, o.reduction()), "BinaryCrossEntropyWithLogitsBackward0", input);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o,
              std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "kl_div");
  Tensor loss = o.log_target()
                    ? target.exp() * (target - input)
                    : where(target > 0, target * target.log(), zeros_like(target)) - target * input;
  if (o.batchmean() && o.reduction() == Reduction::Mean)
    return input.dim() > 0 ? loss.sum() / countAlong(input, {0}) : loss.sum();
  return reduce(loss, o.reduction());
}

Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& target,
                             const CosineEmbeddingLossOptions& o, std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(x1, x2, "cosine_embedding_loss");
  WEFT_CHECK(x1.dim() == 1 || x1.dim() == 2, Shape,
             "cosine_embedding_loss: expected 1-D or 2-D inputs, got ", shapeString(x1.sizes()));
  int64_t dim = x1.dim() - 1;
  Tensor dot = (x1 * x2).sum({dim});
  // EPSILON keeps zero vectors finite.
  Tensor cos =
      dot / (((x1 * x1).sum({dim}) + kFloatEps12) * ((x2 * x2).sum({dim}) + kFloatEps12)).sqrt();
  Tensor zero = zeros_like(cos);
  Tensor loss = where(target == 1, 1.0 - cos, zero) +
                where(target == -1, (cos - o.margin()).clamp(0.0), zero);
  return reduce(loss, o.reduction());
}

// ---- more activations ----

Tensor relu6(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return hardtanh(x, 0.0, 6.0);
}
Tensor hardswish(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  // x * relu6(x + 3) / 6 with PyTorch's gradient: 0 below -3, x / 3 + 0.5 from -3 to 3 (so -0.5
  // at -3 and 1.5 at 3), 1 above 3 and for NaN.
  Tensor r6 = where(x < -3.0, 0.0, where(x <= 3.0, x + 3.0, 6.0));
  return named(x * r6 * (1.0 / 6.0), "HardswishBackward0", x);
}
Tensor hardsigmoid(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  // PyTorch's gradient: 1/6 strictly between -3 and 3, 0 at them (and for NaN).
  Tensor y = (x + 3.0).clamp(0.0, 6.0) * (1.0 / 6.0);
  return named(where((x > -3.0).logical_and(x < 3.0), y, y.detach()), "HardsigmoidBackward0", x);
}
Tensor selu(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  constexpr double kAlpha = 1.6732632423543772848170429916717;
  constexpr double kScale = 1.0507009873554804934193349852946;
  return named(elu(x, kAlpha) * kScale, "EluBackward0", x); // PyTorch names selu so
}
Tensor celu(const Tensor& x, double alpha, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(alpha != 0, Value, "celu: alpha must not be 0");
  Tensor negative = x <= 0; // as elu
  return named(where(negative, (takenOnly(negative, x) * (1.0 / alpha)).expm1() * alpha, x),
               "CeluBackward0", x);
}
Tensor softsign(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return x / (x.abs() + 1.0);
}
Tensor logsigmoid(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  // min(x, 0) - log1p(exp(-|x|)): no exp of a large positive number; min's derivative at 0 is 0
  // and |x|'s 1, so the derivative there is 0.5, as PyTorch's.
  return named(where(x < 0, x, 0.0) - log1pExpNegAbs(x), "LogSigmoidBackward0", x);
}
Tensor tanhshrink(const Tensor& x, std::source_location loc) {
  CallSite cs(loc);
  return x - x.tanh();
}
Tensor softshrink(const Tensor& x, double lambd, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(lambd >= 0, Value,
             "softshrink: lambda must be greater or equal to 0, but found to be ", lambd);
  Tensor zero = zeros({}, x.dtype());
  return named(where(x > lambd, x - lambd, where(x < -lambd, x + lambd, zero)),
               "SoftshrinkBackward0", x);
}
Tensor hardshrink(const Tensor& x, double lambd, std::source_location loc) {
  CallSite cs(loc);
  return named(where(x.abs() <= lambd, zeros({}, x.dtype()), x), "HardshrinkBackward0",
               x); // NaN passes, as in PyTorch
}
Tensor threshold(const Tensor& x, double threshold, double value, std::source_location loc) {
  CallSite cs(loc);
  return named(where(x <= threshold, full({}, value, x.dtype()), x), "ThresholdBackward0",
               x); // NaN passes, as in PyTorch
}
Tensor glu(const Tensor& x, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined() && x.dim() > 0, Shape, "glu: does not support scalars");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  WEFT_CHECK(d >= 0 && d < x.dim(), Index, "glu: dim ", dim, " out of range for rank ", x.dim());
  WEFT_CHECK(x.size(d) % 2 == 0, Shape, "glu: halving dimension must be even, but dimension ", d,
             " is size ", x.size(d));
  const int64_t half = x.size(d) / 2;
  return named(x.narrow(d, 0, half) * x.narrow(d, half, half).sigmoid(), "GluBackward0", x);
}
Tensor softmin(const Tensor& x, int64_t dim, std::source_location loc) {
  CallSite cs(loc);
  return softmax(x.neg(), dim);
}

// ---- distances ----

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x.defined(), Value, "normalize: called with an undefined tensor");
  return x / x.norm(p, {dim}, true).clamp_min(eps);
}
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps,
                         std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x1.defined() && x2.defined(), Value,
             "cosine_similarity: called with an undefined tensor");
  std::vector<Tensor> xs = broadcast_tensors({x1, x2});
  auto unit = [&](const Tensor& t) { return t / t.norm(2, {dim}, true).clamp_min(eps); };
  return (unit(xs[0]) * unit(xs[1])).sum({dim});
}
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim,
                         std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x1.defined() && x2.defined(), Value,
             "pairwise_distance: called with an undefined tensor");
  Tensor d = x1 - x2 + eps;
  if (d.dim() == 0) return d.abs();
  return d.norm(p, {-1}, keepdim);
}

// ---- more losses ----

Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& target,
                           const MarginRankingLossOptions& o, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(x1.defined() && x2.defined() && target.defined(), Value,
             "margin_ranking_loss: called with an undefined tensor");
  return reduce((target.neg() * (x1 - x2) + o.margin()).clamp_min(0.0), o.reduction());
}
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const SoftMarginLossOptions& o,
                        std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "soft_margin_loss");
  return reduce((input.neg() * target).exp().log1p(), o.reduction());
}
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            const HingeEmbeddingLossOptions& o, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(input.defined() && target.defined(), Value,
             "hinge_embedding_loss: called with an undefined tensor");
  Tensor zero = zeros({}, input.dtype());
  Tensor margin = where(target != 1, (input.neg() + o.margin()).clamp_min(0.0), zero);
  return reduce(margin + where(target != -1, input, zero), o.reduction());
}
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(anchor.defined() && positive.defined() && negative.defined(), Value,
             "triplet_margin_loss: called with an undefined tensor");
  WEFT_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim(), Shape,
             "triplet_margin_loss: anchor, positive and negative must have the same number of "
             "dimensions, got ",
             anchor.dim(), ", ", positive.dim(), " and ", negative.dim());
  Tensor toPositive = pairwise_distance(anchor, positive, o.p(), o.eps());
  Tensor toNegative = pairwise_distance(anchor, negative, o.p(), o.eps());
  if (o.swap())
    toNegative = minimum(toNegative, pairwise_distance(positive, negative, o.p(), o.eps()));
  return reduce((toPositive - toNegative + o.margin()).clamp_min(0.0), o.reduction());
}
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, const PoissonNLLLossOptions& o,
                        std::source_location loc) {
  CallSite cs(loc);
  checkSameShape(input, target, "poisson_nll_loss");
  Tensor loss =
      o.log_input() ? input.exp() - target * input : input - target * (input + o.eps()).log();
  if (o.full()) { // Stirling: target log(target) - target + 0.5 log(2 pi target), where target > 1
    Tensor safe = where(target > 1, target, ones({}, target.dtype()));
    Tensor stirling = safe * safe.log() - safe + (safe * (2 * std::numbers::pi)).log() * 0.5;
    loss = loss + where(target > 1, stirling, zeros({}, stirling.dtype()));
  }
  return reduce(loss, o.reduction());
}
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(input.defined() && target.defined() && var.defined(), Value,
             "gaussian_nll_loss: called with an undefined tensor");
  WEFT_CHECK(o.eps() > 0, Value, "gaussian_nll_loss: eps must be positive, got ", o.eps());
  Tensor v = var;
  // var is the input's shape, or that without its last dim (one variance for the last dim's
  // values), or with it as 1.
  const Shape& in = input.sizes();
  const Shape lead = in.empty() ? Shape{} : Shape(in.begin(), in.end() - 1);
  Shape leadOne = lead;
  leadOne.push_back(1);
  WEFT_CHECK(v.sizes() == in || (!in.empty() && (v.sizes() == lead || v.sizes() == leadOne)), Shape,
             "gaussian_nll_loss: var of shape ", shapeString(v.sizes()),
             " is of incorrect size for an input of shape ", shapeString(in));
  if (v.sizes() == lead && v.sizes() != in) v = v.unsqueeze(-1);
  // Clamped to eps with the gradient passing the clamp unchanged (PyTorch clamps under no_grad).
  v = v + (v.clamp_min(o.eps()) - v).detach();
  Tensor d = input - target;
  Tensor loss = (v.log() + d * d / v) * 0.5;
  if (o.full()) loss = loss + 0.5 * std::log(2 * std::numbers::pi);
  return reduce(loss, o.reduction());
}

} // namespace weft::nn::functional
