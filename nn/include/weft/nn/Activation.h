// Activation modules: each forwards to its nn::functional form.
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
#undef WEFT_ACTIVATION

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
