// G5/G6: synchronous host<->device transfers, 4 KiB ... 1 GiB, through the plugin's
// memory_write/memory_read (blocking) against raw cuMemcpyHtoDAsync/DtoHAsync + stream sync on
// the same stream: from pinned host memory (direct DMA both sides) and from pageable host
// memory (ours: the pinned staging pool; raw: the driver's own pageable path).
//   bench_cuda_transfer [max_bytes]     (default 1 GiB)
#include "common.hpp"

#include "harness.hpp"

using namespace cuda_bench;

int main(int argc, char** argv) {
  try {
    const uint64_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1ull << 30);
    rig r("/tmp/pcy-bench-cuda-cache");
    bench::suite s("cuda_transfer");
    s.meta("device", r.device_name);
    s.meta("driver", r.driver_version);
    for (const auto& p : r.fw.properties(0))
      if (std::string(p.key).rfind("staging_", 0) == 0) s.meta(p.key, std::to_string(p.i));
    const auto& d = r.drv;
    const auto& api = d.api();

    auto dev = host::alloc(r.fw, r.ctx.get(), 0, max_bytes);
    pcy_native_handle_args h{};
    h.struct_size = sizeof h;
    h.object = PCY_NATIVE_MEMORY;
    h.memory = dev.get();
    host::check(r.api->native_handle(&h));
    const CUdeviceptr dptr = reinterpret_cast<CUdeviceptr>(h.handle);

    void* pinned = nullptr;
    cu(d, api.cuMemHostAlloc(&pinned, max_bytes, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    std::vector<unsigned char> pageable = random_bytes(max_bytes);
    std::memcpy(pinned, pageable.data(), max_bytes);
    // Correctness first: a staged round trip of an odd size returns the bytes.
    {
      const uint64_t n = std::min<uint64_t>(max_bytes, (48ull << 20) + 5);
      std::vector<unsigned char> back(n);
      host::write(r.fw, r.q.get(), dev.get(), 0, pageable.data(), n);
      host::read(r.fw, r.q.get(), dev.get(), 0, back.data(), n);
      if (std::memcmp(back.data(), pageable.data(), n) != 0)
        throw std::runtime_error("staged round trip returned other bytes");
    }

    auto sync = [&] { cu(d, api.cuStreamSynchronize(r.stream), "cuStreamSynchronize"); };
    for (uint64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      bench::options o;
      o.reps = bytes >= (256ull << 20) ? 15 : 21;
      o.warmup = 2;
      o.bytes = static_cast<double>(bytes);
      const long inner = bytes <= (1 << 20) ? 50 : 1;
      auto timed = [&](auto f) {
        return [&, f]() {
          const double t0 = now_ns();
          for (long i = 0; i < inner; ++i)
            f();
          return (now_ns() - t0) / static_cast<double>(inner);
        };
      };
      const std::string size = pc::pretty_bytes(bytes);
      for (int pinned_host = 1; pinned_host >= 0; --pinned_host) {
        void* src = pinned_host ? pinned : static_cast<void*>(pageable.data());
        const char* kind = pinned_host ? "pinned" : "pageable";
        s.compare_sampled(
            std::string("G5 H2D ") + kind + " " + size, timed([&, src] {
              cu(d, api.cuMemcpyHtoDAsync(dptr, src, bytes, r.stream), "cuMemcpyHtoDAsync");
              sync();
            }),
            timed([&, src] { host::write(r.fw, r.q.get(), dev.get(), 0, src, bytes, true); }), o,
            "raw cuMemcpy", "parenchyma");
        s.compare_sampled(
            std::string("G6 D2H ") + kind + " " + size, timed([&, src] {
              cu(d, api.cuMemcpyDtoHAsync(src, dptr, bytes, r.stream), "cuMemcpyDtoHAsync");
              sync();
            }),
            timed([&, src] { host::read(r.fw, r.q.get(), dev.get(), 0, src, bytes, true); }), o,
            "raw cuMemcpy", "parenchyma");
      }
    }
    api.cuMemFreeHost(pinned);
    s.write();
    return 0;
  } catch (const std::exception& e) {
    std::printf("SKIPPED: bench_cuda_transfer: %s\n", e.what());
    return 77;
  }
}
