// LibTorch's top-level nn functions (torch::nll_loss, torch::dropout, torch::layer_norm, ...) with
// ATen's signatures: nn::functional's own function where the signatures agree, else a thin call
// into it.
#pragma once

#include "weft/nn/Functional.h"

#include <optional>

namespace weft {

/// LibTorch's at::Reduction: the int64_t `reduction` argument of the top-level losses.
namespace Reduction {
/// How a loss reduces: None = 0, Mean = 1, Sum = 2, as ATen numbers them.
enum Reduction { None, Mean, Sum };
} // namespace Reduction

// ---- where ATen's signature is nn::functional's: the same function, so that a call reaching both
// through argument-dependent lookup is not ambiguous ----
using nn::functional::adaptive_avg_pool2d;
using nn::functional::alpha_dropout;
using nn::functional::bilinear;
using nn::functional::celu;
using nn::functional::cosine_similarity;
using nn::functional::dropout;
using nn::functional::elu;
using nn::functional::feature_alpha_dropout;
using nn::functional::feature_dropout;
using nn::functional::glu;
using nn::functional::group_norm;
using nn::functional::hardshrink;
using nn::functional::hardsigmoid;
using nn::functional::hardswish;
using nn::functional::hardtanh;
using nn::functional::layer_norm;
using nn::functional::leaky_relu;
using nn::functional::linear;
using nn::functional::mish;
using nn::functional::pairwise_distance;
using nn::functional::pixel_shuffle;
using nn::functional::relu6;
using nn::functional::selu;
using nn::functional::silu;
using nn::functional::softplus;
using nn::functional::softshrink;
using nn::functional::threshold;

// ---- activations ----
/// ATen's elu: scale * x where x > 0, else scale * alpha * (exp(input_scale * x) - 1).
Tensor elu(const Tensor& self, double alpha, double scale, double input_scale = 1.0, WEFT_LOC);
/// log(sigmoid(x)) (nn::functional::logsigmoid).
Tensor log_sigmoid(const Tensor& self, WEFT_LOC);

// ---- dropout, in place: `self` takes the result ----
/// dropout(self, p, train) written into `self`.
Tensor& dropout_(Tensor& self, double p, bool train, WEFT_LOC);
/// feature_dropout (whole channels of (N, C, *)) written into `self`.
Tensor& feature_dropout_(Tensor& self, double p, bool train, WEFT_LOC);
/// alpha_dropout written into `self`.
Tensor& alpha_dropout_(Tensor& self, double p, bool train, WEFT_LOC);
/// feature_alpha_dropout written into `self`.
Tensor& feature_alpha_dropout_(Tensor& self, double p, bool train, WEFT_LOC);

// ---- normalization and embedding, in ATen's argument order ----
/// Batch normalization with ATen's order (weight and bias before the running statistics);
/// `cudnn_enabled` is accepted and ignored.
Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, bool training, double momentum,
                  double eps, bool cudnn_enabled, WEFT_LOC);
/// layer_norm and group_norm with ATen's trailing `cudnn_enable(d)` flag (ignored).
Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps, bool cudnn_enable, WEFT_LOC);
Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps, bool cudnn_enabled, WEFT_LOC);
/// Rows of `weight` picked by `indices`, in ATen's order (weight first); `padding_idx` -1 means
/// none, else that row gets no gradient (weft::embedding(weight, indices) is the frontend's, with
/// no padding row). Sparse gradients and scale_grad_by_freq are not supported.
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq = false, bool sparse = false, WEFT_LOC);

// ---- losses: `reduction` is a weft::Reduction ----
/// `self`: log-probabilities (N, C, *) or (C); `target`: class indices.
Tensor nll_loss(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight = {},
                int64_t reduction = Reduction::Mean, int64_t ignore_index = -100, WEFT_LOC);
/// nll_loss of a 4-D (N, C, H, W) input and a 3-D target.
Tensor nll_loss2d(const Tensor& self, const Tensor& target,
                  const std::optional<Tensor>& weight = {}, int64_t reduction = Reduction::Mean,
                  int64_t ignore_index = -100, WEFT_LOC);
/// nn::functional::cross_entropy: `self` holds logits.
Tensor cross_entropy_loss(const Tensor& self, const Tensor& target,
                          const std::optional<Tensor>& weight = {},
                          int64_t reduction = Reduction::Mean, int64_t ignore_index = -100,
                          double label_smoothing = 0.0, WEFT_LOC);
/// `self`: probabilities; `weight` rescales each element's loss (broadcast).
Tensor binary_cross_entropy(const Tensor& self, const Tensor& target,
                            const std::optional<Tensor>& weight = {},
                            int64_t reduction = Reduction::Mean, WEFT_LOC);
/// binary_cross_entropy of sigmoid(self), computed stably; `pos_weight` weighs the positives.
Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target,
                                        const std::optional<Tensor>& weight = {},
                                        const std::optional<Tensor>& pos_weight = {},
                                        int64_t reduction = Reduction::Mean, WEFT_LOC);
/// (self - target)^2, reduced.
Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
                WEFT_LOC);
/// |self - target|, reduced.
Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
               WEFT_LOC);
/// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = self - target).
Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
                      double beta = 1.0, WEFT_LOC);
/// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
Tensor huber_loss(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
                  double delta = 1.0, WEFT_LOC);
/// Mean is the mean over all elements (ATen's; nn::functional's "batchmean" is not here).
Tensor kl_div(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
              bool log_target = false, WEFT_LOC);
/// max(0, -target (input1 - input2) + margin), target +1 or -1.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin = 0.0, int64_t reduction = Reduction::Mean, WEFT_LOC);
/// self where target is 1, max(0, margin - self) where it is -1.
Tensor hinge_embedding_loss(const Tensor& self, const Tensor& target, double margin = 1.0,
                            int64_t reduction = Reduction::Mean, WEFT_LOC);
/// 1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin = 0.0, int64_t reduction = Reduction::Mean, WEFT_LOC);
/// log(1 + exp(-target self)), target +1 or -1.
Tensor soft_margin_loss(const Tensor& self, const Tensor& target,
                        int64_t reduction = Reduction::Mean, WEFT_LOC);
/// max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm distance.
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin = 1.0, double p = 2, double eps = 1e-6, bool swap = false,
                           int64_t reduction = Reduction::Mean, WEFT_LOC);
/// Poisson negative log likelihood (see nn::PoissonNLLLossOptions); every argument is
/// required, as in ATen.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, int64_t reduction, WEFT_LOC);

} // namespace weft
