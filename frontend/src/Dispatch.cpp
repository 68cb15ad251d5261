// The eager dispatcher: type inference, views or CPU kernels, and recording autograd nodes.
#include "TensorImpl.h"
#include "Trace.h"
#include "Vjp.h"
#include "weft/Functions.h"
#include "weft/ir/ShapeInference.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/Timeline.h"
#include "weft/runtime/View.h"
#include "weft/runtime/VjpRules.h"

#include <array>
#include <span>

namespace weft {
namespace {

/// One value per input of an op: on the stack for up to 4 inputs (every op but cat/stack), so an
/// eager op's type inference and kernel call allocate nothing.
template <typename T> class PerInput {
public:
  explicit PerInput(size_t n) : n_(n) {
    if (n > kInline) heap_.resize(n);
  }
  T& operator[](size_t i) { return n_ > kInline ? heap_[i] : inline_[i]; }
  std::span<const T> span() const {
    return n_ > kInline ? std::span<const T>(heap_) : std::span<const T>(inline_.data(), n_);
  }

private:
  static constexpr size_t kInline = 4;
  size_t n_;
  std::array<T, kInline> inline_{};
  std::vector<T> heap_;
};

/// The backward node of one primitive op: saves what its vjp rule reads, applies the rule.
class OpNode : public autograd::Node {
public:
  OpNode(OpCode op, Attrs attrs, std::span<const Tensor> inputs)
      : op_(op), attrs_(std::move(attrs)) {
    for (size_t i = 0; i < inputs.size(); ++i) // only what the gradients needed read
      if (inputs[i].requires_grad()) uses_ |= vjpUses(op, i);
    for (size_t i = 0; i < inputs.size(); ++i) {
      meta_.push_back({inputs[i].sizes(), inputs[i].dtype(), inputs[i].device()});
      saved_.emplace_back();
      if (usesInput(uses_, i)) {
        saved_.back() = autograd::SavedTensor(inputs[i], false);
        saves_tensors = true;
      }
    }
  }

  /// Saves the output if the rule reads it; call after the output's grad_fn is this node.
  void saveOutput(const Tensor& output) {
    if (!(uses_ & kUsesOutput)) return;
    output_ = autograd::SavedTensor(output, true);
    saves_tensors = true;
  }

  /// Shows `name` instead of the primitive's own (the composite this node ends, as PyTorch's).
  void rename(const char* name) { named_ = name; }

  std::string name() const override {
    if (named_ != nullptr) return named_;
    std::string n(opName(op_));
    bool up = true;
    std::string out;
    for (char c : n) {
      if (c == '_') {
        up = true;
        continue;
      }
      out += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
      up = false;
    }
    return out + "Backward0";
  }

  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    std::vector<Tensor> result(next_edges.size());
    const Tensor& g = grads[0];
    if (!g.defined()) return result;
    std::vector<Tensor> in;
    Tensor y;
    unpack(in, y);
    for (size_t i = 0; i < result.size(); ++i) {
      if (!next_edges[i].valid()) continue;
      Tensor r = vjp(op_, g, in, y, attrs_, i);
      if (r.defined()) result[i] = fitGradient(r, meta_[i].shape, meta_[i].dtype);
    }
    return result;
  }

  void release_saved() override {
    std::lock_guard<std::mutex> lock(mutex);
    // A node that saved nothing may run again; one whose tensors are freed may not.
    bool freed = output_.defined();
    for (auto& s : saved_) {
      freed = freed || s.defined();
      s.reset();
    }
    output_.reset();
    released_ = released_ || freed;
  }

private:
  /// The inputs the rule reads (metadata-only tensors for those it did not save) and the output.
  void unpack(std::vector<Tensor>& in, Tensor& y) {
    std::lock_guard<std::mutex> lock(mutex);
    if (released_) autograd::failSecondBackward(name());
    std::string nm = name();
    for (size_t i = 0; i < saved_.size(); ++i) {
      if (saved_[i].defined()) {
        in.push_back(saved_[i].unpack(nm.c_str()));
        continue;
      }
      const auto& [shape, dtype, device] = meta_[i];
      in.emplace_back(
          std::make_shared<TensorImpl>(nullptr, shape, contiguousStrides(shape), 0, dtype));
      in.back().impl()->device = device; // constants the rule makes go there
    }
    if (output_.defined()) y = output_.unpack(nm.c_str());
  }

  OpCode op_;
  const char* named_ = nullptr;
  uint32_t uses_ = 0;
  Attrs attrs_;
  struct Meta {
    Shape shape;
    DType dtype;
    Device device;
  };
  std::vector<Meta> meta_; // each input's shape, dtype and device
  std::vector<autograd::SavedTensor> saved_;
  autograd::SavedTensor output_;
  bool released_ = false;
};

ir::TensorType typeOf(const Tensor& t) {
  return {t.dtype(), t.sizes()};
}

} // namespace

namespace autograd {
const Tensor& name_grad_fn(const Tensor& t, const char* name, const Tensor& input) {
  if (!t.defined()) return t;
  autograd::Node* fn = t.impl()->gradFn.get();
  if (fn == nullptr || (input.defined() && input.impl()->gradFn.get() == fn)) return t;
  if (auto* node = dynamic_cast<OpNode*>(fn)) node->rename(name);
  return t;
}
} // namespace autograd

namespace {

void recordAutograd(OpCode op, const Attrs& attrs, std::span<const Tensor> inputs, Tensor& out) {
  const OpInfo& info = opInfo(op);
  if (!info.differentiable || !is_grad_enabled() || !isFloating(out.dtype())) return;
  bool any = false;
  for (const Tensor& t : inputs)
    any = any || t.requires_grad();
  if (!any) return;
  auto node = std::make_shared<OpNode>(op, attrs, inputs);
  for (const Tensor& t : inputs)
    node->next_edges.push_back(t.requires_grad() ? autograd::gradient_edge(t) : autograd::Edge{});
  out.impl()->gradFn = node;
  out.impl()->outputNr = 0;
  node->saveOutput(out);
}

/// Whether `op` works along a dimension of its first input and that input is 0-d. PyTorch accepts
/// dimension 0 (or -1) of a scalar there and treats it as the one-element 1-d tensor it is; the IR
/// has no such dimension, so the op runs on that 1-d view.
bool alongDimOfScalar(OpCode op, std::span<const Tensor> in, const Attrs& at) {
  if (in.empty() || in[0].dim() != 0) return false;
  switch (opInfo(op).kind) {
  case OpKind::Reduce:
  case OpKind::Flip:
    return at.has("dims") && !at.ints("dims").empty();
  case OpKind::ArgReduce:
  case OpKind::Scan:
  case OpKind::ArgScan:
  case OpKind::Normalize:
  case OpKind::Sort:
  case OpKind::Gather:
  case OpKind::Scatter:
  case OpKind::IndexSelect:
  case OpKind::IndexAdd:
    return true;
  case OpKind::CheckIndex: // its dim is the indexed tensor's, not its input's
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Cast:
  case OpKind::Identity:
  case OpKind::Where:
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Expand:
  case OpKind::Slice:
  case OpKind::Pad:
  case OpKind::Cat:
  case OpKind::MatMul:
  case OpKind::Matrix:
  case OpKind::Conv:
  case OpKind::ConvInputGrad:
  case OpKind::ConvWeightGrad:
  case OpKind::Pool:
  case OpKind::Full:
  case OpKind::Random:
    return false;
  }
  return false;
}

} // namespace

int64_t checkedByteSize(const Shape& shape, DType dtype, const char* op) {
  auto bytes = byteSize(shape, dtype);
  WEFT_CHECK(bytes.has_value(), Shape, op, ": cannot make a ", dtypeName(dtype),
             " tensor of shape ", shapeString(shape),
             ": a negative size, or more elements than fit in memory");
  return *bytes;
}

Tensor makeTensor(const Shape& shape, DType dtype, bool zero, Device device) {
  auto bytes = static_cast<size_t>(checkedByteSize(shape, dtype, "empty"));
  auto impl = std::make_shared<TensorImpl>(hal::device(device).allocate(bytes, zero), shape,
                                           contiguousStrides(shape), 0, dtype);
  impl->madeInTrace = inTracedFunction();
  return Tensor(std::move(impl));
}

int64_t wrapDim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    WEFT_FAIL(Index, op, ": dimension out of range (expected to be in range of [", -r, ", ", r - 1,
              "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

Shape wrapDims(const Shape& dims, int64_t rank, const char* op) {
  Shape out;
  for (int64_t d : dims)
    out.push_back(wrapDim(d, rank, op));
  return out;
}

namespace {

/// Runs `op`'s kernel on the device of `out` (where `inputs` are) on `inputs`, writing `out`'s
/// memory (nothing to do when it is empty, unless the kernel checks an index's values).
void runInto(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs, const Tensor& out) {
  if (out.numel() == 0 && !readsIndexValues(op)) return;
  std::optional<timeline::Scope> timed; // WEFT_PROFILE=trace.json: the op, at the caller's line
  if (timeline::enabled()) timed.emplace("op", std::string(opName(op)), timeline::callSite());
  PerInput<TensorRef> refs(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    refs[i] = inputs[i].ref();
  out.impl()->storage->device().kernels().run(op, refs.span(), out.ref(), attrs);
}

/// The device `op` runs on: that of its inputs, which must share one (CPU scalars aside), or
/// `device` for an op without tensor inputs (or with CPU scalars only).
Device deviceOf(const OpInfo& info, std::span<const Tensor> inputs, Device device) {
  const Tensor* first = nullptr;
  for (const Tensor& t : inputs) {
    if (isCpuScalar(t)) continue;
    if (first == nullptr) {
      first = &t;
      continue;
    }
    WEFT_CHECK(t.device() == first->device(), Device, info.name,
               ": expected all tensors to be on the same device, but found tensors on ",
               first->device().str(), " and ", t.device().str(), " (move one with .to(device))");
  }
  return first != nullptr ? first->device() : device;
}

} // namespace

bool isCpuScalar(const Tensor& t) {
  return t.dim() == 0 && t.is_cpu();
}

Tensor dispatch(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs, Device device) {
  const OpInfo& info = opInfo(op);
  PerInput<ir::TensorType> types(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    WEFT_CHECK(inputs[i].defined(), Value, info.name, ": input ", i, " is an undefined tensor");
    types[i] = typeOf(inputs[i]);
  }
  if (alongDimOfScalar(op, inputs, attrs)) {
    WEFT_CHECK(op != OpCode::IndexSelect || inputs[1].numel() == 1, Index, info.name,
               ": an index into a 0-dimensional tensor can have only 1 value, got ",
               inputs[1].numel());
    std::vector<Tensor> lifted;
    for (const Tensor& t : inputs)
      lifted.push_back(t.dim() == 0 ? reshape(t, {1}) : t);
    Tensor out = dispatch(op, lifted, attrs);
    // The result has the scalar's shape, but gather's has its index's (which may be 1-d).
    const Shape& shape = op == OpCode::Gather ? inputs[1].sizes() : Shape{};
    return out.sizes() == shape ? out : reshape(out, shape);
  }
  auto inferred = ir::inferType(op, types.span(), attrs);
  if (!inferred) throwError(inferred.diagnostic().kind, inferred.diagnostic().message);
  const ir::TensorType& type = inferred.value();
  if (TraceContext* tc = currentTrace()) return tc->record(op, inputs, attrs, type);
  device = deviceOf(info, inputs, device);
  if (!device.is_cpu()) { // CPU scalars join as values
    bool moved = false;
    std::vector<Tensor> here(inputs.begin(), inputs.end());
    for (Tensor& t : here)
      if (t.device() != device) {
        const bool wrapped = t.impl()->wrappedNumber;
        t = t.to(device);
        t.impl()->wrappedNumber = wrapped; // still ranks as a number in type promotion
        moved = true;
      }
    if (moved) return dispatch(op, here, attrs, device);
  }

  Tensor out;
  if (isViewOp(op)) {
    const TensorImpl& in = *inputs[0].impl();
    if (auto view = computeView(op, in.shape, in.strides, attrs)) {
      auto impl = std::make_shared<TensorImpl>(in.storage, view->shape, view->strides,
                                               in.offset + view->offset, in.dtype);
      impl->viewBase = in.viewBase ? in.viewBase : inputs[0].impl();
      impl->madeInTrace = in.madeInTrace;
      out = Tensor(impl);
    }
  }
  if (!out.defined()) {
    out = makeTensor(type.shape, type.dtype, false, device);
    runInto(op, inputs, attrs, out);
  }
  recordAutograd(op, attrs, inputs, out);
  return out;
}

bool dispatchInPlace(OpCode op, std::span<const Tensor> inputs, const Attrs& attrs,
                     const Tensor& self) {
  if (!isElementwise(op) || currentTrace() != nullptr) return false;
  const bool grad = is_grad_enabled();
  const TensorImpl& out = *self.impl();
  PerInput<ir::TensorType> types(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || (grad && t.requires_grad())) return false;
    if (t.device() != self.device()) return false; // the general path moves or refuses it
    const TensorImpl& in = *t.impl();
    // Element i of the result may only read element i of self's memory.
    if (in.storage == out.storage &&
        !(in.offset == out.offset && in.shape == out.shape && in.strides == out.strides))
      return false;
    types[i] = typeOf(t);
  }
  auto inferred = ir::inferType(op, types.span(), attrs);
  if (!inferred || inferred.value().dtype != out.dtype || inferred.value().shape != out.shape)
    return false; // the general path says what is wrong
  runInto(op, inputs, attrs, self);
  out.storage->bumpVersion();
  return true;
}

} // namespace weft
