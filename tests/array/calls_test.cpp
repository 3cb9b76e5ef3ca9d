// The host side of a small array op (docs/array.md, "Host cost"): once a thread has warmed up,
// building an expression, emitting its program and running it through an array bundle makes no
// heap allocation — in the front-end, the core and the bundle — on every framework here. This
// program counts every operator new of the process (its own replacement).
#include "array_backends.hpp"

#include <parenchyma/array.hpp>

#include "support/catch.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_news{0};
}
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace pa = parenchyma::array;

TEST_CASE("a warm small elementwise op allocates nothing on the host", "[array][host]") {
#if !PCY_ARRAY_NODE_POOL
  SKIP("expression nodes are plain allocations under AddressSanitizer (use after free visible)");
#endif
  for (const parenchyma::Backend& b : array_test::array_backends()) {
    INFO("backend " << b.name());
    pa::Array x = pa::full(b, {3}, 2.0), y = pa::zeros(b, {3}), z = pa::ones(b, {3});
    auto step = [&] {
      y.assign(x * 2.0f + 1.0f);           // a fused chain with weak scalars
      z.assign(pa::maximum(z, x) - y);     // reads its own target
      y.assign(pa::where(x > 1.0f, y, z)); // comparison, where
    };
    // Warm-up: kernels built, node and buffer lists filled, pending lists compacted.
    for (int i = 0; i < 200; ++i)
      step();
    b.synchronize();
    const uint64_t before = g_news.load();
    for (int i = 0; i < 100; ++i)
      step();
    const uint64_t made = g_news.load() - before;
    b.synchronize();
    CHECK(made == 0);
    // The values are right (the loop is not a no-op): y = 5 where x > 1.
    const std::vector<float> got = y.to_vector<float>();
    CHECK(got == std::vector<float>{5, 5, 5});
  }
}
