// parenchyma-conformance: the framework suite — one set of checks every framework plugin must
// pass, driven through the raw C table with the SDK's host-side RAII wrappers (modelled on oneAPI
// UR's CTS). Each case makes its own plugin instance (beside the registry's), with host services
// of the suite's own: log messages are kept and checked, settings answer as the host's do.
// Optional parts (export/import, native handles, programs, graphs) are skipped with the reason when
// the plugin does not offer them.
#include "suites.hpp"

#include <parenchyma/sdk/cuda_source.hpp>
#include <parenchyma/sdk/host.hpp>
#include <parenchyma/sdk/launch.hpp>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace parenchyma::conformance {

namespace {

namespace host = parenchyma::sdk::host;

// What the cases share for one framework: set up once, torn down before the next.
struct fw_state {
  Registry* registry = nullptr;
  const Framework* fw = nullptr;
  std::string name;
  std::string add_one;          // the add_one kernel in the framework's language; empty: none known
  bool add_one_builtin = false; // ours: it keeps PCY_KERNEL_WAITS_FOR_PRIOR's promise

  std::mutex log_mutex;
  std::vector<std::string> log; // every message the suite's instances logged
  std::mutex settings_mutex;
  std::map<std::string, std::optional<std::string>> settings; // answered once, kept until reset
  std::string cache_dir;
  pcy_host_services services{};

  const pcy_framework_api& api() const { return fw->api(); }
  size_t device_count() const { return fw->devices().size(); }
};

void log_sink(void* user, pcy_log_level level, const char* origin, const char* message) {
  auto& s = *static_cast<fw_state*>(user);
  std::lock_guard lock(s.log_mutex);
  s.log.push_back(std::to_string(static_cast<int>(level)) + " " + (origin ? origin : "?") + ": " +
                  (message ? message : "(null)"));
}

// The host's rule for settings (pcy_base.h): the environment as the registry sees it, else the
// config's "settings"; the string lives as long as the state.
const char* setting(void* user, const char* name) {
  if (name == nullptr) return nullptr;
  auto& s = *static_cast<fw_state*>(user);
  std::lock_guard lock(s.settings_mutex);
  auto [it, fresh] = s.settings.try_emplace(name);
  if (fresh) {
    if (auto v = s.registry->env(name))
      it->second = *v;
    else if (auto c = s.registry->config().settings.find(name);
             c != s.registry->config().settings.end())
      it->second = c->second;
  }
  return it->second ? it->second->c_str() : nullptr;
}

// A pcy_error that a bad argument must produce: the right code, our plugin as origin, a message.
// Returns the message (for a skip that quotes the plugin).
std::string require_error(const fw_state& s, pcy_error* e, std::initializer_list<pcy_status> codes,
                          const char* what) {
  PCY_INFO("expected an error from: ", what);
  PCY_REQUIRE(e != nullptr);
  PCY_INFO("got code ", static_cast<int>(e->code), ", origin '", e->origin ? e->origin : "(null)",
           "', message '", e->message ? e->message : "(null)", "'");
  PCY_CHECK(e->struct_size >= sizeof(pcy_error));
  bool code_ok = false;
  for (auto c : codes)
    code_ok = code_ok || e->code == c;
  PCY_CHECK(code_ok);
  PCY_REQUIRE(e->origin != nullptr);
  PCY_CHECK(std::string(e->origin) == s.name);
  PCY_REQUIRE(e->message != nullptr);
  PCY_CHECK(std::strlen(e->message) > 0);
  PCY_REQUIRE(e->destroy != nullptr);
  std::string message = e->message;
  e->destroy(e);
  return message;
}

// One plugin instance of our own, with a context and a queue on device 0.
struct fixture {
  explicit fixture(const fw_state& s)
      : fw(&s.api(), &s.services), ctx(host::make_context(fw, {&device0, 1})),
        q(host::make_queue(fw, ctx.get(), 0)) {}

  host::memory alloc(uint64_t bytes) { return host::alloc(fw, ctx.get(), 0, bytes); }
  std::vector<unsigned char> read_all(pcy_memory m, uint64_t bytes) {
    std::vector<unsigned char> out(bytes);
    host::read(fw, q.get(), m, 0, out.data(), bytes);
    return out;
  }

  host::framework fw;
  uint32_t device0 = 0;
  host::context ctx;
  host::queue q;
};

constexpr uint64_t awkward_sizes[] = {1, 3, 4097, (uint64_t{1} << 20) + 13};

// The CUDA add_one waits for prior work first (the SDK's early-launch macros, from its common
// CUDA source): it may be created with PCY_KERNEL_WAITS_FOR_PRIOR.
constexpr const char* add_one_cuda = R"CUDA(
extern "C" __global__ void add_one(float* x, unsigned int n) {
  PCY_WAIT_PRIOR();
  PCY_START_NEXT();
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)CUDA";

// add_one(float* x, uint32 n): x[i] += 1 for i < n, in each framework's kernel language.
const char* builtin_add_one(const std::string& fw) {
  if (fw == "opencl")
    return "__kernel void add_one(__global float* x, uint n) {\n"
           "  size_t i = get_global_id(0);\n"
           "  if (i < n) x[i] += 1.0f;\n"
           "}\n";
  if (fw == "cuda") return sdk::cuda_source_with<add_one_cuda>().c_str();
  // GLSL: buffers fill the bindings of set 0, scalars the push-constant block (docs/vulkan.md).
  if (fw == "vulkan")
    return "#version 450\n"
           "#kernel add_one\n"
           "layout(local_size_x = 64) in;\n"
           "layout(std430, set = 0, binding = 0) buffer data { float x[]; };\n"
           "layout(push_constant) uniform args { uint n; };\n"
           "void main() {\n"
           "  uint i = gl_GlobalInvocationID.x;\n"
           "  if (i < n) x[i] += 1.0;\n"
           "}\n";
  if (fw == "stub" || fw == "mock") return "kernel add_one\n";
  return nullptr;
}

using body = void (*)(fw_state&);

void probe_and_properties(fw_state& s) {
  pcy_framework_probe p{};
  p.struct_size = sizeof p;
  PCY_REQUIRE(s.api().probe(s.fw->plugin(), &p) == nullptr);
  PCY_REQUIRE(p.device_count == s.device_count());
  PCY_REQUIRE(p.device_count > 0);
  PCY_CHECK(s.api().kind == PCY_PLUGIN_FRAMEWORK);
  PCY_CHECK(s.api().abi_major == PCY_ABI_VERSION_MAJOR);
  PCY_CHECK(std::string(s.api().name) == s.name);
  PCY_REQUIRE(s.api().plugin_version != nullptr);
  PCY_REQUIRE(s.api().description != nullptr);
  PCY_CHECK(std::strlen(s.api().description) > 0);

  for (uint32_t d = 0; d < p.device_count; ++d) {
    const pcy_property* props = nullptr;
    size_t count = 0;
    PCY_REQUIRE(s.api().device_properties(s.fw->plugin(), d, &props, &count) == nullptr);
    PCY_REQUIRE(props != nullptr);
    std::set<std::string> keys;
    bool has_name = false, has_kind = false;
    for (size_t i = 0; i < count; ++i) {
      const pcy_property& pr = props[i];
      PCY_REQUIRE(pr.struct_size >= sizeof(pcy_property));
      PCY_REQUIRE(pr.key != nullptr);
      const std::string key = pr.key;
      PCY_INFO("device ", d, " property ", key);
      PCY_CHECK(keys.insert(key).second, "duplicate key");
      switch (pr.type) {
      case PCY_VALUE_STRING: PCY_REQUIRE(pr.s != nullptr); break;
      case PCY_VALUE_BOOL: PCY_CHECK((pr.i == 0 || pr.i == 1)); break;
      case PCY_VALUE_INT:
      case PCY_VALUE_FLOAT: break;
      default: PCY_CHECK(false, "unknown value type ", static_cast<int>(pr.type));
      }
      if (key == PCY_PROP_NAME) {
        has_name = pr.type == PCY_VALUE_STRING && std::strlen(pr.s) > 0;
      } else if (key == PCY_PROP_VENDOR || key == PCY_PROP_DRIVER_VERSION || key == PCY_PROP_UUID) {
        PCY_CHECK(pr.type == PCY_VALUE_STRING);
      } else if (key == PCY_PROP_KIND) {
        has_kind =
            pr.type == PCY_VALUE_INT && pr.i >= PCY_DEVICE_OTHER && pr.i <= PCY_DEVICE_ACCELERATOR;
      } else if (key == PCY_PROP_COMPUTE_UNITS || key == PCY_PROP_GLOBAL_MEMORY ||
                 key == PCY_PROP_MAX_WORK_GROUP) {
        PCY_CHECK(pr.type == PCY_VALUE_INT);
        PCY_CHECK(pr.i > 0);
      } else if (key == PCY_PROP_LOCAL_MEMORY) {
        PCY_CHECK(pr.type == PCY_VALUE_INT);
        PCY_CHECK(pr.i >= 0);
      } else if (key == PCY_PROP_HOST_UNIFIED || key == PCY_PROP_FP64) {
        PCY_CHECK(pr.type == PCY_VALUE_BOOL);
      }
    }
    PCY_INFO("device ", d);
    PCY_CHECK(has_name, "a non-empty string property \"name\"");
    PCY_CHECK(has_kind, "an int property \"kind\" holding a pcy_device_kind");
  }
  const pcy_property* props = nullptr;
  size_t count = 0;
  require_error(s, s.api().device_properties(s.fw->plugin(), p.device_count, &props, &count),
                {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "device_properties(out of range)");
}

void second_instance(fw_state& s) {
  host::framework second(&s.api(), &s.services);
  PCY_REQUIRE(second.plugin() != nullptr);
  PCY_CHECK(second.probe().device_count == s.device_count());
  PCY_CHECK(!second.properties(0).empty());
}

void other_major_refused(fw_state& s) {
  pcy_host_services future = s.services;
  future.host_abi_major = PCY_ABI_VERSION_MAJOR + 1;
  pcy_framework_init_args a{};
  a.struct_size = sizeof a;
  a.host = &future;
  pcy_error* e = s.api().initialize(&a);
  if (e == nullptr && a.plugin != nullptr) s.api().shutdown(a.plugin);
  require_error(s, e, {PCY_ERR_VERSION}, "initialize(host ABI major + 1)");
}

void threads_own_contexts(fw_state& s) {
  host::framework fw(&s.api(), &s.services);
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
    PCY_CHECK(ok[t] == 1, "thread ", t, " did not read back what it wrote");
}

std::vector<uint32_t> every_device(host::framework& fw) {
  const uint32_t n = fw.probe().device_count;
  std::vector<uint32_t> all(n);
  for (uint32_t i = 0; i < n; ++i)
    all[i] = i;
  return all;
}

void lifecycle_every_device(fw_state& s) {
  host::framework fw(&s.api(), &s.services);
  std::vector<uint32_t> all = every_device(fw);
  const auto n = static_cast<uint32_t>(all.size());
  pcy_context raw = nullptr;
  if (pcy_error* e = s.api().context_create(fw.plugin(), all.data(), n, &raw)) {
    // Devices of different platforms (OpenCL) cannot share a context: the plugin must say so
    // with INVALID_ARGUMENT; then each device gets a context of its own.
    require_error(s, e, {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_UNSUPPORTED},
                  "context over every device");
    for (uint32_t i = 0; i < n; ++i) {
      host::context one = host::make_context(fw, {&all[i], 1});
      host::queue q = host::make_queue(fw, one.get(), 0);
      PCY_REQUIRE(static_cast<bool>(q));
      host::finish(fw, q.get());
    }
  } else {
    host::context ctx(raw, s.api().context_destroy);
    for (uint32_t i = 0; i < n; ++i) {
      host::queue q = host::make_queue(fw, ctx.get(), i);
      PCY_REQUIRE(static_cast<bool>(q));
      host::finish(fw, q.get());
    }
  }
}

void lifecycle_events(fw_state& s) {
  host::framework fw(&s.api(), &s.services);
  const uint32_t d0 = 0;
  host::context ctx = host::make_context(fw, {&d0, 1});
  host::queue a = host::make_queue(fw, ctx.get(), 0);
  host::queue b = host::make_queue(fw, ctx.get(), 0);
  for (int round = 0; round < 3; ++round) {
    pcy_event e = nullptr;
    PCY_REQUIRE(s.api().event_record(a.get(), &e) == nullptr);
    PCY_REQUIRE(e != nullptr);
    host::event owned(e, s.api().event_destroy);
    PCY_REQUIRE(s.api().queue_wait_event(b.get(), e) == nullptr);
    PCY_REQUIRE(s.api().event_wait(e) == nullptr);
    PCY_REQUIRE(s.api().event_wait(e) == nullptr, "waiting twice is allowed");
  }
  host::finish(fw, a.get());
  host::finish(fw, b.get());
}

void lifecycle_repeated(fw_state& s) {
  host::framework fw(&s.api(), &s.services);
  for (int i = 0; i < 8; ++i) {
    const uint32_t d0 = 0;
    host::context ctx = host::make_context(fw, {&d0, 1});
    host::queue q = host::make_queue(fw, ctx.get(), 0);
    host::memory m = host::alloc(fw, ctx.get(), 0, 64);
    PCY_REQUIRE(static_cast<bool>(m));
  }
}

// Each device keeps its own bytes: a context of its own, an allocation, a round trip. (Device
// indices beyond 0 are where a plugin that thinks in "the" device goes wrong.)
void every_device_round_trip(fw_state& s) {
  host::framework fw(&s.api(), &s.services);
  std::vector<std::vector<unsigned char>> data;
  std::vector<host::context> contexts;
  std::vector<host::queue> queues;
  std::vector<host::memory> memories;
  for (uint32_t d : every_device(fw)) {
    PCY_INFO("device ", d);
    contexts.push_back(host::make_context(fw, {&d, 1}));
    queues.push_back(host::make_queue(fw, contexts.back().get(), 0));
    data.push_back(random_bytes(4099 + d));
    memories.push_back(host::alloc(fw, contexts.back().get(), 0, data.back().size()));
    host::write(fw, queues.back().get(), memories.back().get(), 0, data.back().data(),
                data.back().size());
  }
  for (size_t d = 0; d < data.size(); ++d) {
    PCY_INFO("device ", d);
    std::vector<unsigned char> back(data[d].size());
    host::read(fw, queues[d].get(), memories[d].get(), 0, back.data(), back.size());
    PCY_CHECK(back == data[d]);
  }
}

void alloc_awkward(fw_state& s) {
  fixture f(s);
  for (uint64_t bytes : awkward_sizes) {
    PCY_INFO("bytes ", bytes);
    host::memory m = f.alloc(bytes);
    PCY_REQUIRE(static_cast<bool>(m));
  }
  host::memory a = f.alloc(4096), b = f.alloc(4096);
  PCY_CHECK(a.get() != b.get());
}

void round_trip(fw_state& s) {
  fixture f(s);
  for (uint64_t bytes : awkward_sizes) {
    PCY_INFO("bytes ", bytes);
    host::memory m = f.alloc(bytes);
    const auto data = random_bytes(bytes);
    host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
    PCY_CHECK(f.read_all(m.get(), bytes) == data);

    if (bytes < 8) continue;
    // A sub-range at an odd offset, odd length; the rest must stay as it was.
    const uint64_t off = 3, len = bytes - 5;
    const auto patch = random_bytes(len);
    host::write(f.fw, f.q.get(), m.get(), off, patch.data(), len);
    auto expect = data;
    std::copy(patch.begin(), patch.end(), expect.begin() + off);
    PCY_CHECK(f.read_all(m.get(), bytes) == expect);
    std::vector<unsigned char> part(len - 1);
    host::read(f.fw, f.q.get(), m.get(), off + 1, part.data(), part.size());
    PCY_CHECK(std::equal(part.begin(), part.end(), expect.begin() + off + 1));
  }
}

void non_blocking(fw_state& s) {
  fixture f(s);
  const uint64_t bytes = (uint64_t{1} << 20) + 13;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes, /*blocking=*/false);
  host::finish(f.fw, f.q.get());
  std::vector<unsigned char> out(bytes);
  host::read(f.fw, f.q.get(), m.get(), 0, out.data(), bytes, /*blocking=*/false);
  host::finish(f.fw, f.q.get());
  PCY_CHECK(out == data);
}

void event_orders_queues(fw_state& s) {
  fixture f(s);
  host::queue other = host::make_queue(f.fw, f.ctx.get(), 0);
  const uint64_t bytes = 4097;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes, /*blocking=*/false);
  pcy_event e = nullptr;
  PCY_REQUIRE(s.api().event_record(f.q.get(), &e) == nullptr);
  host::event owned(e, s.api().event_destroy);
  PCY_REQUIRE(s.api().queue_wait_event(other.get(), e) == nullptr);
  std::vector<unsigned char> out(bytes);
  host::read(f.fw, other.get(), m.get(), 0, out.data(), bytes);
  PCY_CHECK(out == data);
  PCY_REQUIRE(s.api().event_wait(e) == nullptr);
}

void copy_with_offsets(fw_state& s) {
  fixture f(s);
  for (uint64_t bytes : awkward_sizes) {
    PCY_INFO("bytes ", bytes);
    host::memory src = f.alloc(bytes), dst = f.alloc(bytes + 7);
    const auto a = random_bytes(bytes), b = random_bytes(bytes + 7);
    host::write(f.fw, f.q.get(), src.get(), 0, a.data(), bytes);
    host::write(f.fw, f.q.get(), dst.get(), 0, b.data(), bytes + 7);
    host::copy(f.fw, f.q.get(), src.get(), 0, dst.get(), 0, bytes);
    auto expect = b;
    std::copy(a.begin(), a.end(), expect.begin());
    PCY_CHECK(f.read_all(dst.get(), bytes + 7) == expect);
    if (bytes < 8) continue;
    host::copy(f.fw, f.q.get(), src.get(), 1, dst.get(), 6, bytes - 2);
    std::copy(a.begin() + 1, a.begin() + 1 + static_cast<long>(bytes - 2), expect.begin() + 6);
    PCY_CHECK(f.read_all(dst.get(), bytes + 7) == expect);
  }
}

void fill_patterns(fw_state& s) {
  fixture f(s);
  for (uint32_t ps : {1u, 2u, 4u, 8u, 16u}) {
    PCY_INFO("pattern size ", ps);
    const uint64_t count = 1001, off = uint64_t{ps} * 3, total = off + ps * count + 16;
    host::memory m = f.alloc(total);
    const auto before = random_bytes(total);
    host::write(f.fw, f.q.get(), m.get(), 0, before.data(), total);
    const auto pattern = random_bytes(ps);
    host::fill(f.fw, f.q.get(), m.get(), off, ps * count, pattern.data(), ps);
    auto expect = before;
    for (uint64_t i = 0; i < count; ++i)
      std::copy(pattern.begin(), pattern.end(), expect.begin() + static_cast<long>(off + i * ps));
    PCY_CHECK(f.read_all(m.get(), total) == expect);
  }
}

void bad_zero_alloc(fw_state& s) {
  fixture f(s);
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = f.ctx.get();
  a.bytes = 0;
  require_error(s, s.api().memory_alloc(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_alloc(0 bytes)");
}

void bad_device(fw_state& s) {
  fixture f(s);
  const auto bad = static_cast<uint32_t>(s.device_count());
  pcy_context c = nullptr;
  require_error(s, s.api().context_create(f.fw.plugin(), &bad, 1, &c),
                {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "context_create(bad device)");
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = f.ctx.get();
  a.device = 1; // the fixture's context has one device: index 1 is outside it
  a.bytes = 64;
  require_error(s, s.api().memory_alloc(&a), {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT},
                "memory_alloc(device outside the context)");
  pcy_queue q = nullptr;
  require_error(s, s.api().queue_create(f.ctx.get(), 1, &q),
                {PCY_ERR_NOT_FOUND, PCY_ERR_INVALID_ARGUMENT}, "queue_create(bad device)");
}

void bad_fill(fw_state& s) {
  fixture f(s);
  host::memory m = f.alloc(64);
  const uint32_t pattern = 0x01020304;
  pcy_memory_fill_args a{};
  a.struct_size = sizeof a;
  a.queue = f.q.get();
  a.memory = m.get();
  a.bytes = 10;
  a.pattern = &pattern;
  a.pattern_size = 4;
  require_error(s, s.api().memory_fill(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_fill(10 bytes, 4)");
  a.bytes = 12;
  a.pattern_size = 3;
  require_error(s, s.api().memory_fill(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_fill(pattern 3)");
}

void bad_transfer(fw_state& s) {
  fixture f(s);
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
  require_error(s, s.api().memory_read(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_read(overrun)");
  require_error(s, s.api().memory_write(&a), {PCY_ERR_INVALID_ARGUMENT}, "memory_write(overrun)");
}

void bad_short_struct(fw_state& s) {
  fixture f(s);
  pcy_memory_alloc_args a{};
  a.struct_size = offsetof(pcy_memory_alloc_args, bytes); // ends before fields it must read
  a.context = f.ctx.get();
  a.bytes = 64;
  require_error(s, s.api().memory_alloc(&a), {PCY_ERR_INVALID_ARGUMENT},
                "memory_alloc(short args)");
}

void export_import(fw_state& s) {
  if (s.api().memory_export == nullptr)
    skip(s.name + " has no memory_export (NULL slot); import is checked by the next cases");
  fixture f(s);
  const uint64_t bytes = 4097;
  host::memory m = f.alloc(bytes);
  const auto data = random_bytes(bytes);
  host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
  int exported = 0, imported = 0;
  std::string refusal;
  for (pcy_handle_kind kind :
       {PCY_HANDLE_HOST_POINTER, PCY_HANDLE_CUDA_DEVICE_POINTER, PCY_HANDLE_OPENCL_BUFFER}) {
    PCY_INFO("handle kind ", static_cast<int>(kind));
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    pcy_memory_export_args a{};
    a.struct_size = sizeof a;
    a.memory = m.get();
    a.kind = kind;
    a.handle = &h;
    if (pcy_error* e = s.api().memory_export(&a)) {
      refusal = require_error(s, e, {PCY_ERR_UNSUPPORTED}, "memory_export(kind it does not offer)");
      continue;
    }
    ++exported;
    PCY_CHECK(h.kind == kind);
    PCY_CHECK(h.bytes >= bytes);
    if (kind == PCY_HANDLE_HOST_POINTER) {
      PCY_REQUIRE(h.host_pointer != nullptr);
      host::finish(f.fw, f.q.get());
      PCY_CHECK(std::memcmp(h.host_pointer, data.data(), bytes) == 0);
    }
    if (s.api().memory_import == nullptr) continue;
    pcy_memory_import_args ia{};
    ia.struct_size = sizeof ia;
    ia.context = f.ctx.get();
    ia.device = 0;
    ia.handle = &h;
    if (pcy_error* e = s.api().memory_import(&ia)) {
      require_error(s, e, {PCY_ERR_UNSUPPORTED}, "memory_import(own export)");
      continue;
    }
    ++imported;
    host::memory alias(ia.memory, s.api().memory_free);
    const auto fresh = random_bytes(bytes);
    host::write(f.fw, f.q.get(), alias.get(), 0, fresh.data(), bytes);
    PCY_CHECK(f.read_all(m.get(), bytes) == fresh, "written through one, read through the other");
    host::write(f.fw, f.q.get(), m.get(), 0, data.data(), bytes);
    PCY_CHECK(f.read_all(alias.get(), bytes) == data);
  }
  note(str(exported, " handle kind(s) exported, ", imported, " imported again"));
  if (exported == 0)
    skip(str(s.name, " exports none of the handle kinds (PCY_ERR_UNSUPPORTED: ", refusal, ")"));
}

void import_host_memory(fw_state& s) {
  if (s.api().memory_import == nullptr) skip(s.name + " has no memory_import (NULL slot)");
  fixture f(s);
  const uint64_t bytes = 4097;
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
  if (pcy_error* e = s.api().memory_import(&ia))
    skip(str(s.name, " does not import plain host memory (PCY_ERR_UNSUPPORTED: ",
             require_error(s, e, {PCY_ERR_UNSUPPORTED}, "memory_import(plain host memory)"), ")"));
  host::memory alias(ia.memory, s.api().memory_free);
  PCY_CHECK(f.read_all(alias.get(), bytes) == mine);
  const auto fresh = random_bytes(bytes);
  host::write(f.fw, f.q.get(), alias.get(), 0, fresh.data(), bytes);
  host::finish(f.fw, f.q.get());
  PCY_CHECK(std::memcmp(aligned, fresh.data(), bytes) == 0, "the alias wrote the host bytes");
}

void import_none_refused(fw_state& s) {
  if (s.api().memory_import == nullptr) skip(s.name + " has no memory_import (NULL slot)");
  fixture f(s);
  pcy_memory_handle h{};
  h.struct_size = sizeof h;
  h.kind = PCY_HANDLE_NONE;
  pcy_memory_import_args ia{};
  ia.struct_size = sizeof ia;
  ia.context = f.ctx.get();
  ia.handle = &h;
  require_error(s, s.api().memory_import(&ia), {PCY_ERR_UNSUPPORTED, PCY_ERR_INVALID_ARGUMENT},
                "memory_import(PCY_HANDLE_NONE)");
}

void native_handles(fw_state& s) {
  if (s.api().native_handle == nullptr) skip(s.name + " offers no native handles (NULL slot)");
  fixture f(s);
  host::memory m = f.alloc(256);
  int answered = 0;
  for (pcy_native_object o : {PCY_NATIVE_DEVICE, PCY_NATIVE_CONTEXT, PCY_NATIVE_QUEUE,
                              PCY_NATIVE_MEMORY, PCY_NATIVE_PLATFORM}) {
    PCY_INFO("native object ", static_cast<int>(o));
    pcy_native_handle_args a{};
    a.struct_size = sizeof a;
    a.object = o;
    a.context = f.ctx.get();
    a.device = 0;
    a.queue = f.q.get();
    a.memory = m.get();
    if (pcy_error* e = s.api().native_handle(&a)) {
      require_error(s, e, {PCY_ERR_UNSUPPORTED}, "native_handle(object it does not offer)");
      continue;
    }
    ++answered;
    // A CUDA device is an ordinal, so device 0 is a NULL handle; every other object is a pointer.
    if (o != PCY_NATIVE_DEVICE) PCY_CHECK(a.handle != nullptr);
    // The same object gives the same handle: it is borrowed, not made per call.
    pcy_native_handle_args again = a;
    again.handle = nullptr;
    PCY_REQUIRE(s.api().native_handle(&again) == nullptr);
    PCY_CHECK(again.handle == a.handle, "the same object gave another handle");
  }
  note(str(answered, " of 5 native object kinds answered"));
}

// The add_one program and kernel of a fixture, or a skip saying why there is none.
struct add_one_program {
  host::program program;
  host::kernel kernel;
};
add_one_program build_add_one(fw_state& s, fixture& f, uint32_t flags = 0,
                              size_t create_size = sizeof(pcy_kernel_create_args)) {
  if (s.api().program_build == nullptr) skip(s.name + " has no program slots (NULL)");
  PCY_REQUIRE(s.api().program_destroy != nullptr);
  PCY_REQUIRE(s.api().kernel_create != nullptr);
  PCY_REQUIRE(s.api().kernel_destroy != nullptr);
  PCY_REQUIRE(s.api().kernel_launch != nullptr);
  if (s.add_one.empty())
    skip("no add_one kernel source for framework '" + s.name +
         "': give one in its language with --kernel-source FILE");
  pcy_program_build_args b{};
  b.struct_size = sizeof b;
  b.context = f.ctx.get();
  b.source = s.add_one.c_str();
  if (pcy_error* err = s.api().program_build(&b)) {
    const std::string message = err->message ? err->message : "";
    const bool unsupported = err->code == PCY_ERR_UNSUPPORTED;
    err->destroy(err);
    // A slot that answers "unsupported" is what a NULL slot means to the host (abi.md C5).
    if (unsupported) skip(s.name + " does not build programs: " + message);
    PCY_REQUIRE(false, "program_build of a valid add_one failed: ", message);
  }
  add_one_program p;
  p.program = host::program(b.program, s.api().program_destroy);
  pcy_kernel_create_args k{};
  k.struct_size = create_size;
  k.program = p.program.get();
  k.name = "add_one";
  k.flags = flags; // beyond a 1.0-sized struct: the plugin must not read it
  PCY_REQUIRE(s.api().kernel_create(&k) == nullptr);
  p.kernel = host::kernel(k.kernel, s.api().kernel_destroy);
  return p;
}

// One launch of add_one over the first n floats of m.
pcy_error* launch_add_one(fw_state& s, fixture& f, const add_one_program& p, pcy_memory m,
                          const uint32_t& n) {
  const pcy_kernel_arg args[2] = {{PCY_ARG_MEMORY, m, nullptr, 0},
                                  {PCY_ARG_SCALAR, nullptr, &n, sizeof n}};
  const pcy_kernel_launch_args l =
      sdk::launch_args(f.q.get(), p.kernel.get(), 1, {n, 1, 1}, {0, 0, 0}, args, 2);
  return s.api().kernel_launch(&l);
}

void programs_launch(fw_state& s) {
  fixture f(s);
  add_one_program p = build_add_one(s, f);
  const uint32_t n = 1031; // not a multiple of any work-group size
  const auto v = random_values<float>(n + 5);
  host::memory m = f.alloc((n + 5) * sizeof(float));
  host::write(f.fw, f.q.get(), m.get(), 0, v.data(), v.size() * sizeof(float));
  PCY_REQUIRE(launch_add_one(s, f, p, m.get(), n) == nullptr);
  std::vector<float> out(n + 5);
  host::read(f.fw, f.q.get(), m.get(), 0, out.data(), out.size() * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    PCY_REQUIRE(out[i] == v[i] + 1.0f, "element ", i);
  for (uint32_t i = n; i < n + 5; ++i)
    PCY_REQUIRE(out[i] == v[i], "element ", i, " beyond n: must be untouched");
}

// Kernel flags (1.3): add_one created with PCY_KERNEL_WAITS_FOR_PRIOR (and a bit no minor
// defines, which must be ignored) or from a 1.0-sized struct, launched 64 times in a row on one
// buffer: each launch must see the one before (on CUDA the flag makes the launches early, and
// the kernel's wait keeps them in order).
void programs_kernel_flags(fw_state& s) {
  if (!s.add_one.empty() && !s.add_one_builtin)
    skip("the add_one from --kernel-source may not wait for prior work, as the flag promises");
  for (const bool old_struct : {false, true}) {
    PCY_INFO(old_struct ? "a 1.0-sized pcy_kernel_create_args" : "flags WAITS_FOR_PRIOR | 1 << 31");
    fixture f(s);
    add_one_program p = build_add_one(
        s, f, old_struct ? 0u : PCY_KERNEL_WAITS_FOR_PRIOR | (1u << 31),
        old_struct ? PCY_KERNEL_CREATE_ARGS_SIZE_1_0 : sizeof(pcy_kernel_create_args));
    const uint32_t n = 1031, launches = 64;
    const auto v = random_values<float>(n);
    host::memory m = f.alloc(n * sizeof(float));
    host::write(f.fw, f.q.get(), m.get(), 0, v.data(), v.size() * sizeof(float));
    for (uint32_t i = 0; i < launches; ++i)
      PCY_REQUIRE(launch_add_one(s, f, p, m.get(), n) == nullptr, "launch ", i);
    std::vector<float> out(n);
    host::read(f.fw, f.q.get(), m.get(), 0, out.data(), out.size() * sizeof(float));
    for (uint32_t i = 0; i < n; ++i) {
      float want = v[i];
      for (uint32_t k = 0; k < launches; ++k)
        want += 1.0f;
      PCY_REQUIRE(out[i] == want, "element ", i, ": ", out[i], ", expected ", want);
    }
  }
}

// Graphs (1.2, optional; abi.md G5): a graph made by one capture per step, as the core makes
// them. Skipped where the plugin offers no graph slots or builds no programs.
bool offers_graphs(const fw_state& s) {
  const pcy_framework_api& a = s.api();
  return a.graph_create != nullptr && a.queue_capture_begin != nullptr &&
         a.queue_capture_end != nullptr && a.graph_instantiate != nullptr &&
         a.graph_launch != nullptr && a.graph_destroy != nullptr;
}
using graph_handle = std::unique_ptr<pcy_graph_s, void (*)(pcy_graph)>;
graph_handle make_graph(fw_state& s, fixture& f) {
  pcy_graph g = nullptr;
  if (pcy_error* e = s.api().graph_create(f.q.get(), &g))
    skip(str(s.name, " makes no graphs here (",
             require_error(s, e, {PCY_ERR_UNSUPPORTED}, "graph_create"), ")"));
  PCY_REQUIRE(g != nullptr);
  return graph_handle(g, s.api().graph_destroy);
}

// Launches, a copy and a fill captured in four segments; nothing runs at capture; three launches
// of the graph, with an ordinary launch between two of them, each see the work before; a scalar
// argument changed after capture changes nothing (arguments are taken at capture); the graph is
// destroyed while its last launch may still run.
void graphs_replay(fw_state& s) {
  if (!offers_graphs(s)) skip(s.name + " offers no graph slots (NULL: the host replays ops)");
  fixture f(s);
  add_one_program p = build_add_one(s, f);
  const uint32_t n = 1031, half = 512;
  auto a = random_values<float>(n), b = random_values<float>(n);
  host::memory ma = f.alloc(n * sizeof(float)), mb = f.alloc(n * sizeof(float));
  host::write(f.fw, f.q.get(), ma.get(), 0, a.data(), n * sizeof(float));
  host::write(f.fw, f.q.get(), mb.get(), 0, b.data(), n * sizeof(float));
  host::finish(f.fw, f.q.get());
  graph_handle g = make_graph(s, f);
  uint32_t count = n;
  const float two = 2.0f;
  auto segment = [&](const std::function<void()>& work) {
    PCY_REQUIRE(s.api().queue_capture_begin(f.q.get(), g.get()) == nullptr);
    work();
    PCY_REQUIRE(s.api().queue_capture_end(f.q.get(), g.get()) == nullptr);
  };
  segment([&] { PCY_REQUIRE(launch_add_one(s, f, p, ma.get(), count) == nullptr); });
  segment([&] { host::copy(f.fw, f.q.get(), ma.get(), 0, mb.get(), 4, (n - 1) * sizeof(float)); });
  segment([&] {
    host::fill(f.fw, f.q.get(), ma.get(), 0, half * sizeof(float), &two, sizeof two);
    PCY_REQUIRE(launch_add_one(s, f, p, ma.get(), count) == nullptr);
  });
  PCY_REQUIRE(s.api().graph_instantiate(g.get()) == nullptr);
  count = 0; // captured by value: the graph still runs over n
  PCY_CHECK(f.read_all(ma.get(), n * sizeof(float)) ==
                std::vector<unsigned char>(reinterpret_cast<unsigned char*>(a.data()),
                                           reinterpret_cast<unsigned char*>(a.data() + n)),
            "capturing ran the work");
  auto step = [&] { // the graph, on the host
    for (uint32_t i = 0; i < n; ++i)
      a[i] += 1.0f;
    for (uint32_t i = 0; i + 1 < n; ++i)
      b[i + 1] = a[i];
    for (uint32_t i = 0; i < n; ++i)
      a[i] = (i < half ? two : a[i]) + 1.0f;
  };
  PCY_REQUIRE(s.api().graph_launch(f.q.get(), g.get()) == nullptr);
  step();
  PCY_REQUIRE(s.api().graph_launch(f.q.get(), g.get()) == nullptr);
  step();
  count = n;
  PCY_REQUIRE(launch_add_one(s, f, p, ma.get(), count) == nullptr); // between two launches
  for (uint32_t i = 0; i < n; ++i)
    a[i] += 1.0f;
  PCY_REQUIRE(s.api().graph_launch(f.q.get(), g.get()) == nullptr);
  step();
  g.reset(); // may still run: the plugin frees it after
  std::vector<float> out_a(n), out_b(n);
  host::read(f.fw, f.q.get(), ma.get(), 0, out_a.data(), n * sizeof(float));
  host::read(f.fw, f.q.get(), mb.get(), 0, out_b.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i) {
    PCY_REQUIRE(out_a[i] == a[i], "a[", i, "] = ", out_a[i], ", expected ", a[i]);
    PCY_REQUIRE(out_b[i] == b[i], "b[", i, "] = ", out_b[i], ", expected ", b[i]);
  }
}

// A host wait inside a capture fails, the capture then ends with an error, and the queue runs
// work as before (the broken graph is destroyed unlaunched).
void graphs_refuse_host_wait(fw_state& s) {
  if (!offers_graphs(s)) skip(s.name + " offers no graph slots (NULL: the host replays ops)");
  fixture f(s);
  add_one_program p = build_add_one(s, f);
  const uint32_t n = 100;
  const auto v = random_values<float>(n);
  host::memory m = f.alloc(n * sizeof(float));
  host::write(f.fw, f.q.get(), m.get(), 0, v.data(), n * sizeof(float));
  host::finish(f.fw, f.q.get());
  {
    graph_handle g = make_graph(s, f);
    PCY_REQUIRE(s.api().queue_capture_begin(f.q.get(), g.get()) == nullptr);
    PCY_REQUIRE(launch_add_one(s, f, p, m.get(), n) == nullptr);
    require_error(s, s.api().queue_finish(f.q.get()),
                  {PCY_ERR_UNSUPPORTED, PCY_ERR_INVALID_ARGUMENT, PCY_ERR_DEVICE},
                  "queue_finish while capturing");
    pcy_error* end = s.api().queue_capture_end(f.q.get(), g.get());
    PCY_CHECK(end != nullptr, "capture_end after a refused host wait must report the failure");
    if (end != nullptr) end->destroy(end);
  }
  PCY_REQUIRE(launch_add_one(s, f, p, m.get(), n) == nullptr);
  std::vector<float> out(n);
  host::read(f.fw, f.q.get(), m.get(), 0, out.data(), n * sizeof(float));
  for (uint32_t i = 0; i < n; ++i)
    PCY_REQUIRE(out[i] == v[i] + 1.0f, "element ", i, ": the captured launch ran, or this one not");
}

void programs_unknown_kernel(fw_state& s) {
  fixture f(s);
  add_one_program p = build_add_one(s, f);
  pcy_kernel_create_args bad{};
  bad.struct_size = sizeof bad;
  bad.program = p.program.get();
  bad.name = "no_such_kernel";
  require_error(s, s.api().kernel_create(&bad), {PCY_ERR_NOT_FOUND}, "kernel_create(unknown name)");
}

void programs_build_error(fw_state& s) {
  fixture f(s);
  add_one_program p = build_add_one(s, f); // skips when the plugin builds nothing
  pcy_program_build_args bad{};
  bad.struct_size = sizeof bad;
  bad.context = f.ctx.get();
  bad.source = "this is not a kernel @@@ {";
  require_error(s, s.api().program_build(&bad), {PCY_ERR_BUILD}, "program_build(garbage)");
}

void programs_bad_dims(fw_state& s) {
  fixture f(s);
  add_one_program p = build_add_one(s, f);
  host::memory m = f.alloc(64);
  const uint32_t n = 16;
  pcy_kernel_arg args[2] = {};
  args[0].kind = PCY_ARG_MEMORY;
  args[0].memory = m.get();
  args[1].kind = PCY_ARG_SCALAR;
  args[1].value = &n;
  args[1].size = sizeof n;
  pcy_kernel_launch_args bad{};
  bad.struct_size = sizeof bad;
  bad.queue = f.q.get();
  bad.kernel = p.kernel.get();
  bad.global[0] = n;
  bad.args = args;
  bad.arg_count = 2;
  bad.dims = 0;
  require_error(s, s.api().kernel_launch(&bad), {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_LAUNCH},
                "kernel_launch(0 dims)");
  bad.dims = 4;
  require_error(s, s.api().kernel_launch(&bad), {PCY_ERR_INVALID_ARGUMENT, PCY_ERR_LAUNCH},
                "kernel_launch(4 dims)");
}

// Last: every message the suite's instances logged so far carries the plugin's name.
void log_origin(fw_state& s) {
  { host::framework fw(&s.api(), &s.services); }
  std::lock_guard lock(s.log_mutex);
  for (const auto& line : s.log)
    PCY_CHECK(line.find(" " + s.name + ":") != std::string::npos, "log line: ", line);
  note(str(s.log.size(), " log message(s) checked"));
}

struct named_body {
  const char* name;
  body run;
};
constexpr named_body bodies[] = {
    {"probe and device properties", &probe_and_properties},
    {"a second plugin instance initialises and shuts down beside the registry's", &second_instance},
    {"a host speaking another ABI major is refused at initialize", &other_major_refused},
    {"separate contexts are used from several threads at once", &threads_own_contexts},
    {"lifecycle: a context over every device, a queue on each", &lifecycle_every_device},
    {"lifecycle: several queues, events recorded, waited and destroyed", &lifecycle_events},
    {"lifecycle: contexts can be made and destroyed repeatedly", &lifecycle_repeated},
    {"every device keeps its own bytes", &every_device_round_trip},
    {"alloc and free at awkward sizes", &alloc_awkward},
    {"write and read round trip at awkward sizes and offsets", &round_trip},
    {"non-blocking transfers complete by queue_finish", &non_blocking},
    {"an event recorded after a write orders another queue's read", &event_orders_queues},
    {"copy between allocations, with offsets", &copy_with_offsets},
    {"fill with 1, 2, 4, 8 and 16-byte patterns", &fill_patterns},
    {"bad arguments: a 0-byte allocation", &bad_zero_alloc},
    {"bad arguments: an out-of-range device", &bad_device},
    {"bad arguments: a fill whose size is not a multiple of the pattern", &bad_fill},
    {"bad arguments: a transfer beyond the allocation", &bad_transfer},
    {"bad arguments: an argument struct older than the plugin needs", &bad_short_struct},
    {"export and import, when supported, alias the same bytes", &export_import},
    {"import of plain host memory, if accepted, aliases it", &import_host_memory},
    {"import of a handle of no kind is refused", &import_none_refused},
    {"native handles, when supported", &native_handles},
    {"programs: build add_one, make its kernel, launch it", &programs_launch},
    {"programs: kernel flags (1.3), 64 dependent launches in order", &programs_kernel_flags},
    {"programs: a kernel name the program lacks", &programs_unknown_kernel},
    {"programs: a source that does not compile gives PCY_ERR_BUILD", &programs_build_error},
    {"programs: a launch with 0 or 4 dimensions is refused", &programs_bad_dims},
    {"graphs, when offered: launches, a copy and a fill captured, launched three times",
     &graphs_replay},
    {"graphs, when offered: a host wait inside a capture fails it, the queue works after",
     &graphs_refuse_host_wait},
    {"log messages reach the host's callback with the plugin's name", &log_origin},
};

} // namespace

suite framework_suite() {
  auto st = std::make_shared<fw_state>();
  suite s;
  s.name = "framework";
  s.description = "any framework plugin through its C table: devices, contexts, queues, "
                  "memory, export/import, native handles, programs, graphs, errors";
  s.setup = [st](const target& t) {
    st->registry = &t.registry;
    st->fw = &t.framework;
    st->name = t.framework.name();
    st->add_one = !t.options.add_one_source.empty() ? t.options.add_one_source
                  : builtin_add_one(st->name)       ? builtin_add_one(st->name)
                                                    : "";
    st->add_one_builtin = t.options.add_one_source.empty() && builtin_add_one(st->name) != nullptr;
    if (t.framework.devices().empty())
      skip("0 devices: " +
           (t.framework.reason().empty() ? std::string("no reason given") : t.framework.reason()));
    st->cache_dir = t.registry.env("PARENCHYMA_CACHE_DIR").value_or(t.registry.config().cache_dir);
    pcy_host_services& h = st->services;
    h = pcy_host_services{};
    h.struct_size = sizeof h;
    h.host_abi_major = PCY_ABI_VERSION_MAJOR;
    h.host_abi_minor = PCY_ABI_VERSION_MINOR;
    h.log_user = st.get();
    h.log = &log_sink;
    h.log_level = PCY_LOG_DEBUG;
    h.cache_dir = st->cache_dir.empty() ? nullptr : st->cache_dir.c_str();
    h.setting = &setting;
    h.setting_user = st.get();
  };
  s.teardown = [st] {
    std::lock_guard a(st->log_mutex);
    std::lock_guard b(st->settings_mutex);
    st->log.clear();
    st->settings.clear();
    st->fw = nullptr;
    st->registry = nullptr;
  };
  for (const named_body& b : bodies)
    s.cases.push_back({b.name, [st, run = b.run] { run(*st); }});
  return s;
}

std::vector<suite> make_suites() {
  std::vector<suite> all;
  all.push_back(framework_suite());
  all.push_back(blas_suite());
  all.push_back(nn_suite());
  return all;
}

} // namespace parenchyma::conformance
