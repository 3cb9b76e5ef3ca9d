// parenchyma native plugin: the one device (the host CPU) and its properties; contexts.
#include "native.hpp"

#include <fstream>
#include <string_view>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <unistd.h>
#endif

namespace parenchyma::native {

namespace {
#if defined(_WIN32)
// Windows: the processor's name and vendor as the system records them in the registry.
std::string cpuinfo_field(const char* field) {
  const wchar_t* value =
      std::string_view(field) == "model name" ? L"ProcessorNameString" : L"VendorIdentifier";
  wchar_t buf[256] = {};
  DWORD size = sizeof buf;
  if (::RegGetValueW(HKEY_LOCAL_MACHINE, L"HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0",
                     value, RRF_RT_REG_SZ, nullptr, buf, &size) != ERROR_SUCCESS)
    return {};
  std::string v = sdk::os::narrow(buf);
  while (!v.empty() && v.back() == ' ')
    v.pop_back();
  return v;
}

uint64_t host_memory_bytes() {
  MEMORYSTATUSEX m{};
  m.dwLength = sizeof m;
  return ::GlobalMemoryStatusEx(&m) != 0 ? static_cast<uint64_t>(m.ullTotalPhys) : 0;
}
#else
uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

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
#endif

} // namespace

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, info.name), pool_(std::max(1u, std::thread::hardware_concurrency())) {
  std::string cpu_name = cpuinfo_field("model name");
  if (cpu_name.empty()) cpu_name = "host CPU";
  std::string cpu_vendor = cpuinfo_field("vendor_id");
  if (cpu_vendor.empty()) cpu_vendor = "unknown";
  memory_bytes_ = host_memory_bytes();
  log_.debug("host CPU '", cpu_name, "', ", pool_.size(), " worker threads");
  sdk::property_list& p = add_device();
  p.text(PCY_PROP_NAME, std::move(cpu_name));
  p.text(PCY_PROP_VENDOR, std::move(cpu_vendor));
  p.number(PCY_PROP_KIND, PCY_DEVICE_CPU);
  p.number(PCY_PROP_COMPUTE_UNITS, std::thread::hardware_concurrency());
  p.number(PCY_PROP_GLOBAL_MEMORY, static_cast<int64_t>(memory_bytes_));
  p.number("threads", pool_.size());
  p.text(PCY_PROP_DRIVER_VERSION, info.version);
  p.flag(PCY_PROP_HOST_UNIFIED, true);
  p.flag(PCY_PROP_FP64, true);
}

context::context(plugin& owner, std::span<const uint32_t>) : plugin_(owner) {}
context::~context() = default;

queue* context::create_queue(uint32_t device) {
  if (device != 0)
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context"));
  return new queue(plugin_.pool());
}

} // namespace parenchyma::native
