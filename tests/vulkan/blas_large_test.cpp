// blas_vulkan on tensors larger than maxStorageBufferRange (lavapipe: 128 MiB), through the
// public API: every BLAS-1 op on 160 MiB f32 vectors (unit and strided), gemv both ways on a
// 160 MiB matrix and gemm whose C is 160 MiB, each checked against a double-precision reference
// on the host. Such a tensor cannot be a descriptor binding; blas_vulkan takes it by its device
// address (docs/vulkan.md, "Tensors above maxStorageBufferRange"). On a device whose range is
// larger, PARENCHYMA_BLAS_VULKAN_MAX_BINDING lowers the bundle's limit to 128 MiB, so that the
// same path runs. Exits 77 when there is no Vulkan device, no BLAS bundle on it, or no room.
#include "support/catch.hpp"
#include "support/catch_run.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

using namespace parenchyma;

namespace {

// Under a sanitizer (host loops over 160 MiB took 107 s of ThreadSanitizer) the bundle's limit
// and the tensors are 8 times smaller: the same address path, above the (lowered) limit; the
// device's own limit is passed in the normal build.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int64_t shrink = 8;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr int64_t shrink = 8;
#else
constexpr int64_t shrink = 1;
#endif
#else
constexpr int64_t shrink = 1;
#endif
constexpr int64_t limit = (int64_t{128} << 20) / shrink; // lavapipe's maxStorageBufferRange
constexpr int64_t big = (int64_t{160} << 20) / shrink;   // bytes of each large tensor
constexpr int64_t n = big / 4;                           // f32 elements of a large vector

RegistryOptions options(std::map<std::string, std::string> env = {}) {
  RegistryOptions o; // env: the settings the plugins see (this environment only)
  const char* c = std::getenv("PARENCHYMA_CACHE_DIR");
  env["PARENCHYMA_CACHE_DIR"] =
      c && *c ? c : "/tmp/pcy-vulkan-large-cache-" + std::to_string(::getpid());
  env["PARENCHYMA_BLAS_VULKAN_MAX_BINDING"] = std::to_string(limit);
  o.environment = std::move(env);
  o.default_plugin_dir = true;
  return o;
}

int64_t prop_int(const Device& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) {
      if (const auto* i = std::get_if<int64_t>(&v)) return *i;
      if (const auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
    }
  return 0;
}

bool has_prop(const Device& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) return true;
  return false;
}

// Values in [-1, 1), cheap enough for 160 MiB.
void fill(std::span<float> v, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    f = static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) * 0x1p-23f;
  }
}

// One process-wide registry and backend (the test cases share the compiled shaders).
struct fixture {
  std::unique_ptr<Registry> r;
  std::unique_ptr<Backend> b;
  std::string skip; // why the test cannot run here
};
fixture& vk() {
  static fixture f = [] {
    fixture x;
    x.r = std::make_unique<Registry>(options());
    try {
      x.b = std::make_unique<Backend>(*x.r, "vulkan");
    } catch (const parenchyma::error& e) {
      x.skip = std::string("no Vulkan backend: ") + e.what();
      return x;
    }
    const OpRoute route = x.b->route(blas::detail::scal_key(PCY_DTYPE_F32));
    if (route.fallback || route.framework != "vulkan") {
      x.skip = "blas_vulkan does not serve scal on this device (" + route.framework + ")";
      return x;
    }
    const Device& d = x.b->device();
    if (prop_int(d, "global_memory") < 4 * big || prop_int(d, "max_alloc") < big)
      x.skip = "the device has no room for " + std::to_string(big >> 20) + " MiB tensors";
    else if (has_prop(d, "buffer_device_address") && prop_int(d, "buffer_device_address") == 0)
      x.skip = "the device has no bufferDeviceAddress"; // (a plugin without the key: run)
    return x;
  }();
  return f;
}

// |got - want| <= tol, with the values in the message.
#define NEAR(got, want, tol)                                                                       \
  do {                                                                                             \
    const double g_ = (got), w_ = (want), t_ = (tol);                                              \
    INFO(#got " = " << g_ << ", reference " << w_ << ", tolerance " << t_);                        \
    CHECK(std::fabs(g_ - w_) <= t_);                                                               \
  } while (0)

// The first index where got differs from want by more than tol times the scale (or -1).
template <class F> int64_t first_bad(int64_t count, F&& bad) {
  for (int64_t i = 0; i < count; ++i)
    if (bad(i)) return i;
  return -1;
}

} // namespace

TEST_CASE("BLAS-1 on 160 MiB vectors, past maxStorageBufferRange") {
  fixture& f = vk();
  REQUIRE(f.skip.empty()); // main() exits 77 first
  const Backend& b = *f.b;
  SharedTensor<float> x({n}), y({n});
  fill(x.write_only(), 1);
  fill(y.write_only(), 2);
  std::vector<float> x0, y0;
  {
    auto hx = x.read(), hy = y.read();
    x0.assign(hx.begin(), hx.end());
    y0.assign(hy.begin(), hy.end());
  }
  SharedTensor<float> r({1});
  auto result = [&] { return static_cast<double>(r.read()[0]); };

  // Reductions: unit and strided.
  double dot = 0, dabs = 0, asum = 0, ssq = 0, dot2 = 0, dabs2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double xv = x0[i], yv = y0[i];
    dot += xv * yv;
    dabs += std::fabs(xv * yv);
    asum += std::fabs(xv);
    ssq += xv * xv;
  }
  for (int64_t i = 0; i < n / 2; ++i) {
    dot2 += double(x0[2 * i]) * y0[i];
    dabs2 += std::fabs(double(x0[2 * i]) * y0[i]);
  }
  blas::dot(b, n, x, 1, y, 1, r);
  NEAR(result(), dot, 1e-4 * dabs);
  blas::asum(b, n, x, 1, r);
  NEAR(result(), asum, 1e-4 * asum);
  blas::nrm2(b, n, x, 1, r);
  NEAR(result(), std::sqrt(ssq), 1e-4 * std::sqrt(ssq));
  blas::dot(b, n / 2, x, 2, y, 1, r); // x's even elements, through the end of x
  NEAR(result(), dot2, 1e-4 * dabs2);

  // Element-wise ops, chained (one read of each vector at the end: each op's result decides
  // elements of the final state), every element checked.
  const float alpha = 0.75f;
  blas::axpy(b, n, alpha, x, 1, y, 1); // y1 = alpha x + y
  blas::scal(b, n / 3, -2.5f, x, 3);   // x1: every third element, through the end of x
  blas::swap(b, n, x, 1, y, 1);        // x = y1, y = x1
  blas::copy(b, n / 2, x, 2, y, 1);    // y[i] = y1[2 i] for the first half of y
  auto y1_bad = [&](float got, int64_t i) {
    const double want = double(alpha) * x0[i] + y0[i];
    return std::fabs(got - want) > 1e-6 * (std::fabs(x0[i]) + std::fabs(y0[i]) + 1e-30);
  };
  auto x1 = [&](int64_t i) {
    return i % 3 == 0 && i / 3 < n / 3 ? static_cast<float>(-2.5 * x0[i]) : x0[i];
  };
  auto hx = x.read(), hy = y.read();
  const int64_t bad_x = first_bad(n, [&](int64_t i) { return y1_bad(hx[i], i); });
  INFO("axpy then swap: first wrong element of x " << bad_x);
  CHECK(bad_x == -1);
  const int64_t bad_y =
      first_bad(n, [&](int64_t i) { return i < n / 2 ? y1_bad(hy[i], 2 * i) : hy[i] != x1(i); });
  INFO("scal (incx 3), swap, copy (incx 2): first wrong element of y " << bad_y);
  CHECK(bad_y == -1);
}

TEST_CASE("gemv on a 160 MiB matrix, both ways") {
  fixture& f = vk();
  REQUIRE(f.skip.empty()); // main() exits 77 first
  const Backend& b = *f.b;
  for (const bool trans : {false, true}) {
    // y = alpha op(A) x + beta y; A is rows x cols: tall for A x (a work-group a row), wide for
    // A^T x (an invocation a column), so that either stays quick.
    const int64_t rows = trans ? 16 : n / 1024, cols = n / rows;
    const int64_t nx = trans ? rows : cols, ny = trans ? cols : rows;
    SharedTensor<float> A({rows, cols}), x({nx}), y({ny});
    fill(A.write_only(), 3);
    fill(x.write_only(), 4);
    fill(y.write_only(), 5);
    std::vector<float> a0, x0, y0;
    {
      auto ha = A.read(), hx = x.read(), hy = y.read();
      a0.assign(ha.begin(), ha.end());
      x0.assign(hx.begin(), hx.end());
      y0.assign(hy.begin(), hy.end());
    }
    const double alpha = 1.5, beta = -0.5;
    blas::gemv(b, trans ? blas::trans : blas::no_trans, alpha, A, x, beta, y);
    auto hy = y.read();
    const int64_t bad = first_bad(ny, [&](int64_t j) {
      double s = 0, sabs = 0;
      for (int64_t l = 0; l < nx; ++l) {
        const double p =
            trans ? double(a0[l * cols + j]) * x0[l] : double(a0[j * cols + l]) * x0[l];
        s += p;
        sabs += std::fabs(p);
      }
      const double want = alpha * s + beta * y0[j];
      return std::fabs(hy[j] - want) > 1e-5 * (std::fabs(alpha) * sabs + std::fabs(y0[j]) + 1e-30);
    });
    INFO((trans ? "gemv A^T x" : "gemv A x") << ": first wrong element of y " << bad);
    CHECK(bad == -1);
  }
}

TEST_CASE("gemm whose C is 160 MiB") {
  fixture& f = vk();
  REQUIRE(f.skip.empty()); // main() exits 77 first
  const Backend& b = *f.b;
  // C (m x nn) = alpha A B + beta C with k = 3: the work is small, C is the large tensor (read
  // and written); A^T is taken from a k x m tensor.
  const int64_t m = 2048, nn = n / m, k = 3;
  SharedTensor<float> At({k, m}), B({k, nn}), C({m, nn});
  fill(At.write_only(), 6);
  fill(B.write_only(), 7);
  fill(C.write_only(), 8);
  std::vector<float> a0, b0, c0;
  {
    auto ha = At.read(), hb = B.read(), hc = C.read();
    a0.assign(ha.begin(), ha.end());
    b0.assign(hb.begin(), hb.end());
    c0.assign(hc.begin(), hc.end());
  }
  const double alpha = 2.0, beta = 0.5;
  blas::gemm(b, blas::trans, blas::no_trans, alpha, At, B, beta, C);
  auto hc = C.read();
  const int64_t bad = first_bad(m * nn, [&](int64_t e) {
    const int64_t i = e / nn, j = e % nn;
    double s = 0, sabs = 0;
    for (int64_t l = 0; l < k; ++l) {
      const double p = double(a0[l * m + i]) * b0[l * nn + j];
      s += p;
      sabs += std::fabs(p);
    }
    const double want = alpha * s + beta * c0[e];
    return std::fabs(hc[e] - want) > 1e-5 * (alpha * sabs + std::fabs(c0[e]) + 1e-30);
  });
  INFO("gemm: first wrong element of C " << bad);
  CHECK(bad == -1);
}

TEST_CASE("a device without bufferDeviceAddress refuses them by name") {
  REQUIRE(vk().skip.empty()); // main() exits 77 first
  Registry r(options({{"PARENCHYMA_VULKAN_NO_DEVICE_ADDRESS", "1"}}));
  Backend b(r, "vulkan");
  CHECK(prop_int(b.device(), "buffer_device_address") == 0);
  SharedTensor<float> x({n});
  fill(x.write_only(), 9);
  std::string message;
  try {
    blas::scal(b, 2.0f, x);
    b.synchronize();
  } catch (const parenchyma::error& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("maxStorageBufferRange") != std::string::npos);
  CHECK(message.find("bufferDeviceAddress") != std::string::npos);
  CHECK(message.find(std::to_string(big)) != std::string::npos);
  // A tensor within the limit still runs (bound as a descriptor).
  SharedTensor<float> small({1000});
  fill(small.write_only(), 10);
  std::vector<float> before;
  {
    auto h = small.read();
    before.assign(h.begin(), h.end());
  }
  blas::scal(b, 2.0f, small);
  auto h = small.read();
  CHECK(first_bad(1000, [&](int64_t i) { return h[i] != 2.0f * before[i]; }) == -1);
}

int main(int argc, char** argv) {
  if (!vk().skip.empty()) {
    std::printf("skipped: %s\n", vk().skip.c_str());
    return 77;
  }
  const int rc = parenchyma_test::run_catch(argc, argv);
  vk().b.reset();
  vk().r.reset();
  return rc;
}
