// Device names, the device a name stands for, kernel registries, and copies between devices.
#include "weft/runtime/Device.h"

#include "weft/runtime/Error.h"

#include <charconv>
#include <new>
#include <stdexcept>
#include <vector>

namespace weft {

Device::Device(std::string_view spec) : type_(DeviceType::CPU), index_(0) {
  std::string_view kind = spec.substr(0, spec.find(':'));
  if (kind == "cpu")
    type_ = DeviceType::CPU;
  else if (kind == "vulkan")
    type_ = DeviceType::Vulkan;
  else if (kind == "null")
    type_ = DeviceType::Null;
  else
    WEFT_FAIL(Value, "Device: expected a device such as 'cpu', 'vulkan' or 'vulkan:1', got '", spec,
              "'");
  if (kind.size() == spec.size()) return;
  std::string_view number = spec.substr(kind.size() + 1);
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), index_);
  WEFT_CHECK(ec == std::errc() && end == number.data() + number.size() && index_ >= 0, Value,
             "Device: expected a device index (0, 1, ...) after '", kind, ":', got '", spec, "'");
}

std::string Device::str() const {
  switch (type_) {
  case DeviceType::CPU:
    return index_ == 0 ? "cpu" : "cpu:" + std::to_string(index_);
  case DeviceType::Vulkan:
    return "vulkan:" + std::to_string(index_);
  case DeviceType::Null:
    return "null:" + std::to_string(index_);
  }
  return "?";
}

namespace hal {

void KernelRegistry::run(OpCode op, std::span<const TensorRef> inputs, const TensorRef& out,
                         const Attrs& attrs) const {
  KernelFn fn = find(op);
  WEFT_CHECK(fn != nullptr, Device, opName(op), ": the device ", device_,
             " has no kernel for this op");
  try {
    fn(inputs, out, attrs);
  } catch (const std::bad_alloc&) { // a kernel's workspace (sorting, im2col) did not fit
    WEFT_FAIL(Value, opName(op), ": out of memory for the kernel's workspace");
  } catch (const std::length_error&) {
    WEFT_FAIL(Value, opName(op), ": out of memory for the kernel's workspace");
  }
}

void KernelRegistry::copyCast(const TensorRef& src, const TensorRef& dst) const {
  WEFT_CHECK(copyCast_ != nullptr, Device, "copy: the device ", device_,
             " has no kernel to copy or convert between layouts and dtypes");
  copyCast_(src, dst);
}

void KernelRegistry::fill(const TensorRef& dst, double value) const {
  WEFT_CHECK(fill_ != nullptr, Device, "fill: the device ", device_, " has no kernel to fill");
  fill_(dst, value);
}

Device& device(const weft::Device& d) {
  switch (d.type()) {
  case DeviceType::CPU:
    WEFT_CHECK(d.index() == 0, Device, "device ", d.str(),
               ": there is one CPU device, cpu (index 0)");
    return cpu();
  case DeviceType::Null:
    WEFT_CHECK(d.index() >= 0 && d.index() < 4, Device, "device ", d.str(),
               ": there are four null devices, null:0 to null:3");
    return nullDevice(d.index());
  case DeviceType::Vulkan:
    return vulkanDevice(d.index());
  }
  WEFT_FAIL(Device, "device ", d.str(), ": unknown device type");
}

void transfer(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset, size_t nbytes) {
  WEFT_CHECK(srcOffset + nbytes <= src.nbytes() && dstOffset + nbytes <= dst.nbytes(), Value,
             "copy: ", nbytes, " bytes at offsets ", srcOffset, " -> ", dstOffset,
             " run past buffers of ", src.nbytes(), " and ", dst.nbytes(), " bytes");
  if (nbytes == 0) return;
  Device& from = src.device();
  Device& to = dst.device();
  if (&from == &to) return from.copy(src, srcOffset, dst, dstOffset, nbytes);
  if (src.data() != nullptr)
    return to.upload(static_cast<const char*>(src.data()) + srcOffset, dst, dstOffset, nbytes);
  if (dst.data() != nullptr)
    return from.download(src, srcOffset, static_cast<char*>(dst.data()) + dstOffset, nbytes);
  auto staging = cpu().allocate(nbytes); // neither side is host memory: through the host
  from.download(src, srcOffset, staging->data(), nbytes);
  to.upload(staging->data(), dst, dstOffset, nbytes);
}

} // namespace hal
} // namespace weft
