// The CPU device: host memory from the caching allocator, generated code as ELF shared objects
// loaded with the system's dynamic loader, launches split over the thread pool.
#include "weft/runtime/Device.h"

#include "weft/runtime/Error.h"
#include "weft/runtime/ThreadPool.h"

#include <array>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <sstream>
#include <sys/mman.h>
#include <unistd.h>

namespace weft::hal {

std::string hostArchitecture() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

namespace {

/// Whether the host CPU has the x86 feature LLVM calls `name`; nullopt for a feature this table
/// does not know (taken on trust).
std::optional<bool> hostHas(std::string_view name) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports takes only literals: one row per feature LLVM names the same way.
#define WEFT_FEATURE(llvmName, gccName)                                                            \
  if (name == llvmName) return __builtin_cpu_supports(gccName) != 0;
  WEFT_FEATURE("sse4.2", "sse4.2")
  WEFT_FEATURE("popcnt", "popcnt")
  WEFT_FEATURE("avx", "avx")
  WEFT_FEATURE("avx2", "avx2")
  WEFT_FEATURE("fma", "fma")
  WEFT_FEATURE("f16c", "f16c")
  WEFT_FEATURE("bmi", "bmi")
  WEFT_FEATURE("bmi2", "bmi2")
  WEFT_FEATURE("avx512f", "avx512f")
  WEFT_FEATURE("avx512bw", "avx512bw")
  WEFT_FEATURE("avx512dq", "avx512dq")
  WEFT_FEATURE("avx512vl", "avx512vl")
  WEFT_FEATURE("avx512cd", "avx512cd")
  WEFT_FEATURE("avx512vnni", "avx512vnni")
  WEFT_FEATURE("avx512bf16", "avx512bf16")
  WEFT_FEATURE("avx512vbmi", "avx512vbmi")
#undef WEFT_FEATURE
#endif
  (void)name;
  return std::nullopt;
}

} // namespace

std::string cpuTargetMismatch(const std::string& target) {
  std::istringstream words(target);
  std::string arch, cpu, features;
  words >> arch >> cpu >> features;
  if (arch != hostArchitecture())
    return "it was built for " + (arch.empty() ? std::string("no architecture") : arch) +
           ", this machine is " + hostArchitecture();
  std::string missing;
  std::istringstream list(features);
  for (std::string f; std::getline(list, f, ',');)
    if (f.size() > 1 && f[0] == '+' && hostHas(f.substr(1)) == false)
      missing += (missing.empty() ? "" : ", ") + f.substr(1);
  if (!missing.empty())
    return "it was built for CPU '" + cpu + "' and needs " + missing + ", which this CPU lacks";
  return "";
}

namespace {

/// A shared object loaded from memory: written to an anonymous memory file and opened by the
/// dynamic loader, so nothing touches the file system. The file stays open while the object is
/// loaded: the loader knows objects by path, and a reused descriptor number would name another.
class SharedObject final : public LoadedCode {
public:
  using Entry = void (*)(void**);
  SharedObject(void* handle, int fd) : handle_(handle), fd_(fd) {}
  ~SharedObject() override {
    dlclose(handle_);
    close(fd_);
  }
  size_t numKernels() const override { return kernels_.size(); }
  /// Resolves the entry of each kernel; false (naming the missing symbol) if one is absent.
  bool resolve(std::span<const KernelInfo> kernels, std::string& missing) {
    for (const KernelInfo& k : kernels) {
      auto fn = reinterpret_cast<Entry>(dlsym(handle_, k.symbol.c_str()));
      if (fn == nullptr) {
        missing = k.symbol;
        return false;
      }
      kernels_.emplace_back(k, fn);
    }
    return true;
  }
  const std::pair<KernelInfo, Entry>& kernel(size_t i) const { return kernels_.at(i); }

private:
  void* handle_;
  int fd_;
  std::vector<std::pair<KernelInfo, Entry>> kernels_;
};

/// A kernel bound to its operands: one strided memref descriptor per operand (the generated
/// code's calling convention), run over any range of its rows.
struct Launch {
  Launch(const LoadedCode& code, size_t index, std::span<const TensorRef> inputs,
         std::span<const TensorRef> outputs) {
    const auto* so = dynamic_cast<const SharedObject*>(&code);
    WEFT_INTERNAL_ASSERT(so != nullptr && index < so->numKernels(),
                         "cpu: launching a kernel not loaded on this device");
    const auto& [info, entry] = so->kernel(index);
    kernel = &info;
    fn = entry;
    const size_t n = inputs.size() + outputs.size();
    desc.resize(n);
    descPtr.resize(n);
    auto fill = [&](size_t i, const TensorRef& r) {
      WEFT_INTERNAL_ASSERT(r.isContiguous(), "cpu: kernel operands must be contiguous");
      auto p = reinterpret_cast<int64_t>(r.data);
      desc[i] = {p, p, 0, r.numel(), 1};
      descPtr[i] = desc[i].data();
    };
    for (size_t i = 0; i < inputs.size(); ++i)
      fill(i, inputs[i]);
    for (size_t i = 0; i < outputs.size(); ++i)
      fill(inputs.size() + i, outputs[i]);
  }
  /// Safe to call from several threads at once: it only reads the descriptors.
  void run(int64_t lo, int64_t hi) {
    const size_t n = descPtr.size();
    std::vector<void*> args(n + 2);
    for (size_t i = 0; i < n; ++i)
      args[i] = &descPtr[i];
    args[n] = &lo;
    args[n + 1] = &hi;
    fn(args.data());
  }

  const KernelInfo* kernel = nullptr; // in the loaded code
  SharedObject::Entry fn = nullptr;
  std::vector<std::array<int64_t, 5>> desc; // allocated, aligned, offset, size, stride
  std::vector<void*> descPtr;
};

class CpuDevice final : public Device {
public:
  CpuDevice() {
    limits_.codeTarget = hostArchitecture();
    limits_.computeUnits = getNumThreads();
    limits_.name =
        "cpu (" + hostArchitecture() + ", " + std::to_string(limits_.computeUnits) + " threads)";
    limits_.maxAllocation = Storage::allocationLimit();
    limits_.alignment = 64;
  }

  weft::Device id() const override { return weft::Device::cpu(); }
  const Limits& limits() const override { return limits_; }
  const KernelRegistry& kernels() const override { return cpuKernels(); }

  std::shared_ptr<Storage> allocate(size_t nbytes, bool zero) override {
    return Storage::allocate(nbytes, zero);
  }

  void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
            size_t nbytes) override {
    WEFT_CHECK(srcOffset + nbytes <= src.nbytes() && dstOffset + nbytes <= dst.nbytes(), Value,
               "copy: ", nbytes, " bytes at offsets ", srcOffset, " -> ", dstOffset,
               " run past buffers of ", src.nbytes(), " and ", dst.nbytes(), " bytes");
    std::memmove(static_cast<char*>(dst.data()) + dstOffset,
                 static_cast<const char*>(src.data()) + srcOffset, nbytes);
  }

  void upload(const void* host, Storage& dst, size_t dstOffset, size_t nbytes) override {
    WEFT_CHECK(dstOffset + nbytes <= dst.nbytes(), Value, "upload: ", nbytes, " bytes at ",
               dstOffset, " run past a buffer of ", dst.nbytes(), " bytes");
    if (nbytes > 0) std::memmove(static_cast<char*>(dst.data()) + dstOffset, host, nbytes);
  }

  void download(const Storage& src, size_t srcOffset, void* host, size_t nbytes) override {
    WEFT_CHECK(srcOffset + nbytes <= src.nbytes(), Value, "download: ", nbytes, " bytes at ",
               srcOffset, " run past a buffer of ", src.nbytes(), " bytes");
    if (nbytes > 0) std::memmove(host, static_cast<const char*>(src.data()) + srcOffset, nbytes);
  }

  std::string cannotRun(const CodeObject& code) const override {
    if (code.format != "elf-shared-object")
      return "it is " + code.format + " code (the CPU runs elf-shared-object code)";
    return cpuTargetMismatch(code.target);
  }

  std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                         std::span<const KernelInfo> kernels) override {
    WEFT_CHECK(code.format == "elf-shared-object", Device, "cpu: cannot load code of format '",
               code.format, "' (the CPU runs elf-shared-object code)");
    std::string why = cpuTargetMismatch(code.target);
    WEFT_CHECK(why.empty(), Device, "cpu: cannot run code built for '", code.target, "': ", why);
    WEFT_CHECK(code.bytes.size() > 4 && std::memcmp(code.bytes.data(),
                                                    "\x7f"
                                                    "ELF",
                                                    4) == 0,
               Device, "cpu: the code object is not an ELF file");
    int fd = memfd_create("weft-kernels", MFD_CLOEXEC);
    WEFT_CHECK(fd >= 0, Device,
               "cpu: cannot create a memory file for generated code: ", std::strerror(errno));
    size_t done = 0;
    while (done < code.bytes.size()) {
      ssize_t n = write(fd, code.bytes.data() + done, code.bytes.size() - done);
      if (n <= 0) {
        close(fd);
        WEFT_FAIL(Device, "cpu: cannot write generated code to a memory file");
      }
      done += static_cast<size_t>(n);
    }
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    void* handle = nullptr;
    std::string error;
    {
      std::lock_guard<std::mutex> lock(dlMutex_); // dlerror() is per thread, but keep it simple
      handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) error = dlerror();
    }
    if (handle == nullptr) {
      close(fd);
      WEFT_FAIL(Device, "cpu: cannot load generated code: ", error);
    }
    auto loaded = std::make_shared<SharedObject>(handle, fd);
    std::string missing;
    WEFT_CHECK(loaded->resolve(kernels, missing), Device, "cpu: the generated code has no kernel '",
               missing, "'");
    return loaded;
  }

  void launch(const LoadedCode& code, size_t index, std::span<const TensorRef> inputs,
              std::span<const TensorRef> outputs) override {
    Launch l(code, index, inputs, outputs);
    parallelFor(l.kernel->rows, std::max<int64_t>(l.kernel->grain, 1),
                [&](int64_t lo, int64_t hi) { l.run(lo, hi); });
  }

  void synchronize() override {}

private:
  Limits limits_;
  std::mutex dlMutex_;
};

} // namespace

Device& cpu() {
  static CpuDevice device;
  return device;
}

void cpuLaunchRows(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
                   std::span<const TensorRef> outputs, int64_t lo, int64_t hi) {
  Launch l(code, kernel, inputs, outputs);
  WEFT_INTERNAL_ASSERT(0 <= lo && lo <= hi && hi <= l.kernel->rows, "cpu: rows [", lo, ", ", hi,
                       ") of a kernel of ", l.kernel->rows);
  l.run(lo, hi);
}

} // namespace weft::hal
