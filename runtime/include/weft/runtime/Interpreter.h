// The interpreter: runs a Plan step by step on one device, with that device's kernel registry and
// generated code, freeing each buffer after its last use. It is the define-by-run fallback compiled
// executables use for what codegen skips.
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

/// A fresh contiguous buffer on `device`.
Buffer allocateBuffer(hal::Device& device, const Shape& shape, DType dtype);

/// Runs `plan` on `device` (whose memory `args` and `state` are in, and whose code the plan's
/// kernel table has loaded) on `args` and `state` (in plan order, with the shapes and dtypes it was
/// built for); returns the outputs. Updated state values are written into the state buffers' memory
/// in place after every step has run. (A random op's key is one of its inputs: an argument or state
/// value the caller sets per call.)
std::vector<Buffer> runPlan(hal::Device& device, const Plan& plan, std::span<const Buffer> args,
                            std::span<const Buffer> state);

} // namespace weft
