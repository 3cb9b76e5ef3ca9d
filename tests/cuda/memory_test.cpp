// CUDA plugin on a GPU: devices, native handles, transfers of awkward sizes, the pinned staging
// pool (sizes that are not chunk multiples), copies, fills, pinned memory with export/import
// aliasing, out-of-memory recovery and events.
#include "fixture.hpp"

#include <algorithm>
#include <regex>

using namespace cuda_test;

namespace {
void write(gpu& g, pcy_memory m, uint64_t off, const void* p, uint64_t n, bool blocking = true) {
  host::write(g.fw, g.q.get(), m, off, p, n, blocking);
}
void read(gpu& g, pcy_memory m, uint64_t off, void* p, uint64_t n) {
  host::read(g.fw, g.q.get(), m, off, p, n, true);
}
} // namespace

TEST_CASE("device properties describe the GPU", "[cuda][gpu]") {
  auto& g = shared_gpu();
  auto props = g.fw.properties(0);
  auto str = [&](const char* k) {
    auto* p = find_property(props, k);
    REQUIRE(p != nullptr);
    REQUIRE(p->type == PCY_VALUE_STRING);
    return std::string(p->s);
  };
  auto num = [&](const char* k) {
    auto* p = find_property(props, k);
    REQUIRE(p != nullptr);
    return p->i;
  };
  CHECK(!str(PCY_PROP_NAME).empty());
  CHECK(str(PCY_PROP_VENDOR) == "NVIDIA");
  CHECK(num(PCY_PROP_KIND) == PCY_DEVICE_GPU);
  CHECK(std::regex_match(str("compute_capability"), std::regex("[0-9]+\\.[0-9]")));
  CHECK(str("architecture").rfind("sm_", 0) == 0);
  CHECK(num(PCY_PROP_COMPUTE_UNITS) > 0);
  CHECK(num(PCY_PROP_GLOBAL_MEMORY) > (int64_t(1) << 30));
  CHECK(num(PCY_PROP_LOCAL_MEMORY) >= 48 * 1024);
  CHECK(num(PCY_PROP_MAX_WORK_GROUP) >= 1024);
  CHECK(std::regex_match(str(PCY_PROP_UUID), std::regex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-"
                                                        "[0-9a-f]{4}-[0-9a-f]{12}")));
  CHECK(std::regex_match(str("pci_bus_id"),
                         std::regex("[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\\.[0-9]")));
  CHECK(str(PCY_PROP_DRIVER_VERSION).rfind("CUDA ", 0) == 0);
  CHECK(num(PCY_PROP_FP64) == 1);
  WARN(str(PCY_PROP_NAME) << " sm " << str("compute_capability") << " "
                          << num(PCY_PROP_COMPUTE_UNITS) << " SMs, " << str(PCY_PROP_DRIVER_VERSION)
                          << ", " << str("pci_bus_id"));
}

TEST_CASE("native handles are the driver's own objects", "[cuda][gpu]") {
  auto& g = shared_gpu();
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.context = g.ctx.get();
  a.object = PCY_NATIVE_CONTEXT;
  host::check(g.api().native_handle(&a));
  CHECK(a.handle != nullptr);
  a.object = PCY_NATIVE_DEVICE;
  a.device = 0;
  host::check(g.api().native_handle(&a)); // CUdevice 0 is a valid answer although NULL
  CHECK(reinterpret_cast<intptr_t>(a.handle) == g.int_property("device_ordinal"));
  a.object = PCY_NATIVE_QUEUE;
  a.queue = g.q.get();
  host::check(g.api().native_handle(&a));
  CHECK(a.handle != nullptr);
  auto m = g.alloc(64);
  a.object = PCY_NATIVE_MEMORY;
  a.memory = m.get();
  host::check(g.api().native_handle(&a));
  CHECK(a.handle != nullptr);
  a.object = PCY_NATIVE_PLATFORM;
  CHECK(status_of(g.api().native_handle(&a)) == PCY_ERR_UNSUPPORTED);
}

TEST_CASE("write then read returns the bytes, for awkward sizes and offsets", "[cuda][gpu]") {
  auto& g = shared_gpu();
  for (uint64_t n : {uint64_t(1), uint64_t(3), uint64_t(4097), uint64_t(65537),
                     uint64_t((1 << 20) + 3), uint64_t((33 << 20) + 5)}) {
    for (uint64_t off : {uint64_t(0), uint64_t(7)}) {
      CAPTURE(n, off);
      auto m = g.alloc(n + off + 13);
      auto src = random_bytes(n);
      std::vector<unsigned char> back(n);
      write(g, m.get(), off, src.data(), n);
      read(g, m.get(), off, back.data(), n);
      CHECK(back == src);
    }
  }
}

TEST_CASE("non-blocking writes are ordered on the queue", "[cuda][gpu]") {
  auto& g = shared_gpu();
  const uint64_t n = (5 << 20) + 17;
  auto m = g.alloc(n);
  auto a = random_bytes(n), b = random_bytes(n / 2);
  write(g, m.get(), 0, a.data(), n, false);
  write(g, m.get(), 3, b.data(), b.size(), false);
  host::finish(g.fw, g.q.get());
  std::copy(b.begin(), b.end(), a.begin() + 3);
  std::vector<unsigned char> back(n);
  read(g, m.get(), 0, back.data(), n);
  CHECK(back == a);
}

TEST_CASE("out-of-range transfers are refused before reaching the driver", "[cuda][gpu]") {
  auto& g = shared_gpu();
  auto m = g.alloc(100);
  std::vector<unsigned char> buf(200);
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = g.q.get();
  a.memory = m.get();
  a.offset = 50;
  a.host_pointer = buf.data();
  a.bytes = 51;
  a.blocking = true;
  std::string msg;
  CHECK(status_of(g.api().memory_write(&a), &msg) == PCY_ERR_INVALID_ARGUMENT);
  CHECK(msg.find("runs past the end") != std::string::npos);
  CHECK(status_of(g.api().memory_read(&a)) == PCY_ERR_INVALID_ARGUMENT);
}

TEST_CASE("device copies move bytes between and within allocations", "[cuda][gpu]") {
  auto& g = shared_gpu();
  const uint64_t n = (3 << 20) + 11;
  auto a = g.alloc(n), b = g.alloc(n + 100);
  auto src = random_bytes(n);
  write(g, a.get(), 0, src.data(), n);
  host::copy(g.fw, g.q.get(), a.get(), 5, b.get(), 99, n - 5);
  std::vector<unsigned char> back(n - 5);
  read(g, b.get(), 99, back.data(), n - 5);
  CHECK(std::equal(back.begin(), back.end(), src.begin() + 5));

  // Another context on the same device shares the primary context: copies work across them.
  const uint32_t dev = 0;
  auto ctx2 = host::make_context(g.fw, std::span<const uint32_t>(&dev, 1));
  auto q2 = host::make_queue(g.fw, ctx2.get(), 0);
  auto c = host::alloc(g.fw, ctx2.get(), 0, n);
  host::copy(g.fw, q2.get(), a.get(), 0, c.get(), 0, n);
  std::vector<unsigned char> back2(n);
  host::read(g.fw, q2.get(), c.get(), 0, back2.data(), n);
  CHECK(back2 == src);
}

TEST_CASE("fills of every pattern size, aligned and not", "[cuda][gpu]") {
  auto& g = shared_gpu();
  for (uint32_t ps : {1u, 2u, 4u, 8u, 16u}) {
    for (uint64_t off : {uint64_t(0), uint64_t(ps == 1 ? 3 : ps), uint64_t(1), uint64_t(6)}) {
      const uint64_t count = 100003;
      const uint64_t bytes = count * ps;
      CAPTURE(ps, off);
      auto pattern = random_bytes(ps);
      auto m = g.alloc(bytes + off + 32);
      auto before = random_bytes(bytes + off + 32);
      write(g, m.get(), 0, before.data(), before.size());
      host::fill(g.fw, g.q.get(), m.get(), off, bytes, pattern.data(), ps);
      std::vector<unsigned char> back(before.size());
      read(g, m.get(), 0, back.data(), back.size());
      bool ok = std::equal(back.begin(), back.begin() + off, before.begin());
      for (uint64_t i = 0; ok && i < bytes; ++i)
        ok = back[off + i] == pattern[i % ps];
      ok = ok && std::equal(back.begin() + off + bytes, back.end(), before.begin() + off + bytes);
      CHECK(ok);
    }
  }
  // A pattern whose words repeat takes the 32-bit path; a large 8-byte fill too.
  auto m = g.alloc(64 << 20);
  const double value = 3.25;
  host::fill(g.fw, g.q.get(), m.get(), 0, 64 << 20, &value, 8);
  std::vector<double> back((64 << 20) / 8);
  read(g, m.get(), 0, back.data(), 64 << 20);
  CHECK(std::all_of(back.begin(), back.end(), [&](double x) { return x == value; }));
}

TEST_CASE("the staging pool is correct for sizes that are not chunk multiples",
          "[cuda][gpu][staging]") {
  // A separate instance whose pool stages everything pageable, with small chunks.
  const uint64_t chunk = 65536;
  scoped_env e1("PARENCHYMA_CUDA_STAGING_THRESHOLD", "0");
  scoped_env e2("PARENCHYMA_CUDA_STAGING_CHUNK", std::to_string(chunk));
  scoped_env e3("PARENCHYMA_CUDA_STAGING_CHUNKS", "3");
  scoped_env e4("PARENCHYMA_CUDA_STAGING_THREADS", "3");
  gpu g;
  REQUIRE(g.int_property("staging_chunk") == int64_t(chunk));
  REQUIRE(g.int_property("staging_threshold") == 0);
  for (uint64_t n : {uint64_t(1), uint64_t(4097), chunk - 1, chunk, chunk + 1, 3 * chunk - 7,
                     3 * chunk, 3 * chunk + 1, 10 * chunk + 123, uint64_t(9 << 20) + 5}) {
    CAPTURE(n);
    g.h.log.clear();
    auto m = g.alloc(n + 9);
    auto src = random_bytes(n);
    std::vector<unsigned char> back(n);
    write(g, m.get(), 9, src.data(), n);
    read(g, m.get(), 9, back.data(), n);
    CHECK(back == src);
    const uint64_t chunks = (n + chunk - 1) / chunk;
    const std::string tail = " bytes in " + std::to_string(chunks) + " chunks";
    CHECK(g.h.log.count("staged write of " + std::to_string(n) + tail) == 1);
    CHECK(g.h.log.count("staged read of " + std::to_string(n) + tail) == 1);
  }
  // Back-to-back non-blocking writes reuse the chunks while earlier DMAs may still run.
  const uint64_t n = 7 * chunk + 3;
  auto m = g.alloc(4 * n);
  std::vector<std::vector<unsigned char>> parts;
  for (int i = 0; i < 4; ++i) {
    parts.push_back(random_bytes(n));
    write(g, m.get(), i * n, parts.back().data(), n, false);
  }
  host::finish(g.fw, g.q.get());
  for (int i = 0; i < 4; ++i) {
    std::vector<unsigned char> back(n);
    read(g, m.get(), i * n, back.data(), n);
    CHECK(back == parts[i]);
  }
}

TEST_CASE("large pageable transfers take the staging pool by default", "[cuda][gpu][staging]") {
  auto& g = shared_gpu();
  const uint64_t chunk = static_cast<uint64_t>(g.int_property("staging_chunk"));
  const uint64_t n = 5 * chunk + 4099;
  g.h.log.clear();
  auto m = g.alloc(n);
  auto src = random_bytes(n);
  std::vector<unsigned char> back(n);
  write(g, m.get(), 0, src.data(), n);
  read(g, m.get(), 0, back.data(), n);
  CHECK(back == src);
  CHECK(g.h.log.count("staged write of " + std::to_string(n)) == 1);
  CHECK(g.h.log.count("staged read of " + std::to_string(n)) == 1);

  // Mid sizes: staged in pieces smaller than a chunk (reads from 256 KiB, writes from 4 MiB).
  const uint64_t write_threshold = uint64_t(g.int_property("staging_write_threshold"));
  const uint64_t read_threshold = uint64_t(g.int_property("staging_threshold"));
  for (uint64_t size : {read_threshold + 5, uint64_t(3 << 20) + 5, write_threshold + 3,
                        uint64_t(6 << 20) + 4097, chunk + 1}) {
    CAPTURE(size);
    g.h.log.clear();
    auto mm = g.alloc(size);
    auto data = random_bytes(size);
    std::vector<unsigned char> out(size);
    write(g, mm.get(), 0, data.data(), size);
    read(g, mm.get(), 0, out.data(), size);
    CHECK(out == data);
    CHECK(g.h.log.count("staged write of " + std::to_string(size)) ==
          (size >= write_threshold ? 1u : 0u));
    CHECK(g.h.log.count("staged read of " + std::to_string(size)) ==
          (size >= read_threshold ? 1u : 0u));
  }
}

TEST_CASE("pinned host memory: direct transfers, export and zero-copy import", "[cuda][gpu]") {
  auto& g = shared_gpu();
  const uint64_t n = (6 << 20) + 7;
  auto pinned = g.alloc(n, PCY_MEMORY_HOST_PINNED);
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  pcy_memory_export_args ex{};
  ex.struct_size = sizeof ex;
  ex.memory = pinned.get();
  ex.kind = PCY_HANDLE_HOST_POINTER;
  ex.handle = &h;
  host::check(g.api().memory_export(&ex));
  REQUIRE(h.host_pointer != nullptr);
  CHECK(h.pinned);
  CHECK(h.bytes == n);

  // The host writes the pinned bytes; a device copy out of the pinned allocation sees them.
  auto data = random_bytes(n);
  std::memcpy(h.host_pointer, data.data(), n);
  auto dev = g.alloc(n);
  host::copy(g.fw, g.q.get(), pinned.get(), 0, dev.get(), 0, n);
  std::vector<unsigned char> back(n);
  read(g, dev.get(), 0, back.data(), n);
  CHECK(back == data);

  // A pinned host pointer as the source of a write goes straight to DMA (no staging).
  g.h.log.clear();
  auto dev2 = g.alloc(n);
  write(g, dev2.get(), 0, h.host_pointer, n);
  CHECK(g.h.log.count("staged") == 0);
  std::fill(back.begin(), back.end(), 0);
  read(g, dev2.get(), 0, back.data(), n);
  CHECK(back == data);

  // Import of the pinned host pointer is an alias: device writes land in the host bytes.
  pcy_memory_import_args im{};
  im.struct_size = sizeof im;
  im.context = g.ctx.get();
  im.device = 0;
  im.handle = &h;
  host::check(g.api().memory_import(&im));
  host::memory alias(im.memory, g.api().memory_free);
  auto fresh = random_bytes(4096);
  write(g, alias.get(), 100, fresh.data(), fresh.size());
  CHECK(std::memcmp(static_cast<unsigned char*>(h.host_pointer) + 100, fresh.data(), 4096) == 0);

  // Pageable host memory cannot be aliased: the core must copy.
  pcy_memory_handle pageable = h;
  pageable.host_pointer = back.data();
  pageable.pinned = false;
  im.handle = &pageable;
  std::string msg;
  CHECK(status_of(g.api().memory_import(&im), &msg) == PCY_ERR_UNSUPPORTED);
  CHECK(msg.find("pageable") != std::string::npos);
}

TEST_CASE("device pointers export and import as aliases on the same device", "[cuda][gpu]") {
  auto& g = shared_gpu();
  const uint64_t n = 100003;
  auto m = g.alloc(n);
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  pcy_memory_export_args ex{};
  ex.struct_size = sizeof ex;
  ex.memory = m.get();
  ex.kind = PCY_HANDLE_CUDA_DEVICE_POINTER;
  ex.handle = &h;
  host::check(g.api().memory_export(&ex));
  CHECK(h.kind == PCY_HANDLE_CUDA_DEVICE_POINTER);
  CHECK(h.cuda_pointer != 0);
  CHECK(h.cuda_device == g.int_property("device_ordinal"));
  // Device memory is not host memory (a failed export clears the handle: use another one).
  pcy_memory_handle not_host{};
  not_host.struct_size = sizeof not_host;
  pcy_memory_export_args ex2 = ex;
  ex2.kind = PCY_HANDLE_HOST_POINTER;
  ex2.handle = &not_host;
  CHECK(status_of(g.api().memory_export(&ex2)) == PCY_ERR_UNSUPPORTED);

  pcy_memory_import_args im{};
  im.struct_size = sizeof im;
  im.context = g.ctx.get();
  im.device = 0;
  im.handle = &h;
  host::check(g.api().memory_import(&im));
  host::memory alias(im.memory, g.api().memory_free);
  auto src = random_bytes(n);
  write(g, alias.get(), 0, src.data(), n);
  std::vector<unsigned char> back(n);
  read(g, m.get(), 0, back.data(), n);
  CHECK(back == src);
  alias.reset(); // frees the alias only: the original still reads back
  read(g, m.get(), 0, back.data(), n);
  CHECK(back == src);

  pcy_memory_handle other = h;
  other.cuda_device = 99;
  im.handle = &other;
  CHECK(status_of(g.api().memory_import(&im)) == PCY_ERR_UNSUPPORTED);
  pcy_memory_handle bogus = h;
  bogus.cuda_pointer = 0x10;
  im.handle = &bogus;
  CHECK(status_of(g.api().memory_import(&im)) == PCY_ERR_INVALID_ARGUMENT);
}

TEST_CASE("allocating more than the device has is an error that leaves it usable",
          "[cuda][gpu][oom]") {
  auto& g = shared_gpu();
  const uint64_t total = static_cast<uint64_t>(g.int_property(PCY_PROP_GLOBAL_MEMORY));
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = g.ctx.get();
  a.device = 0;
  a.bytes = total + (uint64_t(4) << 30);
  std::string msg;
  CHECK(status_of(g.api().memory_alloc(&a), &msg) == PCY_ERR_OUT_OF_MEMORY);
  INFO(msg);
  CHECK(msg.find("cuMemAlloc of") != std::string::npos);
  CHECK(msg.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos);
  CHECK(msg.find("free of") != std::string::npos);
  WARN(msg);
  // The context still works.
  auto m = g.alloc(1 << 20);
  auto src = random_bytes(1 << 20);
  std::vector<unsigned char> back(1 << 20);
  write(g, m.get(), 0, src.data(), src.size());
  read(g, m.get(), 0, back.data(), back.size());
  CHECK(back == src);
}

TEST_CASE("events order work across queues", "[cuda][gpu]") {
  auto& g = shared_gpu();
  auto q2 = host::make_queue(g.fw, g.ctx.get(), 0);
  const uint64_t n = 32 << 20;
  auto a = g.alloc(n), b = g.alloc(n);
  auto src = random_bytes(n);
  write(g, a.get(), 0, src.data(), n, false);
  pcy_event ev = nullptr;
  host::check(g.api().event_record(g.q.get(), &ev));
  host::event done(ev, g.api().event_destroy);
  host::check(g.api().queue_wait_event(q2.get(), ev));
  host::copy(g.fw, q2.get(), a.get(), 0, b.get(), 0, n);
  pcy_event ev2 = nullptr;
  host::check(g.api().event_record(q2.get(), &ev2));
  host::event copied(ev2, g.api().event_destroy);
  host::check(g.api().event_wait(ev2));
  std::vector<unsigned char> back(n);
  host::read(g.fw, q2.get(), b.get(), 0, back.data(), n);
  CHECK(back == src);
}
