// The layers: linear, convolution, pooling, normalization, embedding, dropout and shape modules,
// each an Options struct, an Impl module and its holder, with PyTorch's default initialisation.
#pragma once

#include "weft/nn/Functional.h"
#include "weft/nn/Module.h"

namespace weft::nn {

// ---- linear ----
struct LinearOptions {
  LinearOptions(int64_t in, int64_t out) : in_features_(in), out_features_(out) {}
  WEFT_ARG(int64_t, in_features);
  WEFT_ARG(int64_t, out_features);
  WEFT_ARG(bool, bias) = true;
};
/// y = x W^T + b; W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class LinearImpl : public Module {
public:
  explicit LinearImpl(const LinearOptions& options);
  LinearImpl(int64_t in, int64_t out) : LinearImpl(LinearOptions(in, out)) {}
  Tensor forward(const Tensor& x);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  LinearOptions options;
  Tensor weight, bias;
};
WEFT_MODULE(Linear);

struct BilinearOptions {
  BilinearOptions(int64_t in1, int64_t in2, int64_t out)
      : in1_features_(in1), in2_features_(in2), out_features_(out) {}
  WEFT_ARG(int64_t, in1_features);
  WEFT_ARG(int64_t, in2_features);
  WEFT_ARG(int64_t, out_features);
  WEFT_ARG(bool, bias) = true;
};
/// y_k = x1^T W_k x2 + b_k.
class BilinearImpl : public Module {
public:
  explicit BilinearImpl(const BilinearOptions& options);
  Tensor forward(const Tensor& x1, const Tensor& x2);
  void pretty_print(std::ostream& os) const override;
  BilinearOptions options;
  Tensor weight, bias;
};
WEFT_MODULE(Bilinear);

/// Returns its input.
class IdentityImpl : public Module {
public:
  Tensor forward(const Tensor& x) { return x; }
};
WEFT_MODULE(Identity);

struct FlattenOptions {
  WEFT_ARG(int64_t, start_dim) = 1;
  WEFT_ARG(int64_t, end_dim) = -1;
};
class FlattenImpl : public Module {
public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) { return x.flatten(options.start_dim(), options.end_dim()); }
  void pretty_print(std::ostream& os) const override;
  FlattenOptions options;
};
WEFT_MODULE(Flatten);

struct UnflattenOptions {
  UnflattenOptions(int64_t dim, IntArrayRef sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  WEFT_ARG(int64_t, dim);
  WEFT_ARG(Shape, sizes);
};
class UnflattenImpl : public Module {
public:
  explicit UnflattenImpl(const UnflattenOptions& options) : options(options) {}
  UnflattenImpl(int64_t dim, IntArrayRef sizes) : options(dim, std::move(sizes)) {}
  Tensor forward(const Tensor& x) { return x.unflatten(options.dim(), options.sizes()); }
  UnflattenOptions options;
};
WEFT_MODULE(Unflatten);

// ---- convolution ----
/// Options of Conv1d/Conv2d/ConvTranspose2d (sizes given once apply to every dimension).
struct ConvOptions {
  ConvOptions(int64_t in, int64_t out, ExpandingArray kernel)
      : in_channels_(in), out_channels_(out), kernel_size_(std::move(kernel)) {}
  WEFT_ARG(int64_t, in_channels);
  WEFT_ARG(int64_t, out_channels);
  WEFT_ARG(ExpandingArray, kernel_size);
  WEFT_ARG(ExpandingArray, stride) = 1;
  WEFT_ARG(ExpandingArray, padding) = 0;
  WEFT_ARG(ExpandingArray, dilation) = 1;
  WEFT_ARG(ExpandingArray, output_padding) = 0; ///< transposed convolutions only
  WEFT_ARG(int64_t, groups) = 1;
  WEFT_ARG(bool, bias) = true;
};
using Conv1dOptions = ConvOptions;
using Conv2dOptions = ConvOptions;
using ConvTranspose2dOptions = ConvOptions;

/// Convolution over `dims` spatial dimensions, plain or transposed (Conv1d, Conv2d,
/// ConvTranspose2d).
class ConvImpl : public Module {
public:
  ConvImpl(const ConvOptions& options, int dims, bool transposed);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  ConvOptions options;
  Tensor weight, bias;

private:
  int dims_;
  bool transposed_;
};
class Conv1dImpl : public ConvImpl {
public:
  explicit Conv1dImpl(const ConvOptions& o) : ConvImpl(o, 1, false) {}
  Conv1dImpl(int64_t in, int64_t out, int64_t k) : Conv1dImpl(ConvOptions(in, out, k)) {}
};
WEFT_MODULE(Conv1d);
class Conv2dImpl : public ConvImpl {
public:
  explicit Conv2dImpl(const ConvOptions& o) : ConvImpl(o, 2, false) {}
  Conv2dImpl(int64_t in, int64_t out, ExpandingArray k) : Conv2dImpl(ConvOptions(in, out, k)) {}
};
WEFT_MODULE(Conv2d);
class ConvTranspose2dImpl : public ConvImpl {
public:
  explicit ConvTranspose2dImpl(const ConvOptions& o) : ConvImpl(o, 2, true) {}
  ConvTranspose2dImpl(int64_t in, int64_t out, ExpandingArray k)
      : ConvTranspose2dImpl(ConvOptions(in, out, k)) {}
};
WEFT_MODULE(ConvTranspose2d);

// ---- pooling and resampling ----
struct PoolOptions {
  PoolOptions(ExpandingArray kernel) : kernel_size_(std::move(kernel)) {} // NOLINT: as LibTorch
  WEFT_ARG(ExpandingArray, kernel_size);
  /// Empty: the kernel size.
  WEFT_ARG(ExpandingArray, stride);
  WEFT_ARG(ExpandingArray, padding) = 0;
  WEFT_ARG(ExpandingArray, dilation) = 1; ///< max pooling only
  WEFT_ARG(bool, ceil_mode) = false;      ///< max pooling only
};
using MaxPool2dOptions = PoolOptions;
using AvgPool2dOptions = PoolOptions;
class MaxPool2dImpl : public Module {
public:
  explicit MaxPool2dImpl(const PoolOptions& options) : options(options) {}
  explicit MaxPool2dImpl(ExpandingArray kernel) : options(std::move(kernel)) {}
  Tensor forward(const Tensor& x);
  void pretty_print(std::ostream& os) const override;
  PoolOptions options;
};
WEFT_MODULE(MaxPool2d);
class AvgPool2dImpl : public Module {
public:
  explicit AvgPool2dImpl(const PoolOptions& options) : options(options) {}
  explicit AvgPool2dImpl(ExpandingArray kernel) : options(std::move(kernel)) {}
  Tensor forward(const Tensor& x);
  void pretty_print(std::ostream& os) const override;
  PoolOptions options;
};
WEFT_MODULE(AvgPool2d);
class AdaptiveAvgPool2dImpl : public Module {
public:
  explicit AdaptiveAvgPool2dImpl(ExpandingArray output_size)
      : output_size(std::move(output_size)) {}
  Tensor forward(const Tensor& x) { return functional::adaptive_avg_pool2d(x, output_size); }
  ExpandingArray output_size;
};
WEFT_MODULE(AdaptiveAvgPool2d);
class PixelShuffleImpl : public Module {
public:
  explicit PixelShuffleImpl(int64_t upscale_factor) : upscale_factor(upscale_factor) {}
  Tensor forward(const Tensor& x) { return functional::pixel_shuffle(x, upscale_factor); }
  int64_t upscale_factor;
};
WEFT_MODULE(PixelShuffle);
/// functional::interpolate as a module: nearest by default.
class UpsampleImpl : public Module {
public:
  explicit UpsampleImpl(const UpsampleOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) { return functional::interpolate(x, options); }
  UpsampleOptions options;
};
WEFT_MODULE(Upsample);

// ---- normalization ----
struct BatchNormOptions {
  BatchNormOptions(int64_t features) : num_features_(features) {} // NOLINT: as LibTorch
  WEFT_ARG(int64_t, num_features);
  WEFT_ARG(double, eps) = 1e-5;
  WEFT_ARG(double, momentum) = 0.1;
  WEFT_ARG(bool, affine) = true;
  WEFT_ARG(bool, track_running_stats) = true;
};
using BatchNorm1dOptions = BatchNormOptions;
using BatchNorm2dOptions = BatchNormOptions;
/// Batch normalization with running statistics (buffers running_mean, running_var,
/// num_batches_tracked); `dims`: the input ranks it accepts (1d: 2 or 3, 2d: 4).
class BatchNormImpl : public Module {
public:
  BatchNormImpl(const BatchNormOptions& options, std::vector<int64_t> ranks);
  Tensor forward(const Tensor& x);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  BatchNormOptions options;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

private:
  std::vector<int64_t> ranks_;
};
class BatchNorm1dImpl : public BatchNormImpl {
public:
  explicit BatchNorm1dImpl(const BatchNormOptions& o) : BatchNormImpl(o, {2, 3}) {}
};
WEFT_MODULE(BatchNorm1d);
class BatchNorm2dImpl : public BatchNormImpl {
public:
  explicit BatchNorm2dImpl(const BatchNormOptions& o) : BatchNormImpl(o, {4}) {}
};
WEFT_MODULE(BatchNorm2d);

struct LayerNormOptions {
  LayerNormOptions(Shape shape) : normalized_shape_(std::move(shape)) {} // NOLINT
  WEFT_ARG(Shape, normalized_shape);
  WEFT_ARG(double, eps) = 1e-5;
  WEFT_ARG(bool, elementwise_affine) = true;
};
class LayerNormImpl : public Module {
public:
  explicit LayerNormImpl(const LayerNormOptions& options);
  Tensor forward(const Tensor& x);
  void pretty_print(std::ostream& os) const override;
  LayerNormOptions options;
  Tensor weight, bias;
};
WEFT_MODULE(LayerNorm);

struct GroupNormOptions {
  GroupNormOptions(int64_t groups, int64_t channels)
      : num_groups_(groups), num_channels_(channels) {}
  WEFT_ARG(int64_t, num_groups);
  WEFT_ARG(int64_t, num_channels);
  WEFT_ARG(double, eps) = 1e-5;
  WEFT_ARG(bool, affine) = true;
};
class GroupNormImpl : public Module {
public:
  explicit GroupNormImpl(const GroupNormOptions& options);
  Tensor forward(const Tensor& x);
  GroupNormOptions options;
  Tensor weight, bias;
};
WEFT_MODULE(GroupNorm);

struct RMSNormOptions {
  RMSNormOptions(Shape shape) : normalized_shape_(std::move(shape)) {} // NOLINT
  WEFT_ARG(Shape, normalized_shape);
  WEFT_ARG(std::optional<double>, eps);
  WEFT_ARG(bool, elementwise_affine) = true;
};
class RMSNormImpl : public Module {
public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  Tensor forward(const Tensor& x);
  RMSNormOptions options;
  Tensor weight;
};
WEFT_MODULE(RMSNorm);

// ---- embedding and dropout ----
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num, int64_t dim) : num_embeddings_(num), embedding_dim_(dim) {}
  WEFT_ARG(int64_t, num_embeddings);
  WEFT_ARG(int64_t, embedding_dim);
  WEFT_ARG(std::optional<int64_t>, padding_idx);
};
/// A lookup table, weight ~ N(0, 1) with the padding row zeroed.
class EmbeddingImpl : public Module {
public:
  explicit EmbeddingImpl(const EmbeddingOptions& options);
  EmbeddingImpl(int64_t num, int64_t dim) : EmbeddingImpl(EmbeddingOptions(num, dim)) {}
  Tensor forward(const Tensor& indices);
  void pretty_print(std::ostream& os) const override;
  EmbeddingOptions options;
  Tensor weight;
};
WEFT_MODULE(Embedding);

/// The options of every dropout module: the probability of dropping, and whether to write the
/// result into the input.
struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {} // NOLINT: Dropout(0.2)
  WEFT_ARG(double, p);
  WEFT_ARG(bool, inplace) = false;
};
using Dropout2dOptions = DropoutOptions;
using Dropout3dOptions = DropoutOptions;
using AlphaDropoutOptions = DropoutOptions;
using FeatureAlphaDropoutOptions = DropoutOptions;

namespace detail {
/// What the dropout modules share (LibTorch's _DropoutNd): options checked at construction, and
/// printing as "Dropout2d(p=0.5, inplace=false)".
class DropoutNd : public Module {
public:
  void pretty_print(std::ostream& os) const override;
  DropoutOptions options;

protected:
  DropoutNd(const char* name, const DropoutOptions& options);
};
} // namespace detail

/// Drops elements with probability p in training mode; the identity in eval mode.
class DropoutImpl : public detail::DropoutNd {
public:
  explicit DropoutImpl(const DropoutOptions& options = {}) : DropoutNd("Dropout", options) {}
  Tensor forward(const Tensor& x);
};
WEFT_MODULE(Dropout);

/// Drops whole channels of (N, C, H, W) or (C, H, W) inputs in training mode
/// (functional::dropout2d).
class Dropout2dImpl : public detail::DropoutNd {
public:
  explicit Dropout2dImpl(const Dropout2dOptions& options = {}) : DropoutNd("Dropout2d", options) {}
  Tensor forward(const Tensor& x);
};
WEFT_MODULE(Dropout2d);

/// Drops whole channels of (N, C, D, H, W) or (C, D, H, W) inputs in training mode
/// (functional::dropout3d).
class Dropout3dImpl : public detail::DropoutNd {
public:
  explicit Dropout3dImpl(const Dropout3dOptions& options = {}) : DropoutNd("Dropout3d", options) {}
  Tensor forward(const Tensor& x);
};
WEFT_MODULE(Dropout3d);

/// Alpha dropout for SELU networks in training mode (functional::alpha_dropout): keeps an
/// input's mean 0 and variance 1.
class AlphaDropoutImpl : public detail::DropoutNd {
public:
  explicit AlphaDropoutImpl(const AlphaDropoutOptions& options = {})
      : DropoutNd("AlphaDropout", options) {}
  Tensor forward(const Tensor& x);
};
WEFT_MODULE(AlphaDropout);

/// Alpha dropout of whole channels of (N, C, *) inputs in training mode
/// (functional::feature_alpha_dropout).
class FeatureAlphaDropoutImpl : public detail::DropoutNd {
public:
  explicit FeatureAlphaDropoutImpl(const FeatureAlphaDropoutOptions& options = {})
      : DropoutNd("FeatureAlphaDropout", options) {}
  Tensor forward(const Tensor& x);
};
WEFT_MODULE(FeatureAlphaDropout);

} // namespace weft::nn
