// Plugin-level test support: loads the built parenchyma-opencl.so with dlopen (no core
// involved) and drives it through the SDK's host wrappers; captures the plugin's log; random
// data; child processes for the tests that need a fresh process (environment, concurrency).
#pragma once

#include "support/catch.hpp"

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/host.hpp>

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace pcy_test {

// A value for run_children's environment that removes the variable instead of setting it.
inline const std::string unset_env = "\x01unset";

namespace host = parenchyma::sdk::host;

// Every message the plugin logged through the host callback.
struct captured_log {
  std::mutex mu;
  std::vector<std::pair<pcy_log_level, std::string>> lines;
  size_t count(pcy_log_level level, std::string_view needle);
  std::string dump();
};

// Host services with a log that captures, and a cache directory (nullopt: no cache).
struct test_host {
  explicit test_host(std::optional<std::string> cache_dir);
  captured_log log;
  std::string cache_dir;
  pcy_host_services services{};
};

const pcy_framework_api& plugin_api(); // dlopen of PCY_OPENCL_PLUGIN, once per process

// One initialised plugin with a context and a queue on device 0.
struct env {
  explicit env(std::optional<std::string> cache_dir = std::nullopt);
  std::unique_ptr<test_host> h;
  host::framework fw;
  host::context ctx;
  host::queue q;
  const pcy_framework_api& api() const { return fw.api(); }
};

// A fresh directory under $PARENCHYMA_CACHE_DIR (or /tmp), removed by the caller if wanted.
std::string fresh_dir(const std::string& tag);

std::mt19937_64& rng(); // seeded from random_device; the seed is printed once
std::vector<unsigned char> random_bytes(size_t n);
std::vector<float> random_floats(size_t n);
std::vector<double> random_doubles(size_t n);

// Runs fn; REQUIREs that it throws an abi_error with `code` whose message holds every needle.
std::string expect_error(const std::function<void()>& fn, pcy_status code,
                         std::initializer_list<std::string_view> needles = {});

struct built {
  host::program program;
  bool cache_hit = false;
};
built build(const env& e, const std::string& source, const char* options = nullptr);
host::kernel make_kernel(const env& e, pcy_program p, const char* name);
void launch(const env& e, pcy_kernel k, std::initializer_list<pcy_kernel_arg> args, uint64_t global,
            uint32_t local = 0);
pcy_kernel_arg mem_arg(pcy_memory m);
template <class T> pcy_kernel_arg scalar_arg(const T& v) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_SCALAR;
  a.value = &v;
  a.size = sizeof(T);
  return a;
}
pcy_kernel_arg local_arg(size_t bytes);

// Runs this test binary again as `<self> args...` with extra environment, concurrently when
// several are started; returns exit codes (and output) once all have finished.
struct child_result {
  int exit_code = -1;
  std::string output;
};
std::vector<child_result> run_children(const std::vector<std::vector<std::string>>& argvs,
                                       const std::map<std::string, std::string>& env = {});

// A source that no cache (ours or the driver's) has seen.
std::string unique_source(const std::string& body);

extern const char* axpy_source; // kernels axpy(n, a, x, y) in float

} // namespace pcy_test
