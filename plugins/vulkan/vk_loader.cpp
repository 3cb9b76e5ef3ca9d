// Run-time loading of the Vulkan loader and of shaderc, and the table of VkResult names.
#include "vk_loader.hpp"

#include <parenchyma/sdk/library.hpp>

namespace parenchyma::vulkan {

bool vk_api::load(const char* library, std::string& why) {
  // RTLD_NODELETE: ICDs (Mesa's, NVIDIA's) keep threads and exit handlers that call into the
  // loader; unloading it under them would crash at process exit. Each plugin instance shares
  // the one mapping; the library is never unloaded (Windows: the same effect).
  sdk::os::library lib;
  if (const std::string err = lib.open(sdk::os::path_from_utf8(library), true); !err.empty()) {
    why = std::string(library) + " not found (" + err +
          "): install the Vulkan loader (Debian: libvulkan1) and a driver (mesa-vulkan-drivers "
          "for lavapipe on the CPU, or the GPU vendor's driver)";
    return false;
  }
  vk_api api;
  api.vkGetInstanceProcAddr = lib.function<PFN_vkGetInstanceProcAddr>("vkGetInstanceProcAddr");
  if (api.vkGetInstanceProcAddr == nullptr) {
    why = std::string(library) + " has no vkGetInstanceProcAddr: it is not a Vulkan loader";
    return false;
  }
  lib.leak(); // loaded for the rest of the process (above)
#define PCY_VULKAN_RESOLVE_GLOBAL(fn)                                                              \
  api.fn = reinterpret_cast<PFN_##fn>(api.vkGetInstanceProcAddr(VK_NULL_HANDLE, #fn));
  PCY_VULKAN_GLOBAL_FUNCTIONS(PCY_VULKAN_RESOLVE_GLOBAL)
#undef PCY_VULKAN_RESOLVE_GLOBAL
  if (api.vkCreateInstance == nullptr) {
    why = std::string(library) + " does not resolve vkCreateInstance: a broken Vulkan loader";
    return false;
  }
  api.instance_version = VK_API_VERSION_1_0;
  if (api.vkEnumerateInstanceVersion != nullptr)
    api.vkEnumerateInstanceVersion(&api.instance_version);
  if (api.instance_version < VK_API_VERSION_1_2) {
    why = "the Vulkan loader speaks " + std::to_string(VK_API_VERSION_MAJOR(api.instance_version)) +
          "." + std::to_string(VK_API_VERSION_MINOR(api.instance_version)) +
          ", this plugin needs Vulkan 1.2 (timeline semaphores): update libvulkan1";
    return false;
  }

  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "parenchyma";
  app.pEngineName = "parenchyma-vulkan";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  const VkResult r = api.vkCreateInstance(&info, nullptr, &api.instance);
  if (r != VK_SUCCESS) {
    why = std::string("vkCreateInstance: ") + vk_result_name(r) +
          (r == VK_ERROR_INCOMPATIBLE_DRIVER
               ? ": no Vulkan driver is installed (Debian: mesa-vulkan-drivers, or the GPU "
                 "vendor's driver); check VK_ICD_FILENAMES and /usr/share/vulkan/icd.d"
               : ": the Vulkan installation looks broken; run vulkaninfo to see why");
    return false;
  }
  std::string missing;
#define PCY_VULKAN_RESOLVE_INSTANCE(fn)                                                            \
  api.fn = reinterpret_cast<PFN_##fn>(api.vkGetInstanceProcAddr(api.instance, #fn));               \
  if (api.fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(#fn);
  PCY_VULKAN_INSTANCE_FUNCTIONS(PCY_VULKAN_RESOLVE_INSTANCE)
#undef PCY_VULKAN_RESOLVE_INSTANCE
  if (!missing.empty()) {
    auto destroy = reinterpret_cast<PFN_vkDestroyInstance>(
        api.vkGetInstanceProcAddr(api.instance, "vkDestroyInstance"));
    if (destroy != nullptr) destroy(api.instance, nullptr);
    why = std::string(library) + " lacks " + missing + ": a Vulkan 1.2 loader is needed";
    return false;
  }
  *this = api;
  return true;
}

void vk_api::unload() noexcept {
  if (instance != VK_NULL_HANDLE && vkDestroyInstance != nullptr)
    vkDestroyInstance(instance, nullptr);
  instance = VK_NULL_HANDLE;
}

std::string vk_device_api::load(const vk_api& vk, VkDevice device) {
#define PCY_VULKAN_RESOLVE_DEVICE(fn)                                                              \
  fn = reinterpret_cast<PFN_##fn>(vk.vkGetDeviceProcAddr(device, #fn));                            \
  if (fn == nullptr) return #fn;
  PCY_VULKAN_DEVICE_FUNCTIONS(PCY_VULKAN_RESOLVE_DEVICE)
#undef PCY_VULKAN_RESOLVE_DEVICE
  return {};
}

bool shaderc_api::load(const char* library, std::string& why) {
  sdk::os::library lib;
  if (const std::string err = lib.open(sdk::os::path_from_utf8(library), true); !err.empty()) {
    why = std::string(library) + " not found (" + err + ")";
    return false;
  }
  shaderc_api api;
  // The plugin's own GLSL module (glsl/glsl_compiler.cpp) fills the table itself.
  using table_fn = size_t (*)(shaderc_api*);
  if (auto table = lib.function<table_fn>("pcy_vulkan_glsl_table")) {
    if (table(&api) != sizeof(shaderc_api) || !api.loaded()) {
      why = std::string(library) + " is the GLSL module of another build of the Vulkan plugin: "
                                   "reinstall the plugin with its plugins/vulkan folder";
      return false;
    }
    lib.leak();
    *this = api;
    return true;
  }
  std::string missing;
  auto get = [&](auto& fn, const char* name) {
    fn = lib.function<std::remove_reference_t<decltype(fn)>>(name);
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  get(api.compiler_initialize, "shaderc_compiler_initialize");
  get(api.compiler_release, "shaderc_compiler_release");
  get(api.compile_options_initialize, "shaderc_compile_options_initialize");
  get(api.compile_options_release, "shaderc_compile_options_release");
  get(api.compile_options_set_target_env, "shaderc_compile_options_set_target_env");
  get(api.compile_options_set_optimization_level, "shaderc_compile_options_set_optimization_level");
  get(api.compile_options_add_macro_definition, "shaderc_compile_options_add_macro_definition");
  get(api.compile_into_spv, "shaderc_compile_into_spv");
  get(api.result_release, "shaderc_result_release");
  get(api.result_get_length, "shaderc_result_get_length");
  get(api.result_get_bytes, "shaderc_result_get_bytes");
  get(api.result_get_compilation_status, "shaderc_result_get_compilation_status");
  get(api.result_get_error_message, "shaderc_result_get_error_message");
  if (!missing.empty()) {
    why = std::string(library) + " lacks " + missing + ": not a usable shaderc";
    return false;
  }
  lib.leak(); // glslang keeps process-wide state: never unloaded
  *this = api;
  return true;
}

const char* vk_result_name(VkResult r) noexcept {
  switch (r) {
  case VK_SUCCESS: return "VK_SUCCESS";
  case VK_NOT_READY: return "VK_NOT_READY";
  case VK_TIMEOUT: return "VK_TIMEOUT";
  case VK_EVENT_SET: return "VK_EVENT_SET";
  case VK_EVENT_RESET: return "VK_EVENT_RESET";
  case VK_INCOMPLETE: return "VK_INCOMPLETE";
  case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
  case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
  case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
  case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
  case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
  case VK_ERROR_LAYER_NOT_PRESENT: return "VK_ERROR_LAYER_NOT_PRESENT";
  case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
  case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
  case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
  case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
  case VK_ERROR_FORMAT_NOT_SUPPORTED: return "VK_ERROR_FORMAT_NOT_SUPPORTED";
  case VK_ERROR_FRAGMENTED_POOL: return "VK_ERROR_FRAGMENTED_POOL";
  case VK_ERROR_UNKNOWN: return "VK_ERROR_UNKNOWN";
  case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
  case VK_ERROR_INVALID_EXTERNAL_HANDLE: return "VK_ERROR_INVALID_EXTERNAL_HANDLE";
  case VK_ERROR_FRAGMENTATION: return "VK_ERROR_FRAGMENTATION";
  case VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS: return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS";
  case VK_ERROR_INVALID_SHADER_NV: return "VK_ERROR_INVALID_SHADER_NV";
  default: return "VK_ERROR_UNKNOWN";
  }
}

} // namespace parenchyma::vulkan
