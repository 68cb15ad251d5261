// The Vulkan loader and instance (VulkanInstance.h).
#include "VulkanInstance.h"

#include "weft/runtime/DebugFlags.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <optional>

namespace weft::hal::vulkan {
namespace {

std::atomic<int64_t> gValidationMessages{0};

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

} // namespace

/// A VkComponentTypeKHR's name.
std::string componentName(int32_t t) {
  static const char* const names[] = {"float16", "float32", "float64", "int8",   "int16",  "int32",
                                      "int64",   "uint8",   "uint16",  "uint32", "uint64"};
  if (t >= 0 && t < 11) return names[t];
  if (t == 1000141000) return "bfloat16";
  if (t == 1000491002) return "float8_e4m3";
  if (t == 1000491003) return "float8_e5m2";
  return "type " + std::to_string(t);
}

/// A VkScopeKHR's name.
std::string scopeName(int32_t s) {
  switch (s) {
  case 1:
    return "device";
  case 2:
    return "workgroup";
  case 3:
    return "subgroup";
  case 5:
    return "queue family";
  default:
    return "scope " + std::to_string(s);
  }
}

Instance& Instance::get() {
  static Instance* instance = new Instance();
  return *instance;
}

Instance::Instance() {
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
  cooperativeMatrixProperties = reinterpret_cast<CooperativeMatrixQuery>(
      getProc(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
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

int64_t validationMessages() {
  return gValidationMessages.load();
}

} // namespace weft::hal::vulkan
