// The interpreter: runs a Plan step by step with the eager CPU kernels, freeing each buffer after
// its last use. It is the define-by-run fallback compiled executables use for what codegen skips.
#pragma once

#include "weft/runtime/Plan.h"
#include "weft/runtime/Storage.h"

#include <memory>
#include <span>
#include <vector>

namespace weft {

/// Memory plus the strided view of it that a value occupies.
struct Buffer {
  std::shared_ptr<Storage> storage;
  TensorRef ref;
};

/// A fresh contiguous buffer.
Buffer allocateBuffer(const Shape& shape, DType dtype);

/// Runs `plan` on `args` and `state` (in plan order, with the shapes and dtypes it was built for);
/// returns the outputs. Updated state values are written into the state buffers' memory in place
/// after every step has run. (A random op's key is one of its inputs: an argument or state value
/// the caller sets per call.)
std::vector<Buffer> runPlan(const Plan& plan, std::span<const Buffer> args,
                            std::span<const Buffer> state);

} // namespace weft
