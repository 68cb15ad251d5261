// nn against PyTorch: every layer, activation, loss, optimizer and schedule of weft::nn, eagerly
// and through compile(), against float64 values PyTorch 1.13 computed once
// (tests/reference/nn_reference.py writes tests/reference/nn_reference.safetensors).
//
// To add a case: add it to nn_reference.py and regenerate the file (see there), then add one entry
// of the same name to moduleCases(), optimizerCases() or schedulerCases() below: a module (its
// options as in the script; parameters and buffers come from the file) or a function of the
// inputs. A module whose forward takes other arguments or returns more than one tensor (an LSTM)
// says how to call it: module(make, mode, [](const auto& m, const Inputs& in) { ... }).
// FileAndTablesListTheSameCases fails while the file and the tables disagree.
#include "TestUtil.h"
#include "weft/Safetensors.h"
#include "weft/nn.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

using namespace weft;
namespace F = weft::nn::functional;

namespace {

// Tolerance of every comparison. Both sides compute in float64 (~1e-16 relative), but with other
// formulas and summation orders (a variance, a log-sum-exp, a convolution as a product), so the
// results may differ by many ulps but not by more than ~1e-13 relative on these small shapes;
// 1e-10 leaves room for that and still fails on any wrong formula. The absolute term covers
// values that are zero in exact arithmetic and come out as the rounding left over from O(1) terms.
constexpr double kRtol = 1e-10, kAtol = 1e-12;

// ---- the reference file ----

/// Every tensor of the file, by key ("<case>/<what>"), read once.
const std::map<std::string, Tensor>& referenceFile() {
  static const std::map<std::string, Tensor> tensors = [] {
    std::map<std::string, Tensor> byKey;
    for (auto& [key, t] : safetensors::load_file(WEFT_NN_REFERENCE))
      byKey.emplace(key, t);
    return byKey;
  }();
  return tensors;
}

/// The tensors of one case, by key without the "<case>/" prefix.
class CaseData {
public:
  explicit CaseData(const std::string& name) : name_(name) {
    std::string prefix = name + "/";
    for (const auto& [key, t] : referenceFile())
      if (key.starts_with(prefix)) tensors_.emplace(key.substr(prefix.size()), t);
    if (tensors_.empty())
      throw std::runtime_error("case '" + name + "' is not in " + WEFT_NN_REFERENCE +
                               ": regenerate it with tests/reference/nn_reference.py");
  }
  bool has(const std::string& key) const { return tensors_.count(key) != 0; }
  const Tensor& at(const std::string& key) const {
    auto it = tensors_.find(key);
    if (it == tensors_.end())
      throw std::runtime_error("case '" + name_ + "' has no tensor '" + key + "'");
    return it->second;
  }
  /// The tensors under `prefix` ("param/"), by the rest of their key.
  std::map<std::string, Tensor> under(const std::string& prefix) const {
    std::map<std::string, Tensor> out;
    for (const auto& [key, t] : tensors_)
      if (key.starts_with(prefix)) out.emplace(key.substr(prefix.size()), t);
    return out;
  }

private:
  std::string name_;
  std::map<std::string, Tensor> tensors_;
};

/// Checks `got` against the reference `want`; `what` names the value in the failure.
void expectClose(const Tensor& got, const Tensor& want, const std::string& what) {
  if (!got.defined()) {
    ADD_FAILURE() << what << ": undefined, expected shape " << shapeString(want.sizes());
    return;
  }
  EXPECT_TRUE(test::allClose(got.detach().to(kFloat64), want.to(kFloat64), kRtol, kAtol)) << what;
}

/// Runs `body`, turning an exception into a failure that names `what`, so that one throwing run
/// (eager or compiled) does not hide the other's results.
template <typename Body> void reportingErrors(const std::string& what, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << " threw: " << e.what();
  }
}

// ---- layers, activations, losses and functions ----

using Inputs = std::vector<Tensor>;
using Forward = std::function<Tensor(const Inputs&)>;

/// What a module case runs: the module (null for a plain function) and how to call it.
struct Subject {
  std::shared_ptr<nn::Module> module;
  Forward forward;
};
/// A case: a fresh subject, built with the options of the case (tensor options from its data).
struct ModuleCase {
  std::string name;
  std::function<Subject(const CaseData&)> make;
};
void PrintTo(const ModuleCase& c, std::ostream* os) {
  *os << c.name;
}

enum class Mode { Train, Eval };

/// Calls a holder's forward with as many inputs as it takes.
struct CallForward {
  template <typename H> Tensor operator()(const H& h, const Inputs& in) const {
    using Impl = typename H::ContainedType;
    if constexpr (requires(Impl & m, const Tensor& t) { m.forward(t); })
      return h(in.at(0));
    else if constexpr (requires(Impl & m, const Tensor& t) { m.forward(t, t); })
      return h(in.at(0), in.at(1));
    else
      return h(in.at(0), in.at(1), in.at(2));
  }
};

/// A case of the module `make()` (or `make(data)`, for tensor options) returns, in float64 and
/// `mode`, called through `call(holder, inputs)`.
template <typename Make, typename Call = CallForward>
std::function<Subject(const CaseData&)> module(Make make, Mode mode = Mode::Train, Call call = {}) {
  return [make, mode, call](const CaseData& d) {
    auto holder = [&] {
      if constexpr (std::is_invocable_v<Make, const CaseData&>)
        return make(d);
      else
        return make();
    }();
    holder->to(kFloat64);
    holder->train(mode == Mode::Train);
    return Subject{holder.ptr(), [holder, call](const Inputs& in) { return call(holder, in); }};
  };
}
/// A case of a plain function of the inputs.
std::function<Subject(const CaseData&)> functional(Forward f) {
  return [f](const CaseData&) { return Subject{nullptr, f}; };
}

std::vector<ModuleCase> layerCases() {
  using namespace nn;
  const Mode eval = Mode::Eval;
  return {
      {"linear_bias", module([] { return Linear(3, 4); })},
      {"linear_nobias", module([] { return Linear(LinearOptions(3, 4).bias(false)); })},
      {"bilinear", module([] { return Bilinear(BilinearOptions(3, 2, 4)); })},
      {"bilinear_nobias", module([] { return Bilinear(BilinearOptions(2, 2, 3).bias(false)); })},
      {"conv1d", module([] { return Conv1d(2, 3, 3); })},
      {"conv1d_stride_pad_dilation",
       module([] { return Conv1d(Conv1dOptions(2, 4, 3).stride(2).padding(2).dilation(2)); })},
      {"conv1d_groups",
       module([] { return Conv1d(Conv1dOptions(4, 6, 2).groups(2).bias(false)); })},
      {"conv2d", module([] { return Conv2d(2, 3, 3); })},
      {"conv2d_stride_pad", module([] {
         return Conv2d(Conv2dOptions(2, 4, {3, 2}).stride({2, 1}).padding({1, 0}));
       })},
      {"conv2d_dilation",
       module([] { return Conv2d(Conv2dOptions(2, 3, 3).padding(2).dilation(2)); })},
      {"conv2d_groups",
       module([] { return Conv2d(Conv2dOptions(4, 6, 3).groups(2).bias(false)); })},
      {"conv2d_depthwise",
       module([] { return Conv2d(Conv2dOptions(3, 3, 3).padding(1).groups(3)); })},
      {"conv_transpose2d", module([] { return ConvTranspose2d(3, 2, 3); })},
      {"conv_transpose2d_stride_output_padding", module([] {
         return ConvTranspose2d(
             ConvTranspose2dOptions(2, 3, 3).stride(2).padding(1).output_padding(1));
       })},
      {"conv_transpose2d_groups_dilation", module([] {
         return ConvTranspose2d(
             ConvTranspose2dOptions(4, 2, 2).stride({1, 2}).groups(2).dilation(2).bias(false));
       })},
      {"batchnorm1d_train", module([] { return BatchNorm1d(3); })},
      {"batchnorm1d_train_3d",
       module([] { return BatchNorm1d(BatchNormOptions(3).momentum(0.3)); })},
      {"batchnorm1d_eval", module([] { return BatchNorm1d(3); }, eval)},
      {"batchnorm2d_train", module([] { return BatchNorm2d(BatchNormOptions(3).eps(1e-3)); })},
      {"batchnorm2d_eval", module([] { return BatchNorm2d(3); }, eval)},
      {"batchnorm2d_noaffine_train",
       module([] { return BatchNorm2d(BatchNormOptions(2).affine(false)); })},
      {"batchnorm2d_untracked_eval",
       module([] { return BatchNorm2d(BatchNormOptions(2).track_running_stats(false)); }, eval)},
      {"layernorm", module([] { return LayerNorm(LayerNormOptions({4})); })},
      {"layernorm_2d", module([] {
         return LayerNorm(LayerNormOptions({3, 4}).eps(1e-3));
       })},
      {"layernorm_noaffine",
       module([] { return LayerNorm(LayerNormOptions({5}).elementwise_affine(false)); })},
      {"groupnorm", module([] { return GroupNorm(GroupNormOptions(2, 4)); })},
      {"groupnorm_noaffine",
       module([] { return GroupNorm(GroupNormOptions(3, 6).affine(false)); })},
      {"groupnorm_instance", module([] { return GroupNorm(GroupNormOptions(3, 3).eps(1e-3)); })},
      {"rmsnorm", module([] { return RMSNorm(RMSNormOptions({4}).eps(1e-6)); })},
      {"rmsnorm_2d_default_eps", module([] {
         return RMSNorm(RMSNormOptions({2, 3}));
       })},
      {"rmsnorm_noaffine",
       module([] { return RMSNorm(RMSNormOptions({5}).eps(1e-5).elementwise_affine(false)); })},
      {"embedding", module([] { return Embedding(5, 3); })},
      {"embedding_padding",
       module([] { return Embedding(EmbeddingOptions(6, 3).padding_idx(1)); })},
      {"embedding_padding_negative",
       module([] { return Embedding(EmbeddingOptions(4, 2).padding_idx(-1)); })},
      {"dropout_eval", module([] { return Dropout(0.5); }, eval)},
      {"dropout_p0_train", module([] { return Dropout(0.0); })},
      {"maxpool2d", module([] { return MaxPool2d(2); })},
      {"maxpool2d_stride_padding",
       module([] { return MaxPool2d(MaxPool2dOptions(3).stride(2).padding(1)); })},
      {"maxpool2d_ceil_mode",
       module([] { return MaxPool2d(MaxPool2dOptions(3).stride(2).ceil_mode(true)); })},
      {"maxpool2d_dilation",
       module([] { return MaxPool2d(MaxPool2dOptions(2).stride(1).dilation(2)); })},
      {"avgpool2d", module([] { return AvgPool2d(2); })},
      {"avgpool2d_stride_padding", module([] {
         return AvgPool2d(AvgPool2dOptions({3, 2}).stride({2, 1}).padding(1));
       })},
      {"adaptive_avgpool2d", module([] {
         return AdaptiveAvgPool2d(ExpandingArray{3, 2});
       })},
      {"adaptive_avgpool2d_3d_up", module([] { return AdaptiveAvgPool2d(4); })},
      {"pixel_shuffle", module([] { return PixelShuffle(2); })},
      {"upsample_nearest", module([] { return Upsample(UpsampleOptions().scale_factor({2.0})); })},
      {"upsample_nearest_size", module([] {
         return Upsample(UpsampleOptions().size({5, 2}));
       })},
      {"upsample_bilinear", module([] {
         return Upsample(UpsampleOptions().size({5, 7}).mode("bilinear"));
       })},
      {"upsample_bilinear_corners", module([] {
         return Upsample(
             UpsampleOptions().scale_factor({1.5}).mode("bilinear").align_corners(true));
       })},
      {"upsample_linear_down",
       module([] { return Upsample(UpsampleOptions().size({3}).mode("linear")); })},
      {"flatten", module([] { return Flatten(); })},
      {"flatten_range", module([] { return Flatten(FlattenOptions().start_dim(0).end_dim(1)); })},
      {"unflatten", module([] {
         return Unflatten(1, Shape{2, 3});
       })},
      {"identity", module([] { return Identity(); })},
  };
}

std::vector<ModuleCase> activationCases() {
  using namespace nn;
  return {
      {"relu", module([] { return ReLU(); })},
      {"silu", module([] { return SiLU(); })},
      {"mish", module([] { return Mish(); })},
      {"sigmoid", module([] { return Sigmoid(); })},
      {"tanh", module([] { return Tanh(); })},
      {"leaky_relu", module([] { return LeakyReLU(); })},
      {"leaky_relu_slope",
       module([] { return LeakyReLU(LeakyReLUOptions().negative_slope(0.2)); })},
      {"elu", module([] { return ELU(); })},
      {"elu_alpha", module([] { return ELU(ELUOptions().alpha(0.5)); })},
      {"gelu", module([] { return GELU(); })},
      {"gelu_tanh", module([] { return GELU(GELUOptions().approximate("tanh")); })},
      {"softplus", module([] { return Softplus(); })},
      {"softplus_beta_threshold",
       module([] { return Softplus(SoftplusOptions().beta(2).threshold(3)); })},
      {"hardtanh", module([] { return Hardtanh(); })},
      {"hardtanh_range",
       module([] { return Hardtanh(HardtanhOptions().min_val(-0.5).max_val(2.0)); })},
      {"softmax", module([] { return Softmax(1); })},
      {"log_softmax", module([] { return LogSoftmax(0); })},
      {"relu6", module([] { return ReLU6(); })},
      {"hardswish", module([] { return Hardswish(); })},
      {"hardsigmoid", module([] { return Hardsigmoid(); })},
      {"selu", module([] { return SELU(); })},
      {"celu", module([] { return CELU(0.5); })},
      {"softsign", module([] { return Softsign(); })},
      {"logsigmoid", module([] { return LogSigmoid(); })},
      {"tanhshrink", module([] { return Tanhshrink(); })},
      {"softshrink", module([] { return Softshrink(0.3); })},
      {"hardshrink", module([] { return Hardshrink(); })},
      {"threshold", module([] { return Threshold(ThresholdOptions(0.1, 20.0)); })},
      {"glu", module([] { return GLU(1); })},
      {"cosine_similarity", module([] { return CosineSimilarity(); })},
      {"cosine_similarity_broadcast",
       module([] { return CosineSimilarity(CosineSimilarityOptions().dim(-1).eps(1e-6)); })},
      {"pairwise_distance", module([] { return PairwiseDistance(); })},
      {"pairwise_distance_p1_keepdim",
       module([] { return PairwiseDistance(PairwiseDistanceOptions().p(1.0).keepdim(true)); })},
  };
}

std::vector<ModuleCase> lossCases() {
  using namespace nn;
  std::vector<ModuleCase> cases;
  const std::pair<const char*, nn::Reduction> reductions[] = {
      {"_none", kNone}, {"_mean", kMean}, {"_sum", kSum}};
  for (auto [suffix, r] : reductions) {
    auto named = [suffix](const char* name) { return std::string(name) + suffix; };
    cases.insert(
        cases.end(),
        {
            {named("mse"), module([r] { return MSELoss(r); })},
            {named("l1"), module([r] { return L1Loss(r); })},
            {named("smooth_l1"),
             module([r] { return SmoothL1Loss(SmoothL1LossOptions().reduction(r)); })},
            {named("huber"), module([r] { return HuberLoss(HuberLossOptions().reduction(r)); })},
            {named("cross_entropy"),
             module([r] { return CrossEntropyLoss(CrossEntropyLossOptions().reduction(r)); })},
            {named("nll"), module([r] { return NLLLoss(NLLLossOptions().reduction(r)); })},
            {named("bce"), module([r] { return BCELoss(BCELossOptions().reduction(r)); })},
            {named("bce_logits"),
             module([r] { return BCEWithLogitsLoss(BCEWithLogitsLossOptions().reduction(r)); })},
            {named("kl_div"), module([r] { return KLDivLoss(KLDivLossOptions().reduction(r)); })},
            {named("cosine_embedding"), module([r] {
               return CosineEmbeddingLoss(CosineEmbeddingLossOptions().reduction(r));
             })},
            {named("margin_ranking"), module([r] {
               return MarginRankingLoss(MarginRankingLossOptions().margin(0.2).reduction(r));
             })},
            {named("soft_margin"), module([r] { return SoftMarginLoss(r); })},
            {named("hinge_embedding"),
             module([r] { return HingeEmbeddingLoss(HingeEmbeddingLossOptions().reduction(r)); })},
            {named("triplet_margin"),
             module([r] { return TripletMarginLoss(TripletMarginLossOptions().reduction(r)); })},
            {named("poisson_nll"),
             module([r] { return PoissonNLLLoss(PoissonNLLLossOptions().reduction(r)); })},
            {named("gaussian_nll"),
             module([r] { return GaussianNLLLoss(GaussianNLLLossOptions().reduction(r)); })},
        });
  }
  using CE = CrossEntropyLossOptions;
  auto weight = [](const CaseData& d) { return d.at("const/weight"); };
  cases.insert(
      cases.end(),
      {
          {"smooth_l1_beta_half",
           module([] { return SmoothL1Loss(SmoothL1LossOptions().beta(0.5)); })},
          {"smooth_l1_beta_two_sum",
           module([] { return SmoothL1Loss(SmoothL1LossOptions().reduction(kSum).beta(2.0)); })},
          {"huber_delta_half", module([] { return HuberLoss(HuberLossOptions().delta(0.5)); })},
          {"huber_delta_two_none",
           module([] { return HuberLoss(HuberLossOptions().reduction(kNone).delta(2.0)); })},
          {"cross_entropy_probs", module([] { return CrossEntropyLoss(); })},
          {"cross_entropy_probs_none",
           module([] { return CrossEntropyLoss(CE().reduction(kNone)); })},
          {"cross_entropy_probs_weight_smoothing", module([=](const CaseData& d) {
             return CrossEntropyLoss(CE().weight(weight(d)).label_smoothing(0.2));
           })},
          {"cross_entropy_ignore_index",
           module([] { return CrossEntropyLoss(CE().ignore_index(2)); })},
          {"cross_entropy_ignore_default",
           module([] { return CrossEntropyLoss(CE().reduction(kSum)); })},
          {"cross_entropy_label_smoothing",
           module([] { return CrossEntropyLoss(CE().label_smoothing(0.1)); })},
          {"cross_entropy_weight",
           module([=](const CaseData& d) { return CrossEntropyLoss(CE().weight(weight(d))); })},
          {"cross_entropy_weight_sum", module([=](const CaseData& d) {
             return CrossEntropyLoss(CE().weight(weight(d)).reduction(kSum));
           })},
          {"cross_entropy_weight_ignore_smoothing", module([=](const CaseData& d) {
             return CrossEntropyLoss(CE().weight(weight(d)).ignore_index(2).label_smoothing(0.15));
           })},
          {"cross_entropy_weight_ignore_smoothing_none", module([=](const CaseData& d) {
             return CrossEntropyLoss(
                 CE().weight(weight(d)).ignore_index(2).label_smoothing(0.15).reduction(kNone));
           })},
          {"cross_entropy_spatial", module([] { return CrossEntropyLoss(); })},
          {"cross_entropy_spatial_none",
           module([] { return CrossEntropyLoss(CE().reduction(kNone)); })},
          {"cross_entropy_spatial_weight_smoothing", module([=](const CaseData& d) {
             return CrossEntropyLoss(CE().weight(weight(d)).label_smoothing(0.1));
           })},
          {"cross_entropy_spatial_probs", module([] { return CrossEntropyLoss(); })},
          {"cross_entropy_unbatched", module([] { return CrossEntropyLoss(); })},
          {"nll_weight",
           module([=](const CaseData& d) { return NLLLoss(NLLLossOptions().weight(weight(d))); })},
          {"nll_ignore_index", module([] { return NLLLoss(NLLLossOptions().ignore_index(1)); })},
          {"nll_weight_ignore_sum", module([=](const CaseData& d) {
             return NLLLoss(NLLLossOptions().ignore_index(1).weight(weight(d)).reduction(kSum));
           })},
          {"nll_spatial_weight",
           module([=](const CaseData& d) { return NLLLoss(NLLLossOptions().weight(weight(d))); })},
          {"bce_weight",
           module([=](const CaseData& d) { return BCELoss(BCELossOptions().weight(weight(d))); })},
          {"bce_weight_none", module([=](const CaseData& d) {
             return BCELoss(BCELossOptions().weight(weight(d)).reduction(kNone));
           })},
          {"bce_logits_pos_weight", module([](const CaseData& d) {
             return BCEWithLogitsLoss(
                 BCEWithLogitsLossOptions().pos_weight(d.at("const/pos_weight")));
           })},
          {"bce_logits_weight_pos_weight_sum", module([=](const CaseData& d) {
             return BCEWithLogitsLoss(BCEWithLogitsLossOptions()
                                          .weight(weight(d))
                                          .pos_weight(d.at("const/pos_weight"))
                                          .reduction(kSum));
           })},
          {"kl_div_batchmean",
           module([] { return KLDivLoss(KLDivLossOptions().batchmean(true)); })},
          {"kl_div_log_target",
           module([] { return KLDivLoss(KLDivLossOptions().log_target(true)); })},
          {"kl_div_log_target_batchmean",
           module([] { return KLDivLoss(KLDivLossOptions().batchmean(true).log_target(true)); })},
          {"cosine_embedding_margin",
           module([] { return CosineEmbeddingLoss(CosineEmbeddingLossOptions().margin(-0.2)); })},
          {"cosine_embedding_margin_none", module([] {
             return CosineEmbeddingLoss(CosineEmbeddingLossOptions().margin(0.3).reduction(kNone));
           })},
          {"triplet_margin_swap_p1", module([] {
             return TripletMarginLoss(TripletMarginLossOptions().margin(0.5).p(1.0).swap(true));
           })},
          {"poisson_nll_full_linear", module([] {
             return PoissonNLLLoss(PoissonNLLLossOptions().log_input(false).full(true));
           })},
          {"gaussian_nll_full_homoscedastic",
           module([] { return GaussianNLLLoss(GaussianNLLLossOptions().full(true)); })},
      });
  return cases;
}

std::vector<ModuleCase> functionCases() {
  return {
      {"sdpa", functional([](const Inputs& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2]);
       })},
      {"sdpa_bool_mask", functional([](const Inputs& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
       })},
      {"sdpa_float_mask", functional([](const Inputs& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
       })},
      {"sdpa_causal", functional([](const Inputs& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2], {}, 0.0, true);
       })},
      {"sdpa_causal_bool_mask", functional([](const Inputs& in) {
         return F::scaled_dot_product_attention(in[0], in[1], in[2], in[3], 0.0, true);
       })},
  };
}

/// A case of a plain function of the inputs that also reads the case's tensor options.
std::function<Subject(const CaseData&)> functionalWith(std::function<Forward(const CaseData&)> f) {
  return [f](const CaseData& d) { return Subject{nullptr, f(d)}; };
}

/// LibTorch's top-level functions with ATen's positional arguments (the script calls the ATen
/// ops with the same ones).
std::vector<ModuleCase> topLevelCases() {
  constexpr int64_t none = weft::Reduction::None, mean = weft::Reduction::Mean,
                    sum = weft::Reduction::Sum;
  auto withWeight = [](auto f) {
    return functionalWith([f](const CaseData& d) {
      Tensor w = d.at("const/weight");
      return Forward([f, w](const Inputs& in) { return f(in, w); });
    });
  };
  return {
      {"aten_elu_scale",
       functional([](const Inputs& in) { return weft::elu(in[0], 1.5, 2.0, 0.5); })},
      {"aten_log_sigmoid", functional([](const Inputs& in) { return weft::log_sigmoid(in[0]); })},
      {"aten_nll_loss_weight_sum_ignore", withWeight([=](const Inputs& in, const Tensor& w) {
         return weft::nll_loss(in[0], in[1], w, sum, 1);
       })},
      {"aten_nll_loss2d_none", functional([=](const Inputs& in) {
         return weft::nll_loss2d(in[0], in[1], {}, none, -100);
       })},
      {"aten_cross_entropy_loss_weight_none_ignore_smoothing",
       withWeight([=](const Inputs& in, const Tensor& w) {
         return weft::cross_entropy_loss(in[0], in[1], w, none, 2, 0.1);
       })},
      {"aten_binary_cross_entropy_weight_sum", withWeight([=](const Inputs& in, const Tensor& w) {
         return weft::binary_cross_entropy(in[0], in[1], w, sum);
       })},
      {"aten_binary_cross_entropy_with_logits_none", functionalWith([=](const CaseData& d) {
         Tensor w = d.at("const/weight"), pw = d.at("const/pos_weight");
         return Forward([=](const Inputs& in) {
           return weft::binary_cross_entropy_with_logits(in[0], in[1], w, pw, none);
         });
       })},
      {"aten_mse_loss_sum",
       functional([=](const Inputs& in) { return weft::mse_loss(in[0], in[1], sum); })},
      {"aten_l1_loss_none",
       functional([=](const Inputs& in) { return weft::l1_loss(in[0], in[1], none); })},
      {"aten_smooth_l1_loss_sum_beta",
       functional([=](const Inputs& in) { return weft::smooth_l1_loss(in[0], in[1], sum, 0.5); })},
      {"aten_huber_loss_none_delta",
       functional([=](const Inputs& in) { return weft::huber_loss(in[0], in[1], none, 2.0); })},
      {"aten_kl_div_mean_log_target",
       functional([=](const Inputs& in) { return weft::kl_div(in[0], in[1], mean, true); })},
      {"aten_margin_ranking_loss_sum", functional([=](const Inputs& in) {
         return weft::margin_ranking_loss(in[0], in[1], in[2], 0.3, sum);
       })},
      {"aten_hinge_embedding_loss_none", functional([=](const Inputs& in) {
         return weft::hinge_embedding_loss(in[0], in[1], 0.5, none);
       })},
      {"aten_cosine_embedding_loss_sum", functional([=](const Inputs& in) {
         return weft::cosine_embedding_loss(in[0], in[1], in[2], 0.2, sum);
       })},
      {"aten_soft_margin_loss_sum",
       functional([=](const Inputs& in) { return weft::soft_margin_loss(in[0], in[1], sum); })},
      {"aten_triplet_margin_loss_swap_none", functional([=](const Inputs& in) {
         return weft::triplet_margin_loss(in[0], in[1], in[2], 0.5, 1.0, 1e-6, true, none);
       })},
      {"aten_poisson_nll_loss_full_sum", functional([=](const Inputs& in) {
         return weft::poisson_nll_loss(in[0], in[1], false, true, 1e-8, sum);
       })},
      {"aten_batch_norm_eval", functionalWith([](const CaseData& d) {
         Tensor rm = d.at("const/running_mean"), rv = d.at("const/running_var");
         return Forward([=](const Inputs& in) {
           return weft::batch_norm(in[0], in[1], in[2], rm, rv, false, 0.1, 1e-3, false);
         });
       })},
      {"aten_batch_norm_train_no_running_stats", functional([](const Inputs& in) {
         return weft::batch_norm(in[0], in[1], in[2], {}, {}, true, 0.1, 1e-5, false);
       })},
      {"aten_layer_norm", functional([](const Inputs& in) {
         return weft::layer_norm(in[0], {4}, in[1], in[2], 1e-3, true);
       })},
      {"aten_group_norm", functional([](const Inputs& in) {
         return weft::group_norm(in[0], 2, in[1], in[2], 1e-4, true);
       })},
      {"aten_embedding_padding_idx",
       functional([](const Inputs& in) { return weft::embedding(in[0], in[1], 1); })},
  };
}

std::vector<ModuleCase> sequenceCases() {
  using namespace nn;
  const Mode train = Mode::Train;
  auto flat = [](std::vector<Tensor> ts) {
    for (Tensor& t : ts)
      t = t.flatten();
    return cat(ts);
  };
  // Output and final states, concatenated as the script does.
  auto rnnOut = [flat](const auto& m, const Inputs& in) {
    auto [y, h] = in.size() > 1 ? m(in[0], in[1]) : m(in[0]);
    return flat({y, h});
  };
  auto lstmOut = [flat](const LSTM& m, const Inputs& in) {
    auto [y, hc] = in.size() > 1 ? m(in[0], std::make_tuple(in[1], in[2])) : m(in[0]);
    return flat({y, std::get<0>(hc), std::get<1>(hc)});
  };
  auto causal = [](int64_t l) { return ones({l, l}, kBool).triu(1); };
  return {
      {"rnn_tanh", module([] { return RNN(3, 4); }, train, rnnOut)},
      {"rnn_relu_two_layers_h0",
       module([] { return RNN(RNNOptions(3, 4).num_layers(2).nonlinearity("relu")); }, train,
              rnnOut)},
      {"rnn_bidirectional_batch_first_nobias",
       module(
           [] { return RNN(RNNOptions(3, 4).bias(false).batch_first(true).bidirectional(true)); },
           train, rnnOut)},
      {"lstm", module([] { return LSTM(3, 4); }, train, lstmOut)},
      {"lstm_two_layers_bidirectional_states",
       module([] { return LSTM(LSTMOptions(3, 4).num_layers(2).bidirectional(true)); }, train,
              lstmOut)},
      {"lstm_unbatched_batch_first",
       module([] { return LSTM(LSTMOptions(3, 5).batch_first(true)); }, train, lstmOut)},
      {"gru", module([] { return GRU(3, 4); }, train, rnnOut)},
      {"gru_two_layers_bidirectional_batch_first_h0",
       module(
           [] { return GRU(GRUOptions(3, 4).num_layers(2).bidirectional(true).batch_first(true)); },
           train, rnnOut)},
      {"mha_self", module([] { return MultiheadAttention(8, 2); }, train,
                          [flat](const MultiheadAttention& m, const Inputs& in) {
                            auto [y, w] = m(in[0], in[0], in[0]);
                            return flat({y, w});
                          })},
      {"mha_cross_key_padding", module([] { return MultiheadAttention(8, 4); }, train,
                                       [flat](const MultiheadAttention& m, const Inputs& in) {
                                         auto [y, w] = m(in[0], in[1], in[2], in[3]);
                                         return flat({y, w});
                                       })},
      {"mha_causal_mask_unaveraged_batch_first",
       module([] { return MultiheadAttention(MultiheadAttentionOptions(6, 3).batch_first(true)); },
              train,
              [flat, causal](const MultiheadAttention& m, const Inputs& in) {
                auto [y, w] = m->forward(in[0], in[0], in[0], {}, true, causal(4), false);
                return flat({y, w});
              })},
      {"mha_float_mask_kdim_vdim_nobias",
       module(
           [] {
             return MultiheadAttention(MultiheadAttentionOptions(4, 2).kdim(3).vdim(5).bias(false));
           },
           train,
           [flat](const MultiheadAttention& m, const Inputs& in) {
             auto [y, w] = m->forward(in[0], in[1], in[2], {}, true, in[3]);
             return flat({y, w});
           })},
      {"transformer_encoder_post_norm",
       module(
           [] {
             return TransformerEncoderLayer(
                 TransformerEncoderLayerOptions(8, 2).dim_feedforward(16).dropout(0));
           },
           train,
           [causal](const TransformerEncoderLayer& m, const Inputs& in) {
             return m(in[0], causal(5));
           })},
      {"transformer_encoder_pre_norm_gelu_key_padding",
       module(
           [] {
             return TransformerEncoderLayer(TransformerEncoderLayerOptions(8, 2)
                                                .dim_feedforward(12)
                                                .dropout(0)
                                                .activation("gelu")
                                                .batch_first(true)
                                                .norm_first(true));
           },
           train,
           [](const TransformerEncoderLayer& m, const Inputs& in) {
             return m->forward(in[0], {}, in[1]);
           })},
      {"transformer_decoder_post_norm",
       module(
           [] {
             return TransformerDecoderLayer(
                 TransformerDecoderLayerOptions(8, 2).dim_feedforward(16).dropout(0));
           },
           train,
           [causal](const TransformerDecoderLayer& m, const Inputs& in) {
             return m(in[0], in[1], causal(4));
           })},
      {"transformer_decoder_pre_norm_memory_padding",
       module(
           [] {
             return TransformerDecoderLayer(TransformerDecoderLayerOptions(8, 4)
                                                .dim_feedforward(16)
                                                .dropout(0)
                                                .norm_first(true)
                                                .batch_first(true));
           },
           train,
           [](const TransformerDecoderLayer& m, const Inputs& in) {
             return m->forward(in[0], in[1], {}, {}, {}, in[2]);
           })},
  };
}

const std::vector<ModuleCase>& moduleCases() {
  static const std::vector<ModuleCase> cases = [] {
    std::vector<ModuleCase> all;
    for (auto part : {layerCases(), sequenceCases(), activationCases(), lossCases(),
                      functionCases(), topLevelCases()})
      all.insert(all.end(), part.begin(), part.end());
    return all;
  }();
  return cases;
}

/// The case's inputs (fresh leaves; those with a reference gradient require grad).
Inputs inputsOf(const CaseData& d) {
  Inputs in;
  for (size_t i = 0; d.has("in" + std::to_string(i)); ++i) {
    std::string key = "in" + std::to_string(i);
    Tensor t = d.at(key).clone();
    if (d.has("grad/" + key)) t.requires_grad_();
    in.push_back(t);
  }
  return in;
}

/// `f(inputs)` compiled, and the backward of (out * cot).sum() through the compiled function.
template <size_t> using TensorArg = const Tensor&;
template <size_t... I>
Tensor compiledForwardBackward(const Forward& f, const Inputs& in, const Tensor& cot,
                               std::index_sequence<I...>) {
  auto compiled = compile([&f](TensorArg<I>... x) { return f({x...}); });
  Tensor out = compiled(in[I]...);
  EXPECT_EQ(compiled.compiled().num_compiled(), 1u); // compiled, not run eagerly
  if (out.requires_grad()) (out * cot).sum().backward();
  return out;
}
Tensor forwardBackward(const Forward& f, const Inputs& in, const Tensor& cot, bool compiled) {
  if (!compiled) {
    Tensor out = f(in);
    if (out.requires_grad()) (out * cot).sum().backward();
    return out;
  }
  switch (in.size()) {
  case 1:
    return compiledForwardBackward(f, in, cot, std::make_index_sequence<1>{});
  case 2:
    return compiledForwardBackward(f, in, cot, std::make_index_sequence<2>{});
  case 3:
    return compiledForwardBackward(f, in, cot, std::make_index_sequence<3>{});
  case 4:
    return compiledForwardBackward(f, in, cot, std::make_index_sequence<4>{});
  default:
    throw std::runtime_error("compiled cases take 1 to 4 inputs");
  }
}

/// Builds the case's subject, loads its parameters and buffers, runs forward and backward and
/// compares the output, the input and parameter gradients and the buffers afterwards.
void checkModuleCase(const ModuleCase& c, const CaseData& d, bool compiled) {
  Subject s = c.make(d);
  if (s.module) {
    nn::StateDict state;
    for (const char* kind : {"param/", "buffer/"})
      for (auto& [name, t] : d.under(kind))
        state.emplace(name, t);
    s.module->load_state_dict(state);
  }
  Inputs in = inputsOf(d);
  Tensor out = forwardBackward(s.forward, in, d.at("cot"), compiled);
  expectClose(out, d.at("out"), "out");
  for (size_t i = 0; i < in.size(); ++i)
    if (std::string key = "grad/in" + std::to_string(i); d.has(key))
      expectClose(in[i].grad(), d.at(key), key);
  if (!s.module) return;
  for (auto& [name, p] : s.module->named_parameters())
    expectClose(p.grad().defined() ? p.grad() : zeros_like(p), d.at("grad/" + name),
                "grad/" + name);
  for (auto& [name, b] : s.module->named_buffers())
    expectClose(b, d.at("after/" + name), "after/" + name);
}

class ModuleReference : public ::testing::TestWithParam<ModuleCase> {};

TEST_P(ModuleReference, ForwardAndGradientsMatchPyTorch) {
  const ModuleCase& c = GetParam();
  CaseData d(c.name);
  for (bool compiled : {false, true}) {
    std::string run = compiled ? "compiled" : "eager";
    SCOPED_TRACE(run);
    reportingErrors(run, [&] { checkModuleCase(c, d, compiled); });
  }
}

auto caseName = [](const auto& info) { return info.param.name; };
INSTANTIATE_TEST_SUITE_P(NnReference, ModuleReference, ::testing::ValuesIn(moduleCases()),
                         caseName);

// ---- optimizers ----

/// An optimizer over two parameters in two groups: p0 with the defaults, p1 with the defaults
/// but another learning rate (a group given in PyTorch as {"params": [p1], "lr": lr1}).
struct OptimizerCase {
  std::string name;
  std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)> make;
};
void PrintTo(const OptimizerCase& c, std::ostream* os) {
  *os << c.name;
}

template <typename Opt, typename Options>
std::function<std::unique_ptr<optim::Optimizer>(const std::vector<Tensor>&)>
optimizer(Options defaults, double lr1) {
  return [defaults, lr1](const std::vector<Tensor>& p) {
    Options second = defaults;
    second.lr(lr1);
    std::vector<optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{p.at(0)});
    groups.emplace_back(std::vector<Tensor>{p.at(1)}, second.clone());
    return std::make_unique<Opt>(std::move(groups), defaults);
  };
}

const std::vector<OptimizerCase>& optimizerCases() {
  using namespace optim;
  static const std::vector<OptimizerCase> cases = {
      {"sgd", optimizer<SGD>(SGDOptions(0.1), 0.05)},
      {"sgd_momentum", optimizer<SGD>(SGDOptions(0.1).momentum(0.9), 0.05)},
      {"sgd_momentum_dampening",
       optimizer<SGD>(SGDOptions(0.1).momentum(0.8).dampening(0.3), 0.05)},
      {"sgd_nesterov_weight_decay",
       optimizer<SGD>(SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.1), 0.05)},
      {"sgd_weight_decay", optimizer<SGD>(SGDOptions(0.1).weight_decay(0.2), 0.05)},
      {"adam", optimizer<Adam>(AdamOptions(0.01), 0.03)},
      {"adam_betas_eps", optimizer<Adam>(AdamOptions(0.01).betas({0.8, 0.9}).eps(1e-3), 0.03)},
      {"adam_weight_decay", optimizer<Adam>(AdamOptions(0.01).weight_decay(0.1), 0.03)},
      {"adam_amsgrad", optimizer<Adam>(AdamOptions(0.01).amsgrad(true).weight_decay(0.05), 0.03)},
      {"adamw", optimizer<AdamW>(AdamWOptions(0.01), 0.03)},
      {"adamw_weight_decay_amsgrad",
       optimizer<AdamW>(AdamWOptions(0.01).weight_decay(0.3).amsgrad(true).betas({0.85, 0.95}),
                        0.03)},
      {"rmsprop", optimizer<RMSprop>(RMSpropOptions(0.01), 0.002)},
      {"rmsprop_momentum",
       optimizer<RMSprop>(RMSpropOptions(0.01).momentum(0.9).alpha(0.9), 0.002)},
      {"rmsprop_centered", optimizer<RMSprop>(RMSpropOptions(0.01).centered(true), 0.002)},
      {"rmsprop_centered_momentum_weight_decay",
       optimizer<RMSprop>(
           RMSpropOptions(0.01).centered(true).momentum(0.5).weight_decay(0.1).eps(1e-4), 0.002)},
      {"adagrad", optimizer<Adagrad>(AdagradOptions(0.1), 0.05)},
      {"adagrad_lr_decay_weight_decay",
       optimizer<Adagrad>(AdagradOptions(0.1).lr_decay(0.1).weight_decay(0.2), 0.05)},
      {"adagrad_initial_accumulator_eps",
       optimizer<Adagrad>(AdagradOptions(0.1).initial_accumulator_value(0.5).eps(1e-3), 0.05)},
  };
  return cases;
}

/// Runs the case's steps (the gradient g_t of p_i made by backward of (p_i * g_t).sum()), eagerly
/// or as one compiled step function, comparing the parameters after every step.
void checkOptimizerCase(const OptimizerCase& c, const CaseData& d, bool compiled) {
  std::vector<Tensor> p = {d.at("init/p0").clone().requires_grad_(),
                           d.at("init/p1").clone().requires_grad_()};
  std::unique_ptr<optim::Optimizer> opt = c.make(p);
  auto step = [&](const Tensor& g0, const Tensor& g1) {
    Tensor loss = (p[0] * g0).sum() + (p[1] * g1).sum();
    loss.backward();
    opt->step();
    opt->zero_grad();
    return loss;
  };
  auto compiledStep = compile(step);
  int64_t steps = d.at("grads/p0").size(0);
  for (int64_t t = 0; t < steps; ++t) {
    Tensor g0 = d.at("grads/p0").select(0, t).contiguous(),
           g1 = d.at("grads/p1").select(0, t).contiguous();
    compiled ? compiledStep(g0, g1) : step(g0, g1);
    for (size_t i = 0; i < p.size(); ++i)
      expectClose(p[i], d.at("params/p" + std::to_string(i)).select(0, t),
                  "p" + std::to_string(i) + " after step " + std::to_string(t + 1));
  }
}

class OptimizerReference : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(OptimizerReference, StepsMatchPyTorch) {
  const OptimizerCase& c = GetParam();
  CaseData d(c.name);
  for (bool compiled : {false, true}) {
    std::string run = compiled ? "compiled" : "eager";
    SCOPED_TRACE(run);
    reportingErrors(run, [&] { checkOptimizerCase(c, d, compiled); });
  }
}

INSTANTIATE_TEST_SUITE_P(NnReference, OptimizerReference, ::testing::ValuesIn(optimizerCases()),
                         caseName);

// ---- learning-rate schedules ----

/// A schedule of SGD with two groups (learning rates 0.1 and 0.02).
struct SchedulerCase {
  std::string name;
  std::function<std::shared_ptr<optim::LRScheduler>(optim::Optimizer&)> make;
};
void PrintTo(const SchedulerCase& c, std::ostream* os) {
  *os << c.name;
}

template <typename S, typename... Args>
std::function<std::shared_ptr<optim::LRScheduler>(optim::Optimizer&)> schedule(Args... args) {
  return [args...](optim::Optimizer& o) { return std::make_shared<S>(o, args...); };
}

const std::vector<SchedulerCase>& schedulerCases() {
  using namespace optim;
  using Schedules = std::vector<std::shared_ptr<LRScheduler>>;
  using Milestones = std::vector<int64_t>;
  static const std::vector<SchedulerCase> cases = {
      {"step_lr", schedule<StepLR>(int64_t{3}, 0.5)},
      {"multistep_lr", schedule<MultiStepLR>(Milestones{2, 5, 9}, 0.3)},
      {"exponential_lr", schedule<ExponentialLR>(0.8)},
      {"cosine_annealing_lr", schedule<CosineAnnealingLR>(int64_t{5}, 0.001)},
      {"linear_lr", schedule<LinearLR>()},
      {"linear_lr_decay", schedule<LinearLR>(1.0, 0.25, int64_t{8})},
      {"onecycle_lr", schedule<OneCycleLR>(0.5, int64_t{20})},
      {"onecycle_lr_to_the_end", schedule<OneCycleLR>(0.5, int64_t{12}, 0.25, 10.0, 100.0)},
      {"sequential_lr",
       [](Optimizer& o) {
         Schedules parts = {std::make_shared<LinearLR>(o, 0.1, 1.0, 4),
                            std::make_shared<ExponentialLR>(o, 0.7)};
         return std::make_shared<SequentialLR>(o, parts, Milestones{4});
       }},
      {"sequential_lr_three",
       [](Optimizer& o) {
         Schedules parts = {std::make_shared<ExponentialLR>(o, 0.9),
                            std::make_shared<StepLR>(o, 2, 0.5),
                            std::make_shared<CosineAnnealingLR>(o, 4)};
         return std::make_shared<SequentialLR>(o, parts, Milestones{3, 7});
       }},
  };
  return cases;
}

class SchedulerReference : public ::testing::TestWithParam<SchedulerCase> {};

/// Each epoch: the groups' learning rates, and what a compiled SGD step (gradient 1) takes off
/// each parameter with them, which must be that learning rate too.
TEST_P(SchedulerReference, LearningRatesMatchPyTorch) {
  const SchedulerCase& c = GetParam();
  CaseData d(c.name);
  std::vector<Tensor> p = {zeros({1}, kFloat64).requires_grad_(),
                           zeros({1}, kFloat64).requires_grad_()};
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{p[0]});
  groups.emplace_back(std::vector<Tensor>{p[1]}, optim::SGDOptions(0.02).clone());
  optim::SGD opt(std::move(groups), optim::SGDOptions(0.1));
  std::shared_ptr<optim::LRScheduler> schedule = c.make(opt);
  auto step = compile([&](const Tensor& g) {
    Tensor loss = (p[0] * g).sum() + (p[1] * g).sum();
    loss.backward();
    opt.step();
    opt.zero_grad();
    return loss;
  });
  const Tensor& want = d.at("lr");
  for (int64_t epoch = 0; epoch < want.size(0); ++epoch) {
    SCOPED_TRACE("epoch " + std::to_string(epoch));
    std::vector<double> lrs = schedule->get_last_lr();
    expectClose(from_vector(lrs), want.select(0, epoch), "learning rates");
    std::vector<Tensor> before = {p[0].detach().clone(), p[1].detach().clone()};
    reportingErrors("compiled step", [&] { step(ones({1}, kFloat64)); });
    Tensor taken = cat({before[0] - p[0].detach(), before[1] - p[1].detach()});
    expectClose(taken, want.select(0, epoch), "learning rates a compiled step used");
    // As many steps as PyTorch took: OneCycleLR refuses more, as PyTorch's does.
    if (epoch + 1 < want.size(0)) schedule->step();
  }
}

INSTANTIATE_TEST_SUITE_P(NnReference, SchedulerReference, ::testing::ValuesIn(schedulerCases()),
                         caseName);

// ---- the file and the tables ----

TEST(NnReference, FileAndTablesListTheSameCases) {
  std::set<std::string> inFile, inTables;
  for (const auto& [key, t] : referenceFile())
    inFile.insert(key.substr(0, key.find('/')));
  auto add = [&](const std::string& name) {
    EXPECT_TRUE(inTables.insert(name).second) << "case '" << name << "' is listed twice";
  };
  for (const ModuleCase& c : moduleCases())
    add(c.name);
  for (const OptimizerCase& c : optimizerCases())
    add(c.name);
  for (const SchedulerCase& c : schedulerCases())
    add(c.name);
  for (const std::string& name : inFile)
    EXPECT_TRUE(inTables.count(name)) << "case '" << name << "' of the file has no table entry";
  for (const std::string& name : inTables)
    EXPECT_TRUE(inFile.count(name))
        << "case '" << name << "' is not in the file: regenerate it with nn_reference.py";
}

} // namespace
