// The CPU kernel registry: op code -> kernel, expanded from the op table.
#include "weft/runtime/Kernels.h"

#include "weft/runtime/Device.h"

#include <new>
#include <stdexcept>

namespace weft {

namespace {
template <OpCode op>
void unaryKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  kernels::unary(op, in[0], out);
}
template <OpCode op>
void binaryKernel(std::span<const TensorRef> in, const TensorRef& out, const Attrs&) {
  kernels::binary(op, in[0], in[1], out);
}
} // namespace

namespace hal {
const KernelRegistry& cpuKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r("cpu");
#define WEFT_UNARY(N, s, d, low, k, v) r.set(OpCode::N, &unaryKernel<OpCode::N>);
#define WEFT_BINARY(N, s, r_, api, low, k, va, vb) r.set(OpCode::N, &binaryKernel<OpCode::N>);
#define WEFT_OP(N, s, kind, n, v) r.set(OpCode::N, &kernels::N);
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
    r.setCopyCast(&weft::copyCast);
    r.setFill(&weft::fill);
    return r;
  }();
  return registry;
}
} // namespace hal

void runKernel(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out,
               const Attrs& attrs) {
  hal::cpuKernels().run(op, inputs, out, attrs);
}

} // namespace weft
