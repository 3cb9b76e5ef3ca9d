// The validation layer (docs/validation.md): every rule fires on a deliberate violation with a
// report naming the call, the handle and the rule; a correct program produces no report; leaks
// are counted when the plugins shut down; the switch works from the options, the environment
// and the config; and when it is off the host calls the plugins' own functions.
//
// A buggy host is simulated by calling the registry's (wrapped) tables directly; a misbehaving
// bundle is the stub variant bundle_writes_in (tests/loader).
#include "loader/testing.hpp"
#include "support/catch.hpp"
#include "validate.hpp" // core/src: the layer's counters

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <optional>
#include <sys/wait.h>
#include <thread>

using namespace parenchyma;
using namespace pcy_test;

namespace {

RegistryOptions validated(std::vector<fs::path> paths, bool on = true) {
  RegistryOptions o = isolated(std::move(paths));
  o.validate = on;
  return o;
}

// The plugin's own table, from the library the registry loaded (dlopen finds the same one).
struct raw_library {
  void* lib = nullptr;
  const pcy_framework_api* fw = nullptr;
  explicit raw_library(const fs::path& file) {
    lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO(file << ": " << (lib ? "" : ::dlerror()));
    REQUIRE(lib != nullptr);
    auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    REQUIRE(entry != nullptr);
    fw = entry();
  }
  ~raw_library() { ::dlclose(lib); }
  raw_library(const raw_library&) = delete;
  raw_library& operator=(const raw_library&) = delete;
};
fs::path stub_file() { return stub_dir("good") / "parenchyma-stub.so"; }

// The process environment's PARENCHYMA_VALIDATE, cleared for one test and put back after (the
// whole suite may run with it set).
class env_guard {
public:
  env_guard() {
    if (const char* v = std::getenv("PARENCHYMA_VALIDATE")) saved_ = v;
    ::unsetenv("PARENCHYMA_VALIDATE");
  }
  ~env_guard() {
    if (saved_)
      ::setenv("PARENCHYMA_VALIDATE", saved_->c_str(), 1);
    else
      ::unsetenv("PARENCHYMA_VALIDATE");
  }
  env_guard(const env_guard&) = delete;
  env_guard& operator=(const env_guard&) = delete;

private:
  std::optional<std::string> saved_;
};

// An error the layer returned: origin "validation", INVALID_ARGUMENT, the message naming the
// call, the rule and the given words. Frees it.
void require_report(pcy_error* e, const char* call, const char* rule,
                    std::initializer_list<const char*> words = {}) {
  REQUIRE(e != nullptr);
  const std::string msg = e->message != nullptr ? e->message : "";
  const std::string org = e->origin != nullptr ? e->origin : "";
  const pcy_status code = e->code;
  e->destroy(e);
  INFO("report: " << org << ": " << msg);
  CHECK(org == "validation");
  CHECK(code == PCY_ERR_INVALID_ARGUMENT);
  CHECK(contains(msg, std::string(".") + call + ":"));
  CHECK(contains(msg, std::string("[rule: ") + rule + "]"));
  for (const char* w : words)
    CHECK(contains(msg, w));
}

// The last report of a slot that returns nothing (frees, destroys), and its count.
void require_logged(const validate::counters& before, const char* call, const char* rule,
                    std::initializer_list<const char*> words = {}) {
  const validate::counters now = validate::snapshot();
  REQUIRE(now.violations == before.violations + 1);
  REQUIRE_FALSE(now.messages.empty());
  const std::string& msg = now.messages.back();
  INFO("report: " << msg);
  CHECK(contains(msg, std::string(".") + call + ":"));
  CHECK(contains(msg, std::string("[rule: ") + rule + "]"));
  for (const char* w : words)
    CHECK(contains(msg, w));
  const auto it = now.rules.find(rule);
  const auto was = before.rules.find(rule);
  CHECK((it != now.rules.end() ? it->second : 0) ==
        (was != before.rules.end() ? was->second : 0) + 1);
}

// One context and queue on the stub's device 0, made through a (wrapped) table.
struct stub_objects {
  const pcy_framework_api& api;
  pcy_context ctx = nullptr;
  pcy_queue q = nullptr;
  explicit stub_objects(const Framework& fw) : api(fw.api()) {
    const uint32_t d0 = 0;
    REQUIRE(api.context_create(fw.plugin(), &d0, 1, &ctx) == nullptr);
    REQUIRE(api.queue_create(ctx, 0, &q) == nullptr);
  }
  ~stub_objects() {
    api.queue_destroy(q);
    api.context_destroy(ctx);
  }
  stub_objects(const stub_objects&) = delete;
  stub_objects& operator=(const stub_objects&) = delete;
  pcy_memory alloc(uint64_t bytes) {
    pcy_memory_alloc_args a{};
    a.struct_size = sizeof a;
    a.context = ctx;
    a.bytes = bytes;
    REQUIRE(api.memory_alloc(&a) == nullptr);
    return a.memory;
  }
  pcy_error* write(pcy_queue queue, pcy_memory m, void* data, uint64_t bytes) {
    pcy_memory_transfer_args w{};
    w.struct_size = sizeof w;
    w.queue = queue;
    w.memory = m;
    w.host_pointer = data;
    w.bytes = bytes;
    w.blocking = true;
    return api.memory_write(&w);
  }
};

const OpKey negate_key{"stubext", "negate", PCY_DTYPE_F32, "i t="};
const OpKey device_index_key{"stubext", "device_index", PCY_DTYPE_F32, "t>"};
const OpKey scribble_key{"stubext", "scribble", PCY_DTYPE_F32, "i t<"};
const OpKey copy_in_key{"stubext", "copy_in", PCY_DTYPE_F32, "i t< t>"};
const OpKey sleepy_key{"stubext", "sleepy", PCY_DTYPE_F32, "i"};

uint64_t rule_count(const char* rule) {
  const validate::counters c = validate::snapshot();
  const auto it = c.rules.find(rule);
  return it == c.rules.end() ? 0 : it->second;
}

// Runs `inside` on a thread of its own and `meanwhile` on this one, again and again, until the
// layer has reported `rule` or `inside` is over: the two overlap once `inside` got going.
template <class A, class B> void overlap(const char* rule, A inside, B meanwhile) {
  std::atomic<bool> done{false};
  std::thread t([&] {
    inside();
    done = true;
  });
  while (!done && rule_count(rule) == 0) {
    meanwhile();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  t.join();
}

// The stub framework with both stub bundles (a well-behaved one and the scribbler).
std::vector<fs::path> stub_world() {
  return {stub_dir("good"), stub_dir("bundle_good"), stub_dir("bundle_writes_in")};
}

// Runs a small correct program; the number of wrong results (no Catch2 assertion inside: it is
// called from several threads, and Catch2's assertions are not thread-safe).
int stub_program(const Backend& b, int64_t n) {
  SharedTensor<float> x({n}), y({n}), idx({1});
  const auto v = random_values<float>(static_cast<size_t>(n));
  std::copy(v.begin(), v.end(), x.write_only().begin());
  const OpArg neg[] = {OpArg::integer(n), OpArg::inout(x)};
  b.invoke(negate_key, neg);
  const OpArg cp[] = {OpArg::integer(n), OpArg::in(x), OpArg::out(y)};
  b.invoke(copy_in_key, cp); // reads its `in` tensor only: no report
  const OpArg di[] = {OpArg::out(idx)};
  b.invoke(device_index_key, di);
  const auto got = y.read();
  int wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += got[static_cast<size_t>(i)] != -v[static_cast<size_t>(i)];
  wrong += idx.read()[0] != 0.0f;
  return wrong;
}

} // namespace

TEST_CASE("off, the host calls the plugin's own functions; on, the layer's") {
  env_guard env;
  raw_library raw(stub_file());
  {
    Registry r(isolated({stub_dir("good")})); // off by default
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    CHECK(fw->api().memory_alloc == raw.fw->memory_alloc);
    CHECK(fw->api().kernel_launch == raw.fw->kernel_launch);
  }
  {
    Registry r(validated({stub_dir("good")}));
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    CHECK(fw->api().memory_alloc != raw.fw->memory_alloc);
    CHECK(std::string(fw->api().name) == "stub"); // the prefix is the plugin's
  }
  {
    // A slot the plugin leaves NULL stays NULL: unsupported, never called.
    Registry r(validated({stub_dir("null_optional")}));
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    CHECK(fw->api().memory_export == nullptr);
    CHECK(fw->api().program_build == nullptr);
    CHECK(fw->api().memory_alloc != nullptr);
  }
}

// Issue 21.8: the graph slots (1.2) went unwrapped because the layer listed the slots by hand.
// Now the layer's wrappers come from the slot lists; this walks the lists, so a slot added to
// them is checked here without a line of this test changing.
TEST_CASE("every slot of every ABI table is wrapped (the slot lists)") {
  env_guard env;
  {
    // The graphs stub fills every framework slot, the graph group included.
    raw_library raw(stub_dir("graphs") / "parenchyma-stub.so");
    Registry r(validated({stub_dir("graphs")}));
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    for (const sdk::slot_info& slot : sdk::framework_slots) {
      INFO("framework slot " << slot.name << " (1." << slot.minor << ")");
      const void* theirs = sdk::slot_value(*raw.fw, slot);
      const void* host = sdk::slot_value(fw->api(), slot);
      REQUIRE(theirs != nullptr); // the stub offers it
      CHECK(host != nullptr);
      CHECK(host != theirs); // the layer's entry point, not the plugin's
    }
  }
  {
    const fs::path file = stub_dir("bundle_good") / "parenchyma-stubext_stub.so";
    void* lib = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    INFO(file << ": " << (lib ? "" : ::dlerror()));
    REQUIRE(lib != nullptr);
    auto entry = reinterpret_cast<pcy_bundle_entry_fn>(::dlsym(lib, PCY_BUNDLE_ENTRY_SYMBOL));
    REQUIRE(entry != nullptr);
    const pcy_bundle_api* theirs_table = entry();
    {
      Registry r(validated({stub_dir("good"), stub_dir("bundle_good")}));
      REQUIRE(r.bundles().size() == 1);
      const pcy_bundle_api& host_table = r.bundles()[0]->api();
      for (const sdk::slot_info& slot : sdk::bundle_slots) {
        INFO("bundle slot " << slot.name << " (1." << slot.minor << ")");
        const void* theirs = sdk::slot_value(*theirs_table, slot);
        const void* host = sdk::slot_value(host_table, slot);
        REQUIRE(theirs != nullptr);
        CHECK(host != nullptr);
        CHECK(host != theirs);
      }
    }
    ::dlclose(lib);
  }
}

TEST_CASE("graph slots: live graphs of the plugin, used on their own queue") {
  validate::reset();
  Registry r(validated({stub_dir("graphs")}));
  const Framework* fw = r.find_framework("stub");
  REQUIRE(fw != nullptr);
  stub_objects o(*fw);
  pcy_queue q2 = nullptr;
  REQUIRE(o.api.queue_create(o.ctx, 0, &q2) == nullptr);
  pcy_graph g = nullptr;
  REQUIRE(o.api.graph_create(o.q, &g) == nullptr);
  REQUIRE(g != nullptr);
  // A correct capture and launch: no report.
  REQUIRE(o.api.queue_capture_begin(o.q, g) == nullptr);
  REQUIRE(o.api.queue_capture_end(o.q, g) == nullptr);
  REQUIRE(o.api.graph_instantiate(g) == nullptr);
  REQUIRE(o.api.graph_launch(o.q, g) == nullptr);
  CHECK(validate::snapshot().violations == 0);
  // Launched on another queue than it was built on.
  require_report(o.api.graph_launch(q2, g), "graph_launch", "graph queue",
                 {"was created for queue", "its own queue"});
  require_report(o.api.queue_capture_begin(q2, g), "queue_capture_begin", "graph queue");
  // Not a graph at all, and a graph after graph_destroy.
  require_report(o.api.graph_instantiate(reinterpret_cast<pcy_graph>(o.q)), "graph_instantiate",
                 "handle kind", {"is a queue", "not a graph"});
  o.api.graph_destroy(g);
  require_report(o.api.graph_launch(o.q, g), "graph_launch", "live handle",
                 {"use after free", "graph_destroy"});
  const validate::counters before = validate::snapshot();
  o.api.graph_destroy(g); // not forwarded: the plugin would free it twice
  require_logged(before, "graph_destroy", "live handle", {"double free"});
  o.api.queue_destroy(q2);
}

TEST_CASE("the switch: RegistryOptions, then PARENCHYMA_VALIDATE, then the config") {
  env_guard env;
  raw_library raw(stub_file());
  auto on = [&](const RegistryOptions& o) {
    Registry r(o);
    const Framework* fw = r.find_framework("stub");
    REQUIRE(fw != nullptr);
    return fw->api().memory_alloc != raw.fw->memory_alloc;
  };
  scratch_dir dir("validate-config");
  const fs::path cfg = dir.write("validate.json", R"({"validate": true})");

  RegistryOptions o = isolated({stub_dir("good")}, {{"PARENCHYMA_VALIDATE", "1"}});
  CHECK(on(o));
  o.validate = false; // the option wins over the environment
  CHECK_FALSE(on(o));

  RegistryOptions c = isolated({stub_dir("good")});
  c.config_file = cfg;
  CHECK(on(c)); // the config's "validate"
  (*c.environment)["PARENCHYMA_VALIDATE"] = "0";
  CHECK_FALSE(on(c)); // the environment wins over the config
  (*c.environment)["PARENCHYMA_VALIDATE"] = "maybe";
  {
    Registry r(c); // not a switch: a notice, and the config decides
    bool noticed = false;
    for (const auto& n : r.notices())
      noticed = noticed || contains(n, "PARENCHYMA_VALIDATE");
    CHECK(noticed);
    CHECK(r.find_framework("stub")->api().memory_alloc != raw.fw->memory_alloc);
  }

  // The process environment reaches registries whose environment is replaced (as tests do).
  ::setenv("PARENCHYMA_VALIDATE", "1", 1);
  CHECK(on(isolated({stub_dir("good")})));
  ::setenv("PARENCHYMA_VALIDATE", "0", 1);
  CHECK_FALSE(on(isolated({stub_dir("good")})));
}

TEST_CASE("a correct program produces no report") {
  validate::reset();
  const uint64_t wrapped = validate::snapshot().wrapped_tables;
  {
    Registry r(validated(stub_world()));
    INFO(describe(r));
    Backend b(r, "stub");
    CHECK(stub_program(b, 1000) == 0);
    // A program and a kernel, events between two queues of one context, export and import.
    Program p = b.build_program("kernel add_one\n");
    Kernel k = p.kernel("add_one");
    SharedTensor<float> x({64});
    std::fill(x.write_only().begin(), x.write_only().end(), 1.0f);
    b.launch(k, LaunchDims::linear(64), {KernelArg::inout(x), KernelArg::scalar(uint32_t{64})});
    CHECK(x.read()[63] == 2.0f);
    const pcy_framework_api& api = b.framework().api();
    pcy_queue other = nullptr;
    REQUIRE(api.queue_create(b.context(), 0, &other) == nullptr);
    pcy_event e = nullptr;
    REQUIRE(api.event_record(b.queue(), &e) == nullptr);
    REQUIRE(api.queue_wait_event(other, e) == nullptr);
    REQUIRE(api.event_wait(e) == nullptr);
    api.event_destroy(e);
    api.queue_destroy(other);
    // Another backend (its own queue) reading a tensor the first one wrote.
    Backend b2(r, "stub");
    SharedTensor<float> y({100});
    std::fill(y.write_only().begin(), y.write_only().end(), 3.0f);
    const OpArg neg[] = {OpArg::integer(100), OpArg::inout(y)};
    b.invoke(negate_key, neg);
    b2.invoke(negate_key, neg);
    CHECK(y.read()[99] == 3.0f);
  }
  if (!native_plugin().empty() && fs::exists(native_plugin())) {
    // The native framework and its BLAS bundle (built in this tree), the demo's kind of work.
    Registry r(validated({PCY_TEST_PLUGIN_DIR}));
    if (r.find_framework("native") != nullptr) {
      Backend b(r, "native");
      SharedTensor<float> x({1000}), y({1000}), a({32, 32}), m({32, 32}), c({32, 32});
      const auto v = random_values<float>(1000);
      std::copy(v.begin(), v.end(), x.write_only().begin());
      std::fill(y.write_only().begin(), y.write_only().end(), 1.0f);
      std::fill(a.write_only().begin(), a.write_only().end(), 0.5f);
      std::fill(m.write_only().begin(), m.write_only().end(), 2.0f);
      blas::axpy(b, 2.0, x, y);
      CHECK(blas::dot(b, x, y) != 0.0f);
      blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, a, m, 0.0, c);
      CHECK(std::abs(c.read()[0] - 32.0f) < 1e-4f);
      CHECK(std::abs(y.read()[0] - (1.0f + 2.0f * v[0])) < 1e-5f);
    }
  }
  const validate::counters now = validate::snapshot();
  INFO("reports: " << (now.messages.empty() ? "" : now.messages.back()));
  CHECK(now.wrapped_tables > wrapped);
  CHECK(now.violations == 0);
  CHECK(now.leaks == 0);
}

TEST_CASE("live handle: use after free and double free") {
  validate::reset();
  Registry r(validated({stub_dir("good")}));
  stub_objects o(*r.find_framework("stub"));
  pcy_memory m = o.alloc(64);
  o.api.memory_free(m);
  float data[16] = {};
  require_report(o.write(o.q, m, data, sizeof data), "memory_write", "live handle",
                 {"use after free", "memory_free"});
  const validate::counters before = validate::snapshot();
  o.api.memory_free(m); // not forwarded: the plugin would free it twice
  require_logged(before, "memory_free", "live handle", {"double free"});
  // A handle nobody made.
  require_report(o.write(o.q, reinterpret_cast<pcy_memory>(data), data, 4), "memory_write",
                 "live handle", {"not a live memory"});
  require_report(o.write(nullptr, m, data, 4), "memory_write", "live handle", {"queue is NULL"});
}

TEST_CASE("handle kind: a queue passed as memory") {
  validate::reset();
  Registry r(validated({stub_dir("good")}));
  stub_objects o(*r.find_framework("stub"));
  float data[4] = {};
  require_report(o.write(o.q, reinterpret_cast<pcy_memory>(o.q), data, sizeof data), "memory_write",
                 "handle kind", {"is a queue", "not a memory"});
}

TEST_CASE("handle owner: a handle of another plugin") {
  validate::reset();
  Registry r(validated({stub_dir("good"), stub_dir("kinds")}));
  INFO(describe(r));
  const Framework* stub = r.find_framework("stub");
  const Framework* gpu = r.find_framework("stubgpu");
  REQUIRE(stub != nullptr);
  REQUIRE(gpu != nullptr);
  stub_objects a(*stub), b(*gpu);
  pcy_memory m = a.alloc(64);
  float data[16] = {};
  // stub's memory written through stubgpu's table, with stubgpu's queue.
  require_report(b.write(b.q, m, data, sizeof data), "memory_write", "handle owner",
                 {"of plugin 'stub'", "not of 'stubgpu'"});
  const validate::counters before = validate::snapshot();
  gpu->api().memory_free(m);
  require_logged(before, "memory_free", "handle owner", {"stubgpu"});
  a.api.memory_free(m); // through its own table: fine
  CHECK(validate::snapshot().violations == before.violations + 1);
}

TEST_CASE("same context: queues, memory and kernels of another context") {
  validate::reset();
  Registry r(validated({stub_dir("good")}));
  const Framework& fw = *r.find_framework("stub");
  stub_objects a(fw), b(fw);
  pcy_memory m = a.alloc(256);
  float data[64] = {};
  require_report(a.write(b.q, m, data, sizeof data), "memory_write", "same context", {"the queue"});
  pcy_memory m2 = b.alloc(256);
  pcy_memory_copy_args cp{};
  cp.struct_size = sizeof cp;
  cp.queue = b.q;
  cp.src = m2; // the source may be of another context of the plugin ...
  cp.dst = m;  // ... the destination may not
  cp.bytes = 16;
  require_report(fw.api().memory_copy(&cp), "memory_copy", "same context", {"destination"});
  cp.queue = a.q;
  CHECK(fw.api().memory_copy(&cp) == nullptr);

  pcy_program_build_args pb{};
  pb.struct_size = sizeof pb;
  pb.context = a.ctx;
  pb.source = "kernel add_one\n";
  REQUIRE(fw.api().program_build(&pb) == nullptr);
  pcy_kernel_create_args kc{};
  kc.struct_size = sizeof kc;
  kc.program = pb.program;
  kc.name = "add_one";
  REQUIRE(fw.api().kernel_create(&kc) == nullptr);
  const uint32_t n = 8;
  pcy_kernel_arg args[2] = {};
  args[0].kind = PCY_ARG_MEMORY;
  args[0].memory = m;
  args[1].kind = PCY_ARG_SCALAR;
  args[1].value = &n;
  args[1].size = sizeof n;
  pcy_kernel_launch_args l{};
  l.struct_size = sizeof l;
  l.queue = b.q;
  l.kernel = kc.kernel;
  l.dims = 1;
  l.global[0] = n;
  l.args = args;
  l.arg_count = 2;
  require_report(fw.api().kernel_launch(&l), "kernel_launch", "same context", {"kernel"});
  l.queue = a.q;
  args[0].memory = m2; // a memory argument of the other context
  require_report(fw.api().kernel_launch(&l), "kernel_launch", "same context",
                 {"memory argument #0"});
  args[0].memory = m;
  CHECK(fw.api().kernel_launch(&l) == nullptr);
  fw.api().kernel_destroy(kc.kernel);
  fw.api().program_destroy(pb.program);
  fw.api().memory_free(m2);
  fw.api().memory_free(m);
}

TEST_CASE("event context: a queue waiting for an event of another context") {
  validate::reset();
  {
    Registry r(validated({stub_dir("good")}));
    const Framework& fw = *r.find_framework("stub");
    stub_objects a(fw), b(fw);
    pcy_event e = nullptr;
    REQUIRE(fw.api().event_record(a.q, &e) == nullptr);
    require_report(fw.api().queue_wait_event(b.q, e), "queue_wait_event", "event context",
                   {"cross_context_events"});
    pcy_queue a2 = nullptr;
    REQUIRE(fw.api().queue_create(a.ctx, 0, &a2) == nullptr);
    CHECK(fw.api().queue_wait_event(a2, e) == nullptr); // same context: fine
    fw.api().queue_destroy(a2);
    fw.api().event_destroy(e);
  }
  {
    // A plugin that declares cross_context_events may be asked to.
    Registry r(validated({stub_dir("xctx_events")}));
    const Framework& fw = *r.find_framework("stub");
    stub_objects a(fw), b(fw);
    pcy_event e = nullptr;
    REQUIRE(fw.api().event_record(a.q, &e) == nullptr);
    CHECK(fw.api().queue_wait_event(b.q, e) == nullptr);
    fw.api().event_destroy(e);
  }
  CHECK(validate::snapshot().violations == 1);
}

TEST_CASE("struct size: argument structs smaller than their ABI 1.0 pin") {
  validate::reset();
  Registry r(validated(stub_world()));
  const Framework& fw = *r.find_framework("stub");
  stub_objects o(fw);
  pcy_memory_alloc_args a{};
  a.struct_size = offsetof(pcy_memory_alloc_args, bytes);
  a.context = o.ctx;
  a.bytes = 64;
  require_report(fw.api().memory_alloc(&a), "memory_alloc", "struct size",
                 {"pcy_memory_alloc_args", "PCY_MEMORY_ALLOC_ARGS_SIZE_1_0"});
  pcy_memory m = o.alloc(64);
  pcy_memory_handle h{};
  h.struct_size = 8;
  pcy_memory_export_args x{};
  x.struct_size = sizeof x;
  x.memory = m;
  x.kind = PCY_HANDLE_HOST_POINTER;
  x.handle = &h;
  require_report(fw.api().memory_export(&x), "memory_export", "struct size", {"pcy_memory_handle"});
  fw.api().memory_free(m);

  // An op call and its tensor, through the bundle's (wrapped) op.
  Backend b(r, "stub");
  const BundleInfo* bundle = nullptr;
  for (const auto& bi : r.bundles())
    if (bi->name() == "stubext_stub") bundle = bi.get();
  REQUIRE(bundle != nullptr);
  const pcy_op_desc* negate = bundle->find_op("negate", PCY_DTYPE_F32);
  REQUIRE(negate != nullptr);
  pcy_bundle_context_args ca{};
  ca.struct_size = sizeof ca;
  ca.plugin = bundle->plugin();
  ca.framework = &fw.api();
  ca.framework_plugin = fw.plugin();
  ca.context = b.context();
  ca.queue = b.queue();
  REQUIRE(bundle->api().context_init(&ca) == nullptr);
  SharedTensor<float> t({4});
  std::fill(t.write_only().begin(), t.write_only().end(), 1.0f);
  const int64_t shape[] = {4};
  pcy_tensor tensor{};
  tensor.struct_size = sizeof tensor;
  tensor.memory = t.write(b);
  tensor.dtype = PCY_DTYPE_F32;
  tensor.ndim = 1;
  tensor.shape = shape;
  pcy_op_arg args[2] = {};
  args[0].kind = PCY_OP_ARG_INT;
  args[0].i = 4;
  args[1].kind = PCY_OP_ARG_TENSOR;
  args[1].intent = PCY_INTENT_INOUT;
  args[1].tensor = &tensor;
  pcy_op_call call{};
  call.struct_size = sizeof call;
  call.context = ca.bundle;
  call.queue = b.queue();
  call.args = args;
  call.arg_count = 2;
  CHECK(negate->fn(&call) == nullptr); // well formed
  call.struct_size = offsetof(pcy_op_call, arg_count);
  require_report(negate->fn(&call), "op", "struct size", {"pcy_op_call", "stubext_stub.negate"});
  call.struct_size = sizeof call;
  tensor.struct_size = 16;
  require_report(negate->fn(&call), "op", "struct size", {"pcy_tensor", "argument #1"});
  tensor.struct_size = sizeof tensor;

  // While here: the op's tensor must fit its memory, and live in the bundle's context.
  const int64_t too_long[] = {5};
  tensor.shape = too_long;
  require_report(negate->fn(&call), "op", "tensor extent", {"argument #1"});
  tensor.shape = shape;
  stub_objects other(fw);
  pcy_memory elsewhere = other.alloc(16);
  tensor.memory = elsewhere;
  require_report(negate->fn(&call), "op", "same context", {"argument #1's memory"});
  tensor.memory = t.write(b);
  pcy_queue foreign_q = other.q;
  call.queue = foreign_q;
  require_report(negate->fn(&call), "op", "same context", {"queue"});
  call.queue = b.queue();

  // A bundle context of another bundle.
  const BundleInfo* second = nullptr;
  for (const auto& bi : r.bundles())
    if (bi->name() == "stubext_scribble") second = bi.get();
  REQUIRE(second != nullptr);
  const pcy_op_desc* copy_in = second->find_op("copy_in", PCY_DTYPE_F32);
  REQUIRE(copy_in != nullptr);
  require_report(copy_in->fn(&call), "op", "handle owner",
                 {"bundle context", "of plugin 'stubext_stub'"});

  fw.api().memory_free(elsewhere);
  bundle->api().context_teardown(ca.bundle);
  const validate::counters before = validate::snapshot();
  bundle->api().context_teardown(ca.bundle); // twice: refused
  require_logged(before, "context_teardown", "live handle", {"double free"});
}

TEST_CASE("in tensor unchanged: a bundle op that writes its `in` argument") {
  validate::reset();
  Registry r(validated(stub_world()));
  Backend b(r, "stub");
  SharedTensor<float> x({300});
  std::fill(x.write_only().begin(), x.write_only().end(), 1.0f);
  const OpArg args[] = {OpArg::integer(300), OpArg::in(x)};
  const error e = catch_error([&] { b.invoke(scribble_key, args); });
  INFO(e.what());
  CHECK(e.code() == errc::invalid_argument);
  CHECK(e.origin() == "validation");
  CHECK(contains(e.what(), "stubext_scribble.scribble (f32).op:"));
  CHECK(contains(e.what(), "argument #1 is an `in` tensor"));
  CHECK(contains(e.what(), "[rule: in tensor unchanged]"));
  CHECK(validate::snapshot().rules["in tensor unchanged"] == 1);
  // The same tensor through an op that keeps the promise: nothing more.
  SharedTensor<float> y({300});
  const OpArg cp[] = {OpArg::integer(300), OpArg::in(x), OpArg::out(y)};
  b.invoke(copy_in_key, cp);
  CHECK(y.read()[0] == 42.0f);
  CHECK(validate::snapshot().violations == 1);
}

TEST_CASE("exporter outlives alias; context outlives objects") {
  validate::reset();
  Registry r(validated({stub_dir("good")}));
  const Framework& fw = *r.find_framework("stub");
  {
    stub_objects o(fw);
    pcy_memory m = o.alloc(64);
    pcy_memory_handle h{};
    h.struct_size = sizeof h;
    pcy_memory_export_args x{};
    x.struct_size = sizeof x;
    x.memory = m;
    x.kind = PCY_HANDLE_HOST_POINTER;
    x.handle = &h;
    REQUIRE(fw.api().memory_export(&x) == nullptr);
    pcy_memory_import_args im{};
    im.struct_size = sizeof im;
    im.context = o.ctx;
    im.handle = &h;
    REQUIRE(fw.api().memory_import(&im) == nullptr);
    validate::counters before = validate::snapshot();
    fw.api().memory_free(m); // the alias still points into it
    require_logged(before, "memory_free", "exporter outlives alias", {"1 imported alias"});
    fw.api().memory_free(im.memory);
  }
  const uint32_t d0 = 0;
  pcy_context ctx = nullptr;
  REQUIRE(fw.api().context_create(fw.plugin(), &d0, 1, &ctx) == nullptr);
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = ctx;
  a.bytes = 32;
  REQUIRE(fw.api().memory_alloc(&a) == nullptr);
  const validate::counters before = validate::snapshot();
  fw.api().context_destroy(ctx);
  require_logged(before, "context_destroy", "context outlives objects", {"1 memory"});
  fw.api().memory_free(a.memory);
  CHECK(validate::snapshot().violations == before.violations + 1);
}

TEST_CASE("leaks are counted when the plugins shut down") {
  validate::reset();
  // The library stays loaded after the registry so that the test can free what it leaked.
  raw_library raw(stub_file());
  pcy_context ctx = nullptr;
  pcy_queue q = nullptr;
  pcy_memory m1 = nullptr, m2 = nullptr;
  pcy_event ev = nullptr;
  pcy_program prog = nullptr;
  pcy_kernel kern = nullptr;
  {
    Registry r(validated({stub_dir("good")}));
    const Framework& fw = *r.find_framework("stub");
    stub_objects kept(fw); // destroyed properly: not a leak
    const uint32_t d0 = 0;
    REQUIRE(fw.api().context_create(fw.plugin(), &d0, 1, &ctx) == nullptr);
    REQUIRE(fw.api().queue_create(ctx, 0, &q) == nullptr);
    pcy_memory_alloc_args a{};
    a.struct_size = sizeof a;
    a.context = ctx;
    a.bytes = 64;
    REQUIRE(fw.api().memory_alloc(&a) == nullptr);
    m1 = a.memory;
    REQUIRE(fw.api().memory_alloc(&a) == nullptr);
    m2 = a.memory;
    REQUIRE(fw.api().event_record(q, &ev) == nullptr);
    pcy_program_build_args pb{};
    pb.struct_size = sizeof pb;
    pb.context = ctx;
    pb.source = "kernel add_one\n";
    REQUIRE(fw.api().program_build(&pb) == nullptr);
    prog = pb.program;
    pcy_kernel_create_args kc{};
    kc.struct_size = sizeof kc;
    kc.program = prog;
    kc.name = "add_one";
    REQUIRE(fw.api().kernel_create(&kc) == nullptr);
    kern = kc.kernel;
    CHECK(validate::snapshot().leaks == 0);
  }
  const validate::counters c = validate::snapshot();
  CHECK(c.leaks == 7);
  CHECK(c.leaked.at("memory") == 2);
  CHECK(c.leaked.at("context") == 1);
  CHECK(c.leaked.at("queue") == 1);
  CHECK(c.leaked.at("event") == 1);
  CHECK(c.leaked.at("program") == 1);
  CHECK(c.leaked.at("kernel") == 1);
  CHECK(c.violations == 0);
  bool reported = false;
  for (const auto& msg : c.messages)
    reported = reported || (contains(msg, "stub.shutdown: 7 object(s) still alive") &&
                            contains(msg, "2 memory") && contains(msg, "[rule: leak]"));
  CHECK(reported);
  // The stub's objects need no plugin instance to be freed.
  raw.fw->kernel_destroy(kern);
  raw.fw->program_destroy(prog);
  raw.fw->event_destroy(ev);
  raw.fw->memory_free(m1);
  raw.fw->memory_free(m2);
  raw.fw->queue_destroy(q);
  raw.fw->context_destroy(ctx);
}

TEST_CASE("backends on several threads at once: no report") {
  validate::reset();
  {
    Registry r(validated(stub_world()));
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        try {
          Backend b(r, "stub");
          for (int i = 0; i < 20; ++i)
            failures += stub_program(b, 100 + t * 7 + i);
        } catch (...) {
          ++failures;
        }
      });
    for (auto& th : threads)
      th.join();
    CHECK(failures == 0);
  }
  const validate::counters c = validate::snapshot();
  INFO((c.messages.empty() ? std::string() : c.messages.back()));
  CHECK(c.violations == 0);
  CHECK(c.leaks == 0);
}

TEST_CASE("queue serialised: a second thread enqueues on a queue while an op runs on it") {
  validate::reset();
  Registry r(validated(stub_world()));
  Backend b(r, "stub");
  stub_objects o(b.framework());
  pcy_memory m = nullptr;
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = b.context();
  a.bytes = 16;
  REQUIRE(b.framework().api().memory_alloc(&a) == nullptr);
  m = a.memory;
  float data[4] = {};
  overlap(
      "queue serialised",
      [&] {
        const OpArg args[] = {OpArg::integer(3000)};
        b.invoke(sleepy_key, args);
      },
      [&] { CHECK(o.write(b.queue(), m, data, sizeof data) == nullptr); }); // reported, forwarded
  const validate::counters c = validate::snapshot();
  REQUIRE(rule_count("queue serialised") >= 1);
  bool named = false;
  for (const auto& msg : c.messages)
    named = named || (contains(msg, "stub.memory_write:") &&
                      contains(msg, "used by another thread (stubext_scribble.sleepy (f32).op)") &&
                      contains(msg, "[rule: queue serialised]"));
  CHECK(named);
  b.framework().api().memory_free(m);
}

TEST_CASE("lifecycle serialised: two lifecycle calls at once") {
  validate::reset();
  Registry r(validated({stub_dir("slow_probe")}));
  const Framework& fw = *r.find_framework("stub");
  overlap(
      "lifecycle serialised",
      [&] {
        pcy_framework_probe p{};
        p.struct_size = sizeof p;
        CHECK(fw.api().probe(fw.plugin(), &p) == nullptr); // a second long
      },
      [&] {
        const pcy_property* props = nullptr;
        size_t n = 0;
        CHECK(fw.api().device_properties(fw.plugin(), 0, &props, &n) == nullptr);
      });
  REQUIRE(rule_count("lifecycle serialised") >= 1);
  const validate::counters c = validate::snapshot();
  bool named = false;
  for (const auto& msg : c.messages)
    named = named || (contains(msg, "stub.device_properties: device_properties runs while another "
                                    "thread is inside stub.probe") &&
                      contains(msg, "[rule: lifecycle serialised]"));
  CHECK(named);
}

// Issue 21.8: a DLPack export keeps its registry's state alive after the Registry object is
// gone, so the leak check at close never ran, not even at exit. The layer now reports what is
// still alive in every registry left open when the process exits. Run in a subprocess: the
// report is written while the child exits.
TEST_CASE("a leaked DLPack export is reported at process exit (subprocess)") {
  if (!fs::exists(native_plugin())) {
    WARN("skipped: the native plugin is not built (" << native_plugin() << ")");
    return;
  }
  auto run = [](const char* arg) {
    // In a cross build the child runs under the emulator that runs this test
    // (tests/CMakeLists.txt).
    const char* emulator = std::getenv("PARENCHYMA_TEST_EMULATOR");
    const std::string cmd = std::string("PARENCHYMA_LOG_LEVEL=warn ") +
                            (emulator != nullptr ? emulator : "") + " '" + PCY_EXIT_LEAK_CHILD +
                            "' " + arg + " 2>&1";
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
      out.append(buf, n);
    const int status = ::pclose(p);
    INFO("child output:\n" << out);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 0);
    return out;
  };
  const std::string leaked = run("");
  INFO("child output:\n" << leaked);
  CHECK(contains(leaked, "child: exiting with the export leaked"));
  CHECK(contains(leaked, "at process exit"));
  CHECK(contains(leaked, "1 memory"));
  CHECK(contains(leaked, "[rule: leak]"));
  const std::string clean = run("--release");
  INFO("child output (export deleted):\n" << clean);
  CHECK(contains(clean, "child: exiting with the export deleted"));
  CHECK_FALSE(contains(clean, "[rule: leak]"));
}
