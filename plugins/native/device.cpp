// parenchyma native plugin: the one device (the host CPU) and its properties; contexts.
#include "native.hpp"

#include <fstream>
#include <unistd.h>

namespace parenchyma::native {

namespace {
std::string cpuinfo_field(const char* field) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  const std::string key(field);
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ')
      v.erase(v.begin());
    return v;
  }
  return {};
}

pcy_property prop_s(const char* key, const char* s) {
  return pcy_property{sizeof(pcy_property), nullptr, key, PCY_VALUE_STRING, s, 0, 0};
}
pcy_property prop_i(const char* key, int64_t i, pcy_value_type t = PCY_VALUE_INT) {
  return pcy_property{sizeof(pcy_property), nullptr, key, t, nullptr, i, 0};
}
} // namespace

plugin::plugin(const pcy_host_services& host)
    : log_(&host, name), pool_(std::max(1u, std::thread::hardware_concurrency())) {
  cpu_name_ = cpuinfo_field("model name");
  if (cpu_name_.empty()) cpu_name_ = "host CPU";
  cpu_vendor_ = cpuinfo_field("vendor_id");
  if (cpu_vendor_.empty()) cpu_vendor_ = "unknown";
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  memory_bytes_ =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  props_ = {prop_s(PCY_PROP_NAME, cpu_name_.c_str()),
            prop_s(PCY_PROP_VENDOR, cpu_vendor_.c_str()),
            prop_i(PCY_PROP_KIND, PCY_DEVICE_CPU),
            prop_i(PCY_PROP_COMPUTE_UNITS, std::thread::hardware_concurrency()),
            prop_i(PCY_PROP_GLOBAL_MEMORY, static_cast<int64_t>(memory_bytes_)),
            prop_i("threads", pool_.size()),
            prop_s(PCY_PROP_DRIVER_VERSION, version),
            prop_i(PCY_PROP_HOST_UNIFIED, 1, PCY_VALUE_BOOL),
            prop_i(PCY_PROP_FP64, 1, PCY_VALUE_BOOL)};
  log_.debug("host CPU '", cpu_name_, "', ", pool_.size(), " worker threads");
}

std::span<const pcy_property> plugin::properties(uint32_t) const { return props_; }

context* plugin::create_context(std::span<const uint32_t>) { return new context(*this); }

queue* context::create_queue(uint32_t device) {
  if (device != 0)
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context"));
  return new queue(plugin_.pool());
}

} // namespace parenchyma::native
