// parenchyma mock plugin: the devices the settings ask for, their properties, and contexts.
#include "mock.hpp"

namespace parenchyma::mock {

namespace {

const char* kind_name(pcy_device_kind k) {
  switch (k) {
  case PCY_DEVICE_CPU: return "CPU";
  case PCY_DEVICE_GPU: return "GPU";
  case PCY_DEVICE_ACCELERATOR: return "Accelerator";
  case PCY_DEVICE_OTHER: break;
  }
  return "Device";
}

} // namespace

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, info.name), settings_(settings::read(host)) {
  if (settings_.devices == 0) reason_ = "PARENCHYMA_MOCK_DEVICES=0";
  for (uint32_t d = 0; d < settings_.devices; ++d) {
    ordinals_.push_back(d);
    sdk::property_list& p = add_device();
    p.text(PCY_PROP_NAME, sdk::str("Mock ", kind_name(settings_.kind), " ", d));
    p.text(PCY_PROP_VENDOR, "parenchyma mock");
    p.number(PCY_PROP_KIND, settings_.kind);
    p.number(PCY_PROP_COMPUTE_UNITS, 1);
    p.number(PCY_PROP_GLOBAL_MEMORY, int64_t{1} << 30);
    p.number(PCY_PROP_MAX_WORK_GROUP, 256);
    p.text(PCY_PROP_DRIVER_VERSION, info.version);
    p.text(PCY_PROP_UUID, sdk::str("mock-", d));
    p.flag(PCY_PROP_HOST_UNIFIED, settings_.host_unified);
    p.flag(PCY_PROP_FP64, settings_.fp64);
    if (settings_.broken == "properties") p.remove(PCY_PROP_KIND);
  }
  log_.info("mock: ", settings_.devices, " ", kind_name(settings_.kind), " device(s)",
            settings_.async ? ", asynchronous queues" : "",
            settings_.broken.empty() ? "" : ", deliberately broken: " + settings_.broken);
}

void context::check_device(uint32_t device) const {
  if (device >= devices_.size())
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context (",
                                          devices_.size(), " device(s))"));
}

context::context(plugin& owner, std::span<const uint32_t> devices)
    : plugin_(owner), devices_(devices.begin(), devices.end()) {}
context::~context() = default;

queue* context::create_queue(uint32_t device) {
  check_device(device);
  return new queue(plugin_, devices_[device], plugin_.config().async);
}

// The mock has no driver: its native objects are its own, stable while they live.
void* context::native_context() {
  settings::offered(plugin_.config().natives, "native handles");
  return this;
}
void* context::native_device(uint32_t device) {
  settings::offered(plugin_.config().natives, "native handles");
  check_device(device);
  return plugin_.device_handle(devices_[device]);
}

} // namespace parenchyma::mock
