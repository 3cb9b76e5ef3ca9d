// parenchyma-conformance: what a run is asked to do, and the run itself — load the plugins named
// on the command line into a Registry of their own, run every applicable suite on each framework,
// and report pass / fail / skipped-with-reason per case as text or JSON.
#pragma once

#include "suites.hpp"

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace parenchyma::conformance {

struct run_options {
  // Plugin directories, plugin files, or names of plugins on the normal search path.
  std::vector<std::string> plugins;
  std::vector<std::string> frameworks; // --framework: test only these
  std::vector<std::string> suites;     // --suite: run only these (a bundle suite must then run)
  std::vector<std::string> filters;    // --filter: only cases whose name contains one of them
  bool list = false;                   // --list: print the cases and stop
  bool json = false;                   // --json: the report as JSON on stdout
  std::string json_file;               // --json-file: the JSON report into a file as well
  bool quiet = false;                  // --quiet: failures, skips and the summary only
  bool require_load = false;    // --require-load: a framework asked for that does not load fails
  bool require_devices = false; // --require-devices: and one with 0 devices fails
  std::optional<std::filesystem::path> config; // --config: a config file (settings, paths)
  std::optional<uint64_t> seed;                // --seed: the random data's seed
  int skip_exit = 0; // --skip-exit: the exit status when nothing could be tested
  suite_options suite;
};

// Exit status: 0 every case passed or was skipped, 1 a failure (including a plugin that did not
// load), 2 a usage error, `skip_exit` when nothing could be tested at all.
int run(const run_options& options, std::ostream& out, std::ostream& err);

} // namespace parenchyma::conformance
