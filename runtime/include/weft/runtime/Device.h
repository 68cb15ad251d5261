// Devices. `weft::Device` is the value that names one ("cpu", "vulkan:0") and travels with the
// data; `hal::Device` is the interface every executable and tensor goes through (a small HAL after
// IREE's): a device allocates buffers and moves bytes to and from the host, runs the op table's
// kernels from its registry, loads generated code built for it, launches it, synchronizes, and
// reports its limits. The CPU is the first device; a null device (for tests of everything above
// the runtime) records what it is asked to do; Vulkan comes next.
#pragma once

#include "weft/runtime/Attrs.h"
#include "weft/runtime/OpTable.h"
#include "weft/runtime/Storage.h"
#include "weft/runtime/TensorRef.h"

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

/// The kinds of device. Null: a device for testing the device plumbing (see hal::nullDevice).
enum class DeviceType : uint8_t { CPU, Vulkan, Null };
/// Spelled as in LibTorch.
inline constexpr DeviceType kCPU = DeviceType::CPU, kVulkan = DeviceType::Vulkan;

/// Where a tensor lives: a kind and an index among the devices of that kind, spelled as
/// torch::Device ("cpu", "vulkan:1").
class Device {
public:
  using Type = DeviceType;
  Device(DeviceType type = DeviceType::CPU, int index = 0) // NOLINT: implicit like LibTorch's
      : type_(type), index_(index) {}
  /// "cpu", "vulkan", "vulkan:1", "null:0": a ValueError for anything else.
  explicit Device(std::string_view spec);
  Device(const char* spec) : Device(std::string_view(spec)) {} // NOLINT: as LibTorch's
  static Device cpu() { return {}; }
  DeviceType type() const { return type_; }
  int index() const { return index_; }
  bool is_cpu() const { return type_ == DeviceType::CPU; }
  bool is_vulkan() const { return type_ == DeviceType::Vulkan; }
  /// "cpu", "vulkan:0", "null:1".
  std::string str() const;
  bool operator==(const Device&) const = default;

private:
  DeviceType type_;
  int index_;
};

namespace hal {

/// A kernel of the op table on one device: reads `inputs`, writes every element of `out` (see
/// runKernel for the contract), all three on that device.
using KernelFn = void (*)(std::span<const TensorRef> inputs, const TensorRef& out,
                          const Attrs& attrs);

/// A device's kernels, op code -> kernel, filled from the op table; a device lacking an op has no
/// entry, which plans are checked against when they are lowered for it.
class KernelRegistry {
public:
  explicit KernelRegistry(std::string device) : device_(std::move(device)) {}
  /// The kernel of `op`, or null where the device has none.
  KernelFn find(OpCode op) const { return kernels_[static_cast<size_t>(op)]; }
  void set(OpCode op, KernelFn fn) { kernels_[static_cast<size_t>(op)] = fn; }
  /// Runs `op`'s kernel: a DeviceError naming the device and the op where there is none, and a
  /// ValueError where the kernel's workspace does not fit in memory.
  void run(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out,
           const Attrs& attrs) const;
  using CopyCastFn = void (*)(const TensorRef& src, const TensorRef& dst);
  using FillFn = void (*)(const TensorRef& dst, double value);
  void setCopyCast(CopyCastFn fn) { copyCast_ = fn; }
  void setFill(FillFn fn) { fill_ = fn; }
  /// Copies `src` into `dst` (any strides, any dtypes; as weft::copyCast); a DeviceError where the
  /// device has no such kernel.
  void copyCast(const TensorRef& src, const TensorRef& dst) const;
  /// Fills `dst` (any strides) with `value` converted to its dtype; a DeviceError likewise.
  void fill(const TensorRef& dst, double value) const;

private:
  std::string device_;
  std::array<KernelFn, kNumOps> kernels_{};
  CopyCastFn copyCast_ = nullptr;
  FillFn fill_ = nullptr;
};

/// Machine code for one target, as codegen produced it and as an executable stores it.
struct CodeObject {
  /// How `bytes` are packaged: "elf-shared-object" (CPU code, one function per kernel).
  std::string format;
  /// What the code needs to run: "<arch> <cpu> <+feature,...>" for the CPU ("x86_64 znver4
  /// +avx2,+fma,..."). A device refuses code whose target it does not meet.
  std::string target;
  std::vector<uint8_t> bytes;
  /// The name each kernel of the table has in this object, where it is not the table's own (code
  /// for another target of the same plan names its kernels apart).
  std::vector<std::string> symbols;
  bool operator==(const CodeObject&) const = default;
};

/// One kernel in a code object and how a launch spreads it over the device's threads.
///
/// CPU ABI: `void symbol(void** args)`, where args[i] points to a pointer to a rank-1 memref
/// descriptor {allocated, aligned, offset, size, stride} (int64 each) of input i, then of each
/// output, followed by pointers to the int64 bounds `lo` and `hi` of the outer loop's rows.
struct KernelInfo {
  std::string symbol;
  int64_t rows = 1;  ///< the outer loop's extent, split across threads
  int64_t grain = 1; ///< the fewest rows one thread takes
  bool operator==(const KernelInfo&) const = default;
};

/// Code loaded on a device with its kernels' entries resolved, ready to launch; unloaded when the
/// last reference goes.
class LoadedCode {
public:
  virtual ~LoadedCode() = default;
  /// How many kernels it was loaded with.
  virtual size_t numKernels() const = 0;
};

/// What a device offers, read once when it is opened and respected by every allocation and launch.
struct Limits {
  std::string name;       ///< "cpu (x86_64 znver4, 2 threads)", "vulkan:0 (NVIDIA H200, discrete)"
  std::string codeTarget; ///< the target code built for this device names (CodeObject::target)
  size_t maxAllocation = 0; ///< the largest single buffer, in bytes
  size_t alignment = 0;     ///< every buffer's alignment, in bytes
  int computeUnits = 0;     ///< threads (CPU) or compute units
  /// GPUs: the most bytes one shader binding may address (a tensor past it is split or refused),
  /// workgroup shared memory, the most invocations of one workgroup and its sizes, the subgroup
  /// size, and whether shaders may compute in 16-bit floats and 8-bit integers. 0 on the CPU.
  size_t maxBufferRange = 0;
  size_t sharedMemoryBytes = 0;
  uint32_t maxWorkgroupInvocations = 0;
  std::array<uint32_t, 3> maxWorkgroupSize{};
  uint32_t subgroupSize = 0;
  /// The most storage buffers one shader binds (its parameters, inputs and outputs). 0 on the CPU.
  uint32_t maxStorageBuffers = 0;
  bool float16 = false;
  bool int8 = false;
  /// Whether shaders may compute in float64 (shaderFloat64: arithmetic, comparisons, reductions
  /// and products; Vulkan's exp, log, sin and the like are 32-bit, so those ops are refused).
  bool float64 = false;
  /// Whether shaders may compute in bfloat16 (VK_KHR_shader_bfloat16).
  bool bfloat16 = false;
  /// A matrix multiply-accumulate the device's subgroups (or workgroups) do in hardware
  /// (VK_KHR_cooperative_matrix): result[m, n] = a[m, k] b[k, n] + c[m, n], each of the named
  /// element type ("float16", "bfloat16", "float32", "int8", "int32", ...).
  struct CooperativeMatrix {
    uint32_t m = 0, n = 0, k = 0;
    std::string a, b, c, result;
    std::string scope; ///< "subgroup", "workgroup", ...
  };
  /// The shapes the device offers, as it lists them (none without the extension).
  std::vector<CooperativeMatrix> cooperativeMatrix;
};

class Device {
public:
  virtual ~Device() = default;
  /// Which device this is.
  virtual weft::Device id() const = 0;
  virtual const Limits& limits() const = 0;
  /// A fresh buffer of `nbytes` (zero-filled if asked); an error past the device's memory.
  virtual std::shared_ptr<Storage> allocate(size_t nbytes, bool zero = false) = 0;
  /// Copies `nbytes` between two buffers of this device.
  virtual void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
                    size_t nbytes) = 0;
  /// Copies `nbytes` from host memory into a buffer of this device, and back.
  virtual void upload(const void* host, Storage& dst, size_t dstOffset, size_t nbytes) = 0;
  virtual void download(const Storage& src, size_t srcOffset, void* host, size_t nbytes) = 0;
  /// The op table's kernels on this device.
  virtual const KernelRegistry& kernels() const = 0;
  /// Why this device cannot run `code` (another format, or a target it does not meet), or "" if
  /// it can.
  virtual std::string cannotRun(const CodeObject& code) const = 0;
  /// Loads `code` and resolves the entry of each of `kernels` once, so launches look nothing up;
  /// a weft::Error (DeviceError) when it was built for another target or format, cannot be
  /// loaded, or lacks one of the kernels.
  virtual std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                                 std::span<const KernelInfo> kernels) = 0;
  /// Runs kernel `kernel` (an index into the kernels `code` was loaded with) over contiguous
  /// `inputs`, writing `outputs`.
  virtual void launch(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
                      std::span<const TensorRef> outputs) = 0;
  /// Waits for everything launched so far (the CPU runs launches synchronously).
  virtual void synchronize() = 0;
};

/// The host CPU, with the runtime's thread pool.
Device& cpu();

/// The CPU's kernels: every row of the op table.
const KernelRegistry& cpuKernels();

/// Runs rows [lo, hi) of kernel `kernel` (of its KernelInfo::rows) of `code`, loaded on the CPU,
/// on the calling thread: how a CPU kernel runs a fused epilogue over the part of its output it
/// has just written (PlanStep::afterEachSample). The CPU's own hook, not part of Device.
void cpuLaunchRows(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
                   std::span<const TensorRef> outputs, int64_t lo, int64_t hi);

/// A device for testing everything above the runtime with a second device and no GPU: its memory
/// is host memory that it does not show the host (Storage::data() is null, so code that reads a
/// tensor's memory without going through the device fails), its kernels and generated code are
/// the CPU's run on that memory, and it counts every kernel and launch it runs. Indices 0 to 3
/// are four such devices, distinct for the device checks.
Device& nullDevice(int index = 0);
/// What null devices have run since the last reset: kernels of the op table by op, generated-code
/// launches, and bytes moved to and from the host.
struct NullDeviceCounts {
  std::array<int64_t, kNumOps> kernels{};
  int64_t launches = 0;
  int64_t uploadedBytes = 0;
  int64_t downloadedBytes = 0;
};
NullDeviceCounts nullDeviceCounts();
void resetNullDeviceCounts();

/// The Vulkan devices this process sees, in the order `vulkan:0`, `vulkan:1`, ... name them:
/// discrete GPUs first, then integrated, virtual and CPU ones (Mesa's lavapipe last), the one
/// WEFT_VULKAN_DEVICE names (an index into the driver's list, or a part of the device's name)
/// moved to the front. Empty where there is no Vulkan loader or driver.
std::vector<std::string> vulkanDeviceNames();
/// Vulkan device `index` (of vulkanDeviceNames()), opened at first use: a DeviceError where there
/// is none. WEFT_VK_VALIDATE=1 turns on the Khronos validation layer for every Vulkan device.
Device& vulkanDevice(int index = 0);
/// Whether the Khronos validation layer checks this process's Vulkan calls (WEFT_VK_VALIDATE=1 and
/// the layer installed), and the messages it reported since the process began: warnings and
/// errors, which tests expect to stay 0.
bool vulkanValidationActive();
int64_t vulkanValidationMessages();

/// The device `device` names: a DeviceError for one this process does not have.
Device& device(const weft::Device& device);

/// Copies `nbytes` from `src` (at `srcOffset`) to `dst` (at `dstOffset`), on the same device or
/// between two (through the host where neither side is host memory).
void transfer(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset, size_t nbytes);

/// The architecture this process runs on, as the first word of a CPU CodeObject::target spells
/// it ("x86_64", "aarch64").
std::string hostArchitecture();

/// Why the host CPU cannot run code built for `target` (a CPU CodeObject::target), or "" if it
/// can: another architecture, or a "+feature" the CPU lacks (features the runtime cannot test are
/// taken on trust).
std::string cpuTargetMismatch(const std::string& target);

} // namespace hal
} // namespace weft
