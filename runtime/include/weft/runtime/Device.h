// The device interface every executable and tensor goes through (a small HAL after IREE's): a
// device allocates and copies buffers, loads generated code built for it, launches its kernels,
// synchronizes, and reports its limits. The CPU is the first device; Vulkan comes later.
#pragma once

#include "weft/runtime/Storage.h"
#include "weft/runtime/TensorRef.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft::hal {

/// Machine code for one target, as codegen produced it and as an executable stores it.
struct CodeObject {
  /// How `bytes` are packaged: "elf-shared-object" (CPU code, one function per kernel).
  std::string format;
  /// What the code needs to run: "<arch> <cpu> <+feature,...>" for the CPU ("x86_64 znver4
  /// +avx2,+fma,..."). A device refuses code whose target it does not meet.
  std::string target;
  std::vector<uint8_t> bytes;
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

/// What a device offers.
struct Limits {
  std::string name;         ///< "cpu (x86_64 znver4, 2 threads)"
  std::string codeTarget;   ///< the target code built for this device names (CodeObject::target)
  size_t maxAllocation = 0; ///< the largest single buffer, in bytes
  size_t alignment = 0;     ///< every buffer's alignment, in bytes
  int computeUnits = 0;     ///< threads (CPU) or compute units
};

class Device {
public:
  virtual ~Device() = default;
  virtual const Limits& limits() const = 0;
  /// A fresh buffer of `nbytes` (zero-filled if asked); an error past the device's memory.
  virtual std::shared_ptr<Storage> allocate(size_t nbytes, bool zero = false) = 0;
  /// Copies `nbytes` between two buffers of this device.
  virtual void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
                    size_t nbytes) = 0;
  /// Loads `code` and resolves the entry of each of `kernels` once, so launches look nothing up;
  /// a weft::Error (DeviceError) when it was built for another target or format, cannot be
  /// loaded, or lacks one of the kernels.
  virtual std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                                 std::span<const KernelInfo> kernels) = 0;
  /// Runs kernel `kernel` (an index into the kernels `code` was loaded with) over contiguous
  /// `inputs`, writing `outputs`.
  virtual void launch(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
                      std::span<const TensorRef> outputs) = 0;
  /// Runs rows [lo, hi) of kernel `kernel` (of its KernelInfo::rows) on the calling thread: how a
  /// host kernel runs a fused epilogue over the part of its output it has just written (plans
  /// ask it only of the CPU).
  virtual void launchRows(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
                          std::span<const TensorRef> outputs, int64_t lo, int64_t hi) = 0;
  /// Waits for everything launched so far (the CPU runs launches synchronously).
  virtual void synchronize() = 0;
};

/// The host CPU, with the runtime's thread pool.
Device& cpu();

/// The architecture this process runs on, as the first word of a CPU CodeObject::target spells
/// it ("x86_64", "aarch64").
std::string hostArchitecture();

/// Why the host CPU cannot run code built for `target` (a CPU CodeObject::target), or "" if it
/// can: another architecture, or a "+feature" the CPU lacks (features the runtime cannot test are
/// taken on trust).
std::string cpuTargetMismatch(const std::string& target);

} // namespace weft::hal
