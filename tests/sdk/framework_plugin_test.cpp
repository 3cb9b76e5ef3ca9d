// sdk::property_list and sdk::framework_plugin (framework_plugin.hpp): what a plugin's devices
// answer through the adapter. The property array and its strings stay valid while devices are
// added (the lists move as the vector grows: plugins add devices one by one, the CUDA and OpenCL
// plugins after probing each); remove() drops a property; reason() is NULL until set.
#include "support/catch.hpp"

#include <parenchyma/sdk/framework.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace {

namespace sdk = parenchyma::sdk;

// The smallest object types the adapter accepts: the table is instantiated below.
class fake_plugin;
struct mem {};
struct ev {
  void wait() {}
};
struct q {
  void finish() {}
  ev* record() { return new ev; }
  void wait(ev&) {}
  void read(mem&, uint64_t, void*, uint64_t, bool) {}
  void write(mem&, uint64_t, const void*, uint64_t, bool) {}
  void copy(mem&, uint64_t, mem&, uint64_t, uint64_t) {}
  void fill(mem&, uint64_t, uint64_t, const void*, uint32_t) {}
};
struct ctx {
  ctx(fake_plugin&, std::span<const uint32_t>) {}
  q* create_queue(uint32_t) { return new q; }
  mem* alloc(uint32_t, uint64_t, uint32_t) { return new mem; }
  void* native_context() { return this; }
  void* native_device(uint32_t) { return this; }
};

class fake_plugin : public sdk::framework_plugin<ctx, q, ev, mem> {
public:
  static constexpr sdk::plugin_info info{"fake", "1.0", "a test double"};
  explicit fake_plugin(const pcy_host_services& host, int devices = 1)
      : framework_plugin(host, info.name) {
    if (devices == 0) reason_ = "no fake devices";
    for (int d = 0; d < devices; ++d) {
      sdk::property_list& p = add_device();
      // Long enough to live on the heap, short enough to live in the string (SSO): both kinds.
      p.text(PCY_PROP_NAME, d % 2 ? "fake " + std::to_string(d) : std::string(40, 'a' + d % 26));
      p.number(PCY_PROP_COMPUTE_UNITS, d);
      p.flag(PCY_PROP_FP64, d % 3 == 0);
      p.text(PCY_PROP_UUID, "uuid-" + std::to_string(d));
      p.real("clock_ghz", 1.5 + d);
      if (d == 5) p.remove(PCY_PROP_COMPUTE_UNITS);
    }
  }
};

const pcy_property* find(std::span<const pcy_property> props, std::string_view key) {
  for (const auto& p : props)
    if (key == p.key) return &p;
  return nullptr;
}

} // namespace

TEST_CASE("framework_plugin: properties stay valid while devices are added", "[sdk]") {
  pcy_host_services host{};
  host.struct_size = sizeof host;
  const int n = 100; // the vector of lists reallocates several times on the way
  fake_plugin plugin(host, n);
  REQUIRE(plugin.device_count() == n);
  CHECK(plugin.reason() == nullptr);
  for (int d = 0; d < n; ++d) {
    INFO("device " << d);
    const auto props = plugin.properties(static_cast<uint32_t>(d));
    REQUIRE(props.size() == (d == 5 ? 4u : 5u));
    for (const auto& p : props)
      CHECK(p.struct_size == sizeof(pcy_property));
    const pcy_property* name = find(props, PCY_PROP_NAME);
    REQUIRE(name != nullptr);
    CHECK(name->type == PCY_VALUE_STRING);
    CHECK(std::string(name->s) ==
          (d % 2 ? "fake " + std::to_string(d) : std::string(40, 'a' + d % 26)));
    CHECK(std::string(find(props, PCY_PROP_UUID)->s) == "uuid-" + std::to_string(d));
    const pcy_property* fp64 = find(props, PCY_PROP_FP64);
    REQUIRE(fp64 != nullptr);
    CHECK(fp64->type == PCY_VALUE_BOOL);
    CHECK(fp64->i == (d % 3 == 0 ? 1 : 0));
    const pcy_property* clock = find(props, "clock_ghz");
    REQUIRE(clock != nullptr);
    CHECK(clock->type == PCY_VALUE_FLOAT);
    CHECK(clock->f == 1.5 + d);
    const pcy_property* units = find(props, PCY_PROP_COMPUTE_UNITS);
    if (d == 5) {
      CHECK(units == nullptr);
    } else {
      REQUIRE(units != nullptr);
      CHECK(units->type == PCY_VALUE_INT);
      CHECK(units->i == d);
    }
  }
}

TEST_CASE("framework_plugin: no devices, a reason; the table carries the identity", "[sdk]") {
  pcy_host_services host{};
  host.struct_size = sizeof host;
  fake_plugin plugin(host, 0);
  CHECK(plugin.device_count() == 0);
  REQUIRE(plugin.reason() != nullptr);
  CHECK(std::string(plugin.reason()) == "no fake devices");
  using adapter = sdk::framework_adapter<fake_plugin>;
  CHECK(std::string(adapter::table.name) == "fake");
  CHECK(std::string(adapter::table.plugin_version) == "1.0");
  CHECK(std::string(adapter::table.description) == "a test double");
  CHECK(adapter::table.program_build == nullptr); // no program type: the slot is NULL
}
