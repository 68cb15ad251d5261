// LibTorch's top-level nn functions: ATen's arguments turned into nn::functional's options.
#include "weft/nn/TopLevel.h"

namespace weft {
namespace {

/// ATen's integer reduction as nn's; anything but 0, 1 or 2 is a ValueError naming `op`.
nn::Reduction toReduction(int64_t reduction, const char* op) {
  switch (reduction) {
  case Reduction::None:
    return nn::kNone;
  case Reduction::Mean:
    return nn::kMean;
  case Reduction::Sum:
    return nn::kSum;
  default:
    WEFT_FAIL(Value, op, ": reduction must be weft::Reduction::None (0), Mean (1) or Sum (2), got ",
              reduction);
  }
}

/// An optional tensor as nn::functional takes it: undefined for none.
Tensor orUndefined(const std::optional<Tensor>& t) {
  return t.value_or(Tensor());
}

namespace F = nn::functional;

} // namespace

// ---- activations ----

Tensor elu(const Tensor& self, double alpha, double scale, double input_scale,
           std::source_location loc) {
  CallSite cs(loc);
  if (scale == 1 && input_scale == 1) return F::elu(self, alpha);
  WEFT_CHECK(self.defined(), Value, "elu: undefined input");
  return where(self > 0, self, (self * input_scale).expm1() * alpha) * scale;
}

Tensor log_sigmoid(const Tensor& self, std::source_location loc) {
  CallSite cs(loc);
  return F::logsigmoid(self);
}

// ---- dropout, in place ----

Tensor& dropout_(Tensor& self, double p, bool train, std::source_location loc) {
  CallSite cs(loc);
  F::dropout(self, p, train, true);
  return self;
}

Tensor& feature_dropout_(Tensor& self, double p, bool train, std::source_location loc) {
  CallSite cs(loc);
  F::feature_dropout(self, p, train, true);
  return self;
}

Tensor& alpha_dropout_(Tensor& self, double p, bool train, std::source_location loc) {
  CallSite cs(loc);
  F::alpha_dropout(self, p, train, true);
  return self;
}

Tensor& feature_alpha_dropout_(Tensor& self, double p, bool train, std::source_location loc) {
  CallSite cs(loc);
  F::feature_alpha_dropout(self, p, train, true);
  return self;
}

// ---- normalization and embedding ----

Tensor batch_norm(const Tensor& input, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, bool training, double momentum,
                  double eps, bool /*cudnn_enabled*/, std::source_location loc) {
  CallSite cs(loc);
  return F::batch_norm(input, orUndefined(running_mean), orUndefined(running_var),
                       orUndefined(weight), orUndefined(bias), training, momentum, eps);
}

Tensor layer_norm(const Tensor& input, IntArrayRef normalized_shape,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps, bool /*cudnn_enable*/, std::source_location loc) {
  CallSite cs(loc);
  return F::layer_norm(input, normalized_shape, orUndefined(weight), orUndefined(bias), eps);
}

Tensor group_norm(const Tensor& input, int64_t num_groups, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, double eps, bool /*cudnn_enabled*/,
                  std::source_location loc) {
  CallSite cs(loc);
  return F::group_norm(input, num_groups, orUndefined(weight), orUndefined(bias), eps);
}

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(weight.defined() && indices.defined(), Value,
             "embedding: undefined weight or indices");
  WEFT_CHECK(weight.is_floating_point() || !indices.is_floating_point(), DType,
             "embedding: got integer weights and floating indices: this form takes the weight "
             "first, embedding(weight, indices, padding_idx), as ATen's");
  WEFT_CHECK(!scale_grad_by_freq && !sparse, Value,
             "embedding: scale_grad_by_freq and sparse gradients are not supported; pass false");
  WEFT_CHECK(weight.dim() == 2, Shape, "embedding: weight must be 2-D, got ",
             shapeString(weight.sizes()));
  const int64_t n = weight.size(0);
  WEFT_CHECK(padding_idx == -1 || (padding_idx >= 0 && padding_idx < n), Index,
             "embedding: padding_idx ", padding_idx, " is neither -1 (none) nor a row of the ", n,
             " in weight");
  std::optional<int64_t> pad;
  if (padding_idx != -1) pad = padding_idx;
  return F::embedding(indices, weight, pad);
}

// ---- losses ----

Tensor nll_loss(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                int64_t reduction, int64_t ignore_index, std::source_location loc) {
  CallSite cs(loc);
  return F::nll_loss(self, target,
                     nn::NLLLossOptions()
                         .weight(orUndefined(weight))
                         .reduction(toReduction(reduction, "nll_loss"))
                         .ignore_index(ignore_index));
}

Tensor nll_loss2d(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                  int64_t reduction, int64_t ignore_index, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(self.defined() && self.dim() == 4, Shape,
             "nll_loss2d: expected a 4-D input (N, C, H, W), got ",
             self.defined() ? shapeString(self.sizes()) : "an undefined tensor",
             "; nll_loss takes other ranks");
  return nll_loss(self, target, weight, reduction, ignore_index);
}

Tensor cross_entropy_loss(const Tensor& self, const Tensor& target,
                          const std::optional<Tensor>& weight, int64_t reduction,
                          int64_t ignore_index, double label_smoothing, std::source_location loc) {
  CallSite cs(loc);
  return F::cross_entropy(self, target,
                          nn::CrossEntropyLossOptions()
                              .weight(orUndefined(weight))
                              .reduction(toReduction(reduction, "cross_entropy_loss"))
                              .ignore_index(ignore_index)
                              .label_smoothing(label_smoothing));
}

Tensor binary_cross_entropy(const Tensor& self, const Tensor& target,
                            const std::optional<Tensor>& weight, int64_t reduction,
                            std::source_location loc) {
  CallSite cs(loc);
  return F::binary_cross_entropy(self, target,
                                 nn::BCELossOptions()
                                     .weight(orUndefined(weight))
                                     .reduction(toReduction(reduction, "binary_cross_entropy")));
}

Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target,
                                        const std::optional<Tensor>& weight,
                                        const std::optional<Tensor>& pos_weight, int64_t reduction,
                                        std::source_location loc) {
  CallSite cs(loc);
  return F::binary_cross_entropy_with_logits(
      self, target,
      nn::BCEWithLogitsLossOptions()
          .weight(orUndefined(weight))
          .pos_weight(orUndefined(pos_weight))
          .reduction(toReduction(reduction, "binary_cross_entropy_with_logits")));
}

Tensor mse_loss(const Tensor& self, const Tensor& target, int64_t reduction,
                std::source_location loc) {
  CallSite cs(loc);
  return F::mse_loss(self, target, toReduction(reduction, "mse_loss"));
}

Tensor l1_loss(const Tensor& self, const Tensor& target, int64_t reduction,
               std::source_location loc) {
  CallSite cs(loc);
  return F::l1_loss(self, target, toReduction(reduction, "l1_loss"));
}

Tensor smooth_l1_loss(const Tensor& self, const Tensor& target, int64_t reduction, double beta,
                      std::source_location loc) {
  CallSite cs(loc);
  return F::smooth_l1_loss(
      self, target,
      nn::SmoothL1LossOptions().reduction(toReduction(reduction, "smooth_l1_loss")).beta(beta));
}

Tensor huber_loss(const Tensor& self, const Tensor& target, int64_t reduction, double delta,
                  std::source_location loc) {
  CallSite cs(loc);
  return F::huber_loss(
      self, target,
      nn::HuberLossOptions().reduction(toReduction(reduction, "huber_loss")).delta(delta));
}

Tensor kl_div(const Tensor& self, const Tensor& target, int64_t reduction, bool log_target,
              std::source_location loc) {
  CallSite cs(loc);
  return F::kl_div(
      self, target,
      nn::KLDivLossOptions().reduction(toReduction(reduction, "kl_div")).log_target(log_target));
}

Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, int64_t reduction, std::source_location loc) {
  CallSite cs(loc);
  return F::margin_ranking_loss(input1, input2, target,
                                nn::MarginRankingLossOptions().margin(margin).reduction(
                                    toReduction(reduction, "margin_ranking_loss")));
}

Tensor hinge_embedding_loss(const Tensor& self, const Tensor& target, double margin,
                            int64_t reduction, std::source_location loc) {
  CallSite cs(loc);
  return F::hinge_embedding_loss(self, target,
                                 nn::HingeEmbeddingLossOptions().margin(margin).reduction(
                                     toReduction(reduction, "hinge_embedding_loss")));
}

Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, int64_t reduction, std::source_location loc) {
  CallSite cs(loc);
  return F::cosine_embedding_loss(input1, input2, target,
                                  nn::CosineEmbeddingLossOptions().margin(margin).reduction(
                                      toReduction(reduction, "cosine_embedding_loss")));
}

Tensor soft_margin_loss(const Tensor& self, const Tensor& target, int64_t reduction,
                        std::source_location loc) {
  CallSite cs(loc);
  return F::soft_margin_loss(self, target, toReduction(reduction, "soft_margin_loss"));
}

Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap, int64_t reduction,
                           std::source_location loc) {
  CallSite cs(loc);
  return F::triplet_margin_loss(
      anchor, positive, negative,
      nn::TripletMarginLossOptions().margin(margin).p(p).eps(eps).swap(swap).reduction(
          toReduction(reduction, "triplet_margin_loss")));
}

Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, int64_t reduction, std::source_location loc) {
  CallSite cs(loc);
  return F::poisson_nll_loss(
      input, target,
      nn::PoissonNLLLossOptions().log_input(log_input).full(full).eps(eps).reduction(
          toReduction(reduction, "poisson_nll_loss")));
}

} // namespace weft
