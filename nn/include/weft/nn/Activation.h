// Activation modules, and the two-input CosineSimilarity and PairwiseDistance: each forwards to
// its nn::functional form.
#pragma once

#include "weft/nn/Functional.h"
#include "weft/nn/Module.h"

#include <ostream>
#include <string>

namespace weft::nn {

/// Declares a parameterless activation module `Name` computing `expr` of `x`.
#define WEFT_ACTIVATION(Name, expr)                                                                \
  class Name##Impl : public Module {                                                               \
  public:                                                                                          \
    Tensor forward(const Tensor& x) { return expr; }                                               \
  };                                                                                               \
  WEFT_MODULE(Name)

WEFT_ACTIVATION(ReLU, relu(x));
WEFT_ACTIVATION(SiLU, functional::silu(x));
WEFT_ACTIVATION(Mish, functional::mish(x));
WEFT_ACTIVATION(Sigmoid, sigmoid(x));
WEFT_ACTIVATION(Tanh, tanh(x));
WEFT_ACTIVATION(ReLU6, functional::relu6(x));
WEFT_ACTIVATION(Hardswish, functional::hardswish(x));
WEFT_ACTIVATION(Hardsigmoid, functional::hardsigmoid(x));
WEFT_ACTIVATION(SELU, functional::selu(x));
WEFT_ACTIVATION(Softsign, functional::softsign(x));
WEFT_ACTIVATION(LogSigmoid, functional::logsigmoid(x));
WEFT_ACTIVATION(Tanhshrink, functional::tanhshrink(x));
#undef WEFT_ACTIVATION

/// Declares activation module `Name` with one double option `opt` (default `def`) computing
/// functional::`fn`(x, opt).
#define WEFT_ACTIVATION_1(Name, opt, def, fn)                                                      \
  struct Name##Options {                                                                           \
    Name##Options(double v = def) : opt##_(v) {} /* NOLINT: implicit, Name(0.5) */                 \
    WEFT_ARG(double, opt);                                                                         \
  };                                                                                               \
  class Name##Impl : public Module {                                                               \
  public:                                                                                          \
    explicit Name##Impl(const Name##Options& options = {}) : options(options) {}                   \
    Tensor forward(const Tensor& x) { return functional::fn(x, options.opt()); }                   \
    Name##Options options;                                                                         \
  };                                                                                               \
  WEFT_MODULE(Name)

WEFT_ACTIVATION_1(CELU, alpha, 1.0, celu);
WEFT_ACTIVATION_1(Softshrink, lambda, 0.5, softshrink);
WEFT_ACTIVATION_1(Hardshrink, lambda, 0.5, hardshrink);
#undef WEFT_ACTIVATION_1

struct ThresholdOptions {
  ThresholdOptions(double threshold, double value) : threshold_(threshold), value_(value) {}
  WEFT_ARG(double, threshold);
  WEFT_ARG(double, value);
};
class ThresholdImpl : public Module {
public:
  explicit ThresholdImpl(const ThresholdOptions& options) : options(options) {}
  Tensor forward(const Tensor& x) {
    return functional::threshold(x, options.threshold(), options.value());
  }
  ThresholdOptions options;
};
WEFT_MODULE(Threshold);

struct GLUOptions {
  GLUOptions(int64_t dim = -1) : dim_(dim) {} // NOLINT: GLU(1)
  WEFT_ARG(int64_t, dim);
};
class GLUImpl : public Module {
public:
  explicit GLUImpl(const GLUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) { return functional::glu(x, options.dim()); }
  GLUOptions options;
};
WEFT_MODULE(GLU);

/// Parametric ReLU: x where x > 0, weight * x elsewhere, with one learned weight or one per
/// channel (dim 1), starting at `init` (torch.nn.PReLU).
struct PReLUOptions {
  WEFT_ARG(int64_t, num_parameters) = 1;
  WEFT_ARG(double, init) = 0.25;
};
class PReLUImpl : public Module {
public:
  explicit PReLUImpl(const PReLUOptions& options = {});
  Tensor forward(const Tensor& x) { return x.prelu(weight); }
  PReLUOptions options;
  Tensor weight;
};
WEFT_MODULE(PReLU);

/// Cosine similarity and pairwise distance between two inputs, as modules.
struct CosineSimilarityOptions {
  WEFT_ARG(int64_t, dim) = 1;
  WEFT_ARG(double, eps) = 1e-8;
};
class CosineSimilarityImpl : public Module {
public:
  explicit CosineSimilarityImpl(const CosineSimilarityOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2) {
    return functional::cosine_similarity(x1, x2, options.dim(), options.eps());
  }
  CosineSimilarityOptions options;
};
WEFT_MODULE(CosineSimilarity);
struct PairwiseDistanceOptions {
  WEFT_ARG(double, p) = 2.0;
  WEFT_ARG(double, eps) = 1e-6;
  WEFT_ARG(bool, keepdim) = false;
};
class PairwiseDistanceImpl : public Module {
public:
  explicit PairwiseDistanceImpl(const PairwiseDistanceOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x1, const Tensor& x2) {
    return functional::pairwise_distance(x1, x2, options.p(), options.eps(), options.keepdim());
  }
  PairwiseDistanceOptions options;
};
WEFT_MODULE(PairwiseDistance);

struct LeakyReLUOptions {
  WEFT_ARG(double, negative_slope) = 0.01;
};
class LeakyReLUImpl : public Module {
public:
  explicit LeakyReLUImpl(const LeakyReLUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) { return functional::leaky_relu(x, options.negative_slope()); }
  void pretty_print(std::ostream& os) const override {
    os << "LeakyReLU(negative_slope=" << options.negative_slope() << ")";
  }
  LeakyReLUOptions options;
};
WEFT_MODULE(LeakyReLU);

struct ELUOptions {
  WEFT_ARG(double, alpha) = 1.0;
};
class ELUImpl : public Module {
public:
  explicit ELUImpl(const ELUOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) { return functional::elu(x, options.alpha()); }
  ELUOptions options;
};
WEFT_MODULE(ELU);

struct GELUOptions {
  /// "none" (exact, with erf) or "tanh".
  WEFT_ARG(std::string, approximate) = "none";
};
class GELUImpl : public Module {
public:
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& x) { return gelu(x, options.approximate() == "tanh"); }
  void pretty_print(std::ostream& os) const override {
    os << "GELU(approximate='" << options.approximate() << "')";
  }
  GELUOptions options;
};
WEFT_MODULE(GELU);

struct SoftplusOptions {
  WEFT_ARG(double, beta) = 1.0;
  WEFT_ARG(double, threshold) = 20.0;
};
class SoftplusImpl : public Module {
public:
  explicit SoftplusImpl(const SoftplusOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) {
    return functional::softplus(x, options.beta(), options.threshold());
  }
  SoftplusOptions options;
};
WEFT_MODULE(Softplus);

struct HardtanhOptions {
  WEFT_ARG(double, min_val) = -1.0;
  WEFT_ARG(double, max_val) = 1.0;
};
class HardtanhImpl : public Module {
public:
  explicit HardtanhImpl(const HardtanhOptions& options = {}) : options(options) {}
  Tensor forward(const Tensor& x) {
    return functional::hardtanh(x, options.min_val(), options.max_val());
  }
  HardtanhOptions options;
};
WEFT_MODULE(Hardtanh);

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {} // NOLINT: Softmax(1)
  WEFT_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;
class SoftmaxImpl : public Module {
public:
  explicit SoftmaxImpl(const SoftmaxOptions& options) : options(options) {}
  Tensor forward(const Tensor& x) { return softmax(x, options.dim()); }
  void pretty_print(std::ostream& os) const override {
    os << "Softmax(dim=" << options.dim() << ")";
  }
  SoftmaxOptions options;
};
WEFT_MODULE(Softmax);
class LogSoftmaxImpl : public Module {
public:
  explicit LogSoftmaxImpl(const SoftmaxOptions& options) : options(options) {}
  Tensor forward(const Tensor& x) { return log_softmax(x, options.dim()); }
  void pretty_print(std::ostream& os) const override {
    os << "LogSoftmax(dim=" << options.dim() << ")";
  }
  SoftmaxOptions options;
};
WEFT_MODULE(LogSoftmax);

} // namespace weft::nn
