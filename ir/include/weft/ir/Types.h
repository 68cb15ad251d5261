// The IR's value types and diagnostics: the runtime's (weft/runtime/ValueTypes.h, where the
// artifact loader checks a program's steps with them), under the ir names the compiler rooms use.
#pragma once

#include "weft/runtime/ValueTypes.h"

namespace weft::ir {

using weft::broadcastShapes;
using weft::diag;
using weft::Diagnostic;
using weft::Result;
using weft::TensorType;
using weft::typeString;

} // namespace weft::ir
