// Shape and dtype inference for every op, written once per op kind; eager and traced code share it.
#pragma once

#include "weft/runtime/ValueTypes.h"
#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"

#include <span>

namespace weft {

/// The result type of `op` applied to inputs of `inputs` types with `attrs`, or a diagnostic that
/// names the op, the shapes and dtypes involved, and what is wrong. Attributes are canonical
/// (non-negative dims, explicit lists).
Result<TensorType> inferType(OpCode op, std::span<const TensorType> inputs, const Attrs& attrs);

} // namespace weft
