// DLPack in and out of SharedTensor: zero copy (the same data pointer) both ways on native and on
// an OpenCL device that shares host memory, ops running in place on imported memory (checked
// against double-precision loops on fresh random data of awkward sizes), layouts (dense, NULL
// strides, size-1 dimensions, non-dense refused or made dense), dtypes, read-only imports,
// lifetimes (each deleter runs exactly once, after the last user; exported bytes outlive the
// tensor) and hostile DLPack tensors (refused with the reason, the caller keeps ownership).
#include "support/catch.hpp"
#include "support/errors.hpp"
#include "support/random.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/dlpack.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;

namespace {

using pcy_test_support::rng;

// Page-aligned storage, as NumPy and the CUDA allocator give for large arrays: an OpenCL device
// imports host memory in place only at its base alignment (else the plugin copies, correctly).
template <class T> struct page_allocator {
  using value_type = T;
  page_allocator() = default;
  template <class U> page_allocator(const page_allocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{4096}));
  }
  void deallocate(T* p, size_t) noexcept { ::operator delete (p, std::align_val_t{4096}); }
  template <class U> bool operator==(const page_allocator<U>&) const noexcept { return true; }
};

// A producer's tensor: owns its bytes, shape and strides; counts its deleter's calls.
template <class T> struct Producer {
  std::vector<T, page_allocator<T>> data;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
  int* deleted;

  Producer(std::vector<int64_t> shp, int* counter, DLDataType type, bool with_strides = true)
      : shape(std::move(shp)), deleted(counter) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    data.resize(static_cast<size_t>(n));
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (auto& v : data)
      v = static_cast<T>(u(rng()) * 100.0);
    strides.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;)
      strides[i - 1] = strides[i] * shape[i];
    DLTensor& t = managed.dl_tensor;
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = static_cast<int32_t>(shape.size());
    t.dtype = type;
    t.shape = shape.data();
    t.strides = with_strides ? strides.data() : nullptr;
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensor* self) {
      auto* p = static_cast<Producer*>(self->manager_ctx);
      ++*p->deleted;
      delete p;
    };
  }
};

template <class T>
Producer<T>* produce(std::vector<int64_t> shape, int* counter, bool with_strides = true) {
  return new Producer<T>(std::move(shape), counter, dtype_to_dlpack(dtype_of<T>::value),
                         with_strides);
}

std::optional<Backend> backend_or_skip(const char* name) {
  Registry& r = Registry::global();
  const Framework* f = r.find_framework(name);
  if (f == nullptr || f->devices().empty()) return std::nullopt;
  return Backend(r, name);
}

bool has(const char* text, const char* needle) {
  return std::string(text).find(needle) != std::string::npos;
}

using pcy_test_support::message_of;

// Whether the backend's memory is host memory (what DLPack exports as kDLCPU).
bool shares_host(const Backend& b) {
  try {
    return dlpack_device(b).device_type == kDLCPU;
  } catch (const error&) {
    return false;
  }
}

void release(DLManagedTensor* m) {
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

} // namespace

TEST_CASE("a host DLPack tensor is imported without a copy and released once", "[dlpack][import]") {
  int deleted = 0;
  const int64_t n = GENERATE(1, 7, 1023, 4099);
  auto* p = produce<float>({n}, &deleted, n % 2 == 1);
  float* bytes = p->data.data();
  const auto before = p->data;
  {
    TensorStorage t = from_dlpack(&p->managed);
    CHECK(t.dtype() == PCY_DTYPE_F32);
    CHECK(t.shape() == std::vector<int64_t>{n});
    CHECK(t.host_read() == bytes); // the same bytes, no copy
    CHECK(t.stats().transfers() == 0);
    // Writes through the tensor reach the producer's memory.
    static_cast<float*>(t.host(access::write))[0] = 42.0f;
    CHECK(bytes[0] == 42.0f);
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
  (void)before;
}

TEST_CASE("ops run in place on imported memory: native and a host-sharing OpenCL device",
          "[dlpack][import][blas]") {
  const char* fw = GENERATE("native", "opencl");
  auto b = backend_or_skip(fw);
  if (!b) {
    SUCCEED(std::string("skipped: no ") + fw + " device here");
    return;
  }
  if (!shares_host(*b)) {
    SUCCEED(b->name() + " does not share host memory: imports are copied there");
    return;
  }
  const int64_t n = GENERATE(1, 33, 4099);
  int dx = 0, dy = 0;
  auto* px = produce<double>({n}, &dx);
  auto* py = produce<double>({n}, &dy);
  const auto x0 = px->data, y0 = py->data;
  double* ybytes = py->data.data();
  {
    TensorStorage x = from_dlpack(&px->managed);
    TensorStorage y = from_dlpack(&py->managed);
    try {
      (void)b->route(blas::detail::axpy_key(PCY_DTYPE_F64));
    } catch (const error& e) {
      SUCCEED(b->name() + " has no f64 axpy: " + e.what());
      return;
    }
    blas::axpy(*b, 0.75, x, y);
    const auto* out = static_cast<const double*>(y.host_read());
    CHECK(out == ybytes); // the result is in the producer's memory
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = 0.75 * x0[static_cast<size_t>(i)] + y0[static_cast<size_t>(i)];
      if (std::abs(ybytes[i] - want) > 1e-12 * (1 + std::abs(want))) ++bad;
    }
    CHECK(bad == 0);
    CHECK(y.stats().aliases >= 1); // the device aliased the producer's bytes
    CHECK(y.stats().host_to_device == 0);
    CHECK(y.stats().device_to_host == 0);
  }
  CHECK(dx == 1);
  CHECK(dy == 1);
}

TEST_CASE("export: the same bytes, described right, alive after the tensor is gone",
          "[dlpack][export]") {
  const char* fw = GENERATE("native", "opencl");
  auto b = backend_or_skip(fw);
  if (!b) {
    SUCCEED(std::string("skipped: no ") + fw + " device here");
    return;
  }
  const int64_t rows = 37, cols = 5;
  std::vector<float> ref;
  DLManagedTensor* m = nullptr;
  {
    SharedTensor<float> t({rows, cols});
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& v : t.write_only())
      v = u(rng());
    blas::scal(*b, 2.0, t); // the latest data is on the backend
    ref.assign(t.read().begin(), t.read().end());
    if (!shares_host(*b)) {
      CHECK_THROWS_AS(to_dlpack(t, *b), error);
      m = to_dlpack(t, *b, {.through_host = true});
    } else {
      m = to_dlpack(t, *b);
    }
    REQUIRE(m != nullptr);
    const DLTensor& d = m->dl_tensor;
    CHECK(d.device.device_type == kDLCPU);
    CHECK(d.ndim == 2);
    CHECK(d.shape[0] == rows);
    CHECK(d.shape[1] == cols);
    CHECK(d.strides[0] == cols);
    CHECK(d.strides[1] == 1);
    CHECK(d.dtype.code == kDLFloat);
    CHECK(d.dtype.bits == 32);
    CHECK(d.dtype.lanes == 1);
    CHECK(d.byte_offset == 0);
    // The consumer writes; the tensor's next access sees it.
    static_cast<float*>(d.data)[3] = -7.0f;
    CHECK(t.read()[3] == -7.0f);
    ref[3] = -7.0f;
    // Export again: the same pointer.
    DLManagedTensor* again = to_dlpack(t, *b, {.through_host = true});
    CHECK(again->dl_tensor.data == d.data);
    release(again);
  } // the tensor is gone: the export still holds the bytes (ASan checks the reads)
  const auto* data = static_cast<const float*>(m->dl_tensor.data);
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    bad += data[i] != ref[i];
  CHECK(bad == 0);
  release(m);
}

TEST_CASE("import then export gives the producer's pointer back", "[dlpack][roundtrip]") {
  int deleted = 0;
  auto* p = produce<int32_t>({3, 4, 5}, &deleted);
  void* bytes = p->data.data();
  TensorStorage t = from_dlpack(&p->managed);
  DLManagedTensor* out = to_dlpack_host(t);
  CHECK(out->dl_tensor.data == bytes);
  CHECK(out->dl_tensor.dtype.code == kDLInt);
  CHECK(out->dl_tensor.dtype.bits == 32);
  t.resize({2}); // the tensor lets go; the export keeps the producer's tensor
  CHECK(deleted == 0);
  CHECK(static_cast<int32_t*>(out->dl_tensor.data)[59] == static_cast<int32_t*>(bytes)[59]);
  release(out);
  CHECK(deleted == 1);
}

TEST_CASE("10,000 round trips release everything", "[dlpack][lifetime]") {
  int deleted = 0;
  for (int i = 0; i < 10000; ++i) {
    auto* p = produce<uint8_t>({static_cast<int64_t>(i % 97)}, &deleted);
    TensorStorage t = from_dlpack(&p->managed);
    DLManagedTensor* out = to_dlpack_host(t);
    release(out);
  }
  CHECK(deleted == 10000);
}

TEST_CASE("layouts: size-1 dimensions and NULL strides are dense; others refused or copied",
          "[dlpack][layout]") {
  int deleted = 0;
  {
    auto* p = produce<float>({4, 1, 6}, &deleted);
    p->strides[1] = 12345; // a size-1 dimension's stride means nothing
    TensorStorage t = from_dlpack(&p->managed);
    CHECK(t.host_read() == p->data.data());
  }
  CHECK(deleted == 1);

  // A transposed view: strides (1, rows).
  auto* q = produce<double>({5, 3}, &deleted);
  q->shape = {3, 5};
  q->strides = {1, 3};
  q->managed.dl_tensor.shape = q->shape.data();
  q->managed.dl_tensor.strides = q->strides.data();
  try {
    (void)from_dlpack(&q->managed);
    FAIL("non-dense strides were accepted");
  } catch (const error& e) {
    CHECK(e.code() == errc::invalid_argument);
    CHECK(has(e.what(), "strides [1, 3]"));
    CHECK(has(e.what(), "make_dense"));
  }
  CHECK(deleted == 1); // refused: still the caller's
  const auto src = q->data;
  TensorStorage t = from_dlpack(&q->managed, nullptr, {.make_dense = true});
  CHECK(deleted == 2); // copied, and the producer's tensor released at once
  const auto* d = static_cast<const double*>(t.host_read());
  int bad = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j)
      bad += d[i * 5 + j] != src[static_cast<size_t>(j * 3 + i)];
  CHECK(bad == 0);
}

TEST_CASE("hostile DLPack tensors are refused and stay the caller's", "[dlpack][hostile]") {
  int deleted = 0;
  auto* p = produce<float>({8}, &deleted);
  DLTensor& d = p->managed.dl_tensor;
  auto refused = [&](errc code, const char* needle) {
    try {
      (void)from_dlpack(&p->managed);
      FAIL("accepted");
    } catch (const error& e) {
      CHECK(e.code() == code);
      CHECK(has(e.what(), needle));
    }
    CHECK(deleted == 0);
  };
  CHECK_THROWS_AS(from_dlpack(static_cast<DLManagedTensor*>(nullptr)), error);
  d.dtype = {kDLFloat, 8, 1};
  refused(errc::unsupported, "float8");
  d.dtype = {kDLFloat, 32, 4};
  refused(errc::unsupported, "float32x4");
  d.dtype = {kDLFloat, 32, 1};
  d.device = {kDLOpenCL, 0};
  refused(errc::unsupported, "kDLOpenCL");
  d.device = {kDLCPU, 0};
  d.ndim = 65;
  refused(errc::invalid_argument, "ndim 65");
  d.ndim = -1;
  refused(errc::invalid_argument, "ndim -1");
  d.ndim = 1;
  p->shape[0] = -3;
  refused(errc::invalid_argument, "negative dimension");
  p->shape = {int64_t{1} << 40, int64_t{1} << 40};
  d.shape = p->shape.data();
  d.ndim = 2;
  d.strides = nullptr;
  refused(errc::invalid_argument, "63 bits");
  p->shape = {8};
  d.shape = p->shape.data();
  d.ndim = 1;
  d.byte_offset = 2;
  refused(errc::invalid_argument, "aligned");
  d.byte_offset = 0;
  void* saved = d.data;
  d.data = nullptr;
  refused(errc::invalid_argument, "null data");
  d.data = saved;
  // Still intact: imported fine now.
  { TensorStorage t = from_dlpack(&p->managed); }
  CHECK(deleted == 1);
}

TEST_CASE("a byte offset is honoured", "[dlpack][import]") {
  int deleted = 0;
  auto* p = produce<int64_t>({10}, &deleted);
  p->shape = {7};
  p->managed.dl_tensor.byte_offset = 3 * sizeof(int64_t);
  TensorStorage t = from_dlpack(&p->managed);
  const auto* v = static_cast<const int64_t*>(t.host_read());
  CHECK(v == p->data.data() + 3);
  CHECK(v[6] == p->data[9]);
}

TEST_CASE("a read-only import refuses writes and serves reads", "[dlpack][readonly]") {
  int deleted = 0;
  auto* p = produce<float>({100}, &deleted);
  const auto before = p->data;
  TensorStorage x = from_dlpack(&p->managed, nullptr, {.read_only = true});
  CHECK(message_of([&] { (void)x.host(access::write); }).find("read-only") != std::string::npos);
  CHECK_THROWS_AS(x.host(access::write_only), error);
  if (auto b = backend_or_skip("native")) {
    CHECK_THROWS_AS(blas::scal(*b, 2.0, x), error);
    SharedTensor<float> y({100});
    for (auto& v : y.write_only())
      v = 1.0f;
    blas::axpy(*b, 2.0, x, y); // read: fine
    int bad = 0;
    for (size_t i = 0; i < 100; ++i)
      bad += y.read()[i] != 2.0f * before[i] + 1.0f;
    CHECK(bad == 0);
  }
  CHECK(p->data == before);
  CHECK(static_cast<const float*>(x.host_read()) == p->data.data());
}

TEST_CASE("dtypes map both ways", "[dlpack][dtype]") {
  for (pcy_dtype t : {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_F16, PCY_DTYPE_BF16, PCY_DTYPE_I32,
                      PCY_DTYPE_I64, PCY_DTYPE_U8})
    CHECK(dtype_from_dlpack(dtype_to_dlpack(t)) == t);
  CHECK(dtype_to_dlpack(PCY_DTYPE_BF16).code == kDLBfloat);
  CHECK_THROWS_AS(dtype_from_dlpack({kDLUInt, 16, 1}), error);
}

TEST_CASE("the DLPack device of each backend", "[dlpack][device]") {
  if (auto b = backend_or_skip("native")) CHECK(dlpack_device(*b).device_type == kDLCPU);
  if (auto b = backend_or_skip("opencl")) {
    const std::string why = message_of([&] { (void)dlpack_device(*b); });
    if (why.empty())
      CHECK(dlpack_device(*b).device_type == kDLCPU);
    else
      CHECK(why.find("through_host") != std::string::npos);
  }
  if (auto b = backend_or_skip("cuda")) {
    CHECK(dlpack_device(*b).device_type == kDLCUDA);
  }
}
