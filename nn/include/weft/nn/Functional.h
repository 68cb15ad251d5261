// nn::functional: every layer's function and the losses, composed from weft's primitives.
#pragma once

#include "weft/Functions.h"
#include "weft/nn/Options.h"

#include <optional>
#include <string>
#include <vector>

namespace weft::nn {

// ---- loss options (shared by the functional forms and the loss modules) ----

/// Options of mse_loss / MSELoss, l1_loss / L1Loss and the other plain elementwise losses.
struct LossOptions {
  LossOptions(Reduction r = kMean) : reduction_(r) {} // NOLINT: implicit, as LibTorch's
  WEFT_ARG(Reduction, reduction);
};
using MSELossOptions = LossOptions;
using L1LossOptions = LossOptions;

struct SmoothL1LossOptions {
  WEFT_ARG(Reduction, reduction) = kMean;
  WEFT_ARG(double, beta) = 1.0;
};
struct HuberLossOptions {
  WEFT_ARG(Reduction, reduction) = kMean;
  WEFT_ARG(double, delta) = 1.0;
};
struct CrossEntropyLossOptions {
  /// A weight per class (empty: all 1).
  WEFT_ARG(Tensor, weight);
  /// Targets with this class index add nothing to the loss or the mean's count.
  WEFT_ARG(int64_t, ignore_index) = -100;
  WEFT_ARG(Reduction, reduction) = kMean;
  WEFT_ARG(double, label_smoothing) = 0.0;
};
struct NLLLossOptions {
  WEFT_ARG(Tensor, weight);
  WEFT_ARG(int64_t, ignore_index) = -100;
  WEFT_ARG(Reduction, reduction) = kMean;
};
struct BCELossOptions {
  WEFT_ARG(Tensor, weight);
  WEFT_ARG(Reduction, reduction) = kMean;
};
struct BCEWithLogitsLossOptions {
  WEFT_ARG(Tensor, weight);
  /// A weight for positive examples, per class (broadcast over the last dimension).
  WEFT_ARG(Tensor, pos_weight);
  WEFT_ARG(Reduction, reduction) = kMean;
};
/// KL divergence: `input` holds log-probabilities; `target` probabilities (log ones with
/// log_target). Reduction "batchmean" is kMean with batchmean(true).
struct KLDivLossOptions {
  WEFT_ARG(Reduction, reduction) = kMean;
  WEFT_ARG(bool, batchmean) = false;
  WEFT_ARG(bool, log_target) = false;
};
struct CosineEmbeddingLossOptions {
  WEFT_ARG(double, margin) = 0.0;
  WEFT_ARG(Reduction, reduction) = kMean;
};
using SoftMarginLossOptions = LossOptions;
struct MarginRankingLossOptions {
  WEFT_ARG(double, margin) = 0.0;
  WEFT_ARG(Reduction, reduction) = kMean;
};
struct HingeEmbeddingLossOptions {
  WEFT_ARG(double, margin) = 1.0;
  WEFT_ARG(Reduction, reduction) = kMean;
};
/// max(0, margin + d(anchor, positive) - d(anchor, negative)) with d the p-norm distance
/// (pairwise_distance); `swap` takes the smaller of d(anchor, negative) and d(positive, negative).
struct TripletMarginLossOptions {
  WEFT_ARG(double, margin) = 1.0;
  WEFT_ARG(double, p) = 2.0;
  WEFT_ARG(double, eps) = 1e-6;
  WEFT_ARG(bool, swap) = false;
  WEFT_ARG(Reduction, reduction) = kMean;
};
/// Poisson negative log likelihood: exp(input) - target * input with `log_input`, else
/// input - target * log(input + eps); `full` adds Stirling's term where target > 1.
struct PoissonNLLLossOptions {
  WEFT_ARG(bool, log_input) = true;
  WEFT_ARG(bool, full) = false;
  WEFT_ARG(double, eps) = 1e-8;
  WEFT_ARG(Reduction, reduction) = kMean;
};
/// Gaussian negative log likelihood 0.5 (log var + (input - target)^2 / var), var clamped to
/// `eps` (its gradient passing the clamp unchanged, as PyTorch's); `full` adds 0.5 log(2 pi).
struct GaussianNLLLossOptions {
  WEFT_ARG(bool, full) = false;
  WEFT_ARG(double, eps) = 1e-6;
  WEFT_ARG(Reduction, reduction) = kMean;
};

/// Resampling of the spatial dims (all after the first two: (N, C, L), (N, C, H, W), ...) to
/// `size`, or to floor(in * scale_factor) per dim (one value for all dims, or one each): mode
/// "nearest" (source index floor(out * in / out_size)), "linear" / "bilinear" (interpolated
/// between the two nearest source positions; `align_corners` maps the corner pixels onto each
/// other, else pixel centers at half-integers, as PyTorch).
struct InterpolateOptions {
  WEFT_ARG(std::vector<int64_t>, size);
  WEFT_ARG(std::vector<double>, scale_factor);
  WEFT_ARG(std::string, mode) = "nearest";
  WEFT_ARG(bool, align_corners) = false;
};
using UpsampleOptions = InterpolateOptions;

namespace functional {

// ---- layers ----
/// x @ weight^T + bias, weight (out, in).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {}, WEFT_LOC);
/// x1^T W_k x2 + b_k for each output k, weight (out, in1, in2).
Tensor bilinear(const Tensor& x1, const Tensor& x2, const Tensor& weight, const Tensor& bias = {},
                WEFT_LOC);
/// Zeroes elements with probability `p` and scales the rest by 1/(1-p) when `training`; writes
/// the result into `x` when `inplace`.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true, bool inplace = false,
               WEFT_LOC);
/// Channel-wise dropout (ATen's feature_dropout): each (sample, channel) of an (N, C, *) input is
/// zeroed whole with probability `p` or kept and scaled by 1/(1-p).
Tensor feature_dropout(const Tensor& x, double p = 0.5, bool training = true, bool inplace = false,
                       WEFT_LOC);
/// feature_dropout of an (N, C, H, W) input, or of an unbatched (C, H, W) one, as LibTorch's.
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true, bool inplace = false,
                 WEFT_LOC);
/// feature_dropout of an (N, C, D, H, W) input, or of an unbatched (C, D, H, W) one.
Tensor dropout3d(const Tensor& x, double p = 0.5, bool training = true, bool inplace = false,
                 WEFT_LOC);
/// Dropout for SELU networks: a dropped element takes SELU's negative saturation value, then all
/// are scaled and shifted so that an input of mean 0 and variance 1 keeps both. Off unless
/// `training` (PyTorch's default for this one).
Tensor alpha_dropout(const Tensor& x, double p = 0.5, bool training = false, bool inplace = false,
                     WEFT_LOC);
/// alpha_dropout with one draw per (sample, channel) of an (N, C, *) input.
Tensor feature_alpha_dropout(const Tensor& x, double p = 0.5, bool training = false,
                             bool inplace = false, WEFT_LOC);
/// Batch normalization over all dimensions but 1. In training, normalizes with the batch's
/// statistics and updates the running ones in place (unbiased variance, `momentum`); otherwise
/// uses the running ones.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight = {}, const Tensor& bias = {}, bool training = false,
                  double momentum = 0.1, double eps = 1e-5, WEFT_LOC);
/// Normalizes over the trailing `normalized_shape` dimensions.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, WEFT_LOC);
/// Normalizes each of `num_groups` channel groups of (N, C, *).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5, WEFT_LOC);
/// x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` dimensions, times weight.
/// Without `eps`, the dtype's machine epsilon (as PyTorch).
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = {},
                std::optional<double> eps = std::nullopt, WEFT_LOC);
/// Rows of `weight`; rows picked by `padding_idx` get no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt, WEFT_LOC);
/// Average pooling to an output of `output_size` (PyTorch's adaptive windows).
Tensor adaptive_avg_pool2d(const Tensor& x, ExpandingArray output_size, WEFT_LOC);
Tensor interpolate(const Tensor& x, const InterpolateOptions& o, WEFT_LOC);
/// (N, C*r*r, H, W) -> (N, C, H*r, W*r).
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor, WEFT_LOC);
/// softmax(q k^T / sqrt(d) + mask) v; `attn_mask` is boolean (true: attend) or additive;
/// `is_causal` masks future positions.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                    bool is_causal = false, WEFT_LOC);

using weft::avg_pool2d;
using weft::conv1d;
using weft::conv2d;
using weft::conv_transpose2d;
using weft::max_pool2d;
using weft::one_hot;
using weft::pad;
using weft::prelu;

// ---- activations ----
using weft::gelu;
using weft::log_softmax;
using weft::relu;
using weft::sigmoid;
using weft::softmax;
using weft::tanh;
// At a kink each activation's gradient is PyTorch's: relu'(0) = 0, hardtanh's and relu6's 0 at
// their bounds, hardswish's -0.5 at -3 and 1.5 at 3, logsigmoid'(0) = 0.5.
/// x where x > 0, else negative_slope * x.
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01, WEFT_LOC);
/// x where x > 0, else alpha * (exp(x) - 1).
Tensor elu(const Tensor& x, double alpha = 1.0, WEFT_LOC);
Tensor silu(const Tensor& x, WEFT_LOC);
Tensor mish(const Tensor& x, WEFT_LOC);
/// log(1 + exp(beta x)) / beta, or x where beta x > threshold.
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0, WEFT_LOC);
/// x clamped to [min_val, max_val], with gradient 0 at the bounds (clamp's is 1 there).
Tensor hardtanh(const Tensor& x, double min_val = -1.0, double max_val = 1.0, WEFT_LOC);
/// min(max(x, 0), 6); x * relu6(x + 3) / 6; relu6(x + 3) / 6.
Tensor relu6(const Tensor& x, WEFT_LOC);
Tensor hardswish(const Tensor& x, WEFT_LOC);
Tensor hardsigmoid(const Tensor& x, WEFT_LOC);
/// elu with SELU's alpha, times its scale (self-normalizing).
Tensor selu(const Tensor& x, WEFT_LOC);
/// x where x > 0, else alpha * (exp(x / alpha) - 1).
Tensor celu(const Tensor& x, double alpha = 1.0, WEFT_LOC);
/// x / (1 + |x|).
Tensor softsign(const Tensor& x, WEFT_LOC);
/// log(sigmoid(x)), without overflow.
Tensor logsigmoid(const Tensor& x, WEFT_LOC);
/// x - tanh(x).
Tensor tanhshrink(const Tensor& x, WEFT_LOC);
/// x moved toward 0 by lambd, 0 within [-lambd, lambd] (softshrink); x outside it, else 0
/// (hardshrink).
Tensor softshrink(const Tensor& x, double lambd = 0.5, WEFT_LOC);
Tensor hardshrink(const Tensor& x, double lambd = 0.5, WEFT_LOC);
/// value where x <= threshold, else x (NaN stays NaN).
Tensor threshold(const Tensor& x, double threshold, double value, WEFT_LOC);
/// The first half of `dim` times the sigmoid of the second half.
Tensor glu(const Tensor& x, int64_t dim = -1, WEFT_LOC);
/// softmax(-x, dim).
Tensor softmin(const Tensor& x, int64_t dim, WEFT_LOC);

// ---- distances ----
/// x divided by its p-norm along `dim`, at least `eps`.
Tensor normalize(const Tensor& x, double p = 2.0, int64_t dim = 1, double eps = 1e-12, WEFT_LOC);
/// The cosine of the angle between x1 and x2 (broadcast) along `dim`: each divided by its norm
/// (at least eps), multiplied and summed.
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8,
                         WEFT_LOC);
/// The p-norm of x1 - x2 + eps along the last dim.
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2.0, double eps = 1e-6,
                         bool keepdim = false, WEFT_LOC);

// ---- losses ----
Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossOptions& o = {}, WEFT_LOC);
Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossOptions& o = {}, WEFT_LOC);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossOptions& o = {},
                      WEFT_LOC);
Tensor huber_loss(const Tensor& input, const Tensor& target, const HuberLossOptions& o = {},
                  WEFT_LOC);
/// `input`: logits (N, C, *) or (C); `target`: class indices (N, *) as int64, or probabilities
/// shaped like `input`.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyLossOptions& o = {}, WEFT_LOC);
/// `input`: log-probabilities (N, C, *) or (C); `target`: int64 class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossOptions& o = {}, WEFT_LOC);
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const BCELossOptions& o = {},
                            WEFT_LOC);
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const BCEWithLogitsLossOptions& o = {}, WEFT_LOC);
Tensor kl_div(const Tensor& input, const Tensor& target, const KLDivLossOptions& o = {}, WEFT_LOC);
/// 1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1.
Tensor cosine_embedding_loss(const Tensor& x1, const Tensor& x2, const Tensor& target,
                             const CosineEmbeddingLossOptions& o = {}, WEFT_LOC);
/// max(0, -target (x1 - x2) + margin), target +1 or -1.
Tensor margin_ranking_loss(const Tensor& x1, const Tensor& x2, const Tensor& target,
                           const MarginRankingLossOptions& o = {}, WEFT_LOC);
/// log(1 + exp(-target input)), target +1 or -1.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        const SoftMarginLossOptions& o = {}, WEFT_LOC);
/// input where target is not -1, plus max(0, margin - input) where target is not 1.
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            const HingeEmbeddingLossOptions& o = {}, WEFT_LOC);
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossOptions& o = {}, WEFT_LOC);
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target,
                        const PoissonNLLLossOptions& o = {}, WEFT_LOC);
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossOptions& o = {}, WEFT_LOC);

} // namespace functional
} // namespace weft::nn
