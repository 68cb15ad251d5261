// Saving, loading and running executables. The byte format: "WEFTEXE\0", a u32 version, a u64
// FNV-1a checksum of the rest, then the body in little-endian fields (lengths before sequences,
// ops and dtypes by name so that reordering the tables does not change the meaning of old bytes).
#include "weft/runtime/Executable.h"

#include "weft/runtime/ByteWriter.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Hash.h"

#include <bit>
#include <cstring>

namespace weft {
namespace {

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'E', 'X', 'E', '\0'};
constexpr uint32_t kVersion = 5;

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

uint64_t fnv1a(std::span<const uint8_t> bytes) {
  return fnv1a64(bytes.data(), bytes.size());
}

void writeValues(ByteWriter& w, const std::vector<ExecutableValue>& vs) {
  w.u64(vs.size());
  for (const ExecutableValue& v : vs) {
    w.str(v.name);
    w.dtype(v.dtype);
    w.ints(v.shape);
  }
}

/// Reads what ByteWriter wrote; anything short or out of range is an error naming the field.
class Reader {
public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T> T pod(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  uint64_t u64(const char* what) { return pod<uint64_t>(what); }
  int64_t i64(const char* what) { return pod<int64_t>(what); }
  /// A count of items at least `minBytes` each: never more than the bytes left could hold.
  size_t count(const char* what, size_t minBytes) {
    uint64_t n = u64(what);
    WEFT_CHECK(n <= (bytes_.size() - at_) / std::max<size_t>(minBytes, 1), IO,
               "executable: damaged bytes (", what, " count ", n, " runs past the end)");
    return static_cast<size_t>(n);
  }
  std::string str(const char* what) {
    size_t n = count(what, 1);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), n);
    at_ += n;
    return s;
  }
  std::vector<uint8_t> blob(const char* what) {
    size_t n = count(what, 1);
    std::vector<uint8_t> b(bytes_.begin() + static_cast<std::ptrdiff_t>(at_),
                           bytes_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ += n;
    return b;
  }
  Shape ints(const char* what) {
    Shape v(count(what, 8));
    for (int64_t& x : v)
      x = i64(what);
    return v;
  }
  std::vector<int32_t> slots(const char* what, int32_t numSlots) {
    std::vector<int32_t> v(count(what, 4));
    for (int32_t& x : v) {
      x = pod<int32_t>(what);
      WEFT_CHECK(x >= 0 && x < numSlots, IO, "executable: damaged bytes (", what, " slot ", x,
                 " outside 0..", numSlots - 1, ")");
    }
    return v;
  }
  DType dtype(const char* what) {
    std::string name = str(what);
    for (int i = 0; i < kNumDTypes; ++i)
      if (dtypeName(static_cast<DType>(i)) == name) return static_cast<DType>(i);
    WEFT_FAIL(IO, "executable: unknown dtype '", name, "' in ", what);
  }
  Shape shape(const char* what) {
    Shape s = ints(what);
    for (int64_t d : s)
      WEFT_CHECK(d >= 0, IO, "executable: damaged bytes (negative size in ", what, ")");
    return s;
  }
  Attrs attrs() {
    Attrs a;
    size_t n = count("attributes", 9);
    for (size_t i = 0; i < n; ++i) {
      std::string name = str("attribute name");
      auto kind = pod<uint8_t>("attribute kind");
      switch (kind) {
      case 0:
        a.set(name, i64("attribute"));
        break;
      case 1:
        a.set(name, pod<double>("attribute"));
        break;
      case 2:
        a.set(name, pod<uint8_t>("attribute") != 0);
        break;
      case 3:
        a.set(name, ints("attribute"));
        break;
      case 4:
        a.set(name, dtype("attribute"));
        break;
      case 5:
        a.set(name, str("attribute"));
        break;
      default:
        WEFT_FAIL(IO, "executable: damaged bytes (attribute '", name, "' of unknown kind ",
                  static_cast<int>(kind), ")");
      }
    }
    return a;
  }
  std::vector<ExecutableValue> values(const char* what) {
    std::vector<ExecutableValue> vs(count(what, 24));
    for (ExecutableValue& v : vs) {
      v.name = str(what);
      v.dtype = dtype(what);
      v.shape = shape(what);
    }
    return vs;
  }
  bool atEnd() const { return at_ == bytes_.size(); }

private:
  void need(size_t n, const char* what) {
    WEFT_CHECK(bytes_.size() - at_ >= n, IO, "executable: truncated bytes (reading ", what, ")");
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
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

std::vector<uint8_t> Executable::save() const {
  ByteWriter w;
  writeValues(w, arguments);
  writeValues(w, state);
  writeValues(w, outputs);
  w.pod(plan.numSlots);
  w.slots(plan.argumentSlots);
  w.slots(plan.stateSlots);
  w.slots(plan.outputSlots);
  w.u64(plan.stateUpdates.size());
  for (const auto& [index, slot] : plan.stateUpdates) {
    w.pod(index);
    w.pod(slot);
  }
  w.u64(plan.kernels.code.size());
  for (const hal::CodeObject& code : plan.kernels.code) {
    w.str(code.format);
    w.str(code.target);
    w.blob(code.bytes);
  }
  w.u64(plan.kernels.kernels.size());
  for (const hal::KernelInfo& k : plan.kernels.kernels) {
    w.str(k.symbol);
    w.i64(k.rows);
    w.i64(k.grain);
  }
  w.u64(plan.steps.size());
  for (const PlanStep& s : plan.steps) {
    w.str(opName(s.op));
    w.slots(s.inputs);
    w.pod(s.output);
    w.attrs(s.attrs);
    w.dtype(s.dtype);
    w.ints(s.shape);
    w.slots(s.release);
    w.pod(s.kernel);
    w.slots(s.kernelOutputs);
    w.u64(s.kernelTypes.size());
    for (const auto& [t, shape] : s.kernelTypes) {
      w.dtype(t);
      w.ints(shape);
    }
    w.ints(Shape(s.kernelInPlace.begin(), s.kernelInPlace.end()));
    w.ints(s.outputStrides);
    w.pod(static_cast<uint8_t>(s.afterEachSample));
  }
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  ByteWriter head;
  head.pod(kVersion);
  head.u64(fnv1a(w.bytes));
  out.insert(out.end(), head.bytes.begin(), head.bytes.end());
  out.insert(out.end(), w.bytes.begin(), w.bytes.end());
  return out;
}

Executable Executable::load(std::span<const uint8_t> bytes, hal::Device& device) {
  WEFT_CHECK(bytes.size() >= sizeof kMagic + 12 &&
                 std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0,
             IO, "executable: not a weft executable (no WEFTEXE header)");
  Reader head(bytes.subspan(sizeof kMagic, 12));
  auto version = head.pod<uint32_t>("version");
  WEFT_CHECK(version == kVersion, IO, "executable: format version ", version,
             " is not the version this runtime reads (", kVersion, ")");
  uint64_t checksum = head.u64("checksum");
  std::span<const uint8_t> body = bytes.subspan(sizeof kMagic + 12);
  WEFT_CHECK(fnv1a(body) == checksum, IO,
             "executable: damaged bytes (the checksum does not match the contents)");
  Reader r(body);
  Executable e;
  e.arguments = r.values("arguments");
  e.state = r.values("state");
  e.outputs = r.values("outputs");
  Plan& p = e.plan;
  p.numSlots = r.pod<int32_t>("slot count");
  WEFT_CHECK(p.numSlots >= 0, IO, "executable: damaged bytes (negative slot count)");
  p.argumentSlots = r.slots("argument slots", p.numSlots);
  p.stateSlots = r.slots("state slots", p.numSlots);
  p.outputSlots = r.slots("output slots", p.numSlots);
  WEFT_CHECK(p.argumentSlots.size() == e.arguments.size() &&
                 p.stateSlots.size() == e.state.size() && p.outputSlots.size() == e.outputs.size(),
             IO, "executable: damaged bytes (the signature and the plan disagree)");
  size_t updates = r.count("state updates", 8);
  for (size_t i = 0; i < updates; ++i) {
    auto index = r.pod<int32_t>("state update");
    auto slot = r.pod<int32_t>("state update");
    WEFT_CHECK(index >= 0 && static_cast<size_t>(index) < e.state.size() && slot >= 0 &&
                   slot < p.numSlots,
               IO, "executable: damaged bytes (a state update out of range)");
    p.stateUpdates.emplace_back(index, slot);
  }
  p.kernels.code.resize(r.count("code objects", 24));
  for (hal::CodeObject& code : p.kernels.code) {
    code.format = r.str("code format");
    code.target = r.str("code target");
    code.bytes = r.blob("code");
  }
  p.kernels.kernels.resize(r.count("kernels", 24));
  for (hal::KernelInfo& k : p.kernels.kernels) {
    k.symbol = r.str("kernel symbol");
    k.rows = r.i64("kernel rows");
    k.grain = r.i64("kernel grain");
    WEFT_CHECK(k.rows >= 0 && k.grain >= 1, IO, "executable: damaged bytes (kernel '", k.symbol,
               "' has ", k.rows, " rows and grain ", k.grain, ")");
  }
  p.steps.resize(r.count("steps", 40));
  for (PlanStep& s : p.steps) {
    std::string op = r.str("op");
    std::optional<OpCode> code = opFromName(op);
    WEFT_CHECK(code.has_value(), IO, "executable: unknown op '", op, "' (saved by a newer weft?)");
    s.op = *code;
    s.inputs = r.slots("step inputs", p.numSlots);
    s.output = r.pod<int32_t>("step output");
    s.attrs = r.attrs();
    s.dtype = r.dtype("step dtype");
    s.shape = r.shape("step shape");
    s.release = r.slots("step releases", p.numSlots);
    s.kernel = r.pod<int32_t>("step kernel");
    s.kernelOutputs = r.slots("kernel outputs", p.numSlots);
    size_t types = r.count("kernel output types", 16);
    for (size_t i = 0; i < types; ++i) {
      DType t = r.dtype("kernel output dtype");
      s.kernelTypes.emplace_back(t, r.shape("kernel output shape"));
    }
    Shape inPlace = r.ints("kernel in-place outputs");
    for (int64_t j : inPlace)
      WEFT_CHECK(j >= -1 && j < static_cast<int64_t>(s.inputs.size()), IO,
                 "executable: damaged bytes (a kernel writes over input ", j, " of ",
                 s.inputs.size(), ")");
    s.kernelInPlace.assign(inPlace.begin(), inPlace.end());
    s.outputStrides = r.ints("step output strides");
    s.afterEachSample = r.pod<uint8_t>("step epilogue flag") != 0;
    bool fused = s.kernel >= 0;
    WEFT_CHECK(s.outputStrides.empty() || (!fused && opInfo(s.op).kind == OpKind::MatMul &&
                                           isDenseLayout(s.shape, s.outputStrides)),
               IO, "executable: damaged bytes (step ", opName(s.op), " lays out its output with ",
               shapeString(s.outputStrides), ")");
    WEFT_CHECK(fused ? static_cast<size_t>(s.kernel) < p.kernels.kernels.size() &&
                           s.kernelTypes.size() == s.kernelOutputs.size() &&
                           s.kernelInPlace.size() == s.kernelOutputs.size()
                     : s.kernel == -1 && s.output >= 0 && s.output < p.numSlots,
               IO, "executable: damaged bytes (step ", opName(s.op), " writes nothing valid)");
    int arity = opInfo(s.op).numInputs;
    WEFT_CHECK(fused || arity < 0 || s.inputs.size() == static_cast<size_t>(arity), IO,
               "executable: damaged bytes (", opName(s.op), " with ", s.inputs.size(), " inputs)");
  }
  WEFT_CHECK(r.atEnd(), IO, "executable: damaged bytes (data after the end)");
  for (size_t i = 0; i < p.steps.size(); ++i)
    WEFT_CHECK(!p.steps[i].afterEachSample || isConvEpilogue(p, i), IO,
               "executable: damaged bytes (step ", i,
               " runs inside the step before it, which is not a conv writing what it reads)");
  planMemory(p); // derived from the steps, not saved
  e.loadCode(device);
  return e;
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
