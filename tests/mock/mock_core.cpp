// The core against the mock framework plugin (plugins/mock), a real plugin whose shape each test
// chooses through host settings: the transfer route the core takes by host_unified and by what
// the plugin exports and imports (docs/plugin-guide.md: aliasing needs host_unified), ranking by
// device kind, data through asynchronous queues and between two devices, the device a request
// names, and settings from the environment and from the config's "settings".
#include "loader/testing.hpp"
#include "support/catch.hpp"
#include "support/pipe_capture.hpp"

#include <parenchyma/parenchyma.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

using namespace parenchyma;
using namespace pcy_test;

namespace {

const fs::path mock_dir = PCY_TEST_MOCK_DIR;

// A registry that sees only the mock, with exactly these settings.
RegistryOptions mock_only(std::map<std::string, std::string> settings) {
  return isolated({mock_dir}, std::move(settings));
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(i) * 0.25f;
  return v;
}

SharedTensor<float> tensor_of(const std::vector<float>& v) {
  SharedTensor<float> t({static_cast<int64_t>(v.size())});
  auto w = t.write_only();
  std::copy(v.begin(), v.end(), w.begin());
  return t;
}

// x[i] += 1 on the backend, with the mock's add_one kernel.
void add_one(const Backend& b, SharedTensor<float>& t) {
  const Program p = b.build_program("kernel add_one\n");
  const auto n = static_cast<uint32_t>(t.size());
  b.launch(p.kernel("add_one"), LaunchDims::linear(n), {KernelArg::inout(t), KernelArg::scalar(n)});
}

} // namespace

TEST_CASE("host memory is aliased into a device only when it says host_unified") {
  for (const bool unified : {false, true}) {
    INFO("host_unified " << unified);
    Registry reg(mock_only({{"PARENCHYMA_MOCK_HOST_UNIFIED", unified ? "1" : "0"}}));
    Backend b(reg, "mock");
    const auto v = ramp(1024);
    auto t = tensor_of(v);
    (void)t.read(b); // onto the device
    if (unified) {
      CHECK(t.stats().aliases == 1);
      CHECK(t.stats().host_to_device == 0);
    } else {
      CHECK(t.stats().aliases == 0);
      CHECK(t.stats().host_to_device == 1);
    }
    add_one(b, t);
    const auto back = t.read();
    for (size_t i = 0; i < v.size(); ++i)
      REQUIRE(back[i] == v[i] + 1.0f);
  }
}

TEST_CASE("a plugin with export and import switched off gets copies, host_unified or not") {
  Registry reg(mock_only(
      {{"PARENCHYMA_MOCK_HOST_UNIFIED", "1"}, {"PARENCHYMA_MOCK_SLOTS", "native,programs"}}));
  Backend b(reg, "mock");
  const auto v = ramp(333);
  auto t = tensor_of(v);
  (void)t.read(b);
  CHECK(t.stats().aliases == 0);
  CHECK(t.stats().host_to_device == 1);
  add_one(b, t);
  const auto back = t.read(); // the device's bytes come back by a read, not an alias
  CHECK(t.stats().device_to_host == 1);
  for (size_t i = 0; i < v.size(); ++i)
    REQUIRE(back[i] == v[i] + 1.0f);
}

TEST_CASE("device memory the plugin exports as a host pointer is read on the host without a copy") {
  Registry reg(mock_only({}));
  Backend b(reg, "mock");
  SharedTensor<float> t({64});
  {
    auto w = t.write_only(b); // a device slot first: the host copy is made later
    (void)w;
  }
  const auto v = ramp(64);
  auto h = t.write(); // the host copy aliases the device memory (export of a host pointer)
  std::copy(v.begin(), v.end(), h.begin());
  CHECK(t.stats().aliases == 1);
  add_one(b, t);
  const auto back = t.read();
  CHECK(t.stats().transfers() == 0);
  for (size_t i = 0; i < v.size(); ++i)
    REQUIRE(back[i] == v[i] + 1.0f);
}

TEST_CASE("asynchronous queues: the core waits for them, and data moves between two devices") {
  for (const char* kind : {"gpu", "cpu"}) {
    INFO("kind " << kind);
    Registry reg(mock_only({{"PARENCHYMA_MOCK_ASYNC", "1"},
                            {"PARENCHYMA_MOCK_DEVICES", "2"},
                            {"PARENCHYMA_MOCK_KIND", kind}}));
    Backend b0(reg, "mock:0"), b1(reg, "mock:1");
    REQUIRE(b0.device().name == std::string("Mock ") + (kind[0] == 'g' ? "GPU" : "CPU") + " 0");
    REQUIRE(b1.device().plugin_index == 1);
    const auto v = ramp(100000); // large enough that a copy not waited for shows
    auto t = tensor_of(v);
    add_one(b0, t);
    add_one(b1, t); // the data moves from device 0 to device 1 first
    add_one(b0, t); // and back
    const auto back = t.read();
    for (size_t i = 0; i < v.size(); ++i)
      REQUIRE(back[i] == v[i] + 3.0f);
  }
}

TEST_CASE("a request names the device; the plugin is given its own index") {
  Registry reg(mock_only({{"PARENCHYMA_MOCK_DEVICES", "3"}}));
  REQUIRE(reg.find_framework("mock") != nullptr);
  REQUIRE(reg.find_framework("mock")->devices().size() == 3);
  Backend b(reg, "mock:2");
  CHECK(b.device().name == "Mock GPU 2");
  CHECK(b.device().plugin_index == 2);
  auto t = tensor_of(ramp(10));
  add_one(b, t);
  CHECK(t.read()[9] == 10 * 0.25f - 0.25f + 1.0f);
}

TEST_CASE(
    "ranking by device kind: a mock GPU before the native CPU, a device of kind other after") {
  if (native_plugin().empty()) {
    WARN("the native plugin is not built: nothing to rank the mock against");
    return;
  }
  for (const char* kind : {"gpu", "accelerator", "other"}) {
    INFO("kind " << kind);
    Registry reg(isolated({native_plugin(), mock_dir}, {{"PARENCHYMA_MOCK_KIND", kind}}));
    const auto ranking = reg.ranking();
    REQUIRE(ranking.size() == 2);
    const std::string first = std::string(kind) == "other" ? "native" : "mock";
    CHECK(ranking[0]->name() == first);
    CHECK(reg.select().framework == first);
  }
}

TEST_CASE("settings: the environment, else the config's settings") {
  scratch_dir dir("mock-settings");
  const fs::path config =
      dir.write("parenchyma.json", R"({"settings": {"PARENCHYMA_MOCK_DEVICES": "3"}})");
  {
    RegistryOptions o = mock_only({});
    o.config_file = config;
    Registry reg(o);
    REQUIRE(reg.find_framework("mock") != nullptr);
    CHECK(reg.find_framework("mock")->devices().size() == 3);
  }
  {
    RegistryOptions o = mock_only({{"PARENCHYMA_MOCK_DEVICES", "2"}});
    o.config_file = config;
    Registry reg(o);
    REQUIRE(reg.find_framework("mock") != nullptr);
    CHECK(reg.find_framework("mock")->devices().size() == 2);
  }
}

TEST_CASE("a setting the mock does not understand fails it at initialize, naming the setting") {
  Registry reg(mock_only({{"PARENCHYMA_MOCK_KIND", "quantum"}}));
  CHECK(reg.find_framework("mock") == nullptr);
  const LoadReportEntry* e = entry_for(reg, mock_dir / "parenchyma-mock" PCY_TEST_SO);
  REQUIRE(e != nullptr);
  CHECK(e->status == "failed");
  CHECK(e->stage == "initialize");
  CHECK(contains(e->reason, "PARENCHYMA_MOCK_KIND=quantum"));
}

TEST_CASE("0 devices: loaded, not ranked, and a request for it says why") {
  Registry reg(mock_only({{"PARENCHYMA_MOCK_DEVICES", "0"}}));
  const Framework* fw = reg.find_framework("mock");
  REQUIRE(fw != nullptr);
  CHECK(fw->devices().empty());
  CHECK(fw->reason() == "PARENCHYMA_MOCK_DEVICES=0");
  CHECK(reg.ranking().empty());
  const auto e = catch_error([&] { Backend b(reg, "mock"); });
  CHECK(e.code() == errc::unavailable);
  CHECK(contains(e.what(), "PARENCHYMA_MOCK_DEVICES=0"));
}

// What the program wrote to stderr (fd 2) while `work` ran, progress lines forced on.
template <class F> std::string stderr_of(F work) {
  return captured([&](int fd) {
    const int saved = dup(2);
    set_env("PARENCHYMA_PROGRESS", "1");
    dup2(fd, 2);
    struct restore {
      int saved;
      ~restore() {
        dup2(saved, 2);
        close(saved);
        unset_env("PARENCHYMA_PROGRESS");
      }
    } r{saved};
    work();
  });
}

TEST_CASE("a slow compile shows the plugin's step on the waiting thread's progress line") {
  Registry reg(mock_only({{"PARENCHYMA_MOCK_BUILD_MS", "1600"}}));
  Backend b(reg, "mock");
  const std::string out = stderr_of([&] { (void)b.build_program("kernel add_one\n"); });
  INFO(out);
  // The core's line for the wait, then the plugin's step (host service 1.4) with its count.
  CHECK(out.find("[parenchyma] building a program on mock:0: compiling add_one (step 1)") !=
        std::string::npos);
  // A fast build shows nothing.
  Registry fast(mock_only({}));
  Backend f(fast, "mock");
  CHECK(stderr_of([&] { (void)f.build_program("kernel add_one\n"); }).empty());
}

TEST_CASE("PARENCHYMA_MOCK_BUILD_MS that is not a duration fails the mock at initialize") {
  Registry reg(mock_only({{"PARENCHYMA_MOCK_BUILD_MS", "soon"}}));
  CHECK(reg.find_framework("mock") == nullptr);
  bool named = false;
  for (const auto& e : reg.load_report())
    named = named || e.reason.find("PARENCHYMA_MOCK_BUILD_MS") != std::string::npos;
  CHECK(named);
}
