// Unit tests for OpKey: each key gets a process-wide slot on first use, once, even when many
// threads race for it, and the slot resolves the same op for every backend.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>

#include <set>
#include <thread>
#include <vector>

using namespace parenchyma;
using namespace pcy_test;

TEST_CASE("a key's slot is assigned on first use and then stable") {
  static const OpKey a{"unit", "first", PCY_DTYPE_F32, "i"};
  static const OpKey b{"unit", "second", PCY_DTYPE_F32, "i"};
  static const OpKey c{"unit", "first", PCY_DTYPE_F64, "i"};
  CHECK(a.slot.load() == -1);
  const int32_t ia = a.index();
  CHECK(ia >= 0);
  CHECK(a.index() == ia);
  CHECK(a.slot.load() == ia);
  const std::set<int32_t> slots{ia, b.index(), c.index()};
  CHECK(slots.size() == 3); // different op or dtype: different slot
}

TEST_CASE("racing threads agree on one slot") {
  for (int round = 0; round < 20; ++round) {
    const OpKey key{"unit", "raced", PCY_DTYPE_F32, "i"};
    std::vector<int32_t> seen(8, -2);
    std::vector<std::thread> threads;
    for (size_t t = 0; t < seen.size(); ++t)
      threads.emplace_back([&, t] { seen[t] = key.index(); });
    for (auto& t : threads)
      t.join();
    for (int32_t s : seen)
      CHECK(s == seen[0]);
    CHECK(seen[0] >= 0);
  }
}

TEST_CASE("one key resolves its op on every backend") {
  Registry r(isolated({stub_dir("good"), stub_dir("kinds"), stub_dir("bundle_good")}));
  static const OpKey negate{"stubext", "negate", PCY_DTYPE_F32, "i t="};
  static const OpKey missing{"stubext", "no_such_op", PCY_DTYPE_F32, "i t="};
  Backend stub(r, "stub"), gpu(r, "stubgpu");
  CHECK(stub.route(negate).framework == "stub");
  CHECK(gpu.route(negate).framework == "stub"); // served only by the stub's bundle: fallback
  CHECK(gpu.route(negate).fallback);
  const auto err = catch_error([&] { (void)stub.route(missing); });
  CHECK(err.code() == errc::unsupported);
  CHECK(contains(err.what(), "no_such_op"));
}

TEST_CASE("a key whose signature disagrees with the bundle's is refused") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_good")}));
  static const OpKey wrong{"stubext", "negate", PCY_DTYPE_F32, "i t< t>"};
  Backend b(r, "stub");
  const auto err = catch_error([&] { (void)b.route(wrong); });
  INFO(err.what());
  CHECK(contains(err.what(), "negate"));
}
