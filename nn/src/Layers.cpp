// The layers' construction (PyTorch's default initialisation), forward and printing.
#include "weft/nn/Layers.h"

#include "weft/nn/Activation.h"
#include "weft/nn/Init.h"

#include <algorithm>
#include <cmath>
#include <ostream>

namespace weft::nn {
namespace {

/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's bias init, and its weight init through
/// kaiming_uniform_(a = sqrt(5)).
void initLikePyTorch(Tensor& weight, Tensor& bias, int64_t fanIn) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = fanIn > 0 ? 1.0 / std::sqrt(static_cast<double>(fanIn)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

void checkPositive(int64_t v, const char* what, const char* layer) {
  WEFT_CHECK(v > 0, Value, "nn::", layer, ": ", what, " must be positive, got ", v);
}

} // namespace

// ---- linear ----

LinearImpl::LinearImpl(const LinearOptions& o) : options(o) {
  checkPositive(o.in_features(), "in_features", "Linear");
  checkPositive(o.out_features(), "out_features", "Linear");
  weight = register_parameter("weight", empty({o.out_features(), o.in_features()}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_features()}));
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  initLikePyTorch(weight, bias, options.in_features());
}

Tensor LinearImpl::forward(const Tensor& x) {
  return functional::linear(x, weight, bias);
}

void LinearImpl::pretty_print(std::ostream& os) const {
  os << "Linear(in_features=" << options.in_features()
     << ", out_features=" << options.out_features()
     << ", bias=" << (options.bias() ? "true" : "false") << ")";
}

BilinearImpl::BilinearImpl(const BilinearOptions& o) : options(o) {
  weight =
      register_parameter("weight", empty({o.out_features(), o.in1_features(), o.in2_features()}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_features()}));
  double bound = 1.0 / std::sqrt(static_cast<double>(o.in1_features()));
  init::uniform_(weight, -bound, bound);
  if (bias.defined()) init::uniform_(bias, -bound, bound);
}

Tensor BilinearImpl::forward(const Tensor& x1, const Tensor& x2) {
  return functional::bilinear(x1, x2, weight, bias);
}

void BilinearImpl::pretty_print(std::ostream& os) const {
  os << "Bilinear(in1_features=" << options.in1_features()
     << ", in2_features=" << options.in2_features() << ", out_features=" << options.out_features()
     << ")";
}

void FlattenImpl::pretty_print(std::ostream& os) const {
  os << "Flatten(start_dim=" << options.start_dim() << ", end_dim=" << options.end_dim() << ")";
}

// ---- convolution ----

ConvImpl::ConvImpl(const ConvOptions& o, int dims, bool transposed)
    : options(o), dims_(dims), transposed_(transposed) {
  const char* layer = transposed ? "ConvTranspose" : "Conv";
  checkPositive(o.in_channels(), "in_channels", layer);
  checkPositive(o.out_channels(), "out_channels", layer);
  checkPositive(o.groups(), "groups", layer);
  WEFT_CHECK(o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0, Value,
             "nn::", layer, ": in_channels (", o.in_channels(), ") and out_channels (",
             o.out_channels(), ") must be divisible by groups (", o.groups(), ")");
  ExpandingArray k = o.kernel_size();
  if (k.size() == 1) k.assign(static_cast<size_t>(dims), k[0]);
  WEFT_CHECK(k.size() == static_cast<size_t>(dims), Value, "nn::", layer,
             ": kernel_size must have 1 or ", dims, " values");
  options.kernel_size(k);
  Shape shape = transposed ? Shape{o.in_channels(), o.out_channels() / o.groups()}
                           : Shape{o.out_channels(), o.in_channels() / o.groups()};
  shape.insert(shape.end(), k.begin(), k.end());
  weight = register_parameter("weight", empty(shape));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}

void ConvImpl::reset_parameters() {
  initLikePyTorch(weight, bias, init::calculate_fan_in_and_fan_out(weight).first);
}

Tensor ConvImpl::forward(const Tensor& x) {
  const ConvOptions& o = options;
  if (transposed_)
    return conv_transpose2d(x, weight, bias, o.stride(), o.padding(), o.output_padding(),
                            o.groups(), o.dilation());
  if (dims_ == 1)
    return conv1d(x, weight, bias, o.stride()[0], o.padding()[0], o.dilation()[0], o.groups());
  return conv2d(x, weight, bias, o.stride(), o.padding(), o.dilation(), o.groups());
}

void ConvImpl::pretty_print(std::ostream& os) const {
  os << (transposed_ ? "ConvTranspose" : "Conv") << dims_ << "d(" << options.in_channels() << ", "
     << options.out_channels() << ", kernel_size=" << shapeString(options.kernel_size())
     << ", stride=" << shapeString(options.stride());
  if (options.padding() != ExpandingArray(0)) os << ", padding=" << shapeString(options.padding());
  if (options.groups() != 1) os << ", groups=" << options.groups();
  if (!options.bias()) os << ", bias=false";
  os << ")";
}

// ---- pooling ----

Tensor MaxPool2dImpl::forward(const Tensor& x) {
  return max_pool2d(x, options.kernel_size(), options.stride(), options.padding(),
                    options.dilation(), options.ceil_mode());
}

void MaxPool2dImpl::pretty_print(std::ostream& os) const {
  os << "MaxPool2d(kernel_size=" << shapeString(options.kernel_size()) << ", stride="
     << shapeString(options.stride().empty() ? options.kernel_size() : options.stride())
     << ", padding=" << shapeString(options.padding()) << ")";
}

Tensor AvgPool2dImpl::forward(const Tensor& x) {
  return avg_pool2d(x, options.kernel_size(), options.stride(), options.padding());
}

void AvgPool2dImpl::pretty_print(std::ostream& os) const {
  os << "AvgPool2d(kernel_size=" << shapeString(options.kernel_size()) << ", stride="
     << shapeString(options.stride().empty() ? options.kernel_size() : options.stride())
     << ", padding=" << shapeString(options.padding()) << ")";
}

// ---- normalization ----

BatchNormImpl::BatchNormImpl(const BatchNormOptions& o, std::vector<int64_t> ranks)
    : options(o), ranks_(std::move(ranks)) {
  checkPositive(o.num_features(), "num_features", "BatchNorm");
  int64_t c = o.num_features();
  if (o.affine()) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (o.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNormImpl::reset_parameters() {
  if (running_mean.defined()) {
    init::zeros_(running_mean);
    init::ones_(running_var);
    init::zeros_(num_batches_tracked);
  }
  if (weight.defined()) {
    init::ones_(weight);
    init::zeros_(bias);
  }
}

Tensor BatchNormImpl::forward(const Tensor& x) {
  WEFT_CHECK(x.defined() && std::find(ranks_.begin(), ranks_.end(), x.dim()) != ranks_.end(), Shape,
             "nn::", name(), ": expected a ", ranks_.size() == 1 ? "4-D" : "2-D or 3-D",
             " input, got ", x.defined() ? shapeString(x.sizes()) : "undefined");
  WEFT_CHECK(x.size(1) == options.num_features(), Shape, "nn::", name(), ": expected ",
             options.num_features(), " channels (dim 1), got input ", shapeString(x.sizes()));
  bool training = is_training();
  bool useBatchStats = training || !running_mean.defined();
  if (training && num_batches_tracked.defined()) {
    NoGradGuard guard;
    num_batches_tracked.add_(1);
  }
  return functional::batch_norm(x, running_mean, running_var, weight, bias, useBatchStats,
                                options.momentum(), options.eps());
}

void BatchNormImpl::pretty_print(std::ostream& os) const {
  os << name() << "(" << options.num_features() << ", eps=" << options.eps()
     << ", momentum=" << options.momentum() << ", affine=" << (options.affine() ? "true" : "false")
     << ", track_running_stats=" << (options.track_running_stats() ? "true" : "false") << ")";
}

PReLUImpl::PReLUImpl(const PReLUOptions& o) : options(o) {
  WEFT_CHECK(o.num_parameters() >= 1, Value, "PReLU: num_parameters must be at least 1, got ",
             o.num_parameters());
  weight = register_parameter("weight", full({o.num_parameters()}, o.init()));
}

LayerNormImpl::LayerNormImpl(const LayerNormOptions& o) : options(o) {
  if (o.elementwise_affine()) {
    weight = register_parameter("weight", ones(o.normalized_shape()));
    bias = register_parameter("bias", zeros(o.normalized_shape()));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return functional::layer_norm(x, options.normalized_shape(), weight, bias, options.eps());
}

void LayerNormImpl::pretty_print(std::ostream& os) const {
  os << "LayerNorm(" << shapeString(options.normalized_shape()) << ", eps=" << options.eps()
     << ", elementwise_affine=" << (options.elementwise_affine() ? "true" : "false") << ")";
}

GroupNormImpl::GroupNormImpl(const GroupNormOptions& o) : options(o) {
  WEFT_CHECK(o.num_groups() > 0 && o.num_channels() % o.num_groups() == 0, Value,
             "nn::GroupNorm: num_channels (", o.num_channels(),
             ") must be divisible by num_groups (", o.num_groups(), ")");
  if (o.affine()) {
    weight = register_parameter("weight", ones({o.num_channels()}));
    bias = register_parameter("bias", zeros({o.num_channels()}));
  }
}

Tensor GroupNormImpl::forward(const Tensor& x) {
  return functional::group_norm(x, options.num_groups(), weight, bias, options.eps());
}

RMSNormImpl::RMSNormImpl(const RMSNormOptions& o) : options(o) {
  if (o.elementwise_affine()) weight = register_parameter("weight", ones(o.normalized_shape()));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  return functional::rms_norm(x, options.normalized_shape(), weight, options.eps());
}

// ---- embedding and dropout ----

EmbeddingImpl::EmbeddingImpl(const EmbeddingOptions& o) : options(o) {
  checkPositive(o.num_embeddings(), "num_embeddings", "Embedding");
  checkPositive(o.embedding_dim(), "embedding_dim", "Embedding");
  weight = register_parameter("weight", empty({o.num_embeddings(), o.embedding_dim()}));
  init::normal_(weight);
  if (auto pad = o.padding_idx()) {
    int64_t n = o.num_embeddings();
    WEFT_CHECK(*pad >= -n && *pad < n, Index, "nn::Embedding: padding_idx ", *pad,
               " must be within num_embeddings (", n, ")");
    NoGradGuard guard;
    weight.select(0, *pad < 0 ? *pad + n : *pad).zero_();
  }
}

Tensor EmbeddingImpl::forward(const Tensor& indices) {
  return functional::embedding(indices, weight, options.padding_idx());
}

void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(num_embeddings=" << options.num_embeddings()
     << ", embedding_dim=" << options.embedding_dim() << ")";
}

detail::DropoutNd::DropoutNd(const char* name, const DropoutOptions& o) : Module(name), options(o) {
  WEFT_CHECK(o.p() >= 0 && o.p() <= 1, Value, "nn::", name,
             ": dropout probability has to be between 0 and 1, but got ", o.p());
}

void detail::DropoutNd::pretty_print(std::ostream& os) const {
  os << name() << "(p=" << options.p() << ", inplace=" << (options.inplace() ? "true" : "false")
     << ")";
}

Tensor DropoutImpl::forward(const Tensor& x) {
  return functional::dropout(x, options.p(), is_training(), options.inplace());
}

Tensor Dropout2dImpl::forward(const Tensor& x) {
  return functional::dropout2d(x, options.p(), is_training(), options.inplace());
}

Tensor Dropout3dImpl::forward(const Tensor& x) {
  return functional::dropout3d(x, options.p(), is_training(), options.inplace());
}

Tensor AlphaDropoutImpl::forward(const Tensor& x) {
  return functional::alpha_dropout(x, options.p(), is_training(), options.inplace());
}

Tensor FeatureAlphaDropoutImpl::forward(const Tensor& x) {
  return functional::feature_alpha_dropout(x, options.p(), is_training(), options.inplace());
}

GELUImpl::GELUImpl(const GELUOptions& o) : options(o) {
  WEFT_CHECK(o.approximate() == "none" || o.approximate() == "tanh", Value,
             "nn::GELU: approximate must be 'none' or 'tanh', got '", o.approximate(), "'");
}

} // namespace weft::nn
