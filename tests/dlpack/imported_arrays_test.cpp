// Imported host arrays behave the same whatever their address and whatever the device (issue
// "Trust, second round", items 3 and 4; docs/python.md "Imported host arrays"):
// - after an op and a synchronize(), the array holds the op's result, with no host access through
//   the tensor, at every 4-byte alignment from 4 to 256 bytes past a page boundary;
// - what the program writes into the array after a synchronize() is what the next op reads;
// - two imports of one buffer see each other's results;
// - operands that must be distinct are refused when their memory overlaps (two imports of one
//   buffer, overlapping views, an export imported again), naming the op and the arguments.
// Every framework present runs it (native, OpenCL, CUDA); an absent one is skipped, with why.
// The mock framework (plugins/mock) as a GPU that cannot use host memory in place, with
// asynchronous queues, runs it everywhere: the core's device copy kept in step with the array.
#include "loader/testing.hpp"
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/dlpack.hpp>
#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;

namespace {

using pcy_test_support::rng;

// A view of memory the test owns: the DLPack producer that NumPy would be (no deleter work).
struct Borrowed {
  DLManagedTensor managed{};
  std::vector<int64_t> shape;
  Borrowed(float* data, std::vector<int64_t> shp) : shape(std::move(shp)) {
    DLTensor& t = managed.dl_tensor;
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = dtype_to_dlpack(PCY_DTYPE_F32);
    t.shape = shape.data();
    t.strides = nullptr;
    managed.deleter = nullptr;
  }
};

TensorStorage import(Borrowed& b) { return from_dlpack(&b.managed); }

// Page-aligned bytes, so that `offset` is the array's distance from a page boundary.
struct PageBuffer {
  void* raw = nullptr;
  explicit PageBuffer(size_t bytes) {
    raw = std::aligned_alloc(4096, (bytes + 8191) / 4096 * 4096);
  }
  ~PageBuffer() { std::free(raw); }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  float* at(size_t offset) const {
    return reinterpret_cast<float*>(static_cast<char*>(raw) + offset);
  }
};

std::optional<Backend> backend_or_skip(const char* name, std::string& why) {
  Registry& r = Registry::global();
  const Framework* f = r.find_framework(name);
  if (f == nullptr || f->devices().empty()) {
    why = std::string("skipped: no ") + name + " device here";
    return std::nullopt;
  }
  return Backend(r, name);
}

using pcy_test_support::message_of;

bool has(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// How many of a's n values differ from want(i) (float64 reference, relative 1e-6).
template <class W> int mismatches(const float* a, int64_t n, W&& want) {
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double w = want(i);
    if (!(std::abs(static_cast<double>(a[i]) - w) <= 1e-6 * (1.0 + std::abs(w)))) ++bad;
  }
  return bad;
}

} // namespace

TEST_CASE("an imported host array holds each op's result after synchronize, at every alignment",
          "[dlpack][imported]") {
  const char* fw = GENERATE("native", "opencl", "cuda");
  std::string why;
  auto b = backend_or_skip(fw, why);
  if (!b) {
    SUCCEED(why);
    return;
  }
  constexpr int64_t n = 1031; // not a multiple of any vector width
  PageBuffer page(static_cast<size_t>(n) * 4 + 512);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  int failed_offsets = 0;
  for (size_t offset = 4; offset <= 256; offset += 4) {
    float* a = page.at(offset);
    std::vector<double> ref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      ref[static_cast<size_t>(i)] = a[i] = static_cast<float>(u(rng()));
    Borrowed view(a, {n});
    TensorStorage x = import(view);

    // 1. An op's result reaches the array at synchronize(), without a host access via x.
    blas::scal(*b, 2.0, x);
    b->synchronize();
    for (auto& v : ref)
      v *= 2;
    int bad = mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });

    // 2. What the program writes into the array then is what the next op reads.
    for (int64_t i = 0; i < n; i += 7)
      ref[static_cast<size_t>(i)] = a[i] = static_cast<float>(i % 13);
    blas::scal(*b, -3.0, x);
    b->synchronize();
    for (auto& v : ref)
      v *= -3;
    bad += mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });

    // 3. A second import of the same bytes sees x's results, and x sees its.
    Borrowed again(a, {n});
    TensorStorage y = import(again);
    blas::scal(*b, 0.5, y);
    blas::scal(*b, 4.0, x); // reads what y wrote, on the same queue, no host access between
    b->synchronize();
    for (auto& v : ref)
      v *= 2;
    bad += mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });
    // The tensors read the same through the runtime.
    bad += mismatches(static_cast<const float*>(x.host_read()), n,
                      [&](int64_t i) { return ref[static_cast<size_t>(i)]; });
    if (bad != 0) {
      ++failed_offsets;
      UNSCOPED_INFO(b->name() << ": offset " << offset << ": " << bad << " wrong values");
    }
  }
  CHECK(failed_offsets == 0);
}

TEST_CASE("a device that cannot use the array in place keeps its copy in step with it",
          "[dlpack][imported][mock]") {
  // A mock GPU: not host-unified (the core copies), queues that run on threads of their own (a
  // host that does not wait reads stale bytes), the example BLAS bundle (scal, axpy).
  Registry reg(
      pcy_test::isolated({PCY_TEST_MOCK_DIR, PCY_TEST_MOCK_BUNDLE_DIR},
                         {{"PARENCHYMA_MOCK_KIND", "gpu"}, {"PARENCHYMA_MOCK_ASYNC", "1"}}));
  Backend b(reg, "mock");
  const Program p = b.build_program("kernel add_one\n");
  const Kernel add_one = p.kernel("add_one");
  constexpr int64_t n = 1031;
  PageBuffer page(static_cast<size_t>(n) * 4 + 512);
  int failed_offsets = 0;
  for (size_t offset = 4; offset <= 256; offset += 4) {
    float* a = page.at(offset);
    std::vector<double> ref(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      ref[static_cast<size_t>(i)] = a[i] = static_cast<float>(i % 97) * 0.5f;
    Borrowed view(a, {n});
    TensorStorage x = import(view);
    // An op (the bundle's scal) and a user kernel, each followed by synchronize().
    blas::scal(b, 2.0, x);
    b.synchronize();
    for (auto& v : ref)
      v *= 2;
    int bad = mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });
    a[5] = 100.0f; // the program writes the array after synchronising
    ref[5] = 100.0;
    b.launch(add_one, LaunchDims::linear(static_cast<uint32_t>(n)),
             {KernelArg::inout(x), KernelArg::scalar(static_cast<uint32_t>(n))});
    b.synchronize();
    for (auto& v : ref)
      v += 1;
    bad += mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });
    // A second import of the same bytes, used between x's ops without a host access.
    Borrowed again(a, {n});
    TensorStorage y = import(again);
    blas::scal(b, 3.0, y);
    blas::scal(b, 0.5, x);
    b.synchronize();
    for (auto& v : ref)
      v *= 1.5;
    bad += mismatches(a, n, [&](int64_t i) { return ref[static_cast<size_t>(i)]; });
    CHECK(x.stats().aliases == 0); // really a copy apart from the array
    if (bad != 0) {
      ++failed_offsets;
      UNSCOPED_INFO("mock: offset " << offset << ": " << bad << " wrong values");
    }
  }
  CHECK(failed_offsets == 0);
}

TEST_CASE("a host-sharing device computes right on an imported array at every alignment, in "
          "place where the alignment allows",
          "[dlpack][imported]") {
  const char* fw = GENERATE("native", "opencl");
  std::string why;
  auto b = backend_or_skip(fw, why);
  if (!b) {
    SUCCEED(why);
    return;
  }
  bool host_memory = false;
  try {
    host_memory = dlpack_device(*b).device_type == kDLCPU;
  } catch (const error&) {
  }
  if (!host_memory) {
    SUCCEED(b->name() + " does not share host memory: its copy is kept in step instead");
    return;
  }
  // 65536 elements: CLBlast's vectorised XscalFast, which crashed PoCL on memory 16 mod 32 bytes
  // aligned when such memory was used in place (2026-12-06).
  for (const int64_t n : {int64_t{257}, int64_t{65536}}) {
    PageBuffer page(static_cast<size_t>(n) * 4 + 512);
    uint64_t copies = 0, aligned_copies = 0;
    for (size_t offset = 4; offset <= 256; offset += 4) {
      float* a = page.at(offset);
      for (int64_t i = 0; i < n; ++i)
        a[i] = static_cast<float>(i);
      Borrowed view(a, {n});
      TensorStorage x = import(view);
      blas::scal(*b, 2.0, x);
      b->synchronize();
      const float* r = static_cast<const float*>(x.host_read());
      for (int64_t i = 0; i < n; i += 97)
        REQUIRE(r[i] == 2.0f * static_cast<float>(i));
      copies += x.stats().transfers();
      if (offset % 256 == 0) aligned_copies += x.stats().transfers();
    }
    // The native plugin uses the memory in place at any address; OpenCL where the address meets
    // CL_DEVICE_MEM_BASE_ADDR_ALIGN (128 bytes on PoCL: offset 256 here), with a copy kept in
    // step elsewhere.
    if (std::string(fw) == "native") CHECK(copies == 0);
    if (b->device().kind == device_kind::cpu) CHECK(aligned_copies == 0);
  }
}

TEST_CASE("operands that must be distinct are refused when their memory overlaps",
          "[dlpack][imported][alias]") {
  std::string why;
  auto b = backend_or_skip("native", why);
  if (!b) {
    SUCCEED(why);
    return;
  }
  constexpr int64_t n = 64;
  std::vector<float> buf(static_cast<size_t>(2 * n), 1.0f);

  // Two imports of one buffer: copy and swap need distinct memory.
  Borrowed v1(buf.data(), {n}), v2(buf.data(), {n});
  TensorStorage x = import(v1), y = import(v2);
  std::string m = message_of([&] { blas::copy(*b, x, y); });
  CHECK(has(m, "blas.copy"));
  CHECK(has(m, "shares memory with y"));
  // ... while an elementwise in-place update of exactly the same elements runs.
  CHECK(message_of([&] { blas::axpy(*b, 1.0, x, y); }).empty());
  b->synchronize();
  CHECK(buf[0] == 2.0f);

  // Overlapping views, one element apart.
  Borrowed v3(buf.data(), {n}), v4(buf.data() + 1, {n});
  TensorStorage p = import(v3), q = import(v4);
  m = message_of([&] { blas::axpy(*b, 1.0, p, q); });
  CHECK(has(m, "blas.axpy"));
  CHECK(has(m, "shares memory"));
  // Views side by side do not overlap.
  Borrowed v5(buf.data() + n, {n});
  TensorStorage r = import(v5);
  CHECK(message_of([&] { blas::copy(*b, p, r); }).empty());

  // An export imported again is the same memory as the tensor it came from.
  SharedTensor<float> own({n});
  for (float& f : own.write())
    f = 3.0f;
  DLManagedTensor* out = to_dlpack(own, *b);
  TensorStorage back = from_dlpack(out);
  m = message_of([&] { blas::copy(*b, own, back); });
  CHECK(has(m, "shares memory"));

  // NN ops that gave wrong results on aliased operands (pooling gradients, convolution).
  std::vector<float> img(2 * 3 * 8 * 8, 0.5f);
  Borrowed i1(img.data(), {2, 3, 8, 8}), i2(img.data(), {2, 3, 8, 8});
  TensorStorage dy = import(i1), dx = import(i2);
  nn::PoolingParams pp;
  pp.window = {1, 1};
  m = message_of([&] { nn::pooling_avg_grad(*b, dy, dx, pp); });
  CHECK(has(m, "nn.pooling_avg_grad"));
  CHECK(has(m, "shares memory"));
  std::vector<float> w(3 * 3 * 1 * 1, 0.25f);
  Borrowed wv(w.data(), {3, 3, 1, 1});
  TensorStorage wt = import(wv);
  m = message_of([&] {
    nn::Convolution conv(*b, dy.shape(), wt.shape(), nn::ConvolutionParams{});
    conv.forward(dy, wt, dx);
  });
  CHECK(has(m, "shares memory"));
}
