// Which attributes each op takes, and of which type: checked before shape inference runs.
#pragma once

#include "weft/runtime/ValueTypes.h"
#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"

#include <optional>

namespace weft {

/// A diagnostic if `attrs` lacks an attribute `op` needs, has one of the wrong type, or has one
/// `op` does not take.
std::optional<Diagnostic> checkAttrs(OpCode op, const Attrs& attrs);

} // namespace weft
