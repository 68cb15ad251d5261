// Tensor metadata, conversions, element access and the view ops.
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/runtime/Kernels.h"
#include "weft/runtime/View.h"

#include <numeric>
#include <ostream>
#include <sstream>

namespace weft {

void Tensor::checkDefined(const char* what) const {
  WEFT_CHECK(impl_ != nullptr, Value, what, ": called on an undefined tensor");
}

const Shape& Tensor::sizes() const {
  checkDefined("sizes");
  return impl_->shape;
}
const Shape& Tensor::strides() const {
  checkDefined("strides");
  return impl_->strides;
}
int64_t Tensor::size(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(dim() > 0, Index, "size: dimension specified as ", d, " but tensor has no dimensions");
  return sizes()[static_cast<size_t>(wrapDim(d, dim(), "size"))];
}
int64_t Tensor::stride(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  WEFT_CHECK(dim() > 0, Index, "stride: dimension specified as ", d,
             " but tensor has no dimensions");
  return strides()[static_cast<size_t>(wrapDim(d, dim(), "stride"))];
}
int64_t Tensor::dim() const {
  return static_cast<int64_t>(sizes().size());
}
int64_t Tensor::numel() const {
  return weft::numel(sizes());
}
DType Tensor::dtype() const {
  checkDefined("dtype");
  return impl_->dtype;
}
int64_t Tensor::storage_offset() const {
  checkDefined("storage_offset");
  return impl_->offset;
}
int64_t Tensor::element_size() const {
  checkDefined("element_size");
  return static_cast<int64_t>(elementSize(dtype()));
}
Device Tensor::device() const {
  checkDefined("device");
  return impl_->storage != nullptr ? impl_->storage->device().id() : impl_->device;
}
TensorOptions Tensor::options() const {
  return TensorOptions(dtype()).device(device()).requires_grad(requires_grad());
}
bool Tensor::is_alias_of(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage != nullptr &&
         impl_->storage == other.impl_->storage;
}
bool Tensor::is_same_size(const Tensor& other) const {
  checkDefined("is_same_size");
  WEFT_CHECK(other.defined(), Value, "is_same_size: called with an undefined tensor");
  return sizes() == other.sizes();
}
bool Tensor::is_contiguous() const {
  checkDefined("is_contiguous");
  // Geometry only, so it also answers for traced tensors (whose views have eager's strides).
  return TensorRef{nullptr, impl_->dtype, impl_->shape, impl_->strides}.isContiguous();
}
void* Tensor::data_ptr() const {
  checkDefined("data_ptr");
  checkNotTraced(*this, "data_ptr");
  WEFT_CHECK(impl_->storage != nullptr, Value, "data_ptr: this tensor has metadata only");
  WEFT_CHECK(impl_->storage->data() != nullptr, Device, "data_ptr: the tensor is on ",
             device().str(), ", whose memory the host cannot read; call .cpu() first");
  return static_cast<char*>(impl_->storage->data()) +
         impl_->offset * static_cast<int64_t>(elementSize(impl_->dtype));
}
template <typename T> T* Tensor::data_ptr(std::source_location loc) const {
  CallSite cs(loc);
  checkNotTraced(*this, "data_ptr");
  WEFT_CHECK(DTypeOf<T>::value == dtype(), DType, "data_ptr: the tensor holds ", dtypeName(dtype()),
             ", not ", dtypeName(DTypeOf<T>::value));
  return static_cast<T*>(data_ptr());
}
TensorRef Tensor::ref() const {
  checkDefined("ref");
  checkNotTraced(*this, "reading tensor data");
  WEFT_CHECK(impl_->storage != nullptr, Value, "this tensor has metadata only (no storage)");
  return refInto(*impl_->storage, impl_->offset * static_cast<int64_t>(elementSize(impl_->dtype)),
                 impl_->dtype, impl_->shape, impl_->strides);
}

namespace {

/// The backward of a copy between devices: the gradient goes back to the source's device.
class ToDeviceBackward final : public autograd::Node {
public:
  explicit ToDeviceBackward(Device from) : from_(from) {}
  std::string name() const override { return "ToCopyBackward0"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    return {grads.at(0).defined() ? grads[0].to(from_) : Tensor()};
  }

private:
  Device from_;
};

} // namespace

Tensor Tensor::to(Device d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("to");
  if (d == device()) return *this;
  hal::Device& target = hal::device(d); // a DeviceError for a device this process lacks
  // Inside compile() or trace(), a constant the function made (arange(n, device), tensor({...})
  // then .to(device)) moves as eagerly: it is made anew on each call. What the function reads
  // (its arguments, captured tensors, values it computed) would move once, at the trace.
  const bool constant = impl_->trace == nullptr && impl_->madeInTrace;
  WEFT_CHECK(currentTrace() == nullptr || constant, Device, "to(", d.str(),
             "): moving a tensor between devices inside compile() or trace() is not supported "
             "yet; move the inputs before the call");
  const TensorImpl& self = *impl_;
  const auto esize = static_cast<int64_t>(elementSize(self.dtype));
  Tensor out;
  if (is_contiguous() || self.storage->device().kernels().find(OpCode::Cast) != nullptr) {
    Tensor src = contiguous(); // made dense where it is, then moved
    const TensorImpl& in = *src.impl();
    auto bytes = static_cast<size_t>(checkedByteSize(in.shape, in.dtype, "to"));
    auto impl = std::make_shared<TensorImpl>(target.allocate(bytes), in.shape,
                                             contiguousStrides(in.shape), 0, in.dtype);
    hal::transfer(*in.storage, static_cast<size_t>(in.offset * esize), *impl->storage, 0, bytes);
    out = Tensor(std::move(impl));
  } else { // a strided view on a device that cannot copy it: the bytes it spans, densed there
    int64_t lo = self.offset, hi = self.offset;
    for (size_t d = 0; d < self.shape.size(); ++d) {
      const int64_t reach = (self.shape[d] - 1) * self.strides[d];
      (reach < 0 ? lo : hi) += reach;
    }
    auto span = static_cast<size_t>((hi - lo + 1) * esize);
    auto view = std::make_shared<TensorImpl>(target.allocate(span), self.shape, self.strides,
                                             self.offset - lo, self.dtype);
    hal::transfer(*self.storage, static_cast<size_t>(lo * esize), *view->storage, 0, span);
    NoGradGuard noGrad;
    out = Tensor(std::move(view)).contiguous();
  }
  if (is_grad_enabled() && requires_grad()) {
    auto node = std::make_shared<ToDeviceBackward>(device());
    node->next_edges.push_back(autograd::gradient_edge(*this));
    out.impl()->gradFn = node;
    out.impl()->outputNr = 0;
  }
  out.impl()->madeInTrace = constant && inTracedFunction(); // the executable's, as its source
  return out;
}

Tensor Tensor::to(Device d, DType t, std::source_location loc) const {
  CallSite cs(loc);
  return to(d).to(t);
}

Tensor Tensor::cpu(std::source_location loc) const {
  CallSite cs(loc);
  return to(Device::cpu());
}

Tensor Tensor::to(DType t, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("to");
  return t == dtype() ? *this : autograd::name_grad_fn(cast(*this, t), "ToCopyBackward0");
}

Tensor Tensor::contiguous(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("contiguous");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("clone");
  return autograd::name_grad_fn(dispatch(OpCode::Cast, {*this}, Attrs{{"dtype", dtype()}}),
                                "CloneBackward0");
}

template <typename T> T Tensor::item(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("item");
  if (currentTrace() != nullptr) {
    Tensor value = readValue(*this, "item");
    TraceScope paused(nullptr); // `value` is real: read it, do not trace the read
    return value.item<T>();
  }
  WEFT_CHECK(numel() == 1, Value, "item: a Tensor with ", numel(),
             " elements cannot be converted to a scalar");
  if (!is_cpu()) return detach().cpu().item<T>();
  T v{};
  TensorRef dst{&v, DTypeOf<T>::value, sizes(), Shape(sizes().size(), 0)};
  copyCast(ref(), dst);
  return v;
}

Scalar Tensor::item(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("item");
  if (is_floating_point()) return item<double>();
  if (dtype() == DType::Bool) return item<bool>();
  return item<int64_t>();
}

std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.isBoolean()) return os << (s.toBool() ? "true" : "false");
  if (s.isFloatingPoint()) return os << s.toDouble();
  return os << s.toLong();
}

template <typename T> std::vector<T> Tensor::to_vector(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("to_vector");
  if (currentTrace() != nullptr) {
    Tensor value = readValue(*this, "to_vector");
    TraceScope paused(nullptr);
    return value.to_vector<T>();
  }
  if (!is_cpu()) return detach().cpu().to_vector<T>();
  if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> is packed: go through bytes
    std::vector<uint8_t> bytes = to_vector<uint8_t>();
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    auto bytes = checkedMul(numel(), static_cast<int64_t>(sizeof(T))); // an expand() may be huge
    WEFT_CHECK(bytes && static_cast<size_t>(*bytes) <= Storage::allocationLimit(), Value,
               "to_vector: out of memory: ", numel(),
               " elements do not fit in this machine's memory");
    std::vector<T> v(static_cast<size_t>(numel()));
    if (!v.empty())
      copyCast(ref(), TensorRef{v.data(), DTypeOf<T>::value, sizes(), contiguousStrides(sizes())});
    return v;
  }
}

#define WEFT_X(name, type, str)                                                                    \
  template type* Tensor::data_ptr<type>(std::source_location) const;                               \
  template type Tensor::item<type>(std::source_location) const;                                    \
  template std::vector<type> Tensor::to_vector<type>(std::source_location) const;
WEFT_DTYPES(WEFT_X)
#undef WEFT_X

std::string Tensor::toString() const {
  std::ostringstream os;
  os << *this;
  return os.str();
}

// ---- views ----

namespace {

/// Resolves one -1 in a requested shape against `count` elements.
Shape inferSize(Shape shape, int64_t count, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      WEFT_CHECK(infer < 0, Value, op, ": only one dimension can be inferred (-1) in ",
                 shapeString(shape));
      infer = static_cast<int64_t>(i);
    } else {
      WEFT_CHECK(shape[i] >= 0, Shape, op, ": invalid shape dimension ", shape[i], " in ",
                 shapeString(shape));
      auto product = checkedMul(known, shape[i]);
      WEFT_CHECK(product.has_value(), Shape, op, ": shape ", shapeString(shape),
                 " has more elements than fit in memory");
      known = *product;
    }
  }
  if (infer >= 0) {
    WEFT_CHECK(known != 0 && count % known == 0, Shape, op, ": shape ", shapeString(shape),
               " is invalid for input of size ", count);
    shape[static_cast<size_t>(infer)] = count / known;
  }
  return shape;
}

} // namespace

/// A new view (or copy) of `t` with `shape` (the vocabulary's reshape gives `t` itself where the
/// shape is its own; a method gives a new tensor, as LibTorch's).
Tensor reshapeView(const Tensor& t, const Shape& shape) {
  return dispatch(OpCode::Reshape, {t}, Attrs{{"shape", shape}});
}
Tensor permuteView(const Tensor& t, const Shape& dims) {
  return dispatch(OpCode::Permute, {t}, Attrs{{"dims", dims}});
}

Tensor Tensor::view(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("view");
  shape = inferSize(std::move(shape), numel(), "view");
  WEFT_CHECK(weft::numel(shape) == numel(), Shape, "view: shape ", shapeString(shape),
             " is invalid for input of size ", numel());
  // Geometry decides, as for is_contiguous(): traced tensors carry eager's strides, no storage.
  bool viewable =
      computeView(OpCode::Reshape, impl_->shape, impl_->strides, Attrs{{"shape", shape}})
          .has_value();
  WEFT_CHECK(viewable, Shape, "view: size ", shapeString(shape),
             " is not compatible with input tensor's size and stride ", shapeString(sizes()), "/",
             shapeString(strides()),
             " (at least one dimension spans across two contiguous subspaces). Use .reshape(...) "
             "instead.");
  return autograd::name_grad_fn(reshapeView(*this, shape), "ViewBackward0");
}

Tensor Tensor::reshape(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("reshape");
  return autograd::name_grad_fn(reshapeView(*this, inferSize(std::move(shape), numel(), "reshape")),
                                "ReshapeAliasBackward0");
}

Tensor Tensor::permute(IntArrayRef dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("permute");
  for (int64_t& d : dims)
    d = wrapDim(d, dim(), "permute");
  return permuteView(*this, dims);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("transpose");
  d0 = wrapDim(d0, dim(), "transpose");
  d1 = wrapDim(d1, dim(), "transpose");
  if (dim() == 0) return *this;
  Shape dims(static_cast<size_t>(dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<size_t>(d0)], dims[static_cast<size_t>(d1)]);
  return autograd::name_grad_fn(permuteView(*this, dims), "TransposeBackward0");
}

Tensor Tensor::t(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("t");
  WEFT_CHECK(dim() <= 2, Shape, "t: expects a tensor with <= 2 dimensions, but got ", dim(), "D ",
             shapeString(sizes()));
  return dim() < 2 ? *this : autograd::name_grad_fn(transpose(0, 1), "TBackward0");
}

Tensor Tensor::mT(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("mT");
  WEFT_CHECK(dim() >= 2, Shape, "mT: expects a tensor with >= 2 dimensions, got ",
             shapeString(sizes()));
  return weft::mT(*this);
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("slice");
  WEFT_CHECK(dim() > 0, Index, "slice: cannot slice a 0-dimensional tensor");
  d = wrapDim(d, dim(), "slice");
  WEFT_CHECK(step > 0, Value, "slice: step must be positive, got ", step);
  int64_t n = sizes()[static_cast<size_t>(d)];
  // Python slice semantics: negative bounds count from the end, out-of-range bounds clamp.
  auto clampBound = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t s = clampBound(start.value_or(0)), e = clampBound(end.value_or(n));
  return slice_dim(*this, d, s, std::max(s, e), step);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("narrow");
  WEFT_CHECK(dim() > 0, Index, "narrow: cannot narrow a 0-dimensional tensor");
  d = wrapDim(d, dim(), "narrow");
  int64_t n = sizes()[static_cast<size_t>(d)];
  if (start < 0) start += n;
  WEFT_CHECK(start >= 0 && length >= 0 && start + length <= n, Index, "narrow: start (", start,
             ") + length (", length, ") exceeds dimension size (", n, ")");
  return slice_dim(*this, d, start, start + length, 1);
}

Tensor Tensor::select(int64_t d, int64_t index, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("select");
  WEFT_CHECK(dim() > 0, Index, "select: cannot be applied to a 0-dim tensor");
  d = wrapDim(d, dim(), "select");
  int64_t n = sizes()[static_cast<size_t>(d)];
  WEFT_CHECK(index >= -n && index < n, Index, "select: index ", index,
             " out of range for tensor of size ", shapeString(sizes()), " at dimension ", d);
  if (index < 0) index += n;
  Shape s = sizes();
  s.erase(s.begin() + d);
  return autograd::name_grad_fn(reshapeView(slice_dim(*this, d, index, index + 1, 1), s),
                                "SelectBackward0");
}

Tensor Tensor::expand(IntArrayRef shape, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("expand");
  WEFT_CHECK(shape.size() >= sizes().size(), Shape, "expand: the number of sizes provided (",
             shape.size(), ") must be greater or equal to the number of dimensions in the tensor (",
             dim(), ")");
  size_t lead = shape.size() - sizes().size();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == -1) {
      WEFT_CHECK(i >= lead, Shape,
                 "expand: -1 is not allowed in a leading, non-existing dimension");
      shape[i] = sizes()[i - lead];
    }
  if (shape == sizes()) return *this;
  return dispatch(OpCode::Expand, {*this}, Attrs{{"shape", shape}});
}

Tensor Tensor::squeeze(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("squeeze");
  Shape s;
  for (int64_t v : sizes())
    if (v != 1) s.push_back(v);
  return s == sizes() ? *this : autograd::name_grad_fn(reshapeView(*this, s), "SqueezeBackward0");
}

Tensor Tensor::squeeze(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("squeeze");
  d = wrapDim(d, dim(), "squeeze");
  if (dim() == 0 || sizes()[static_cast<size_t>(d)] != 1) return *this;
  Shape s = sizes();
  s.erase(s.begin() + d);
  return autograd::name_grad_fn(reshapeView(*this, s), "SqueezeBackward1");
}

Tensor Tensor::unsqueeze(int64_t d, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("unsqueeze");
  d = wrapDim(d, dim() + 1, "unsqueeze");
  Shape s = sizes();
  s.insert(s.begin() + d, 1);
  return autograd::name_grad_fn(reshapeView(*this, s), "UnsqueezeBackward0");
}

Tensor Tensor::flatten(int64_t start, int64_t end, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("flatten");
  start = wrapDim(start, dim(), "flatten");
  end = wrapDim(end, dim(), "flatten");
  if (dim() == 0) return reshapeView(*this, {1});
  WEFT_CHECK(start <= end, Value, "flatten: start_dim (", start, ") cannot come after end_dim (",
             end, ")");
  Shape s(sizes().begin(), sizes().begin() + start);
  int64_t m = 1;
  for (int64_t d = start; d <= end; ++d)
    m *= sizes()[static_cast<size_t>(d)];
  s.push_back(m);
  s.insert(s.end(), sizes().begin() + end + 1, sizes().end());
  return autograd::name_grad_fn(reshapeView(*this, s), "ReshapeAliasBackward0");
}

Tensor Tensor::unflatten(int64_t d, IntArrayRef parts, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("unflatten");
  WEFT_CHECK(dim() > 0, Index, "unflatten: cannot unflatten a 0-dimensional tensor");
  d = wrapDim(d, dim(), "unflatten");
  parts = inferSize(std::move(parts), sizes()[static_cast<size_t>(d)], "unflatten");
  WEFT_CHECK(weft::numel(parts) == sizes()[static_cast<size_t>(d)], Shape,
             "unflatten: provided sizes ", shapeString(parts),
             " don't multiply up to the size of dim ", d, " (", sizes()[static_cast<size_t>(d)],
             ")");
  Shape s(sizes().begin(), sizes().begin() + d);
  s.insert(s.end(), parts.begin(), parts.end());
  s.insert(s.end(), sizes().begin() + d + 1, sizes().end());
  return reshapeView(*this, s);
}

Tensor Tensor::flip(Dims dims, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("flip");
  return weft::flip(*this, wrapDims(dims, dim(), "flip"));
}

// ---- autograd accessors ----

bool Tensor::requires_grad() const {
  checkDefined("requires_grad");
  return impl_->requiresGrad || impl_->gradFn != nullptr;
}

Tensor& Tensor::requires_grad_(bool r, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("requires_grad_");
  WEFT_CHECK(is_leaf() || r, Value,
             "requires_grad_: you can only change requires_grad flags of leaf variables. If you "
             "want to use a "
             "computed variable in a subgraph that doesn't require differentiation use var_no_grad "
             "= var.detach().");
  WEFT_CHECK(!r || isFloating(dtype()), DType,
             "requires_grad_: only tensors of floating point dtype can require "
             "gradients, got ",
             dtypeName(dtype()));
  impl_->requiresGrad = r;
  return *this;
}

Tensor Tensor::grad() const {
  checkDefined("grad");
  Tensor g;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    g = impl_->grad;
  }
  // Inside a trace, a real leaf's real gradient is read through the leaf on every call.
  if (TraceContext* tc = currentTrace(); tc && g.defined() && !impl_->trace && !g.impl()->trace)
    tc->gradOf.emplace(g.impl().get(), std::make_pair(g, *this));
  return g;
}

void Tensor::set_grad(const Tensor& g) {
  checkDefined("set_grad");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->grad = g;
}

Tensor& Tensor::mutable_grad() {
  checkDefined("mutable_grad");
  return impl_->grad;
}

Tensor Tensor::detach(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("detach");
  if (currentTrace() != nullptr) // a graph value that gradients do not cross
    return dispatch(OpCode::StopGradient, {*this});
  auto impl = impl_->shallowCopy();
  impl->viewBase = impl_->viewBase ? impl_->viewBase : impl_;
  return Tensor(impl);
}

Tensor& Tensor::detach_(std::source_location loc) {
  CallSite cs(loc);
  checkDefined("detach_");
  impl_->gradFn = nullptr;
  impl_->requiresGrad = false;
  return *this;
}

bool Tensor::is_leaf() const {
  checkDefined("is_leaf");
  return impl_->gradFn == nullptr;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  checkDefined("grad_fn");
  return impl_->gradFn;
}

uint32_t Tensor::output_nr() const {
  checkDefined("output_nr");
  return impl_->outputNr;
}

uint64_t Tensor::_version() const {
  checkDefined("_version");
  return impl_->storage ? impl_->storage->version() : 0;
}

void Tensor::set_data(const Tensor& data, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("set_data");
  WEFT_CHECK(data.defined(), Value, "set_data: the new data is an undefined tensor");
  checkNotTraced(*this, "set_data");
  checkNotTraced(data, "set_data");
  WEFT_CHECK(!requires_grad() || !impl_->gradFn, Value,
             "set_data: only leaves can take new data (this tensor has a grad_fn)");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const TensorImpl& d = *data.impl();
  impl_->storage = d.storage;
  impl_->shape = d.shape;
  impl_->strides = d.strides;
  impl_->offset = d.offset;
  impl_->dtype = d.dtype;
  if (impl_->grad.defined() && (impl_->grad.sizes() != d.shape || impl_->grad.dtype() != d.dtype))
    impl_->grad = Tensor(); // a gradient of the old shape or dtype no longer fits
}

void Tensor::register_hook(GradHook hook, std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("register_hook");
  WEFT_CHECK(requires_grad(), Value,
             "register_hook: cannot register a hook on a tensor that doesn't require gradient");
  autograd::RegisteredHook entry{impl_->outputNr, std::move(hook), loc};
  if (impl_->gradFn) {
    std::lock_guard<std::mutex> lock(impl_->gradFn->mutex);
    impl_->gradFn->pre_hooks.push_back(std::move(entry));
  } else {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->hooks.push_back(std::move(entry));
  }
}

bool Tensor::retains_grad() const {
  return defined() && impl_->retainsGrad && !is_leaf();
}
void Tensor::retain_grad(std::source_location loc) const {
  CallSite cs(loc);
  checkDefined("retain_grad");
  WEFT_CHECK(requires_grad(), Value,
             "retain_grad: can't retain_grad on Tensor that has requires_grad=False");
  if (is_leaf() || impl_->retainsGrad) return;
  impl_->retainsGrad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  register_hook([weak](const Tensor& g) {
    if (auto self = weak.lock()) {
      std::lock_guard<std::mutex> lock(self->mutex);
      self->grad = self->grad.defined() ? self->grad + g.detach() : g.detach();
    }
    return Tensor();
  });
}

} // namespace weft
