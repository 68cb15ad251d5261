// The shared state behind a Tensor handle: storage, geometry and autograd metadata.
#pragma once

#include "weft/Autograd.h"
#include "weft/Tensor.h"
#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/Storage.h"
#include "weft/runtime/Vocabulary.h"

#include <initializer_list>
#include <mutex>
#include <span>

namespace weft {

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;
  int64_t offset = 0; // elements
  DType dtype = DType::Float32;
  /// The device of a tensor without storage (a traced value, an autograd node's record of an
  /// input it did not save); a tensor with storage is where its storage is.
  Device device;
  /// A number the user wrote (`x + 2`): ranks below tensors in type promotion.
  bool wrappedNumber = false;
  /// Set on views: the tensor whose storage this one looks into.
  autograd::detail::InternalRef viewBase;
  /// How many of the references to this tensor weft holds for itself (autograd::detail::
  /// InternalRef); the others are the users' handles.
  std::atomic<int64_t> internalRefs{0};
  /// Set while tracing: the trace this tensor belongs to and the graph value it stands for (such a
  /// tensor has no storage).
  struct TraceContext* trace = nullptr;
  int32_t traceValue = -1;
  /// A traced view: how many writes to its base `traceValue` has seen (TraceContext re-reads the
  /// view from its base after a write through another view or to the base itself).
  uint64_t traceVersion = 0;
  /// A real tensor made while a function was being traced (a constant of its graph, such as
  /// arange(n) or tensor({...}) in the function): the executable owns it, as eager code makes it
  /// anew on each call.
  bool madeInTrace = false;

  // Autograd. grad_fn/outputNr are set once when the op that makes the tensor runs (or by
  // in-place rebasing on the owning thread); grad and hooks are guarded by `mutex`.
  bool requiresGrad = false; // leaves only; non-leaves require grad iff gradFn is set
  std::shared_ptr<autograd::Node> gradFn;
  uint32_t outputNr = 0;
  Tensor grad;
  bool retainsGrad = false;
  std::weak_ptr<autograd::Node> gradAccumulator;
  std::vector<autograd::RegisteredHook> hooks; // leaves: run by the accumulator
  std::mutex mutex;

  TensorImpl() = default;
  TensorImpl(std::shared_ptr<Storage> s, Shape sh, Shape st, int64_t off, DType t)
      : storage(std::move(s)), shape(std::move(sh)), strides(std::move(st)), offset(off), dtype(t) {
  }
  /// A handle to the same memory with no autograd state.
  std::shared_ptr<TensorImpl> shallowCopy() const {
    auto c = std::make_shared<TensorImpl>(storage, shape, strides, offset, dtype);
    c->trace = trace;
    c->traceValue = traceValue;
    c->madeInTrace = madeInTrace;
    return c;
  }
};

/// The bytes a contiguous tensor of `shape`/`dtype` takes; a ShapeError naming `op` for a negative
/// size or one too large to address.
int64_t checkedByteSize(const Shape& shape, DType dtype, const char* op);
/// A fresh contiguous tensor of `shape`/`dtype` on `device` (uninitialised unless `zero`).
Tensor makeTensor(const Shape& shape, DType dtype, bool zero = false,
                  Device device = Device::cpu());

/// A tensor that may join an op on another device: a CPU scalar (a wrapped number, or any 0-d CPU
/// tensor, as in PyTorch), which goes there as a value rather than as memory. Eager ops and
/// compiled functions on a device take them alike.
bool isCpuScalar(const Tensor& t);

/// Runs primitive `op` eagerly: infers the result type (throwing weft::Error on bad input), makes a
/// view or runs the kernel of the inputs' device, and records an autograd node when an input
/// requires grad. The inputs share one device (a DeviceError otherwise), but for CPU scalars,
/// which join an op on another device as values; an op without tensor inputs runs on `device`.
/// Inputs are a span (a vector, or the braced list of the overload below: no allocation).
Tensor dispatch(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs = {},
                Device device = Device::cpu());
inline Tensor dispatch(OpCode op, std::initializer_list<Tensor> inputs, const Attrs& attrs = {},
                       Device device = Device::cpu()) {
  return dispatch(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, device);
}

/// Runs elementwise `op` straight into `self`, one of `inputs`, whose value it replaces, where
/// that gives what computing it out of place and copying it over would: not tracing, no input
/// requiring grad while grad mode is on, the result of self's dtype and shape, and no other input
/// sharing self's memory unless it is self exactly. False, with nothing done, otherwise. The
/// caller has checked that self may be written (checkWritable).
bool dispatchInPlace(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs,
                     const Tensor& self);
inline bool dispatchInPlace(OpCode op, std::initializer_list<Tensor> inputs, const Attrs& attrs,
                            const Tensor& self) {
  return dispatchInPlace(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, self);
}

/// A tensor of `shape` filled with `value` on `device` (the Full primitive: a graph node when
/// tracing).
Tensor fullOf(const Shape& shape, Scalar value, DType dtype, Device device = Device::cpu());

/// Checks that an in-place op named `op` may write `self`: no two of its elements share memory (an
/// expanded view), and it is not a leaf requiring grad while grad mode is on.
void checkWritable(const Tensor& self, const char* op);
/// Whether more than one element of `t` refers to one memory location (an expanded tensor, which
/// in-place ops refuse to write).
bool isExpanded(const Tensor& t);
/// Wraps a negative dim and checks it against `rank` (IndexError naming `op` otherwise). As in
/// PyTorch a 0-d tensor has one dimension here (0 or -1 wrap to 0), which does not index its
/// sizes: callers that index sizes() handle rank 0 first; dispatch() runs primitives along it.
int64_t wrapDim(int64_t dim, int64_t rank, const char* op);
/// wrapDim of each of `dims`.
Shape wrapDims(const Shape& dims, int64_t rank, const char* op);
/// The machine epsilon of float64, else of float32 (the linear-algebra tolerances' unit).
inline double machineEpsilon(DType t) {
  return t == DType::Float64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
}
/// A gradient made to fit its input: summed down to `shape` (it was broadcast), cast to `dtype`.
Tensor fitGradient(Tensor g, const Shape& shape, DType dtype);
namespace autograd {
/// Throws the "backward through the graph a second time" error for node `name`.
[[noreturn]] void failSecondBackward(const std::string& name);
} // namespace autograd
/// The vector-Jacobian product of input `i` of a recorded op (expanded from the op table).
Tensor vjp(OpCode op, const Tensor& g, const std::vector<Tensor>& in, const Tensor& y,
           const Attrs& at, size_t i);

// What makes a tensor tensor-like for the vocabulary of weft/runtime/Vocabulary.h, which the op
// table's vjp rules and the frontend's own code call (reshape, reduce_op, matrix_op, ...):
// dispatch() above, a constant, and metadata.
Shape shape_of(const Tensor& t);
DType dtype_of(const Tensor& t);
/// A constant of `shape`, `dtype` and `value` (`like` names the side: eagerly, nothing).
Tensor filled(const Tensor& like, const Shape& shape, DType dtype, double value);
/// A 2-D tensor whose transpose is contiguous (and is not contiguous itself).
bool is_column_major(const Tensor& t);
/// `x` itself if floating, else converted to float32 (as PyTorch's float-valued functions take
/// integers).
Tensor floatingOrFloat32(const Tensor& x);

} // namespace weft
