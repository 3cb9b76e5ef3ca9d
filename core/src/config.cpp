// parenchyma core: the JSON config file and selection strings such as "cuda:1,opencl,!native".
#include "internal.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <sstream>

namespace parenchyma {
inline namespace v1 {
namespace detail {
namespace {

constexpr const char* known_keys[] = {"ranking",  "backend",   "plugin_paths", "deny",
                                      "fallback", "log_level", "cache_dir"};

std::string known_list() {
  std::string s;
  for (const char* k : known_keys)
    s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

[[noreturn]] void bad(const std::filesystem::path& file, const std::string& what) {
  throw error(errc::config, "config " + file.string(), what);
}

std::vector<std::string> string_list(const nlohmann::json& v, const std::filesystem::path& file,
                                     const char* key) {
  if (!v.is_array())
    bad(file,
        std::string("key '") + key + "' must be an array of strings, e.g. [\"cuda\", \"native\"]");
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string())
      bad(file, std::string("key '") + key + "' holds " + item.dump() + ", which is not a string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string string_value(const nlohmann::json& v, const std::filesystem::path& file,
                         const char* key) {
  if (!v.is_string()) bad(file, std::string("key '") + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

bool valid_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
      return false;
  return true;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])))
    ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])))
    --e;
  return std::string(s.substr(b, e - b));
}

} // namespace

Config read_config(const std::filesystem::path& file, Config base) {
  std::ifstream in(file);
  if (!in)
    throw error(errc::config, "config " + file.string(),
                "cannot be read: check the path given in PARENCHYMA_CONFIG (or the API) and its "
                "permissions");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::parse_error& e) {
    bad(file, std::string("is not valid JSON (") + e.what() + "): fix the syntax at that position");
  }
  if (!j.is_object())
    bad(file, "must hold a JSON object such as {\"ranking\": [\"cuda\", \"native\"]}");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "ranking") {
      base.ranking = string_list(v, file, "ranking");
    } else if (key == "backend") {
      base.backend = string_value(v, file, "backend");
      parse_selection(base.backend, "config " + file.string() + ": key 'backend'");
    } else if (key == "plugin_paths") {
      base.plugin_paths = string_list(v, file, "plugin_paths");
    } else if (key == "deny") {
      base.deny = string_list(v, file, "deny");
    } else if (key == "fallback") {
      const std::string s = string_value(v, file, "fallback");
      if (s == "allow")
        base.fallback = fallback_policy::allow;
      else if (s == "warn")
        base.fallback = fallback_policy::warn;
      else if (s == "deny")
        base.fallback = fallback_policy::deny;
      else
        bad(file, "key 'fallback' is \"" + s + "\": use \"allow\", \"warn\" or \"deny\"");
    } else if (key == "log_level") {
      const std::string s = string_value(v, file, "log_level");
      if (!parse_log_level(s))
        bad(file, "key 'log_level' is \"" + s +
                      "\": use trace, debug, info, warn, error, critical or off");
      base.log_level = s;
    } else if (key == "cache_dir") {
      base.cache_dir = string_value(v, file, "cache_dir");
    } else {
      bad(file, "unknown key '" + key + "' (known keys: " + known_list() +
                    "): remove it or correct its spelling");
    }
  }
  base.sources.push_back(file.string());
  return base;
}

std::vector<SelectItem> parse_selection(std::string_view text, std::string_view origin) {
  std::vector<SelectItem> items;
  auto fail = [&](const std::string& what) -> void {
    throw error(errc::config, std::string(origin),
                "\"" + std::string(text) + "\": " + what +
                    ". Expected a comma-separated list such as \"cuda:1,opencl,native\" or "
                    "\"!opencl\"");
  };
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = trim(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) fail("an empty entry");
    SelectItem s;
    std::string_view body = item;
    if (body.front() == '!') {
      s.deny = true;
      body.remove_prefix(1);
    }
    const size_t colon = body.find(':');
    s.name = std::string(body.substr(0, colon));
    if (!valid_name(s.name))
      fail("entry '" + item + "' is not a framework name (lower-case letters, digits, '_')");
    if (colon != std::string_view::npos) {
      const std::string_view idx = body.substr(colon + 1);
      if (s.deny) fail("entry '" + item + "': a denial takes no device index");
      if (idx.empty() || idx.size() > 6) fail("entry '" + item + "' has a bad device index");
      uint32_t d = 0;
      for (char c : idx) {
        if (!std::isdigit(static_cast<unsigned char>(c)))
          fail("entry '" + item + "' has a bad device index");
        d = d * 10 + static_cast<uint32_t>(c - '0');
      }
      s.device = d;
    }
    items.push_back(std::move(s));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

} // namespace detail
} // namespace v1
} // namespace parenchyma
