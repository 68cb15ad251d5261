// Saving, loading and running executables. The byte format: "WEFTEXE\0", a u32 version, a u64
// FNV-1a checksum of the rest, then the executable as a Program message (ProgramProto.h).
#include "weft/runtime/Executable.h"

#include "ProgramProto.h"
#include "weft/runtime/AttrSchema.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Hash.h"
#include "weft/runtime/ShapeInference.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <variant>

namespace weft {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'E', 'X', 'E', '\0'};
constexpr uint32_t kVersion = 6;

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

// ---- Executable -> Program ----

void toProto(const std::vector<ExecutableValue>& vs,
             google::protobuf::RepeatedPtrField<proto::Value>& out) {
  for (const ExecutableValue& v : vs) {
    proto::Value* pv = out.Add();
    pv->set_name(v.name);
    pv->set_dtype(std::string(dtypeName(v.dtype)));
    pv->mutable_shape()->Add(v.shape.begin(), v.shape.end());
  }
}

void toProto(const Attrs& attrs, google::protobuf::RepeatedPtrField<proto::Attr>& out) {
  for (const auto& [name, value] : attrs.items()) {
    proto::Attr* a = out.Add();
    a->set_name(name);
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t>)
            a->set_int_value(v);
          else if constexpr (std::is_same_v<T, double>)
            a->set_float_value(v);
          else if constexpr (std::is_same_v<T, bool>)
            a->set_bool_value(v);
          else if constexpr (std::is_same_v<T, Shape>)
            a->mutable_ints_value()->mutable_values()->Add(v.begin(), v.end());
          else if constexpr (std::is_same_v<T, DType>)
            a->set_dtype_value(std::string(dtypeName(v)));
          else
            a->set_string_value(v);
        },
        value);
  }
}

// ---- Program -> Executable, every field checked ----

/// Reads a Program's fields; anything out of range is an IOError naming the field.
class Checker {
public:
  explicit Checker(std::string ctx) : ctx_(std::move(ctx)) {}
  [[noreturn]] void damaged(const std::string& what) const {
    WEFT_FAIL(IO, ctx_, "damaged bytes (", what, ")");
  }
  DType dtype(const std::string& name, const char* what) const {
    for (int i = 0; i < kNumDTypes; ++i)
      if (dtypeName(static_cast<DType>(i)) == name) return static_cast<DType>(i);
    WEFT_FAIL(IO, ctx_, "unknown dtype '", name, "' in ", what, " (saved by a newer weft?)");
  }
  Shape shape(const google::protobuf::RepeatedField<int64_t>& dims, const char* what) const {
    Shape s(dims.begin(), dims.end());
    for (int64_t d : s)
      if (d < 0) damaged(detail::concat("a negative size in ", what));
    if (!byteSize(s, DType::Float64)) damaged(detail::concat("a shape too large in ", what));
    return s;
  }
  std::vector<ExecutableValue> values(const google::protobuf::RepeatedPtrField<proto::Value>& vs,
                                      const char* what) const {
    std::vector<ExecutableValue> out;
    for (const proto::Value& v : vs)
      out.push_back({v.name(), dtype(v.dtype(), what), shape(v.shape(), what)});
    return out;
  }
  std::vector<int32_t> slots(const google::protobuf::RepeatedField<int32_t>& v, int32_t numSlots,
                             const char* what) const {
    for (int32_t x : v)
      if (x < 0 || x >= numSlots)
        damaged(detail::concat(what, " slot ", x, " outside 0..", numSlots - 1));
    return {v.begin(), v.end()};
  }
  Attrs attrs(const google::protobuf::RepeatedPtrField<proto::Attr>& as) const {
    Attrs a;
    for (const proto::Attr& x : as) {
      switch (x.value_case()) {
      case proto::Attr::kIntValue:
        a.set(x.name(), x.int_value());
        break;
      case proto::Attr::kFloatValue:
        a.set(x.name(), x.float_value());
        break;
      case proto::Attr::kBoolValue:
        a.set(x.name(), x.bool_value());
        break;
      case proto::Attr::kIntsValue:
        a.set(x.name(), Shape(x.ints_value().values().begin(), x.ints_value().values().end()));
        break;
      case proto::Attr::kDtypeValue:
        a.set(x.name(), dtype(x.dtype_value(), "an attribute"));
        break;
      case proto::Attr::kStringValue:
        a.set(x.name(), x.string_value());
        break;
      default:
        damaged("attribute '" + x.name() + "' has no value");
      }
    }
    return a;
  }

private:
  std::string ctx_;
};

std::string typeString(DType t, const Shape& s) {
  return std::string(dtypeName(t)) + " " + shapeString(s);
}

void checkValues(const char* what, const std::vector<ExecutableValue>& expected,
                 std::span<const Buffer> given) {
  WEFT_CHECK(given.size() == expected.size(), Value, "executable: expected ", expected.size(), " ",
             what, ", got ", given.size());
  for (size_t i = 0; i < given.size(); ++i) {
    const ExecutableValue& e = expected[i];
    const TensorRef& r = given[i].ref;
    WEFT_CHECK(r.dtype == e.dtype && r.shape == e.shape, Value, "executable: ", what, " ", i, " ('",
               e.name, "') must be ", typeString(e.dtype, e.shape), ", got ",
               typeString(r.dtype, r.shape));
  }
}

} // namespace

void toProto(const Executable& e, proto::Program& out) {
  const Plan& p = e.plan;
  toProto(e.arguments, *out.mutable_arguments());
  toProto(e.state, *out.mutable_state());
  toProto(e.outputs, *out.mutable_outputs());
  out.set_num_slots(p.numSlots);
  out.mutable_argument_slots()->Add(p.argumentSlots.begin(), p.argumentSlots.end());
  out.mutable_state_slots()->Add(p.stateSlots.begin(), p.stateSlots.end());
  out.mutable_output_slots()->Add(p.outputSlots.begin(), p.outputSlots.end());
  for (const auto& [index, slot] : p.stateUpdates) {
    proto::StateUpdate* u = out.add_state_updates();
    u->set_state(index);
    u->set_slot(slot);
  }
  for (const hal::CodeObject& code : p.kernels.code) {
    proto::CodeObject* c = out.add_code();
    c->set_format(code.format);
    c->set_target(code.target);
    c->set_payload(code.bytes.data(), code.bytes.size());
    c->mutable_symbols()->Add(code.symbols.begin(), code.symbols.end());
  }
  for (const hal::KernelInfo& k : p.kernels.kernels) {
    proto::Kernel* pk = out.add_kernels();
    pk->set_symbol(k.symbol);
    pk->set_rows(k.rows);
    pk->set_grain(k.grain);
  }
  for (const PlanStep& s : p.steps) {
    proto::Step* ps = out.add_steps();
    ps->set_op(std::string(opName(s.op)));
    ps->mutable_inputs()->Add(s.inputs.begin(), s.inputs.end());
    ps->set_output(s.output);
    toProto(s.attrs, *ps->mutable_attrs());
    ps->set_dtype(std::string(dtypeName(s.dtype)));
    ps->mutable_shape()->Add(s.shape.begin(), s.shape.end());
    ps->mutable_release()->Add(s.release.begin(), s.release.end());
    ps->set_kernel(s.kernel);
    ps->mutable_kernel_outputs()->Add(s.kernelOutputs.begin(), s.kernelOutputs.end());
    for (const auto& [t, shape] : s.kernelTypes) {
      proto::Value* v = ps->add_kernel_types();
      v->set_dtype(std::string(dtypeName(t)));
      v->mutable_shape()->Add(shape.begin(), shape.end());
    }
    ps->mutable_kernel_in_place()->Add(s.kernelInPlace.begin(), s.kernelInPlace.end());
    ps->set_after_each_sample(s.afterEachSample);
    ps->mutable_output_strides()->Add(s.outputStrides.begin(), s.outputStrides.end());
  }
  out.set_arena_bytes(p.arenaBytes);
  out.mutable_arena_offsets()->Add(p.arenaOffset.begin(), p.arenaOffset.end());
  out.set_ir(e.ir);
  for (const RandomKey& k : e.randomKeys) {
    proto::RandomKey* r = out.add_random_keys();
    r->set_state(k.state);
    r->set_stride(k.stride);
  }
  if (e.dynamic) {
    proto::DynamicBatch* d = out.mutable_dynamic();
    d->set_dim(e.dynamic->dim);
    d->set_bucket(e.dynamic->bucket);
    d->mutable_arguments()->Add(e.dynamic->arguments.begin(), e.dynamic->arguments.end());
    for (const auto& [axis, factor] : e.dynamic->outputAxes) {
      d->add_output_axes(axis);
      d->add_output_factors(factor);
    }
  }
}

namespace {

/// Checks a bucket of a dynamic dimension against the signature (IOErrors through `c`).
DynamicBatch dynamicOf(const proto::DynamicBatch& m, const Executable& e, Checker& c) {
  DynamicBatch d{m.dim(), m.bucket(), {m.arguments().begin(), m.arguments().end()}, {}};
  const bool mask = !e.arguments.empty() && e.arguments.back().dtype == DType::Bool &&
                    e.arguments.back().shape == Shape{d.bucket};
  if (d.bucket <= 0 || d.dim < 0 || !mask || d.arguments.empty() ||
      m.output_axes_size() != static_cast<int>(e.outputs.size()) ||
      m.output_factors_size() != m.output_axes_size())
    c.damaged("a dynamic dimension that does not fit its signature");
  for (int32_t i : d.arguments) {
    const bool fits = i >= 0 && static_cast<size_t>(i) + 1 < e.arguments.size() &&
                      static_cast<int64_t>(e.arguments[static_cast<size_t>(i)].shape.size()) >
                          d.dim &&
                      e.arguments[static_cast<size_t>(i)].shape[static_cast<size_t>(d.dim)] ==
                          d.bucket;
    if (!fits) c.damaged(detail::concat("argument ", i, " has no dimension of the bucket's size"));
  }
  for (int i = 0; i < m.output_axes_size(); ++i) {
    const int32_t axis = m.output_axes(i);
    const int64_t factor = m.output_factors(i);
    const Shape& shape = e.outputs[static_cast<size_t>(i)].shape;
    const bool fits = axis == -1 || (axis >= 0 && static_cast<size_t>(axis) < shape.size() &&
                                     factor >= 1 && shape[static_cast<size_t>(axis)] % factor == 0 &&
                                     shape[static_cast<size_t>(axis)] / factor == d.bucket);
    if (!fits) c.damaged(detail::concat("output ", i, " has no dimension of the bucket's rows"));
    d.outputAxes.emplace_back(axis, factor);
  }
  return d;
}

/// Checks that the steps compute what they declare, as the compiler made them: each reads slots
/// written before it (or the arguments and state), writes each slot once, and an interpreter
/// step's declared output type is the one its op's rules give its inputs and attributes (else a
/// crafted file could size a buffer smaller than its kernel writes); a fused kernel writes over an
/// input only of its own type; the outputs and updated state have the signature's types.
void checkTypes(const Executable& e, const Checker& c) {
  const Plan& p = e.plan;
  std::vector<std::optional<TensorType>> slot(static_cast<size_t>(p.numSlots));
  auto at = [&](int32_t s) -> std::optional<TensorType>& { return slot[static_cast<size_t>(s)]; };
  auto define = [&](int32_t s, TensorType t, const std::string& who) {
    if (at(s)) c.damaged(detail::concat(who, " writes slot ", s, ", which holds a value already"));
    at(s) = std::move(t);
  };
  for (size_t i = 0; i < e.arguments.size(); ++i)
    define(p.argumentSlots[i], {e.arguments[i].dtype, e.arguments[i].shape}, "an argument");
  for (size_t i = 0; i < e.state.size(); ++i)
    define(p.stateSlots[i], {e.state[i].dtype, e.state[i].shape}, "a state input");
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const PlanStep& s = p.steps[i];
    const std::string who = detail::concat("step ", i, " (", opName(s.op), ")");
    std::vector<TensorType> inputs;
    for (int32_t in : s.inputs) {
      if (!at(in)) c.damaged(detail::concat(who, " reads slot ", in, " before anything writes it"));
      inputs.push_back(*at(in));
    }
    if (s.kernel >= 0) {
      for (size_t k = 0; k < s.kernelOutputs.size(); ++k) {
        TensorType t{s.kernelTypes[k].first, s.kernelTypes[k].second};
        const int32_t over = s.kernelInPlace[k];
        if (over >= 0 && inputs[static_cast<size_t>(over)] != t)
          c.damaged(detail::concat(who, " writes ", weft::typeString(t), " over its input of ",
                                   weft::typeString(inputs[static_cast<size_t>(over)])));
        define(s.kernelOutputs[k], std::move(t), who);
      }
      continue;
    }
    if (std::optional<Diagnostic> bad = checkAttrs(s.op, s.attrs))
      c.damaged(detail::concat(who, ": ", bad->message));
    Result<TensorType> r = inferType(s.op, inputs, s.attrs);
    if (!r) c.damaged(detail::concat(who, ": ", r.diagnostic().message));
    const TensorType declared{s.dtype, s.shape};
    if (r.value() != declared)
      c.damaged(detail::concat(who, " declares ", weft::typeString(declared), " where its inputs give ",
                               weft::typeString(r.value())));
    define(s.output, declared, who);
  }
  auto check = [&](int32_t s, const ExecutableValue& v, const char* what) {
    const TensorType want{v.dtype, v.shape};
    if (!at(s) || *at(s) != want)
      c.damaged(detail::concat(what, " '", v.name, "' of ", weft::typeString(want), " is ",
                               at(s) ? weft::typeString(*at(s)) : "never written"));
  };
  for (size_t i = 0; i < e.outputs.size(); ++i)
    check(p.outputSlots[i], e.outputs[i], "output");
  for (const auto& [state, s] : p.stateUpdates)
    check(s, e.state[static_cast<size_t>(state)], "the update of state");
}

} // namespace

Executable fromProto(const proto::Program& m, const std::string& ctx) {
  Checker c(ctx);
  Executable e;
  e.arguments = c.values(m.arguments(), "arguments");
  e.state = c.values(m.state(), "state");
  e.outputs = c.values(m.outputs(), "outputs");
  e.ir = m.ir();
  Plan& p = e.plan;
  p.numSlots = m.num_slots();
  if (p.numSlots < 0) c.damaged("a negative slot count");
  // The plan's tables hold an entry per slot: a count far past the message's size would make
  // them allocate without bound (a real plan's slots are values its steps name, a few per step).
  const size_t bound = std::max<size_t>(1024, m.ByteSizeLong());
  if (static_cast<size_t>(p.numSlots) > bound)
    c.damaged(detail::concat(p.numSlots, " slots in a message of ", m.ByteSizeLong(), " bytes"));
  p.argumentSlots = c.slots(m.argument_slots(), p.numSlots, "argument");
  p.stateSlots = c.slots(m.state_slots(), p.numSlots, "state");
  p.outputSlots = c.slots(m.output_slots(), p.numSlots, "output");
  if (p.argumentSlots.size() != e.arguments.size() || p.stateSlots.size() != e.state.size() ||
      p.outputSlots.size() != e.outputs.size())
    c.damaged("the signature and the plan disagree");
  for (const proto::StateUpdate& u : m.state_updates()) {
    if (u.state() < 0 || static_cast<size_t>(u.state()) >= e.state.size() || u.slot() < 0 ||
        u.slot() >= p.numSlots)
      c.damaged("a state update out of range");
    p.stateUpdates.emplace_back(u.state(), u.slot());
  }
  for (const proto::RandomKey& k : m.random_keys()) {
    const bool valid = k.state() >= 0 && static_cast<size_t>(k.state()) < e.state.size() &&
                       k.stride() >= 0 &&
                       e.state[static_cast<size_t>(k.state())] ==
                           ExecutableValue{e.state[static_cast<size_t>(k.state())].name,
                                           DType::Int64, Shape{2}};
    if (!valid) c.damaged("a random key that is not an int64 [2] state input");
    e.randomKeys.push_back({k.state(), k.stride()});
  }
  if (m.has_dynamic()) e.dynamic = dynamicOf(m.dynamic(), e, c);
  for (const proto::CodeObject& code : m.code()) {
    if (code.symbols_size() != 0 && code.symbols_size() != m.kernels_size())
      c.damaged(detail::concat("a code object names ", code.symbols_size(), " kernels of ",
                               m.kernels_size()));
    p.kernels.code.push_back(
        {code.format(), code.target(),
         std::vector<uint8_t>(code.payload().begin(), code.payload().end()),
         std::vector<std::string>(code.symbols().begin(), code.symbols().end())});
  }
  for (const proto::Kernel& k : m.kernels()) {
    if (k.rows() < 0 || k.grain() < 1)
      c.damaged(detail::concat("kernel '", k.symbol(), "' has ", k.rows(), " rows and grain ",
                               k.grain()));
    p.kernels.kernels.push_back({k.symbol(), k.rows(), k.grain()});
  }
  for (const proto::Step& ms : m.steps()) {
    PlanStep s;
    std::optional<OpCode> code = opFromName(ms.op());
    WEFT_CHECK(code.has_value(), IO, ctx, "unknown op '", ms.op(), "' (saved by a newer weft?)");
    s.op = *code;
    const std::string name(opName(s.op));
    s.inputs = c.slots(ms.inputs(), p.numSlots, "step input");
    s.output = ms.output();
    s.attrs = c.attrs(ms.attrs());
    s.dtype = c.dtype(ms.dtype(), "a step");
    s.shape = c.shape(ms.shape(), "a step");
    s.release = c.slots(ms.release(), p.numSlots, "step release");
    s.kernel = ms.kernel();
    s.kernelOutputs = c.slots(ms.kernel_outputs(), p.numSlots, "kernel output");
    for (const proto::Value& v : ms.kernel_types())
      s.kernelTypes.emplace_back(c.dtype(v.dtype(), "a kernel output"),
                                 c.shape(v.shape(), "a kernel output"));
    for (int32_t j : ms.kernel_in_place())
      if (j < -1 || j >= static_cast<int64_t>(s.inputs.size()))
        c.damaged(detail::concat("a kernel writes over input ", j, " of ", s.inputs.size()));
    s.kernelInPlace.assign(ms.kernel_in_place().begin(), ms.kernel_in_place().end());
    s.outputStrides.assign(ms.output_strides().begin(), ms.output_strides().end());
    s.afterEachSample = ms.after_each_sample();
    const bool fused = s.kernel >= 0;
    if (!s.outputStrides.empty() && (fused || opInfo(s.op).kind != OpKind::MatMul ||
                                     !isDenseLayout(s.shape, s.outputStrides)))
      c.damaged(detail::concat("step ", name, " lays out its output with ",
                               shapeString(s.outputStrides)));
    if (fused ? !(static_cast<size_t>(s.kernel) < p.kernels.kernels.size() &&
                  s.kernelTypes.size() == s.kernelOutputs.size() &&
                  s.kernelInPlace.size() == s.kernelOutputs.size())
              : !(s.kernel == -1 && s.output >= 0 && s.output < p.numSlots))
      c.damaged("step " + name + " writes nothing valid");
    const int arity = opInfo(s.op).numInputs;
    if (!fused && arity >= 0 && s.inputs.size() != static_cast<size_t>(arity))
      c.damaged(detail::concat(name, " with ", s.inputs.size(), " inputs"));
    p.steps.push_back(std::move(s));
  }
  for (size_t i = 0; i < p.steps.size(); ++i)
    if (p.steps[i].afterEachSample && !isConvEpilogue(p, i))
      c.damaged(detail::concat("step ", i,
                               " runs inside the step before it, which is not a conv writing what "
                               "it reads"));
  checkTypes(e, c);
  // The buffer plan is derived from the steps: a saved one must be the one they give.
  planMemory(p);
  if (!m.arena_offsets().empty() &&
      (m.arena_bytes() != p.arenaBytes ||
       !std::equal(m.arena_offsets().begin(), m.arena_offsets().end(), p.arenaOffset.begin(),
                   p.arenaOffset.end())))
    c.damaged("its buffer plan is not the one its steps give");
  return e;
}

std::vector<uint8_t> Executable::save() const {
  proto::Program m;
  toProto(*this, m);
  std::string body;
  WEFT_CHECK(m.SerializeToString(&body), Value,
             "executable: too large to save (protobuf messages stop at 2 GiB)");
  std::vector<uint8_t> out(sizeof kMagic + 12 + body.size());
  const uint64_t checksum = fnv1a64(body.data(), body.size());
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  std::memcpy(out.data() + sizeof kMagic, &kVersion, 4);
  std::memcpy(out.data() + sizeof kMagic + 4, &checksum, 8);
  std::memcpy(out.data() + sizeof kMagic + 12, body.data(), body.size());
  return out;
}

Executable Executable::load(std::span<const uint8_t> bytes, hal::Device& device) {
  WEFT_CHECK(bytes.size() >= sizeof kMagic + 12 &&
                 std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
             IO, "executable: not a weft executable (no WEFTEXE header)");
  uint32_t version = 0;
  uint64_t checksum = 0;
  std::memcpy(&version, bytes.data() + sizeof kMagic, 4);
  std::memcpy(&checksum, bytes.data() + sizeof kMagic + 4, 8);
  WEFT_CHECK(version == kVersion, IO, "executable: format version ", version,
             " is not the version this runtime reads (", kVersion, ")");
  std::span<const uint8_t> body = bytes.subspan(sizeof kMagic + 12);
  WEFT_CHECK(fnv1a64(body.data(), body.size()) == checksum, IO,
             "executable: damaged bytes (the checksum does not match the contents)");
  WEFT_CHECK(body.size() <= static_cast<size_t>(std::numeric_limits<int>::max()), IO,
             "executable: damaged bytes (past protobuf's 2 GiB)");
  proto::Program m;
  WEFT_CHECK(m.ParseFromArray(body.data(), static_cast<int>(body.size())), IO,
             "executable: damaged bytes (not a Program message)");
  Executable e = fromProto(m, "executable: ");
  e.loadCode(device);
  return e;
}

namespace {
/// `e` saved without its generated code and its kernels' names, to compare programs built for
/// different targets.
std::vector<uint8_t> withoutCode(const Executable& e) {
  Executable copy = e;
  copy.plan.kernels.code.clear();
  copy.plan.kernels.loaded.reset();
  copy.plan.kernels.loadedOn = nullptr;
  for (hal::KernelInfo& k : copy.plan.kernels.kernels)
    k.symbol.clear(); // named per target
  copy.ir.clear();
  return copy.save();
}
} // namespace

void Executable::addCodeFrom(const Executable& other) {
  WEFT_CHECK(withoutCode(*this) == withoutCode(other), Value,
             "the program built for another target differs beyond its code (choices made by "
             "measuring this machine, as the 'host' target's GEMMs are, cannot join others)");
  for (hal::CodeObject c : other.plan.kernels.code) {
    if (c.symbols.empty())
      for (const hal::KernelInfo& k : other.plan.kernels.kernels)
        c.symbols.push_back(k.symbol);
    plan.kernels.code.push_back(std::move(c));
  }
}

void Executable::loadCode(hal::Device& device) {
  checkKernelsOn(plan, device);
  plan.kernels.load(device);
}

std::vector<Buffer> Executable::run(hal::Device& device, std::span<const Buffer> args,
                                    std::span<const Buffer> stateValues) const {
  WEFT_CHECK(plan.kernels.kernels.empty() || plan.kernels.loadedOn == &device, Device,
             "run: the executable's code is loaded on ",
             plan.kernels.loadedOn != nullptr ? plan.kernels.loadedOn->id().str() : "no device",
             ", not on ", device.id().str(), " (loadCode(device) loads it there)");
  checkValues("argument", arguments, args);
  checkValues("state tensor", state, stateValues);
  return runPlan(device, plan, args, stateValues);
}

} // namespace weft
