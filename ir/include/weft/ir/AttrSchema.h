// Which attributes each op takes: the runtime's schema (weft/runtime/AttrSchema.h).
#pragma once

#include "weft/ir/Types.h"
#include "weft/runtime/AttrSchema.h"

namespace weft::ir {

using weft::checkAttrs;

} // namespace weft::ir
