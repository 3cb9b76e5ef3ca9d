// Unit tests for Backend: naming, selection, queue and synchronize, native handles, programs
// (unsupported on native), ops routed to a bundle and, under the fallback policy, to another
// framework with the data moving automatically.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cstring>

using namespace parenchyma;
using namespace pcy_test;

TEST_CASE("a native backend: name, selection, device, queue") {
  Registry r(isolated({native_plugin()}));
  Backend b(r, "native");
  CHECK(b.name() == "native:0");
  CHECK(b.framework().name() == "native");
  CHECK(b.selection().framework == "native");
  CHECK(b.selection().device == 0);
  CHECK_FALSE(b.selection().reason.empty());
  CHECK(b.device().kind == device_kind::cpu);
  CHECK_FALSE(b.device().name.empty());
  CHECK(&b.registry() == &r);
  CHECK(b.context() != nullptr);
  CHECK(b.queue() != nullptr);
  CHECK_NOTHROW(b.synchronize());
  const Backend copy = b;
  CHECK(copy == b);
  const Backend by_ranking(r);
  CHECK(by_ranking.name() == "native:0");
  CHECK_FALSE(by_ranking.selection().reason.empty());
  CHECK(catch_error([&] { Backend bad(r, "native:1"); }).code() == errc::unavailable);
}

TEST_CASE("native handles: a native tensor's memory is its host bytes") {
  Registry r(isolated({native_plugin()}));
  Backend b(r, "native");
  SharedTensor<float> t({1031});
  const auto v = random_values<float>(1031);
  std::copy(v.begin(), v.end(), t.write_only().begin());
  void* p = b.native_memory(t);
  REQUIRE(p != nullptr);
  CHECK(std::memcmp(p, v.data(), v.size() * sizeof(float)) == 0);
  for (pcy_native_object o : {PCY_NATIVE_CONTEXT, PCY_NATIVE_QUEUE, PCY_NATIVE_DEVICE}) {
    INFO("object " << o);
    void* h = nullptr;
    try {
      h = b.native(o);
    } catch (const error& e) { // the native plugin need not have these: then it says so
      CHECK(e.code() == errc::unsupported);
      CHECK(e.origin() == "native");
      continue;
    }
    CHECK(h != nullptr);
  }
}

TEST_CASE("the stub's native handles come back through Backend") {
  Registry r(isolated({stub_dir("good")}));
  Backend b(r, "stub");
  CHECK(b.native(PCY_NATIVE_CONTEXT) != nullptr);
  CHECK(b.native(PCY_NATIVE_QUEUE) != nullptr);
  SharedTensor<double> t({17});
  const auto v = random_values<double>(17);
  std::copy(v.begin(), v.end(), t.write_only().begin());
  void* p = b.native_memory(t);
  REQUIRE(p != nullptr);
  CHECK(std::memcmp(p, v.data(), v.size() * sizeof(double)) == 0);
}

TEST_CASE("programs on native are unsupported, with the plugin as origin") {
  Registry r(isolated({native_plugin()}));
  Backend b(r, "native");
  const auto err = catch_error([&] { (void)b.build_program("kernel void k() {}"); });
  CHECK(err.code() == errc::unsupported);
  CHECK_FALSE(err.message().empty());
}

TEST_CASE("user kernels on the stub: build, launch, build errors") {
  Registry r(isolated({stub_dir("good")}));
  Backend b(r, "stub");
  Program p = b.build_program("kernel add_one\n");
  CHECK_FALSE(p.cache_hit());
  CHECK(p.handle() != nullptr);
  Kernel k = p.kernel("add_one");
  CHECK(k.name() == "add_one");
  CHECK(catch_error([&] { (void)p.kernel("nope"); }).code() == errc::not_found);
  const uint32_t n = 777;
  SharedTensor<float> x({n});
  const auto v = random_values<float>(n);
  std::copy(v.begin(), v.end(), x.write_only().begin());
  b.launch(k, LaunchDims::linear(n), {KernelArg::inout(x), KernelArg::scalar<uint32_t>(n)});
  const auto got = x.read();
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(got[i] == v[i] + 1.0f);
  const auto err = catch_error([&] { (void)b.build_program("kernel nonsense\n"); });
  CHECK(err.code() == errc::build);
  CHECK(err.origin() == "stub");
  CHECK(contains(err.message(), "build log"));
}

namespace {
const OpKey negate{"stubext", "negate", PCY_DTYPE_F32, "i t="};

void negate_on(const Backend& b, int64_t n) {
  SharedTensor<float> x({n});
  const auto v = random_values<float>(static_cast<size_t>(n));
  std::copy(v.begin(), v.end(), x.write_only().begin());
  const OpArg args[] = {OpArg::integer(n), OpArg::inout(x)};
  b.invoke(negate, args);
  const auto got = x.read();
  for (int64_t i = 0; i < n; ++i)
    REQUIRE(got[i] == -v[i]);
}
} // namespace

TEST_CASE("an op missing on the backend's framework falls back, moving the data") {
  // The bundle serves only "stub"; a backend on "stubcpu" must borrow it (policy: allow/warn).
  scratch_dir tmp("fallback");
  auto o = isolated({stub_dir("good"), stub_dir("kinds"), stub_dir("bundle_good")});
  SECTION("default policy (warn)") {
    Registry r(o);
    CHECK(r.config().fallback == fallback_policy::warn);
    Backend b(r, "stubcpu");
    const OpRoute route = b.route(negate);
    CHECK(route.framework == "stub");
    CHECK(route.fallback);
    negate_on(b, 1001);
    CHECK(b.fallback_count() == 1);
    Backend home(r, "stub");
    negate_on(home, 3);
    CHECK(home.fallback_count() == 0);
  }
  SECTION("policy deny") {
    o.config_file = tmp.write("deny.json", R"({"fallback": "deny"})");
    Registry r(o);
    CHECK(r.config().fallback == fallback_policy::deny);
    Backend b(r, "stubcpu");
    const auto err = catch_error([&] { (void)b.route(negate); });
    CHECK(err.code() == errc::unsupported);
    CHECK(contains(err.what(), "negate"));
    CHECK(catch_error([&] { negate_on(b, 5); }).code() == errc::unsupported);
  }
  SECTION("a denied framework is never used for fallback") {
    o.config_file = tmp.write("deny_fw.json", R"({"deny": ["stub"]})");
    Registry r(o);
    Backend b(r, "stubcpu");
    CHECK(catch_error([&] { (void)b.route(negate); }).code() == errc::unsupported);
  }
}
