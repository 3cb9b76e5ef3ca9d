// Unit tests for hostile input to the core: shapes whose products overflow, moved-from tensors,
// config files that are not small regular JSON files, and values too big to quote. Each gives
// a parenchyma::error naming its origin — never a crash, a hang, an abort or a wrong size.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <chrono>
#include <future>
#include <sys/stat.h>

using namespace parenchyma;
using namespace pcy_test;

namespace {

// Runs f on a thread and fails (rather than hangs) if it takes longer than `limit`.
template <class F> auto within(std::chrono::seconds limit, F&& f) {
  auto fut = std::async(std::launch::async, std::forward<F>(f));
  REQUIRE(fut.wait_for(limit) == std::future_status::ready);
  return fut.get();
}

error config_error(const fs::path& file) {
  auto o = isolated({});
  o.config_file = file;
  return catch_error([&] { Registry r(o); });
}

} // namespace

TEST_CASE("shapes whose element or byte count overflows are refused before anything is made") {
  const int64_t big = int64_t{1} << 31, huge = int64_t{1} << 40;
  for (const auto& shape : std::vector<std::vector<int64_t>>{{big, big},
                                                             {huge, huge},
                                                             {int64_t{1} << 62, 4},
                                                             {3, int64_t{1} << 62},
                                                             {huge, 1, huge}}) {
    INFO("shape of " << shape.size() << " dims starting " << shape[0]);
    const auto err = catch_error([&] { SharedTensor<float> t(shape); });
    CHECK(err.code() == errc::invalid_argument);
    CHECK(contains(err.message(), "63 bits"));
  }
  // The largest f64 shape whose bytes still fit is accepted (nothing is allocated yet).
  SharedTensor<double> ok({int64_t{1} << 59});
  CHECK(ok.size() == uint64_t{1} << 59);
  CHECK(catch_error([&] { SharedTensor<float> t({-1, 4}); }).code() == errc::invalid_argument);
}

TEST_CASE("reshape and resize check the new shape's product, and keep the tensor on error") {
  Registry r(isolated({native_plugin()}));
  Backend b(r, "native");
  SharedTensor<float> t({16});
  const auto v = random_values<float>(16);
  std::copy(v.begin(), v.end(), t.write_only().begin());
  // 2^32 * 2^32 * 16 wraps to 16 modulo 2^64.
  const std::vector<int64_t> wraps{int64_t{1} << 32, int64_t{1} << 32, 16};
  CHECK(catch_error([&] { t.reshape(wraps); }).code() == errc::invalid_argument);
  CHECK(catch_error([&] { t.resize(wraps); }).code() == errc::invalid_argument);
  CHECK(t.shape() == std::vector<int64_t>{16});
  const auto back = t.read();
  CHECK(std::equal(back.begin(), back.end(), v.begin()));
}

TEST_CASE("a moved-from tensor is valid: empty, readable as such, and reusable") {
  Registry r(isolated({native_plugin()}));
  Backend b(r, "native");
  SharedTensor<float> a({5});
  a.write_only()[0] = 1;
  (void)a.read(b);
  SharedTensor<float> moved(std::move(a));
  CHECK(a.size() == 0); // NOLINT(bugprone-use-after-move): that is the point
  CHECK(a.shape() == std::vector<int64_t>{0});
  CHECK_FALSE(a.initialized());
  CHECK(a.storage().slot_count() == 0);
  CHECK(a.stats().transfers() == 0);
  CHECK(catch_error([&] { (void)a.read(); }).code() == errc::uninitialized);
  CHECK(catch_error([&] { (void)a.read(b); }).code() == errc::uninitialized);
  SharedTensor<float> other({2});
  other = std::move(a); // assigning from moved-from is fine too
  CHECK(other.size() == 0);
  a.resize({3});
  CHECK(a.size() == 3);
  for (auto& x : a.write_only())
    x = 2;
  CHECK(a.read()[2] == 2);
  CHECK(moved.read()[0] == 1);
}

TEST_CASE("a config path that is not a regular file is refused without blocking") {
  scratch_dir tmp("special_config");
  SECTION("a directory") {
    const auto err = config_error(tmp.path());
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "directory"));
    CHECK(contains(err.origin(), tmp.path().string()));
  }
  SECTION("a FIFO (nobody writes it: reading would hang)") {
    REQUIRE(::mkfifo((tmp / "fifo.json").c_str(), 0600) == 0);
    const auto err =
        within(std::chrono::seconds(20), [&] { return config_error(tmp / "fifo.json"); });
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "FIFO"));
  }
  SECTION("a device") {
    const auto err = config_error("/dev/zero");
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "device"));
  }
  SECTION("a file larger than a config file may be") {
    std::string big(2u << 20, ' ');
    big.front() = '{';
    big.back() = '}';
    const auto err = config_error(tmp.write("big.json", big));
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "bytes"));
  }
  SECTION("PARENCHYMA_CONFIG naming a directory names the variable") {
    const auto err = catch_error([&] {
      Registry r(isolated({}, {{"PARENCHYMA_CONFIG", tmp.path().string()}}));
    });
    CHECK(err.code() == errc::config);
    CHECK(err.origin() == "PARENCHYMA_CONFIG");
  }
}

TEST_CASE("deeply nested or huge config values give a short error, not a stack overflow") {
  scratch_dir tmp("deep_config");
  SECTION("100,000 nested arrays as a value") {
    std::string deep = "{\"ranking\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
    const auto err = config_error(tmp.write("deep.json", deep));
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "deeper"));
    CHECK(err.message().size() < 400);
  }
  SECTION("an unknown key of 100 KiB is quoted as a short prefix") {
    const std::string key(100 * 1024, 'k');
    const auto err = config_error(tmp.write("key.json", "{\"" + key + "\": 1}"));
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "unknown key"));
    CHECK(err.message().size() < 600);
  }
  SECTION("a long wrong-typed value is quoted as a short prefix") {
    const auto err = config_error(
        tmp.write("val.json", "{\"fallback\": [\"" + std::string(50000, 'v') + "\"]}"));
    INFO(err.what());
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "fallback"));
    CHECK(err.message().size() < 400);
  }
  SECTION("a long PARENCHYMA_BACKEND is quoted as a short prefix") {
    const std::string text(3000, 'x');
    Registry r(isolated({}, {{"PARENCHYMA_BACKEND", text + "!"}}));
    const auto err = catch_error([&] { (void)r.select(); });
    CHECK(err.code() == errc::config);
    CHECK(err.message().size() < 600);
  }
}

TEST_CASE("the ranking key takes an explicit order or an order per device kind") {
  scratch_dir tmp("ranking_forms");
  auto o = isolated({stub_dir("kinds"), stub_dir("good")});
  SECTION("per kind: kind first, then the listed order") {
    o.config_file = tmp.write(
        "k.json", R"({"ranking": {"gpu": ["stubgpu"], "cpu": ["stubcpu"], "accelerator": []}})");
    Registry r(o);
    const auto ranked = r.device_ranking();
    REQUIRE(ranked.size() == 3);
    CHECK(ranked[0].framework->name() == "stubgpu");
    CHECK(ranked[1].framework->name() == "stub"); // accelerator
    CHECK(ranked[2].framework->name() == "stubcpu");
    for (const auto& d : ranked)
      CHECK_FALSE(d.reason.empty());
  }
  SECTION("an explicit order overrides device kind") {
    o.config_file = tmp.write("a.json", R"({"ranking": ["stubcpu", "stubgpu", "stub"]})");
    Registry r(o);
    CHECK(r.select().framework == "stubcpu");
  }
  SECTION("a bad kind or a bad name is a config error naming it") {
    o.config_file = tmp.write("bad.json", R"({"ranking": {"tpu": ["x"]}})");
    const auto err = catch_error([&] { Registry r(o); });
    CHECK(err.code() == errc::config);
    CHECK(contains(err.message(), "tpu"));
    o.config_file = tmp.write("bad2.json", R"({"ranking": ["Not A Name"]})");
    CHECK(catch_error([&] { Registry r(o); }).code() == errc::config);
  }
}

TEST_CASE("a framework serving few of an extension's ops does not become the default silently") {
  // stubgpu (a GPU) serves no stubext op; the stub (an accelerator) serves both.
  Registry r(isolated({stub_dir("kinds"), stub_dir("good"), stub_dir("bundle_good")}));
  const auto ranked = r.device_ranking();
  REQUIRE(ranked.size() == 3);
  CHECK(ranked[0].framework->name() == "stub");
  bool explained = false;
  for (const auto& d : ranked)
    if (d.framework->name() == "stubgpu")
      explained = contains(d.reason, "demoted") && contains(d.reason, "stubext (0 of ");
  CHECK(explained);
  const Selection s = r.select();
  CHECK(s.framework == "stub");
  CHECK(contains(s.reason, "most potent"));
  // Named explicitly it is still used.
  CHECK(Backend(r, "stubgpu").name() == "stubgpu:0");
}
