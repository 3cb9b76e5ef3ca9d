// parenchyma mock plugin: the devices the settings ask for, their properties, and contexts.
#include "mock.hpp"

namespace parenchyma::mock {

namespace {

pcy_property prop_s(const char* key, const char* s) {
  return pcy_property{sizeof(pcy_property), nullptr, key, PCY_VALUE_STRING, s, 0, 0};
}
pcy_property prop_i(const char* key, int64_t i, pcy_value_type t = PCY_VALUE_INT) {
  return pcy_property{sizeof(pcy_property), nullptr, key, t, nullptr, i, 0};
}

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

plugin::plugin(const pcy_host_services& host) : log_(&host, name), settings_(settings::read(host)) {
  if (settings_.devices == 0) reason_ = "PARENCHYMA_MOCK_DEVICES=0";
  // Every device's strings first, then the properties that point into them.
  devices_.resize(settings_.devices);
  for (uint32_t d = 0; d < settings_.devices; ++d) {
    devices_[d].name = sdk::str("Mock ", kind_name(settings_.kind), " ", d);
    devices_[d].uuid = sdk::str("mock-", d);
  }
  for (device_info& dev : devices_) {
    dev.props = {prop_s(PCY_PROP_NAME, dev.name.c_str()),
                 prop_s(PCY_PROP_VENDOR, "parenchyma mock"),
                 prop_i(PCY_PROP_KIND, settings_.kind),
                 prop_i(PCY_PROP_COMPUTE_UNITS, 1),
                 prop_i(PCY_PROP_GLOBAL_MEMORY, int64_t{1} << 30),
                 prop_i(PCY_PROP_MAX_WORK_GROUP, 256),
                 prop_s(PCY_PROP_DRIVER_VERSION, version),
                 prop_s(PCY_PROP_UUID, dev.uuid.c_str()),
                 prop_i(PCY_PROP_HOST_UNIFIED, settings_.host_unified ? 1 : 0, PCY_VALUE_BOOL),
                 prop_i(PCY_PROP_FP64, settings_.fp64 ? 1 : 0, PCY_VALUE_BOOL)};
    if (settings_.broken == "properties") dev.props.erase(dev.props.begin() + 2); // no "kind"
  }
  log_.info("mock: ", settings_.devices, " ", kind_name(settings_.kind), " device(s)",
            settings_.async ? ", asynchronous queues" : "",
            settings_.broken.empty() ? "" : ", deliberately broken: " + settings_.broken);
}

std::span<const pcy_property> plugin::properties(uint32_t device) const {
  return devices_[device].props; // the adapter has checked the index
}

context* plugin::create_context(std::span<const uint32_t> devices) {
  return new context(*this, std::vector<uint32_t>(devices.begin(), devices.end()));
}

void context::check_device(uint32_t device) const {
  if (device >= devices_.size())
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context (",
                                          devices_.size(), " device(s))"));
}

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
