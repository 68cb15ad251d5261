// Loss modules: each holds its options and forwards to the nn::functional loss.
#pragma once

#include "weft/nn/Functional.h"
#include "weft/nn/Module.h"

namespace weft::nn {

/// Declares loss module `Name` (options `Options`) computing functional::`fn`(input, target).
#define WEFT_LOSS(Name, Options, fn)                                                               \
  class Name##Impl : public Module {                                                               \
  public:                                                                                          \
    explicit Name##Impl(const Options& options = {}) : options(options) {}                         \
    Tensor forward(const Tensor& input, const Tensor& target) {                                    \
      return functional::fn(input, target, options);                                               \
    }                                                                                              \
    Options options;                                                                               \
  };                                                                                               \
  WEFT_MODULE(Name)

WEFT_LOSS(MSELoss, MSELossOptions, mse_loss);
WEFT_LOSS(L1Loss, L1LossOptions, l1_loss);
WEFT_LOSS(SmoothL1Loss, SmoothL1LossOptions, smooth_l1_loss);
WEFT_LOSS(HuberLoss, HuberLossOptions, huber_loss);
WEFT_LOSS(CrossEntropyLoss, CrossEntropyLossOptions, cross_entropy);
WEFT_LOSS(NLLLoss, NLLLossOptions, nll_loss);
WEFT_LOSS(BCELoss, BCELossOptions, binary_cross_entropy);
WEFT_LOSS(BCEWithLogitsLoss, BCEWithLogitsLossOptions, binary_cross_entropy_with_logits);
WEFT_LOSS(KLDivLoss, KLDivLossOptions, kl_div);
WEFT_LOSS(SoftMarginLoss, SoftMarginLossOptions, soft_margin_loss);
WEFT_LOSS(HingeEmbeddingLoss, HingeEmbeddingLossOptions, hinge_embedding_loss);
WEFT_LOSS(PoissonNLLLoss, PoissonNLLLossOptions, poisson_nll_loss);
#undef WEFT_LOSS

/// Declares loss module `Name` of three inputs computing functional::`fn`(a, b, c, options).
#define WEFT_LOSS3(Name, Options, fn)                                                              \
  class Name##Impl : public Module {                                                               \
  public:                                                                                          \
    explicit Name##Impl(const Options& options = {}) : options(options) {}                         \
    Tensor forward(const Tensor& a, const Tensor& b, const Tensor& c) {                            \
      return functional::fn(a, b, c, options);                                                     \
    }                                                                                              \
    Options options;                                                                               \
  };                                                                                               \
  WEFT_MODULE(Name)

WEFT_LOSS3(MarginRankingLoss, MarginRankingLossOptions, margin_ranking_loss);
WEFT_LOSS3(TripletMarginLoss, TripletMarginLossOptions, triplet_margin_loss);
WEFT_LOSS3(GaussianNLLLoss, GaussianNLLLossOptions, gaussian_nll_loss);
#undef WEFT_LOSS3

class CosineEmbeddingLossImpl : public Module {
public:
  explicit CosineEmbeddingLossImpl(const CosineEmbeddingLossOptions& options = {})
      : options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2, const Tensor& target) {
    return functional::cosine_embedding_loss(x1, x2, target, options);
  }
  CosineEmbeddingLossOptions options;
};
WEFT_MODULE(CosineEmbeddingLoss);

} // namespace weft::nn
