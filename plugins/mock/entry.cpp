// parenchyma mock framework plugin: the entry symbol, and the settings every instance reads.
#include "mock.hpp"

#include <charconv>
#include <string_view>

namespace parenchyma::mock {

namespace {

const char* get(const pcy_host_services& host, const char* name) {
  return sdk::settings(&host).find(name);
}

[[noreturn]] void bad(const char* name, std::string_view value, const char* expected) {
  sdk::fail(PCY_ERR_INVALID_ARGUMENT,
            sdk::str(name, "=", value, ": expected ", expected, " (see the mock's README)"));
}

bool flag(const pcy_host_services& host, const char* name, bool fallback) {
  const char* v = get(host, name);
  if (v == nullptr) return fallback;
  const std::string_view s(v);
  if (s == "1" || s == "on" || s == "true" || s == "yes") return true;
  if (s == "0" || s == "off" || s == "false" || s == "no") return false;
  bad(name, s, "1 or 0");
}

} // namespace

settings settings::read(const pcy_host_services& host) {
  settings s;
  if (const char* v = get(host, "PARENCHYMA_MOCK_DEVICES")) {
    const std::string_view d(v);
    uint32_t n = 0;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
    if (ec != std::errc() || end != d.data() + d.size() || n > 64)
      bad("PARENCHYMA_MOCK_DEVICES", d, "a device count from 0 to 64");
    s.devices = n;
  }
  if (const char* v = get(host, "PARENCHYMA_MOCK_KIND")) {
    const std::string_view k(v);
    if (k == "gpu")
      s.kind = PCY_DEVICE_GPU;
    else if (k == "cpu")
      s.kind = PCY_DEVICE_CPU;
    else if (k == "accelerator")
      s.kind = PCY_DEVICE_ACCELERATOR;
    else if (k == "other")
      s.kind = PCY_DEVICE_OTHER;
    else
      bad("PARENCHYMA_MOCK_KIND", k, "gpu, cpu, accelerator or other");
  }
  if (const char* v = get(host, "PARENCHYMA_MOCK_SLOTS")) {
    s.exports = s.imports = s.natives = s.programs = false;
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view part = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (part == "export")
        s.exports = true;
      else if (part == "import")
        s.imports = true;
      else if (part == "native")
        s.natives = true;
      else if (part == "programs")
        s.programs = true;
      else if (part == "all")
        s.exports = s.imports = s.natives = s.programs = true;
      else if (part != "none" && !part.empty())
        bad("PARENCHYMA_MOCK_SLOTS", v,
            "a comma list of export, import, native, programs, or all / none");
    }
  }
  s.host_unified = flag(host, "PARENCHYMA_MOCK_HOST_UNIFIED", s.kind == PCY_DEVICE_CPU);
  s.fp64 = flag(host, "PARENCHYMA_MOCK_FP64", true);
  s.async = flag(host, "PARENCHYMA_MOCK_ASYNC", false);
  if (const char* v = get(host, "PARENCHYMA_MOCK_BUILD_MS")) {
    const std::string_view d(v);
    uint32_t ms = 0;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), ms);
    if (ec != std::errc() || end != d.data() + d.size() || ms > 60000)
      bad("PARENCHYMA_MOCK_BUILD_MS", d, "milliseconds from 0 to 60000");
    s.build_ms = ms;
  }
  if (const char* v = get(host, "PARENCHYMA_MOCK_BREAK")) {
    const std::string_view b(v);
    if (b != "fill" && b != "properties") bad("PARENCHYMA_MOCK_BREAK", b, "fill or properties");
    s.broken = b;
  }
  return s;
}

void settings::offered(bool on, const char* part) {
  if (!on)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("mock: ", part, " switched off by PARENCHYMA_MOCK_SLOTS"));
}

} // namespace parenchyma::mock

PCY_FRAMEWORK_PLUGIN(parenchyma::mock::plugin)
