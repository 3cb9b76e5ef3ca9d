// parenchyma core: the JSON config file and selection strings such as "cuda:1,opencl,!native".
// Everything here reads input from outside the program: it refuses what is not a small regular
// file of shallow JSON, quotes at most a short prefix of a bad value, and throws nothing but
// parenchyma::error.
#include "internal.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <limits>

namespace parenchyma {
inline namespace v1 {
namespace detail {

std::string quote_prefix(std::string_view text, size_t max) {
  std::string out;
  out.reserve(std::min(text.size(), max) + 8);
  size_t i = 0;
  for (; i < text.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

bool valid_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Optimal string alignment distance, case-insensitive: insertions, deletions, substitutions and
// swaps of neighbours each cost one. Names are short (at most 64 bytes in a request).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& known) {
  if (name.empty() || name.size() > 64) return {};
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  for (const auto& k : known) {
    if (k == name) continue;
    const size_t d = edit_distance(name, k);
    // Close means: the same letters in another case (0), or at most 2 edits and fewer than a
    // third of the known name's letters ("cdua" -> "cuda", not "mock" -> "cuda").
    const bool close = d == 0 || (d <= 2 && d * 3 <= k.size());
    if (close && d < best_d) {
      best = k;
      best_d = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view name, const std::vector<std::string>& known) {
  const std::string c = closest_name(name, known);
  return c.empty() ? std::string() : "did you mean \"" + c + "\"?";
}

namespace {

using json = nlohmann::json;

constexpr const char* known_keys[] = {"ranking",  "backend",   "plugin_paths", "deny",
                                      "fallback", "log_level", "cache_dir",    "bundle_priority",
                                      "validate", "settings"};
constexpr const char* kind_names[] = {"gpu", "accelerator", "cpu", "other"};

std::string known_list() {
  std::string s;
  for (const char* k : known_keys)
    s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

// A value as it may appear in an error message: short, never deep (values are depth-limited at
// parse time), invalid UTF-8 replaced.
std::string show(const json& v) {
  return quote_prefix(v.dump(-1, ' ', false, json::error_handler_t::replace));
}

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw error(errc::config, origin, what);
}

std::vector<std::string> string_list(const json& v, const std::string& origin, const char* key) {
  if (!v.is_array())
    bad(origin, std::string("key '") + key + "' must be an array of strings, e.g. [\"cuda\", " +
                    "\"native\"], got " + show(v));
  std::vector<std::string> out;
  for (const auto& item : v) {
    if (!item.is_string())
      bad(origin, std::string("key '") + key + "' holds " + show(item) + ", which is not a string");
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::vector<std::string> name_list(const json& v, const std::string& origin,
                                   const std::string& key) {
  std::vector<std::string> out = string_list(v, origin, key.c_str());
  for (const auto& n : out)
    if (!valid_name(n))
      bad(origin, "key '" + key + "' holds \"" + quote_prefix(n) +
                      "\", which is not a plugin name (lower-case letters, digits, '_')");
  return out;
}

std::string string_value(const json& v, const std::string& origin, const char* key) {
  if (!v.is_string())
    bad(origin, std::string("key '") + key + "' must be a string, got " + show(v));
  return v.get<std::string>();
}

void read_ranking(const json& v, const std::string& origin, Config& c) {
  if (v.is_array()) {
    c.ranking = name_list(v, origin, "ranking");
    c.ranking_by_kind.clear();
    return;
  }
  if (!v.is_object())
    bad(origin, "key 'ranking' must be an array of framework names (an explicit order) or an "
                "object by device kind such as {\"gpu\": [\"cuda\", \"opencl\"], \"cpu\": "
                "[\"native\", \"opencl\"]}, got " +
                    show(v));
  std::map<std::string, std::vector<std::string>> by_kind;
  for (auto it = v.begin(); it != v.end(); ++it) {
    bool known = false;
    for (const char* k : kind_names)
      known = known || it.key() == k;
    if (!known)
      bad(origin, "key 'ranking' has the member \"" + quote_prefix(it.key()) +
                      "\", which is not a device kind: use gpu, accelerator, cpu or other");
    by_kind[it.key()] = name_list(it.value(), origin, "ranking." + it.key());
  }
  c.ranking_by_kind = std::move(by_kind);
  c.ranking.clear();
}

// Reads a whole regular file of at most `limit` bytes (os.hpp: a FIFO or device at the path is
// refused instead of hanging the process).
std::string read_small_file(const std::filesystem::path& file, uint64_t limit,
                            const std::string& origin) {
  try {
    return os::read_regular_file(file, limit, "a JSON file");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    if (what.rfind("cannot be opened", 0) == 0)
      bad(origin, what + ": check the path given in PARENCHYMA_CONFIG (or the API) and its "
                         "permissions");
    bad(origin, what);
  }
}

} // namespace

Config parse_config(std::string_view text, const std::string& origin, Config base) {
  json j;
  try {
    // Depth is limited while parsing, so nothing later (formatting a value for an error
    // message, destroying it) can recurse deeply on hostile input.
    json::parser_callback_t limit = [&](int depth, json::parse_event_t, json&) {
      if (depth > max_config_depth)
        throw error(errc::config, origin,
                    "nests values deeper than " + std::to_string(max_config_depth) +
                        " levels; a config file is a flat object of short lists");
      return true;
    };
    j = json::parse(text.begin(), text.end(), limit, true, /*ignore_comments=*/true);
  } catch (const error&) {
    throw;
  } catch (const json::exception& e) {
    bad(origin,
        "is not valid JSON (" + quote_prefix(e.what(), 200) + "): fix the syntax at that position");
  }
  if (!j.is_object())
    bad(origin, "must hold a JSON object such as {\"fallback\": \"warn\"}, got " + show(j));
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const auto& v = it.value();
    if (key == "ranking") {
      read_ranking(v, origin, base);
    } else if (key == "backend") {
      base.backend = string_value(v, origin, "backend");
      parse_selection(base.backend, origin + ": key 'backend'");
    } else if (key == "plugin_paths") {
      base.plugin_paths = string_list(v, origin, "plugin_paths");
    } else if (key == "deny") {
      base.deny = name_list(v, origin, "deny");
    } else if (key == "bundle_priority") {
      base.bundle_priority = name_list(v, origin, "bundle_priority");
    } else if (key == "fallback") {
      const std::string s = string_value(v, origin, "fallback");
      if (s == "allow")
        base.fallback = fallback_policy::allow;
      else if (s == "warn")
        base.fallback = fallback_policy::warn;
      else if (s == "deny")
        base.fallback = fallback_policy::deny;
      else
        bad(origin,
            "key 'fallback' is \"" + quote_prefix(s) + "\": use \"allow\", \"warn\" or \"deny\"");
    } else if (key == "log_level") {
      const std::string s = string_value(v, origin, "log_level");
      if (!parse_log_level(s))
        bad(origin, "key 'log_level' is \"" + quote_prefix(s) +
                        "\": use trace, debug, info, warn, error, critical or off");
      base.log_level = s;
    } else if (key == "cache_dir") {
      base.cache_dir = string_value(v, origin, "cache_dir");
    } else if (key == "validate") {
      if (!v.is_boolean()) bad(origin, "key 'validate' must be true or false, got " + show(v));
      base.validate = v.get<bool>();
    } else if (key == "settings") {
      if (!v.is_object())
        bad(origin, "key 'settings' must be an object of strings, e.g. "
                    "{\"PARENCHYMA_OPENCL_PLATFORMS\": \"nvidia\"}, got " +
                        show(v));
      for (auto st = v.begin(); st != v.end(); ++st) {
        if (st.key().empty() || st.key().size() > 128)
          bad(origin, "key 'settings' has a member name of " + std::to_string(st.key().size()) +
                          " bytes: use a variable name");
        base.settings[st.key()] = string_value(st.value(), origin, "settings");
      }
    } else {
      bad(origin, "unknown key '" + quote_prefix(key) + "' (known keys: " + known_list() +
                      "): remove it or correct its spelling");
    }
  }
  return base;
}

Config read_config(const std::filesystem::path& file, Config base) {
  const std::string origin = "config " + file.string();
  const std::string text = read_small_file(file, max_config_bytes, origin);
  Config c = parse_config(text, origin, std::move(base));
  c.sources.push_back(file.string());
  return c;
}

std::vector<SelectItem> parse_selection(std::string_view text, std::string_view origin,
                                        const std::vector<std::string>& known) {
  std::vector<SelectItem> items;
  // `hint`: a closing sentence such as "Did you mean \"opencl\"?".
  auto fail = [&](const std::string& what, const std::string& hint = {}) -> void {
    throw error(errc::config, std::string(origin),
                "\"" + quote_prefix(text) + "\": " + what +
                    ". Expected a comma-separated list such as \"cuda:1,opencl,native\" or "
                    "\"!opencl\"" +
                    (hint.empty() ? "" : ". " + hint));
  };
  if (text.size() > 4096) fail("longer than 4096 bytes");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    std::string_view raw = text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    while (!raw.empty() && std::isspace(static_cast<unsigned char>(raw.front())))
      raw.remove_prefix(1);
    while (!raw.empty() && std::isspace(static_cast<unsigned char>(raw.back())))
      raw.remove_suffix(1);
    const std::string item = quote_prefix(raw);
    if (raw.empty()) fail("an empty entry");
    SelectItem s;
    std::string_view body = raw;
    if (body.front() == '!') {
      s.deny = true;
      body.remove_prefix(1);
    }
    const size_t colon = body.find(':');
    const std::string_view name = body.substr(0, colon);
    if (!valid_name(name)) {
      // "OpenCL": names are lower-case; suggest the framework meant, or the lower-case spelling.
      std::string meant = closest_name(name, known);
      if (meant.empty() && name.size() <= 64) {
        std::string low;
        for (char c : name)
          low += lower(c);
        if (valid_name(low)) meant = low;
      }
      fail("entry '" + item + "' is not a framework name (lower-case letters, digits, '_')",
           meant.empty() ? "" : "Did you mean \"" + meant + "\"?");
    }
    s.name = std::string(name);
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
