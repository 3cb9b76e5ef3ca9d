// The Vulkan framework plugin's entry point: the plugin object (loader, devices, the GLSL
// compiler loaded on first use), the error helpers every file uses, and the one exported symbol.
#include "vulkan.hpp"

#if !defined(_WIN32)
#include <dlfcn.h>
#endif

namespace parenchyma::vulkan {
namespace {
// The folder this plugin was loaded from ("" when unknown).
std::string own_directory() {
#if defined(_WIN32)
  return {};
#else
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&own_directory), &info) == 0 ||
      info.dli_fname == nullptr)
    return {};
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
#endif
}
} // namespace

void vk_fail(pcy_status status, std::string_view call, VkResult r, std::string_view advice) {
  std::string msg = sdk::str(call, ": ", vk_result_name(r), " (", static_cast<int>(r), ")");
  if (!advice.empty()) msg.append(": ").append(advice);
  sdk::fail(status, msg);
}

pcy_status status_for(VkResult r, pcy_status otherwise) noexcept {
  switch (r) {
  case VK_ERROR_OUT_OF_HOST_MEMORY:
  case VK_ERROR_OUT_OF_DEVICE_MEMORY:
  case VK_ERROR_OUT_OF_POOL_MEMORY:
  case VK_ERROR_FRAGMENTED_POOL:
  case VK_ERROR_FRAGMENTATION: return PCY_ERR_OUT_OF_MEMORY;
  default: return otherwise;
  }
}

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, plugin_name), settings_(&host),
      cache_(host.cache_dir, plugin_name, log_),
      pipelines_(host.cache_dir, "vulkan-pipeline", log_) {
  discover();
}

plugin::~plugin() { vk_.unload(); }

const shaderc_api* plugin::shaderc(std::string& why) {
  std::lock_guard lock(shaderc_mutex_);
  if (!shaderc_tried_) {
    shaderc_tried_ = true;
    // PARENCHYMA_SHADERC_LIBRARY names the compiler (a libshaderc, or the plugin's GLSL module;
    // ignored in set-uid processes); else the module beside the plugin, then libshaderc.so.1.
    std::vector<std::string> candidates;
    if (std::string named = settings_.get("PARENCHYMA_SHADERC_LIBRARY"); !named.empty())
      candidates.push_back(named);
    else {
      if (std::string dir = own_directory(); !dir.empty())
        candidates.push_back(dir + "/vulkan/parenchyma-glsl.so");
      candidates.push_back("libshaderc.so.1");
    }
    std::string tried;
    for (const std::string& c : candidates) {
      std::string one;
      if (shaderc_.load(c.c_str(), one)) {
        log_.debug("GLSL compiler: ", c);
        break;
      }
      tried += (tried.empty() ? "" : "; ") + one;
    }
    if (!shaderc_.loaded()) {
      shaderc_why_ = "no GLSL compiler: " + tried +
                     " (the plugin's module is built with libshaderc-dev, glslang-dev and "
                     "spirv-tools installed); SPIR-V programs need none";
      log_.info(shaderc_why_);
    }
  }
  if (shaderc_.loaded()) return &shaderc_;
  why = shaderc_why_;
  return nullptr;
}

} // namespace parenchyma::vulkan

PCY_FRAMEWORK_PLUGIN(parenchyma::vulkan::plugin)
