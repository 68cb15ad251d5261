// The CPU kernel dispatcher: op code -> kernel, expanded from the op table.
#include "weft/runtime/Kernels.h"

#include <new>
#include <stdexcept>

namespace weft {

namespace {
void runOp(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out, const Attrs& attrs) {
  switch (op) {
#define WEFT_UNARY(N, s, d, low, k, v)                                                             \
  case OpCode::N:                                                                                  \
    return kernels::unary(op, inputs[0], out);
#define WEFT_BINARY(N, s, r, api, low, k, va, vb)                                                  \
  case OpCode::N:                                                                                  \
    return kernels::binary(op, inputs[0], inputs[1], out);
#define WEFT_OP(N, s, kind, n, v)                                                                  \
  case OpCode::N:                                                                                  \
    return kernels::N(inputs, out, attrs);
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
  }
  WEFT_INTERNAL_ASSERT(false, "unknown op code ", static_cast<int>(op));
}
} // namespace

void runKernel(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out,
               const Attrs& attrs) {
  try {
    runOp(op, inputs, out, attrs);
  } catch (const std::bad_alloc&) { // a kernel's workspace (sorting, im2col) did not fit
    WEFT_FAIL(Value, opName(op), ": out of memory for the kernel's workspace");
  } catch (const std::length_error&) {
    WEFT_FAIL(Value, opName(op), ": out of memory for the kernel's workspace");
  }
}

} // namespace weft
