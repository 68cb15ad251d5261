// The null device: host memory the host code above it cannot see, the CPU's kernels and generated
// code run on that memory, and counts of what it ran. It proves that the frontend, the passes and
// the interpreter reach memory only through the device a tensor is on.
#include "weft/runtime/Device.h"

#include "weft/runtime/Error.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace weft::hal {
namespace {

struct Counts {
  std::array<std::atomic<int64_t>, kNumOps> kernels{};
  std::atomic<int64_t> launches{0}, uploaded{0}, downloaded{0};
};
Counts& counts() {
  static Counts* c = new Counts(); // never destroyed: tensors may outlive statics
  return *c;
}

bool isNull(const Device& d) {
  return d.id().type() == DeviceType::Null;
}

/// Where a null device's buffer is in host memory: its handle is the address.
char* hostAddress(const Storage& s) {
  return reinterpret_cast<char*>(s.handle()) + s.offset();
}

/// `r` as the CPU kernels take it. Every operand must be a null device's memory: one that is not
/// reached a device it was not on.
TensorRef onHost(const TensorRef& r) {
  WEFT_INTERNAL_ASSERT(r.buffer != nullptr && isNull(r.buffer->device()),
                       "null device: an operand that is not in a null device's memory (",
                       r.buffer != nullptr ? r.buffer->device().id().str() : "no buffer", ")");
  TensorRef h = r;
  h.data = hostAddress(*r.buffer) + r.byteOffset;
  return h;
}

std::vector<TensorRef> onHost(std::span<const TensorRef> refs) {
  std::vector<TensorRef> out;
  out.reserve(refs.size());
  for (const TensorRef& r : refs)
    out.push_back(onHost(r));
  return out;
}

template <OpCode op>
void viaCpu(std::span<const TensorRef> in, const TensorRef& out, const Attrs& attrs) {
  counts().kernels[static_cast<size_t>(op)].fetch_add(1, std::memory_order_relaxed);
  std::vector<TensorRef> host = onHost(in);
  cpuKernels().find(op)(host, onHost(out), attrs);
}

void copyCastViaCpu(const TensorRef& src, const TensorRef& dst) {
  cpuKernels().copyCast(onHost(src), onHost(dst));
}

void fillViaCpu(const TensorRef& dst, double value) {
  cpuKernels().fill(onHost(dst), value);
}

const KernelRegistry& nullKernels() {
  static const KernelRegistry registry = [] {
    KernelRegistry r("null");
#define WEFT_UNARY(N, s, d, low, k, v) r.set(OpCode::N, &viaCpu<OpCode::N>);
#define WEFT_BINARY(N, s, r_, api, low, k, va, vb) r.set(OpCode::N, &viaCpu<OpCode::N>);
#define WEFT_OP(N, s, kind, n, v) r.set(OpCode::N, &viaCpu<OpCode::N>);
#include "weft/runtime/Ops.inc"
#undef WEFT_UNARY
#undef WEFT_BINARY
#undef WEFT_OP
    r.setCopyCast(&copyCastViaCpu);
    r.setFill(&fillViaCpu);
    return r;
  }();
  return registry;
}

class NullDevice final : public Device {
public:
  explicit NullDevice(int index) : index_(index) {
    limits_ = cpu().limits();
    limits_.name = id().str() + " (the CPU's kernels on memory the host does not see)";
  }
  weft::Device id() const override { return {DeviceType::Null, index_}; }
  const Limits& limits() const override { return limits_; }
  const KernelRegistry& kernels() const override { return nullKernels(); }

  std::shared_ptr<Storage> allocate(size_t nbytes, bool zero) override {
    std::shared_ptr<Storage> host = cpu().allocate(nbytes, zero);
    auto address = reinterpret_cast<uint64_t>(host->data());
    return Storage::onDevice(*this, address, 0, nbytes, nullptr, [host] {});
  }
  void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
            size_t nbytes) override {
    check(src, srcOffset, nbytes, "copy");
    check(dst, dstOffset, nbytes, "copy");
    std::memmove(hostAddress(dst) + dstOffset, hostAddress(src) + srcOffset, nbytes);
  }
  void upload(const void* host, Storage& dst, size_t dstOffset, size_t nbytes) override {
    check(dst, dstOffset, nbytes, "upload");
    if (nbytes > 0) std::memmove(hostAddress(dst) + dstOffset, host, nbytes);
    counts().uploaded.fetch_add(static_cast<int64_t>(nbytes));
  }
  void download(const Storage& src, size_t srcOffset, void* host, size_t nbytes) override {
    check(src, srcOffset, nbytes, "download");
    if (nbytes > 0) std::memmove(host, hostAddress(src) + srcOffset, nbytes);
    counts().downloaded.fetch_add(static_cast<int64_t>(nbytes));
  }
  std::string cannotRun(const CodeObject& code) const override { return cpu().cannotRun(code); }
  std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                         std::span<const KernelInfo> kernels) override {
    return cpu().load(code, kernels);
  }
  void launch(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
              std::span<const TensorRef> outputs) override {
    counts().launches.fetch_add(1);
    cpu().launch(code, kernel, onHost(inputs), onHost(outputs));
  }
  void synchronize() override {}

private:
  void check(const Storage& s, size_t offset, size_t nbytes, const char* what) const {
    WEFT_INTERNAL_ASSERT(&s.device() == this, "null device: ", what, " of a buffer on ",
                         s.device().id().str(), " asked of ", id().str());
    WEFT_CHECK(offset + nbytes <= s.nbytes(), Value, what, ": ", nbytes, " bytes at ", offset,
               " run past a buffer of ", s.nbytes(), " bytes");
  }
  int index_;
  Limits limits_;
};

} // namespace

Device& nullDevice(int index) {
  static NullDevice* devices[4] = {new NullDevice(0), new NullDevice(1), new NullDevice(2),
                                   new NullDevice(3)};
  WEFT_CHECK(index >= 0 && index < 4, Device, "null:", index,
             ": there are four null devices, null:0 to null:3");
  return *devices[index];
}

NullDeviceCounts nullDeviceCounts() {
  NullDeviceCounts c;
  for (size_t i = 0; i < kNumOps; ++i)
    c.kernels[i] = counts().kernels[i].load();
  c.launches = counts().launches.load();
  c.uploadedBytes = counts().uploaded.load();
  c.downloadedBytes = counts().downloaded.load();
  return c;
}

void resetNullDeviceCounts() {
  for (auto& k : counts().kernels)
    k.store(0);
  counts().launches.store(0);
  counts().uploaded.store(0);
  counts().downloaded.store(0);
}

} // namespace weft::hal
