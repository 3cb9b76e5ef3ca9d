// OpenCL plugin, driven directly through its C table: devices and properties, memory (awkward
// sizes, random data, fills, copies, events), the memory-handle protocol (aliasing both ways,
// refusals), two contexts exchanging data, native handles used with raw OpenCL, bad input.
#include "plugin_fixture.hpp"

#include "cl_loader.hpp"

#include <cstdlib>
#include <filesystem>
#include <set>

using namespace pcy_test;

namespace {

const pcy_property* find_prop(std::span<const pcy_property> props, std::string_view key) {
  for (const auto& p : props)
    if (key == p.key) return &p;
  return nullptr;
}

// 4096-aligned host memory, as the core hands out.
struct aligned_buffer {
  explicit aligned_buffer(size_t n)
      : size(n), p(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096)) {}
  ~aligned_buffer() { std::free(p); }
  size_t size;
  void* p;
};

pcy_memory_handle export_handle(const env& e, pcy_memory m, pcy_handle_kind kind) {
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  pcy_memory_export_args a{};
  a.struct_size = sizeof a;
  a.memory = m;
  a.kind = kind;
  a.handle = &h;
  host::check(e.api().memory_export(&a));
  return h;
}

host::memory import_handle(const env& e, pcy_context ctx, const pcy_memory_handle& h) {
  pcy_memory_import_args a{};
  a.struct_size = sizeof a;
  a.context = ctx;
  a.device = 0;
  a.handle = &h;
  host::check(e.api().memory_import(&a));
  return {a.memory, e.api().memory_free};
}

void* native(const env& e, pcy_native_object what, pcy_queue q = nullptr, pcy_memory m = nullptr) {
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = what;
  a.context = e.ctx.get();
  a.device = 0;
  a.queue = q;
  a.memory = m;
  host::check(e.api().native_handle(&a));
  return a.handle;
}

// Sets a plugin setting (the test host reads settings from the environment) for a scope.
struct scoped_setting {
  scoped_setting(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~scoped_setting() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  scoped_setting(const scoped_setting&) = delete;
  scoped_setting& operator=(const scoped_setting&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

const parenchyma::opencl::cl_api& raw_cl() {
  static parenchyma::opencl::cl_api api = [] {
    parenchyma::opencl::cl_api a;
    std::string why;
    if (!a.load("libOpenCL.so.1", why)) throw std::runtime_error(why);
    return a;
  }();
  return api;
}

} // namespace

TEST_CASE("devices carry the documented properties", "[opencl][devices]") {
  env e;
  const auto probe = e.fw.probe();
  REQUIRE(probe.device_count >= 1);
  for (uint32_t d = 0; d < probe.device_count; ++d) {
    const auto props = e.fw.properties(d);
    for (const char* key : {"name", "vendor", "platform", "opencl_version", "driver_version",
                            "extensions", "platform_version"}) {
      const auto* p = find_prop(props, key);
      INFO("key " << key);
      REQUIRE(p != nullptr);
      CHECK(p->type == PCY_VALUE_STRING);
      CHECK(p->s != nullptr);
    }
    for (const char* key : {"kind", "compute_units", "global_memory", "local_memory",
                            "max_work_group", "max_alloc"}) {
      const auto* p = find_prop(props, key);
      INFO("key " << key);
      REQUIRE(p != nullptr);
      CHECK(p->type == PCY_VALUE_INT);
    }
    for (const char* key : {"fp64", "host_unified"}) {
      const auto* p = find_prop(props, key);
      INFO("key " << key);
      REQUIRE(p != nullptr);
      CHECK(p->type == PCY_VALUE_BOOL);
    }
    CHECK(find_prop(props, "compute_units")->i >= 1);
    CHECK(find_prop(props, "global_memory")->i > 0);
    CHECK(find_prop(props, "max_work_group")->i >= 1);
    CHECK(std::string(find_prop(props, "opencl_version")->s).rfind("OpenCL ", 0) == 0);
    const int64_t kind = find_prop(props, "kind")->i;
    CHECK((kind >= PCY_DEVICE_OTHER && kind <= PCY_DEVICE_ACCELERATOR));
    if (kind == PCY_DEVICE_CPU) CHECK(find_prop(props, "host_unified")->i == 1);
  }
  // Out-of-range device: a clear NOT_FOUND, not a crash.
  const pcy_property* props = nullptr;
  size_t n = 0;
  pcy_error* err = e.api().device_properties(e.fw.plugin(), probe.device_count, &props, &n);
  REQUIRE(err != nullptr);
  CHECK(err->code == PCY_ERR_NOT_FOUND);
  err->destroy(err);
}

TEST_CASE("write, read, copy and fill awkward sizes with random data", "[opencl][memory]") {
  env e;
  for (size_t n : {size_t(1), size_t(3), size_t(127), size_t(4097), size_t(1 << 20) + 13}) {
    INFO("bytes " << n);
    const auto data = random_bytes(n);
    auto a = host::alloc(e.fw, e.ctx.get(), 0, n + 7);
    auto b = host::alloc(e.fw, e.ctx.get(), 0, n + 5);
    host::write(e.fw, e.q.get(), a.get(), 7, data.data(), n);
    std::vector<unsigned char> out(n);
    host::read(e.fw, e.q.get(), a.get(), 7, out.data(), n);
    CHECK(out == data);

    host::copy(e.fw, e.q.get(), a.get(), 7, b.get(), 5, n);
    std::vector<unsigned char> out2(n);
    host::read(e.fw, e.q.get(), b.get(), 5, out2.data(), n, false); // non-blocking + finish
    host::finish(e.fw, e.q.get());
    CHECK(out2 == data);
  }

  // Fills: every pattern size, at offsets aligned to it and not.
  for (uint32_t ps : {1u, 2u, 4u, 8u, 16u}) {
    for (uint64_t offset : {uint64_t(0), uint64_t(ps), uint64_t(3)}) {
      INFO("pattern " << ps << " offset " << offset);
      const uint64_t bytes = ps * 1001;
      const uint64_t total = offset + bytes + 9;
      const auto base = random_bytes(total);
      const auto pattern = random_bytes(ps);
      auto m = host::alloc(e.fw, e.ctx.get(), 0, total);
      host::write(e.fw, e.q.get(), m.get(), 0, base.data(), total);
      host::fill(e.fw, e.q.get(), m.get(), offset, bytes, pattern.data(), ps);
      std::vector<unsigned char> out(total);
      host::read(e.fw, e.q.get(), m.get(), 0, out.data(), total);
      auto want = base;
      for (uint64_t i = 0; i < bytes; ++i)
        want[offset + i] = pattern[i % ps];
      CHECK(out == want);
    }
  }
}

TEST_CASE("out-of-range transfers and bad fills fail and leave the buffer usable",
          "[opencl][memory][bad-input]") {
  env e;
  auto m = host::alloc(e.fw, e.ctx.get(), 0, 100);
  const auto data = random_bytes(100);
  host::write(e.fw, e.q.get(), m.get(), 0, data.data(), 100);
  std::vector<unsigned char> buf(200);
  expect_error([&] { host::read(e.fw, e.q.get(), m.get(), 50, buf.data(), 51); },
               PCY_ERR_INVALID_ARGUMENT, {"outside the buffer of 100 bytes"});
  expect_error([&] { host::write(e.fw, e.q.get(), m.get(), 101, buf.data(), 0); },
               PCY_ERR_INVALID_ARGUMENT, {"outside"});
  const uint32_t pattern = 7;
  expect_error([&] { host::fill(e.fw, e.q.get(), m.get(), 0, 6, &pattern, 4); },
               PCY_ERR_INVALID_ARGUMENT, {"multiple"});
  expect_error([&] { host::copy(e.fw, e.q.get(), m.get(), 0, m.get(), 10, 20); },
               PCY_ERR_INVALID_ARGUMENT, {"overlap"});
  std::vector<unsigned char> out(100);
  host::read(e.fw, e.q.get(), m.get(), 0, out.data(), 100);
  CHECK(out == data);
}

TEST_CASE("events order work between two queues", "[opencl][queue]") {
  env e;
  auto q2 = host::make_queue(e.fw, e.ctx.get(), 0);
  const size_t n = 1 << 22;
  const auto data = random_bytes(n);
  auto m = host::alloc(e.fw, e.ctx.get(), 0, n);
  host::write(e.fw, e.q.get(), m.get(), 0, data.data(), n, false);
  pcy_event ev = nullptr;
  host::check(e.api().event_record(e.q.get(), &ev));
  host::event guard(ev, e.api().event_destroy);
  host::check(e.api().queue_wait_event(q2.get(), ev));
  std::vector<unsigned char> out(n);
  host::read(e.fw, q2.get(), m.get(), 0, out.data(), n);
  CHECK(out == data);
  host::check(e.api().event_wait(ev));
}

TEST_CASE("host pointers are imported in place on host-unified devices", "[opencl][handles]") {
  env e;
  const auto* hu = find_prop(e.fw.properties(0), "host_unified");
  REQUIRE(hu != nullptr);
  const size_t n = 3 * 4096 + 100;
  aligned_buffer buf(n);
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  h.kind = PCY_HANDLE_HOST_POINTER;
  h.host_pointer = buf.p;
  h.bytes = n;
  if (hu->i == 0) {
    pcy_memory_import_args a{};
    a.struct_size = sizeof a;
    a.context = e.ctx.get();
    a.handle = &h;
    expect_error([&] { host::check(e.api().memory_import(&a)); }, PCY_ERR_UNSUPPORTED,
                 {"does not share memory with the host"});
    SUCCEED("device is not host-unified: import refused as designed");
    return;
  }
  auto alias = import_handle(e, e.ctx.get(), h);

  // host -> device: bytes written in host memory are what the device reads, without a write.
  const auto data = random_bytes(n);
  std::memcpy(buf.p, data.data(), n);
  auto other = host::alloc(e.fw, e.ctx.get(), 0, n);
  host::copy(e.fw, e.q.get(), alias.get(), 0, other.get(), 0, n);
  std::vector<unsigned char> out(n);
  host::read(e.fw, e.q.get(), other.get(), 0, out.data(), n);
  CHECK(out == data);

  // device -> host: a device fill shows in host memory after finish.
  const uint32_t pattern = 0xA5C3E1F0u;
  host::fill(e.fw, e.q.get(), alias.get(), 4096, 4096, &pattern, 4);
  host::finish(e.fw, e.q.get());
  for (size_t i = 4096; i < 8192; i += 4) {
    uint32_t v;
    std::memcpy(&v, static_cast<unsigned char*>(buf.p) + i, 4);
    if (v != pattern) FAIL("host memory at " << i << " does not show the device fill");
  }
  CHECK(std::memcmp(buf.p, data.data(), 4096) == 0);

  // The alias exports the very same host pointer.
  const auto back = export_handle(e, alias.get(), PCY_HANDLE_HOST_POINTER);
  CHECK(back.host_pointer == buf.p);
  CHECK(back.bytes == n);

  // Below the base alignment: refused on every device (PoCL would use it in place, but kernels
  // compiled for aligned buffers then crash on it: CLBlast's XscalFast at 16 mod 32), so the
  // core keeps a copy in step.
  pcy_memory_handle odd = h;
  odd.host_pointer = static_cast<unsigned char*>(buf.p) + 4;
  odd.bytes = 64;
  pcy_memory_import_args a{};
  a.struct_size = sizeof a;
  a.context = e.ctx.get();
  a.handle = &odd;
  pcy_error* err = e.api().memory_import(&a);
  REQUIRE(err != nullptr);
  expect_error([&] { host::check(err); }, PCY_ERR_UNSUPPORTED, {"not aligned"});
}

TEST_CASE("OpenCL buffers alias within a context and are refused across contexts",
          "[opencl][handles]") {
  env e;
  const size_t n = 10007;
  auto m = host::alloc(e.fw, e.ctx.get(), 0, n);
  const auto h = export_handle(e, m.get(), PCY_HANDLE_OPENCL_BUFFER);
  CHECK(h.kind == PCY_HANDLE_OPENCL_BUFFER);
  CHECK(h.bytes == n);
  CHECK(h.opencl_buffer == native(e, PCY_NATIVE_MEMORY, nullptr, m.get()));
  CHECK(h.opencl_context == native(e, PCY_NATIVE_CONTEXT));

  auto alias = import_handle(e, e.ctx.get(), h);
  const auto data = random_bytes(n);
  host::write(e.fw, e.q.get(), m.get(), 0, data.data(), n);
  std::vector<unsigned char> out(n);
  host::read(e.fw, e.q.get(), alias.get(), 0, out.data(), n);
  CHECK(out == data);
  const auto data2 = random_bytes(n);
  host::write(e.fw, e.q.get(), alias.get(), 0, data2.data(), n);
  host::read(e.fw, e.q.get(), m.get(), 0, out.data(), n);
  CHECK(out == data2);
  // The alias holds its own reference: it outlives the exporter's memory safely.
  m.reset();
  host::read(e.fw, e.q.get(), alias.get(), 0, out.data(), n);
  CHECK(out == data2);

  // A plain device buffer is not host memory: no HOST_POINTER export.
  auto plain = host::alloc(e.fw, e.ctx.get(), 0, 64);
  pcy_memory_handle hp{};
  hp.struct_size = sizeof hp;
  pcy_memory_export_args ea{};
  ea.struct_size = sizeof ea;
  ea.memory = plain.get();
  ea.kind = PCY_HANDLE_HOST_POINTER;
  ea.handle = &hp;
  expect_error([&] { host::check(e.api().memory_export(&ea)); }, PCY_ERR_UNSUPPORTED);

  // Another context cannot alias it: one of another plugin instance with its queues its own.
  // With shared queues (PARENCHYMA_OPENCL_SHARED_QUEUE=on, the default on PoCL before 7.0) the
  // contexts of a device are one cl_context, so the import aliases instead.
  const uint32_t dev = 0;
  pcy_memory_import_args ia{};
  ia.struct_size = sizeof ia;
  const auto h2 = export_handle(e, alias.get(), PCY_HANDLE_OPENCL_BUFFER);
  ia.handle = &h2;
  {
    scoped_setting own("PARENCHYMA_OPENCL_SHARED_QUEUE", "off");
    env other;
    auto ctx2 = host::make_context(other.fw, std::span<const uint32_t>(&dev, 1));
    ia.context = ctx2.get();
    expect_error([&] { host::check(other.api().memory_import(&ia)); }, PCY_ERR_UNSUPPORTED,
                 {"another cl_context"});
  }
  {
    scoped_setting shared("PARENCHYMA_OPENCL_SHARED_QUEUE", "on");
    env s1, s2;
    CHECK(native(s1, PCY_NATIVE_CONTEXT) == native(s2, PCY_NATIVE_CONTEXT));
    CHECK(native(s1, PCY_NATIVE_QUEUE, s1.q.get()) == native(s2, PCY_NATIVE_QUEUE, s2.q.get()));
    auto m1 = host::alloc(s1.fw, s1.ctx.get(), 0, n);
    host::write(s1.fw, s1.q.get(), m1.get(), 0, data.data(), n);
    const auto h1 = export_handle(s1, m1.get(), PCY_HANDLE_OPENCL_BUFFER);
    auto in2 = import_handle(s2, s2.ctx.get(), h1);
    host::read(s2.fw, s2.q.get(), in2.get(), 0, out.data(), n);
    CHECK(out == data);
  }
  // Nor can a CUDA device pointer be imported.
  pcy_memory_handle cuda{};
  cuda.struct_size = sizeof cuda;
  cuda.kind = PCY_HANDLE_CUDA_DEVICE_POINTER;
  cuda.cuda_pointer = 0x1000;
  cuda.bytes = 16;
  ia.context = e.ctx.get();
  ia.handle = &cuda;
  expect_error([&] { host::check(e.api().memory_import(&ia)); }, PCY_ERR_UNSUPPORTED);
}

TEST_CASE("pinned buffers are host memory on host-unified devices", "[opencl][handles]") {
  env e;
  if (find_prop(e.fw.properties(0), "host_unified")->i == 0) {
    auto m = host::alloc(e.fw, e.ctx.get(), 0, 4096, PCY_MEMORY_HOST_PINNED);
    SUCCEED("not host-unified: pinned memory is only a staging hint");
    return;
  }
  const size_t n = 65536 + 12;
  auto m = host::alloc(e.fw, e.ctx.get(), 0, n, PCY_MEMORY_HOST_PINNED);
  const auto h = export_handle(e, m.get(), PCY_HANDLE_HOST_POINTER);
  REQUIRE(h.host_pointer != nullptr);
  CHECK(h.bytes == n);
  // Host writes are seen by the device; device writes by the host.
  const auto data = random_bytes(n);
  std::memcpy(h.host_pointer, data.data(), n);
  std::vector<unsigned char> out(n);
  host::read(e.fw, e.q.get(), m.get(), 0, out.data(), n);
  CHECK(out == data);
  const auto data2 = random_bytes(n);
  host::write(e.fw, e.q.get(), m.get(), 0, data2.data(), n);
  host::finish(e.fw, e.q.get());
  CHECK(std::memcmp(h.host_pointer, data2.data(), n) == 0);
}

TEST_CASE("two contexts exchange data through host staging", "[opencl][contexts]") {
  scoped_setting own("PARENCHYMA_OPENCL_SHARED_QUEUE", "off"); // two cl_contexts
  env a;
  env b;
  REQUIRE(native(a, PCY_NATIVE_CONTEXT) != native(b, PCY_NATIVE_CONTEXT));
  const size_t n = 123457;
  const auto data = random_bytes(n);
  auto ma = host::alloc(a.fw, a.ctx.get(), 0, n);
  auto mb = host::alloc(b.fw, b.ctx.get(), 0, n);
  host::write(a.fw, a.q.get(), ma.get(), 0, data.data(), n);
  // A direct copy across cl_contexts is refused with UNSUPPORTED (the core then stages).
  expect_error([&] { host::copy(b.fw, b.q.get(), ma.get(), 0, mb.get(), 0, n); },
               PCY_ERR_UNSUPPORTED, {"different OpenCL contexts"});
  std::vector<unsigned char> staged(n), out(n);
  host::read(a.fw, a.q.get(), ma.get(), 0, staged.data(), n);
  host::write(b.fw, b.q.get(), mb.get(), 0, staged.data(), n);
  host::read(b.fw, b.q.get(), mb.get(), 0, out.data(), n);
  CHECK(out == data);
  // Both still work afterwards.
  host::read(a.fw, a.q.get(), ma.get(), 0, out.data(), n);
  CHECK(out == data);
}

TEST_CASE("native handles work with raw OpenCL calls", "[opencl][native]") {
  env e;
  const auto& cl = raw_cl();
  auto ctx = static_cast<cl_context>(native(e, PCY_NATIVE_CONTEXT));
  auto q = static_cast<cl_command_queue>(native(e, PCY_NATIVE_QUEUE, e.q.get()));
  auto dev = static_cast<cl_device_id>(native(e, PCY_NATIVE_DEVICE));
  auto platform = static_cast<cl_platform_id>(native(e, PCY_NATIVE_PLATFORM));
  REQUIRE(ctx != nullptr);
  REQUIRE(q != nullptr);
  cl_platform_id p2 = nullptr;
  REQUIRE(cl.clGetDeviceInfo(dev, CL_DEVICE_PLATFORM, sizeof p2, &p2, nullptr) == CL_SUCCESS);
  CHECK(p2 == platform);

  const size_t n = 4099;
  const auto data = random_bytes(n);
  auto m = host::alloc(e.fw, e.ctx.get(), 0, n);
  auto mem = static_cast<cl_mem>(native(e, PCY_NATIVE_MEMORY, nullptr, m.get()));
  // Raw write on the plugin's queue, read back through the plugin.
  REQUIRE(cl.clEnqueueWriteBuffer(q, mem, CL_TRUE, 0, n, data.data(), 0, nullptr, nullptr) ==
          CL_SUCCESS);
  std::vector<unsigned char> out(n);
  host::read(e.fw, e.q.get(), m.get(), 0, out.data(), n);
  CHECK(out == data);
  // A raw buffer made in the plugin's context, imported as an alias.
  cl_int err = CL_SUCCESS;
  cl_mem raw = cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, nullptr, &err);
  REQUIRE(err == CL_SUCCESS);
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  h.kind = PCY_HANDLE_OPENCL_BUFFER;
  h.opencl_buffer = raw;
  h.opencl_context = ctx;
  h.bytes = n;
  {
    auto alias = import_handle(e, e.ctx.get(), h);
    host::write(e.fw, e.q.get(), alias.get(), 0, data.data(), n);
  }
  std::vector<unsigned char> out2(n);
  REQUIRE(cl.clEnqueueReadBuffer(q, raw, CL_TRUE, 0, n, out2.data(), 0, nullptr, nullptr) ==
          CL_SUCCESS);
  CHECK(out2 == data);
  cl.clReleaseMemObject(raw);
}

TEST_CASE("allocation beyond device memory fails clearly and the context keeps working",
          "[opencl][memory][bad-input]") {
  env e;
  const auto props = e.fw.properties(0);
  const auto global = static_cast<uint64_t>(find_prop(props, "global_memory")->i);
  const auto max_alloc = static_cast<uint64_t>(find_prop(props, "max_alloc")->i);
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = e.ctx.get();
  a.bytes = global + 1;
  expect_error([&] { host::check(e.api().memory_alloc(&a)); }, PCY_ERR_OUT_OF_MEMORY,
               {"CL_DEVICE_MAX_MEM_ALLOC_SIZE"});
  a.bytes = max_alloc + 1;
  expect_error([&] { host::check(e.api().memory_alloc(&a)); }, PCY_ERR_OUT_OF_MEMORY);
  a.bytes = uint64_t(1) << 62;
  expect_error([&] { host::check(e.api().memory_alloc(&a)); }, PCY_ERR_OUT_OF_MEMORY);
  a.bytes = 0;
  expect_error([&] { host::check(e.api().memory_alloc(&a)); }, PCY_ERR_INVALID_ARGUMENT);
  a.bytes = 16;
  a.device = 5;
  expect_error([&] { host::check(e.api().memory_alloc(&a)); }, PCY_ERR_NOT_FOUND);

  const auto data = random_bytes(1000);
  auto m = host::alloc(e.fw, e.ctx.get(), 0, 1000);
  host::write(e.fw, e.q.get(), m.get(), 0, data.data(), 1000);
  std::vector<unsigned char> out(1000);
  host::read(e.fw, e.q.get(), m.get(), 0, out.data(), 1000);
  CHECK(out == data);
}

TEST_CASE("without a platform or a loader the plugin reports 0 devices and why",
          "[opencl][probe]") {
  const std::string empty = fresh_dir("vendors");
  // OCL_ICD_FILENAMES (set on some machines) would name ICDs directly: remove it too.
  auto r = run_children({{"--child-probe"}},
                        {{"OCL_ICD_VENDORS", empty}, {"OCL_ICD_FILENAMES", unset_env}});
  INFO(r[0].output);
  CHECK(r[0].exit_code == 0);
  CHECK(r[0].output.find("devices=0") != std::string::npos);
  CHECK(r[0].output.find("CL_PLATFORM_NOT_FOUND_KHR") != std::string::npos);
  CHECK(r[0].output.find("pocl-opencl-icd") != std::string::npos);

  r = run_children({{"--child-probe"}},
                   {{"PARENCHYMA_OPENCL_LIBRARY", "/nonexistent/libOpenCL.so.1"}});
  INFO(r[0].output);
  CHECK(r[0].exit_code == 0);
  CHECK(r[0].output.find("devices=0") != std::string::npos);
  CHECK(r[0].output.find("not found") != std::string::npos);
  CHECK(r[0].output.find("ocl-icd-libopencl1") != std::string::npos);
  std::filesystem::remove_all(empty);
}
