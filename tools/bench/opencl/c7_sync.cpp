// C7: host <-> OpenCL device sync on PoCL, 4 KiB .. 256 MiB. One round trip = the host writes,
// the device takes the data, the device writes, the host reads it back.
//  - SharedTensor through the core (aliased on a host-unified device: 0 bytes copied, checked
//    with the transfer counters) against memcpy there and back, and raw clEnqueueWriteBuffer +
//    clEnqueueReadBuffer.
//  - The plugin's copy path (memory_write + memory_read of a device buffer), for devices that do
//    not share memory, against raw write+read and memcpy. Target: >= 0.9x memcpy.
#include "common.hpp"

#include <cstring>
#include <random>

using namespace opencl_bench;

int main() {
  plugin p;
  const auto& cl = raw();
  parenchyma::Backend ocl(*p.registry, "opencl");
  bench::suite s("c7_opencl_sync");
  p.describe(s);
  std::mt19937 rng(12345);

  bool aliased_everywhere = true;
  for (size_t bytes :
       {size_t(4) << 10, size_t(64) << 10, size_t(1) << 20, size_t(16) << 20, size_t(256) << 20}) {
    const size_t n = bytes / sizeof(float);
    const std::string size = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MiB"
                                                : std::to_string(bytes >> 10) + " KiB";
    const long inner = bytes <= (64 << 10) ? 200 : bytes <= (1 << 20) ? 20 : 1;
    const int reps = bytes >= (256 << 20) ? 15 : 21;

    std::vector<float> src(n), dst(n), dev(n);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& v : src)
      v = d(rng);
    std::memcpy(dev.data(), src.data(), bytes);
    std::memcpy(dst.data(), src.data(), bytes);

    // SharedTensor round trip.
    parenchyma::SharedTensor<float> t({static_cast<int64_t>(n)});
    t.storage().reset_stats(); // count the first moves too: they are the aliases
    {
      auto w = t.write_only();
      std::memcpy(w.data(), src.data(), bytes);
    }
    (void)t.write(ocl);
    (void)t.read();
    auto ours_tensor = [&] {
      (void)t.write();    // host writes
      (void)t.write(ocl); // the device takes it and writes
      (void)t.read();     // the host reads it back
    };
    auto memcpy_rt = [&] {
      std::memcpy(dev.data(), src.data(), bytes);
      std::memcpy(dst.data(), dev.data(), bytes);
    };
    s.compare("tensor round trip " + size + " vs memcpy", memcpy_rt, ours_tensor,
              {.reps = reps, .inner = inner, .bytes = 2.0 * double(bytes)}, "memcpy", "tensor");
    const auto& st = t.stats();
    const uint64_t moved = st.bytes_to_device + st.bytes_to_host + st.bytes_device_copy;
    std::printf("  tensor %s: %llu bytes copied in %llu transfers, %llu aliases\n", size.c_str(),
                static_cast<unsigned long long>(moved),
                static_cast<unsigned long long>(st.transfers()),
                static_cast<unsigned long long>(st.aliases));
    if (moved != 0) aliased_everywhere = false;

    // The copy path: a device buffer written and read back through the plugin.
    pcy_memory_alloc_args ma{};
    ma.struct_size = sizeof ma;
    ma.context = p.ctx.get();
    ma.bytes = bytes;
    host::check(p.api->memory_alloc(&ma));
    host::memory m(ma.memory, p.api->memory_free);
    cl_mem mem = static_cast<cl_mem>(p.native(PCY_NATIVE_MEMORY, m.get()));
    pcy_memory_transfer_args tw{};
    tw.struct_size = sizeof tw;
    tw.queue = p.queue.get();
    tw.memory = m.get();
    tw.host_pointer = src.data();
    tw.bytes = bytes;
    tw.blocking = true;
    pcy_memory_transfer_args tr = tw;
    tr.host_pointer = dst.data();
    auto ours_copy = [&] {
      host::check(p.api->memory_write(&tw));
      host::check(p.api->memory_read(&tr));
    };
    auto raw_copy = [&] {
      cl.clEnqueueWriteBuffer(p.cl_queue, mem, CL_TRUE, 0, bytes, src.data(), 0, nullptr, nullptr);
      cl.clEnqueueReadBuffer(p.cl_queue, mem, CL_TRUE, 0, bytes, dst.data(), 0, nullptr, nullptr);
    };
    s.compare("tensor round trip " + size + " vs raw write+read", raw_copy, ours_tensor,
              {.reps = reps, .inner = inner, .bytes = 2.0 * double(bytes)}, "raw w+r", "tensor");
    s.compare("copy path " + size + " vs raw write+read", raw_copy, ours_copy,
              {.reps = reps, .inner = inner, .bytes = 2.0 * double(bytes)}, "raw w+r", "plugin");
    s.compare("copy path " + size + " vs memcpy", memcpy_rt, ours_copy,
              {.reps = reps, .inner = inner, .bytes = 2.0 * double(bytes)}, "memcpy", "plugin");
    if (std::memcmp(dst.data(), src.data(), bytes) != 0) {
      std::fprintf(stderr, "copy path returned wrong bytes at %s\n", size.c_str());
      return 1;
    }
  }
  s.meta("tensor_bytes_copied", aliased_everywhere ? "0 at every size" : "non-zero (not aliased)");
  s.write();
  return 0;
}
