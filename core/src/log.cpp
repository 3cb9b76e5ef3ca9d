// parenchyma core: logging through spdlog, one process-wide logger; plugin messages arrive
// through the host-services callback and are forwarded with their origin.
#include "internal.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <memory>

namespace parenchyma {
inline namespace v1 {
namespace detail {
namespace {

std::atomic<int> g_level{PCY_LOG_WARN};

spdlog::logger& logger() {
  // Not registered in spdlog's global registry, so an application's own spdlog setup (or
  // another copy of spdlog) never clashes with ours. Deliberately never destroyed: plugins and
  // the global registry shut down during the process's exit handlers, in an order relative to
  // this object that no static can promise, and they may still log then. The sink writes to
  // stderr unbuffered, so nothing is lost by not destroying it.
  static spdlog::logger* instance = [] {
    auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    auto* l = new spdlog::logger("parenchyma", std::move(sink));
    l->set_pattern("[%H:%M:%S.%e] [parenchyma] [%^%l%$] %v");
    l->set_level(spdlog::level::trace); // filtering happens in log_enabled()
    return l;
  }();
  return *instance;
}

spdlog::level::level_enum to_spdlog(pcy_log_level level) {
  switch (level) {
  case PCY_LOG_TRACE: return spdlog::level::trace;
  case PCY_LOG_DEBUG: return spdlog::level::debug;
  case PCY_LOG_INFO: return spdlog::level::info;
  case PCY_LOG_WARN: return spdlog::level::warn;
  case PCY_LOG_ERROR: return spdlog::level::err;
  case PCY_LOG_CRITICAL: return spdlog::level::critical;
  case PCY_LOG_OFF: return spdlog::level::off;
  }
  return spdlog::level::info;
}

} // namespace

bool log_enabled(pcy_log_level level) noexcept {
  return level != PCY_LOG_OFF && static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void log(pcy_log_level level, std::string_view origin, std::string_view message) {
  if (!log_enabled(level)) return;
  try {
    logger().log(to_spdlog(level), "{}: {}", origin, message);
  } catch (...) {
    // Logging must never take the process down.
  }
}

std::optional<pcy_log_level> parse_log_level(std::string_view text) noexcept {
  if (text == "trace") return PCY_LOG_TRACE;
  if (text == "debug") return PCY_LOG_DEBUG;
  if (text == "info") return PCY_LOG_INFO;
  if (text == "warn" || text == "warning") return PCY_LOG_WARN;
  if (text == "error") return PCY_LOG_ERROR;
  if (text == "critical") return PCY_LOG_CRITICAL;
  if (text == "off") return PCY_LOG_OFF;
  return std::nullopt;
}

void set_log_level(pcy_log_level level) noexcept { g_level.store(level); }
pcy_log_level log_level() noexcept { return static_cast<pcy_log_level>(g_level.load()); }

void plugin_log(void*, pcy_log_level level, const char* origin, const char* message) {
  log(level, origin != nullptr ? origin : "plugin", message != nullptr ? message : "");
}

} // namespace detail
} // namespace v1
} // namespace parenchyma
