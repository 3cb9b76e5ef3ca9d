// Test main for the OpenCL plugin-level tests: skips (exit 77) when the plugin finds no device,
// and serves the child-process modes the tests start:
//   --child-probe                       print "devices=<n> reason=<text>"
//   --child-build <cache_dir> <file>    build the source in <file> with that cache, run it, check
#include "plugin_fixture.hpp"
#include "support/catch_run.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

using namespace pcy_test;

namespace {

int child_probe() {
  test_host h(std::nullopt);
  host::framework fw(&plugin_api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  std::printf("devices=%u reason=%s\n", p.device_count, p.reason ? p.reason : "(none)");
  return 0;
}

// One of several processes building the same program into one cache at the same time.
int child_build(const std::string& cache_dir, const std::string& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    env e(cache_dir);
    auto b = build(e, ss.str());
    auto k = make_kernel(e, b.program.get(), "axpy");
    const int n = 1001;
    const float a = 2.5f;
    auto x = random_floats(n), y = random_floats(n);
    auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
    auto my = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
    host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(float));
    host::write(e.fw, e.q.get(), my.get(), 0, y.data(), n * sizeof(float));
    launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, n);
    std::vector<float> out(n);
    host::read(e.fw, e.q.get(), my.get(), 0, out.data(), n * sizeof(float));
    for (int i = 0; i < n; ++i) {
      const double want = double(a) * x[i] + y[i];
      if (std::abs(out[i] - want) > 1e-5 * (1 + std::abs(want))) {
        std::printf("wrong result at %d: %g vs %g\n", i, double(out[i]), want);
        return 1;
      }
    }
    std::printf("cache_hit=%d\n", b.cache_hit ? 1 : 0);
    return 0;
  } catch (const std::exception& ex) {
    std::printf("child failed: %s\n", ex.what());
    return 1;
  }
}

} // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--child-probe") return child_probe();
  if (mode == "--child-build" && argc == 4) return child_build(argv[2], argv[3]);

  {
    test_host h(std::nullopt);
    host::framework fw(&plugin_api(), &h.services);
    const pcy_framework_probe p = fw.probe();
    if (p.device_count == 0) {
      std::printf("SKIPPED: the OpenCL plugin found no device: %s\n",
                  p.reason ? p.reason : "(no reason given)");
      return 77;
    }
  }
  return parenchyma_test::run_catch(argc, argv);
}
