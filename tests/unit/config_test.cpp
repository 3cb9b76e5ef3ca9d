// Unit tests for the configuration: a full config file read through RegistryOptions::config_file,
// the shipped default config, layering, fallback and log_level values, and the errors for bad
// values (each naming the key and the file).
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

using namespace parenchyma;
using namespace pcy_test;

namespace {
RegistryOptions with_file(const fs::path& file) {
  auto o = isolated({});
  o.config_file = file;
  return o;
}
} // namespace

TEST_CASE("a config file with every key") {
  scratch_dir tmp("fullcfg");
  const auto file = tmp.write("full.json", R"({
    // comments are allowed
    "ranking": ["stubcpu", "stub"],
    "backend": "stub:0,stubcpu",
    "deny": ["stubgpu"],
    "plugin_paths": [")" + stub_dir("kinds").generic_string() +
                                               R"("],
    "fallback": "allow",
    "log_level": "error",
    "cache_dir": ")" + (tmp / "cache").generic_string() +
                                               R"("
  })");
  Registry r(with_file(file));
  const Config& c = r.config();
  CHECK(c.ranking == std::vector<std::string>{"stubcpu", "stub"});
  CHECK(c.backend == "stub:0,stubcpu");
  CHECK(c.deny == std::vector<std::string>{"stubgpu"});
  CHECK(c.plugin_paths == std::vector<std::string>{stub_dir("kinds").generic_string()});
  CHECK(c.fallback == fallback_policy::allow);
  CHECK(c.log_level == "error");
  CHECK(c.cache_dir == (tmp / "cache").generic_string());
  REQUIRE(c.sources.size() == 1);
  CHECK(fs::equivalent(c.sources[0], file));
  CHECK(r.find_framework("stubcpu") != nullptr); // plugin_paths took effect
  CHECK(r.select().framework == "stubcpu");      // "stub:0" is not loaded: next entry
}

TEST_CASE("fallback values") {
  scratch_dir tmp("fallback");
  const std::pair<const char*, fallback_policy> cases[] = {{"allow", fallback_policy::allow},
                                                           {"warn", fallback_policy::warn},
                                                           {"deny", fallback_policy::deny}};
  for (const auto& [text, policy] : cases) {
    INFO(text);
    Registry r(with_file(
        tmp.write(std::string(text) + ".json", std::string(R"({"fallback": ")") + text + "\"}")));
    CHECK(r.config().fallback == policy);
    CHECK(std::string(to_string(policy)) == text);
  }
  const auto bad = tmp.write("bad.json", R"({"fallback": "sometimes"})");
  const auto err = catch_error([&] { Registry r(with_file(bad)); });
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "fallback"));
  CHECK(contains(err.what(), "sometimes"));
  CHECK(contains(err.what(), bad.string()));
}

TEST_CASE("log_level values") {
  scratch_dir tmp("loglevel");
  Registry r(with_file(tmp.write("ok.json", R"({"log_level": "debug"})")));
  CHECK(r.config().log_level == "debug");
  const auto bad = tmp.write("bad.json", R"({"log_level": "verbose"})");
  const auto err = catch_error([&] { Registry x(with_file(bad)); });
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "log_level"));
  CHECK(contains(err.what(), "verbose"));
}

TEST_CASE("a bad backend string in the config names the file and key") {
  scratch_dir tmp("badbackend");
  const auto bad = tmp.write("bad.json", R"({"backend": "cuda;opencl"})");
  const auto err = catch_error([&] { Registry r(with_file(bad)); });
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), "backend"));
  CHECK(contains(err.what(), bad.string()));
}

TEST_CASE("a config that is not a JSON object is refused") {
  scratch_dir tmp("notobject");
  const auto bad = tmp.write("list.json", R"(["cuda", "native"])");
  const auto err = catch_error([&] { Registry r(with_file(bad)); });
  CHECK(err.code() == errc::config);
  CHECK(contains(err.what(), bad.string()));
}

TEST_CASE("the shipped default config, and a file layered over it") {
  auto o = isolated({});
  o.default_config = true;
  {
    Registry r(o);
    // The shipped ranking is by device kind: GPUs first, CUDA before OpenCL among them; among
    // CPUs native first (an OpenCL or Vulkan CPU device runs on the same cores with slower
    // code). Vulkan is last of each kind until it has bundles (docs/vulkan.md).
    CHECK(r.config().ranking.empty());
    const auto& k = r.config().ranking_by_kind;
    REQUIRE(k.count("gpu"));
    REQUIRE(k.count("cpu"));
    CHECK(k.at("gpu") == std::vector<std::string>{"cuda", "opencl", "vulkan"});
    CHECK(k.at("cpu") == std::vector<std::string>{"native", "opencl", "vulkan"});
    CHECK(r.config().fallback == fallback_policy::warn);
    REQUIRE(r.config().sources.size() == 1);
    CHECK(contains(r.config().sources[0], "parenchyma.json"));
  }
  scratch_dir tmp("layered");
  o.config_file = tmp.write("over.json", R"({"fallback": "deny"})");
  {
    Registry r(o);
    CHECK(r.config().ranking_by_kind.at("gpu") ==
          std::vector<std::string>{"cuda", "opencl", "vulkan"});
    CHECK(r.config().fallback == fallback_policy::deny);
    CHECK(r.config().sources.size() == 2);
  }
}
