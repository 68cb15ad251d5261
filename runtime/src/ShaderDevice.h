// What a GPU device offers the op table's shader kernels (ShaderKernels.cpp): recording one per-op
// shader (weft/runtime/Shaders.h) over its operands. The Vulkan device implements it.
#pragma once

#include "weft/runtime/Device.h"
#include "weft/runtime/Shaders.h"

#include <array>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace weft::hal {

class ShaderDevice : public Device {
public:
  /// Records shader `key` with `params` over `operands` (this device's memory, in the key's
  /// order) in `groups` workgroups. A shader with a status buffer is waited for: the index it
  /// found out of range, if any, is returned.
  virtual std::optional<int64_t> dispatch(const ShaderKey& key, std::span<const int32_t> params,
                                          std::span<const TensorRef> operands,
                                          std::array<uint32_t, 3> groups) = 0;
  /// Why this device has no shader `key` (codegen's reason: a float64 exp, ...), or "" where it
  /// has one (made here at first use).
  virtual std::string shaderError(const ShaderKey& key) = 0;
};

/// Where shader operand `t` starts in its buffer, in elements, for a shader's parameters (what
/// `op` names in the error): a ValueError where an element of its buffer lies past what shaders
/// index in 32 bits.
int64_t shaderOffset(const TensorRef& t, std::string_view op);

/// Fills `registry` with the op table's kernels as shaders run them: every op the shader families
/// cover, and the data movement ops as copies and fills.
void fillShaderKernels(KernelRegistry& registry);

} // namespace weft::hal
