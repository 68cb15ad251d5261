// nn::init: initializers as PyTorch defines them, drawing from weft's Philox generators.
#include "weft/nn/Init.h"

#include "weft/Autograd.h"

#include <cmath>

namespace weft::nn::init {
namespace {

/// Writes `value` into `t` without autograd.
Tensor assign(Tensor& t, const Tensor& value) {
  NoGradGuard guard;
  t.copy_(value);
  return t;
}

void checkDefined(const Tensor& t, const char* op) {
  WEFT_CHECK(t.defined(), Value, "nn::init::", op, ": undefined tensor");
  WEFT_CHECK(t.is_floating_point(), DType, "nn::init::", op, ": expected a floating tensor, got ",
             dtypeName(t.dtype()));
}

int64_t fanFor(const Tensor& t, FanMode mode) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return mode == FanMode::FanIn ? in : out;
}

} // namespace

double calculate_gain(Nonlinearity n, std::optional<double> param) {
  switch (n) {
  case Nonlinearity::Linear:
  case Nonlinearity::Conv:
  case Nonlinearity::Sigmoid:
    return 1.0;
  case Nonlinearity::Tanh:
    return 5.0 / 3.0;
  case Nonlinearity::ReLU:
    return std::sqrt(2.0);
  case Nonlinearity::LeakyReLU: {
    double slope = param.value_or(0.01);
    return std::sqrt(2.0 / (1 + slope * slope));
  }
  case Nonlinearity::SELU:
    return 3.0 / 4.0;
  }
  return 1.0;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t,
                                                         std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(t.defined() && t.dim() >= 2, Value,
             "nn::init: fan in and fan out need a tensor of at least 2 dimensions");
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d)
    receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor uniform_(Tensor t, double a, double b, std::optional<Generator> g,
                std::source_location loc) {
  CallSite cs(loc);
  checkDefined(t, "uniform_");
  return assign(t, rand(t.sizes(), TensorOptions().dtype(t.dtype()), g) * (b - a) + a);
}

Tensor normal_(Tensor t, double mean, double std, std::optional<Generator> g,
               std::source_location loc) {
  CallSite cs(loc);
  checkDefined(t, "normal_");
  return assign(t, randn(t.sizes(), TensorOptions().dtype(t.dtype()), g) * std + mean);
}

Tensor constant_(Tensor t, Scalar value, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(t.defined(), Value, "nn::init::constant_: undefined tensor");
  NoGradGuard guard;
  t.fill_(value);
  return t;
}

Tensor zeros_(Tensor t, std::source_location loc) {
  return constant_(std::move(t), 0, loc);
}

Tensor ones_(Tensor t, std::source_location loc) {
  return constant_(std::move(t), 1, loc);
}

Tensor xavier_uniform_(Tensor t, double gain, std::optional<Generator> g,
                       std::source_location loc) {
  CallSite cs(loc);
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  double bound = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(std::move(t), -bound, bound, g);
}

Tensor xavier_normal_(Tensor t, double gain, std::optional<Generator> g, std::source_location loc) {
  CallSite cs(loc);
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(std::move(t), 0.0, gain * std::sqrt(2.0 / static_cast<double>(in + out)), g);
}

Tensor kaiming_uniform_(Tensor t, double a, FanMode mode, Nonlinearity n,
                        std::optional<Generator> g, std::source_location loc) {
  CallSite cs(loc);
  double std = calculate_gain(n, a) / std::sqrt(static_cast<double>(fanFor(t, mode)));
  double bound = std::sqrt(3.0) * std;
  return uniform_(std::move(t), -bound, bound, g);
}

Tensor kaiming_normal_(Tensor t, double a, FanMode mode, Nonlinearity n, std::optional<Generator> g,
                       std::source_location loc) {
  CallSite cs(loc);
  double std = calculate_gain(n, a) / std::sqrt(static_cast<double>(fanFor(t, mode)));
  return normal_(std::move(t), 0.0, std, g);
}

Tensor orthogonal_(Tensor t, double gain, std::optional<Generator> g, std::source_location loc) {
  CallSite cs(loc);
  checkDefined(t, "orthogonal_");
  WEFT_CHECK(t.dim() >= 2, Value, "nn::init::orthogonal_: only tensors with 2 or more dimensions");
  int64_t rows = t.size(0), cols = t.numel() / std::max<int64_t>(rows, 1);
  bool wide = rows < cols;
  int64_t n = wide ? cols : rows, k = wide ? rows : cols;
  // Modified Gram-Schmidt on k columns of a Gaussian n x k matrix, in double.
  Tensor a = randn({n, k}, kFloat64, g);
  std::vector<double> m = a.to_vector<double>();
  auto at = [&](int64_t i, int64_t j) -> double& { return m[static_cast<size_t>(i * k + j)]; };
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t p = 0; p < j; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < n; ++i)
        dot += at(i, p) * at(i, j);
      for (int64_t i = 0; i < n; ++i)
        at(i, j) -= dot * at(i, p);
    }
    double norm = 0;
    for (int64_t i = 0; i < n; ++i)
      norm += at(i, j) * at(i, j);
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < n; ++i)
      at(i, j) /= norm;
  }
  Tensor q = from_vector(m, {n, k});
  if (wide) q = q.t();
  return assign(t, (q * gain).reshape(t.sizes()).to(t.dtype()));
}

} // namespace weft::nn::init
