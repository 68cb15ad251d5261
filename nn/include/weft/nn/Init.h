// nn::init: in-place initializers with PyTorch's formulas (fans, gains, bounds).
#pragma once

#include "weft/Functions.h"

#include <optional>
#include <string>
#include <utility>

namespace weft::nn::init {

/// The nonlinearity a gain is for (PyTorch's calculate_gain names).
enum class Nonlinearity { Linear, Conv, Sigmoid, Tanh, ReLU, LeakyReLU, SELU };
/// Whether kaiming init preserves the variance of the forward pass or of the backward pass.
enum class FanMode { FanIn, FanOut };

/// The recommended gain for `nonlinearity` (`param`: LeakyReLU's negative slope, default 0.01).
double calculate_gain(Nonlinearity nonlinearity, std::optional<double> param = std::nullopt);
/// (fan_in, fan_out) of a weight of 2 or more dims: (size(1), size(0)) times the receptive field.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& t, WEFT_LOC);

/// Each initializer writes `t` in place without recording autograd, and returns it.
Tensor uniform_(Tensor t, double a = 0.0, double b = 1.0, std::optional<Generator> g = {},
                WEFT_LOC);
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0, std::optional<Generator> g = {},
               WEFT_LOC);
Tensor constant_(Tensor t, Scalar value, WEFT_LOC);
Tensor zeros_(Tensor t, WEFT_LOC);
Tensor ones_(Tensor t, WEFT_LOC);
Tensor xavier_uniform_(Tensor t, double gain = 1.0, std::optional<Generator> g = {}, WEFT_LOC);
Tensor xavier_normal_(Tensor t, double gain = 1.0, std::optional<Generator> g = {}, WEFT_LOC);
/// He init; `a` is the negative slope of the rectifier after this layer (LeakyReLU).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                        std::optional<Generator> g = {}, WEFT_LOC);
Tensor kaiming_normal_(Tensor t, double a = 0.0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU,
                       std::optional<Generator> g = {}, WEFT_LOC);
/// A (semi-)orthogonal matrix (rows flattened past dim 0) scaled by `gain`.
Tensor orthogonal_(Tensor t, double gain = 1.0, std::optional<Generator> g = {}, WEFT_LOC);

} // namespace weft::nn::init
