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

// A whole number from 0 to `max`, or `fallback` when the setting is absent.
uint32_t number(const pcy_host_services& host, const char* name, uint32_t fallback, uint32_t max,
                const char* expected) {
  const char* v = get(host, name);
  if (v == nullptr) return fallback;
  const std::string_view d(v);
  uint32_t n = 0;
  const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
  if (ec != std::errc() || end != d.data() + d.size() || n > max) bad(name, d, expected);
  return n;
}

} // namespace

settings settings::read(const pcy_host_services& host) {
  settings s;
  s.devices = number(host, "PARENCHYMA_MOCK_DEVICES", s.devices, 64, "a device count from 0 to 64");
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
  s.build_ms =
      number(host, "PARENCHYMA_MOCK_BUILD_MS", s.build_ms, 60000, "milliseconds from 0 to 60000");
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
