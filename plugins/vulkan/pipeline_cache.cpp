// The VkPipelineCache of each VkDevice: loaded from the plugin's pipeline cache (the SDK's blob
// cache, kind "vulkan-pipeline") when the device is made, saved back when it goes. The data is
// checked twice before the driver sees it: the blob cache's checksum, then the data's own header
// against the device and driver; anything that fails is a debug line and an empty cache.
#include "vulkan.hpp"

#include <cstring>
#include <optional>
#include <span>
#include <string>

namespace parenchyma::vulkan {

namespace {
uint32_t le32(const unsigned char* p) noexcept {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
// Why pipeline cache data is not for this device and driver ("" when it is): its header
// (VkPipelineCacheHeaderVersionOne, least significant byte first) must name the device's vendor,
// device and pipelineCacheUUID. The blob cache's checksum already refused damaged files; this
// refuses a foreign or stale one, which a driver need not check itself.
std::string pipeline_header_problem(std::span<const unsigned char> data, const device_info& d) {
  constexpr size_t header = 16 + VK_UUID_SIZE;
  if (data.size() < header)
    return sdk::str(data.size(), " bytes, shorter than the ", header, "-byte header");
  const uint32_t size = le32(data.data()), version = le32(data.data() + 4);
  if (size < header || size > data.size())
    return sdk::str("header size ", size, " (", data.size(), " bytes in all)");
  if (version != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) return sdk::str("header version ", version);
  if (le32(data.data() + 8) != d.vendor_id || le32(data.data() + 12) != d.device_id)
    return sdk::str("made for vendor ", le32(data.data() + 8), " device ", le32(data.data() + 12),
                    ", not ", d.vendor_id, " ", d.device_id);
  if (std::memcmp(data.data() + 16, d.pipeline_cache_uuid, VK_UUID_SIZE) != 0)
    return "made for another pipelineCacheUUID (another driver build)";
  return {};
}
} // namespace

void device_state::open_pipeline_cache() {
  std::optional<sdk::blob_cache::blob> data;
  if (pipelines_.enabled()) {
    // The key names what the data is valid for; the header is checked again on load.
    sdk::sha256 h;
    h.field("parenchyma-vulkan-pipeline-cache-v1")
        .field(
            std::string_view(reinterpret_cast<const char*>(info.pipeline_cache_uuid), VK_UUID_SIZE))
        .field(sdk::str(info.vendor_id, ":", info.device_id, ":", info.driver_version_raw))
        .field(info.driver_name);
    pipeline_key_ = h.finish();
    data = pipelines_.load(pipeline_key_);
    if (data) {
      if (const std::string why = pipeline_header_problem(*data, info); !why.empty()) {
        log.debug("pipeline cache: ", pipelines_.path(pipeline_key_), " ignored (", why,
                  "); starting empty");
        data.reset();
      }
    }
  }
  VkPipelineCacheCreateInfo ci{};
  ci.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  if (data) {
    ci.initialDataSize = data->size();
    ci.pInitialData = data->data();
  }
  VkResult r = fn.vkCreatePipelineCache(device, &ci, nullptr, &pipeline_cache);
  if (r != VK_SUCCESS && data) {
    log.debug("pipeline cache: the driver refused the data of ", pipelines_.path(pipeline_key_),
              " (", vk_result_name(r), "); starting empty");
    data.reset();
    ci.initialDataSize = 0;
    ci.pInitialData = nullptr;
    r = fn.vkCreatePipelineCache(device, &ci, nullptr, &pipeline_cache);
  }
  if (r != VK_SUCCESS) {
    log.debug("pipeline cache: vkCreatePipelineCache on '", info.name, "': ", vk_result_name(r),
              "; pipelines are built without one");
    pipeline_cache = VK_NULL_HANDLE;
    return;
  }
  if (data) {
    pipeline_bytes_loaded_ = data->size();
    log.debug("pipeline cache: ", data->size(), " bytes loaded from ",
              pipelines_.path(pipeline_key_));
  }
}

void device_state::save_pipeline_cache() noexcept {
  if (pipeline_cache == VK_NULL_HANDLE) return;
  try {
    size_t size = 0;
    if (pipelines_.writable() &&
        fn.vkGetPipelineCacheData(device, pipeline_cache, &size, nullptr) == VK_SUCCESS &&
        size != pipeline_bytes_loaded_) { // unchanged since loaded: nothing new to keep
      sdk::blob_cache::blob data(size);
      if (fn.vkGetPipelineCacheData(device, pipeline_cache, &size, data.data()) == VK_SUCCESS &&
          pipeline_header_problem(std::span(data.data(), size), info).empty()) {
        data.resize(size);
        log.debug("pipeline cache: ", size, " bytes saved to ", pipelines_.path(pipeline_key_));
        pipelines_.store_later(pipeline_key_, std::move(data));
      }
    }
  } catch (...) { // out of memory: the cache is not saved this time
  }
  fn.vkDestroyPipelineCache(device, pipeline_cache, nullptr);
  pipeline_cache = VK_NULL_HANDLE;
}

} // namespace parenchyma::vulkan
