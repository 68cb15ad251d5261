// Writing and opening artifacts (weft/runtime/Artifact.h).
#include "weft/runtime/Artifact.h"

#include "ProgramProto.h"
#include "weft/runtime/AtomicFile.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Hash.h"
#include "weft/runtime/InputFile.h"
#include "weft/runtime/Interpreter.h"
#include "weft/runtime/SafetensorsFormat.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include <sys/mman.h>

namespace weft {
namespace {

static_assert(std::endian::native == std::endian::little, "the format is little-endian");

constexpr char kMagic[8] = {'W', 'E', 'F', 'T', 'A', 'R', 'T', '\0'};
constexpr uint64_t kAlign = 64;

/// The file's first 64 bytes.
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t reserved;
  uint64_t manifestOffset, manifestBytes, manifestChecksum;
  uint64_t stateOffset, stateBytes;
  uint64_t reserved2;
};
static_assert(sizeof(FileHeader) == kAlign);

uint64_t alignUp(uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

} // namespace

size_t ArtifactTensor::nbytes() const {
  std::optional<int64_t> n = byteSize(shape, dtype);
  return n ? static_cast<size_t>(*n) : 0;
}

namespace {

/// The buckets seen per program name (0: a program without a dynamic dimension).
using SeenPrograms = std::map<std::string, std::set<int64_t>, std::less<>>;

/// Programs may share a name only as buckets of one dynamic dimension: each dynamic, of a bucket
/// no other of the name has.
bool distinctProgram(SeenPrograms& seen, const std::string& name, const Executable& e) {
  const int64_t bucket = e.dynamic ? e.dynamic->bucket : 0;
  std::set<int64_t>& buckets = seen[name];
  if (!buckets.empty() && (bucket == 0 || buckets.contains(0) || buckets.contains(bucket)))
    return false;
  buckets.insert(bucket);
  return true;
}

/// Whether bucket `a` has `b`'s signature but for the rows of the dynamic dimension (both being
/// buckets of one program; a program without buckets only matches itself).
bool sameSignatureButRows(const Executable& a, const Executable& b) {
  if (&a == &b) return true;
  if (!a.dynamic || !b.dynamic) return false;
  const DynamicBatch &da = *a.dynamic, &db = *b.dynamic;
  if (da.dim != db.dim || da.arguments != db.arguments || da.outputAxes != db.outputAxes ||
      a.arguments.size() != b.arguments.size() || a.outputs.size() != b.outputs.size())
    return false;
  // Equal but along `axis`, where they hold rows * factor.
  auto same = [](const ExecutableValue& x, const ExecutableValue& y, int64_t axis) {
    if (x.dtype != y.dtype || x.shape.size() != y.shape.size()) return false;
    for (size_t d = 0; d < x.shape.size(); ++d)
      if (static_cast<int64_t>(d) != axis && x.shape[d] != y.shape[d]) return false;
    return true;
  };
  for (size_t i = 0; i + 1 < a.arguments.size(); ++i) { // the last is the row mask
    const bool batched = std::ranges::count(da.arguments, static_cast<int32_t>(i)) > 0;
    if (!same(a.arguments[i], b.arguments[i], batched ? da.dim : -1)) return false;
  }
  for (size_t i = 0; i < a.outputs.size(); ++i)
    if (!same(a.outputs[i], b.outputs[i], da.outputAxes[i].first)) return false;
  return true;
}

} // namespace

void writeArtifact(const std::string& path, std::span<const ArtifactProgram> programs,
                   std::span<const ArtifactTensor> state, const std::string& producer) {
  const char* op = "write_artifact";
  std::map<std::string_view, const ArtifactTensor*> byName;
  std::vector<safetensors::format::Entry> entries;
  for (const ArtifactTensor& t : state) {
    WEFT_CHECK(byteSize(t.shape, t.dtype).has_value(), Value, op, ": state tensor '", t.name,
               "' of shape ", shapeString(t.shape), " is too large");
    WEFT_CHECK(t.data != nullptr || t.nbytes() == 0, Value, op, ": state tensor '", t.name,
               "' has no data");
    byName.emplace(t.name, &t);
    entries.push_back({t.name, t.dtype, t.shape, 0, 0});
  }
  proto::Manifest m;
  m.set_producer(producer);
  SeenPrograms names;
  for (const ArtifactProgram& p : programs) {
    WEFT_CHECK(p.executable != nullptr && !p.name.empty(), Value, op,
               ": a program needs a name and an executable");
    const Executable& e = *p.executable;
    WEFT_CHECK(distinctProgram(names, p.name, e), Value, op, ": program '", p.name,
               "' appears twice (only buckets of a dynamic dimension share a name)");
    WEFT_CHECK(p.stateNames.size() == e.state.size(), Value, op, ": program '", p.name, "' reads ",
               e.state.size(), " state tensors, but ", p.stateNames.size(), " names are given");
    for (size_t i = 0; i < e.state.size(); ++i) {
      auto it = byName.find(p.stateNames[i]);
      WEFT_CHECK(it != byName.end(), Value, op, ": program '", p.name, "' reads state '",
                 p.stateNames[i], "', which is not among the state tensors written");
      WEFT_CHECK(it->second->dtype == e.state[i].dtype && it->second->shape == e.state[i].shape,
                 Value, op, ": program '", p.name, "' reads state '", p.stateNames[i], "' as ",
                 dtypeName(e.state[i].dtype), " ", shapeString(e.state[i].shape), ", given ",
                 dtypeName(it->second->dtype), " ", shapeString(it->second->shape));
    }
    proto::Program* pm = m.add_programs();
    toProto(e, *pm);
    pm->set_name(p.name);
    m.add_state_names()->mutable_names()->Add(p.stateNames.begin(), p.stateNames.end());
  }
  std::string manifest;
  WEFT_CHECK(m.SerializeToString(&manifest), Value, op,
             ": the manifest is past protobuf's 2 GiB (too much generated code?)");
  const std::string head = safetensors::format::writeHeader(entries, {}, op, kAlign);
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = Artifact::kFormatVersion;
  h.manifestOffset = kAlign;
  h.manifestBytes = manifest.size();
  h.manifestChecksum = fnv1a64(manifest.data(), manifest.size());
  h.stateOffset = alignUp(kAlign + manifest.size());
  h.stateBytes = head.size() + (entries.empty() ? 0 : entries.back().end);
  const std::string context = detail::concat(op, ": '", path, "': ");
  detail::AtomicFile file(path, context);
  file.write(&h, sizeof h);
  file.write(manifest.data(), manifest.size());
  const std::vector<char> zeros(kAlign, 0);
  file.write(zeros.data(), h.stateOffset - kAlign - manifest.size());
  file.write(head.data(), head.size());
  for (const safetensors::format::Entry& e : entries) // in the header's order
    if (e.end > e.begin) file.write(byName.at(e.name)->data, e.end - e.begin);
  file.commit();
}

std::shared_ptr<const Artifact> Artifact::open(const std::string& path) {
  const std::string ctx = detail::concat("load_artifact: '", path, "': ");
  std::shared_ptr<Artifact> a(new Artifact());
  a->path_ = path;
  detail::InputFile file(path, ctx);
  a->size_ = file.size();
  WEFT_CHECK(a->size_ >= sizeof(FileHeader), IO, ctx, "it is ", a->size_,
             " bytes long, too short for an artifact's 64-byte header");
  void* map = ::mmap(nullptr, a->size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
  WEFT_CHECK(map != MAP_FAILED, IO, ctx, "cannot map it: ", detail::errnoText());
  a->map_ = map;
  a->parse(static_cast<const uint8_t*>(map), ctx);
  return a;
}

std::shared_ptr<const Artifact> Artifact::fromMemory(std::span<const uint8_t> bytes,
                                                     const std::string& name) {
  const std::string ctx = detail::concat("load_artifact: '", name, "': ");
  WEFT_CHECK(bytes.size() >= sizeof(FileHeader), IO, ctx, "it is ", bytes.size(),
             " bytes long, too short for an artifact's 64-byte header");
  WEFT_CHECK(reinterpret_cast<uintptr_t>(bytes.data()) % kAlign == 0, Value, ctx,
             "its bytes must start at a 64-byte aligned address (its state is read in place)");
  std::shared_ptr<Artifact> a(new Artifact());
  a->path_ = name;
  a->size_ = bytes.size();
  a->parse(bytes.data(), ctx);
  return a;
}

void Artifact::parse(const uint8_t* bytes, const std::string& ctx) {
  FileHeader h;
  std::memcpy(&h, bytes, sizeof h);
  WEFT_CHECK(std::memcmp(h.magic, kMagic, sizeof kMagic) == 0, IO, ctx,
             "not a weft artifact (no WEFTART header)");
  WEFT_CHECK(h.version == kFormatVersion, IO, ctx, "format version ", h.version,
             " is not the version this runtime reads (", kFormatVersion,
             h.version > kFormatVersion ? "): written by a newer weft" : ")");
  const uint64_t size = size_;
  auto inside = [&](uint64_t offset, uint64_t n) { return offset <= size && n <= size - offset; };
  WEFT_CHECK(h.manifestOffset >= sizeof h && inside(h.manifestOffset, h.manifestBytes) &&
                 inside(h.stateOffset, h.stateBytes) && h.stateOffset % kAlign == 0 &&
                 h.stateOffset >= h.manifestOffset + h.manifestBytes,
             IO, ctx, "damaged or truncated (its sections lie outside its ", size, " bytes)");
  WEFT_CHECK(fnv1a64(bytes + h.manifestOffset, h.manifestBytes) == h.manifestChecksum, IO, ctx,
             "damaged (the manifest's checksum does not match)");
  WEFT_CHECK(h.manifestBytes <= static_cast<uint64_t>(std::numeric_limits<int>::max()), IO, ctx,
             "damaged (a manifest past protobuf's 2 GiB)");
  proto::Manifest m;
  WEFT_CHECK(m.ParseFromArray(bytes + h.manifestOffset, static_cast<int>(h.manifestBytes)), IO,
             ctx, "damaged (the manifest is not a Manifest message)");
  producer_ = m.producer();

  // The state: a safetensors section read in place.
  const uint8_t* section = bytes + h.stateOffset;
  const uint64_t headerBytes = safetensors::format::headerLength(section, h.stateBytes, ctx);
  const uint64_t dataStart = 8 + headerBytes;
  WEFT_CHECK((h.stateOffset + dataStart) % kAlign == 0, IO, ctx,
             "damaged (its state's data is not 64-byte aligned)");
  safetensors::format::Header sh = safetensors::format::parseHeader(
      std::string_view(reinterpret_cast<const char*>(section) + 8, headerBytes),
      h.stateBytes - dataStart, ctx);
  for (const safetensors::format::Entry& e : sh.entries) {
    safetensors::format::checkBools(e, section + dataStart + e.begin, ctx);
    state_.push_back({e.name, e.dtype, e.shape, section + dataStart + e.begin});
  }

  WEFT_CHECK(m.state_names_size() == m.programs_size(), IO, ctx,
             "damaged (", m.programs_size(), " programs but ", m.state_names_size(),
             " lists of their state)");
  SeenPrograms names;
  for (int i = 0; i < m.programs_size(); ++i) {
    const proto::Program& pm = m.programs(i);
    const std::string pctx = detail::concat(ctx, "program '", pm.name(), "': ");
    Program p{pm.name(), fromProto(pm, pctx), {}};
    WEFT_CHECK(!pm.name().empty() && distinctProgram(names, pm.name(), p.executable), IO, ctx,
               "damaged (program '", pm.name(), "' is unnamed or appears twice)");
    const auto& stateNames = m.state_names(i).names();
    p.stateNames.assign(stateNames.begin(), stateNames.end());
    WEFT_CHECK(p.stateNames.size() == p.executable.state.size(), IO, pctx, "damaged (it reads ",
               p.executable.state.size(), " state tensors but names ", p.stateNames.size(), ")");
    for (size_t k = 0; k < p.stateNames.size(); ++k) {
      const ArtifactTensor* t = findState(p.stateNames[k]);
      const ExecutableValue& want = p.executable.state[k];
      WEFT_CHECK(t != nullptr, IO, pctx, "damaged (its state '", p.stateNames[k],
                 "' is not in the file)");
      WEFT_CHECK(t->dtype == want.dtype && t->shape == want.shape, IO, pctx, "damaged (its state '",
                 p.stateNames[k], "' is ", dtypeName(t->dtype), " ", shapeString(t->shape),
                 " in the file but read as ", dtypeName(want.dtype), " ", shapeString(want.shape),
                 ")");
    }
    programs_.push_back(std::move(p));
  }
  // A program's buckets are one signature at several sizes: a session sizes the caller's buffers
  // from the largest and runs any of them.
  for (const std::string& name : programNames()) {
    const Executable& largest = find(name).executable;
    for (const Program& p : programs_)
      if (p.name == name && !sameSignatureButRows(p.executable, largest))
        WEFT_FAIL(IO, ctx, "program '", name, "': damaged (its bucket of ",
                  p.executable.dynamic ? p.executable.dynamic->bucket : 0,
                  " rows has another signature than its largest)");
  }
}

Artifact::~Artifact() {
  if (map_ != nullptr) ::munmap(map_, size_);
}

std::vector<std::string> Artifact::programNames() const {
  std::vector<std::string> out;
  for (const Program& p : programs_)
    if (std::find(out.begin(), out.end(), p.name) == out.end()) out.push_back(p.name);
  return out;
}

const Artifact::Program& Artifact::find(std::string_view name, int64_t bucket) const {
  const Program* found = nullptr;
  for (const Program& p : programs_) {
    if (p.name != name) continue;
    const int64_t b = p.executable.dynamic ? p.executable.dynamic->bucket : 0;
    if (b == bucket) return p;
    if (bucket == 0 && (!found || b > found->executable.dynamic->bucket)) found = &p;
  }
  if (found) return *found;
  std::string have;
  for (const std::string& n : programNames())
    have += (have.empty() ? "'" : ", '") + n + "'";
  WEFT_CHECK(bucket == 0, Value, "artifact '", path_, "' has no bucket of ", bucket,
             " rows for program '", name, "'");
  WEFT_FAIL(Value, "artifact '", path_, "' has no program '", name, "' (it has ",
            have.empty() ? "none" : have, ")");
}

const Executable& Artifact::program(std::string_view name, int64_t bucket) const {
  return find(name, bucket).executable;
}

std::vector<int64_t> Artifact::buckets(std::string_view name) const {
  find(name); // a ValueError where there is none
  std::vector<int64_t> out;
  for (const Program& p : programs_)
    if (p.name == name && p.executable.dynamic) out.push_back(p.executable.dynamic->bucket);
  std::sort(out.begin(), out.end());
  return out;
}

const std::vector<std::string>& Artifact::stateNames(std::string_view name, int64_t bucket) const {
  return find(name, bucket).stateNames;
}

const ArtifactTensor* Artifact::findState(std::string_view name) const {
  for (const ArtifactTensor& t : state_)
    if (t.name == name) return &t;
  return nullptr;
}

std::shared_ptr<const Executable> Artifact::loaded(std::string_view name, hal::Device& device,
                                                  int64_t bucket) const {
  const Program& p = find(name, bucket);
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_tuple(p.name, p.executable.dynamic ? p.executable.dynamic->bucket : 0,
                             static_cast<const hal::Device*>(&device));
  if (auto it = loaded_.find(key); it != loaded_.end()) return it->second;
  auto e = std::make_shared<Executable>(p.executable);
  e->loadCode(device);
  loaded_.emplace(key, e);
  return e;
}

void Artifact::write(const std::string& path, std::span<const ArtifactTensor> replaced) const {
  std::vector<ArtifactTensor> state = state_;
  for (const ArtifactTensor& r : replaced) {
    auto it = std::find_if(state.begin(), state.end(),
                           [&](const ArtifactTensor& t) { return t.name == r.name; });
    WEFT_CHECK(it != state.end(), Value, "write_artifact: '", path_, "' has no state '", r.name,
               "'");
    WEFT_CHECK(it->dtype == r.dtype && it->shape == r.shape, Value, "write_artifact: state '",
               r.name, "' is ", dtypeName(it->dtype), " ", shapeString(it->shape), ", given ",
               dtypeName(r.dtype), " ", shapeString(r.shape));
    it->data = r.data;
  }
  std::vector<ArtifactProgram> programs;
  for (const Program& p : programs_)
    programs.push_back({p.name, &p.executable, p.stateNames});
  writeArtifact(path, programs, state, producer_);
}

void writeSafetensors(const std::string& path, std::span<const ArtifactTensor> tensors,
                      const char* op) {
  std::vector<safetensors::format::Entry> entries;
  std::map<std::string_view, const ArtifactTensor*> byName;
  for (const ArtifactTensor& t : tensors) {
    entries.push_back({t.name, t.dtype, t.shape, 0, 0});
    byName.emplace(t.name, &t);
  }
  const std::string head = safetensors::format::writeHeader(entries, {}, op);
  detail::AtomicFile file(path, detail::concat(op, ": '", path, "': "));
  file.write(head.data(), head.size());
  for (const safetensors::format::Entry& e : entries) // in the header's order
    if (e.end > e.begin) file.write(byName.at(e.name)->data, e.end - e.begin);
  file.commit();
}

Session::Session(std::shared_ptr<const Artifact> artifact, std::string_view program,
                 hal::Device& device)
    : artifact_(std::move(artifact)), device_(device) {
  WEFT_CHECK(artifact_ != nullptr, Value, "Session: no artifact");
  exe_ = artifact_->loaded(program, device);
  names_ = artifact_->stateNames(program);
  arguments_ = exe_->arguments;
  if (exe_->dynamic) arguments_.pop_back(); // the row mask: run() makes it
  for (int64_t b : artifact_->buckets(program)) {
    Bucket bucket{b, artifact_->loaded(program, device, b), {}};
    // Every bucket reads the session's state by name: the largest bucket's, and what a bucket
    // keeps for itself (a constant sized by its rows).
    for (const std::string& name : artifact_->stateNames(program, b)) {
      auto at = std::find(names_.begin(), names_.end(), name);
      if (at == names_.end()) at = names_.insert(names_.end(), name);
      bucket.state.push_back(static_cast<size_t>(at - names_.begin()));
    }
    buckets_.push_back(std::move(bucket));
  }
  if (buckets_.empty()) { // no dynamic dimension: one program reading the state in order
    buckets_.push_back({0, exe_, {}});
    for (size_t k = 0; k < names_.size(); ++k)
      buckets_[0].state.push_back(k);
  }
  for (const std::string& name : names_) {
    const ArtifactTensor* t = artifact_->findState(name);
    // The artifact's memory, kept mapped while the buffer lives.
    std::shared_ptr<Storage> held = Storage::borrow(const_cast<void*>(t->data), t->nbytes(),
                                                    [keep = artifact_](void*) {});
    TensorRef ref = refInto(*held, 0, t->dtype, t->shape, contiguousStrides(t->shape));
    state_.push_back({std::move(held), ref});
    owned_.push_back(false);
  }
  // The mapping is read-only and on the host: a program writing its state, or a device that is
  // not the CPU, takes copies; so do random keys, moved on after every call.
  for (const Bucket& b : buckets_) {
    for (size_t k = 0; k < b.state.size(); ++k)
      if (!b.exe->plan.stateUpdates.empty() || &device != &hal::cpu()) own(b.state[k]);
    for (const RandomKey& k : b.exe->randomKeys)
      own(b.state[static_cast<size_t>(k.state)]);
  }
}

std::vector<int64_t> Session::buckets() const {
  std::vector<int64_t> out;
  for (const Bucket& b : buckets_)
    if (b.rows > 0) out.push_back(b.rows);
  return out;
}

void Session::own(size_t i) {
  if (owned_[i]) return;
  const TensorRef& r = state_[i].ref;
  Buffer b = allocateBuffer(device_, r.shape, r.dtype);
  const size_t n = static_cast<size_t>(r.numel()) * elementSize(r.dtype);
  if (n > 0) hal::transfer(*state_[i].storage, 0, *b.storage, 0, n);
  state_[i] = std::move(b);
  owned_[i] = true;
}

namespace {
size_t bytesOf(const ExecutableValue& v) {
  return static_cast<size_t>(numel(v.shape)) * elementSize(v.dtype);
}

/// A dense row-major `shape` seen as [outer, rows along `axis`, inner bytes].
struct RowLayout {
  size_t outer = 1, inner = 1;
  RowLayout(const Shape& shape, size_t axis, DType dtype) : inner(elementSize(dtype)) {
    for (size_t d = 0; d < shape.size(); ++d)
      if (d < axis)
        outer *= static_cast<size_t>(shape[d]);
      else if (d > axis)
        inner *= static_cast<size_t>(shape[d]);
  }
};
} // namespace

void Session::run(std::span<const void* const> args, std::span<void* const> outputs) {
  run(args, outputs, buckets_.back().rows);
}

void Session::run(std::span<const void* const> args, std::span<void* const> outputs,
                  int64_t rows) {
  const bool dynamic = buckets_.back().rows > 0;
  WEFT_CHECK(dynamic || rows == 0, Value,
             "run: the program has no dynamic dimension; call it without a row count");
  WEFT_CHECK(!dynamic || (rows >= 1 && rows <= buckets_.back().rows), Value, "run: ", rows,
             " rows, but the program's buckets hold 1 to ", buckets_.back().rows);
  const Bucket& b = *std::find_if(buckets_.begin(), buckets_.end(),
                                  [&](const Bucket& k) { return k.rows >= rows; });
  const Executable& e = *b.exe;
  WEFT_CHECK(args.size() == arguments_.size() && outputs.size() == e.outputs.size(), Value,
             "run: the program takes ", arguments_.size(), " arguments and gives ",
             e.outputs.size(), " outputs; given ", args.size(), " and ", outputs.size());
  std::vector<Buffer> in;
  std::vector<uint8_t> staging;
  for (size_t i = 0; i < args.size(); ++i) {
    const ExecutableValue& v = e.arguments[i];
    const size_t n = bytesOf(v);
    WEFT_CHECK(args[i] != nullptr || n == 0, Value, "run: argument ", i, " ('", v.name,
               "') is null");
    in.push_back(allocateBuffer(device_, v.shape, v.dtype));
    if (n == 0) continue;
    const void* src = args[i];
    if (dynamic && std::ranges::count(e.dynamic->arguments, static_cast<int32_t>(i)) > 0) {
      // `rows` rows given; the bucket's rows past them repeat the last (masked out).
      const size_t dim = static_cast<size_t>(e.dynamic->dim);
      RowLayout l(v.shape, dim, v.dtype);
      const size_t have = static_cast<size_t>(rows), want = static_cast<size_t>(b.rows);
      staging.resize(n);
      const auto* from = static_cast<const uint8_t*>(args[i]);
      for (size_t o = 0; o < l.outer; ++o) {
        uint8_t* to = staging.data() + o * want * l.inner;
        std::memcpy(to, from + o * have * l.inner, have * l.inner);
        for (size_t r = have; r < want; ++r)
          std::memcpy(to + r * l.inner, to + (have - 1) * l.inner, l.inner);
      }
      src = staging.data();
    }
    std::shared_ptr<Storage> host = Storage::borrow(const_cast<void*>(src), n);
    hal::transfer(*host, 0, *in.back().storage, 0, n);
  }
  if (dynamic) { // the row mask
    std::vector<uint8_t> mask(static_cast<size_t>(b.rows), 0);
    std::fill(mask.begin(), mask.begin() + rows, 1);
    in.push_back(allocateBuffer(device_, Shape{b.rows}, DType::Bool));
    std::shared_ptr<Storage> host = Storage::borrow(mask.data(), mask.size());
    hal::transfer(*host, 0, *in.back().storage, 0, mask.size());
  }
  std::vector<Buffer> state;
  for (size_t k : b.state)
    state.push_back(state_[k]);
  std::vector<Buffer> out = e.run(device_, in, state);
  for (size_t i = 0; i < out.size(); ++i) {
    const ExecutableValue& v = e.outputs[i];
    const size_t n = bytesOf(v);
    WEFT_CHECK(outputs[i] != nullptr || n == 0, Value, "run: output ", i, " ('", v.name,
               "') is null");
    if (n == 0) continue;
    // Outputs may be views: made dense on the device, then copied out.
    Buffer dense = allocateBuffer(device_, v.shape, v.dtype);
    device_.kernels().copyCast(out[i].ref, dense.ref);
    const auto [axis, factor] = dynamic ? e.dynamic->outputAxes[i] : std::pair<int32_t, int64_t>{-1, 1};
    if (axis < 0) {
      std::shared_ptr<Storage> host = Storage::borrow(outputs[i], n);
      hal::transfer(*dense.storage, 0, *host, 0, n);
      continue;
    }
    // The real rows alone.
    staging.resize(n);
    std::shared_ptr<Storage> host = Storage::borrow(staging.data(), n);
    hal::transfer(*dense.storage, 0, *host, 0, n);
    RowLayout l(v.shape, static_cast<size_t>(axis), v.dtype);
    const size_t keep = static_cast<size_t>(rows * factor), all = static_cast<size_t>(b.rows * factor);
    for (size_t o = 0; o < l.outer; ++o)
      std::memcpy(static_cast<uint8_t*>(outputs[i]) + o * keep * l.inner,
                  staging.data() + o * all * l.inner, keep * l.inner);
  }
  // The next call draws the numbers an eager loop's next iteration would.
  for (const RandomKey& k : e.randomKeys) {
    if (k.stride == 0) continue;
    Storage& key = *state_[b.state[static_cast<size_t>(k.state)]].storage;
    int64_t value[2];
    std::shared_ptr<Storage> host = Storage::borrow(value, sizeof value);
    hal::transfer(key, 0, *host, 0, sizeof value);
    value[1] += k.stride;
    hal::transfer(*host, 0, key, 0, sizeof value);
  }
}

size_t Session::stateIndex(std::string_view name, size_t nbytes) const {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) {
      const size_t n = static_cast<size_t>(state_[i].ref.numel()) * elementSize(state_[i].ref.dtype);
      WEFT_CHECK(nbytes == n, Value, "state '", name, "' holds ", n, " bytes, not ", nbytes);
      return i;
    }
  WEFT_FAIL(Value, "the program reads no state '", name, "'");
}

void Session::readState(std::string_view name, void* dst, size_t nbytes) const {
  const size_t i = stateIndex(name, nbytes);
  if (nbytes == 0) return;
  std::shared_ptr<Storage> host = Storage::borrow(dst, nbytes);
  hal::transfer(*state_[i].storage, 0, *host, 0, nbytes);
}

void Session::writeState(std::string_view name, const void* src, size_t nbytes) {
  const size_t i = stateIndex(name, nbytes);
  own(i);
  if (nbytes == 0) return;
  std::shared_ptr<Storage> host = Storage::borrow(const_cast<void*>(src), nbytes);
  hal::transfer(*host, 0, *state_[i].storage, 0, nbytes);
}

std::vector<uint8_t> Session::hostCopy(size_t i) const {
  const TensorRef& r = state_[i].ref;
  std::vector<uint8_t> bytes(static_cast<size_t>(r.numel()) * elementSize(r.dtype));
  if (bytes.empty()) return bytes;
  std::shared_ptr<Storage> host = Storage::borrow(bytes.data(), bytes.size());
  hal::transfer(*state_[i].storage, 0, *host, 0, bytes.size());
  return bytes;
}

void Session::save(const std::string& path) const {
  std::vector<std::vector<uint8_t>> bytes;
  bytes.reserve(state_.size());
  std::vector<ArtifactTensor> tensors;
  for (size_t i = 0; i < state_.size(); ++i) {
    bytes.push_back(hostCopy(i));
    tensors.push_back({names_[i], state_[i].ref.dtype, state_[i].ref.shape, bytes.back().data()});
  }
  if (path.ends_with(".safetensors"))
    writeSafetensors(path, tensors, "save_state");
  else
    artifact_->write(path, tensors);
}

} // namespace weft
