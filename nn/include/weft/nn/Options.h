// The options-builder field macro (LibTorch's TORCH_ARG) and the loss reduction modes.
#pragma once

/// Declares option `name` of type `T` with a chainable setter and a getter; a default value may
/// follow the macro (`WEFT_ARG(double, eps) = 1e-5;`).
#define WEFT_ARG(T, name)                                                                          \
public:                                                                                            \
  auto& name(const T& new_##name) {                                                                \
    this->name##_ = new_##name;                                                                    \
    return *this;                                                                                  \
  }                                                                                                \
  const T& name() const noexcept {                                                                 \
    return this->name##_;                                                                          \
  }                                                                                                \
  T& name() noexcept {                                                                             \
    return this->name##_;                                                                          \
  }                                                                                                \
                                                                                                   \
private:                                                                                           \
  T name##_

namespace weft::nn {

/// How a loss reduces its per-element values: not at all, their mean, or their sum.
enum class Reduction { None, Mean, Sum };
inline constexpr Reduction kNone = Reduction::None;
inline constexpr Reduction kMean = Reduction::Mean;
inline constexpr Reduction kSum = Reduction::Sum;

} // namespace weft::nn
