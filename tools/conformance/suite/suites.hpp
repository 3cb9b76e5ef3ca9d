// parenchyma-conformance: the suites. The framework suite checks any framework plugin through
// its raw C table; each extension has a bundle suite (blas, nn; built on extension_suite.hpp)
// that runs when a bundle of that extension for the framework is present. A suite is data — a name,
// a set-up, its cases — made by an explicit function and listed in make_suites(), so nothing
// registers itself when a library is loaded.
#pragma once

#include "harness.hpp"

#include <parenchyma/parenchyma.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace parenchyma::conformance {

// What a run asks of the suites.
struct suite_options {
  // Every op of a bundle must be served here (not skipped as "unsupported", not run on another
  // framework by fallback); the optional cells (extension_suite.hpp: f64 on a device that
  // reports no fp64, f16 and bf16) are still skipped, with the reason.
  bool require_ops = false;
  // The framework suite's add_one kernel in the framework's own language (--kernel-source);
  // empty: the suite's built-in sources (OpenCL C, CUDA C, the stub's and the mock's).
  std::string add_one_source;
};

// One framework under test, as the registry loaded it.
struct target {
  Registry& registry;
  const Framework& framework;
  // The bundles of the suite's extension for this framework (empty for the framework suite).
  std::vector<const BundleInfo*> bundles;
  const suite_options& options;
};

struct suite {
  std::string name;        // "framework", "blas": the prefix of its case names, what --suite picks
  std::string extension;   // empty: runs on every framework; else needs a bundle of this extension
  std::string description; // one line for --list
  // Prepares the suite for one framework (a plugin instance's host services, a backend); the
  // cases use what it made. Throws case_skipped when the suite does not apply (no devices, a
  // bundle that serves no ops), anything else when it cannot be set up (a failure).
  std::function<void(const target&)> setup;
  std::function<void()> teardown; // releases what setup made, before the next framework
  std::vector<test_case> cases;
};

suite framework_suite();
suite blas_suite();
suite nn_suite();
// Every suite, in the order they run: the framework suite first.
std::vector<suite> make_suites();

} // namespace parenchyma::conformance
