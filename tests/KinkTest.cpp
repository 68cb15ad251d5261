// Gradients at non-differentiable points: every case of the table below evaluated with its inputs
// exactly at its kinks, ties and clamp bounds (and either side), eagerly and compiled, gives
// PyTorch's values and gradients (reference/kinks.txt, made once by reference/kinks.py), or the
// value weft deliberately gives instead, listed with its reason.
#include "TestUtil.h"

#include <map>
#include <set>

namespace weft::test {
namespace {

namespace F = nn::functional;
using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;
using CaseFn = std::function<Outputs(const Inputs&)>;

/// A result as Outputs: one tensor, or a (values, indices) pair.
template <typename R> Outputs asOutputs(R r) {
  if constexpr (std::is_same_v<R, Tensor>)
    return {r};
  else
    return {r.first, r.second};
}
/// A case of one, two, three or four inputs.
template <typename Fn> CaseFn of1(Fn f) {
  return [f](const Inputs& in) { return asOutputs(f(in.at(0))); };
}
template <typename Fn> CaseFn of2(Fn f) {
  return [f](const Inputs& in) { return asOutputs(f(in.at(0), in.at(1))); };
}
template <typename Fn> CaseFn of3(Fn f) {
  return [f](const Inputs& in) { return asOutputs(f(in.at(0), in.at(1), in.at(2))); };
}
template <typename Fn> CaseFn of4(Fn f) {
  return [f](const Inputs& in) { return asOutputs(f(in.at(0), in.at(1), in.at(2), in.at(3))); };
}

constexpr double kInf = std::numeric_limits<double>::infinity();

/// The cases, named as in reference/kinks.py and meaning the same PyTorch call.
const std::map<std::string, CaseFn>& kinkCases() {
  using T = const Tensor&;
  static const std::map<std::string, CaseFn> cases = {
      // activations
      {"relu", of1([](T x) { return F::relu(x); })},
      {"relu6", of1([](T x) { return F::relu6(x); })},
      {"leaky_relu", of1([](T x) { return F::leaky_relu(x); })},
      {"leaky_relu_neg", of1([](T x) { return F::leaky_relu(x, -0.2); })},
      {"prelu", of2([](T x, T w) { return x.prelu(w); })},
      {"prelu_channels", of2([](T x, T w) { return x.prelu(w); })},
      {"elu", of1([](T x) { return F::elu(x); })},
      {"elu_alpha", of1([](T x) { return F::elu(x, 0.5); })},
      {"celu", of1([](T x) { return F::celu(x, 2.0); })},
      {"celu_small", of1([](T x) { return F::celu(x, 0.5); })},
      {"selu", of1([](T x) { return F::selu(x); })},
      {"gelu", of1([](T x) { return F::gelu(x); })},
      {"gelu_tanh", of1([](T x) { return F::gelu(x, true); })},
      {"silu", of1([](T x) { return F::silu(x); })},
      {"mish", of1([](T x) { return F::mish(x); })},
      {"softplus", of1([](T x) { return F::softplus(x); })},
      {"softplus_beta", of1([](T x) { return F::softplus(x, 2.0, 1.0); })},
      {"hardtanh", of1([](T x) { return F::hardtanh(x); })},
      {"hardtanh_shifted", of1([](T x) { return F::hardtanh(x, -0.5, 2.0); })},
      {"hardtanh_point", of1([](T x) { return F::hardtanh(x, 0.5, 0.5); })},
      {"hardsigmoid", of1([](T x) { return F::hardsigmoid(x); })},
      {"hardswish", of1([](T x) { return F::hardswish(x); })},
      {"softshrink", of1([](T x) { return F::softshrink(x); })},
      {"softshrink_zero", of1([](T x) { return F::softshrink(x, 0.0); })},
      {"hardshrink", of1([](T x) { return F::hardshrink(x); })},
      {"threshold", of1([](T x) { return F::threshold(x, 1.0, 5.0); })},
      {"logsigmoid", of1([](T x) { return F::logsigmoid(x); })},
      {"softsign", of1([](T x) { return F::softsign(x); })},
      // elementwise
      {"abs", of1([](T x) { return x.abs(); })},
      {"sign", of1([](T x) { return x.sign(); })},
      {"clamp", of1([](T x) { return x.clamp(-1, 2); })},
      {"clamp_min", of1([](T x) { return x.clamp_min(0.5); })},
      {"clamp_max", of1([](T x) { return x.clamp_max(1); })},
      {"clamp_point", of1([](T x) { return x.clamp(0.5, 0.5); })},
      {"clamp_inverted", of1([](T x) { return x.clamp(2, 1); })},
      {"floor", of1([](T x) { return x.floor(); })},
      {"ceil", of1([](T x) { return x.ceil(); })},
      {"round", of1([](T x) { return x.round(); })},
      {"trunc", of1([](T x) { return x.trunc(); })},
      {"frac", of1([](T x) { return x.frac(); })},
      {"sqrt", of1([](T x) { return x.sqrt(); })},
      {"logit", of1([](T x) { return x.logit(); })},
      {"logit_eps", of1([](T x) { return x.logit(0.25); })},
      {"pow_0", of1([](T x) { return x.pow(0); })},
      {"pow_half", of1([](T x) { return x.pow(0.5); })},
      {"pow_1", of1([](T x) { return x.pow(1); })},
      {"pow_2", of1([](T x) { return x.pow(2); })},
      {"pow_3", of1([](T x) { return x.pow(3); })},
      {"pow_1_5", of1([](T x) { return x.pow(1.5); })},
      {"pow_neg1", of1([](T x) { return x.pow(-1); })},
      {"pow_tensor", of2([](T a, T b) { return a.pow(b); })},
      {"fmod", of2([](T a, T b) { return a.fmod(b); })},
      {"fmod_scalar", of1([](T a) { return a.fmod(2.0); })},
      {"remainder", of2([](T a, T b) { return a.remainder(b); })},
      {"remainder_scalar", of1([](T a) { return a.remainder(2.0); })},
      {"maximum", of2([](T a, T b) { return maximum(a, b); })},
      {"minimum", of2([](T a, T b) { return minimum(a, b); })},
      {"fmax", of2([](T a, T b) { return fmax(a, b); })},
      {"fmin", of2([](T a, T b) { return fmin(a, b); })},
      {"where", of3([](T c, T a, T b) { return where(c, a, b); })},
      {"where_kink", of1([](T x) { return where(x > 0, x, x * -2.0); })},
      {"masked_fill", of1([](T x) { return x.masked_fill(x >= 1, 5.0); })},
      // reductions with ties
      {"max", of1([](T x) { return x.max(); })},
      {"max_nan", of1([](T x) { return x.max(); })},
      {"amax_nan", of1([](T x) { return x.amax({1}); })},
      {"min", of1([](T x) { return x.min(); })},
      {"amax", of1([](T x) { return x.amax(); })},
      {"amin", of1([](T x) { return x.amin(); })},
      {"amax0", of1([](T x) { return x.amax({0}); })},
      {"amax1", of1([](T x) { return x.amax({1}); })},
      {"amin1_keepdim", of1([](T x) { return x.amin({1}, true); })},
      {"amax01", of1([](T x) {
         return x.amax({0, 1});
       })},
      {"max_dim1", of1([](T x) { return x.max(1); })},
      {"max_dim0", of1([](T x) { return x.max(0); })},
      {"min_dim1", of1([](T x) { return x.min(1); })},
      {"min_dim0_keepdim", of1([](T x) { return x.min(0, true); })},
      {"median", of1([](T x) { return x.median(); })},
      {"median_even", of1([](T x) { return x.median(); })},
      {"median_dim1", of1([](T x) { return x.median(1); })},
      {"median_dim0", of1([](T x) { return x.median(0); })},
      {"nanmedian", of1([](T x) { return x.nanmedian(); })},
      {"nanmedian_dim1", of1([](T x) { return x.nanmedian(1); })},
      {"kthvalue", of1([](T x) { return x.kthvalue(2, 1); })},
      {"kthvalue0", of1([](T x) { return x.kthvalue(2, 0); })},
      {"mode", of1([](T x) { return x.mode(1); })},
      {"mode0", of1([](T x) { return x.mode(0); })},
      {"sort", of1([](T x) { return x.sort(1); })},
      {"sort_desc", of1([](T x) { return x.sort(1, true); })},
      {"sort0", of1([](T x) { return x.sort(0); })},
      {"msort", of1([](T x) { return x.msort(); })},
      {"topk", of1([](T x) { return x.topk(2, 1); })},
      {"topk_smallest", of1([](T x) { return x.topk(2, 1, false); })},
      {"topk0", of1([](T x) { return x.topk(1, 0); })},
      {"quantile", of1([](T x) { return x.quantile(0.5, 1); })},
      {"quantile_all", of1([](T x) { return x.quantile(0.25); })},
      {"cummax", of1([](T x) { return x.cummax(1); })},
      {"cummin", of1([](T x) { return x.cummin(1); })},
      {"cummax0", of1([](T x) { return x.cummax(0); })},
      {"logsumexp_ties", of1([](T x) { return x.logsumexp({1}); })},
      {"logsumexp_neginf", of1([](T x) { return x.logsumexp({1}); })},
      {"logsumexp_all_neginf", of1([](T x) { return x.logsumexp({1}); })},
      {"std_constant", of1([](T x) { return x.std({1}); })},
      {"std_all_constant", of1([](T x) { return x.std(); })},
      {"std_inf", of1([](T x) { return x.std({1}); })},
      {"var_constant", of1([](T x) { return x.var({1}); })},
      // norms
      {"vector_norm_2", of1([](T x) { return linalg_vector_norm(x, 2, {1}); })},
      {"vector_norm_1", of1([](T x) { return linalg_vector_norm(x, 1, {1}); })},
      {"vector_norm_inf", of1([](T x) { return linalg_vector_norm(x, kInf, {1}); })},
      {"vector_norm_neginf", of1([](T x) { return linalg_vector_norm(x, -kInf, {1}); })},
      {"vector_norm_half", of1([](T x) { return linalg_vector_norm(x, 0.5, {1}); })},
      {"vector_norm_0", of1([](T x) { return linalg_vector_norm(x, 0, {1}); })},
      {"vector_norm_3", of1([](T x) { return linalg_vector_norm(x, 3, {1}); })},
      {"vector_norm_neg1", of1([](T x) { return linalg_vector_norm(x, -1, {1}); })},
      {"norm_2", of1([](T x) { return x.norm(2, {1}); })},
      {"norm_1", of1([](T x) { return x.norm(1, {1}); })},
      {"norm_inf", of1([](T x) { return x.norm(kInf, {1}); })},
      {"norm_half", of1([](T x) { return x.norm(0.5, {1}); })},
      {"norm_3", of1([](T x) { return x.norm(3, {1}); })},
      {"norm_zero", of1([](T x) { return x.norm(); })},
      {"norm_inf_zero", of1([](T x) { return x.norm(kInf); })},
      {"vector_norm_all", of1([](T x) { return linalg_vector_norm(x, kInf); })},
      {"matrix_norm_1", of1([](T x) { return linalg_matrix_norm(x, 1.0); })},
      {"matrix_norm_inf", of1([](T x) { return linalg_matrix_norm(x, kInf); })},
      {"matrix_norm_fro_zero", of1([](T x) { return linalg_matrix_norm(x); })},
      {"dist_zero", of2([](T a, T b) { return a.dist(b); })},
      {"dist_1", of2([](T a, T b) { return a.dist(b, 1); })},
      {"dist_inf", of2([](T a, T b) { return a.dist(b, kInf); })},
      {"dist_half", of2([](T a, T b) { return a.dist(b, 0.5); })},
      {"cdist", of2([](T a, T b) { return cdist(a, b); })},
      {"cdist_1", of2([](T a, T b) { return cdist(a, b, 1); })},
      {"cdist_inf", of2([](T a, T b) { return cdist(a, b, kInf); })},
      {"normalize", of1([](T x) { return F::normalize(x); })},
      {"normalize_1", of1([](T x) { return F::normalize(x, 1.0); })},
      {"cosine_similarity", of2([](T a, T b) { return F::cosine_similarity(a, b); })},
      {"pairwise_distance", of2([](T a, T b) { return F::pairwise_distance(a, b, 2.0, 0.0); })},
      {"renorm", of1([](T x) { return x.renorm(2, 0, 5.0); })},
      // pooling
      {"max_pool1d", of1([](T x) { return max_pool1d(x, 2, 1); })},
      {"max_pool1d_pad", of1([](T x) { return max_pool1d(x, 3, 2, 1); })},
      {"max_pool1d_dilation", of1([](T x) { return max_pool1d(x, 2, 1, 0, 2); })},
      {"max_pool1d_ceil", of1([](T x) { return max_pool1d(x, 2, 2, 0, 1, true); })},
      {"max_pool1d_nan", of1([](T x) { return max_pool1d(x, 2, 1); })},
      {"max_pool2d", of1([](T x) { return max_pool2d(x, 2); })},
      {"max_pool2d_overlap", of1([](T x) { return max_pool2d(x, 3, 1, 1); })},
      {"max_pool2d_stride", of1([](T x) {
         return max_pool2d(x, {2, 3}, {1, 2}, {1, 1});
       })},
      // losses
      {"l1_loss", of2([](T a, T b) { return F::l1_loss(a, b); })},
      {"mse_loss", of2([](T a, T b) { return F::mse_loss(a, b); })},
      {"smooth_l1_loss", of2([](T a, T b) { return F::smooth_l1_loss(a, b); })},
      {"smooth_l1_loss_beta", of2([](T a, T b) {
         return F::smooth_l1_loss(a, b, nn::SmoothL1LossOptions().beta(0.5).reduction(nn::kSum));
       })},
      {"smooth_l1_loss_beta0", of2([](T a, T b) {
         return F::smooth_l1_loss(a, b, nn::SmoothL1LossOptions().beta(0.0).reduction(nn::kNone));
       })},
      {"huber_loss", of2([](T a, T b) { return F::huber_loss(a, b); })},
      {"huber_loss_delta", of2([](T a, T b) {
         return F::huber_loss(a, b, nn::HuberLossOptions().delta(0.5).reduction(nn::kNone));
       })},
      {"bce_logits_zero", of2([](T x, T y) { return F::binary_cross_entropy_with_logits(x, y); })},
      {"bce_logits", of2([](T x, T y) {
         return F::binary_cross_entropy_with_logits(
             x, y, nn::BCEWithLogitsLossOptions().reduction(nn::kSum));
       })},
      {"bce_logits_pos_weight", of3([](T x, T y, T pw) {
         return F::binary_cross_entropy_with_logits(x, y,
                                                    nn::BCEWithLogitsLossOptions().pos_weight(pw));
       })},
      {"bce_logits_weight", of4([](T x, T y, T w, T pw) {
         return F::binary_cross_entropy_with_logits(
             x, y, nn::BCEWithLogitsLossOptions().weight(w).pos_weight(pw).reduction(nn::kNone));
       })},
      {"bce_logits_large", of2([](T x, T y) {
         return F::binary_cross_entropy_with_logits(
             x, y, nn::BCEWithLogitsLossOptions().reduction(nn::kNone));
       })},
      {"bce", of2([](T x, T y) { return F::binary_cross_entropy(x, y); })},
      {"bce_weight", of3([](T x, T y, T w) {
         return F::binary_cross_entropy(x, y, nn::BCELossOptions().weight(w).reduction(nn::kSum));
       })},
      {"bce_bounds", of2([](T x, T y) {
         return F::binary_cross_entropy(x, y, nn::BCELossOptions().reduction(nn::kNone));
       })},
      {"bce_bounds_target", of2([](T x, T y) {
         return F::binary_cross_entropy(x, y, nn::BCELossOptions().reduction(nn::kNone));
       })},
      {"gaussian_nll_loss", of3([](T x, T y, T v) {
         return F::gaussian_nll_loss(x, y, v, nn::GaussianNLLLossOptions().reduction(nn::kNone));
       })},
      {"kl_div",
       of2([](T x, T y) { return F::kl_div(x, y, nn::KLDivLossOptions().reduction(nn::kSum)); })},
      {"kl_div_log_target", of2([](T x, T y) {
         return F::kl_div(x, y, nn::KLDivLossOptions().reduction(nn::kSum).log_target(true));
       })},
      {"margin_ranking_loss", of3([](T a, T b, T y) {
         return F::margin_ranking_loss(
             a, b, y, nn::MarginRankingLossOptions().margin(0.5).reduction(nn::kNone));
       })},
      {"margin_ranking_loss_zero",
       of3([](T a, T b, T y) { return F::margin_ranking_loss(a, b, y); })},
      {"hinge_embedding_loss", of2([](T x, T y) {
         return F::hinge_embedding_loss(x, y, nn::HingeEmbeddingLossOptions().reduction(nn::kNone));
       })},
      {"soft_margin_loss", of2([](T x, T y) {
         return F::soft_margin_loss(x, y, nn::SoftMarginLossOptions(nn::kNone));
       })},
      {"triplet_margin_loss", of3([](T a, T p, T n) {
         return F::triplet_margin_loss(a, p, n,
                                       nn::TripletMarginLossOptions().eps(0).reduction(nn::kNone));
       })},
      {"triplet_margin_loss_swap", of3([](T a, T p, T n) {
         return F::triplet_margin_loss(
             a, p, n, nn::TripletMarginLossOptions().swap(true).eps(0).reduction(nn::kNone));
       })},
      {"triplet_margin_loss_p1", of3([](T a, T p, T n) {
         return F::triplet_margin_loss(
             a, p, n, nn::TripletMarginLossOptions().p(1).eps(0).reduction(nn::kNone));
       })},
      {"cosine_embedding_loss", of3([](T a, T b, T y) {
         return F::cosine_embedding_loss(a, b, y,
                                         nn::CosineEmbeddingLossOptions().reduction(nn::kNone));
       })},
      {"cosine_embedding_loss_margin", of3([](T a, T b, T y) {
         return F::cosine_embedding_loss(
             a, b, y, nn::CosineEmbeddingLossOptions().margin(0.6).reduction(nn::kNone));
       })},
      {"poisson_nll_loss", of2([](T x, T y) {
         return F::poisson_nll_loss(x, y, nn::PoissonNLLLossOptions().reduction(nn::kNone));
       })},
      {"poisson_nll_loss_full", of2([](T x, T y) {
         return F::poisson_nll_loss(x, y,
                                    nn::PoissonNLLLossOptions().full(true).reduction(nn::kNone));
       })},
      {"poisson_nll_loss_prob", of2([](T x, T y) {
         return F::poisson_nll_loss(
             x, y, nn::PoissonNLLLossOptions().log_input(false).reduction(nn::kNone));
       })},
  };
  return cases;
}

/// One value where weft deliberately differs from PyTorch: element `element` of output `k`, or of
/// the gradient with respect to differentiable input `k`.
struct Override {
  bool gradient;
  size_t k, element;
  double value;
};
/// Where weft deliberately differs from PyTorch at a kink: weft's values and why. The test asserts
/// these, and that PyTorch's differ.
struct Difference {
  const char* reason;
  std::vector<Override> values;
};
Override output(size_t k, size_t element, double value) {
  return {false, k, element, value};
}
Override grad(size_t k, size_t element, double value) {
  return {true, k, element, value};
}

const std::map<std::string, Difference>& differences() {
  static const std::map<std::string, Difference> d = {
      {"amax_nan",
       {"amax's gradient over a slice whose maximum is NaN goes to its NaN elements, as "
        "torch.max()'s; torch.amax spreads NaN over the slice",
        {grad(0, 0, 0), grad(0, 1, 0.5), grad(0, 2, 0.5)}}},
      {"bce_bounds_target",
       {"the target's gradient is the difference of the clamped logs the loss is made of "
        "(100 at a probability of 0); PyTorch's is of the unclamped ones (inf)",
        {grad(1, 0, 100), grad(1, 1, -150), grad(1, 2, 200)}}},
      {"cdist_inf",
       {"p = inf splits the gradient among tied coordinates, as vector_norm(inf) and amax do; "
        "PyTorch's cdist gives each tied coordinate all of it",
        {grad(0, 0, -1.75), grad(0, 1, -1.75), grad(0, 2, -0.25), grad(0, 3, -0.25),
         grad(1, 0, -0.5), grad(1, 1, -0.5), grad(1, 2, 1.5), grad(1, 3, 1.5), grad(1, 4, 1),
         grad(1, 5, 1)}}},
      {"hardsigmoid",
       {"the slope is 1/6 in float64; PyTorch's kernel multiplies by the float 1.0f / 6.0f",
        {grad(0, 2, 2.0 / 6), grad(0, 3, 1.0 / 6), grad(0, 4, 1.5 / 6), grad(0, 5, 2.0 / 6),
         grad(0, 6, 1.0 / 6)}}},
      {"kthvalue",
       {"among equal values the k-th is the k-th in index order (a stable sort); PyTorch's "
        "quickselect picks any",
        {output(1, 1, 3), output(1, 2, 1), grad(0, 4, 0), grad(0, 7, 1.5), grad(0, 8, 0),
         grad(0, 9, 2)}}},
      {"kthvalue0", {"as kthvalue", {output(1, 3, 1), grad(0, 3, 0), grad(0, 7, 1)}}},
      {"poisson_nll_loss_full",
       {"the target's gradient at target 0 is -input, the derivative of the documented loss; "
        "PyTorch's masked Stirling term gives 0 * log(0) = NaN",
        {grad(1, 0, 0)}}},
      {"smooth_l1_loss_beta0",
       {"beta = 0 is l1_loss, as documented, gradient 0 at a zero difference; PyTorch's "
        "smooth_l1 backward gives -1 there, to input and target alike",
        {grad(0, 0, 0), grad(1, 0, 0)}}},
      {"softshrink",
       {"NaN gives 0 with gradient 0; PyTorch's scalar loop passes the gradient (its vectorized "
        "loop does not), which no composite with the value 0 can",
        {grad(0, 7, 0)}}},
      {"softshrink_zero", {"as softshrink", {grad(0, 4, 0)}}},
      {"topk",
       {"among equal values the first in index order come first (a stable sort); PyTorch's "
        "partial sort picks any",
        {output(1, 4, 0), output(1, 5, 1), grad(0, 8, 1.5), grad(0, 9, 2), grad(0, 10, 0),
         grad(0, 11, 0)}}},
      {"topk_smallest",
       {"as topk",
        {output(1, 2, 0), output(1, 3, 3), output(1, 4, 0), output(1, 5, 1), grad(0, 4, 2),
         grad(0, 7, 1), grad(0, 8, 1.5), grad(0, 9, 2), grad(0, 10, 0), grad(0, 11, 0)}}},
  };
  return d;
}

// ---- the reference ----

struct Case {
  std::string name;
  Inputs inputs;
  std::vector<bool> differentiable;
  std::vector<ReferenceTensor> outputs;
  std::vector<std::vector<double>> grads; // per differentiable input
};

DType dtypeNamed(const std::string& name) {
  if (name == "float64") return kFloat64;
  if (name == "int64") return kInt64;
  if (name == "bool") return kBool;
  ADD_FAILURE() << "unknown dtype " << name;
  return kFloat64;
}

std::vector<Case> loadCases() {
  std::vector<Case> cases;
  for (const std::vector<std::string>& f : readReferenceLines(WEFT_KINK_CASES)) {
    Case c{f.at(0)};
    for (const std::string& in : splitOn(f.at(1), ';')) {
      std::vector<std::string> parts = splitOn(in, ':');
      ReferenceTensor r = parseReferenceTensor(in);
      c.inputs.push_back(from_vector(r.values, r.shape).to(dtypeNamed(r.dtype)));
      c.differentiable.push_back(parts.at(3) == "1");
    }
    for (const std::string& out : splitOn(f.at(2), ';'))
      c.outputs.push_back(parseReferenceTensor(out));
    for (const std::string& g : splitOn(f.at(3), ';'))
      c.grads.push_back(parseValues(g));
    cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = loadCases();
  return all;
}

/// The case's inputs as leaves, the differentiable ones requiring grad.
Inputs leaves(const Case& c) {
  Inputs in;
  for (size_t i = 0; i < c.inputs.size(); ++i)
    in.push_back(c.inputs[i].clone().requires_grad_(c.differentiable[i]));
  return in;
}

/// The gradients of sum(out0 * w) with respect to the differentiable inputs (0 where unused, and
/// all 0 where out0 is constant, as vector_norm's with ord 0).
Outputs gradients(const Tensor& out0, const Inputs& in, const Case& c) {
  Outputs wrt;
  for (size_t i = 0; i < in.size(); ++i)
    if (c.differentiable[i]) wrt.push_back(in[i]);
  Outputs g(wrt.size());
  if (out0.requires_grad() || autograd::tracing(out0))
    g = autograd::grad({(out0 * referenceWeights(out0)).sum()}, wrt, {}, std::nullopt, false, true);
  for (size_t i = 0; i < g.size(); ++i)
    if (!g[i].defined()) g[i] = zeros_like(wrt[i]);
  return g;
}

/// What weft must give: PyTorch's outputs and gradients, with weft's own values where it
/// deliberately differs.
Case expected(const Case& c) {
  Case e = c;
  auto d = differences().find(c.name);
  if (d == differences().end()) return e;
  for (const Override& o : d->second.values) {
    std::vector<double>& v = o.gradient ? e.grads.at(o.k) : e.outputs.at(o.k).values;
    v.at(o.element) = o.value;
  }
  return e;
}

::testing::AssertionResult sameGrads(const Outputs& got, const Case& c) {
  if (got.size() != c.grads.size())
    return ::testing::AssertionFailure() << got.size() << " gradients, expected " << c.grads.size();
  for (size_t k = 0; k < got.size(); ++k) {
    auto r = sameReferenceValues(got[k].to_vector<double>(), c.grads[k]);
    if (!r) return ::testing::AssertionFailure() << "gradient " << k << ": " << r.message();
  }
  return ::testing::AssertionSuccess();
}

/// Calls `fn` compiled on the case's inputs (1 to 4 tensors).
template <typename Fn> Outputs callCompiled(Fn fn, const Inputs& in) {
  auto apply = [&](auto... t) {
    return compile([&](decltype(t)... a) { return fn({a...}); })(t...);
  };
  switch (in.size()) {
  case 1:
    return apply(in[0]);
  case 2:
    return apply(in[0], in[1]);
  case 3:
    return apply(in[0], in[1], in[2]);
  case 4:
    return apply(in[0], in[1], in[2], in[3]);
  }
  ADD_FAILURE() << in.size() << " inputs";
  return {};
}

TEST(Kinks, TheTableAndTheReferenceListTheSameCases) {
  std::set<std::string> referenced;
  for (const Case& c : cases())
    referenced.insert(c.name);
  for (const auto& [name, fn] : kinkCases())
    EXPECT_TRUE(referenced.count(name)) << name << " has no reference results";
  for (const std::string& name : referenced)
    EXPECT_TRUE(kinkCases().count(name)) << name << " is not in the test's table";
  for (const auto& [name, d] : differences())
    EXPECT_TRUE(referenced.count(name)) << name << " differs from a case that does not exist";
  EXPECT_GE(cases().size(), 150u);
}

/// A deliberate difference is one: each value listed is not PyTorch's.
TEST(Kinks, EachListedDifferenceDiffersFromPyTorch) {
  for (const Case& c : cases()) {
    auto d = differences().find(c.name);
    if (d == differences().end()) continue;
    SCOPED_TRACE(c.name + ": " + d->second.reason);
    for (const Override& o : d->second.values) {
      double torch = (o.gradient ? c.grads.at(o.k) : c.outputs.at(o.k).values).at(o.element);
      EXPECT_FALSE(sameReferenceValues({o.value}, {torch}))
          << (o.gradient ? "gradient " : "output ") << o.k << " element " << o.element
          << " is PyTorch's: drop it from the listed difference";
    }
  }
}

/// The case's forward and gradients, eagerly.
TEST(Kinks, EagerGivesPyTorchsValuesAndGradients) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Case want = expected(c);
    Inputs in = leaves(c);
    Outputs out = kinkCases().at(c.name)(in);
    EXPECT_TRUE(sameAsReference(out, want.outputs));
    EXPECT_TRUE(sameGrads(gradients(out.at(0), in, c), want));
  }
}

/// Compiled twice: a function that returns the outputs and their gradients (autograd::grad inside:
/// graph autodiff), and one that returns the outputs, differentiated outside (the compiled
/// forward's backward). Generated kernels run the elementwise groups (the default).
TEST(Kinks, CompiledGivesPyTorchsValuesAndGradients) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Case want = expected(c);
    const CaseFn& fn = kinkCases().at(c.name);
    Inputs in = leaves(c);
    Outputs both = callCompiled(
        [&](const Inputs& a) {
          Outputs out = fn(a);
          Outputs g = gradients(out.at(0), a, c);
          out.insert(out.end(), g.begin(), g.end());
          return out;
        },
        in);
    auto split = both.begin() + static_cast<ptrdiff_t>(c.outputs.size());
    EXPECT_TRUE(sameAsReference(Outputs(both.begin(), split), want.outputs)) << "grad inside";
    EXPECT_TRUE(sameGrads(Outputs(split, both.end()), want)) << "grad inside";

    Inputs outside = leaves(c);
    Outputs out = callCompiled(fn, outside);
    EXPECT_TRUE(sameAsReference(out, want.outputs)) << "grad outside";
    EXPECT_TRUE(sameGrads(gradients(out.at(0), outside, c), want)) << "grad outside";
  }
}

/// The composites rewritten to take PyTorch's gradient at their kinks keep their first and second
/// derivatives everywhere else (central differences, TestUtil's gradcheck tolerances).
TEST(Kinks, AwayFromKinksGradientsAndSecondDerivativesAreRight) {
  Tensor x = from_vector(std::vector<double>{-2.5, -1.25, -0.5, 0.75, 1.5, 2.25}, {2, 3});
  Tensor p = from_vector(std::vector<double>{0.125, 0.25, 0.5, 0.625, 0.75, 0.875}, {2, 3});
  Tensor t = from_vector(std::vector<double>{0.0, 1.0, 0.5, 0.25, 1.0, 0.0}, {2, 3});
  Tensor pw = from_vector(std::vector<double>{2.0, 0.5, 1.0});
  std::map<std::string, std::pair<Fn, std::vector<Tensor>>> cases = {
      {"elu", {[](const Inputs& in) { return F::elu(in[0], 0.5); }, {x}}},
      {"celu", {[](const Inputs& in) { return F::celu(in[0], 2.0); }, {x}}},
      {"softplus", {[](const Inputs& in) { return F::softplus(in[0], 2.0, 4.0); }, {x}}},
      {"mish", {[](const Inputs& in) { return F::mish(in[0]); }, {x}}},
      {"hardtanh", {[](const Inputs& in) { return F::hardtanh(in[0], -2.0, 2.0); }, {x}}},
      {"hardswish", {[](const Inputs& in) { return F::hardswish(in[0] * 1.5); }, {x}}},
      {"hardsigmoid", {[](const Inputs& in) { return F::hardsigmoid(in[0]); }, {x}}},
      {"logsigmoid", {[](const Inputs& in) { return F::logsigmoid(in[0]); }, {x}}},
      {"bce", {[](const Inputs& in) { return F::binary_cross_entropy(in[0], in[1]); }, {p, t}}},
      {"bce_with_logits",
       {[&](const Inputs& in) {
          return F::binary_cross_entropy_with_logits(in[0], in[1],
                                                     nn::BCEWithLogitsLossOptions().pos_weight(pw));
        },
        {x, t}}},
      {"std", {[](const Inputs& in) { return in[0].std({1}); }, {x}}},
      {"norm_half", {[](const Inputs& in) { return in[0].norm(0.5, {1}); }, {x}}},
      {"vector_norm_neg1",
       {[](const Inputs& in) { return linalg_vector_norm(in[0], -1, {1}); }, {x}}},
      {"median", {[](const Inputs& in) { return in[0].median(); }, {x}}},
  };
  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(gradcheck(c.first, c.second));
    EXPECT_TRUE(gradgradcheck(c.first, c.second));
  }
}

} // namespace
} // namespace weft::test
