// Loader tests, part 3: plugins that hand back nonsense, paths that are not safe to load code
// from, and the one precedence rule for selection and fallback. Every case here crashed, hung,
// loaded something it should not have or chose inconsistently before the core checked it.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace parenchyma;
using namespace pcy_test;

namespace {

LoadReportEntry require_entry(const Registry& r, const fs::path& file) {
  INFO("load report:\n" << describe(r));
  const LoadReportEntry* e = entry_for(r, file);
  REQUIRE(e != nullptr);
  return *e;
}

const OpKey negate_key{"stubext", "negate", PCY_DTYPE_F32, "i t="};
const OpKey device_index_key{"stubext", "device_index", PCY_DTYPE_F32, "t>"};

bool noticed(const Registry& r, std::string_view a, std::string_view b = {}) {
  for (const auto& n : r.notices())
    if (contains(n, a) && contains(n, b)) return true;
  return false;
}

// Runs f in a child process as the unprivileged user `nobody`; returns the child's exit code.
// (As root, file permissions do not stop reads, so that is where an unreadable case can be
// made real.)
template <class F> int as_nobody(F&& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(90);
    ::_exit(f());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

} // namespace

// ---- counts, pointers and sizes a plugin hands back -------------------------------------------

TEST_CASE("a device_properties count with a NULL array leaves the device out, no crash") {
  Registry r(isolated({stub_dir("props_null")}));
  const auto e = require_entry(r, stub_dir("props_null") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.status == "loaded");
  CHECK(contains(e.reason, "no array"));
  REQUIRE(r.find_framework("stub") != nullptr);
  CHECK(r.find_framework("stub")->devices().empty());
}

TEST_CASE("property elements smaller than pcy_property are refused") {
  Registry r(isolated({stub_dir("bad_stride")}));
  const auto e = require_entry(r, stub_dir("bad_stride") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(contains(e.reason, "3 bytes"));
  CHECK(r.find_framework("stub")->devices().empty());
}

TEST_CASE("a probe reporting 2^32-1 devices is refused at the probe stage") {
  Registry r(isolated({stub_dir("huge_devices"), stub_dir("kinds")}));
  const auto e = require_entry(r, stub_dir("huge_devices") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.stage == "probe");
  CHECK(e.status == "failed");
  CHECK(contains(e.reason, "4294967295"));
  CHECK(r.find_framework("stub") == nullptr);
  CHECK(r.find_framework("stubgpu") != nullptr); // the others still load
}

TEST_CASE("a plugin name outside [a-z0-9_]+ is refused: it could be neither selected nor denied") {
  Registry r(isolated({stub_dir("bad_name")}));
  const auto e = require_entry(r, stub_dir("bad_name") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.status == "failed");
  CHECK(contains(e.reason, "Stub-Bad!"));
  CHECK(r.frameworks().empty());
}

TEST_CASE("context_create succeeding without a context is a plugin error, not a crash") {
  Registry r(isolated({stub_dir("null_context")}));
  const auto err = catch_error([&] { Backend b(r, "stub"); });
  INFO(err.what());
  CHECK(err.code() == errc::plugin);
  CHECK(err.origin() == "stub");
}

TEST_CASE("an ops count with a NULL array refuses the bundle") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_ops_null")}));
  const auto e =
      require_entry(r, stub_dir("bundle_ops_null") / "parenchyma-stubext_opsnull" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.status == "failed");
  CHECK(contains(e.reason, "no array"));
  CHECK(r.bundles().empty());
  CHECK(Backend(r, "stub").name() == "stub:0");
}

TEST_CASE("a malformed op in one bundle is left out there; the op is served by the others") {
  Registry r(isolated(
      {stub_dir("good"), stub_dir("kinds"), stub_dir("bundle_good"), stub_dir("bundle_bad_sig")}));
  const auto e =
      require_entry(r, stub_dir("bundle_bad_sig") / "parenchyma-stubext_badsig" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.status == "loaded");
  CHECK(contains(e.reason, "malformed signature"));
  CHECK(contains(e.reason, "Bad-Name!"));
  // Its good op is still served on its own framework...
  Backend cpu(r, "stubcpu");
  CHECK(cpu.route(device_index_key).bundle == "stubext_badsig");
  // ...and negate runs on the stub everywhere, the stubcpu backend borrowing it.
  Backend stub(r, "stub");
  CHECK(stub.route(negate_key).bundle == "stubext_stub");
  const OpRoute borrowed = cpu.route(negate_key);
  CHECK(borrowed.fallback);
  CHECK(borrowed.framework == "stub");
  SharedTensor<float> x({5});
  const auto v = random_values<float>(5);
  std::copy(v.begin(), v.end(), x.write_only().begin());
  const OpArg args[] = {OpArg::integer(5), OpArg::inout(x)};
  cpu.invoke(negate_key, args);
  for (int i = 0; i < 5; ++i)
    CHECK(x.read()[i] == -v[i]);
}

TEST_CASE("two bundles serving one op: reported, load order wins, bundle_priority chooses") {
  const std::vector<fs::path> dirs{stub_dir("good"), stub_dir("bundle_good"),
                                   stub_dir("bundle_second")};
  {
    Registry r(isolated(dirs));
    CHECK(noticed(r, "stubext_second", "stubext_stub wins"));
    CHECK(Backend(r, "stub").route(negate_key).bundle == "stubext_stub");
  }
  scratch_dir tmp("bundle_priority");
  auto o = isolated(dirs);
  o.config_file = tmp.write("prio.json", R"({"bundle_priority": ["stubext_second"]})");
  Registry r(o);
  CHECK(r.config().bundle_priority == std::vector<std::string>{"stubext_second"});
  CHECK(noticed(r, "stubext_stub", "stubext_second wins"));
  const OpRoute route = Backend(r, "stub").route(negate_key);
  CHECK(route.bundle == "stubext_second");
  CHECK(route.implementation == "second negate loop");
}

TEST_CASE("a bundle_priority entry naming no loaded bundle is noticed once, with the bundles") {
  const std::vector<fs::path> dirs{stub_dir("good"), stub_dir("bundle_good"),
                                   stub_dir("bundle_second")};
  scratch_dir tmp("bundle_priority_typo");
  auto o = isolated(dirs);
  o.config_file = tmp.write("prio.json", R"({"bundle_priority": ["stubext_secnd", "vendor_x"]})");
  Registry r(o);
  INFO("notices:\n"
       << [&] {
            std::string all;
            for (const auto& n : r.notices())
              all += n + "\n";
            return all;
          }());
  // The typo: named, the loaded bundles listed, the one meant suggested.
  CHECK(noticed(r, "bundle_priority", "\"stubext_secnd\""));
  CHECK(noticed(r, "\"stubext_secnd\"", "stubext_stub, stubext_second"));
  CHECK(noticed(r, "\"stubext_secnd\"", "did you mean \"stubext_second\"?"));
  // A name close to none: named, no suggestion.
  CHECK(noticed(r, "bundle_priority", "\"vendor_x\""));
  CHECK_FALSE(noticed(r, "\"vendor_x\"", "did you mean"));
  size_t about_priority = 0;
  for (const auto& n : r.notices())
    about_priority += contains(n, "bundle_priority") && contains(n, "no loaded bundle");
  CHECK(about_priority == 2);
  // A config naming loaded bundles only is not noticed.
  auto good = isolated(dirs);
  good.config_file = tmp.write("good.json", R"({"bundle_priority": ["stubext_second"]})");
  CHECK_FALSE(noticed(Registry(good), "no loaded bundle"));
}

namespace {
// What the process writes to stderr while f runs (the core's log goes there, unbuffered).
template <class F> std::string stderr_of(F&& f) {
  scratch_dir tmp("stderr");
  const fs::path file = tmp.path() / "stderr.txt";
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  REQUIRE(fd >= 0);
  ::dup2(fd, 2);
  ::close(fd);
  try {
    f();
  } catch (...) {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    throw;
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
size_t count_of(const std::string& text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}
} // namespace

TEST_CASE("the fallback warning is logged once, however many backends resolve the op") {
  // A program that probes a backend's routes and then runs with a new backend on the same
  // device (the NN demo does) logged the warning twice.
  Registry r(isolated({stub_dir("good"), stub_dir("kinds"), stub_dir("bundle_good")}));
  const std::string log = stderr_of([&] {
    for (int i = 0; i < 3; ++i) {
      Backend cpu(r, "stubcpu");
      CHECK(cpu.route(negate_key).fallback);
    }
  });
  INFO("stderr:\n" << log);
  CHECK(count_of(log, "is not offered on stubcpu:0") == 1);
  CHECK(count_of(log, "runs on stub:0 instead") == 1);
}

TEST_CASE("a device the plugin cannot describe is left out; the others keep their own index") {
  Registry r(isolated({stub_dir("device0_fails"), stub_dir("bundle_good")}));
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  const auto e = require_entry(r, stub_dir("device0_fails") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(contains(e.reason, "device 0 left out"));
  REQUIRE(fw->devices().size() == 2);
  CHECK(fw->devices()[0].index == 0);
  CHECK(fw->devices()[0].plugin_index == 1);
  CHECK(fw->devices()[1].plugin_index == 2);
  for (uint32_t pos : {0u, 1u}) {
    INFO("stub:" << pos);
    Backend b(r, "stub:" + std::to_string(pos));
    // The context and the bundle are on the plugin's device, not on the compacted position.
    CHECK(*static_cast<const uint32_t*>(b.native(PCY_NATIVE_DEVICE)) == pos + 1);
    SharedTensor<float> out({1});
    const OpArg args[] = {OpArg::out(out)};
    b.invoke(device_index_key, args);
    CHECK(out.read()[0] == static_cast<float>(pos + 1));
  }
}

// ---- trusted paths ---------------------------------------------------------------------------

TEST_CASE("plugins load only from paths nobody else can change") {
  const fs::path good = stub_dir("good") / "parenchyma-stub" PCY_TEST_SO;
  auto place = [&](const scratch_dir& root, const std::string& sub) {
    fs::create_directories(root / sub);
    fs::copy_file(good, root / sub / "parenchyma-stub" PCY_TEST_SO);
    return root / sub / "parenchyma-stub" PCY_TEST_SO;
  };
  SECTION("a plugin file named directly, inside a world-writable directory") {
    scratch_dir root("ww_parent");
    const fs::path file = place(root, "open");
    fs::permissions(root / "open", fs::perms::all);
    Registry r(isolated({file}));
    const auto e = require_entry(r, file);
    INFO(e.reason);
    CHECK(e.status == "failed");
    CHECK(contains(e.reason, "writable by all users"));
    CHECK(contains(e.reason, (root / "open").string()));
  }
  SECTION("a world-writable grandparent directory") {
    scratch_dir root("ww_grand");
    const fs::path file = place(root, "a/b");
    fs::permissions(root / "a", fs::perms::all);
    Registry r(isolated({root / "a" / "b"}));
    INFO("load report:\n" << describe(r));
    CHECK(r.find_framework("stub") == nullptr);
    bool named = false;
    for (const auto& e : r.load_report())
      named = named || contains(e.reason, (root / "a").string() + " is writable by all users");
    CHECK(named);
  }
  SECTION("a group-writable file, whoever owns it (root included)") {
    scratch_dir root("gw_file");
    const fs::path file = place(root, "p");
    fs::permissions(file, fs::perms::group_write, fs::perm_options::add);
    Registry r(isolated({root / "p"}));
    const auto e = require_entry(r, file);
    INFO(e.reason);
    CHECK(e.status == "failed");
    CHECK(contains(e.reason, "writable by its group"));
  }
  SECTION("a world-writable directory with the sticky bit (as /tmp) above a private one loads") {
    scratch_dir root("sticky");
    const fs::path file = place(root, "t/private");
    fs::permissions(root / "t", fs::perms::all | fs::perms::sticky_bit);
    Registry r(isolated({root / "t" / "private"}));
    INFO("load report:\n" << describe(r));
    CHECK(r.find_framework("stub") != nullptr);
  }
  SECTION("a symbolic link to a plugin in an unsafe place is judged by its target") {
    scratch_dir root("symlink");
    const fs::path file = place(root, "open");
    fs::permissions(root / "open", fs::perms::all);
    fs::create_directories(root / "safe");
    fs::create_symlink(file, root / "safe" / "parenchyma-stub" PCY_TEST_SO);
    Registry r(isolated({root / "safe"}));
    INFO("load report:\n" << describe(r));
    CHECK(r.find_framework("stub") == nullptr);
  }
  SECTION("an unreadable plugin directory is in the report") {
    scratch_dir root("unreadable");
    place(root, "locked");
    fs::permissions(root / "locked", fs::perms::owner_write); // no read, no search
    const int rc = as_nobody([&] {
      Registry r(isolated({root / "locked"}));
      for (const auto& e : r.load_report())
        if (e.path == (root / "locked").string() && e.status != "loaded" && !e.advice.empty() &&
            (contains(e.reason, "cannot") || contains(e.reason, "refused")))
          return 0;
      std::fprintf(stderr, "load report:\n%s", describe(r).c_str());
      return 1;
    });
    fs::permissions(root / "locked", fs::perms::owner_all);
    CHECK(rc == 0);
  }
  SECTION("a FIFO on the search path is named as one, not as missing") {
    scratch_dir root("fifo");
    REQUIRE(::mkfifo((root / "plugin.so").c_str(), 0600) == 0);
    Registry r(isolated({root / "plugin.so"}));
    const auto e = require_entry(r, root / "plugin.so");
    INFO(e.reason);
    CHECK(contains(e.reason, "FIFO"));
    CHECK_FALSE(contains(e.reason, "does not exist"));
  }
}

TEST_CASE("a load failure says what dlopen said, without a stray errno text") {
  Registry r(isolated({stub_dir("not_library")}));
  const auto e = require_entry(r, stub_dir("not_library") / "parenchyma-stub" PCY_TEST_SO);
  INFO(e.reason);
  CHECK(e.stage == "load");
  CHECK_FALSE(contains(e.reason, "Bad file descriptor"));
  CHECK(icontains(e.reason, "elf"));
}

// ---- one precedence rule for selection and fallback -------------------------------------------

std::vector<fs::path> with_bundle() {
  return {stub_dir("good"), stub_dir("kinds"), stub_dir("bundle_good")};
}

TEST_CASE("an empty PARENCHYMA_BACKEND is as if unset") {
  Registry r(isolated(with_bundle(), {{"PARENCHYMA_BACKEND", ""}}));
  Registry unset(isolated(with_bundle()));
  const Selection s = r.select();
  CHECK(s.framework == unset.select().framework);
  CHECK_FALSE(contains(s.reason, "PARENCHYMA_BACKEND"));
  CHECK(Backend(r).name() == s.framework + ":0");
}

TEST_CASE("a malformed PARENCHYMA_BACKEND fails default selection only") {
  Registry r(isolated(with_bundle(), {{"PARENCHYMA_BACKEND", "stub:x1"}}));
  CHECK(noticed(r, "PARENCHYMA_BACKEND", "stub:x1"));
  const auto err = catch_error([&] { Backend b(r); });
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "PARENCHYMA_BACKEND"));
  CHECK(Backend(r, "stubcpu").name() == "stubcpu:0"); // an explicit request still works
}

TEST_CASE("a denial is absolute, wherever it comes from") {
  scratch_dir tmp("denials");
  const auto deny_cfg = tmp.write("deny.json", R"({"deny": ["stub"]})");
  struct Case {
    const char* what;
    std::map<std::string, std::string> env;
    bool config;
  };
  for (const Case& c :
       {Case{"environment", {{"PARENCHYMA_BACKEND", "!stub"}}, false}, Case{"config", {}, true}}) {
    INFO("denied by the " << c.what);
    auto o = isolated(with_bundle(), c.env);
    if (c.config) o.config_file = deny_cfg;
    Registry r(o);
    // Never selected by default...
    CHECK(r.select().framework != "stub");
    for (const auto& d : r.device_ranking())
      CHECK(d.framework->name() != "stub");
    // ...nor by an explicit request, which says who denied it...
    const auto err = catch_error([&] { Backend b(r, "stub"); });
    INFO(err.what());
    CHECK(err.code() == errc::unavailable);
    CHECK(contains(err.what(), "denied"));
    CHECK(contains(err.what(), c.config ? "deny list" : "PARENCHYMA_BACKEND"));
    // ...nor for fallback: the op served only on the stub is unavailable elsewhere.
    Backend cpu(r, "stubcpu");
    CHECK(catch_error([&] { (void)cpu.route(negate_key); }).code() == errc::unsupported);
  }
}

TEST_CASE("explicit > environment > config > ranking, for preferences") {
  scratch_dir tmp("prefs");
  auto o = isolated(with_bundle(), {{"PARENCHYMA_BACKEND", "stubcpu"}});
  o.config_file = tmp.write("b.json", R"({"backend": "stub"})");
  Registry r(o);
  CHECK(r.select().framework == "stubcpu");
  CHECK(r.select("stub").framework == "stub");
  o.environment = std::map<std::string, std::string>{};
  Registry rc(o);
  CHECK(rc.select().framework == "stub");
}
