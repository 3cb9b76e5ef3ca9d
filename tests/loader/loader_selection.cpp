// Loader tests, part 2: configuration and backend selection — malformed and unknown config,
// PARENCHYMA_* variables (through RegistryOptions::environment, never setenv), absent backends,
// deny lists, ordered lists, precedence explicit > environment > config > ranking, and ranking of
// frameworks the config does not list (by device kind, then name).
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

using namespace parenchyma;
using namespace pcy_test;

namespace {

// stub (accelerator), stubgpu (GPU), stubcpu (CPU).
std::vector<fs::path> three_kinds() { return {stub_dir("good"), stub_dir("kinds")}; }

std::vector<std::string> names(const std::vector<const Framework*>& v) {
  std::vector<std::string> out;
  for (const auto* f : v)
    out.push_back(f->name());
  return out;
}

} // namespace

TEST_CASE("a malformed JSON config is an error naming the file") {
  scratch_dir tmp("badjson");
  const auto file = tmp.write("broken.json", R"({"ranking": ["stub", )");
  auto o = isolated(three_kinds());
  o.config_file = file;
  const auto err = catch_error([&] {
    Registry r(o);
    (void)r.select();
  });
  INFO(err.what());
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), file.string()));
}

TEST_CASE("an unknown config key is an error naming the key and the file") {
  scratch_dir tmp("badkey");
  const auto file = tmp.write("typo.json", R"({"rankin": ["stub"], "log_level": "warn"})");
  auto o = isolated(three_kinds());
  o.config_file = file;
  const auto err = catch_error([&] {
    Registry r(o);
    (void)r.select();
  });
  INFO(err.what());
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "rankin"));
  CHECK(contains(err.what(), file.string()));
}

TEST_CASE("a config value of the wrong type is an error naming the key") {
  scratch_dir tmp("badtype");
  const auto file = tmp.write("type.json", R"({"ranking": "stub"})");
  auto o = isolated(three_kinds());
  o.config_file = file;
  const auto err = catch_error([&] {
    Registry r(o);
    (void)r.select();
  });
  INFO(err.what());
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "ranking"));
}

TEST_CASE("a bad PARENCHYMA_BACKEND value names the variable and the bad item") {
  for (const char* bad : {"stub:x1", "stub:-1", "stubgpu,,stub", "!"}) {
    INFO("PARENCHYMA_BACKEND=" << bad);
    const auto err = catch_error([&] {
      Registry r(isolated(three_kinds(), {{"PARENCHYMA_BACKEND", bad}}));
      (void)r.select();
    });
    INFO(err.what());
    CHECK(err.code() == errc::config);
    CHECK(contains(err.what(), "PARENCHYMA_BACKEND"));
    if (std::string(bad) == "stub:x1") CHECK(contains(err.what(), "stub:x1"));
    if (std::string(bad) == "stub:-1") CHECK(contains(err.what(), "stub:-1"));
  }
}

TEST_CASE("a mis-spelt framework name gets a \"did you mean\" naming the framework meant") {
  // Names are lower-case: "OpenCL" was refused with no hint of the spelling that works.
  struct Case {
    const char* request;
    const char* meant; // nullptr: no suggestion
  };
  for (const Case& c :
       {Case{"StubGPU", "stubgpu"}, Case{"STUB:0", "stub"}, Case{"stub-cpu", "stubcpu"},
        Case{"Nothing_Like_It", "nothing_like_it"}, Case{"stubgpx", "stubgpu"},
        Case{"stbucpu", "stubcpu"}, Case{"cuda", nullptr}}) {
    INFO("request " << c.request);
    Registry r(isolated(three_kinds(), {{"PARENCHYMA_BACKEND", c.request}}));
    for (const bool from_env : {true, false}) {
      INFO((from_env ? "PARENCHYMA_BACKEND" : "explicit request"));
      const auto err = catch_error([&] { (void)(from_env ? r.select() : r.select(c.request)); });
      INFO(err.what());
      if (c.meant != nullptr)
        CHECK(icontains(err.what(), std::string("did you mean \"") + c.meant + "\"?"));
      else
        CHECK_FALSE(icontains(err.what(), "did you mean"));
      if (from_env) CHECK(contains(err.what(), "PARENCHYMA_BACKEND"));
    }
  }
}

TEST_CASE("a request for an absent backend is unavailable and says why") {
  Registry r(isolated(three_kinds()));
  SECTION("no such plugin") {
    const auto err = catch_error([&] { (void)r.select("cuda"); });
    INFO(err.what());
    CHECK(err.code() == errc::unavailable);
    CHECK(contains(err.what(), "cuda"));
    CHECK((icontains(err.what(), "not found") || icontains(err.what(), "no such")));
    // An explicit request that cannot be met never falls back silently.
    CHECK(catch_error([&] { Backend b(r, "cuda"); }).code() == errc::unavailable);
  }
  SECTION("no such device") {
    const auto err = catch_error([&] { (void)r.select("stub:3"); });
    INFO(err.what());
    CHECK(err.code() == errc::unavailable);
    CHECK(contains(err.what(), "stub"));
    CHECK(contains(err.what(), "3"));
  }
  SECTION("every entry of a list absent") {
    const auto err = catch_error([&] { (void)r.select("cuda,opencl"); });
    INFO(err.what());
    CHECK(err.code() == errc::unavailable);
    CHECK(contains(err.what(), "cuda"));
    CHECK(contains(err.what(), "opencl"));
  }
}

TEST_CASE("an explicit device index selects that device") {
  Registry r(isolated(three_kinds()));
  const Selection s = r.select("stubcpu:0");
  CHECK(s.framework == "stubcpu");
  CHECK(s.device == 0);
  CHECK(Backend(r, "stubcpu:0").name() == "stubcpu:0");
}

TEST_CASE("!name denies a framework") {
  SECTION("in a request") {
    Registry r(isolated(three_kinds()));
    CHECK(r.select("!stubgpu").framework == "stub");
    CHECK(r.select("!stubgpu,!stub").framework == "stubcpu");
    CHECK(r.select("stubgpu,stub,!stubgpu").framework == "stub");
    const auto err = catch_error([&] { (void)r.select("!stubgpu,!stub,!stubcpu"); });
    CHECK(err.code() == errc::unavailable);
  }
  SECTION("in PARENCHYMA_BACKEND") {
    Registry r(isolated(three_kinds(), {{"PARENCHYMA_BACKEND", "!stubgpu"}}));
    CHECK(r.select().framework == "stub");
  }
  SECTION("in the config's deny list") {
    scratch_dir tmp("deny");
    auto o = isolated(three_kinds());
    o.config_file = tmp.write("deny.json", R"({"deny": ["stubgpu"]})");
    Registry r(o);
    CHECK(r.config().deny == std::vector<std::string>{"stubgpu"});
    CHECK(r.select().framework == "stub");
  }
}

TEST_CASE("an ordered list picks the first available entry") {
  Registry r(isolated(three_kinds()));
  CHECK(r.select("cuda,stubcpu,stub").framework == "stubcpu");
  CHECK(r.select("stub,stubgpu").framework == "stub");
  if (native_plugin().empty()) return; // the native plugin is not part of this build
  SECTION("stub,native with both present") {
    Registry rn(isolated({stub_dir("good"), native_plugin()}));
    INFO("load report:\n" << describe(rn));
    CHECK(rn.select("stub,native").framework == "stub");
    CHECK(rn.select("native,stub").framework == "native");
  }
  SECTION("stub,native when the stub has no devices") {
    Registry rn(isolated({stub_dir("no_devices"), native_plugin()}));
    INFO("load report:\n" << describe(rn));
    const Selection s = rn.select("stub,native");
    CHECK(s.framework == "native");
    CHECK_FALSE(s.reason.empty());
  }
}

TEST_CASE("precedence: explicit > environment > config > ranking") {
  scratch_dir tmp("precedence");
  const auto config = tmp.write("backend.json", R"({"backend": "stubcpu"})");

  auto o = isolated(three_kinds());
  {
    Registry r(o);
    const Selection s = r.select();
    CHECK(s.framework == "stubgpu"); // ranking: GPU first
    CHECK_FALSE(s.reason.empty());
  }
  o.config_file = config;
  {
    Registry r(o);
    CHECK(r.config().backend == "stubcpu");
    const Selection s = r.select();
    CHECK(s.framework == "stubcpu"); // config over ranking
    CHECK_FALSE(s.reason.empty());
  }
  o.environment = std::map<std::string, std::string>{{"PARENCHYMA_BACKEND", "stub"}};
  {
    Registry r(o);
    const Selection s = r.select();
    CHECK(s.framework == "stub"); // environment over config
    CHECK(contains(s.reason, "PARENCHYMA_BACKEND"));
    const Selection x = r.select("stubgpu");
    CHECK(x.framework == "stubgpu"); // explicit over environment
    CHECK_FALSE(x.reason.empty());
    CHECK(Backend(r).name() == "stub:0");
    CHECK(Backend(r, "stubgpu").name() == "stubgpu:0");
  }
}

TEST_CASE("ranking: the config's list, unlisted frameworks by device kind then name") {
  SECTION("nothing listed") {
    Registry r(isolated(three_kinds()));
    CHECK(names(r.ranking()) == std::vector<std::string>{"stubgpu", "stub", "stubcpu"});
  }
  SECTION("an unlisted framework goes before the first listed one of a worse device kind") {
    scratch_dir tmp("ranking");
    auto o = isolated(three_kinds());
    o.config_file = tmp.write("ranking.json", R"({"ranking": ["stubcpu"]})");
    Registry r(o);
    CHECK(r.config().ranking == std::vector<std::string>{"stubcpu"});
    CHECK(names(r.ranking()) == std::vector<std::string>{"stubgpu", "stub", "stubcpu"});
    CHECK(r.select().framework == "stubgpu");
  }
  SECTION("listed frameworks keep the listed order, even against device kind") {
    scratch_dir tmp("ranking");
    auto o = isolated(three_kinds());
    o.config_file = tmp.write("ranking.json", R"({"ranking": ["stub", "stubgpu"]})");
    Registry r(o);
    CHECK(names(r.ranking()) == std::vector<std::string>{"stub", "stubgpu", "stubcpu"});
    CHECK(r.select().framework == "stub");
  }
  SECTION("equal kinds rank by name") {
    if (native_plugin().empty()) return;
    Registry r(isolated({stub_dir("kinds"), native_plugin()}));
    INFO("load report:\n" << describe(r));
    // native and stubcpu are both CPU frameworks and neither is listed.
    CHECK(names(r.ranking()) == std::vector<std::string>{"stubgpu", "native", "stubcpu"});
  }
}

TEST_CASE("PARENCHYMA_PLUGIN_PATH is honoured, colon-separated") {
  const std::string path =
      stub_dir("good").string() + PCY_TEST_PATH_SEP + stub_dir("kinds").string();
  Registry r(isolated({}, {{"PARENCHYMA_PLUGIN_PATH", path}}));
  INFO("load report:\n" << describe(r));
  CHECK(r.find_framework("stub") != nullptr);
  CHECK(r.find_framework("stubgpu") != nullptr);
  CHECK(r.find_framework("stubcpu") != nullptr);
  REQUIRE(r.search_path().size() == 2);
  CHECK(fs::equivalent(r.search_path()[0], stub_dir("good")));
  CHECK(fs::equivalent(r.search_path()[1], stub_dir("kinds")));
  CHECK(r.env("PARENCHYMA_PLUGIN_PATH") == path);
}

TEST_CASE("PARENCHYMA_CONFIG names the config file") {
  scratch_dir tmp("envconfig");
  const auto file = tmp.write("env.json", R"({"backend": "stubcpu", "log_level": "error"})");
  Registry r(isolated(three_kinds(), {{"PARENCHYMA_CONFIG", file.string()}}));
  CHECK(r.config().backend == "stubcpu");
  CHECK(r.select().framework == "stubcpu");
  bool listed = false;
  for (const auto& s : r.config().sources)
    listed = listed || contains(s, "env.json");
  CHECK(listed);

  SECTION("a PARENCHYMA_CONFIG naming a missing file is an error naming it") {
    const auto missing = (tmp / "missing.json").string();
    const auto err = catch_error([&] {
      Registry bad(isolated(three_kinds(), {{"PARENCHYMA_CONFIG", missing}}));
      (void)bad.select();
    });
    INFO(err.what());
    CHECK(err.code() == errc::config);
    CHECK(contains(err.what(), "missing.json"));
  }
}

TEST_CASE("the config's plugin_paths are searched") {
  scratch_dir tmp("cfgpaths");
  auto o = isolated({});
  o.config_file = tmp.write("paths.json", R"({"plugin_paths": [")" +
                                              stub_dir("kinds").generic_string() + R"("]})");
  Registry r(o);
  INFO("load report:\n" << describe(r));
  CHECK(r.find_framework("stubgpu") != nullptr);
  CHECK(r.find_framework("stub") == nullptr);
}

TEST_CASE("the environment map replaces the process environment") {
  Registry r(isolated({}, {{"PARENCHYMA_BACKEND", "stub"}}));
  CHECK(r.env("PARENCHYMA_BACKEND") == std::optional<std::string>("stub"));
  CHECK_FALSE(r.env("PATH").has_value()); // not taken from the real environment
  CHECK_FALSE(r.env("PARENCHYMA_CONFIG").has_value());
}

TEST_CASE("PARENCHYMA_LOG_LEVEL sets the log level; a bad value is noticed and ignored") {
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    INFO("PARENCHYMA_LOG_LEVEL=" << level);
    CHECK_NOTHROW(Registry(isolated({stub_dir("good")}, {{"PARENCHYMA_LOG_LEVEL", level}})));
  }
  // A typo in a log level must not stop a program from running: the registry works, and the
  // notice names the variable and the value.
  Registry r(isolated({stub_dir("good")}, {{"PARENCHYMA_LOG_LEVEL", "loudest"}}));
  CHECK(Backend(r, "stub").name() == "stub:0");
  bool noticed = false;
  for (const auto& n : r.notices())
    noticed = noticed || (contains(n, "PARENCHYMA_LOG_LEVEL") && contains(n, "loudest"));
  CHECK(noticed);
}
