// The SDK's shared bundle machinery, against a fake framework table: device_context owns and
// frees what it creates, device_facts_of steps the properties by their own struct_size,
// require_slots names each missing slot, first_use, sdk::settings (the one reader of the host's
// setting service) and setting_count (glsl_bundle.hpp), the extent arithmetic, the dtype table,
// device_number and kernel_sections.
#include "support/catch.hpp"

#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/extent.hpp>
#include <parenchyma/sdk/glsl_bundle.hpp>

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

namespace sdk = parenchyma::sdk;

// What the fake framework was asked; one test at a time (Catch runs them in turn).
struct fake_state {
  int allocs = 0, frees = 0, builds = 0, program_destroys = 0, kernels = 0, kernel_destroys = 0;
  bool fail_build = false;
  std::vector<unsigned char> props; // pcy_property records, struct_size apart
} state;

pcy_memory token(int n) { return reinterpret_cast<pcy_memory>(static_cast<uintptr_t>(0x1000 + n)); }

pcy_error* fake_alloc(pcy_memory_alloc_args* a) {
  a->memory = token(++state.allocs);
  return nullptr;
}
void fake_free(pcy_memory) { ++state.frees; }
pcy_error* fake_build(pcy_program_build_args* b) {
  if (state.fail_build) return sdk::make_error(PCY_ERR_BUILD, "no cl_khr_fp64", "fake");
  ++state.builds;
  b->program = reinterpret_cast<pcy_program>(static_cast<uintptr_t>(0x2000 + state.builds));
  b->cache_hit = false;
  return nullptr;
}
void fake_program_destroy(pcy_program) { ++state.program_destroys; }
pcy_error* fake_kernel(pcy_kernel_create_args* k) {
  k->kernel = reinterpret_cast<pcy_kernel>(static_cast<uintptr_t>(0x3000 + ++state.kernels));
  return nullptr;
}
void fake_kernel_destroy(pcy_kernel) { ++state.kernel_destroys; }
pcy_error* fake_props(pcy_plugin, uint32_t, const pcy_property** out, size_t* count) {
  *out = reinterpret_cast<const pcy_property*>(state.props.data());
  *count = state.props.size() / (sizeof(pcy_property) + 16);
  return nullptr;
}

pcy_framework_api fake_framework() {
  pcy_framework_api fw{};
  fw.struct_size = sizeof fw;
  fw.name = "fake";
  fw.memory_alloc = &fake_alloc;
  fw.memory_free = &fake_free;
  fw.program_build = &fake_build;
  fw.program_destroy = &fake_program_destroy;
  fw.kernel_create = &fake_kernel;
  fw.kernel_destroy = &fake_kernel_destroy;
  fw.device_properties = &fake_props;
  return fw;
}

pcy_bundle_context_args context_args(const pcy_framework_api& fw) {
  pcy_bundle_context_args a{};
  a.struct_size = sizeof a;
  a.framework = &fw;
  return a;
}

// Properties as a newer framework sends them: records 16 bytes larger than this SDK's.
void set_props(std::initializer_list<pcy_property> list) {
  const size_t stride = sizeof(pcy_property) + 16;
  state.props.assign(list.size() * stride, 0xAB);
  size_t i = 0;
  for (pcy_property p : list) {
    p.struct_size = stride;
    std::memcpy(state.props.data() + i++ * stride, &p, sizeof p);
  }
}
pcy_property int_prop(const char* key, int64_t v) {
  pcy_property p{};
  p.key = key;
  p.type = PCY_VALUE_INT;
  p.i = v;
  return p;
}

} // namespace

TEST_CASE("device_context frees what it made, each once, when the context goes") {
  state = {};
  const pcy_framework_api fw = fake_framework();
  {
    sdk::device_context cx(context_args(fw));
    const pcy_memory a = cx.alloc(16), b = cx.alloc(32);
    const pcy_program p = cx.build("source");
    cx.kernel(p, "k1");
    cx.kernel(p, "k2");
    cx.free(a); // early: once now, not again at the end
    cx.free(a);
    (void)b;
    CHECK(state.frees == 1);
  }
  CHECK(state.allocs == 2);
  CHECK(state.frees == 2);
  CHECK(state.program_destroys == 1);
  CHECK(state.kernel_destroys == 2);
}

TEST_CASE("device_context::build of an optional dtype reports a failure instead of throwing") {
  state = {};
  const pcy_framework_api fw = fake_framework();
  sdk::device_context cx(context_args(fw));
  state.fail_build = true;
  sdk::dtype_program f64;
  const sdk::logger quiet;
  CHECK_FALSE(cx.build(f64, "source", "-DREAL=double", false, "f64 test kernels", quiet));
  CHECK_FALSE(f64.available);
  CHECK(f64.reason == "f64 test kernels did not build on this device (no cl_khr_fp64)");
  sdk::dtype_program f32;
  CHECK_THROWS_AS(cx.build(f32, "source", "-DREAL=float", true, "f32 test kernels", quiet),
                  sdk::error);
}

TEST_CASE("device_facts_of steps the properties by their own struct_size") {
  state = {};
  const pcy_framework_api fw = fake_framework();
  pcy_property name{};
  name.key = PCY_PROP_NAME;
  name.type = PCY_VALUE_STRING;
  name.s = "Fake GPU";
  set_props({int_prop(PCY_PROP_KIND, PCY_DEVICE_CPU), int_prop(PCY_PROP_COMPUTE_UNITS, 132),
             int_prop(PCY_PROP_FP64, 0), int_prop(PCY_PROP_MAX_WORK_GROUP, 1024), name});
  const sdk::device_facts f = sdk::device_facts_of(context_args(fw));
  CHECK(f.cpu);
  CHECK(f.compute_units == 132);
  CHECK_FALSE(f.fp64);
  CHECK(f.max_work_group == 1024);
  CHECK(f.name == "Fake GPU");
  CHECK(f.uuid.empty());
  // A framework's own number property by its key; the fallback where it has none.
  set_props({int_prop("max_storage_buffer_range", 134217728), int_prop(PCY_PROP_FP64, 1)});
  CHECK(sdk::device_number(context_args(fw), "max_storage_buffer_range", -1) == 134217728);
  CHECK(sdk::device_number(context_args(fw), "buffer_device_address", 7) == 7);
}

TEST_CASE("kernel_sections: each kernel with the shared lines, other lines blank") {
  const char* source =
      "#version 450\nshared\n#kernel a\nbody a\n#kernel skip\nx\n#kernel b\nbody b";
  const char* names[] = {"b", "a", "absent"};
  const std::vector<std::string> k = sdk::kernel_sections(source, names);
  REQUIRE(k.size() == 3);
  // Line numbers stay the file's: every line kept, the others' blank.
  CHECK(k[0] == "#version 450\nshared\n\n\n\n\n#kernel b\nbody b\n");
  CHECK(k[1] == "#version 450\nshared\n#kernel a\nbody a\n\n\n\n\n");
  CHECK(k[2] == "#version 450\nshared\n\n\n\n\n\n\n");
}

TEST_CASE("require_slots names every slot the framework lacks") {
  pcy_framework_api fw = fake_framework();
  CHECK_NOTHROW(sdk::require_slots(
      fw, "test_bundle", {PCY_FRAMEWORK_SLOT_memory_alloc, PCY_FRAMEWORK_SLOT_kernel_create}));
  try {
    sdk::require_slots(fw, "test_bundle",
                       {PCY_FRAMEWORK_SLOT_memory_alloc, PCY_FRAMEWORK_SLOT_native_handle,
                        PCY_FRAMEWORK_SLOT_queue_finish});
    FAIL("no error");
  } catch (const sdk::error& e) {
    CHECK(e.code() == PCY_ERR_UNSUPPORTED);
    CHECK(std::string(e.what()) ==
          "framework 'fake' lacks native_handle, queue_finish, which test_bundle needs; update "
          "the framework plugin");
  }
}

TEST_CASE("first_use marks a routine done only after a call returned") {
  sdk::first_use gate;
  bool done = false;
  CHECK_THROWS(gate.run(done, [] { throw std::runtime_error("first call failed"); }));
  CHECK_FALSE(done);
  int calls = 0;
  gate.run(done, [&] { ++calls; });
  gate.run(done, [&] { ++calls; });
  CHECK(done);
  CHECK(calls == 2);
}

TEST_CASE("settings: the host's service, empty as unset, nothing from a 1.0 host") {
  static const char* const answer_x = "value";
  pcy_host_services host{};
  host.struct_size = sizeof host;
  host.setting = [](void*, const char* name) -> const char* {
    return std::string(name) == "X" ? answer_x : std::string(name) == "EMPTY" ? "" : nullptr;
  };
  const sdk::settings s(&host);
  CHECK(std::string(s.find("X")) == "value");
  CHECK(s.get("X") == "value");
  CHECK(s.find("EMPTY") == nullptr);
  CHECK(s.find("UNSET") == nullptr);
  CHECK(s.get("UNSET").empty());
  host.struct_size = PCY_HOST_SERVICES_SIZE_1_0; // a 1.0 host: no setting service
  CHECK(sdk::settings(&host).find("X") == nullptr);
  CHECK(sdk::settings(nullptr).find("X") == nullptr);
}

TEST_CASE("setting_count: a whole number in range, else the default with a warning") {
  static std::vector<std::string> warnings;
  warnings.clear();
  pcy_host_services host{};
  host.struct_size = sizeof host;
  host.log_level = PCY_LOG_WARN;
  host.log = [](void*, pcy_log_level, const char*, const char* m) { warnings.emplace_back(m); };
  host.setting = [](void*, const char* name) -> const char* {
    const std::string n(name);
    return n == "GOOD"   ? "12"
           : n == "LOW"  ? "0"
           : n == "HIGH" ? "70000"
           : n == "NEG"  ? "-3"
           : n == "JUNK" ? "12x"
                         : nullptr;
  };
  const sdk::settings s(&host);
  const sdk::logger log(&host, "test");
  CHECK(sdk::setting_count(s, log, "GOOD", 1, 65535, "work-groups", 7) == 12);
  CHECK(sdk::setting_count(s, log, "UNSET", 1, 65535, "work-groups", 7) == 7);
  CHECK(warnings.empty());
  for (const char* bad : {"LOW", "HIGH", "NEG", "JUNK"})
    CHECK(sdk::setting_count(s, log, bad, 1, 65535, "work-groups", 7) == 7);
  REQUIRE(warnings.size() == 4);
  CHECK(warnings[1] == "HIGH=70000 ignored: expected 1 to 65535 work-groups");
  CHECK(warnings[2].find("NEG=-3 ignored") == 0);
}

TEST_CASE("extent arithmetic: what a vector and a matrix span, overflow refused") {
  uint64_t n = 0;
  CHECK((sdk::vector_extent(4, 3, n) && n == 10));
  CHECK((sdk::vector_extent(1, 1000, n) && n == 1));
  CHECK_FALSE(sdk::vector_extent(INT64_MAX, INT64_MAX, n));
  CHECK((sdk::matrix_extent(3, 2, 5, n) && n == 12));
  CHECK_FALSE(sdk::matrix_extent(INT64_MAX, INT64_MAX, INT64_MAX, n));
}

TEST_CASE("dtype names: one table, unknown values named by neither") {
  CHECK(std::string(sdk::dtype_name(PCY_DTYPE_BF16)) == "bf16");
  CHECK(sdk::dtype_name_or_null(PCY_DTYPE_F64) == std::string("f64"));
  CHECK(sdk::dtype_name_or_null(99) == nullptr);
  CHECK(sdk::dtype_size(PCY_DTYPE_F16) == 2);
}
