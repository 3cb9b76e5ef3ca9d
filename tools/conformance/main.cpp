// parenchyma-conformance: the framework conformance suite and every extension's bundle suite as
// one installed program, so a plugin author tests a plugin with nothing but an installed
// parenchyma. The command line is parsed here; suite/runner.cpp does the run.
#include "suite/runner.hpp"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>

namespace {

namespace pc = parenchyma::conformance;

void usage(std::ostream& os) {
  os << "usage: parenchyma-conformance [options] PLUGIN...\n"
        "  PLUGIN: a plugin directory, a plugin file (.so), or the name of a plugin on the\n"
        "          normal search path (PARENCHYMA_PLUGIN_PATH, the config, the installed\n"
        "          plugin directory). Directories and files are tested alone: nothing else\n"
        "          from the search path is loaded.\n"
        "Runs the framework suite on every framework plugin given, and each extension's\n"
        "bundle suite (blas, nn) where a bundle of that extension for the framework is present.\n"
        "Options:\n"
        "  --framework NAME   test only this framework (repeatable)\n"
        "  --suite NAME       run only this suite: framework, blas, nn (repeatable); a bundle\n"
        "                     suite named here fails when its bundle is missing\n"
        "  --filter TEXT      run only the cases whose name contains TEXT (repeatable)\n"
        "  --list             list the cases (of the selected suites) and exit\n"
        "  --json             print the report as JSON instead of text\n"
        "  --json-file FILE   also write the JSON report to FILE\n"
        "  --quiet            print only failures, skips and the summaries\n"
        "  --require-load     a framework asked for that does not load is a failure, not a\n"
        "                     skip\n"
        "  --require-devices  so is a framework with 0 devices\n"
        "  --require-ops      so is an op of a bundle that is not served on the device (f64\n"
        "                     on a device without fp64 aside)\n"
        "  --required         all three\n"
        "  --kernel-source FILE  the add_one kernel in the framework's language, for the\n"
        "                     program cases (built in: OpenCL C, CUDA C, stub, mock)\n"
        "  --config FILE      a parenchyma config file (its \"settings\" reach the plugins)\n"
        "  --seed N           the seed of the random data (each report prints its own)\n"
        "  --skip-exit N      the exit status when nothing could be tested (default 0)\n"
        "  -h, --help         this text\n"
        "Exit status: 0 every case passed or was skipped, 1 a failure, 2 a usage error.\n"
        "Plugins read their settings (e.g. PARENCHYMA_MOCK_DEVICES) from the environment or\n"
        "from the config's \"settings\", as in any parenchyma program.\n";
}

template <class T> bool parse_number(std::string_view s, T& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

} // namespace

int main(int argc, char** argv) {
  pc::run_options o;
  auto bad = [](const std::string& what) {
    std::cerr << "parenchyma-conformance: " << what << " (--help)\n";
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    // Options with a value take it from the next argument.
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      usage(std::cout);
      return 0;
    } else if (a == "--list") {
      o.list = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--quiet") {
      o.quiet = true;
    } else if (a == "--require-load") {
      o.require_load = true;
    } else if (a == "--require-devices") {
      o.require_devices = true;
    } else if (a == "--require-ops") {
      o.suite.require_ops = true;
    } else if (a == "--required") {
      o.require_load = o.require_devices = o.suite.require_ops = true;
    } else if (a == "--framework" || a == "--suite" || a == "--filter" || a == "--json-file" ||
               a == "--kernel-source" || a == "--config" || a == "--seed" || a == "--skip-exit") {
      if (!value(v)) return bad(std::string(a) + " needs a value");
      if (a == "--framework") {
        o.frameworks.push_back(v);
      } else if (a == "--suite") {
        o.suites.push_back(v);
      } else if (a == "--filter") {
        o.filters.push_back(v);
      } else if (a == "--json-file") {
        o.json_file = v;
      } else if (a == "--config") {
        o.config = v;
      } else if (a == "--kernel-source") {
        if (!read_file(v, o.suite.add_one_source))
          return bad("--kernel-source " + v + ": unreadable");
      } else if (a == "--seed") {
        uint64_t seed = 0;
        if (!parse_number(v, seed)) return bad("--seed " + v + ": not a number");
        o.seed = seed;
      } else {
        int code = 0;
        if (!parse_number(v, code) || code < 0 || code > 255)
          return bad("--skip-exit " + v + ": not an exit status (0-255)");
        o.skip_exit = code;
      }
    } else if (a.size() > 1 && a[0] == '-') {
      return bad("unknown option " + std::string(a));
    } else {
      o.plugins.emplace_back(a);
    }
  }
  return pc::run(o, std::cout, std::cerr);
}
