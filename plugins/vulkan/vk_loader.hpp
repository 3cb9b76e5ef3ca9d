// The Vulkan entry points the plugin uses, resolved at run time from the Vulkan loader
// (libvulkan.so.1) through vkGetInstanceProcAddr / vkGetDeviceProcAddr, and the GLSL compiler
// (libshaderc.so.1), also opened at run time. Nothing links either library: a machine without
// them still loads the plugin, which then reports 0 devices (no loader) or refuses GLSL builds
// (no shaderc) and says why.
#pragma once

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace parenchyma::vulkan {

// X-macro lists, one line per entry point, so the tables and the resolvers cannot drift apart.
// Global: resolved with a NULL instance.
#define PCY_VULKAN_GLOBAL_FUNCTIONS(X)                                                             \
  X(vkCreateInstance)                                                                              \
  X(vkEnumerateInstanceVersion)

// Instance-level: resolved once the instance exists.
#define PCY_VULKAN_INSTANCE_FUNCTIONS(X)                                                           \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties)                                                                 \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceFeatures2)                                                                  \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkCreateDevice)                                                                                \
  X(vkEnumerateDeviceExtensionProperties)                                                          \
  X(vkGetDeviceProcAddr)

// Device-level: resolved per VkDevice (each context's own table).
#define PCY_VULKAN_DEVICE_FUNCTIONS(X)                                                             \
  X(vkDestroyDevice)                                                                               \
  X(vkGetDeviceQueue)                                                                              \
  X(vkDeviceWaitIdle)                                                                              \
  X(vkQueueSubmit)                                                                                 \
  X(vkQueueWaitIdle)                                                                               \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkBindBufferMemory)                                                                            \
  X(vkMapMemory)                                                                                   \
  X(vkUnmapMemory)                                                                                 \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkFreeCommandBuffers)                                                                          \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkResetCommandBuffer)                                                                          \
  X(vkCmdCopyBuffer)                                                                               \
  X(vkCmdFillBuffer)                                                                               \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdBindDescriptorSets)                                                                       \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdDispatch)                                                                                 \
  X(vkCreateSemaphore)                                                                             \
  X(vkDestroySemaphore)                                                                            \
  X(vkWaitSemaphores)                                                                              \
  X(vkGetSemaphoreCounterValue)                                                                    \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateComputePipelines)                                                                      \
  X(vkCreatePipelineCache)                                                                         \
  X(vkDestroyPipelineCache)                                                                        \
  X(vkGetPipelineCacheData)                                                                        \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreateDescriptorPool)                                                                        \
  X(vkDestroyDescriptorPool)                                                                       \
  X(vkAllocateDescriptorSets)                                                                      \
  X(vkUpdateDescriptorSets)                                                                        \
  X(vkGetBufferDeviceAddress)

#define PCY_VULKAN_MEMBER(fn) PFN_##fn fn = nullptr;

// The loader's global and instance-level entry points, and the instance itself.
struct vk_api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PCY_VULKAN_GLOBAL_FUNCTIONS(PCY_VULKAN_MEMBER)
  PCY_VULKAN_INSTANCE_FUNCTIONS(PCY_VULKAN_MEMBER)
  VkInstance instance = VK_NULL_HANDLE;
  uint32_t instance_version = 0; // VK_API_VERSION of the loader

  // Loads `library`, creates an instance (Vulkan 1.2) and resolves every entry point. On
  // failure returns false and sets `why` to a sentence that says what is missing and what to do.
  bool load(const char* library, std::string& why);
  // Destroys the instance (the library stays loaded, see load()).
  void unload() noexcept;
};

// One VkDevice's entry points.
struct vk_device_api {
  PCY_VULKAN_DEVICE_FUNCTIONS(PCY_VULKAN_MEMBER)
  // Of an extension the device may lack (resolved apart, NULL without it):
  // VK_EXT_external_memory_host.
  PFN_vkGetMemoryHostPointerPropertiesEXT vkGetMemoryHostPointerPropertiesEXT = nullptr;
  // Resolves every entry point; the name of the first missing one on failure, else "".
  std::string load(const vk_api& vk, VkDevice device);
};

#undef PCY_VULKAN_MEMBER

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for -2; "VK_ERROR_UNKNOWN" for a code no header names here.
const char* vk_result_name(VkResult r) noexcept;

// ---- shaderc (GLSL -> SPIR-V), its C API declared here so that only the library is needed ----
// The values are those of shaderc's headers (shaderc/shaderc.h, env.h, status.h), which keep
// them stable across releases.
struct shaderc_api {
  using compiler = void*;
  using options = void*;
  using result = void*;
  static constexpr int compute_shader = 2;    // shaderc_glsl_compute_shader
  static constexpr int target_env_vulkan = 0; // shaderc_target_env_vulkan
  static constexpr uint32_t env_vulkan_1_2 = (1u << 22) | (2u << 12);
  static constexpr int status_success = 0;           // shaderc_compilation_status_success
  static constexpr int optimization_zero = 0;        // shaderc_optimization_level_zero
  static constexpr int optimization_performance = 2; // shaderc_optimization_level_performance

  compiler (*compiler_initialize)() = nullptr;
  void (*compiler_release)(compiler) = nullptr;
  options (*compile_options_initialize)() = nullptr;
  void (*compile_options_release)(options) = nullptr;
  void (*compile_options_set_target_env)(options, int, uint32_t) = nullptr;
  void (*compile_options_set_optimization_level)(options, int) = nullptr;
  void (*compile_options_add_macro_definition)(options, const char*, size_t, const char*,
                                               size_t) = nullptr;
  result (*compile_into_spv)(compiler, const char*, size_t, int, const char*, const char*,
                             options) = nullptr;
  void (*result_release)(result) = nullptr;
  size_t (*result_get_length)(result) = nullptr;
  const char* (*result_get_bytes)(result) = nullptr;
  int (*result_get_compilation_status)(result) = nullptr;
  const char* (*result_get_error_message)(result) = nullptr;

  // Loads `library` and resolves the functions above; false with `why` on failure.
  bool load(const char* library, std::string& why);
  bool loaded() const noexcept { return compile_into_spv != nullptr; }
};

} // namespace parenchyma::vulkan
