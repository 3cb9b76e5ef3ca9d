// parenchyma-conformance: the run (runner.hpp). The plugins named on the command line are loaded
// into a Registry of their own — a directory or file alone, with nothing else from the search
// path; a name from the normal search path — and every framework among them runs the framework
// suite and the bundle suites whose bundles are present. A plugin that does not load is a
// failure named by its file, with the loader's stage, reason and advice.
#include "runner.hpp"

#include <parenchyma/sdk/library.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <ostream>
#include <random>
#include <set>
#include <string>

#ifndef PARENCHYMA_VERSION
#define PARENCHYMA_VERSION "unknown"
#endif

namespace parenchyma::conformance {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct framework_report {
  std::string name, version, path, first_device;
  size_t devices = 0;
  std::vector<std::string> bundles;
  std::vector<case_result> results;
};

struct totals {
  size_t passed = 0, failed = 0, skipped = 0;
  // Cases that ran under the f32 flush rule (extension_suite.hpp), and of the passed ones those
  // that passed only thanks to it (a check the usual tolerance would have failed).
  size_t flush_rule = 0, passed_flushed = 0;
  void add(const case_result& r) {
    (r.status == outcome::passed ? passed : r.status == outcome::failed ? failed : skipped)++;
    if (r.f32_flush_rule) ++flush_rule;
    if (r.status == outcome::passed && r.flushed_checks > 0) ++passed_flushed;
  }
  // "P passed, F failed, S skipped", and where the flush rule held, how many passed under it.
  std::string line() const {
    return str(passed, " passed, ", failed, " failed, ", skipped, " skipped",
               flush_rule == 0 ? "" : str("; passed under the f32 flush rule: ", passed_flushed));
  }
};

fs::path normal(const fs::path& p) {
  std::error_code ec;
  fs::path a = fs::absolute(p, ec);
  return (ec ? p : a).lexically_normal();
}

// Whether `p` is one of `roots` or lies below one of them (lexically: the registry names the
// files it found as <directory>/<file>).
bool under(const std::string& p, const std::vector<fs::path>& roots) {
  const fs::path f = normal(p);
  for (const fs::path& r : roots) {
    auto [ri, fi] = std::mismatch(r.begin(), r.end(), f.begin(), f.end());
    if (ri == r.end() || (std::next(ri) == r.end() && ri->empty())) return true;
  }
  return false;
}

bool is_plugin_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The report entry names plugin `name` (by its table, or by its file name before the table was
// read).
bool names(const LoadReportEntry& e, const std::string& name) {
  return e.name == name || fs::path(e.path).filename() ==
                               "parenchyma-" + name + parenchyma::sdk::os::shared_library_suffix;
}

// The registry's environment: the process's, less what would change what is tested. A set-uid
// process gets none, as the host's own rule says.
std::map<std::string, std::string> environment(bool keep_search_path) {
  std::map<std::string, std::string> env;
  if (parenchyma::sdk::os::secure_process()) return env;
  for (auto& [name, value] : parenchyma::sdk::os::environment_utf8())
    env.emplace(std::move(name), std::move(value));
  env.erase("PARENCHYMA_BACKEND"); // the suites ask for the framework explicitly; no deny list
  if (!keep_search_path) {
    env.erase("PARENCHYMA_PLUGIN_PATH"); // a directory or file given: exactly those plugins
    env.erase("PARENCHYMA_CONFIG");
  }
  return env;
}

bool contains_any(const std::string& s, const std::vector<std::string>& needles) {
  if (needles.empty()) return true;
  return std::any_of(needles.begin(), needles.end(),
                     [&](const std::string& n) { return s.find(n) != std::string::npos; });
}
bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

json result_json(const case_result& r) {
  json j{{"name", r.name},
         {"status", to_string(r.status)},
         {"checks", r.checks},
         {"failed_checks", r.failed_checks},
         {"seconds", r.seconds}};
  if (r.f32_flush_rule) j["flushed_checks"] = r.flushed_checks;
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (!r.failures.empty()) j["failures"] = r.failures;
  if (!r.notes.empty()) j["notes"] = r.notes;
  return j;
}

// Text output, written as the run goes (a long suite shows its progress).
class printer {
public:
  printer(std::ostream& out, bool enabled, bool quiet) : out_(out), on_(enabled), quiet_(quiet) {}
  template <class... A> void line(A&&... a) {
    if (on_) out_ << str(std::forward<A>(a)...) << "\n" << std::flush;
  }
  template <class... A> void detail(A&&... a) {
    if (!quiet_) line(std::forward<A>(a)...);
  }
  void result(const case_result& r) {
    if (!on_) return;
    if (r.status == outcome::passed) {
      // Under --quiet one that passed only under the f32 flush rule is still shown: which cells
      // needed the rule.
      if (quiet_ && r.flushed_checks == 0) return;
      line("  ok    ", r.name,
           r.flushed_checks == 0
               ? ""
               : str(" (", r.flushed_checks, " check(s) passed under the f32 flush rule)"));
    } else if (r.status == outcome::skipped) {
      line("  skip  ", r.name, ": ", r.reason);
    } else {
      line("  FAIL  ", r.name);
      for (const auto& f : r.failures)
        line("          ", f);
      if (r.failed_checks > r.failures.size())
        line("          (and ", r.failed_checks - r.failures.size(), " more failed checks)");
    }
    if (!quiet_)
      for (const auto& n : r.notes)
        line("          note: ", n);
  }

private:
  std::ostream& out_;
  bool on_, quiet_;
};

// What the command line asked for, resolved against the file system.
struct request {
  std::vector<fs::path> roots;     // directories and files given
  std::vector<std::string> names;  // plugin names to find on the normal search path
  std::vector<std::string> wanted; // frameworks to test by name (names and --framework)
};

// Turns the positional arguments into paths and names; a usage error names the argument.
std::optional<std::string> resolve(const run_options& o, request& rq) {
  for (const std::string& p : o.plugins) {
    std::error_code ec;
    if (fs::exists(p, ec)) {
      rq.roots.push_back(normal(p));
    } else if (is_plugin_name(p)) {
      rq.names.push_back(p);
      rq.wanted.push_back(p);
    } else {
      return str(p, ": no such file or directory, and not a plugin name ([a-z0-9_]+)");
    }
  }
  for (const std::string& f : o.frameworks)
    if (!listed(rq.wanted, f)) rq.wanted.push_back(f);
  return std::nullopt;
}

RegistryOptions registry_options(const run_options& o, const request& rq) {
  RegistryOptions ro;
  ro.plugin_paths = rq.roots;
  const bool search = !rq.names.empty();
  ro.environment = environment(search);
  ro.default_plugin_dir = search;
  ro.default_config = search;
  ro.config_file = o.config;
  // The suites make bad calls on purpose: the plugin itself must answer them, not the core's
  // validation layer in front of it.
  ro.validate = false;
  return ro;
}

class run_state {
public:
  run_state(const run_options& o, std::ostream& out)
      : o_(o), text_(out, !o.json, o.quiet), suites_(make_suites()) {}

  int run(std::ostream& out, std::ostream& err);

private:
  bool suite_selected(const suite& s) const {
    return o_.suites.empty() || listed(o_.suites, s.name);
  }
  void report_loading(const Registry& reg, const request& rq);
  void test_framework(Registry& reg, const Framework& fw);
  void run_suite(suite& s, Registry& reg, const Framework& fw, framework_report& fr);
  void add_load_result(case_result r) {
    text_.result(r);
    all_.add(r);
    load_results_.push_back(std::move(r));
  }
  json report_json(const request& rq) const;

  const run_options& o_;
  printer text_;
  std::vector<suite> suites_;
  uint64_t seed_ = 0;
  totals all_;
  std::vector<case_result> load_results_;
  std::vector<LoadReportEntry> load_entries_;
  std::vector<framework_report> frameworks_;
  size_t executed_ = 0; // cases that ran (passed or failed), not skipped
};

void run_state::report_loading(const Registry& reg, const request& rq) {
  std::set<std::string> tested;
  for (const auto& f : reg.frameworks())
    tested.insert(f->name());
  for (const LoadReportEntry& e : reg.load_report()) {
    const bool asked =
        under(e.path, rq.roots) ||
        std::any_of(rq.names.begin(), rq.names.end(), [&](const auto& n) { return names(e, n); });
    if (!asked) continue;
    // With --framework, what concerns the other frameworks is not this run's business.
    if (!o_.frameworks.empty()) {
      const BundleInfo* bundle = nullptr;
      for (const auto& b : reg.bundles())
        if (b->path() == e.path) bundle = b.get();
      const bool ours = std::any_of(o_.frameworks.begin(), o_.frameworks.end(), [&](const auto& f) {
        return names(e, f) || (bundle != nullptr && bundle->framework() == f);
      });
      if (!ours) continue;
    }
    load_entries_.push_back(e);
    const std::string file = fs::path(e.path).filename().string();
    const std::string what = str("load/", file.empty() ? e.path : file);
    const std::string why =
        str(e.name, " (", e.kind, ") ", e.status, " at stage ", e.stage,
            e.reason.empty() ? "" : ": " + e.reason, e.advice.empty() ? "" : " — " + e.advice);
    if (e.status == "failed") {
      add_load_result(make_result(what, outcome::failed, why));
    } else if (e.status == "skipped") {
      add_load_result(make_result(what, outcome::skipped, why));
    } else if (e.kind == "bundle" &&
               std::none_of(reg.bundles().begin(), reg.bundles().end(), [&](const auto& b) {
                 return b->path() == e.path && tested.count(b->framework()) != 0;
               })) {
      add_load_result(make_result(
          what, outcome::skipped,
          str(e.name, ": its framework is not among the plugins loaded here, so its suite cannot "
                      "run; give the framework's directory too")));
    }
  }
}

void run_state::run_suite(suite& s, Registry& reg, const Framework& fw, framework_report& fr) {
  std::vector<const test_case*> cases;
  for (const test_case& c : s.cases)
    if (contains_any(s.name + "/" + c.name, o_.filters)) cases.push_back(&c);
  if (cases.empty()) return; // nothing of this suite selected
  auto suite_result = [&](outcome status, std::string reason) {
    case_result r = make_result(s.name + "/*", status, std::move(reason));
    text_.result(r);
    all_.add(r);
    fr.results.push_back(std::move(r));
  };
  target t{reg, fw, {}, o_.suite};
  if (!s.extension.empty()) {
    for (const auto& b : reg.bundles())
      if (b->extension() == s.extension && b->framework() == fw.name())
        t.bundles.push_back(b.get());
    if (t.bundles.empty()) {
      // Asked for by name, the suite must run; otherwise a framework without the extension is
      // simply not tested for it.
      const bool asked = listed(o_.suites, s.name);
      suite_result(asked ? outcome::failed : outcome::skipped,
                   str("no ", s.extension, " bundle for ", fw.name(),
                       " was loaded (parenchyma-info --explain says why)"));
      return;
    }
    for (const BundleInfo* b : t.bundles)
      fr.bundles.push_back(b->name());
  }
  try {
    s.setup(t);
  } catch (const case_skipped& k) {
    suite_result(outcome::skipped, k.reason);
    return;
  } catch (const std::exception& e) {
    suite_result(outcome::failed, str("the suite could not be set up: ", e.what()));
    return;
  }
  for (const test_case* c : cases) {
    case_result r = run_case(s.name + "/" + c->name, c->run);
    if (r.status != outcome::skipped) ++executed_;
    text_.result(r);
    all_.add(r);
    fr.results.push_back(std::move(r));
  }
  if (s.teardown) s.teardown();
}

void run_state::test_framework(Registry& reg, const Framework& fw) {
  framework_report fr;
  fr.name = fw.name();
  fr.version = fw.version();
  fr.path = fw.path();
  fr.devices = fw.devices().size();
  if (!fw.devices().empty()) fr.first_device = fw.devices()[0].name;
  text_.line("framework ", fr.name, " ", fr.version, " from ", fr.path, ": ", fr.devices,
             " device(s)", fr.first_device.empty() ? "" : ", first: " + fr.first_device);
  if (fw.devices().empty()) {
    const std::string why =
        str("0 devices: ", fw.reason().empty() ? std::string("no reason given") : fw.reason());
    case_result r =
        make_result(fr.name + "/*", o_.require_devices ? outcome::failed : outcome::skipped, why);
    text_.result(r);
    all_.add(r);
    fr.results.push_back(std::move(r));
  } else {
    for (suite& s : suites_)
      if (suite_selected(s)) run_suite(s, reg, fw, fr);
  }
  totals t;
  for (const auto& r : fr.results)
    t.add(r);
  text_.line(fr.name, ": ", t.line());
  frameworks_.push_back(std::move(fr));
}

json run_state::report_json(const request& rq) const {
  json j;
  j["tool"] = "parenchyma-conformance";
  j["version"] = PARENCHYMA_VERSION;
  j["abi"] = str(PCY_ABI_VERSION_MAJOR, ".", PCY_ABI_VERSION_MINOR);
  j["seed"] = seed_;
  j["plugins"] = o_.plugins;
  json paths = json::array();
  for (const auto& r : rq.roots)
    paths.push_back(r.string());
  j["paths"] = paths;
  json load = json::array();
  for (const auto& e : load_entries_)
    load.push_back({{"path", e.path},
                    {"name", e.name},
                    {"kind", e.kind},
                    {"stage", e.stage},
                    {"status", e.status},
                    {"reason", e.reason},
                    {"advice", e.advice}});
  j["load"] = load;
  json lr = json::array();
  for (const auto& r : load_results_)
    lr.push_back(result_json(r));
  j["load_results"] = lr;
  json fws = json::array();
  for (const auto& f : frameworks_) {
    json cases = json::array();
    totals t;
    for (const auto& r : f.results) {
      cases.push_back(result_json(r));
      t.add(r);
    }
    fws.push_back({{"name", f.name},
                   {"version", f.version},
                   {"path", f.path},
                   {"devices", f.devices},
                   {"first_device", f.first_device},
                   {"bundles", f.bundles},
                   {"passed", t.passed},
                   {"failed", t.failed},
                   {"skipped", t.skipped},
                   {"cases", cases}});
    if (t.flush_rule != 0) fws.back()["passed_under_f32_flush_rule"] = t.passed_flushed;
  }
  j["frameworks"] = fws;
  j["summary"] = {{"passed", all_.passed}, {"failed", all_.failed}, {"skipped", all_.skipped}};
  if (all_.flush_rule != 0) j["summary"]["passed_under_f32_flush_rule"] = all_.passed_flushed;
  return j;
}

int run_state::run(std::ostream& out, std::ostream& err) {
  for (const std::string& s : o_.suites)
    if (std::none_of(suites_.begin(), suites_.end(), [&](const suite& x) { return x.name == s; })) {
      err << "parenchyma-conformance: --suite " << s << ": no such suite (";
      for (size_t i = 0; i < suites_.size(); ++i)
        err << (i ? ", " : "") << suites_[i].name;
      err << ")\n";
      return 2;
    }
  if (o_.list) {
    for (const suite& s : suites_) {
      if (!suite_selected(s)) continue;
      out << "suite " << s.name << ": " << s.description << "\n";
      for (const test_case& c : s.cases)
        if (contains_any(s.name + "/" + c.name, o_.filters))
          out << "  " << s.name << "/" << c.name << "\n";
    }
    return 0;
  }
  if (o_.plugins.empty()) {
    err << "parenchyma-conformance: name a plugin directory, plugin file or plugin name "
           "(--help)\n";
    return 2;
  }
  request rq;
  if (auto bad = resolve(o_, rq)) {
    err << "parenchyma-conformance: " << *bad << "\n";
    return 2;
  }
  seed_ = o_.seed ? *o_.seed : std::random_device{}();
  seed_rng(seed_);

  std::unique_ptr<Registry> reg;
  try {
    reg = std::make_unique<Registry>(registry_options(o_, rq));
  } catch (const std::exception& e) {
    err << "parenchyma-conformance: the plugins cannot be loaded: " << e.what() << "\n";
    return 1;
  }
  text_.line("parenchyma-conformance ", PARENCHYMA_VERSION, " (ABI ", PCY_ABI_VERSION_MAJOR, ".",
             PCY_ABI_VERSION_MINOR, "), seed ", seed_, " (--seed ", seed_, " repeats this run)");
  for (const auto& n : reg->notices())
    text_.detail("notice: ", n);
  report_loading(*reg, rq);

  std::vector<const Framework*> chosen;
  for (const auto& f : reg->frameworks()) {
    const bool asked = under(f->path(), rq.roots) || listed(rq.names, f->name());
    if (asked && (o_.frameworks.empty() || listed(o_.frameworks, f->name())))
      chosen.push_back(f.get());
  }
  for (const std::string& w : rq.wanted) {
    if (std::any_of(chosen.begin(), chosen.end(), [&](const auto* f) { return f->name() == w; }))
      continue;
    const bool reported = std::any_of(load_entries_.begin(), load_entries_.end(),
                                      [&](const auto& e) { return names(e, w); });
    if (reported) continue; // its load failure is already a result
    add_load_result(make_result(
        "load/" + w, o_.require_load || o_.require_devices ? outcome::failed : outcome::skipped,
        str("framework plugin '", w, "' was not found among the plugins given")));
  }
  if (chosen.empty() && load_results_.empty())
    add_load_result(make_result(
        "load/*", o_.require_load || o_.require_devices ? outcome::failed : outcome::skipped,
        "no framework plugin found in the plugins given"));
  for (const Framework* f : chosen)
    test_framework(*reg, *f);

  const int status = all_.failed > 0 ? 1 : executed_ == 0 ? o_.skip_exit : 0;
  text_.line("summary: ", all_.line(), "; exit ", status);
  if (o_.json || !o_.json_file.empty()) {
    json j = report_json(rq);
    j["exit"] = status;
    if (o_.json) out << j.dump(2) << "\n";
    if (!o_.json_file.empty()) {
      std::ofstream f(o_.json_file);
      f << j.dump(2) << "\n";
      if (!f) {
        err << "parenchyma-conformance: cannot write " << o_.json_file << "\n";
        return 1;
      }
    }
  }
  return status;
}

} // namespace

int run(const run_options& options, std::ostream& out, std::ostream& err) {
  run_state state(options, out);
  return state.run(out, err);
}

} // namespace parenchyma::conformance
