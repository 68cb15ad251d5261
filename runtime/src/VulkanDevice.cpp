// The Vulkan device (the loader, the instance and the choice among GPUs: VulkanInstance.h): limits
// and features read once, buffers from a caching allocator, copies to and from the host through a
// staging buffer. Without a loader or a driver there are no Vulkan devices, and asking for one is
// a DeviceError. Kernels are per-op shaders from codegen's SPIR-V path (ShaderKernels.cpp says
// which op becomes which), and a compiled program's fused kernels (a spirv-kernels code object),
// made into pipelines once (a VkPipelineCache on disk beside the kernel cache) and recorded many
// to a command buffer with push descriptors; three command buffers take turns, each submitted
// without a wait as it fills, and the host waits when it needs a result.
#include "ShaderDevice.h"
#include "VulkanInstance.h"

#include "weft/runtime/DebugFlags.h"
#include "weft/runtime/Error.h"
#include "weft/runtime/Timeline.h"


#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>

namespace weft::hal {
namespace {

// The device's entry points weft calls, loaded through vkGetDeviceProcAddr.
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
  X(vkResetFences)                                                                                 \
  X(vkCmdUpdateBuffer)                                                                             \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkCreateComputePipelines)                                                                      \
  X(vkCreatePipelineCache)                                                                         \
  X(vkGetPipelineCacheData)                                                                        \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdPushDescriptorSetKHR)                                                                     \
  X(vkCmdDispatch)                                                                                 \
  X(vkCreateQueryPool)                                                                             \
  X(vkCmdResetQueryPool)                                                                           \
  X(vkCmdWriteTimestamp)                                                                           \
  X(vkGetQueryPoolResults)


#define WEFT_VK_DECLARE(name) PFN_##name name = nullptr;

using vulkan::componentName;
using vulkan::CooperativeMatrixProperties;
using vulkan::kCooperativeMatrixPropertiesType;
using vulkan::Instance;
using vulkan::scopeName;
using vulkan::vkInfo;

/// A buffer and its memory, as the caching allocator keeps them.
struct Block {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  size_t size = 0;
  void* mapped = nullptr; // host-visible memory (staging) only
  size_t offset = 0;      // where a piece carved from a slab starts in it
  bool carved = false;
};

/// Rounds a request up to one of 8 sizes per power of two (at most 12.5% waste), from 256 bytes,
/// so freed blocks match later requests exactly.
size_t sizeClass(size_t n) {
  n = std::max<size_t>(n, 256);
  size_t p = size_t{1} << (63 - __builtin_clzll(n));
  size_t step = std::max<size_t>(p / 8, 256);
  return (n + step - 1) / step * step;
}

/// A per-op shader or a fused kernel made into a pipeline, with its layouts (push descriptors:
/// nothing is allocated per dispatch).
struct Pipeline {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkDescriptorSetLayout setLayout = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  std::string error; // why there is none
};

class VulkanDevice final : public ShaderDevice {
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
    // What shaders use, where the device has it: 64-bit and 16-bit integers, 8- and 16-bit
    // storage, 16-bit floats; push descriptors bind each dispatch's buffers.
    auto f16 = vkInfo<VkPhysicalDeviceShaderFloat16Int8Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES);
    auto s8 = vkInfo<VkPhysicalDevice8BitStorageFeatures>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES);
    auto s16 = vkInfo<VkPhysicalDevice16BitStorageFeatures>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES);
    f16.pNext = &s8;
    s8.pNext = &s16;
    auto have = vkInfo<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    have.pNext = &f16;
    vk.vkGetPhysicalDeviceFeatures2(physical_, &have);
    auto want = vkInfo<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    want.features.shaderInt64 = have.features.shaderInt64;
    want.features.shaderFloat64 = have.features.shaderFloat64;
    want.features.shaderInt16 = have.features.shaderInt16;
    // Shaders compute in float32; float16 is loaded and stored, which MLIR's SPIR-V conversion
    // types as Float16 (shaderFloat16) with 16-bit storage.
    s8.uniformAndStorageBuffer8BitAccess = VK_FALSE;
    s8.storagePushConstant8 = VK_FALSE;
    s16.uniformAndStorageBuffer16BitAccess = VK_FALSE;
    s16.storagePushConstant16 = VK_FALSE;
    s16.storageInputOutput16 = VK_FALSE;
    // (A 1.1 device gets only the 16-bit storage struct, core there.)
    want.pNext = apiVersion_ < VK_API_VERSION_1_2 ? static_cast<void*>(&s16) : &f16;
    info.pNext = &want;
    // float16/int8 arithmetic and 8-bit storage are core in Vulkan 1.2 (extensions before it,
    // which weft does not enable): a 1.1 device goes without them.
    if (apiVersion_ < VK_API_VERSION_1_2) {
      f16.shaderFloat16 = f16.shaderInt8 = VK_FALSE;
      s8.storageBuffer8BitAccess = s8.uniformAndStorageBuffer8BitAccess = VK_FALSE;
    }
    std::string caps = "Shader", exts = "SPV_KHR_storage_buffer_storage_class";
    if (have.features.shaderInt64) caps += ",Int64";
    if (have.features.shaderFloat64) caps += ",Float64";
    if (have.features.shaderInt16) caps += ",Int16";
    if (f16.shaderInt8) caps += ",Int8";
    if (f16.shaderFloat16) caps += ",Float16";
    if (s8.storageBuffer8BitAccess) {
      caps += ",StorageBuffer8BitAccess";
      exts += ",SPV_KHR_8bit_storage";
    }
    if (s16.storageBuffer16BitAccess) {
      caps += ",StorageBuffer16BitAccess";
      exts += ",SPV_KHR_16bit_storage";
    }
    if (subgroupArithmetic_) caps += ",GroupNonUniform,GroupNonUniformArithmetic";
    limits_.codeTarget = "spirv1.3 caps=" + caps + " exts=" + exts;
    int64_ = have.features.shaderInt64 == VK_TRUE;
    limits_.float64 = have.features.shaderFloat64 == VK_TRUE;
    const char* extensions[] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
    info.enabledExtensionCount = 1;
    info.ppEnabledExtensionNames = extensions;
    WEFT_CHECK(pushDescriptors_, Device, id().str(), " (", name,
               ") lacks VK_KHR_push_descriptor, which weft's Vulkan device binds buffers with");
    check(vk.vkCreateDevice(physical_, &info, nullptr, &device_),
          "vkCreateDevice (with VK_KHR_push_descriptor)");
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
    for (Slot& slot : slots_) {
      check(vkAllocateCommandBuffers(device_, &cb, &slot.commands), "vkAllocateCommandBuffers");
      auto fence = vkInfo<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
      check(vkCreateFence(device_, &fence, nullptr, &slot.fence), "vkCreateFence");
    }
    commands_ = slots_[0].commands;
    openPipelineCache(name);
    fillShaderKernels(registry_);
    // WEFT_PROFILE=trace.json: every dispatch timed by timestamp queries.
    if (timeline::enabled() && families[family].timestampValidBits > 0 && timestampPeriod_ > 0) {
      auto q = vkInfo<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
      q.queryType = VK_QUERY_TYPE_TIMESTAMP;
      q.queryCount = 2 * kMaxRecorded;
      check(vkCreateQueryPool(device_, &q, nullptr, &queries_), "vkCreateQueryPool");
    }
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
    size_t size = sizeClass(nbytes);
    if (size > limits_.maxBufferRange) size = (nbytes + 3) / 4 * 4; // bound whole: within range
    Block b = size <= kSmallBytes ? carve(size) : take(size, false);
    if (zero) {
      std::lock_guard<std::mutex> lock(queueMutex_);
      begin();
      vkCmdFillBuffer(commands_, b.buffer, b.offset, b.size, 0);
      barrier();
    }
    auto handle = reinterpret_cast<uint64_t>(b.buffer);
    return Storage::onDevice(*this, handle, b.offset, nbytes, nullptr, [this, b] { give(b); });
  }

  void copy(const Storage& src, size_t srcOffset, Storage& dst, size_t dstOffset,
            size_t nbytes) override {
    checkRange(src, srcOffset, nbytes, "copy");
    checkRange(dst, dstOffset, nbytes, "copy");
    if (nbytes == 0) return;
    std::lock_guard<std::mutex> lock(queueMutex_);
    begin();
    VkBufferCopy region{src.offset() + srcOffset, dst.offset() + dstOffset, nbytes};
    vkCmdCopyBuffer(commands_, bufferOf(src), bufferOf(dst), 1, &region);
    barrier();
  }

  void upload(const void* host, Storage& dst, size_t dstOffset, size_t nbytes) override {
    checkRange(dst, dstOffset, nbytes, "upload");
    if (nbytes == 0) return;
    std::lock_guard<std::mutex> lock(queueMutex_);
    const size_t at = dst.offset() + dstOffset;
    if (nbytes <= kInlineBytes && nbytes % 4 == 0 && at % 4 == 0) {
      // Small uploads (a scalar, a fill's value) travel in the command buffer: no wait.
      begin();
      vkCmdUpdateBuffer(commands_, bufferOf(dst), at, nbytes, host);
      barrier();
      return;
    }
    for (size_t done = 0; done < nbytes;) {
      const size_t n = std::min(nbytes - done, kStagingBytes);
      flush(); // the staging buffer is free once what was recorded has run
      Block& s = staging();
      std::memcpy(s.mapped, static_cast<const char*>(host) + done, n);
      begin();
      VkBufferCopy region{0, at + done, n};
      vkCmdCopyBuffer(commands_, s.buffer, bufferOf(dst), 1, &region);
      barrier();
      flush();
      done += n;
    }
  }

  void download(const Storage& src, size_t srcOffset, void* host, size_t nbytes) override {
    checkRange(src, srcOffset, nbytes, "download");
    std::lock_guard<std::mutex> lock(queueMutex_);
    for (size_t done = 0; done < nbytes;) {
      const size_t n = std::min(nbytes - done, kStagingBytes);
      Block& s = staging();
      begin();
      VkBufferCopy region{src.offset() + srcOffset + done, 0, n};
      vkCmdCopyBuffer(commands_, bufferOf(src), s.buffer, 1, &region);
      flush();
      std::memcpy(static_cast<char*>(host) + done, s.mapped, n);
      done += n;
    }
  }

  std::optional<int64_t> dispatch(const ShaderKey& key, std::span<const int32_t> params,
                                  std::span<const TensorRef> operands,
                                  std::array<uint32_t, 3> groups) override {
    for (DType t : key.dtypes)
      WEFT_CHECK((t != DType::Int64 || int64_) && (t != DType::Float64 || limits_.float64), DType,
                 id().str(), " (", limits_.name, ") has no ", dtypeName(t),
                 " in shaders: such tensors cannot be computed there");
    const Pipeline& p = pipeline(key);
    std::lock_guard<std::mutex> lock(queueMutex_);
    return record(p, params, operands, groups, key.hasStatus(), [&] { return key.str(); });
  }

  /// Records pipeline `p` with `params` (binding 0) over `operands` in `groups` workgroups, and,
  /// with `status`, a status buffer after them, waited for and read: the out-of-range index a
  /// shader found, if any. `name` names the dispatch on the profile's timeline. The queue mutex
  /// is held.
  std::optional<int64_t> record(const Pipeline& p, std::span<const int32_t> params,
                                std::span<const TensorRef> operands,
                                std::array<uint32_t, 3> groups, bool hasStatus,
                                const std::function<std::string()>& name) {
    const size_t paramBytes = params.size() * sizeof(int32_t);
    const size_t align = std::max<size_t>(limits_.alignment, 16);
    if (hasStatus) {
      flush(); // the status words are read right after this dispatch
      std::memset(status().mapped, 0, 16);
    }
    begin(); // the slot's ring is free once its last submission has run
    size_t at = (ringUsed_ + align - 1) / align * align;
    if (at + paramBytes > kRingBytes) {
      batchFull(); // the next command buffer has a ring of its own
      begin();
      at = 0;
    }
    Block& r = ring();
    std::memcpy(static_cast<char*>(r.mapped) + at, params.data(), paramBytes);
    ringUsed_ = at + paramBytes;
    std::vector<VkDescriptorBufferInfo> buffers;
    buffers.push_back({r.buffer, at, paramBytes});
    for (const TensorRef& t : operands) {
      WEFT_INTERNAL_ASSERT(t.buffer != nullptr && &t.buffer->device() == this,
                           "a shader operand on another device");
      buffers.push_back({bufferOf(*t.buffer), 0, VK_WHOLE_SIZE});
    }
    if (hasStatus) buffers.push_back({status().buffer, 0, 16});
    WEFT_INTERNAL_ASSERT(buffers.size() == p.bindings, "shader ", name(), " takes ", p.bindings,
                         " buffers, given ", buffers.size());
    std::vector<VkWriteDescriptorSet> writes(buffers.size());
    for (size_t i = 0; i < buffers.size(); ++i) {
      writes[i] = vkInfo<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &buffers[i];
    }
    vkCmdBindPipeline(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
    vkCmdPushDescriptorSetKHR(commands_, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0,
                              static_cast<uint32_t>(writes.size()), writes.data());
    const bool timed = queries_ != VK_NULL_HANDLE;
    if (timed) {
      vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_,
                          static_cast<uint32_t>(2 * timedNames_.size()));
      timedNames_.emplace_back(name(), timeline::callSite());
    }
    vkCmdDispatch(commands_, groups[0], groups[1], groups[2]);
    if (timed)
      vkCmdWriteTimestamp(commands_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_,
                          static_cast<uint32_t>(2 * timedNames_.size() - 1));
    barrier();
    // Batches go to the queue as they fill, so the device starts on them while the host
    // records the next (not when timing dispatches: their queries are read at each flush).
    if (++recorded_ >= (queries_ != VK_NULL_HANDLE ? kMaxRecorded : kSubmitEvery)) batchFull();
    if (!hasStatus) return std::nullopt;
    flush();
    const auto* words = static_cast<const uint32_t*>(status().mapped);
    if (words[0] == 0) return std::nullopt;
    return static_cast<int64_t>((static_cast<uint64_t>(words[2]) << 32) | words[1]);
  }

  std::string cannotRun(const CodeObject& code) const override {
    if (code.format != kSpirvKernelsFormat)
      return "it is " + code.format + " code, and " + id().str() + " runs " + kSpirvKernelsFormat;
    return spirvTargetMismatch(code.target, limits_.codeTarget);
  }

  /// A program's fused kernels as pipelines, destroyed with it (after what was recorded ran).
  class LoadedKernels final : public LoadedCode {
  public:
    explicit LoadedKernels(VulkanDevice& device) : device_(device) {}
    ~LoadedKernels() override {
      std::lock_guard<std::mutex> lock(device_.queueMutex_);
      try {
        device_.flush();
      } catch (const Error&) { // a lost device: nothing of it runs any more
      }
      for (const Pipeline& p : pipelines)
        device_.destroy(p);
    }
    size_t numKernels() const override { return points.size(); }
    std::vector<Pipeline> pipelines;       // per distinct kernel
    std::vector<size_t> pipelineOf;        // per kernel of the table
    std::vector<uint32_t> workgroupSize;   // per distinct kernel
    std::vector<int64_t> points;           // per kernel of the table
    std::vector<std::string> names;        // per kernel of the table

  private:
    VulkanDevice& device_;
  };

  std::shared_ptr<const LoadedCode> load(const CodeObject& code,
                                         std::span<const KernelInfo> kernels) override {
    const std::string why = cannotRun(code);
    WEFT_CHECK(why.empty(), Device, id().str(), ": cannot load ", code.format, " code for '",
               code.target, "': ", why);
    const std::vector<SpirvKernel> held = unpackSpirvKernels(code.bytes);
    auto loaded = std::make_shared<LoadedKernels>(*this);
    std::map<std::string, size_t> made; // symbol -> pipeline
    for (const KernelInfo& k : kernels) {
      auto it = made.find(k.symbol);
      if (it == made.end()) {
        auto in = std::find_if(held.begin(), held.end(),
                               [&](const SpirvKernel& h) { return h.symbol == k.symbol; });
        WEFT_CHECK(in != held.end(), Device, id().str(), ": the code object lacks kernel ",
                   k.symbol);
        WEFT_CHECK(in->workgroupSize <= limits_.maxWorkgroupInvocations, Device, id().str(),
                   ": kernel ", k.symbol, " runs ", in->workgroupSize,
                   " invocations per workgroup, more than the device's ",
                   limits_.maxWorkgroupInvocations);
        WEFT_CHECK(in->bindings <= limits_.maxStorageBuffers, Device, id().str(), ": kernel ",
                   k.symbol, " binds ", in->bindings, " buffers, more than the device's ",
                   limits_.maxStorageBuffers);
        WEFT_CHECK(in->workgroupSize <= limits_.maxWorkgroupSize[0], Device, id().str(),
                   ": kernel ", k.symbol, " runs workgroups of ", in->workgroupSize,
                   " invocations along x, more than the device's ", limits_.maxWorkgroupSize[0]);
        loaded->pipelines.push_back(makePipeline(in->words, in->bindings));
        loaded->workgroupSize.push_back(in->workgroupSize);
        it = made.emplace(k.symbol, loaded->pipelines.size() - 1).first;
      }
      loaded->pipelineOf.push_back(it->second);
      loaded->points.push_back(k.rows);
      loaded->names.push_back("kernel " + k.symbol);
    }
    std::lock_guard<std::mutex> lock(pipelineMutex_);
    savePipelineCache();
    return loaded;
  }

  void launch(const LoadedCode& code, size_t kernel, std::span<const TensorRef> inputs,
              std::span<const TensorRef> outputs) override {
    const auto* loaded = dynamic_cast<const LoadedKernels*>(&code);
    WEFT_INTERNAL_ASSERT(loaded != nullptr && kernel < loaded->points.size(),
                         id().str(), ": launching a kernel not loaded on this device");
    const size_t which = loaded->pipelineOf[kernel];
    std::vector<TensorRef> operands(inputs.begin(), inputs.end());
    operands.insert(operands.end(), outputs.begin(), outputs.end());
    std::vector<int32_t> params;
    for (const TensorRef& t : operands)
      params.push_back(static_cast<int32_t>(shaderOffset(t, loaded->names[kernel])));
    const int64_t wg = loaded->workgroupSize[which];
    const auto groups = static_cast<uint32_t>(
        std::clamp<int64_t>((loaded->points[kernel] + wg - 1) / wg, 1, 65535));
    std::lock_guard<std::mutex> lock(queueMutex_);
    record(loaded->pipelines[which], params, operands, {groups, 1, 1}, false,
           [&] { return loaded->names[kernel]; });
  }

  void destroy(const Pipeline& p) {
    vkDestroyPipeline(device_, p.pipeline, nullptr);
    vkDestroyPipelineLayout(device_, p.layout, nullptr);
    vkDestroyDescriptorSetLayout(device_, p.setLayout, nullptr);
  }
  void synchronize() override {
    std::lock_guard<std::mutex> lock(queueMutex_);
    flush();
  }

private:
  static constexpr size_t kStagingBytes = size_t{16} << 20;
  static constexpr size_t kRingBytes = size_t{4} << 20; // dispatch parameters between submits
  static constexpr size_t kInlineBytes = 65536;         // vkCmdUpdateBuffer's limit
  static constexpr int kMaxRecorded = 4096; // dispatches per submit when timing them
  bool pushDescriptors_ = false;
  static constexpr size_t kSlabBytes = size_t{32} << 20; // small tensors are carved from these
  static constexpr size_t kSmallBytes = size_t{1} << 20;

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
    limits_.maxAllocation = static_cast<size_t>(m3.maxMemoryAllocationSize);
    limits_.maxBufferRange = l.maxStorageBufferRange;
    limits_.alignment = static_cast<size_t>(l.minStorageBufferOffsetAlignment);
    limits_.sharedMemoryBytes = l.maxComputeSharedMemorySize;
    limits_.maxWorkgroupInvocations = l.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; ++i)
      limits_.maxWorkgroupSize[static_cast<size_t>(i)] = l.maxComputeWorkGroupSize[i];
    limits_.subgroupSize = subgroup.subgroupSize;
    subgroupArithmetic_ = (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT) &&
                          (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT);
    apiVersion_ = props.properties.apiVersion;
    limits_.float16 = f16.shaderFloat16 == VK_TRUE;
    limits_.int8 = f16.shaderInt8 == VK_TRUE;
    uint32_t count = 0;
    vk.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &count, nullptr);
    std::vector<VkExtensionProperties> extensions(count);
    vk.vkEnumerateDeviceExtensionProperties(physical_, nullptr, &count, extensions.data());
    extensions.resize(count);
    auto offers = [&](const char* name) {
      return std::any_of(extensions.begin(), extensions.end(), [&](const VkExtensionProperties& e) {
        return std::strcmp(e.extensionName, name) == 0;
      });
    };
    pushDescriptors_ = offers(VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    limits_.maxStorageBuffers = l.maxPerStageDescriptorStorageBuffers;
    if (pushDescriptors_) { // every binding of a dispatch is pushed
      auto push = vkInfo<VkPhysicalDevicePushDescriptorPropertiesKHR>(
          VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR);
      auto more =
          vkInfo<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
      more.pNext = &push;
      vk.vkGetPhysicalDeviceProperties2(physical_, &more);
      limits_.maxStorageBuffers = std::min(limits_.maxStorageBuffers, push.maxPushDescriptors);
    }
    limits_.bfloat16 = offers("VK_KHR_shader_bfloat16");
    if (offers("VK_KHR_cooperative_matrix") && vk.cooperativeMatrixProperties != nullptr) {
      uint32_t shapes = 0;
      vk.cooperativeMatrixProperties(physical_, &shapes, nullptr);
      std::vector<CooperativeMatrixProperties> found(shapes);
      for (CooperativeMatrixProperties& p : found)
        p.sType = kCooperativeMatrixPropertiesType;
      vk.cooperativeMatrixProperties(physical_, &shapes, found.data());
      found.resize(shapes);
      for (const CooperativeMatrixProperties& p : found)
        limits_.cooperativeMatrix.push_back(
            {p.mSize, p.nSize, p.kSize, componentName(p.aType), componentName(p.bType),
             componentName(p.cType), componentName(p.resultType), scopeName(p.scope)});
    }
    timestampPeriod_ = l.timestampComputeAndGraphics ? l.timestampPeriod : 0.0f;
    cacheName_ = std::to_string(props.properties.vendorID) + "-" +
                 std::to_string(props.properties.deviceID) + "-" +
                 std::to_string(props.properties.driverVersion);
  }

  /// The pipeline cache, read from the disk cache's directory where there is one.
  void openPipelineCache(const std::string&) {
    std::vector<char> data;
    ShaderSource source = shaderSource();
    if (source.cacheDir != nullptr) {
      std::string dir = source.cacheDir();
      if (!dir.empty()) {
        cachePath_ = dir + "/vulkan-pipelines-" + cacheName_ + ".bin";
        std::ifstream in(cachePath_, std::ios::binary);
        data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
    }
    auto info = vkInfo<VkPipelineCacheCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO);
    info.initialDataSize = data.size();
    info.pInitialData = data.empty() ? nullptr : data.data();
    // A cache the driver rejects (another driver's) is replaced by an empty one.
    if (vkCreatePipelineCache(device_, &info, nullptr, &pipelineCache_) != VK_SUCCESS) {
      info.initialDataSize = 0;
      info.pInitialData = nullptr;
      check(vkCreatePipelineCache(device_, &info, nullptr, &pipelineCache_),
            "vkCreatePipelineCache");
    }
  }

  /// Writes the pipeline cache back (atomically: a temporary file renamed over the old one).
  void savePipelineCache() {
    if (cachePath_.empty()) return;
    size_t n = 0;
    if (vkGetPipelineCacheData(device_, pipelineCache_, &n, nullptr) != VK_SUCCESS) return;
    std::vector<char> data(n);
    if (vkGetPipelineCacheData(device_, pipelineCache_, &n, data.data()) != VK_SUCCESS) return;
    const std::string tmp = cachePath_ + ".tmp" + std::to_string(getpid()) + "-" +
                            std::to_string(reinterpret_cast<uintptr_t>(this));
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      if (!out.write(data.data(), static_cast<std::streamsize>(n))) return;
    }
    std::rename(tmp.c_str(), cachePath_.c_str());
  }

  /// The pipeline of shader `key` or why there is none, made at first use.
  const Pipeline& entry(const ShaderKey& key) {
    const std::string name = key.str();
    std::lock_guard<std::mutex> lock(pipelineMutex_);
    auto it = pipelines_.find(name);
    if (it == pipelines_.end()) it = pipelines_.emplace(name, makePipeline(key)).first;
    return it->second;
  }
  /// The pipeline of shader `key` (a DeviceError where codegen has none).
  const Pipeline& pipeline(const ShaderKey& key) {
    const Pipeline& p = entry(key);
    WEFT_CHECK(p.error.empty(), Device, id().str(), " has no kernel for ", opName(key.op), " (",
               key.str(), "): ", p.error);
    return p;
  }
  std::string shaderError(const ShaderKey& key) override { return entry(key).error; }

  Pipeline makePipeline(const ShaderKey& key) {
    Pipeline p;
    ShaderSource source = shaderSource();
    if (source.compile == nullptr) {
      p.error = "no shader compiler in this process (link weft's codegen library, or load an "
                "artifact that carries its shaders)";
      return p;
    }
    ShaderCode code = source.compile(key, limits_.codeTarget);
    if (!code.error.empty()) {
      p.error = code.error;
      return p;
    }
    p = makePipeline(code.words,
                     static_cast<uint32_t>(key.dtypes.size() + 1 + (key.hasStatus() ? 1 : 0)));
    savePipelineCache(); // (pipelineMutex_ held by entry())
    return p;
  }

  /// A pipeline running SPIR-V `words` (entry point "main") over `count` storage buffers.
  Pipeline makePipeline(const std::vector<uint32_t>& words, uint32_t count) {
    Pipeline p;
    p.bindings = count;
    std::vector<VkDescriptorSetLayoutBinding> bindings(p.bindings);
    for (uint32_t i = 0; i < p.bindings; ++i) {
      bindings[i].binding = i;
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    auto set = vkInfo<VkDescriptorSetLayoutCreateInfo>(
        VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    set.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR;
    set.bindingCount = p.bindings;
    set.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(device_, &set, nullptr, &p.setLayout),
          "vkCreateDescriptorSetLayout");
    auto layout = vkInfo<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &p.setLayout;
    check(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout), "vkCreatePipelineLayout");
    auto module = vkInfo<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    module.codeSize = words.size() * sizeof(uint32_t);
    module.pCode = words.data();
    VkShaderModule shader = VK_NULL_HANDLE;
    check(vkCreateShaderModule(device_, &module, nullptr, &shader), "vkCreateShaderModule");
    auto info = vkInfo<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    info.stage = vkInfo<VkPipelineShaderStageCreateInfo>(
        VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = shader;
    info.stage.pName = "main";
    info.layout = p.layout;
    VkResult r = vkCreateComputePipelines(device_, pipelineCache_, 1, &info, nullptr, &p.pipeline);
    vkDestroyShaderModule(device_, shader, nullptr);
    check(r, "vkCreateComputePipelines");
    return p;
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

  /// A block of exactly `size` bytes: a freed one of that size, or a new one. A freed block may
  /// still be read or written by recorded work; what uses it next is recorded after that work
  /// and ordered behind it by the barrier each command ends with.
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

  /// A piece of `size` bytes (a size class of at most kSmallBytes) of a slab: a freed piece of
  /// that size, or the next bytes of the current slab, or of a new one. Drivers allow only so many
  /// allocations (4096 on many GPUs): small tensors share them.
  Block carve(size_t size) {
    {
      std::lock_guard<std::mutex> lock(cacheMutex_);
      auto it = freePieces_.find(size);
      if (it != freePieces_.end()) {
        Block b = it->second;
        freePieces_.erase(it);
        return b;
      }
      if (slab_.buffer != VK_NULL_HANDLE && slabUsed_ + size <= kSlabBytes) {
        Block b = slab_;
        b.offset = slabUsed_;
        b.size = size;
        b.carved = true;
        slabUsed_ += size;
        return b;
      }
    }
    Block fresh = take(kSlabBytes, false); // outside the lock: it may release idle blocks
    std::lock_guard<std::mutex> lock(cacheMutex_);
    slab_ = fresh;
    slabUsed_ = size;
    Block b = fresh;
    b.size = size;
    b.carved = true;
    return b;
  }

  /// Keeps a freed block (or piece of a slab) for reuse. Slabs are never freed.
  void give(const Block& b) {
    std::lock_guard<std::mutex> lock(cacheMutex_);
    (b.carved ? freePieces_ : free_).emplace(b.size, b);
  }

  /// Frees the cache's idle blocks, once the recorded work (which may use them) has run.
  void release() {
    // The queue's lock is held throughout, so no block joins the idle ones between the flush and
    // their destruction while recorded work still uses it.
    std::lock_guard<std::mutex> queue(queueMutex_);
    flush();
    std::lock_guard<std::mutex> lock(cacheMutex_);
    for (auto& [size, b] : free_) {
      vkDestroyBuffer(device_, b.buffer, nullptr);
      vkFreeMemory(device_, b.memory, nullptr);
    }
    free_.clear();
  }

  /// The host-visible buffers, made at first use: staging for copies, the dispatch parameters'
  /// ring, the index checks' status words.
  Block& hostBlock(Block& b, size_t size) {
    if (b.buffer == VK_NULL_HANDLE) b = take(size, true);
    return b;
  }
  Block& staging() { return hostBlock(staging_, kStagingBytes); }
  Block& ring() { return hostBlock(slots_[current_].ring, kRingBytes); }
  Block& status() { return hostBlock(status_, 256); }

  /// Opens the current slot's command buffer for recording unless it is open (the queue mutex
  /// held), once what the slot last submitted has run.
  void begin() {
    if (open_) return;
    Slot& slot = slots_[current_];
    if (slot.pending) {
      check(vkWaitForFences(device_, 1, &slot.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
      check(vkResetFences(device_, 1, &slot.fence), "vkResetFences");
      slot.pending = false;
    }
    ringUsed_ = 0;
    check(vkResetCommandBuffer(commands_, 0), "vkResetCommandBuffer");
    auto info = vkInfo<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    info.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    check(vkBeginCommandBuffer(commands_, &info), "vkBeginCommandBuffer");
    if (queries_ != VK_NULL_HANDLE) vkCmdResetQueryPool(commands_, queries_, 0, 2 * kMaxRecorded);
    timedNames_.clear(); // (left over only where a submission failed)
    open_ = true;
  }

  /// Orders everything recorded so far before whatever is recorded next: each command reads what
  /// the ones before it wrote, and may write what they read.
  void barrier() {
    auto b = vkInfo<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                      VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(commands_, stages, stages, 0, 1, &b, 0, nullptr, 0, nullptr);
  }

  /// Ends a full batch: submitted without waiting, or (timing dispatches, whose queries each
  /// flush reads) waited for.
  void batchFull() {
    if (queries_ != VK_NULL_HANDLE)
      flush();
    else
      submit();
  }

  /// Submits what was recorded without waiting for it, and moves on to the next slot.
  void submit() {
    if (!open_) return;
    open_ = false;
    recorded_ = 0;
    check(vkEndCommandBuffer(commands_), "vkEndCommandBuffer");
    auto info = vkInfo<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    info.commandBufferCount = 1;
    info.pCommandBuffers = &commands_;
    Slot& slot = slots_[current_];
    check(vkQueueSubmit(queue_, 1, &info, slot.fence), "vkQueueSubmit");
    slot.pending = true;
    current_ = (current_ + 1) % kSlots;
    commands_ = slots_[current_].commands;
  }

  /// Submits what was recorded and waits for everything submitted; its writes are then visible
  /// to the host.
  void flush() {
    const bool any = open_ || std::any_of(slots_.begin(), slots_.end(),
                                          [](const Slot& slot) { return slot.pending; });
    if (!any) return;
    begin(); // (an empty one, where everything went already: it carries the host's barrier)
    auto b = vkInfo<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(commands_,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &b, 0, nullptr, 0, nullptr);
    const double submitted = timeline::nowUs();
    submit();
    for (Slot& slot : slots_) {
      if (!slot.pending) continue;
      check(vkWaitForFences(device_, 1, &slot.fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
      check(vkResetFences(device_, 1, &slot.fence), "vkResetFences");
      slot.pending = false;
    }
    if (!timedNames_.empty()) recordTimes(submitted);
  }

  /// The dispatches of the submission that began at `submitted` (host microseconds) on the
  /// queue's track: their device times, the first placed at the submission (the device's clock
  /// is not the host's; only their differences are).
  void recordTimes(double submitted) {
    std::vector<uint64_t> ticks(2 * timedNames_.size());
    if (vkGetQueryPoolResults(device_, queries_, 0, static_cast<uint32_t>(ticks.size()),
                              ticks.size() * sizeof(uint64_t), ticks.data(), sizeof(uint64_t),
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) == VK_SUCCESS) {
      const std::string track = id().str() + " queue (device time)";
      const double us = timestampPeriod_ / 1000.0;
      for (size_t i = 0; i < timedNames_.size(); ++i)
        timeline::record(std::move(timedNames_[i].first), "gpu",
                         submitted + static_cast<double>(ticks[2 * i] - ticks[0]) * us,
                         static_cast<double>(ticks[2 * i + 1] - ticks[2 * i]) * us,
                         std::move(timedNames_[i].second), track);
    }
    timedNames_.clear();
  }

  WEFT_VK_DEVICE(WEFT_VK_DECLARE)
  int index_;
  VkPhysicalDevice physical_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  /// Command buffers in flight: one records while the others run, each with the fence of its
  /// last submission and a ring of its own for its dispatches' parameters.
  struct Slot {
    VkCommandBuffer commands = VK_NULL_HANDLE;
    VkFence fence = VK_NULL_HANDLE;
    Block ring;
    bool pending = false; // submitted, its fence not yet waited for
  };
  static constexpr int kSlots = 3;
  static constexpr int kSubmitEvery = 128; // dispatches per submission while recording goes on
  std::array<Slot, kSlots> slots_;
  int current_ = 0;
  VkCommandBuffer commands_ = VK_NULL_HANDLE; // the current slot's
  VkPipelineCache pipelineCache_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;                         // with WEFT_PROFILE=trace.json
  std::vector<std::pair<std::string, std::string>> timedNames_; // (shader, caller) per dispatch
  float timestampPeriod_ = 0;                                    // nanoseconds per tick
  bool open_ = false;
  bool int64_ = false;
  bool subgroupArithmetic_ = false; // subgroup reductions in compute shaders
  uint32_t apiVersion_ = 0;
  int recorded_ = 0;
  size_t ringUsed_ = 0;
  Block staging_, status_;
  Limits limits_;
  KernelRegistry registry_;
  std::string cacheName_, cachePath_;
  std::mutex queueMutex_, cacheMutex_, pipelineMutex_;
  std::multimap<size_t, Block> free_, freePieces_;
  Block slab_;
  size_t slabUsed_ = 0;
  std::map<std::string, Pipeline> pipelines_;
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
  return vulkan::validationMessages();
}

} // namespace weft::hal
