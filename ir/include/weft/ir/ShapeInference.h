// Shape and dtype inference for every op: the runtime's rules (weft/runtime/ShapeInference.h),
// which eager ops, traced graphs and the artifact loader share.
#pragma once

#include "weft/ir/Types.h"
#include "weft/runtime/ShapeInference.h"

namespace weft::ir {

using weft::inferType;

} // namespace weft::ir
