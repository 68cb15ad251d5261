// The Vulkan device: discovery and choice among the GPUs (and Mesa's lavapipe), limits read once,
// buffers from a caching allocator, copies to and from the host through a staging buffer, the
// Khronos validation layer on request. The loader is opened at first use (libvulkan.so.1), so the
// runtime runs where there is none: it then has no Vulkan devices, and asking for one is a
// DeviceError. Kernels come from codegen's SPIR-V path; until a device has them its registry is
// empty and an op on its tensors says which kernel it lacks.
#include "weft/runtime/Device.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Error.h"

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <memory>
#include <mutex>

namespace weft::hal {
namespace {

// The entry points weft calls, loaded through vkGetInstanceProcAddr / vkGetDeviceProcAddr.
#define WEFT_VK_GLOBAL(X)                                                                          \
  X(vkCreateInstance)                                                                              \
  X(vkEnumerateInstanceLayerProperties)
#define WEFT_VK_INSTANCE(X)                                                                        \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties)                                                                 \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceFeatures2)                                                                  \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkCreateDevice)                                                                                \
  X(vkGetDeviceProcAddr)                                                                           \
  X(vkCreateDebugUtilsMessengerEXT)
#define WEFT_VK_DEVICE(X)                                                                          \
  X(vkGetDeviceQueue)                                                                              \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkBindBufferMemory)                                                                            \
  X(vkMapMemory)                                                                                   \
  X(vkCreateCommandPool)                                                                           \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkResetCommandBuffer)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkQueueSubmit)                                                                                 \
  X(vkCreateFence)                                                                                 \
  X(vkWaitForFences)                                                                               \
  X(vkResetFences)

#define WEFT_VK_DECLARE(name) PFN_##name name = nullptr;

std::atomic<int64_t> gValidationMessages{0};

/// A Vulkan info or properties struct of type `T`, zeroed, its sType set.
template <typename T> T vkInfo(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

VKAPI_ATTR VkBool32 VKAPI_CALL onValidationMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void*) {
  gValidationMessages.fetch_add(1);
  std::fprintf(stderr, "[weft] vulkan validation (%s): %s\n",
               severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
               data != nullptr && data->pMessage != nullptr ? data->pMessage : "");
  return VK_FALSE;
}

const char* typeName(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return "discrete";
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return "integrated";
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return "virtual";
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return "cpu";
  default:
    return "other";
  }
}

int preference(VkPhysicalDeviceType t) {
  switch (t) {
  case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    return 0;
  case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
    return 1;
  case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
    return 2;
  case VK_PHYSICAL_DEVICE_TYPE_CPU:
    return 4;
  default:
    return 3;
  }
}

/// The loader, the instance and the physical devices in weft's order; made once, never destroyed
/// (tensors may outlive statics). `why` says why there are none.
class Instance {
public:
  static Instance& get() {
    static Instance* instance = new Instance();
    return *instance;
  }
  WEFT_VK_INSTANCE(WEFT_VK_DECLARE)
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices;
  std::vector<std::string> names;
  bool validation = false;
  std::string why;

private:
  Instance() {
    void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      why = "no Vulkan loader (libvulkan.so.1) on this machine";
      return;
    }
    auto getProc = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib, "vkGetInstanceProcAddr"));
    if (getProc == nullptr) {
      why = "the Vulkan loader has no vkGetInstanceProcAddr";
      return;
    }
    WEFT_VK_GLOBAL(WEFT_VK_DECLARE)
#define WEFT_VK_LOAD_GLOBAL(name) name = reinterpret_cast<PFN_##name>(getProc(nullptr, #name));
    WEFT_VK_GLOBAL(WEFT_VK_LOAD_GLOBAL)
    std::vector<const char*> layers, extensions;
    if (debugFlag("WEFT_VK_VALIDATE").value_or("0") == "1") {
      uint32_t n = 0;
      vkEnumerateInstanceLayerProperties(&n, nullptr);
      std::vector<VkLayerProperties> have(n);
      vkEnumerateInstanceLayerProperties(&n, have.data());
      validation = std::any_of(have.begin(), have.end(), [](const VkLayerProperties& l) {
        return std::strcmp(l.layerName, "VK_LAYER_KHRONOS_validation") == 0;
      });
      if (validation) {
        layers.push_back("VK_LAYER_KHRONOS_validation");
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
      } else {
        std::fprintf(stderr, "[weft] WEFT_VK_VALIDATE=1, but the Khronos validation layer is not "
                             "installed (Debian: vulkan-validationlayers)\n");
      }
    }
    auto app = vkInfo<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "weft";
    app.pEngineName = "weft";
    app.apiVersion = VK_API_VERSION_1_2;
    auto info = vkInfo<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    info.pApplicationInfo = &app;
    info.enabledLayerCount = static_cast<uint32_t>(layers.size());
    info.ppEnabledLayerNames = layers.data();
    info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    if (VkResult r = vkCreateInstance(&info, nullptr, &instance); r != VK_SUCCESS) {
      why = "vkCreateInstance failed (" + std::to_string(r) + "): no Vulkan driver?";
      return;
    }
#define WEFT_VK_LOAD_INSTANCE(name) name = reinterpret_cast<PFN_##name>(getProc(instance, #name));
    WEFT_VK_INSTANCE(WEFT_VK_LOAD_INSTANCE)
    if (validation && vkCreateDebugUtilsMessengerEXT != nullptr) {
      auto m = vkInfo<VkDebugUtilsMessengerCreateInfoEXT>(
          VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
      m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      m.pfnUserCallback = &onValidationMessage;
      VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
      vkCreateDebugUtilsMessengerEXT(instance, &m, nullptr, &messenger);
    }
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> found(n);
    vkEnumeratePhysicalDevices(instance, &n, found.data());
    // The driver's order, then the preferred kinds first (a stable sort keeps the driver's order
    // among equals); WEFT_VULKAN_DEVICE moves the one it names to the front.
    std::vector<std::pair<VkPhysicalDevice, VkPhysicalDeviceProperties>> listed;
    for (VkPhysicalDevice d : found) {
      VkPhysicalDeviceProperties p{};
      vkGetPhysicalDeviceProperties(d, &p);
      if (p.apiVersion >= VK_API_VERSION_1_1) listed.emplace_back(d, p);
    }
    std::optional<size_t> named;
    if (auto want = debugFlag("WEFT_VULKAN_DEVICE"); want && !want->empty()) {
      char* end = nullptr;
      long index = std::strtol(want->c_str(), &end, 10);
      for (size_t i = 0; i < listed.size() && !named; ++i)
        if (*end == '\0'
                ? static_cast<long>(i) == index
                : std::string(listed[i].second.deviceName).find(*want) != std::string::npos)
          named = i;
      if (!named)
        std::fprintf(stderr, "[weft] WEFT_VULKAN_DEVICE=%s names none of the %zu Vulkan devices\n",
                     want->c_str(), listed.size());
    }
    std::vector<size_t> order(listed.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      int pa = named == a ? -1 : preference(listed[a].second.deviceType);
      int pb = named == b ? -1 : preference(listed[b].second.deviceType);
      return pa < pb;
    });
    for (size_t i : order) {
      devices.push_back(listed[i].first);
      names.push_back(std::string(listed[i].second.deviceName) + " (" +
                      typeName(listed[i].second.deviceType) + ")");
    }
    if (devices.empty()) why = "the Vulkan loader found no device of Vulkan 1.1 or later";
  }
};

/// A buffer and its memory, as the caching allocator keeps them.
struct Block {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  size_t size = 0;
  void* mapped = nullptr; // host-visible memory (staging) only
};

/// Rounds a request up to one of 8 sizes per power of two (at most 12.5% waste), from 256 bytes,
/// so freed blocks match later requests exactly.
size_t sizeClass(size_t n) {
  n = std::max<size_t>(n, 256);
  size_t p = size_t{1} << (63 - __builtin_clzll(n));
  size_t step = std::max<size_t>(p / 8, 256);
  return (n + step - 1) / step * step;
}

class VulkanDevice final : public Device {
public:
  VulkanDevice(int index, VkPhysicalDevice physical, const std::string& name)
      : index_(index), physical_(physical), registry_("vulkan:" + std::to_string(index)) {
    Instance& vk = Instance::get();
    readLimits(name);
    vk.vkGetPhysicalDeviceMemoryProperties(physical_, &memory_);
    uint32_t n = 0;
    vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vk.vkGetPhysicalDeviceQueueFamilyProperties(physical_, &n, families.data());
    uint32_t family = n;
    for (uint32_t i = 0; i < n && family == n; ++i)
      if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    WEFT_CHECK(family < n, Device, id().str(), " (", name, ") has no compute queue");
    float priority = 1.0f;
    auto queue = vkInfo<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    queue.queueFamilyIndex = family;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    auto info = vkInfo<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    check(vk.vkCreateDevice(physical_, &info, nullptr, &device_), "vkCreateDevice");
    auto getProc = vk.vkGetDeviceProcAddr;
#define WEFT_VK_LOAD_DEVICE(name) name = reinterpret_cast<PFN_##name>(getProc(device_, #name));
    WEFT_VK_DEVICE(WEFT_VK_LOAD_DEVICE)
    vkGetDeviceQueue(device_, family, 0, &queue_);
    auto pool = vkInfo<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = family;
    check(vkCreateCommandPool(device_, &pool, nullptr, &pool_), "vkCreateCommandPool");
    auto cb = vkInfo<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cb.commandPool = pool_;
    cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cb.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &cb, &commands_), "vkAllocateCommandBuffers");
    auto fence = vkInfo<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    check(vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence");
  }

  weft::Device id() const override {
    return {DeviceType::Vulkan, index_};
  }
  const Limits& limits() const override {
    return limits_;
  }
  const KernelRegistry& kernels() const override {
    return registry_;
  }

  std::shared_ptr<Storage> allocate(size_t nbytes, bool zero) override {
    WEFT_CHECK(nbytes <= limits_.maxAllocation, Device, id().str(), ": cannot allocate ", nbytes,
               " bytes: the device's largest allocation is ", limits_.maxAllocation, " bytes");
    WEFT_CHECK(nbytes <= limits_.maxBufferRange, Device, id().str(), ": a buffer of ", nbytes,
               " bytes is larger than the ", limits_.maxBufferRange,
               " bytes one shader binding can address on this device");
    Block b = take(sizeClass(nbytes), false);
    if (zero) {
      std::lock_guard<std::mutex> lock(queueMutex_);
      record();
      vkCmdFillBuffer(commands_, b.buffer, 0, b.size, 0);
      submitAndWait();
    }
    auto handle = reinterpret_cast<uint64_t>(b.buffer);
    return Storage::onDevice(*this, handle, 0, nbytes, nullptr, [this, b] { give(b); });
  }

  void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
            size_t nbytes) override {
    checkRange(src, srcOffset, nbytes, "copy");
    checkRange(dst, dstOffset, nbytes, "copy");
    if (nbytes == 0) return;
    std::lock_guard<std::mutex> lock(queueMutex_);
    record();
    VkBufferCopy region{src.offset() + srcOffset, dst.offset() + dstOffset, nbytes};
    vkCmdCopyBuffer(commands_, bufferOf(src), bufferOf(dst), 1, &region);
    submitAndWait();
  }

  void upload(const void* host, Storage& dst, size_t dstOffset, size_t nbytes) override {
    checkRange(dst, dstOffset, nbytes, "upload");
    std::lock_guard<std::mutex> lock(queueMutex_);
    for (size_t done = 0; done < nbytes;) {
      const size_t n = std::min(nbytes - done, kStagingBytes);
      Block& s = staging();
      std::memcpy(s.mapped, static_cast<const char*>(host) + done, n);
      record();
      VkBufferCopy region{0, dst.offset() + dstOffset + done, n};
      vkCmdCopyBuffer(commands_, s.buffer, bufferOf(dst), 1, &region);
      submitAndWait();
      done += n;
    }
  }

  void download(const Storage& src, size_t srcOffset, void* host, size_t nbytes) override {
    checkRange(src, srcOffset, nbytes, "download");
    std::lock_guard<std::mutex> lock(queueMutex_);
    for (size_t done = 0; done < nbytes;) {
      const size_t n = std::min(nbytes - done, kStagingBytes);
      Block& s = staging();
      record();
      VkBufferCopy region{src.offset() + srcOffset + done, 0, n};
      vkCmdCopyBuffer(commands_, bufferOf(src), s.buffer, 1, &region);
      submitAndWait();
      std::memcpy(static_cast<char*>(host) + done, s.mapped, n);
      done += n;
    }
  }

  std::string cannotRun(const CodeObject& code) const override {
    return "it is " + code.format + " code, and " + id().str() +
           " runs no generated code yet (SPIR-V kernels come with codegen's SPIR-V path)";
  }
  std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                         std::span<const KernelInfo>) override {
    WEFT_FAIL(Device, id().str(), ": cannot load ", cannotRun(code));
  }
  void launch(const LoadedCode&, size_t, std::span<const TensorRef>,
              std::span<const TensorRef>) override {
    WEFT_FAIL(Device, id().str(), ": no generated code is loaded on this device");
  }
  void synchronize() override {} // every submission is waited for

private:
  static constexpr size_t kStagingBytes = size_t{16} << 20;

  void readLimits(const std::string& name) {
    Instance& vk = Instance::get();
    auto subgroup = vkInfo<VkPhysicalDeviceSubgroupProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    auto m3 = vkInfo<VkPhysicalDeviceMaintenance3Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    m3.pNext = &subgroup;
    auto props =
        vkInfo<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props.pNext = &m3;
    vk.vkGetPhysicalDeviceProperties2(physical_, &props);
    const VkPhysicalDeviceLimits& l = props.properties.limits;
    auto f16 = vkInfo<VkPhysicalDeviceShaderFloat16Int8Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES);
    auto features = vkInfo<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    features.pNext = &f16;
    vk.vkGetPhysicalDeviceFeatures2(physical_, &features);
    limits_.name = id().str() + " (" + name + ")";
    limits_.codeTarget = "spirv";
    limits_.maxAllocation = static_cast<size_t>(m3.maxMemoryAllocationSize);
    limits_.maxBufferRange = l.maxStorageBufferRange;
    limits_.alignment = static_cast<size_t>(l.minStorageBufferOffsetAlignment);
    limits_.sharedMemoryBytes = l.maxComputeSharedMemorySize;
    limits_.maxWorkgroupInvocations = l.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i)
      limits_.maxWorkgroupSize[static_cast<size_t>(i)] = l.maxComputeWorkGroupSize[i];
    limits_.subgroupSize = subgroup.subgroupSize;
    limits_.float16 = f16.shaderFloat16 == VK_TRUE;
    limits_.int8 = f16.shaderInt8 == VK_TRUE;
  }

  void check(VkResult r, const char* what) const {
    if (r == VK_SUCCESS) return;
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
      WEFT_FAIL(Device, id().str(), ": out of ",
                r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? "device" : "host", " memory (", what, ")");
    if (r == VK_ERROR_DEVICE_LOST)
      WEFT_FAIL(Device, id().str(), ": the device was lost (", what, ")");
    WEFT_FAIL(Device, id().str(), ": ", what, " failed with VkResult ", static_cast<int>(r));
  }

  static VkBuffer bufferOf(const Storage& s) {
    return reinterpret_cast<VkBuffer>(s.handle());
  }

  void checkRange(const Storage& s, size_t offset, size_t nbytes, const char* what) const {
    WEFT_INTERNAL_ASSERT(&s.device() == this, id().str(), ": ", what, " of a buffer on ",
                         s.device().id().str());
    WEFT_CHECK(offset + nbytes <= s.nbytes(), Value, what, ": ", nbytes, " bytes at ", offset,
               " run past a buffer of ", s.nbytes(), " bytes");
  }

  /// The index of a memory type `bits` allows with `want` properties (and, if possible, `prefer`).
  uint32_t memoryType(uint32_t bits, VkMemoryPropertyFlags want,
                      VkMemoryPropertyFlags prefer) const {
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
      if (!(bits & (1u << i))) continue;
      VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
      if ((f & want) != want) continue;
      if ((f & prefer) == prefer) return i;
      if (fallback == UINT32_MAX) fallback = i;
    }
    WEFT_CHECK(fallback != UINT32_MAX, Device, id().str(), ": no memory type for buffers");
    return fallback;
  }

  /// A block of exactly `size` bytes: a freed one of that size, or a new one.
  Block take(size_t size, bool hostVisible) {
    if (!hostVisible) {
      std::lock_guard<std::mutex> lock(cacheMutex_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        Block b = it->second;
        free_.erase(it);
        return b;
      }
    }
    Block b;
    b.size = size;
    auto info = vkInfo<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    info.size = size;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(device_, &info, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req{};
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    auto alloc = vkInfo<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    alloc.allocationSize = req.size;
    alloc.memoryTypeIndex =
        hostVisible
            ? memoryType(req.memoryTypeBits,
                         VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                         VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
            : memoryType(req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    VkResult r = vkAllocateMemory(device_, &alloc, nullptr, &b.memory);
    if (r != VK_SUCCESS && !hostVisible) { // the cache's idle blocks first, then once more
      release();
      r = vkAllocateMemory(device_, &alloc, nullptr, &b.memory);
    }
    if (r != VK_SUCCESS) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      check(r, "allocating device memory");
    }
    check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (hostVisible) check(vkMapMemory(device_, b.memory, 0, size, 0, &b.mapped), "vkMapMemory");
    return b;
  }

  /// Keeps a freed block for reuse.
  void give(const Block& b) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    free_.emplace(b.size, b);
  }

  /// Frees the cache's idle blocks.
  void release() {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    for (auto& [size, b] : free_) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      vkFreeMemory(device_, b.memory, nullptr);
    }
    free_.clear();
  }

  Block& staging() {
    if (staging_.buffer == VK_NULL_HANDLE) staging_ = take(kStagingBytes, true);
    return staging_;
  }

  /// Starts recording the command buffer (the queue mutex held).
  void record() {
    check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
    auto begin = vkInfo<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(commands_, &begin), "vkBeginCommandBuffer");
  }

  /// Ends, submits and waits for the command buffer; its writes are then visible to the host.
  void submitAndWait() {
    auto barrier = vkInfo<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                         1, &barrier, 0, nullptr, 0, nullptr);
    check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
    auto submit = vkInfo<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &commands_;
    check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
    check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    check(vkResetFences(device_, 1, &fence_), "vkResetFences");
  }

  WEFT_VK_DEVICE(WEFT_VK_DECLARE)
  int index_;
  VkPhysicalDevice physical_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  Block staging_;
  Limits limits_;
  KernelRegistry registry_;
  std::mutex queueMutex_, cacheMutex_;
  std::multimap<size_t, Block> free_;
};

} // namespace

std::vector<std::string> vulkanDeviceNames() {
  return Instance::get().names;
}

Device& vulkanDevice(int index) {
  Instance& vk = Instance::get();
  WEFT_CHECK(!vk.devices.empty(), Device, "vulkan:", index, ": no Vulkan device: ", vk.why);
  WEFT_CHECK(index >= 0 && static_cast<size_t>(index) < vk.devices.size(), Device, "vulkan:", index,
             ": there ", vk.devices.size() == 1 ? "is one Vulkan device" : "are ",
             vk.devices.size() == 1 ? "" : std::to_string(vk.devices.size()) + " Vulkan devices",
             " (vulkan:0",
             vk.devices.size() > 1 ? " to vulkan:" + std::to_string(vk.devices.size() - 1) : "",
             ")");
  static std::mutex mutex;
  static std::map<int, VulkanDevice*> opened; // never destroyed: tensors may outlive statics
  std::lock_guard<std::mutex> lock(mutex);
  auto it = opened.find(index);
  if (it == opened.end()) {
    auto device = std::make_unique<VulkanDevice>(index, vk.devices[static_cast<size_t>(index)],
                                                 vk.names[static_cast<size_t>(index)]);
    it = opened.emplace(index, device.release()).first;
  }
  return *it->second;
}

bool vulkanValidationActive() {
  return Instance::get().validation;
}

int64_t vulkanValidationMessages() {
  return gValidationMessages.load();
}

} // namespace weft::hal
