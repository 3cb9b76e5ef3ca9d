// Loader tests, part 1: every stub plugin variant against the core's load stages. Each test
// builds its own Registry over exactly the variant directories it names, and checks both the
// load report (path, stage, status, reason, advice) and behaviour (a Backend on what loaded).
#include "loader/testing.hpp"
#include "loader/writable.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/os.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <cstring>

using namespace parenchyma;
using namespace pcy_test;

// The slot lists (abi.md C6) are append only (A2): along a list the minors never decrease, no
// minor is newer than the headers', and the slots lie in table order. (abi_c99/abi_c11 pin each
// slot's place and minor against the size pins; this checks the list itself.)
constexpr bool appended_in_order(std::span<const sdk::slot_info> list) noexcept {
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].minor > PCY_ABI_VERSION_MINOR) return false;
    if (i > 0 && (list[i].minor < list[i - 1].minor || list[i].offset <= list[i - 1].offset))
      return false;
  }
  return true;
}
static_assert(appended_in_order(sdk::framework_slots), "PCY_FRAMEWORK_API_SLOTS: append only");
static_assert(appended_in_order(sdk::bundle_slots), "PCY_BUNDLE_API_SLOTS: append only");

namespace {

// Returns a copy: a reference bound to a call with a temporary path trips g++ 13's
// -Wdangling-reference.
LoadReportEntry require_entry(const Registry& r, const fs::path& file) {
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, file);
  REQUIRE(e != nullptr);
  return *e;
}

// A refused plugin: every field a user needs to act on it is filled in.
void check_refused(const LoadReportEntry& e, const char* stage, const char* status = "failed") {
  INFO("entry: [" << e.status << " @" << e.stage << "] " << e.path << ": " << e.reason
                  << " | advice: " << e.advice);
  CHECK(e.stage == stage);
  CHECK(e.status == status);
  CHECK_FALSE(e.path.empty());
  CHECK_FALSE(e.name.empty());
  CHECK_FALSE(e.reason.empty());
  CHECK_FALSE(e.advice.empty());
}

// Host data -> the backend's device -> overwritten on the device -> read back on the host.
void round_trip(const Backend& b, int64_t n) {
  SharedTensor<float> t({n});
  const auto first = random_values<float>(static_cast<size_t>(n));
  std::copy(first.begin(), first.end(), t.write_only().begin());
  pcy_memory m = t.read(b);
  REQUIRE(m != nullptr);
  std::vector<float> on_device(static_cast<size_t>(n));
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = b.queue();
  a.memory = m;
  a.host_pointer = on_device.data();
  a.bytes = static_cast<uint64_t>(n) * sizeof(float);
  a.blocking = true;
  throw_if(b.framework().api().memory_read(&a));
  CHECK(std::memcmp(on_device.data(), first.data(), a.bytes) == 0);

  const auto second = random_values<float>(static_cast<size_t>(n));
  pcy_memory w = t.write(b);
  a.memory = w;
  a.host_pointer = const_cast<float*>(second.data());
  throw_if(b.framework().api().memory_write(&a));
  b.synchronize();
  const auto back = t.read();
  REQUIRE(back.size() == second.size());
  CHECK(std::memcmp(back.data(), second.data(), a.bytes) == 0);
}

// Builds and launches the stub's add_one kernel through Backend on n random floats.
void run_add_one(const Backend& b, uint32_t n) {
  Program p = b.build_program("kernel add_one\n");
  Kernel k = p.kernel("add_one");
  REQUIRE(k);
  SharedTensor<float> x({static_cast<int64_t>(n)});
  const auto v = random_values<float>(n);
  std::copy(v.begin(), v.end(), x.write_only().begin());
  b.launch(k, LaunchDims::linear(n), {KernelArg::inout(x), KernelArg::scalar<uint32_t>(n)});
  const auto got = x.read();
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(got[i] == v[i] + 1.0f);
}

} // namespace

TEST_CASE("a good stub framework loads with one accelerator device and works") {
  Registry r(isolated({stub_dir("good")}));
  INFO("load report:\n" << describe(r));
  const auto& e = require_entry(r, stub_dir("good") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  CHECK(e.stage == "ready");
  CHECK(e.kind == "framework");
  CHECK(e.name == "stub");

  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  CHECK(fw->version() == "1.0-test");
  CHECK_FALSE(fw->description().empty());
  CHECK(fw->abi_minor() == PCY_ABI_VERSION_MINOR);
  REQUIRE(fw->devices().size() == 1);
  const Device& d = fw->devices()[0];
  CHECK(d.index == 0);
  CHECK(d.kind == device_kind::accelerator);
  CHECK(d.name == "Stub Device stub");
  CHECK(d.vendor == "parenchyma tests");
  CHECK(fw->best_kind() == device_kind::accelerator);
  bool saw_units = false, saw_unified = false, saw_uuid = false;
  for (const auto& [key, value] : d.properties) {
    if (key == "compute_units") saw_units = std::get<int64_t>(value) == 1;
    if (key == "host_unified") saw_unified = std::get<bool>(value);
    if (key == "uuid") saw_uuid = !std::get<std::string>(value).empty();
  }
  CHECK(saw_units);
  CHECK(saw_unified);
  CHECK(saw_uuid);

  const auto ranking = r.ranking();
  REQUIRE(ranking.size() == 1);
  CHECK(ranking[0] == fw);
  bool searched = false;
  for (const auto& p : r.search_path())
    searched = searched || fs::equivalent(p, stub_dir("good"));
  CHECK(searched);

  Backend b(r, "stub");
  CHECK(b.name() == "stub:0");
  CHECK(&b.framework() == fw);
  CHECK_FALSE(b.selection().reason.empty());
  round_trip(b, 1);
  round_trip(b, 4099);
  run_add_one(b, 1031);
}

// Paths are UTF-8 in the API and the OS's own form at its boundary (LoadLibraryExW, _wgetenv on
// Windows, where a narrow path would be read in the ANSI code page): a plugin folder whose name
// is not ASCII works given as a path, in the options' environment and in the process's.
TEST_CASE("a plugin in a folder with a non-ASCII name loads; the report gives its path in UTF-8") {
  scratch_dir s("utf8");
  // "plugins-üñï-日本-ελ" in UTF-8 (Latin-1, CJK and Greek: outside every ANSI code page at once)
  const std::string folder = "plugins-\xc3\xbc\xc3\xb1\xc3\xaf-\xe6\x97\xa5\xe6\x9c\xac-"
                             "\xce\xb5\xce\xbb";
  const fs::path dir = s.path() / sdk::os::path_from_utf8(folder);
  fs::create_directories(dir);
  const fs::path file = dir / ("parenchyma-stub" PCY_TEST_SO);
  fs::copy_file(stub_dir("good") / ("parenchyma-stub" PCY_TEST_SO), file);
  const std::string file_utf8 = sdk::os::utf8(file);
  REQUIRE(file_utf8.find(folder) != std::string::npos);

  auto check = [&](Registry&& r) {
    INFO("load report:\n" << describe(r));
    const LoadReportEntry* e = nullptr;
    for (const auto& x : r.load_report())
      if (x.name == "stub") e = &x;
    REQUIRE(e != nullptr);
    CHECK(e->status == "loaded");
    CHECK(e->path == file_utf8); // UTF-8, byte for byte
    CHECK(fs::equivalent(sdk::os::path_from_utf8(e->path), file));
    Backend b(r, "stub");
    round_trip(b, 17);
  };
  SECTION("given as a path") { check(Registry(isolated({dir}))); }
  SECTION("in PARENCHYMA_PLUGIN_PATH of the options' environment (UTF-8)") {
    check(Registry(isolated({}, {{"PARENCHYMA_PLUGIN_PATH", sdk::os::utf8(dir)}})));
  }
  SECTION("in PARENCHYMA_PLUGIN_PATH of the process's environment") {
    RegistryOptions o = isolated({});
    o.environment.reset(); // the process's own
#if defined(_WIN32)
    REQUIRE(::_wputenv_s(L"PARENCHYMA_PLUGIN_PATH", dir.wstring().c_str()) == 0);
#else
    set_env("PARENCHYMA_PLUGIN_PATH", sdk::os::utf8(dir).c_str());
#endif
    try {
      check(Registry(o));
    } catch (...) {
      unset_env("PARENCHYMA_PLUGIN_PATH");
      throw;
    }
    unset_env("PARENCHYMA_PLUGIN_PATH");
  }
}

TEST_CASE("a text file named like a plugin is refused at the load stage") {
  Registry r(isolated({stub_dir("not_library")}));
  check_refused(require_entry(r, stub_dir("not_library") / "parenchyma-stub" PCY_TEST_SO), "load");
  CHECK(r.frameworks().empty());
  CHECK(r.ranking().empty());
  const auto err = catch_error([&] { (void)r.select(); });
  CHECK(err.code() == errc::unavailable);
}

#if defined(PCY_TEST_WRONG_ARCH)
TEST_CASE("a DLL built for another architecture is refused at the load stage") {
  Registry r(isolated({stub_dir("wrong_arch")}));
  const auto e = require_entry(r, stub_dir("wrong_arch") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  check_refused(e, "load");
  CHECK(r.frameworks().empty());
}
#endif

TEST_CASE("a library without the entry symbol is refused at the entry stage") {
  Registry r(isolated({stub_dir("no_entry")}));
  const auto& e = require_entry(r, stub_dir("no_entry") / "parenchyma-stub" PCY_TEST_SO);
  check_refused(e, "entry");
  CHECK(contains(e.reason, PCY_FRAMEWORK_ENTRY_SYMBOL));
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("a plugin built for ABI major 2 is refused before initialize") {
  // Its initialize slot aborts the process: reaching this line at all means it was not called.
  Registry r(isolated({stub_dir("abi_major2")}));
  const auto& e = require_entry(r, stub_dir("abi_major2") / "parenchyma-stub" PCY_TEST_SO);
  check_refused(e, "version");
  CHECK(contains(e.reason, "2."));
  CHECK(icontains(e.reason + " " + e.advice, "rebuild"));
  CHECK(icontains(e.reason + " " + e.advice, "sdk"));
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("a table whose kind contradicts its entry symbol is refused before initialize") {
  Registry r(isolated({stub_dir("wrong_kind")}));
  const auto& e = require_entry(r, stub_dir("wrong_kind") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "failed");
  CHECK(icontains(e.reason, "kind"));
  CHECK_FALSE(e.advice.empty());
  CHECK(r.frameworks().empty());
  CHECK(r.bundles().empty());
}

TEST_CASE("an older minor whose table ends before the program slots loads without them") {
  // The slots beyond struct_size hold functions that abort: the host must never read them.
  Registry r(isolated({stub_dir("older_minor")}));
  const auto& e = require_entry(r, stub_dir("older_minor") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  // The host's view of the table: slots beyond the plugin's struct_size read as NULL.
  CHECK(fw->api().program_build == nullptr);
  CHECK(fw->api().kernel_launch == nullptr);
  CHECK(fw->api().memory_alloc != nullptr);
  Backend b(r, "stub");
  round_trip(b, 257);
  const auto err = catch_error([&] { (void)b.build_program("kernel add_one\n"); });
  CHECK(err.code() == errc::unsupported);
  CHECK_FALSE(err.message().empty());
  CHECK(err.origin() == "stub");
}

TEST_CASE("a newer minor with a larger table loads and works") {
  Registry r(isolated({stub_dir("newer_minor")}));
  const auto& e = require_entry(r, stub_dir("newer_minor") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  CHECK(fw->abi_minor() == PCY_ABI_VERSION_MINOR + 1);
  CHECK(fw->api().struct_size >= sizeof(pcy_framework_api));
  // Its property array has larger elements: read right only if walked by struct_size.
  REQUIRE(fw->devices().size() == 1);
  const Device& d = fw->devices()[0];
  CHECK(d.name == "Stub Device from the future");
  CHECK(d.vendor == "parenchyma tests");
  CHECK(d.kind == device_kind::accelerator);
  REQUIRE(d.properties.size() == 4);
  CHECK(d.properties[3].first == "compute_units");
  CHECK(std::get<int64_t>(d.properties[3].second) == 3);
  Backend b(r, "stub");
  round_trip(b, 3);
  run_add_one(b, 17);
}

TEST_CASE("initialize returning an error fails the plugin with its message") {
  Registry r(isolated({stub_dir("init_error")}));
  const auto& e = require_entry(r, stub_dir("init_error") / "parenchyma-stub" PCY_TEST_SO);
  check_refused(e, "initialize");
  CHECK(contains(e.reason, "fake driver not responding"));
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("a plugin constructor that throws is caught by the SDK firewall") {
  Registry r(isolated({stub_dir("ctor_throws")}));
  const auto& e = require_entry(r, stub_dir("ctor_throws") / "parenchyma-stub" PCY_TEST_SO);
  check_refused(e, "initialize");
  CHECK(contains(e.reason, "stub constructor threw on purpose"));
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("a NULL required slot is refused at the entry stage, naming the slot") {
  Registry r(isolated({stub_dir("null_required")}));
  const auto& e = require_entry(r, stub_dir("null_required") / "parenchyma-stub" PCY_TEST_SO);
  check_refused(e, "entry");
  CHECK(contains(e.reason, "memory_alloc"));
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("NULL optional slots load and read as unsupported") {
  Registry r(isolated({stub_dir("null_optional")}));
  const auto& e = require_entry(r, stub_dir("null_optional") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  Backend b(r, "stub");
  CHECK(catch_error([&] { (void)b.native(PCY_NATIVE_CONTEXT); }).code() == errc::unsupported);
  CHECK(catch_error([&] { (void)b.native(PCY_NATIVE_QUEUE); }).code() == errc::unsupported);
  const auto err = catch_error([&] { (void)b.build_program("kernel add_one\n"); });
  CHECK(err.code() == errc::unsupported);
  CHECK_FALSE(err.message().empty());
  // Without export/import the host copy cannot be aliased: data is staged instead.
  SharedTensor<double> t({5, 7});
  const auto v = random_values<double>(35);
  std::copy(v.begin(), v.end(), t.write_only().begin());
  (void)t.read(b);
  CHECK(t.stats().aliases == 0);
  CHECK(t.stats().host_to_device == 1);
  round_trip(b, 129);
}

TEST_CASE("a framework with 0 devices loads, is not ranked, and says why") {
  Registry r(isolated({stub_dir("no_devices")}));
  const auto& e = require_entry(r, stub_dir("no_devices") / "parenchyma-stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  CHECK(contains(e.reason, "0 device"));
  CHECK_FALSE(e.advice.empty());
  CHECK(contains(e.reason, "no fake hardware attached"));
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  CHECK(fw->devices().empty());
  CHECK(contains(fw->reason(), "no fake hardware attached"));
  CHECK(r.ranking().empty());
  const auto err = catch_error([&] { (void)r.select("stub"); });
  CHECK(err.code() == errc::unavailable);
  CHECK(contains(err.message(), "0 devices"));
  CHECK(contains(err.message(), "no fake hardware attached"));
}

TEST_CASE("a second plugin with the same name is skipped as a duplicate") {
  Registry r(isolated({stub_dir("duplicate")}));
  const auto& first = require_entry(r, stub_dir("duplicate") / "parenchyma-stub_a" PCY_TEST_SO);
  const auto& second = require_entry(r, stub_dir("duplicate") / "parenchyma-stub_b" PCY_TEST_SO);
  CHECK(first.status == "loaded");
  check_refused(second, second.stage.c_str(), "skipped");
  CHECK(icontains(second.reason, "duplicate"));
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  CHECK(fw->description() == "first stub of two with one name");
  CHECK(r.frameworks().size() == 1);
}

TEST_CASE("search order decides which of two same-named plugins wins") {
  // API paths come before PARENCHYMA_PLUGIN_PATH, which comes before the config's plugin_paths.
  scratch_dir tmp("order");
  const auto config = tmp.write("config.json", R"({"plugin_paths": [")" +
                                                   stub_dir("good").generic_string() + R"("]})");
  auto o =
      isolated({stub_dir("good")}, {{"PARENCHYMA_PLUGIN_PATH", stub_dir("newer_minor").string()}});
  {
    Registry r(o);
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    CHECK(fw->abi_minor() == PCY_ABI_VERSION_MINOR);
    const auto& loser = require_entry(r, stub_dir("newer_minor") / "parenchyma-stub" PCY_TEST_SO);
    CHECK(loser.status == "skipped");
    CHECK(icontains(loser.reason, "duplicate"));
  }
  o.plugin_paths.clear();
  o.config_file = config;
  {
    Registry r(o);
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    INFO("load report:\n" << describe(r));
    CHECK(fw->abi_minor() == PCY_ABI_VERSION_MINOR + 1); // the environment's, not the config's
    const auto& path = r.search_path();
    REQUIRE(path.size() >= 2);
    CHECK(fs::equivalent(path[0], stub_dir("newer_minor")));
    CHECK(fs::equivalent(path[1], stub_dir("good")));
  }
}

TEST_CASE("plugin files or directories writable by other users are refused") {
  const fs::path good = stub_dir("good") / "parenchyma-stub" PCY_TEST_SO;
  SECTION("control: the same copy in a private directory loads") {
    scratch_dir dir("private");
    fs::copy_file(good, dir / "parenchyma-stub" PCY_TEST_SO);
    fs::permissions(dir / "parenchyma-stub" PCY_TEST_SO, fs::perms::others_write,
                    fs::perm_options::remove);
    Registry r(isolated({dir.path()}));
    INFO("load report:\n" << describe(r));
    CHECK(r.find_framework("stub") != nullptr);
  }
  SECTION("a world-writable file") {
    scratch_dir dir("o_w_file");
    fs::copy_file(good, dir / "parenchyma-stub" PCY_TEST_SO);
    make_writable_by_all(dir / "parenchyma-stub" PCY_TEST_SO);
    Registry r(isolated({dir.path()}));
    const auto& e = require_entry(r, dir / "parenchyma-stub" PCY_TEST_SO);
    CHECK(e.status != "loaded");
    CHECK(icontains(e.reason, "writable"));
    CHECK_FALSE(e.advice.empty());
    CHECK(r.find_framework("stub") == nullptr);
  }
  SECTION("a world-writable directory") {
    scratch_dir dir("o_w_dir");
    fs::copy_file(good, dir / "parenchyma-stub" PCY_TEST_SO);
    make_writable_by_all(dir.path());
    Registry r(isolated({dir.path()}));
    INFO("load report:\n" << describe(r));
    CHECK(r.find_framework("stub") == nullptr);
    bool refused = false;
    for (const auto& e : r.load_report())
      refused =
          refused || (e.status != "loaded" && icontains(e.reason, "writable") && !e.advice.empty());
    CHECK(refused);
  }
}

TEST_CASE("a bundle for the stub framework serves its op on a stub backend") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_good")}));
  INFO("load report:\n" << describe(r));
  const auto& e = require_entry(r, stub_dir("bundle_good") / "parenchyma-stubext_stub" PCY_TEST_SO);
  CHECK(e.status == "loaded");
  CHECK(e.kind == "bundle");
  REQUIRE(r.bundles().size() == 1);
  const BundleInfo& bi = *r.bundles()[0];
  CHECK(bi.name() == "stubext_stub");
  CHECK(bi.extension() == "stubext");
  CHECK(bi.framework() == "stub");
  REQUIRE(bi.ops().size() == 4); // negate f32 and f64, device_index, workspace_probe
  CHECK(bi.find_op("negate", PCY_DTYPE_F32) != nullptr);
  CHECK(bi.find_op("negate", PCY_DTYPE_F64) != nullptr); // served, but switched off by op_available
  CHECK(bi.find_op("negate", PCY_DTYPE_I32) == nullptr);

  bool covered = false;
  for (const auto& c : r.op_coverage())
    covered = covered || (c.extension == "stubext" && c.op == "negate" &&
                          c.dtype == PCY_DTYPE_F32 && c.framework == "stub" &&
                          c.bundle == "stubext_stub" && c.implementation == "stub negate loop");
  CHECK(covered);

  static const OpKey negate{"stubext", "negate", PCY_DTYPE_F32, "i t="};
  Backend b(r, "stub");
  const OpRoute route = b.route(negate);
  CHECK(route.framework == "stub");
  CHECK(route.bundle == "stubext_stub");
  CHECK_FALSE(route.fallback);

  const int64_t n = 1000 + static_cast<int64_t>(rng()() % 97);
  SharedTensor<float> x({n});
  const auto v = random_values<float>(static_cast<size_t>(n));
  std::copy(v.begin(), v.end(), x.write_only().begin());
  const OpArg args[] = {OpArg::integer(n - 1), OpArg::inout(x)};
  b.invoke(negate, args);
  const auto got = x.read();
  for (int64_t i = 0; i < n - 1; ++i)
    REQUIRE(got[i] == -v[i]);
  CHECK(got[n - 1] == v[n - 1]); // beyond the op's n: untouched
  CHECK(b.fallback_count() == 0);
}

TEST_CASE("a bundle whose framework is absent is reported and never routed to") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_orphan")}));
  const auto& e =
      require_entry(r, stub_dir("bundle_orphan") / "parenchyma-stubext_absent" PCY_TEST_SO);
  INFO("entry: [" << e.status << " @" << e.stage << "] " << e.reason);
  CHECK(e.status != "failed"); // nothing is wrong with the bundle itself
  CHECK(contains(e.reason, "absent_fw"));
  REQUIRE(r.bundles().size() == 1);
  CHECK(contains(r.bundles()[0]->reason(), "absent_fw"));
  CHECK(icontains(r.bundles()[0]->reason(), "not loaded"));
  for (const auto& c : r.op_coverage())
    CHECK(c.bundle != "stubext_absent");
  static const OpKey negate{"stubext", "negate", PCY_DTYPE_F32, "i t="};
  Backend b(r, "stub");
  const auto err = catch_error([&] { (void)b.route(negate); });
  CHECK(err.code() == errc::unsupported);
  CHECK(contains(err.message(), "negate"));
}

TEST_CASE("every broken variant at once: each is reported, the good plugins still load") {
  std::vector<fs::path> dirs;
  for (const char* v : {"not_library", "no_entry", "abi_major2", "init_error", "ctor_throws",
                        "null_required", "kinds"})
    dirs.push_back(stub_dir(v));
  Registry r(isolated(dirs));
  INFO("load report:\n" << describe(r));
  CHECK(r.find_framework("stubgpu") != nullptr);
  CHECK(r.find_framework("stubcpu") != nullptr);
  CHECK(r.find_framework("stub") == nullptr);
  size_t refused = 0;
  for (const auto& e : r.load_report())
    if (e.status != "loaded") ++refused;
  CHECK(refused == 6);
  CHECK(Backend(r).name() == "stubgpu:0");
}
