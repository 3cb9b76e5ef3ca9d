// Loaded by global_cxx_host.c with dlopen(RTLD_LOCAL), as Python loads an extension module: makes
// a registry over the mock plugin (so the core goes through its plugin-loading path) and reports
// how many frameworks loaded.
#include <parenchyma/registry.hpp>

#include <cstdio>

extern "C" __attribute__((visibility("default"))) int pcy_shim_load(const char* plugin_dir) {
  try {
    parenchyma::RegistryOptions o;
    o.plugin_paths = {plugin_dir};
    o.default_plugin_dir = false;
    o.default_config = false;
    parenchyma::Registry r(o);
    return static_cast<int>(r.frameworks().size());
  } catch (const std::exception& e) {
    std::printf("registry: %s\n", e.what());
    return -1;
  }
}
