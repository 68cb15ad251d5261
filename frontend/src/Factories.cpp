// Tensor factories and random numbers.
#include "TensorImpl.h"
#include "Trace.h"
#include "weft/Functions.h"
#include "weft/runtime/Device.h"
#include "weft/runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace weft {
namespace {

void checkShape(const Shape& shape, DType dtype, const char* op) {
  for (int64_t s : shape)
    WEFT_CHECK(s >= 0, Shape, op, ": negative dimension ", s, " in shape ", shapeString(shape));
  checkedByteSize(shape, dtype, op);
}

/// `t` made as the options say: on their device (made on the CPU and moved, for factories that
/// do not make it there), requiring grad if they ask. A value a trace computes is where the graph
/// runs: asked for the CPU (the default), it stays there (a CPU scalar joins device ops there, as
/// eagerly); asked for another device, moving it is the error to() gives inside a trace.
Tensor finish(Tensor t, const TensorOptions& o) {
  const bool traced = t.impl()->trace != nullptr;
  if (t.device() != o.device_ && !(traced && o.device_.is_cpu())) t = t.to(o.device_);
  if (o.requires_grad_) t.requires_grad_(true);
  return t;
}

} // namespace

Tensor drawKey(Generator& g) {
  Tensor key = makeTensor({2}, DType::Int64);
  key.data_ptr<int64_t>()[0] = static_cast<int64_t>(g.seed());
  key.data_ptr<int64_t>()[1] = static_cast<int64_t>(g.next_offset());
  return key;
}

namespace {

Tensor randomOp(OpCode op, Shape shape, const TensorOptions& o, std::optional<Generator> gen,
                Attrs at) {
  checkShape(shape, o.dtype_, opName(op).data());
  Generator& g = gen ? *gen : default_generator();
  if (TraceContext* tc = currentTrace()) tc->rememberGenerator(g); // before this draw takes one
  at.set("shape", std::move(shape));
  at.set("dtype", o.dtype_);
  // The draw's key: (seed, offset). Traced, it is a state input of the graph (a tensor the trace
  // made), which each call of the compiled function replaces with the key of that call's draw.
  Tensor key = drawKey(g);
  // Drawn where the tensor goes when that device has the op's kernel (the key, 16 bytes, goes
  // there); made on the CPU and moved otherwise.
  Tensor t;
  if (!o.device_.is_cpu() && currentTrace() == nullptr &&
      hal::device(o.device_).kernels().find(op) != nullptr) {
    try {
      t = dispatch(op, {key.to(o.device_)}, at);
    } catch (const DTypeError&) { // a dtype the device has no shaders for (int64, float64)
    } catch (const DeviceError&) {
    }
  }
  if (!t.defined()) t = dispatch(op, {key}, at); // the same key: the same numbers
  if (TraceContext* tc = currentTrace()) { // named rng0, rng1, ... in the program's signature
    size_t index = tc->stateIndex.at(key.impl().get());
    size_t draws = static_cast<size_t>(std::count_if(
        tc->generatorEvents.begin(), tc->generatorEvents.end(),
        [](const GeneratorEvent& e) { return e.kind == GeneratorEvent::Kind::Draw; }));
    tc->graph.renameInput(tc->current[index], "rng" + std::to_string(draws));
    tc->recordGenerator({GeneratorEvent::Kind::Draw, g, index});
  }
  return finish(t, o);
}

} // namespace

Tensor empty(IntArrayRef shape, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  checkShape(shape, o.dtype_, "empty");
  return finish(makeTensor(shape, o.dtype_, false, o.device_), o);
}
Tensor zeros(IntArrayRef shape, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  checkShape(shape, o.dtype_, "zeros");
  return finish(fullOf(shape, 0, o.dtype_, o.device_), o);
}
Tensor full(IntArrayRef shape, Scalar value, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  // As torch.full: without a dtype, the fill value's kind decides (int64, bool, float32).
  DType t = o.has_dtype_ ? o.dtype_ : value.isFloatingPoint() ? kDefaultFloat : value.dtype();
  checkShape(shape, t, "full");
  return finish(fullOf(shape, value, t, o.device_), o);
}
Tensor ones(IntArrayRef shape, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  checkShape(shape, o.dtype_, "ones");
  return finish(fullOf(shape, 1, o.dtype_, o.device_), o);
}
Tensor zeros_like(const Tensor& t, std::source_location loc) {
  CallSite cs(loc);
  return zeros(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
}
Tensor ones_like(const Tensor& t, std::source_location loc) {
  CallSite cs(loc);
  return ones(t.sizes(), TensorOptions(t.dtype()).device(t.device()));
}
Tensor full_like(const Tensor& t, Scalar value, std::source_location loc) {
  CallSite cs(loc);
  return full(t.sizes(), value, TensorOptions(t.dtype()).device(t.device()));
}

Tensor arange(Scalar end, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  return arange(0, end, 1, o);
}

namespace {

/// A new 1-D tensor of `n` elements, element i set to `value(i)`: computed as V (double or int64),
/// then converted to `dtype` as casts convert (defined for NaN and out-of-range values).
template <typename V, typename Fn> Tensor filled1d(int64_t n, DType dtype, Fn value) {
  Tensor t = makeTensor({n}, DTypeOf<V>::value);
  V* p = t.data_ptr<V>();
  for (int64_t i = 0; i < n; ++i)
    p[i] = value(i);
  return t.to(dtype);
}

/// The number of elements of arange(start, end, step) over integers (step's sign agrees with the
/// range's), exact where doubles would round, or 2^63 when the range does not fit in int64.
double integerRangeCount(int64_t start, int64_t end, int64_t step) {
  int64_t span = 0;
  if (__builtin_sub_overflow(end, start, &span)) return 0x1p63;
  auto magnitude = [](int64_t v) {
    return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  };
  uint64_t length = magnitude(span), by = magnitude(step); // both < 2^64: no trap, no overflow
  return static_cast<double>(length / by + (length % by != 0 ? 1 : 0));
}

} // namespace

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  double s = start.toDouble(), e = end.toDouble(), st = step.toDouble();
  WEFT_CHECK(st != 0, Value, "arange: step must be nonzero");
  WEFT_CHECK(std::isfinite(s) && std::isfinite(e), Value, "arange: unsupported range: ", s, " -> ",
             e);
  WEFT_CHECK((st > 0 && e >= s) || (st < 0 && e <= s), Value,
             "arange: upper bound and larger bound inconsistent with step sign");
  bool integral = !start.isFloatingPoint() && !end.isFloatingPoint() && !step.isFloatingPoint();
  DType dtype = o.has_dtype_ ? o.dtype_ : integral ? DType::Int64 : kDefaultFloat;
  WEFT_CHECK(dtype != DType::Bool, DType, "arange: not implemented for bool tensors");
  double count = integral ? integerRangeCount(start.toLong(), end.toLong(), step.toLong())
                          : std::ceil((e - s) / st);
  WEFT_CHECK(count < 0x1p62, Value, "arange: the range [", s, ", ", e, ") in steps of ", st,
             " has too many elements (", count, ")");
  auto n = static_cast<int64_t>(count);
  Tensor t =
      integral
          ? filled1d<int64_t>(n, dtype,
                              [&](int64_t i) { // exact beyond 2^53
                                return start.toLong() + i * step.toLong();
                              })
          : filled1d<double>(n, dtype, [&](int64_t i) { return s + static_cast<double>(i) * st; });
  return finish(t, o);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions o,
                std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(steps >= 0, Value, "linspace: number of steps must be non-negative, got ", steps);
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0.0;
  // Symmetric from both ends, as PyTorch computes it.
  return finish(filled1d<double>(steps, o.dtype_,
                                 [&](int64_t i) {
                                   return i < steps / 2
                                              ? start + step * static_cast<double>(i)
                                              : end - step * static_cast<double>(steps - 1 - i);
                                 }),
                o);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  int64_t cols = m.value_or(n);
  WEFT_CHECK(n >= 0 && cols >= 0, Value, "eye: n and m must be non-negative, got ", n, " and ",
             cols);
  // Composed from ops, so it also works inside a traced function.
  return finish((arange(n).unsqueeze(1) == arange(cols)).to(o.dtype_), o);
}

namespace {
/// The (row, column) pairs of a row x col matrix on or below (`lower`) or on or above diagonal
/// `offset`, in row-major order, as a [2, n] tensor.
Tensor triangleIndices(int64_t row, int64_t col, int64_t offset, bool lower, TensorOptions o,
                       const char* op) {
  WEFT_CHECK(row >= 0 && col >= 0, Value, op, ": row and col must be non-negative, got ", row,
             " and ", col);
  WEFT_CHECK(o.dtype_ == DType::Int64 || o.dtype_ == DType::Int32, DType, op,
             ": expected an int32 or int64 dtype, got ", dtypeName(o.dtype_));
  // Row i keeps columns [0, i + offset] (lower) or [i + offset, col) (upper). Past -row or col
  // the offset changes nothing, so it is clamped there (no sum below can overflow), and only the
  // rows that keep a column are visited: each adds one pair at least, so the count check bounds
  // the loop.
  offset = std::clamp(offset, -row, col);
  auto sum = [](int64_t a, int64_t b) { // saturating: rows and cols may be near INT64_MAX
    int64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
  };
  const int64_t first = lower ? std::max<int64_t>(0, -offset) : 0;
  const int64_t end = col == 0 ? first
                      : lower  ? row
                               : std::clamp<int64_t>(sum(col, -offset), 0, row);
  auto span = [&](int64_t i) {
    return lower ? std::pair<int64_t, int64_t>{0, std::min(sum(sum(i, offset), 1), col)}
                 : std::pair<int64_t, int64_t>{std::max<int64_t>(sum(i, offset), 0), col};
  };
  constexpr int64_t kMaxPairs = int64_t{1} << 31;
  int64_t n = 0;
  for (int64_t i = first; i < end; ++i) {
    auto [from, to] = span(i);
    n += to - from;
    WEFT_CHECK(n <= kMaxPairs, Value, op, ": the result would hold more than 2^31 index pairs");
  }
  // The [2, n] result filled in place: row indices, then column indices.
  Tensor r = makeTensor({2, n}, o.dtype_);
  auto fill = [&](auto* p) {
    using T = std::remove_pointer_t<decltype(p)>;
    int64_t k = 0;
    for (int64_t i = first; i < end; ++i) {
      auto [from, to] = span(i);
      for (int64_t j = from; j < to; ++j, ++k) {
        p[k] = static_cast<T>(i);
        p[n + k] = static_cast<T>(j);
      }
    }
  };
  if (o.dtype_ == DType::Int64)
    fill(r.data_ptr<int64_t>());
  else
    fill(r.data_ptr<int32_t>());
  return finish(r, o);
}
} // namespace

Tensor tril_indices(int64_t row, int64_t col, int64_t offset, TensorOptions o,
                    std::source_location loc) {
  CallSite cs(loc);
  if (!o.has_dtype_) o.dtype(kInt64);
  return triangleIndices(row, col, offset, true, o, "tril_indices");
}
Tensor triu_indices(int64_t row, int64_t col, int64_t offset, TensorOptions o,
                    std::source_location loc) {
  CallSite cs(loc);
  if (!o.has_dtype_) o.dtype(kInt64);
  return triangleIndices(row, col, offset, false, o, "triu_indices");
}

Tensor from_blob(void* data, IntArrayRef shape, TensorOptions o, std::function<void(void*)> deleter,
                 std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(data != nullptr || numel(shape) == 0, Value, "from_blob: data is a null pointer");
  WEFT_CHECK(o.device_.is_cpu(), Device, "from_blob: the memory given is host memory, not ",
             o.device_.str(), "'s; make the tensor on the CPU and move it with .to(device)");
  auto bytes = static_cast<size_t>(checkedByteSize(shape, o.dtype_, "from_blob"));
  auto impl = std::make_shared<TensorImpl>(Storage::borrow(data, bytes, std::move(deleter)), shape,
                                           contiguousStrides(shape), 0, o.dtype_);
  impl->madeInTrace = inTracedFunction();
  return finish(Tensor(impl), o);
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape, std::source_location loc) {
  CallSite cs(loc);
  if (shape.empty() && values.size() != 1) shape = {static_cast<int64_t>(values.size())};
  checkShape(shape, DTypeOf<T>::value, "from_vector");
  WEFT_CHECK(numel(shape) == static_cast<int64_t>(values.size()), Shape,
             "from_vector: ", values.size(), " values do not fill shape ", shapeString(shape));
  Tensor t = makeTensor(shape, DTypeOf<T>::value);
  if (!values.empty()) {
    if constexpr (std::is_same_v<T, bool>) { // std::vector<bool> is packed
      bool* p = t.data_ptr<bool>();
      for (size_t i = 0; i < values.size(); ++i)
        p[i] = values[i];
    } else {
      std::copy(values.begin(), values.end(), t.data_ptr<T>());
    }
  }
  return t;
}
#define WEFT_X(name, type, str)                                                                    \
  template Tensor from_vector<type>(const std::vector<type>&, IntArrayRef, std::source_location);
WEFT_DTYPES(WEFT_X)
#undef WEFT_X

Tensor tensor(std::initializer_list<double> values, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  return finish(
      from_vector(std::vector<double>(values), {static_cast<int64_t>(values.size())}).to(o.dtype_),
      o);
}
Tensor tensor(std::initializer_list<int> values, TensorOptions o, std::source_location loc) {
  CallSite cs(loc);
  std::vector<int64_t> v(values.begin(), values.end());
  return finish(from_vector(v, {static_cast<int64_t>(v.size())}).to(o.dtype_), o);
}
Tensor tensor(std::initializer_list<bool> values, std::source_location loc) {
  CallSite cs(loc);
  return from_vector(std::vector<bool>(values), {static_cast<int64_t>(values.size())});
}

// ---- random ----

Generator::Generator(uint64_t seed) : state_(std::make_shared<State>(seed)) {
  if (TraceContext* tc = currentTrace()) // a stream made inside a compiled function starts anew
    tc->recordGenerator({GeneratorEvent::Kind::Seed, *this, 0, seed});
}

void Generator::manual_seed(uint64_t seed) {
  if (TraceContext* tc = currentTrace()) // redone on every call, between the same draws
    tc->recordGenerator({GeneratorEvent::Kind::Seed, *this, 0, seed});
  setState(seed, 0);
}

void Generator::set_offset(uint64_t offset) {
  if (TraceContext* tc = currentTrace())
    tc->recordGenerator({GeneratorEvent::Kind::Offset, *this, 0, offset});
  state_->offset.store(offset);
}

Generator& default_generator() {
  static Generator* gen = [] {
    TraceScope outside(nullptr); // made once for the process, even when first used in a trace
    return new Generator(0x5eed);
  }();
  return *gen;
}

void manual_seed(uint64_t seed) {
  default_generator().manual_seed(seed);
}

Tensor rand(IntArrayRef shape, TensorOptions o, std::optional<Generator> gen,
            std::source_location loc) {
  CallSite cs(loc);
  return randomOp(OpCode::Uniform, std::move(shape), o, std::move(gen),
                  Attrs{{"low", 0.0}, {"high", 1.0}});
}
Tensor randn(IntArrayRef shape, TensorOptions o, std::optional<Generator> gen,
             std::source_location loc) {
  CallSite cs(loc);
  return randomOp(OpCode::Normal, std::move(shape), o, std::move(gen),
                  Attrs{{"mean", 0.0}, {"std", 1.0}});
}
Tensor randint(int64_t low, int64_t high, IntArrayRef shape, TensorOptions o,
               std::optional<Generator> gen, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(low < high, Value, "randint: expected low < high, got low=", low, " high=", high);
  Tensor u =
      randomOp(OpCode::Uniform, std::move(shape), TensorOptions(DType::Float64), std::move(gen),
               Attrs{{"low", static_cast<double>(low)}, {"high", static_cast<double>(high)}});
  return finish(u.floor().clamp(std::nullopt, static_cast<double>(high - 1)).to(o.dtype_), o);
}
Tensor randint(int64_t high, IntArrayRef shape, TensorOptions o, std::optional<Generator> gen,
               std::source_location loc) {
  return randint(0, high, std::move(shape), o, std::move(gen), loc);
}
Tensor bernoulli(const Tensor& p, std::optional<Generator> gen, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(p.defined() && p.is_floating_point(), DType,
             "bernoulli: expected a floating-point probability tensor");
  NoGradGuard guard;
  Tensor u = randomOp(OpCode::Uniform, p.sizes(), TensorOptions(p.dtype()).device(p.device()),
                      std::move(gen), Attrs{{"low", 0.0}, {"high", 1.0}});
  return (u < p).to(p.dtype());
}
Tensor bernoulli(IntArrayRef shape, double p, TensorOptions o, std::optional<Generator> gen,
                 std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(p >= 0 && p <= 1, Value, "bernoulli: expected 0 <= p <= 1, got ", p);
  return finish(bernoulli(full(std::move(shape), p, TensorOptions(o.dtype_).device(o.device_)),
                          std::move(gen)),
                o);
}
Tensor randperm(int64_t n, std::optional<Generator> gen, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(n >= 0, Value, "randperm: n must be non-negative, got ", n);
  return rand({n}, DType::Float64, std::move(gen)).argsort();
}

Tensor& Tensor::uniform_(double from, double to, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("uniform_");
  WEFT_CHECK(is_floating_point(), DType, "uniform_: expected a floating tensor, got ",
             dtypeName(dtype()));
  WEFT_CHECK(from <= to, Value,
             "uniform_: expects to return a [from, to) range, but found from=", from, " > to=", to);
  return copy_(rand(sizes(), dtype()) * (to - from) + from);
}
Tensor& Tensor::normal_(double mean, double std, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("normal_");
  WEFT_CHECK(is_floating_point(), DType, "normal_: expected a floating tensor, got ",
             dtypeName(dtype()));
  WEFT_CHECK(std >= 0, Value, "normal_: expects std >= 0.0, but found std ", std);
  return copy_(randn(sizes(), dtype()) * std + mean);
}
Tensor& Tensor::bernoulli_(double p, std::source_location loc) {
  CallSite cs(loc);
  checkDefined("bernoulli_");
  // Drawn in float32 and converted: integer and bool tensors get 0s and 1s too.
  return copy_(weft::bernoulli(sizes(), p, isFloating(dtype()) ? dtype() : DType::Float32));
}
Tensor Tensor::bernoulli(std::source_location loc) const {
  CallSite cs(loc);
  return weft::bernoulli(*this);
}

Tensor multinomial(const Tensor& weights, int64_t numSamples, bool replacement,
                   std::optional<Generator> gen, std::source_location loc) {
  CallSite cs(loc);
  WEFT_CHECK(weights.defined(), Value, "multinomial: called with an undefined tensor");
  WEFT_CHECK(weights.dim() == 1 || weights.dim() == 2, Shape,
             "multinomial: prob_dist must be 1 or 2 dim, got ", weights.dim());
  WEFT_CHECK(weights.is_floating_point(), DType,
             "multinomial: only floating point probabilities are supported, got ",
             dtypeName(weights.dtype()));
  const int64_t categories = weights.size(-1);
  WEFT_CHECK(categories > 0, Value, "multinomial: cannot sample from an empty distribution");
  WEFT_CHECK(numSamples > 0, Value, "multinomial: cannot sample n_sample <= 0 samples");
  WEFT_CHECK(replacement || numSamples <= categories, Value,
             "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
             "replacement");
  Tensor w = weights.dim() == 1 ? weights.unsqueeze(0) : weights;
  const int64_t rows = w.size(0);
  if (currentTrace() == nullptr) { // the weights' values: checked eagerly (a trace would read them)
    WEFT_CHECK(!(w.lt(0).logical_or(w.isnan()).logical_or(w.isinf())).any().item<bool>(), Value,
               "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    WEFT_CHECK(w.sum(1).gt(0).all().item<bool>(), Value,
               "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
  }
  Tensor drawn;
  if (replacement) {
    // The first category whose cumulative probability exceeds a uniform draw (the last where
    // rounding leaves the total just below the draw).
    Tensor cdf = w.cumsum(1) / w.sum({1}, true);
    Tensor u = rand({rows, numSamples}, w.dtype(), gen);
    drawn = searchsorted(cdf, u, false, true).clamp_max(categories - 1);
  } else {
    // An exponential race: each category's time E / w (E ~ Exp(1)); the first num_samples to
    // finish, in order, are a draw without replacement (zero weights never finish).
    Tensor e = rand({rows, categories}, w.dtype(), gen).neg().log1p().neg();
    drawn = (e / w).neg().topk(numSamples, 1).second;
  }
  return weights.dim() == 1 ? drawn.squeeze(0) : drawn;
}
Tensor Tensor::multinomial(int64_t numSamples, bool replacement, std::source_location loc) const {
  CallSite cs(loc);
  return weft::multinomial(*this, numSamples, replacement);
}

} // namespace weft
