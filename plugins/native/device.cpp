// parenchyma native plugin: the one device (the host CPU) and its properties; contexts.
#include "native.hpp"

#include <cstdlib>
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
#include <utility>

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

// The CPU's name and vendor as /proc/cpuinfo gives them: x86 writes "model name" and
// "vendor_id"; arm64 Linux writes neither, only the MIDR fields "CPU implementer" and "CPU part"
// (numbers: the implementer is named here, the part left as its number).
std::pair<std::string, std::string> cpu_name_and_vendor() {
  std::string name = cpuinfo_field("model name");
  std::string vendor = cpuinfo_field("vendor_id");
#if defined(__aarch64__)
  const std::string implementer = cpuinfo_field("CPU implementer");
  const std::string part = cpuinfo_field("CPU part");
  if (name.empty() && !implementer.empty()) {
    static constexpr std::pair<unsigned, const char*> known[] = {
        {0x41, "Arm"},       {0x42, "Broadcom"},  {0x43, "Cavium"},        {0x46, "Fujitsu"},
        {0x48, "HiSilicon"}, {0x4e, "NVIDIA"},    {0x50, "Applied Micro"}, {0x51, "Qualcomm"},
        {0x61, "Apple"},     {0x6d, "Microsoft"}, {0xc0, "Ampere"}};
    const unsigned long id = std::strtoul(implementer.c_str(), nullptr, 0);
    vendor = "implementer " + implementer;
    for (const auto& [code, who] : known)
      if (code == id) vendor = who;
    name = vendor + " aarch64 CPU" + (part.empty() ? "" : " (part " + part + ")");
  }
#endif
  if (name.empty()) name = "host CPU";
  if (vendor.empty()) vendor = "unknown";
  return {std::move(name), std::move(vendor)};
}

} // namespace

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, info.name), pool_(std::max(1u, std::thread::hardware_concurrency())) {
  auto [cpu_name, cpu_vendor] = cpu_name_and_vendor();
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
