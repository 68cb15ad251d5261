// The Vulkan loader and instance as weft opens them (VulkanDevice.cpp's devices are made from
// them): the entry points weft calls, loaded through vkGetInstanceProcAddr at first use (the
// runtime runs where there is no loader), the Khronos validation layer on request, and the
// physical devices in weft's order of preference. Internal to the runtime.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>
#include <vector>

namespace weft::hal::vulkan {

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
  X(vkEnumerateDeviceExtensionProperties)                                                          \
  X(vkCreateDebugUtilsMessengerEXT)

#define WEFT_VK_DECLARE(name) PFN_##name name = nullptr;

// VK_KHR_cooperative_matrix (Vulkan headers 1.3.255) is newer than Debian 12's headers (1.3.239):
// its properties query as the specification defines it.
constexpr auto kCooperativeMatrixPropertiesType = static_cast<VkStructureType>(1000506001);
struct CooperativeMatrixProperties {
  VkStructureType sType;
  void* pNext;
  uint32_t mSize, nSize, kSize;
  int32_t aType, bType, cType, resultType; // VkComponentTypeKHR
  VkBool32 saturatingAccumulation;
  int32_t scope; // VkScopeKHR
};
using CooperativeMatrixQuery = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*,
                                                   CooperativeMatrixProperties*);

/// A VkComponentTypeKHR's name ("float16", "bfloat16", ...).
std::string componentName(int32_t t);
/// A VkScopeKHR's name ("subgroup", ...).
std::string scopeName(int32_t s);

/// A Vulkan info or properties struct of type `T`, zeroed, its sType set.
template <typename T> T vkInfo(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

/// The loader, the instance and the physical devices in weft's order; made once, never destroyed
/// (tensors may outlive statics). `why` says why there are none.
class Instance {
public:
  static Instance& get();
  WEFT_VK_INSTANCE(WEFT_VK_DECLARE)
  CooperativeMatrixQuery cooperativeMatrixProperties = nullptr; // null: the loader lacks it
  VkInstance instance = VK_NULL_HANDLE;
  std::vector<VkPhysicalDevice> devices;
  std::vector<std::string> names;
  bool validation = false;
  std::string why;

private:
  Instance();
};

/// The messages the validation layer has reported (each also printed to stderr).
int64_t validationMessages();

} // namespace weft::hal::vulkan
