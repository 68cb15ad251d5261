// The eager dispatcher: type inference, views or CPU kernels, and recording autograd nodes.
#include "TensorImpl.h"
#include "Trace.h"
#include "Vjp.h"
#include "weft/Functions.h"
#include "weft/ir/ShapeInference.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"
#include "weft/runtime/VjpRules.h"

namespace weft {
namespace {

/// The backward node of one primitive op: saves what its vjp rule reads, applies the rule.
class OpNode : public autograd::Node {
public:
  OpNode(OpCode op, Attrs attrs, const std::vector<Tensor>& inputs)
      : op_(op), attrs_(std::move(attrs)) {
    uint32_t uses = vjpUses(op);
    for (size_t i = 0; i < inputs.size(); ++i) {
      meta_.push_back(inputs[i].impl()->shallowCopy());
      meta_.back()->storage = nullptr; // shape and dtype only
      saved_.emplace_back();
      if (usesInput(uses, i)) saved_.back() = autograd::SavedTensor(inputs[i], false);
    }
  }

  /// Saves the output if the rule reads it; call after the output's grad_fn is this node.
  void saveOutput(const Tensor& output) {
    if (vjpUses(op_) & kUsesOutput) output_ = autograd::SavedTensor(output, true);
  }

  std::string name() const override {
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
    WEFT_CHECK(
        !released_, Value,
        "Trying to backward through the graph a second time (or directly access saved tensors "
        "after they "
        "have already been freed). Saved intermediate values of the graph are freed when you call "
        "backward() or autograd::grad(). Specify retain_graph=true if you need to backward through "
        "the "
        "graph a second time.");
    std::vector<Tensor> result(next_edges.size());
    const Tensor& g = grads[0];
    if (!g.defined()) return result;
    std::string nm = name();
    std::vector<Tensor> in;
    for (size_t i = 0; i < saved_.size(); ++i)
      in.push_back(saved_[i].defined() ? saved_[i].unpack(nm.c_str()) : Tensor(meta_[i]));
    Tensor y = output_.defined() ? output_.unpack(nm.c_str()) : Tensor();
    for (size_t i = 0; i < result.size(); ++i) {
      if (!next_edges[i].valid()) continue;
      Tensor r = vjp(op_, g, in, y, attrs_, i);
      if (!r.defined()) continue;
      if (r.sizes() != meta_[i]->shape) r = rules::sum_to(r, meta_[i]->shape);
      if (r.dtype() != meta_[i]->dtype) r = cast(r, meta_[i]->dtype);
      result[i] = r;
    }
    return result;
  }

  void release_saved() override {
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
  OpCode op_;
  Attrs attrs_;
  std::vector<std::shared_ptr<TensorImpl>> meta_;
  std::vector<autograd::SavedTensor> saved_;
  autograd::SavedTensor output_;
  bool released_ = false;
};

ir::TensorType typeOf(const Tensor& t) {
  return {t.dtype(), t.sizes()};
}

void recordAutograd(OpCode op, const Attrs& attrs, const std::vector<Tensor>& inputs, Tensor& out) {
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

} // namespace

Tensor makeTensor(const Shape& shape, DType dtype, bool zero) {
  size_t bytes = static_cast<size_t>(numel(shape)) * elementSize(dtype);
  return Tensor(std::make_shared<TensorImpl>(Storage::allocate(bytes, zero), shape,
                                             contiguousStrides(shape), 0, dtype));
}

int64_t wrapDim(int64_t dim, int64_t rank, const char* op) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (dim < -r || dim >= r)
    WEFT_FAIL(Index, op, ": dimension out of range (expected to be in range of [", -r, ", ", r - 1,
              "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

Tensor dispatch(OpCode op, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const OpInfo& info = opInfo(op);
  std::vector<ir::TensorType> types;
  types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    WEFT_CHECK(inputs[i].defined(), Value, info.name, ": input ", i, " is an undefined tensor");
    types.push_back(typeOf(inputs[i]));
  }
  auto inferred = ir::inferType(op, types, attrs);
  if (!inferred) throwError(inferred.diagnostic().kind, inferred.diagnostic().message);
  const ir::TensorType& type = inferred.value();
  if (TraceContext* tc = currentTrace()) return tc->record(op, inputs, attrs, type);

  Tensor out;
  if (isViewOp(op)) {
    const TensorImpl& in = *inputs[0].impl();
    if (auto view = computeView(op, in.shape, in.strides, attrs)) {
      auto impl = std::make_shared<TensorImpl>(in.storage, view->shape, view->strides,
                                               in.offset + view->offset, in.dtype);
      impl->viewBase = in.viewBase ? in.viewBase : inputs[0].impl();
      out = Tensor(impl);
    }
  }
  if (!out.defined()) {
    out = makeTensor(type.shape, type.dtype);
    if (out.numel() > 0) {
      std::vector<TensorRef> refs;
      refs.reserve(inputs.size());
      for (const Tensor& t : inputs)
        refs.push_back(t.ref());
      runKernel(op, refs, out.ref(), attrs);
    }
  }
  recordAutograd(op, attrs, inputs, out);
  return out;
}

} // namespace weft
