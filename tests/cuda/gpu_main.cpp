// Test main for the GPU tests of the CUDA plugin: without a device it checks that the plugin
// initialised cleanly with a reason, prints it and exits 77 (ctest: skipped).
#include "fixture.hpp"
#include "support/catch_run.hpp"

using namespace cuda_test;

int main(int argc, char** argv) {
  try {
    test_host h;
    host::framework fw(&plugin_api(), &h.services);
    const pcy_framework_probe p = fw.probe();
    if (p.device_count == 0) {
      if (p.reason == nullptr || *p.reason == '\0') {
        std::printf("FAILED: the cuda plugin reports 0 devices without a reason\n");
        return 1;
      }
      std::printf("SKIPPED: cuda: %s\n", p.reason);
      return 77;
    }
  } catch (const std::exception& e) {
    std::printf("FAILED: the cuda plugin did not initialise: %s\n", e.what());
    return 1;
  }
  return parenchyma_test::run_catch(argc, argv);
}
