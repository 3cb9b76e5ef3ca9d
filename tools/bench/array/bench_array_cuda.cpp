// Array extension on the GPU (docs/array.md "Measured"): each case against the hardware's limit
// in the same run — a device copy (cuMemcpyDtoDAsync) moving the same bytes, or a fill
// (cuMemsetD32Async) writing them — on the backend's stream, timed with events, interleaved.
//   A1  a fused chain of 8 elementwise ops on three n-element f32 inputs (reads 3n, writes n)
//   A2  sum, max, argmax, var over the last and over the first axis of rows x cols f32 (reads
//       the input once)
//   A3  random normal fill of n f32 (writes n) against a fill of the same bytes
//   A4  the per-call host cost of a small elementwise op against BLAS axpy (n = 1, no sync)
//   bench_array_cuda [--quick] [backend]   (default cuda; --quick: small sizes, CI's smoke run)
#include "harness.hpp"

#include <parenchyma/array.hpp>
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace parenchyma;
namespace pa = parenchyma::array;

namespace {

void cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    throw std::runtime_error(std::string(what) + " failed: " + (s ? s : "?"));
  }
}

struct gpu {
  const Backend& b;
  CUstream stream = nullptr;
  CUevent e0 = nullptr, e1 = nullptr;
  CUdeviceptr sa = 0, sb = 0;
  size_t scratch = 0;
  bench::suite s{"a_cuda_array"};

  gpu(const Backend& backend, size_t bytes) : b(backend), scratch(bytes) {
    stream = static_cast<CUstream>(b.native(PCY_NATIVE_QUEUE));
    cu(cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    cu(cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    cu(cuMemAlloc(&sa, scratch), "cuMemAlloc");
    cu(cuMemAlloc(&sb, scratch), "cuMemAlloc");
    cu(cuMemsetD8Async(sa, 1, scratch, stream), "cuMemsetD8Async");
  }
  ~gpu() {
    cuMemFree(sa);
    cuMemFree(sb);
    cuEventDestroy(e0);
    cuEventDestroy(e1);
  }
  double time(const std::function<void()>& f, int inner) {
    cu(cuEventRecord(e0, stream), "cuEventRecord");
    for (int i = 0; i < inner; ++i)
      f();
    cu(cuEventRecord(e1, stream), "cuEventRecord");
    cu(cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    cu(cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    return double(ms) * 1e6 / inner;
  }
  // A copy moving `bytes` in all (half read, half written).
  std::function<void()> copy_of(double bytes) {
    const size_t n = std::min(static_cast<size_t>(bytes / 2), scratch);
    return [this, n] { cu(cuMemcpyDtoDAsync(sb, sa, n, stream), "copy"); };
  }
  std::function<void()> fill_of(double bytes) {
    const size_t n = std::min(static_cast<size_t>(bytes), scratch) / 4;
    return [this, n] { cu(cuMemsetD32Async(sb, 0x3f800000u, n, stream), "fill"); };
  }
  void pair(const std::string& name, const char* peer_label, const std::function<void()>& peer,
            const std::function<void()>& ours, double bytes) {
    try {
      peer();
      ours();
      bench::options o{.reps = 15, .inner = 1, .warmup = 2, .bytes = bytes};
      s.compare_sampled(
          name, [&] { return time(peer, 3); }, [&] { return time(ours, 3); }, o, peer_label);
    } catch (const std::exception& e) {
      std::printf("%-44s unavailable: %s\n", name.c_str(), e.what());
    }
  }
};

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string request = "cuda";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else
      request = argv[i];
  }
  try {
    Backend b(request);
    const int64_t n = quick ? (int64_t{1} << 20) : (int64_t{64} << 20);
    const int64_t rows = quick ? 256 : 4096, cols = quick ? 1024 : 16384;
    gpu g(b, static_cast<size_t>(n) * 4 * 2 + 64);
    g.s.meta("backend", b.name());
    g.s.meta("device", b.device().name);

    // A1: 8 operations on three inputs, one program.
    pa::Array a = pa::random::uniform(b, {n}, 1, 0, -1, 1);
    pa::Array c = pa::random::uniform(b, {n}, 2, 0, -1, 1);
    pa::Array d = pa::random::uniform(b, {n}, 3, 0, 0.5, 2);
    pa::Array y = pa::empty(b, {n});
    auto chain = [&] { y.assign(pa::sin(a * c + d) * 0.5f - pa::abs(a) / d + c * c); };
    g.pair("A1 fused chain of 8 ops, 3 x " + std::to_string(n) + " f32", "copy",
           g.copy_of(4.0 * 4 * n), chain, 4.0 * 4 * n);

    // A2: reductions over the last and the first axis.
    pa::Array x = pa::random::normal(b, {rows, cols}, 4);
    const double in_bytes = 4.0 * static_cast<double>(rows * cols);
    const std::string shape = std::to_string(rows) + "x" + std::to_string(cols);
    for (int64_t axis : {int64_t{1}, int64_t{0}}) {
      const std::string ax = axis == 1 ? "last" : "first";
      const int64_t ax_[] = {axis};
      g.pair(
          "A2 sum over the " + ax + " axis " + shape, "copy", g.copy_of(2 * in_bytes),
          [&] { (void)pa::sum(x, ax_); }, in_bytes);
      g.pair(
          "A2 max over the " + ax + " axis " + shape, "copy", g.copy_of(2 * in_bytes),
          [&] { (void)pa::max(x, ax_); }, in_bytes);
      g.pair(
          "A2 argmax over the " + ax + " axis " + shape, "copy", g.copy_of(2 * in_bytes),
          [&] { (void)pa::argmax(x, axis); }, in_bytes);
      g.pair(
          "A2 var over the " + ax + " axis " + shape, "copy", g.copy_of(2 * in_bytes),
          [&] { (void)pa::var(x, ax_); }, in_bytes);
    }

    // A3: a normal fill (into an existing tensor, as x.normal_()) against a fill of the same
    // bytes.
    pa::Array r = pa::empty(b, {n});
    pa::random::Generator gen(9);
    g.pair(
        "A3 random normal fill of " + std::to_string(n) + " f32", "memset", g.fill_of(4.0 * n),
        [&] { gen.fill_normal(r); }, 4.0 * n);
    // The same fill with uniform numbers (the generator's share of A3's time).
    g.pair(
        "A3' random uniform fill of " + std::to_string(n) + " f32", "memset", g.fill_of(4.0 * n),
        [&] { gen.fill_uniform(r); }, 4.0 * n);
    // Through assign: a new tensor drawn, then copied.
    uint64_t off = 0;
    g.pair(
        "A3 random normal draw assigned, " + std::to_string(n) + " f32", "memset",
        g.fill_of(4.0 * n),
        [&] {
          r.assign(pa::random::normal(b, {n}, 9, off));
          off += static_cast<uint64_t>(n);
        },
        4.0 * n);
    // A direct draw (no assign: the draw's own tensor).
    g.pair(
        "A3 random normal draw of " + std::to_string(n) + " f32", "memset", g.fill_of(4.0 * n),
        [&] { (void)pa::random::normal(b, {n}, 9, 0); }, 4.0 * n);

    // A4: host cost per call of a small op (n = 1), against blas::axpy, no synchronisation.
    pa::Array s1 = pa::ones(b, {1}), s2 = pa::ones(b, {1});
    SharedTensor<float> bx({1}), by({1});
    bx.write_only()[0] = 1;
    by.write_only()[0] = 1;
    for (int i = 0; i < 3; ++i) {
      blas::axpy(b, 1.0, bx, by);
      s2.assign(s1 * 2.0f + 1.0f);
    }
    b.synchronize();
    g.s.compare(
        "A4 host cost: y = x * 2 + 1 (n = 1) vs axpy", [&] { blas::axpy(b, 1.0, bx, by); },
        [&] { s2.assign(s1 * 2.0f + 1.0f); }, {.reps = 21, .inner = 2000});
    b.synchronize();
    g.s.write();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_array_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
