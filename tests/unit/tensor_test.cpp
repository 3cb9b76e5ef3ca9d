// Unit tests for SharedTensor<float/double> and TensorStorage: shape, reshape/resize, the
// uninitialised-read error, host <-> device coherence on the native backend and on a staging-only
// stub, and the transfer counters (no redundant transfer, write-only skips the sync, aliases).
#include "loader/testing.hpp"
#include "support/catch.hpp"
#if PARENCHYMA_CATCH3
#include <catch2/catch_template_test_macros.hpp>
#endif

#include <parenchyma/parenchyma.hpp>

#include <cstring>

using namespace parenchyma;
using namespace pcy_test;

namespace {

// The native backend in a registry of its own.
struct native_backend {
  Registry registry{isolated({native_plugin()})};
  Backend backend{registry, "native"};
};
// A stub without export/import: every move between host and "device" is a real copy.
struct staging_backend {
  Registry registry{isolated({stub_dir("null_optional")})};
  Backend backend{registry, "stub"};
};

template <class T> void fill_random(SharedTensor<T>& t, std::vector<T>& keep) {
  keep = random_values<T>(static_cast<size_t>(t.size()));
  auto w = t.write_only();
  std::copy(keep.begin(), keep.end(), w.begin());
}

// Raw framework calls on a backend's device memory (what a kernel or op would do).
void device_write(const Backend& b, pcy_memory m, const void* src, uint64_t bytes) {
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = b.queue();
  a.memory = m;
  a.host_pointer = const_cast<void*>(src);
  a.bytes = bytes;
  a.blocking = true;
  throw_if(b.framework().api().memory_write(&a));
}
void device_read(const Backend& b, pcy_memory m, void* dst, uint64_t bytes) {
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = b.queue();
  a.memory = m;
  a.host_pointer = dst;
  a.bytes = bytes;
  a.blocking = true;
  throw_if(b.framework().api().memory_read(&a));
}

} // namespace

TEMPLATE_TEST_CASE("shape and size", "[tensor]", float, double) {
  SharedTensor<TestType> t({2, 3, 5});
  CHECK(t.shape() == std::vector<int64_t>{2, 3, 5});
  CHECK(t.size() == 30);
  CHECK(t.storage().bytes() == 30 * sizeof(TestType));
  CHECK(t.storage().dtype() == SharedTensor<TestType>::dtype);
  CHECK_FALSE(t.initialized());
  SharedTensor<TestType> v{7};
  CHECK(v.shape() == std::vector<int64_t>{7});
  CHECK(v.size() == 7);
}

TEMPLATE_TEST_CASE("reshape keeps the data; a different count is invalid_argument", "[tensor]",
                   float, double) {
  SharedTensor<TestType> t({6, 5});
  std::vector<TestType> v;
  fill_random(t, v);
  t.reshape({5, 6});
  CHECK(t.shape() == std::vector<int64_t>{5, 6});
  const auto r = t.read();
  CHECK(std::equal(r.begin(), r.end(), v.begin()));

  const auto err = catch_error([&] { t.reshape({5, 7}); });
  CHECK(err.code() == errc::invalid_argument);
  CHECK(contains(err.message(), "35"));
  CHECK(t.shape() == std::vector<int64_t>{5, 6}); // unchanged
  const auto again = t.read();
  CHECK(std::equal(again.begin(), again.end(), v.begin()));
}

TEMPLATE_TEST_CASE("resize drops the data", "[tensor]", float, double) {
  SharedTensor<TestType> t({4});
  std::vector<TestType> v;
  fill_random(t, v);
  CHECK(t.initialized());
  t.resize({3, 3});
  CHECK(t.size() == 9);
  CHECK(t.shape() == std::vector<int64_t>{3, 3});
  CHECK_FALSE(t.initialized());
  CHECK(catch_error([&] { (void)t.read(); }).code() == errc::uninitialized);
  fill_random(t, v);
  const auto r = t.read();
  CHECK(std::equal(r.begin(), r.end(), v.begin()));
}

TEMPLATE_TEST_CASE("reading a never-written tensor is uninitialized, naming its shape", "[tensor]",
                   float, double) {
  SharedTensor<TestType> t({7, 13});
  const auto err = catch_error([&] { (void)t.read(); });
  CHECK(err.code() == errc::uninitialized);
  INFO(err.what());
  CHECK(contains(err.message(), "7"));
  CHECK(contains(err.message(), "13"));
  native_backend n;
  CHECK(catch_error([&] { (void)t.read(n.backend); }).code() == errc::uninitialized);
  CHECK_NOTHROW(t.write_only(n.backend)); // writing needs no prior data
}

TEMPLATE_TEST_CASE("host write -> device read -> device write -> host read on native", "[tensor]",
                   float, double) {
  native_backend n;
  for (int64_t count : {int64_t{1}, int64_t{3}, int64_t{4097}, int64_t{262147}}) {
    INFO("elements " << count);
    SharedTensor<TestType> t({count});
    std::vector<TestType> v;
    fill_random(t, v);
    const uint64_t bytes = static_cast<uint64_t>(count) * sizeof(TestType);
    std::vector<TestType> seen(static_cast<size_t>(count));
    device_read(n.backend, t.read(n.backend), seen.data(), bytes);
    CHECK(seen == v);
    const auto w = random_values<TestType>(static_cast<size_t>(count));
    device_write(n.backend, t.write(n.backend), w.data(), bytes);
    const auto r = t.read();
    CHECK(std::equal(r.begin(), r.end(), w.begin()));
  }
}

TEMPLATE_TEST_CASE("the same round trip through a staging-only device", "[tensor]", float, double) {
  staging_backend s;
  SharedTensor<TestType> t({3, 4099});
  std::vector<TestType> v;
  fill_random(t, v);
  const uint64_t bytes = t.storage().bytes();
  std::vector<TestType> seen(v.size());
  device_read(s.backend, t.read(s.backend), seen.data(), bytes);
  CHECK(seen == v);
  const auto w = random_values<TestType>(v.size());
  device_write(s.backend, t.write(s.backend), w.data(), bytes);
  const auto r = t.read();
  CHECK(std::equal(r.begin(), r.end(), w.begin()));
}

TEST_CASE("a moved tensor keeps its data and slots") {
  native_backend n;
  SharedTensor<float> a({33});
  std::vector<float> v;
  fill_random(a, v);
  (void)a.read(n.backend);
  const size_t slots = a.storage().slot_count();
  SharedTensor<float> b(std::move(a));
  CHECK(b.size() == 33);
  CHECK(b.storage().slot_count() == slots);
  const auto r = b.read();
  CHECK(std::equal(r.begin(), r.end(), v.begin()));
  SharedTensor<float> c({1});
  c = std::move(b);
  CHECK(c.shape() == std::vector<int64_t>{33});
  const auto rc = c.read();
  CHECK(std::equal(rc.begin(), rc.end(), v.begin()));
}

TEST_CASE("transfer counters: no redundant transfer, write-only skips the sync") {
  staging_backend s;
  const Backend& b = s.backend;
  SharedTensor<float> t({1000 + static_cast<int64_t>(rng()() % 100)});
  const uint64_t bytes = t.storage().bytes();
  std::vector<float> v;
  fill_random(t, v);
  CHECK(t.stats().transfers() == 0);

  (void)t.read(b);
  CHECK(t.stats().host_to_device == 1);
  CHECK(t.stats().bytes_to_device == bytes);
  (void)t.read(b);
  (void)t.read();
  CHECK(t.stats().transfers() == 1); // both copies are valid: nothing moves again

  (void)t.write(b); // the device copy is valid: no sync, the host copy becomes stale
  CHECK(t.stats().transfers() == 1);
  (void)t.read();
  CHECK(t.stats().device_to_host == 1);
  CHECK(t.stats().bytes_to_host == bytes);
  (void)t.read();
  (void)t.read(b);
  CHECK(t.stats().transfers() == 2);

  (void)t.write_only();  // host data is about to be overwritten: no sync needed
  (void)t.write_only(b); // nor here, although the device copy is now stale
  CHECK(t.stats().transfers() == 2);
  (void)t.read();
  CHECK(t.stats().device_to_host == 2);
  CHECK(t.stats().aliases == 0);
  CHECK(t.storage().slot_count() == 1);

  t.storage().reset_stats();
  CHECK(t.stats().transfers() == 0);
  CHECK(t.stats().bytes_to_host == 0);
}

TEST_CASE("transfer counters: the native device aliases host memory") {
  native_backend n;
  SharedTensor<double> t({4099});
  std::vector<double> v;
  fill_random(t, v);
  std::vector<double> seen(v.size());
  device_read(n.backend, t.read(n.backend), seen.data(), t.storage().bytes());
  CHECK(seen == v);
  CHECK(t.stats().aliases >= 1);
  CHECK(t.stats().transfers() == 0);
  (void)t.write(n.backend);
  (void)t.read();
  (void)t.read(n.backend);
  CHECK(t.stats().transfers() == 0); // zero copies: both sides are the same bytes
}

TEST_CASE("data moves between two frameworks through the host") {
  Registry r(isolated({native_plugin(), stub_dir("null_optional")}));
  Backend native(r, "native"), stub(r, "stub");
  SharedTensor<float> t({5, 5, 41});
  std::vector<float> v;
  fill_random(t, v);
  const uint64_t bytes = t.storage().bytes();
  const auto w = random_values<float>(v.size());
  device_write(stub, t.write_only(stub), w.data(), bytes);
  std::vector<float> seen(v.size());
  device_read(native, t.read(native), seen.data(), bytes);
  CHECK(seen == w);
  const auto h = t.read();
  CHECK(std::equal(h.begin(), h.end(), w.begin()));
  CHECK(t.storage().slot_count() == 2);
}
