// bin/test_conformance: the framework conformance suite under its earlier command line, for
// scripts that run it from a build tree. The suite and the run are parenchyma-conformance's
// (tools/conformance/suite/); this only maps the old arguments onto them.
//   test_conformance <framework> [--built | --required]
// The framework is looked for in the build tree's plugin directory (the stub in its own), and in
// PARENCHYMA_PLUGIN_PATH's directories. Absent, or with 0 devices: skipped, exit 77; --built (the
// plugin is built here) makes one that does not load a failure, --required (it must have
// devices here) 0 devices one too.
#include "loader/testing.hpp"

#include "suite/runner.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

int main(int argc, char** argv) {
  namespace pc = parenchyma::conformance;
  if (argc < 2 || argv[1][0] == '-') {
    std::cerr << "usage: " << argv[0] << " <framework> [--built|--required]\n"
              << "(parenchyma-conformance --help: the program this runs)\n";
    return 2;
  }
  pc::run_options o;
  const std::string name = argv[1];
  o.frameworks = {name};
  o.suites = {"framework"};
  o.skip_exit = 77;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--required") {
      o.require_load = o.require_devices = true;
    } else if (arg == "--built") {
      o.require_load = true;
    } else {
      std::cerr << argv[0] << ": unknown argument " << arg << "\n";
      return 2;
    }
  }
  if (name == "stub") {
    o.plugins = {pcy_test::stub_dir("good").string()};
  } else {
    if (const char* dir = PCY_TEST_PLUGIN_DIR; *dir != '\0') o.plugins.push_back(dir);
    if (const char* extra = std::getenv("PARENCHYMA_PLUGIN_PATH")) {
      std::istringstream paths(extra);
      for (std::string p; std::getline(paths, p, ':');)
        if (!p.empty() && std::filesystem::exists(p)) o.plugins.push_back(p);
    }
  }
  return pc::run(o, std::cout, std::cerr);
}
