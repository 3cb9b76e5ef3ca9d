// The Vulkan framework plugin's entry point: the plugin object (loader, devices, the GLSL
// compiler loaded on first use), the error helpers every file uses, and the one exported symbol.
#include "vulkan.hpp"

namespace parenchyma::vulkan {

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
    : framework_plugin(host, plugin_name), settings_(&host) {
  discover();
}

plugin::~plugin() { vk_.unload(); }

const shaderc_api* plugin::shaderc(std::string& why) {
  std::lock_guard lock(shaderc_mutex_);
  if (!shaderc_tried_) {
    shaderc_tried_ = true;
    // PARENCHYMA_SHADERC_LIBRARY names another libshaderc (ignored in set-uid processes).
    std::string library = settings_.get("PARENCHYMA_SHADERC_LIBRARY");
    if (library.empty()) library = "libshaderc.so.1";
    if (!shaderc_.load(library.c_str(), shaderc_why_)) log_.info(shaderc_why_);
  }
  if (shaderc_.loaded()) return &shaderc_;
  why = shaderc_why_;
  return nullptr;
}

} // namespace parenchyma::vulkan

PCY_FRAMEWORK_PLUGIN(parenchyma::vulkan::plugin)
