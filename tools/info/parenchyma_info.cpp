// parenchyma-info: every plugin tried (with status and reason), frameworks and devices, the
// ranking, the backend that would be selected and why, and the op x framework coverage.
//   parenchyma-info [--json] [--explain] [--ops] [--backend REQUEST]
// Exits 3 when no backend would be selected, so a script can tell (codes in usage()).
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/schema_names.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <variant>

namespace pa = parenchyma;

namespace {

const char* dtype_name(pcy_dtype t) { return parenchyma::sdk::dtype_name(t); }

nlohmann::json value_json(const pa::property_value& v) {
  return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

std::string value_text(const pa::property_value& v) {
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (auto d = std::get_if<double>(&v)) return std::to_string(*d);
  return std::get<bool>(v) ? "true" : "false";
}

// Device memory sizes for a reader: "140.4 GiB", "48 KiB" (the JSON keeps the bytes).
bool is_memory_property(const std::string& key) {
  return key == PCY_PROP_GLOBAL_MEMORY || key == PCY_PROP_LOCAL_MEMORY ||
         (key.size() > 6 && key.compare(key.size() - 6, 6, "_bytes") == 0);
}
std::string human_bytes(int64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  // Whole values without a decimal (48 KiB), others with one (140.4 GiB).
  if (v == static_cast<double>(static_cast<int64_t>(v)))
    std::snprintf(buf, sizeof buf, "%lld %s", static_cast<long long>(v), units[u]);
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string property_text(const std::string& key, const pa::property_value& v) {
  if (auto i = std::get_if<int64_t>(&v); i != nullptr && *i >= 0 && is_memory_property(key))
    return human_bytes(*i);
  return value_text(v);
}

// Exit codes, as --help states them.
constexpr int exit_ok = 0;         // a backend would be selected
constexpr int exit_registry = 1;   // the registry cannot be created (e.g. an unusable config)
constexpr int exit_usage = 2;      // bad arguments
constexpr int exit_no_backend = 3; // the request (or the default ranking) selects no backend

struct Outcome {
  bool ok = false;
  pa::Selection selection;
  std::string error;
};

Outcome selected(const pa::Registry& r, const std::string& request) {
  Outcome o;
  try {
    o.selection = r.select(request);
    o.ok = true;
  } catch (const pa::error& e) {
    o.error = e.what();
  }
  return o;
}

std::string dtype_rule(const pcy_arg_schema& a) {
  if (a.kind == PCY_SCHEMA_SCALAR) return "op";
  if (a.kind != PCY_SCHEMA_TENSOR) return "";
  if (a.dtype == PCY_SCHEMA_DTYPE_ANY) return "any";
  return a.dtype == PCY_SCHEMA_DTYPE_OP ? "op" : dtype_name(static_cast<pcy_dtype>(a.dtype));
}
std::string rank_rule(const pcy_arg_schema& a) {
  if (a.kind != PCY_SCHEMA_TENSOR) return "";
  return a.rank == PCY_SCHEMA_RANK_ANY ? "any" : std::to_string(int(a.rank));
}

// The op's arguments from its schema; null for a bundle without one (ABI 1.0).
nlohmann::json arguments_json(const pcy_op_schema* s) {
  if (s == nullptr) return nullptr;
  nlohmann::json a = nlohmann::json::array();
  for (uint32_t i = 0; i < s->arg_count; ++i) {
    const pcy_arg_schema& x = s->args[i];
    nlohmann::json one = {{"name", pa::sdk::schema_text(x.name)},
                          {"kind", pa::sdk::schema_kind_name(x.kind)}};
    if (x.kind == PCY_SCHEMA_TENSOR || x.kind == PCY_SCHEMA_SCALAR) {
      one["intent"] = pa::sdk::schema_intent_name(x.kind, x.intent);
      one["dtype"] = dtype_rule(x);
    }
    if (x.kind == PCY_SCHEMA_TENSOR) one["rank"] = rank_rule(x);
    a.push_back(std::move(one));
  }
  return a;
}

// One table per extension: every op with a schema, once (the first bundle's), sorted by name.
void print_schema_markdown(const std::vector<pa::OpCoverage>& coverage) {
  std::map<std::string, std::map<std::string, const pcy_op_schema*>> by_ext;
  for (const auto& c : coverage)
    if (c.schema != nullptr) by_ext[c.extension].emplace(c.op, c.schema);
  if (by_ext.empty()) std::printf("(no bundle with op schemas loaded)\n");
  bool first = true;
  for (const auto& [ext, ops] : by_ext) {
    if (!first) std::printf("\n");
    first = false;
    std::printf("| %s op | arguments (name: kind, intent, dtype, rank) |\n|---|---|\n",
                ext.c_str());
    for (const auto& [op, s] : ops) {
      std::string args;
      for (uint32_t i = 0; i < s->arg_count; ++i) {
        const pcy_arg_schema& x = s->args[i];
        args += (i ? "; " : "") + std::string("`") + pa::sdk::schema_text(x.name) +
                "`: " + pa::sdk::schema_kind_name(x.kind);
        if (x.kind == PCY_SCHEMA_TENSOR)
          args += std::string(", ") + pa::sdk::schema_intent_name(x.kind, x.intent) + ", " +
                  dtype_rule(x) + ", rank " + rank_rule(x);
        else if (x.kind == PCY_SCHEMA_SCALAR)
          args += " (a float, or a one-element tensor in)";
      }
      std::printf("| `%s` | %s |\n", op.c_str(), args.c_str());
    }
  }
}

// Where the documentation is: beside this program's install prefix (<prefix>/<bindir>/.. plus
// the docdir), wherever the tree was installed (`cmake --install --prefix P` or moved), else the
// directory configured at build time.
std::string doc_dir() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path prefix = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (!ec) {
    for (const auto& part : fs::path(PARENCHYMA_BIN_DIR)) {
      (void)part;
      prefix = prefix.parent_path();
    }
    const fs::path docs = prefix / PARENCHYMA_DOC_DIR;
    if (fs::is_regular_file(docs / "config.md", ec)) return docs.string();
  }
  return PARENCHYMA_DOC_DIR_CONFIGURED;
}

void usage() {
  const std::string docs = doc_dir();
  std::printf(
      "usage: parenchyma-info [--json] [--explain] [--ops [--markdown]] [--backend REQUEST]\n"
      "  --json        machine-readable output (stable keys: plugins, frameworks, ranking,\n"
      "                devices, selected, ops, notices)\n"
      "  --explain     the search path, config files, every load stage and advice, and\n"
      "                why each device got its place in the ranking\n"
      "  --ops         the op x framework coverage matrix; with --json every op's arguments\n"
      "                from its schema (ABI 1.1 bundles)\n"
      "  --markdown    with --ops: each extension's op schemas as Markdown tables (the\n"
      "                tables in docs/blas.md are this output)\n"
      "  --backend R   show what the request R (e.g. \"opencl,native\") would select\n"
      "\nExit status: 0 a backend would be selected; 1 the registry cannot be created (e.g.\n"
      "an unusable config file); 2 bad arguments; 3 no backend would be selected: the request\n"
      "(--backend, else PARENCHYMA_BACKEND, else the config's \"backend\") cannot be met or no\n"
      "device is available (the output and stderr say why).\n"
      "\nDocumentation: %s (configuration and environment: config.md; threads:\n"
      "threads.md; plugin ABI: abi.md), or docs/ in the source tree.\n",
      docs.c_str());
}

} // namespace

int run(int argc, char** argv) {
  bool json = false, explain = false, ops = false, markdown = false;
  std::string request;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--json"))
      json = true;
    else if (!std::strcmp(argv[i], "--explain"))
      explain = true;
    else if (!std::strcmp(argv[i], "--ops"))
      ops = true;
    else if (!std::strcmp(argv[i], "--markdown"))
      markdown = true;
    else if (!std::strcmp(argv[i], "--backend") && i + 1 < argc)
      request = argv[++i];
    else if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage();
      return exit_ok;
    } else {
      std::fprintf(stderr, "parenchyma-info: unknown argument '%s'\n", argv[i]);
      usage();
      return exit_usage;
    }
  }

  std::unique_ptr<pa::Registry> owned;
  try {
    owned = std::make_unique<pa::Registry>();
  } catch (const pa::error& e) {
    std::fprintf(stderr, "parenchyma-info: %s\n", e.what());
    return exit_registry;
  }
  const pa::Registry& r = *owned;
  if (markdown) {
    if (!ops || json) {
      std::fprintf(stderr, "parenchyma-info: --markdown goes with --ops (and not --json)\n");
      return exit_usage;
    }
    print_schema_markdown(r.op_coverage());
    return exit_ok;
  }
  const Outcome sel = selected(r, request);
  // A script tells "nothing would be selected" by the exit status; the reason goes to stderr
  // too, so it is seen whatever the output format.
  const int status = sel.ok ? exit_ok : exit_no_backend;
  if (!sel.ok)
    std::fprintf(stderr, "parenchyma-info: no backend selected: %s\n", sel.error.c_str());
  const auto ranking = r.ranking();
  const auto coverage = r.op_coverage();

  if (json) {
    nlohmann::json j;
    j["version"] = 1;
    j["plugins"] = nlohmann::json::array();
    for (const auto& e : r.load_report())
      j["plugins"].push_back({{"name", e.name},
                              {"kind", e.kind},
                              {"path", e.path},
                              {"status", e.status},
                              {"stage", e.stage},
                              {"reason", e.reason},
                              {"advice", e.advice}});
    j["frameworks"] = nlohmann::json::array();
    for (const auto& f : r.frameworks()) {
      nlohmann::json fj{{"name", f->name()},
                        {"path", f->path()},
                        {"version", f->version()},
                        {"reason", f->reason()},
                        {"devices", nlohmann::json::array()}};
      for (const auto& d : f->devices()) {
        nlohmann::json props = nlohmann::json::object();
        for (const auto& [k, v] : d.properties)
          props[k] = value_json(v);
        fj["devices"].push_back({{"index", d.index},
                                 {"name", d.name},
                                 {"vendor", d.vendor},
                                 {"kind", pa::to_string(d.kind)},
                                 {"properties", props}});
      }
      j["frameworks"].push_back(fj);
    }
    j["ranking"] = nlohmann::json::array();
    for (const auto* f : ranking)
      j["ranking"].push_back(f->name());
    j["devices"] = nlohmann::json::array();
    for (const auto& d : r.device_ranking())
      j["devices"].push_back({{"backend", d.framework->name() + ":" + std::to_string(d.device)},
                              {"kind", pa::to_string(d.framework->devices()[d.device].kind)},
                              {"reason", d.reason}});
    j["notices"] = r.notices();
    if (sel.ok)
      j["selected"] = {
          {"backend", sel.selection.framework + ":" + std::to_string(sel.selection.device)},
          {"framework", sel.selection.framework},
          {"device", sel.selection.device},
          {"reason", sel.selection.reason}};
    else
      j["selected"] = {{"backend", nullptr}, {"error", sel.error}};
    j["ops"] = nlohmann::json::array();
    for (const auto& c : coverage)
      j["ops"].push_back({{"extension", c.extension},
                          {"op", c.op},
                          {"dtype", dtype_name(c.dtype)},
                          {"framework", c.framework},
                          {"bundle", c.bundle},
                          {"implementation", c.implementation},
                          {"arguments", arguments_json(c.schema)}});
    j["config"] = {{"sources", r.config().sources},
                   {"fallback", pa::to_string(r.config().fallback)},
                   {"ranking", r.config().ranking_by_kind.empty()
                                   ? nlohmann::json(r.config().ranking)
                                   : nlohmann::json(r.config().ranking_by_kind)}};
    // Paths and plugin strings need not be UTF-8: replace what is not, never abort.
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return status;
  }

  std::cout << "Plugins\n";
  for (const auto& e : r.load_report()) {
    std::printf("  %-14s %-9s %-7s %s\n", e.name.c_str(), e.kind.c_str(), e.status.c_str(),
                e.reason.c_str());
    if (explain) {
      std::printf("      path:   %s\n      stage:  %s\n", e.path.c_str(), e.stage.c_str());
      if (!e.advice.empty()) std::printf("      advice: %s\n", e.advice.c_str());
    }
  }
  std::cout << "\nFrameworks\n";
  for (const auto& f : r.frameworks()) {
    std::printf("  %s %s: %zu device(s)%s%s\n", f->name().c_str(), f->version().c_str(),
                f->devices().size(), f->reason().empty() ? "" : " - ", f->reason().c_str());
    for (const auto& d : f->devices()) {
      std::printf("    [%u] %s (%s)\n", d.index, d.name.c_str(), pa::to_string(d.kind));
      for (const auto& [k, v] : d.properties) {
        std::string text = property_text(k, v);
        if (!explain && text.size() > 100) text = text.substr(0, 97) + "...";
        std::printf("        %-18s %s\n", k.c_str(), text.c_str());
      }
    }
  }
  std::cout << "\nRanking (most potent first)\n";
  const auto devices = r.device_ranking();
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    const pa::Device& dev = d.framework->devices()[d.device];
    std::printf("  %zu. %s:%u  %s (%s)\n", i + 1, d.framework->name().c_str(), d.device,
                dev.name.c_str(), pa::to_string(dev.kind));
    if (explain) std::printf("       why: %s\n", d.reason.c_str());
  }
  if (devices.empty()) std::cout << "  (no framework with a device)\n";
  if (!r.notices().empty()) {
    std::cout << "\nNotices\n";
    for (const auto& n : r.notices())
      std::printf("  %s\n", n.c_str());
  }
  std::cout << "\nSelected\n";
  if (sel.ok)
    std::printf("  %s:%u\n  why: %s\n", sel.selection.framework.c_str(), sel.selection.device,
                sel.selection.reason.c_str());
  else
    std::printf("  none\n  why: %s\n", sel.error.c_str());

  if (ops || explain) {
    std::cout << "\nOps (extension.op dtype: framework = implementation)\n";
    std::set<std::string> frameworks;
    for (const auto& f : r.frameworks())
      frameworks.insert(f->name());
    std::map<std::string, std::map<std::string, std::string>> matrix;
    for (const auto& c : coverage)
      matrix[c.extension + "." + c.op + " " + dtype_name(c.dtype)][c.framework] = c.implementation;
    // Each column as wide as its longest entry: names are never cut.
    int op_width = 0;
    std::map<std::string, int> width;
    for (const auto& f : frameworks)
      width[f] = static_cast<int>(f.size());
    for (const auto& [op, cells] : matrix) {
      op_width = std::max(op_width, static_cast<int>(op.size()));
      for (const auto& [f, impl] : cells)
        width[f] = std::max(width[f], static_cast<int>(impl.size()));
    }
    // The last column is not padded (no trailing blanks).
    auto cell = [&](const std::string& f, const char* text) {
      std::printf(" | %-*s", f == *frameworks.rbegin() ? 0 : width[f], text);
    };
    std::printf("  %-*s", op_width, "");
    for (const auto& f : frameworks)
      cell(f, f.c_str());
    std::printf("\n");
    for (const auto& [op, cells] : matrix) {
      std::printf("  %-*s", op_width, op.c_str());
      for (const auto& f : frameworks) {
        auto it = cells.find(f);
        cell(f, it == cells.end() ? "-" : it->second.c_str());
      }
      std::printf("\n");
    }
    if (matrix.empty()) std::printf("  (no bundle plugin loaded)\n");
  }
  if (explain) {
    std::cout << "\nSearch path (in order)\n";
    for (const auto& p : r.search_path())
      std::cout << "  " << p.string() << "\n";
    std::cout << "\nConfig\n";
    for (const auto& s : r.config().sources)
      std::cout << "  read: " << s << "\n";
    std::cout << "  fallback: " << pa::to_string(r.config().fallback) << "\n  ranking:";
    for (const auto& n : r.config().ranking)
      std::cout << " " << n;
    for (const auto& [kind, names] : r.config().ranking_by_kind) {
      std::cout << " " << kind << ":";
      for (size_t i = 0; i < names.size(); ++i)
        std::cout << (i ? "," : "") << names[i];
    }
    std::cout << "\n";
  }
  return status;
}

int main(int argc, char** argv) {
  // Whatever the plugins, config or environment hold, the tool reports and exits; it never
  // aborts on an exception.
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "parenchyma-info: %s\n", e.what());
    return exit_registry;
  }
}
