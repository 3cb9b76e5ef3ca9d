// A throwaway plugin directory for tests that need a registry over a chosen set of plugins:
// the named plugin files copied from PARENCHYMA_TEST_PLUGIN_DIR (a compile definition of the
// test) next to a config file, removed again at the end of the scope.
#pragma once

#include "support/catch.hpp"

#include <parenchyma/registry.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace parenchyma::test {

struct plugin_sandbox {
  std::filesystem::path dir;
  plugin_sandbox(const std::vector<std::string>& plugins, const std::string& config) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pcy-sandbox-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    std::filesystem::create_directory(dir / "plugins");
    for (const auto& p : plugins)
      std::filesystem::copy_file(std::filesystem::path(PARENCHYMA_TEST_PLUGIN_DIR) / p,
                                 dir / "plugins" / p);
    std::ofstream(dir / "config.json") << config;
  }
  ~plugin_sandbox() { std::filesystem::remove_all(dir); }
  plugin_sandbox(const plugin_sandbox&) = delete;
  plugin_sandbox& operator=(const plugin_sandbox&) = delete;
  // A registry over these plugins and this config alone (no environment, no default places).
  RegistryOptions options() const {
    RegistryOptions o;
    o.plugin_paths = {dir / "plugins"};
    o.config_file = dir / "config.json";
    o.environment = std::map<std::string, std::string>{};
    o.default_plugin_dir = false;
    o.default_config = false;
    return o;
  }
};

inline bool have_plugin(const char* file) {
  return std::filesystem::exists(std::filesystem::path(PARENCHYMA_TEST_PLUGIN_DIR) / file);
}

} // namespace parenchyma::test
