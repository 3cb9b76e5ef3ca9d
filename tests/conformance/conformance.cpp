// The framework conformance suite: one set of checks every framework plugin must pass, driven
// through the raw C table with the SDK's host-side RAII wrappers (modelled on oneAPI UR's CTS).
//
//   test_conformance <framework> [--built | --required] [Catch2 options...]
//
// The framework is found with a Registry (the stub in its own directory, the others in the
// build tree's plugin directory). Absent, or present with 0 devices: "SKIPPED: <name>: <reason>"
// and exit 77. --built (the plugin is built in this tree) makes a plugin that did not load a
// failure, and --required (it must also have devices here: native, stub) makes 0 devices one
// too, so a broken plugin can never pass as "skipped".
#include "loader/testing.hpp"

#if __has_include(<catch2/catch_session.hpp>)
#include <catch2/catch_session.hpp>
#else
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#endif
#include "support/catch.hpp"

#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/host.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace pcy_test;
namespace host = parenchyma::sdk::host;

namespace {

const parenchyma::Framework* g_fw = nullptr; // set once in main, before any test runs
std::string g_name;

// Host services for the suite's own plugin instances: messages are kept, never printed.
std::mutex g_log_mutex;
std::vector<std::string> g_log;
void log_sink(void*, pcy_log_level level, const char* origin, const char* message) {
  std::lock_guard lock(g_log_mutex);
  g_log.push_back(std::to_string(static_cast<int>(level)) + " " + (origin ? origin : "?") + ": " +
                  (message ? message : "(null)"));
}
const std::string g_cache_dir = [] {
  const char* c = std::getenv("PARENCHYMA_CACHE_DIR");
  return std::string(c ? c : "");
}();
pcy_host_services make_services() {
  pcy_host_services s{};
  s.struct_size = sizeof s;
  s.host_abi_major = PCY_ABI_VERSION_MAJOR;
  s.host_abi_minor = PCY_ABI_VERSION_MINOR;
  s.log = &log_sink;
  s.log_level = PCY_LOG_DEBUG;
  s.cache_dir = g_cache_dir.empty() ? nullptr : g_cache_dir.c_str();
  return s;
}
const pcy_host_services g_services = make_services();

const pcy_framework_api& api() { return g_fw->api(); }

// A pcy_error that a bad argument must produce: the right code, our plugin as origin, a message.
void require_error(pcy_error* e, std::initializer_list<pcy_status> codes, const char* what) {
  INFO("expected an error from: " << what);
  REQUIRE(e != nullptr);
  INFO("got code " << e->code << ", origin '" << (e->origin ? e->origin : "(null)")
                   << "', message '" << (e->message ? e->message : "(null)") << "'");
  CHECK(e->struct_size >= sizeof(pcy_error));
  bool code_ok = false;
  for (auto c : codes)
    code_ok = code_ok || e->code == c;
  CHECK(code_ok);
  REQUIRE(e->origin != nullptr);
  CHECK(std::string(e->origin) == g_name);
  REQUIRE(e->message != nullptr);
  CHECK(std::strlen(e->message) > 0);
  REQUIRE(e->destroy != nullptr);
  e->destroy(e);
}

// One plugin instance of our own, with a context and a queue on device 0.
struct fixture {
  host::framework fw{&api(), &g_services};
  uint32_t device0 = 0;
  host::context ctx = host::make_context(fw, {&device0, 1});
  host::queue q = host::make_queue(fw, ctx.get(), 0);

  host::memory alloc(uint64_t bytes) { return host::alloc(fw, ctx.get(), 0, bytes); }
  std::vector<unsigned char> read_all(pcy_memory m, uint64_t bytes) {
    std::vector<unsigned char> out(bytes);
    host::read(fw, q.get(), m, 0, out.data(), bytes);
    return out;
  }
};

constexpr uint64_t awkward_sizes[] = {1, 3, 4097, (uint64_t{1} << 20) + 13};

} // namespace

TEST_CASE("probe and device properties") {
  pcy_framework_probe p{};
  p.struct_size = sizeof p;
  REQUIRE(api().probe(g_fw->plugin(), &p) == nullptr);
  REQUIRE(p.device_count == g_fw->devices().size());
  REQUIRE(p.device_count > 0);
  CHECK(api().kind == PCY_PLUGIN_FRAMEWORK);
  CHECK(api().abi_major == PCY_ABI_VERSION_MAJOR);
  CHECK(std::string(api().name) == g_name);
  REQUIRE(api().plugin_version != nullptr);
  REQUIRE(api().description != nullptr);
  CHECK(std::strlen(api().description) > 0);

  for (uint32_t d = 0; d < p.device_count; ++d) {
    const pcy_property* props = nullptr;
    size_t count = 0;
    REQUIRE(api().device_properties(g_fw->plugin(), d, &props, &count) == nullptr);
    REQUIRE(props != nullptr);
    std::set<std::string> keys;
    bool has_name = false, has_kind = false;
    for (size_t i = 0; i < count; ++i) {
      const pcy_property& pr = props[i];
      REQUIRE(pr.struct_size >= sizeof(pcy_property));
      REQUIRE(pr.key != nullptr);
      const std::string key = pr.key;
      INFO("device " << d << " property " << key);
      CHECK(keys.insert(key).second); // no duplicate keys
      switch (pr.type) {
      case PCY_VALUE_STRING: REQUIRE(pr.s != nullptr); break;
      case PCY_VALUE_BOOL: CHECK((pr.i == 0 || pr.i == 1)); break;
      case PCY_VALUE_INT:
      case PCY_VALUE_FLOAT: break;
      default: FAIL("unknown value type " << pr.type);
      }
      if (key == PCY_PROP_NAME) {
        has_name = pr.type == PCY_VALUE_STRING && std::strlen(pr.s) > 0;
      } else if (key == PCY_PROP_VENDOR || key == PCY_PROP_DRIVER_VERSION || key == PCY_PROP_UUID) {
        CHECK(pr.type == PCY_VALUE_STRING);
      } else if (key == PCY_PROP_KIND) {
        has_kind =
            pr.type == PCY_VALUE_INT && pr.i >= PCY_DEVICE_OTHER && pr.i <= PCY_DEVICE_ACCELERATOR;
      } else if (key == PCY_PROP_COMPUTE_UNITS || key == PCY_PROP_GLOBAL_MEMORY ||
                 key == PCY_PROP_MAX_WORK_GROUP) {
        CHECK(pr.type == PCY_VALUE_INT);
        CHECK(pr.i > 0);
      } else if (key == PCY_PROP_LOCAL_MEMORY) {
        CHECK(pr.type == PCY_VALUE_INT);
        CHECK(pr.i >= 0);
      } else if (key == PCY_PROP_HOST_UNIFIED || key == PCY_PROP_FP64) {
        CHECK(pr.type == PCY_VALUE_BOOL);
      }
    }
    CHECK(has_name);
    CHECK(has_kind);
  }
  const pcy_property* props = nullptr;
  size_t count = 0;
  require_error(api().device_properties(g_fw->plugin(), p.device_count, &props, &count),
                {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "device_properties(out of range)");
}

TEST_CASE("a second plugin instance initialises and shuts down beside the registry's") {
  host::framework second(&api(), &g_services);
  REQUIRE(second.plugin() != nullptr);
  CHECK(second.probe().device_count == g_fw->devices().size());
  CHECK_FALSE(second.properties(0).empty());
}

TEST_CASE("a host speaking another ABI major is refused at initialize") {
  pcy_host_services future = g_services;
  future.host_abi_major = PCY_ABI_VERSION_MAJOR + 1;
  pcy_framework_init_args a{};
  a.struct_size = sizeof a;
  a.host = &future;
  pcy_error* e = api().initialize(&a);
  if (e == nullptr && a.plugin != nullptr) api().shutdown(a.plugin);
  require_error(e, {PCY_ERR_VERSION}, "initialize(host ABI major + 1)");
}

TEST_CASE("separate contexts are used from several threads at once") {
  host::framework fw(&api(), &g_services);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  std::vector<std::vector<unsigned char>> data;
  for (size_t t = 0; t < ok.size(); ++t)
    data.push_back(random_bytes(65537 + t));
  for (size_t t = 0; t < ok.size(); ++t)
    threads.emplace_back([&, t] {
      try {
        const uint32_t d0 = 0;
        host::context ctx = host::make_context(fw, {&d0, 1});
        host::queue q = host::make_queue(fw, ctx.get(), 0);
        for (int round = 0; round < 20; ++round) {
          const uint64_t bytes = data[t].size();
          host::memory m = host::alloc(fw, ctx.get(), 0, bytes);
          host::write(fw, q.get(), m.get(), 0, data[t].data(), bytes);
          std::vector<unsigned char> back(bytes);
          host::read(fw, q.get(), m.get(), 0, back.data(), bytes);
          if (back != data[t]) return;
        }
        ok[t] = 1;
      } catch (...) {
      }
    });
  for (auto& th : threads)
    th.join();
  for (size_t t = 0; t < ok.size(); ++t)
    CHECK(ok[t] == 1);
}

TEST_CASE("context, queue and event lifecycle") {
  host::framework fw(&api(), &g_services);
  const uint32_t n = fw.probe().device_count;
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i)
    all[i] = i;
  SECTION("a context over every device, a queue on each") {
    pcy_context raw = nullptr;
    if (pcy_error* e = api().context_create(fw.plugin(), all.data(), n, &raw)) {
      // Devices of different platforms (OpenCL) cannot share a context: the plugin must say so
      // with INVALID_ARGUMENT; then each device gets a context of its own.
      require_error(e, {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_UNSUPPORTED},
                    "context over every device");
      for (uint32_t i = 0; i < n; ++i) {
        host::context one = host::make_context(fw, {&all[i], 1});
        host::queue q = host::make_queue(fw, one.get(), 0);
        REQUIRE(q);
        host::finish(fw, q.get());
      }
    } else {
      host::context ctx(raw, api().context_destroy);
      for (uint32_t i = 0; i < n; ++i) {
        host::queue q = host::make_queue(fw, ctx.get(), i);
        REQUIRE(q);
        host::finish(fw, q.get());
      }
    }
  }
  SECTION("several queues, events recorded, waited and destroyed") {
    const uint32_t d0 = 0;
    host::context ctx = host::make_context(fw, {&d0, 1});
    host::queue a = host::make_queue(fw, ctx.get(), 0);
    host::queue b = host::make_queue(fw, ctx.get(), 0);
    for (int round = 0; round < 3; ++round) {
      pcy_event e = nullptr;
      REQUIRE(api().event_record(a.get(), &e) == nullptr);
      REQUIRE(e != nullptr);
      host::event owned(e, api().event_destroy);
      REQUIRE(api().queue_wait_event(b.get(), e) == nullptr);
      REQUIRE(api().event_wait(e) == nullptr);
      REQUIRE(api().event_wait(e) == nullptr); // waiting twice is allowed
    }
    host::finish(fw, a.get());
    host::finish(fw, b.get());
  }
  SECTION("contexts can be made and destroyed repeatedly") {
    for (int i = 0; i < 8; ++i) {
      const uint32_t d0 = 0;
      host::context ctx = host::make_context(fw, {&d0, 1});
      host::queue q = host::make_queue(fw, ctx.get(), 0);
      host::memory m = host::alloc(fw, ctx.get(), 0, 64);
      REQUIRE(m);
    }
  }
}

TEST_CASE("alloc and free at awkward sizes") {
  fixture f;
  for (uint64_t bytes : awkward_sizes) {
    INFO("bytes " << bytes);
    host::memory m = f.alloc(bytes);
    REQUIRE(m);
  }
  host::memory a = f.alloc(4096), b = f.alloc(4096);
  CHECK(a.get() != b.get());
}

TEST_CASE("write and read round trip at awkward sizes and offsets") {
  fixture f;
  for (uint64_t bytes : awkward_sizes) {
    INFO("bytes " << bytes);
    host::memory m = f.alloc(bytes);
    const auto data = random_bytes(bytes);
    host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
    CHECK(f.read_all(m.get(), bytes) == data);

    if (bytes < 8) continue;
    // A sub-range at an odd offset, odd length; the rest must stay as it was.
    const uint64_t off = 3, len = bytes - 5;
    const auto patch = random_bytes(len);
    host::write(f.fw, f.q.get(), m.get(), off, patch.data(), len);
    auto expect = data;
    std::copy(patch.begin(), patch.end(), expect.begin() + off);
    CHECK(f.read_all(m.get(), bytes) == expect);
    std::vector<unsigned char> part(len - 1);
    host::read(f.fw, f.q.get(), m.get(), off + 1, part.data(), part.size());
    CHECK(std::equal(part.begin(), part.end(), expect.begin() + off + 1));
  }
}

TEST_CASE("non-blocking transfers complete by queue_finish") {
  fixture f;
  const uint64_t bytes = (uint64_t{1} << 20) + 13;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes, /*blocking=*/false);
  host::finish(f.fw, f.q.get());
  std::vector<unsigned char> out(bytes);
  host::read(f.fw, f.q.get(), m.get(), 0, out.data(), bytes, /*blocking=*/false);
  host::finish(f.fw, f.q.get());
  CHECK(out == data);
}

TEST_CASE("an event recorded after a write orders another queue's read") {
  fixture f;
  host::queue other = host::make_queue(f.fw, f.ctx.get(), 0);
  const uint64_t bytes = 4097;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes, /*blocking=*/false);
  pcy_event e = nullptr;
  REQUIRE(api().event_record(f.q.get(), &e) == nullptr);
  host::event owned(e, api().event_destroy);
  REQUIRE(api().queue_wait_event(other.get(), e) == nullptr);
  std::vector<unsigned char> out(bytes);
  host::read(f.fw, other.get(), m.get(), 0, out.data(), bytes);
  CHECK(out == data);
  REQUIRE(api().event_wait(e) == nullptr);
}

TEST_CASE("copy between allocations, with offsets") {
  fixture f;
  for (uint64_t bytes : awkward_sizes) {
    INFO("bytes " << bytes);
    host::memory src = f.alloc(bytes), dst = f.alloc(bytes + 7);
    const auto a = random_bytes(bytes), b = random_bytes(bytes + 7);
    host::write(f.fw, f.q.get(), src.get(), 0, a.data(), bytes);
    host::write(f.fw, f.q.get(), dst.get(), 0, b.data(), bytes + 7);
    host::copy(f.fw, f.q.get(), src.get(), 0, dst.get(), 0, bytes);
    auto expect = b;
    std::copy(a.begin(), a.end(), expect.begin());
    CHECK(f.read_all(dst.get(), bytes + 7) == expect);
    if (bytes < 8) continue;
    host::copy(f.fw, f.q.get(), src.get(), 1, dst.get(), 6, bytes - 2);
    std::copy(a.begin() + 1, a.begin() + 1 + static_cast<long>(bytes - 2), expect.begin() + 6);
    CHECK(f.read_all(dst.get(), bytes + 7) == expect);
  }
}

TEST_CASE("fill with 1, 2, 4, 8 and 16-byte patterns") {
  fixture f;
  for (uint32_t ps : {1u, 2u, 4u, 8u, 16u}) {
    INFO("pattern size " << ps);
    const uint64_t count = 1001, off = uint64_t{ps} * 3, total = off + ps * count + 16;
    host::memory m = f.alloc(total);
    const auto before = random_bytes(total);
    host::write(f.fw, f.q.get(), m.get(), 0, before.data(), total);
    const auto pattern = random_bytes(ps);
    host::fill(f.fw, f.q.get(), m.get(), off, ps * count, pattern.data(), ps);
    auto expect = before;
    for (uint64_t i = 0; i < count; ++i)
      std::copy(pattern.begin(), pattern.end(), expect.begin() + static_cast<long>(off + i * ps));
    CHECK(f.read_all(m.get(), total) == expect);
  }
}

TEST_CASE("bad arguments return errors that name the plugin") {
  fixture f;
  SECTION("a 0-byte allocation") {
    pcy_memory_alloc_args a{};
    a.struct_size = sizeof a;
    a.context = f.ctx.get();
    a.bytes = 0;
    require_error(api().memory_alloc(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_alloc(0 bytes)");
  }
  SECTION("an out-of-range device") {
    const uint32_t bad = static_cast<uint32_t>(g_fw->devices().size());
    pcy_context c = nullptr;
    require_error(api().context_create(f.fw.plugin(), &bad, 1, &c),
                  {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "context_create(bad device)");
    pcy_memory_alloc_args a{};
    a.struct_size = sizeof a;
    a.context = f.ctx.get();
    a.device = 1; // the fixture's context has one device: index 1 is outside it
    a.bytes = 64;
    require_error(api().memory_alloc(&a), {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT},
                  "memory_alloc(device outside the context)");
    pcy_queue q = nullptr;
    require_error(api().queue_create(f.ctx.get(), 1, &q),
                  {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "queue_create(bad device)");
  }
  SECTION("a fill whose size is not a multiple of the pattern") {
    host::memory m = f.alloc(64);
    const uint32_t pattern = 0x01020304;
    pcy_memory_fill_args a{};
    a.struct_size = sizeof a;
    a.queue = f.q.get();
    a.memory = m.get();
    a.bytes = 10;
    a.pattern = &pattern;
    a.pattern_size = 4;
    require_error(api().memory_fill(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_fill(10 bytes, 4)");
    a.bytes = 12;
    a.pattern_size = 3;
    require_error(api().memory_fill(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_fill(pattern 3)");
  }
  SECTION("a transfer beyond the allocation") {
    host::memory m = f.alloc(100);
    std::vector<unsigned char> buf(128);
    pcy_memory_transfer_args a{};
    a.struct_size = sizeof a;
    a.queue = f.q.get();
    a.memory = m.get();
    a.offset = 50;
    a.host_pointer = buf.data();
    a.bytes = 51;
    a.blocking = true;
    require_error(api().memory_read(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_read(overrun)");
    require_error(api().memory_write(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_write(overrun)");
  }
  SECTION("an argument struct older than the plugin needs") {
    pcy_memory_alloc_args a{};
    a.struct_size = offsetof(pcy_memory_alloc_args, bytes); // ends before fields it must read
    a.context = f.ctx.get();
    a.bytes = 64;
    require_error(api().memory_alloc(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_alloc(short args)");
  }
}

TEST_CASE("export and import, when supported, alias the same bytes") {
  fixture f;
  if (api().memory_export == nullptr && api().memory_import == nullptr) {
    SUCCEED(g_name << " has neither export nor import: nothing to check");
    return;
  }
  const uint64_t bytes = 4097;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
  int exported = 0;
  if (api().memory_export != nullptr) {
    for (pcy_handle_kind kind :
         {PCY_HANDLE_HOST_POINTER, PCY_HANDLE_CUDA_DEVICE_POINTER, PCY_HANDLE_OPENCL_BUFFER}) {
      INFO("handle kind " << kind);
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      pcy_memory_export_args a{};
      a.struct_size = sizeof a;
      a.memory = m.get();
      a.kind = kind;
      a.handle = &h;
      if (pcy_error* e = api().memory_export(&a)) {
        require_error(e, {PCY_ERR_UNSUPPORTED}, "memory_export(kind it does not offer)");
        continue;
      }
      ++exported;
      CHECK(h.kind == kind);
      CHECK(h.bytes >= bytes);
      if (kind == PCY_HANDLE_HOST_POINTER) {
        REQUIRE(h.host_pointer != nullptr);
        host::finish(f.fw, f.q.get());
        CHECK(std::memcmp(h.host_pointer, data.data(), bytes) == 0);
      }
      if (api().memory_import == nullptr) continue;
      pcy_memory_import_args ia{};
      ia.struct_size = sizeof ia;
      ia.context = f.ctx.get();
      ia.device = 0;
      ia.handle = &h;
      if (pcy_error* e = api().memory_import(&ia)) {
        require_error(e, {PCY_ERR_UNSUPPORTED}, "memory_import(own export)");
        continue;
      }
      host::memory alias(ia.memory, api().memory_free);
      const auto fresh = random_bytes(bytes);
      host::write(f.fw, f.q.get(), alias.get(), 0, fresh.data(), bytes);
      CHECK(f.read_all(m.get(), bytes) == fresh); // written through one, read through the other
      host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
      CHECK(f.read_all(alias.get(), bytes) == data);
    }
  }
  if (api().memory_import != nullptr) {
    SECTION("importing plain host memory, if accepted, aliases it") {
      std::vector<unsigned char> buffer(bytes + 4096);
      auto* aligned = reinterpret_cast<unsigned char*>(
          (reinterpret_cast<uintptr_t>(buffer.data()) + 4095) & ~uintptr_t{4095});
      const auto mine = random_bytes(bytes);
      std::memcpy(aligned, mine.data(), bytes);
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      h.kind = PCY_HANDLE_HOST_POINTER;
      h.bytes = bytes;
      h.host_pointer = aligned;
      pcy_memory_import_args ia{};
      ia.struct_size = sizeof ia;
      ia.context = f.ctx.get();
      ia.handle = &h;
      if (pcy_error* e = api().memory_import(&ia)) {
        require_error(e, {PCY_ERR_UNSUPPORTED}, "memory_import(plain host memory)");
      } else {
        host::memory alias(ia.memory, api().memory_free);
        CHECK(f.read_all(alias.get(), bytes) == mine);
        const auto fresh = random_bytes(bytes);
        host::write(f.fw, f.q.get(), alias.get(), 0, fresh.data(), bytes);
        host::finish(f.fw, f.q.get());
        CHECK(std::memcmp(aligned, fresh.data(), bytes) == 0);
      }
    }
    SECTION("importing a handle of no kind is refused") {
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      h.kind = PCY_HANDLE_NONE;
      pcy_memory_import_args ia{};
      ia.struct_size = sizeof ia;
      ia.context = f.ctx.get();
      ia.handle = &h;
      require_error(api().memory_import(&ia), {PCY_ERR_UNSUPPORTED, PCY_ERR_INVALID_ARGUMENT},
                    "memory_import(PCY_HANDLE_NONE)");
    }
  }
  INFO(exported << " handle kinds exported");
  SUCCEED();
}

TEST_CASE("native handles, when supported") {
  fixture f;
  if (api().native_handle == nullptr) {
    SUCCEED(g_name << " offers no native handles");
    return;
  }
  host::memory m = f.alloc(256);
  for (pcy_native_object o : {PCY_NATIVE_DEVICE, PCY_NATIVE_CONTEXT, PCY_NATIVE_QUEUE,
                              PCY_NATIVE_MEMORY, PCY_NATIVE_PLATFORM}) {
    INFO("native object " << o);
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = o;
    a.context = f.ctx.get();
    a.device = 0;
    a.queue = f.q.get();
    a.memory = m.get();
    if (pcy_error* e = api().native_handle(&a)) {
      require_error(e, {PCY_ERR_UNSUPPORTED}, "native_handle(object it does not offer)");
      continue;
    }
    // A CUDA device is an ordinal, so device 0 is a NULL handle; every other object is a pointer.
    if (o != PCY_NATIVE_DEVICE) CHECK(a.handle != nullptr);
    // The same object gives the same handle: it is borrowed, not made per call.
    pcy_native_handle_args again = a;
    again.handle = nullptr;
    REQUIRE(api().native_handle(&again) == nullptr);
    CHECK(again.handle == a.handle);
  }
}

namespace {
// add_one(float* x, uint32 n): x[i] += 1 for i < n, in each framework's kernel language.
const char* add_one_source(const std::string& fw) {
  if (fw == "opencl")
    return "__kernel void add_one(__global float* x, uint n) {\n"
           "  size_t i = get_global_id(0);\n"
           "  if (i < n) x[i] += 1.0f;\n"
           "}\n";
  if (fw == "cuda")
    return "extern \"C\" __global__ void add_one(float* x, unsigned int n) {\n"
           "  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
           "  if (i < n) x[i] += 1.0f;\n"
           "}\n";
  if (fw == "stub") return "kernel add_one\n";
  return nullptr;
}
} // namespace

TEST_CASE("programs: build, kernel, launch, build errors") {
  if (api().program_build == nullptr) {
    SUCCEED(g_name << " has no program slots: section skipped");
    return;
  }
  REQUIRE(api().program_destroy != nullptr);
  REQUIRE(api().kernel_create != nullptr);
  REQUIRE(api().kernel_destroy != nullptr);
  REQUIRE(api().kernel_launch != nullptr);
  const char* source = add_one_source(g_name);
  if (source == nullptr) {
    WARN("no add_one source for framework '" << g_name << "': program section not run");
    return;
  }
  fixture f;
  pcy_program_build_args b{};
  b.struct_size = sizeof b;
  b.context = f.ctx.get();
  b.source = source;
  pcy_error* err = api().program_build(&b);
  if (err != nullptr) {
    INFO("build failed: " << (err->message ? err->message : ""));
    err->destroy(err);
    FAIL("program_build of a valid add_one failed");
  }
  host::program prog(b.program, api().program_destroy);

  pcy_kernel_create_args k{};
  k.struct_size = sizeof k;
  k.program = prog.get();
  k.name = "add_one";
  REQUIRE(api().kernel_create(&k) == nullptr);
  host::kernel kern(k.kernel, api().kernel_destroy);

  const uint32_t n = 1031; // not a multiple of any work-group size
  const auto v = random_values<float>(n + 5);
  host::memory m = f.alloc((n + 5) * sizeof(float));
  host::write(f.fw, f.q.get(), m.get(), 0, v.data(), v.size() * sizeof(float));
  pcy_kernel_arg args[2] = {};
  args[0].kind = PCY_ARG_MEMORY;
  args[0].memory = m.get();
  args[1].kind = PCY_ARG_SCALAR;
  args[1].value = &n;
  args[1].size = sizeof n;
  pcy_kernel_launch_args l{};
  l.struct_size = sizeof l;
  l.queue = f.q.get();
  l.kernel = kern.get();
  l.dims = 1;
  l.global[0] = n;
  l.args = args;
  l.arg_count = 2;
  REQUIRE(api().kernel_launch(&l) == nullptr);
  std::vector<float> out(n + 5);
  host::read(f.fw, f.q.get(), m.get(), 0, out.data(), out.size() * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    REQUIRE(out[i] == v[i] + 1.0f);
  for (uint32_t i = n; i < n + 5; ++i)
    REQUIRE(out[i] == v[i]); // beyond n: untouched

  SECTION("a kernel name the program lacks") {
    pcy_kernel_create_args bad = k;
    bad.name = "no_such_kernel";
    bad.kernel = nullptr;
    require_error(api().kernel_create(&bad), {PCY_ERR_NOT_FOUND}, "kernel_create(unknown name)");
  }
  SECTION("a source that does not compile gives PCY_ERR_BUILD with the log") {
    pcy_program_build_args bad{};
    bad.struct_size = sizeof bad;
    bad.context = f.ctx.get();
    bad.source = "this is not a kernel @@@ {";
    require_error(api().program_build(&bad), {PCY_ERR_BUILD}, "program_build(garbage)");
  }
  SECTION("a launch with 0 or 4 dimensions is refused") {
    pcy_kernel_launch_args bad = l;
    bad.dims = 0;
    require_error(api().kernel_launch(&bad), {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_LAUNCH},
                  "kernel_launch(0 dims)");
    bad.dims = 4;
    require_error(api().kernel_launch(&bad), {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_LAUNCH},
                  "kernel_launch(4 dims)");
  }
}

TEST_CASE("log messages reach the host's callback with the plugin's name") {
  { host::framework fw(&api(), &g_services); }
  std::lock_guard lock(g_log_mutex);
  for (const auto& line : g_log) {
    INFO(line);
    CHECK(line.find(" " + g_name + ":") != std::string::npos);
  }
}

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::cerr << "usage: " << argv[0] << " <framework> [--built|--required] [Catch2 options]\n";
    return 2;
  }
  g_name = argv[1];
  bool built = false, required = false;
  std::vector<char*> rest{argv[0]};
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--required")
      built = required = true;
    else if (arg == "--built")
      built = true;
    else
      rest.push_back(argv[i]);
  }

  parenchyma::RegistryOptions o;
  o.default_config = false;
  // Only PARENCHYMA_PLUGIN_PATH is taken from the real environment (to test a plugin that is
  // not in the build tree); nothing else may change what the suite sees.
  o.environment = std::map<std::string, std::string>{};
  if (const char* extra = std::getenv("PARENCHYMA_PLUGIN_PATH");
      extra != nullptr && g_name != "stub")
    (*o.environment)["PARENCHYMA_PLUGIN_PATH"] = extra;
  if (g_name == "stub") {
    o.plugin_paths = {stub_dir("good")};
    o.default_plugin_dir = false;
  } else if (const char* dir = PCY_TEST_PLUGIN_DIR; *dir != '\0') {
    o.plugin_paths = {dir}; // the build tree's plugin directory, even if the core moves
    o.default_plugin_dir = false;
  }
  static parenchyma::Registry registry(o);

  auto give_up = [&](const std::string& why, bool must) {
    if (must) {
      std::cout << "FAILED: " << g_name << ": " << why << " (built in this tree: it must work)\n"
                << describe(registry);
      return 1;
    }
    std::cout << "SKIPPED: " << g_name << ": " << why << "\n";
    return 77;
  };
  g_fw = registry.find_framework(g_name);
  if (g_fw == nullptr) {
    std::string why = "plugin not found";
    for (const auto& e : registry.load_report())
      if (e.name == g_name || contains(e.path, "parenchyma-" + g_name + "."))
        why = "plugin " + e.status + " at stage " + e.stage + ": " + e.reason;
    return give_up(why, built);
  }
  if (g_fw->devices().empty())
    return give_up("0 devices: " + (g_fw->reason().empty() ? "no reason given" : g_fw->reason()),
                   required);

  std::cout << "conformance: " << g_name << " " << g_fw->version() << " from " << g_fw->path()
            << ", " << g_fw->devices().size() << " device(s), first: " << g_fw->devices()[0].name
            << "\n";
  Catch::Session session;
  const int rc = session.applyCommandLine(static_cast<int>(rest.size()), rest.data());
  if (rc != 0) return rc;
  return session.run();
}
