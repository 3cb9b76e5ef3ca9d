// parenchyma mock plugin: programs in the mock's kernel language — one line per kernel,
// "kernel <name>", from a fixed set — with a build log naming the line that is wrong.
#include "mock.hpp"

#include <chrono>
#include <string>
#include <thread>

namespace parenchyma::mock {

namespace {
constexpr const char* known_kernels[] = {"add_one"};
} // namespace

program* context::build(std::string_view source, const char*, bool& cache_hit) {
  settings::offered(plugin_.config().programs, "programs");
  cache_hit = false; // nothing to cache: building is reading the lines
  std::vector<std::string> kernels;
  size_t line_no = 0;
  while (!source.empty()) {
    const size_t nl = source.find('\n');
    std::string_view line = source.substr(0, nl);
    source = nl == std::string_view::npos ? std::string_view() : source.substr(nl + 1);
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    bool known = false;
    if (line.substr(0, 7) == "kernel ")
      for (const char* k : known_kernels)
        known = known || line.substr(7) == k;
    if (!known)
      sdk::fail(PCY_ERR_BUILD, sdk::str("mock build log:\nline ", line_no,
                                        ": expected 'kernel add_one', got '", line, "'"));
    kernels.emplace_back(line.substr(7));
  }
  if (kernels.empty()) sdk::fail(PCY_ERR_BUILD, "mock build log:\nthe program has no kernel");
  plugin_.log().progress(
      sdk::str("compiling ", kernels.front(), kernels.size() > 1 ? " and more" : ""));
  if (plugin_.config().build_ms > 0) // PARENCHYMA_MOCK_BUILD_MS: a slow compile
    std::this_thread::sleep_for(std::chrono::milliseconds(plugin_.config().build_ms));
  return new program(std::move(kernels));
}

kernel* program::create_kernel(const char* name) {
  for (const auto& k : kernels_)
    if (k == name) return new kernel(k);
  sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("the mock program has no kernel '", name, "'"));
}

} // namespace parenchyma::mock
