// The stub plugin: ONE source built into many plugin variants (-DSTUB_VARIANT=STUB_V_...), each
// in its own directory, so the loader tests can present the core with every kind of good and
// broken plugin. The good variant is a complete framework ("stub", one fake device whose
// "device memory" is host memory) written with the SDK's class + macro; the broken ones are the
// same table with one thing wrong. Bundle variants serve one op of a test-only extension.
#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/framework.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define STUB_V_GOOD 1
#define STUB_V_NO_ENTRY 2
#define STUB_V_ABI_MAJOR2 3
#define STUB_V_OLDER_MINOR 4
#define STUB_V_NEWER_MINOR 5
#define STUB_V_INIT_ERROR 6
#define STUB_V_CTOR_THROWS 7
#define STUB_V_NULL_REQUIRED 8
#define STUB_V_NULL_OPTIONAL 9
#define STUB_V_NO_DEVICES 10
#define STUB_V_BUNDLE_GOOD 11
#define STUB_V_BUNDLE_ORPHAN 12
#define STUB_V_WRONG_KIND 13
#define STUB_V_PROPS_NULL 14       // device_properties: a count with a NULL array
#define STUB_V_HUGE_DEVICES 15     // probe: 2^32 - 1 devices
#define STUB_V_DEVICE0_FAILS 16    // three devices; device 0 cannot be described
#define STUB_V_BAD_STRIDE 17       // property elements claim 3 bytes each
#define STUB_V_NULL_CONTEXT 18     // context_create succeeds with no context
#define STUB_V_BUNDLE_OPS_NULL 19  // ops: a count with a NULL array
#define STUB_V_BUNDLE_BAD_SIG 20   // one op with a malformed signature, one misnamed, one good
#define STUB_V_BUNDLE_SECOND 21    // a second bundle serving stubext.negate on the stub
#define STUB_V_BUNDLE_WRITES_IN 22 // stubext.scribble writes its `in` tensor (tests/validate)
#define STUB_V_XCTX_EVENTS 23      // declares cross_context_events (tests/validate)
#define STUB_V_SLOW_PROBE 24       // probe takes a second (tests/validate: overlapping calls)
#define STUB_V_GRAPHS 25 // offers the graph slots (1.2): every slot filled (tests/validate)

#ifndef STUB_VARIANT
#error "build with -DSTUB_VARIANT=STUB_V_<variant>"
#endif
#ifndef STUB_NAME
#define STUB_NAME "stub"
#endif
#ifndef STUB_DEVICE_KIND
#define STUB_DEVICE_KIND PCY_DEVICE_ACCELERATOR
#endif
#ifndef STUB_DESCRIPTION
#define STUB_DESCRIPTION "test stub framework (host memory posing as device memory)"
#endif

namespace stub {

using parenchyma::sdk::fail;
using parenchyma::sdk::str;

// A slot the host must never call (beyond struct_size, or before version negotiation).
[[noreturn]] void forbidden(const char* what) {
  std::fprintf(stderr, "stub plugin (%s): the host called %s, which it must never call\n",
               STUB_NAME, what);
  std::fflush(stderr);
  std::abort();
}

class memory {
public:
  memory(uint32_t device, uint64_t bytes)
      : owned_(new std::byte[bytes]), data_(owned_.get()), bytes_(bytes), device_(device) {}
  // An alias of someone else's bytes (memory_import): owns nothing.
  memory(uint32_t device, void* data, uint64_t bytes)
      : data_(static_cast<std::byte*>(data)), bytes_(bytes), device_(device) {}

  std::byte* at(uint64_t offset, uint64_t bytes, const char* op) const {
    if (offset > bytes_ || bytes > bytes_ - offset)
      fail(PCY_ERR_INVALID_ARGUMENT, str(op, " of ", bytes, " bytes at offset ", offset,
                                         " overruns a ", bytes_, "-byte allocation"));
    return data_ + offset;
  }
  bool export_to(pcy_handle_kind kind, pcy_memory_handle& h) {
    if (kind != PCY_HANDLE_HOST_POINTER) return false;
    h.host_pointer = data_;
    h.bytes = bytes_;
    return true;
  }
  void* native() { return data_; }
  uint64_t size() const noexcept { return bytes_; }
  uint32_t device() const noexcept { return device_; }

private:
  std::unique_ptr<std::byte[]> owned_;
  std::byte* data_;
  uint64_t bytes_;
  uint32_t device_;
};

class event {
public:
  void wait() {} // the stub queue runs everything at once
};

// The stub's "kernel language": one line per kernel, "kernel <name>", from a fixed set.
class kernel {
public:
  explicit kernel(std::string name) : name_(std::move(name)) {}
  const std::string& name() const noexcept { return name_; }

private:
  std::string name_;
};

class program {
public:
  explicit program(std::vector<std::string> kernels) : kernels_(std::move(kernels)) {}
  kernel* create_kernel(const char* name) {
    for (const auto& k : kernels_)
      if (k == name) return new kernel(k);
    fail(PCY_ERR_NOT_FOUND, str("the stub program has no kernel '", name, "'"));
  }

private:
  std::vector<std::string> kernels_;
};

// A graph (STUB_V_GRAPHS): the stub runs work at once, so a captured graph holds nothing.
class graph {
public:
  void instantiate() { instantiated_ = true; }

private:
  bool instantiated_ = false;
};

class queue {
public:
  explicit queue(uint32_t device) : device_(device) {}
  graph* create_graph() { return new graph; }
  void capture_begin(graph&) {}
  void capture_end(graph&) {}
  void launch_graph(graph&) {}
  void finish() {}
  event* record() { return new event; }
  void wait(event&) {}
  void read(memory& m, uint64_t off, void* host, uint64_t bytes, bool) {
    std::memcpy(host, m.at(off, bytes, "read"), bytes);
  }
  void write(memory& m, uint64_t off, const void* host, uint64_t bytes, bool) {
    std::memcpy(m.at(off, bytes, "write"), host, bytes);
  }
  void copy(memory& src, uint64_t so, memory& dst, uint64_t d, uint64_t bytes) {
    std::memmove(dst.at(d, bytes, "copy destination"), src.at(so, bytes, "copy source"), bytes);
  }
  void fill(memory& m, uint64_t off, uint64_t bytes, const void* pattern, uint32_t size) {
    if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
      fail(PCY_ERR_INVALID_ARGUMENT, str("fill pattern of ", size, " bytes (1, 2, 4, 8 or 16)"));
    std::byte* p = m.at(off, bytes, "fill");
    for (uint64_t i = 0; i < bytes; i += size)
      std::memcpy(p + i, pattern, size);
  }
  // add_one(memory x, uint32 n): x[i] += 1.0f for i < min(global, n).
  void launch(kernel& k, const pcy_kernel_launch_args& a) {
    if (k.name() != "add_one") fail(PCY_ERR_LAUNCH, str("unknown kernel ", k.name()));
    if (a.arg_count != 2 || a.args == nullptr || a.args[0].kind != PCY_ARG_MEMORY ||
        a.args[1].kind != PCY_ARG_SCALAR || a.args[1].size != 4)
      fail(PCY_ERR_LAUNCH, "add_one takes (memory x, uint32 n)");
    uint32_t n = 0;
    std::memcpy(&n, a.args[1].value, 4);
    auto* m = reinterpret_cast<memory*>(a.args[0].memory);
    const uint64_t count = std::min<uint64_t>(a.global[0], n);
    auto* x = reinterpret_cast<float*>(m->at(0, count * sizeof(float), "add_one"));
    for (uint64_t i = 0; i < count; ++i)
      x[i] += 1.0f;
  }
  void* native() { return this; }
  uint32_t device() const noexcept { return device_; }

private:
  uint32_t device_;
};

class context {
public:
  explicit context(std::span<const uint32_t> devices) : devices_(devices.begin(), devices.end()) {}
  uint32_t check(uint32_t device) const {
    if (device >= devices_.size())
      fail(PCY_ERR_INVALID_ARGUMENT, str("device index ", device, " is outside this context's ",
                                         devices_.size(), " devices"));
    return devices_[device];
  }
  queue* create_queue(uint32_t device) { return new queue(check(device)); }
  memory* alloc(uint32_t device, uint64_t bytes, uint32_t) {
    return new memory(check(device), bytes);
  }
  memory* import(uint32_t device, const pcy_memory_handle& h) {
    if (h.kind != PCY_HANDLE_HOST_POINTER || h.host_pointer == nullptr)
      fail(PCY_ERR_UNSUPPORTED,
           str("the stub imports host pointers only, not handle kind ", static_cast<int>(h.kind)));
    return new memory(check(device), h.host_pointer, h.bytes);
  }
  program* build(std::string_view source, const char*, bool& cache_hit) {
    cache_hit = false;
    std::vector<std::string> kernels;
    std::istringstream in{std::string(source)};
    std::string line;
    for (int no = 1; std::getline(in, line); ++no) {
      if (line.empty()) continue;
      if (line.rfind("kernel ", 0) != 0 || line.substr(7) != "add_one")
        fail(PCY_ERR_BUILD,
             str("stub build log:\nline ", no, ": expected 'kernel add_one', got '", line, "'"));
      kernels.push_back(line.substr(7));
    }
    return new program(std::move(kernels));
  }
  void* native_context() { return this; }
  void* native_device(uint32_t device) {
    check(device);
    return &devices_[device];
  }

private:
  std::vector<uint32_t> devices_;
};

class plugin {
public:
  using context_type = context;
  using queue_type = queue;
  using event_type = event;
  using memory_type = memory;
  using program_type = program;
  using kernel_type = kernel;
#if STUB_VARIANT == STUB_V_GRAPHS
  using graph_type = graph;
#endif
  static constexpr const char* name = STUB_NAME;
  static constexpr const char* version = "1.0-test";
  static constexpr const char* description = STUB_DESCRIPTION;

  explicit plugin(const pcy_host_services& host) : log_(&host, STUB_NAME) {
#if STUB_VARIANT == STUB_V_CTOR_THROWS
    throw std::runtime_error("stub constructor threw on purpose (fake driver crash)");
#endif
    auto prop_s = [](const char* key, const char* s) {
      pcy_property p{};
      p.struct_size = sizeof p;
      p.key = key;
      p.type = PCY_VALUE_STRING;
      p.s = s;
      return p;
    };
    auto prop_i = [](const char* key, int64_t i, pcy_value_type type = PCY_VALUE_INT) {
      pcy_property p{};
      p.struct_size = sizeof p;
      p.key = key;
      p.type = type;
      p.i = i;
      return p;
    };
    props_ = {prop_s(PCY_PROP_NAME, "Stub Device " STUB_NAME),
              prop_s(PCY_PROP_VENDOR, "parenchyma tests"),
              prop_i(PCY_PROP_KIND, STUB_DEVICE_KIND),
              prop_i(PCY_PROP_COMPUTE_UNITS, 1),
              prop_i(PCY_PROP_GLOBAL_MEMORY, int64_t{1} << 30),
              prop_s(PCY_PROP_DRIVER_VERSION, "stub-driver 1.0"),
              prop_s(PCY_PROP_UUID, "00000000-0000-0000-0000-57ab57ab57ab"),
              prop_i(PCY_PROP_HOST_UNIFIED, 1, PCY_VALUE_BOOL),
              prop_i(PCY_PROP_FP64, 1, PCY_VALUE_BOOL)};
#if STUB_VARIANT == STUB_V_XCTX_EVENTS
    // Its queues may wait for events of its other contexts (the validation layer reads this).
    props_.push_back(prop_i("cross_context_events", 1, PCY_VALUE_BOOL));
#endif
    log_.debug("stub plugin '", STUB_NAME, "' initialised");
  }

  uint32_t device_count() const {
#if STUB_VARIANT == STUB_V_NO_DEVICES
    return 0;
#elif STUB_VARIANT == STUB_V_HUGE_DEVICES
    return 0xffffffffu;
#elif STUB_VARIANT == STUB_V_DEVICE0_FAILS
    return 3;
#else
    return 1;
#endif
  }
  const char* reason() const {
#if STUB_VARIANT == STUB_V_SLOW_PROBE
    std::this_thread::sleep_for(std::chrono::seconds(1)); // called by probe only
#endif
    return STUB_VARIANT == STUB_V_NO_DEVICES ? "stub has no fake hardware attached" : nullptr;
  }
  std::span<const pcy_property> properties(uint32_t device) const {
#if STUB_VARIANT == STUB_V_DEVICE0_FAILS
    if (device == 0) fail(PCY_ERR_DEVICE, "device 0 does not answer (fake broken device)");
#endif
    (void)device;
    return props_;
  }
  context* create_context(std::span<const uint32_t> devices) { return new context(devices); }

private:
  parenchyma::sdk::logger log_;
  std::vector<pcy_property> props_;
};

using adapter = parenchyma::sdk::framework_adapter<plugin>;

[[maybe_unused]] pcy_error* init_fails(pcy_framework_init_args*) noexcept {
  return parenchyma::sdk::make_error(
      PCY_ERR_DEVICE, "stub initialise failed on purpose: fake driver not responding", STUB_NAME);
}
[[maybe_unused]] pcy_error* never_initialize(pcy_framework_init_args*) noexcept {
  forbidden("initialize of a plugin the host should have refused (ABI 2, or wrong kind)");
}
[[maybe_unused]] pcy_error* never_build(pcy_program_build_args*) noexcept {
  forbidden("program_build beyond the table's struct_size");
}
[[maybe_unused]] void never_program_destroy(pcy_program) noexcept {
  forbidden("program_destroy beyond the table's struct_size");
}
[[maybe_unused]] pcy_error* never_kernel_create(pcy_kernel_create_args*) noexcept {
  forbidden("kernel_create beyond the table's struct_size");
}
[[maybe_unused]] void never_kernel_destroy(pcy_kernel) noexcept {
  forbidden("kernel_destroy beyond the table's struct_size");
}
[[maybe_unused]] pcy_error* never_launch(const pcy_kernel_launch_args*) noexcept {
  forbidden("kernel_launch beyond the table's struct_size");
}

[[maybe_unused]] pcy_error* props_null(pcy_plugin, uint32_t, const pcy_property** props,
                                       size_t* count) noexcept {
  *props = nullptr;
  *count = 3;
  return nullptr;
}
[[maybe_unused]] pcy_error* props_bad_stride(pcy_plugin, uint32_t, const pcy_property** props,
                                             size_t* count) noexcept {
  static pcy_property p[2] = {{3, nullptr, PCY_PROP_NAME, PCY_VALUE_STRING, "x", 0, 0},
                              {3, nullptr, PCY_PROP_KIND, PCY_VALUE_INT, nullptr, 1, 0}};
  *props = p;
  *count = 2;
  return nullptr;
}
[[maybe_unused]] pcy_error* null_context(pcy_plugin, const uint32_t*, uint32_t,
                                         pcy_context* out) noexcept {
  *out = nullptr;
  return nullptr;
}

constexpr pcy_framework_api make_table() noexcept {
  pcy_framework_api t = adapter::make_table();
#if STUB_VARIANT == STUB_V_ABI_MAJOR2
  t.abi_major = 2;
  t.initialize = &never_initialize;
#elif STUB_VARIANT == STUB_V_OLDER_MINOR
  // A plugin from before the program slots existed: its table ends where they begin. The slots
  // hold poison so that a host reading beyond struct_size crashes the test loudly.
  t.struct_size = offsetof(pcy_framework_api, program_build);
  t.program_build = &never_build;
  t.program_destroy = &never_program_destroy;
  t.kernel_create = &never_kernel_create;
  t.kernel_destroy = &never_kernel_destroy;
  t.kernel_launch = &never_launch;
#elif STUB_VARIANT == STUB_V_INIT_ERROR
  t.initialize = &init_fails;
#elif STUB_VARIANT == STUB_V_WRONG_KIND
  t.kind = PCY_PLUGIN_BUNDLE; // a framework table that claims to be a bundle
  t.initialize = &never_initialize;
#elif STUB_VARIANT == STUB_V_NULL_REQUIRED
  t.memory_alloc = nullptr;
#elif STUB_VARIANT == STUB_V_PROPS_NULL
  t.device_properties = &props_null;
#elif STUB_VARIANT == STUB_V_BAD_STRIDE
  t.device_properties = &props_bad_stride;
#elif STUB_VARIANT == STUB_V_NULL_CONTEXT
  t.context_create = &null_context;
#elif STUB_VARIANT == STUB_V_NULL_OPTIONAL
  t.memory_export = nullptr;
  t.memory_import = nullptr;
  t.native_handle = nullptr;
  t.program_build = nullptr;
  t.program_destroy = nullptr;
  t.kernel_create = nullptr;
  t.kernel_destroy = nullptr;
  t.kernel_launch = nullptr;
#endif
  return t;
}

#if STUB_VARIANT == STUB_V_NEWER_MINOR
// A plugin from a future minor version: the 1.0 table is the prefix of a larger one.
[[maybe_unused]] pcy_error* never_future(pcy_plugin) noexcept {
  forbidden("a slot from a future minor version");
}
// Its property elements are larger too: the host must step through them by struct_size.
struct future_property {
  pcy_property base;
  int64_t future_value;
};
constexpr future_property future_prop(const char* key, pcy_value_type type, const char* s,
                                      int64_t i) noexcept {
  return {{sizeof(future_property), nullptr, key, type, s, i, 0.0}, -1};
}
constexpr future_property future_props[] = {
    future_prop(PCY_PROP_NAME, PCY_VALUE_STRING, "Stub Device from the future", 0),
    future_prop(PCY_PROP_VENDOR, PCY_VALUE_STRING, "parenchyma tests", 0),
    future_prop(PCY_PROP_KIND, PCY_VALUE_INT, nullptr, STUB_DEVICE_KIND),
    future_prop(PCY_PROP_COMPUTE_UNITS, PCY_VALUE_INT, nullptr, 3)};
pcy_error* future_device_properties(pcy_plugin, uint32_t device, const pcy_property** props,
                                    size_t* count) noexcept {
  if (device != 0)
    return parenchyma::sdk::make_error(PCY_ERR_NOT_FOUND, "no such device", STUB_NAME);
  *props = &future_props[0].base;
  *count = std::size(future_props);
  return nullptr;
}
struct future_table {
  pcy_framework_api base;
  pcy_error* (*future_slot)(pcy_plugin);
  uint64_t future_field;
};
constexpr future_table make_future() noexcept {
  future_table f{make_table(), &never_future, 0x57ab};
  f.base.device_properties = &future_device_properties;
  f.base.struct_size = sizeof(future_table);
  f.base.abi_minor = PCY_ABI_VERSION_MINOR + 1;
  return f;
}
constexpr future_table table = make_future();
#else
constexpr pcy_framework_api table = make_table();
#endif

// ---- bundles: extension "stubext": "negate" (f32, "i t="): x[i] = -x[i] for i < n, and
// "device_index" (f32, "t>"): result[0] = the plugin device index the bundle context was given.

struct bundle_context {
  const pcy_framework_api* fw;
  pcy_context context;
  uint32_t plugin_device;
  std::vector<pcy_memory> workspaces_seen;
  // 1.1: the good bundle switches its f64 negate off (a stand-in for a device without fp64).
  bool op_available(const pcy_op_desc& op, const char** reason) const {
#if STUB_VARIANT == STUB_V_BUNDLE_GOOD
    if (op.dtype == PCY_DTYPE_F64) {
      *reason = "f64 is switched off in this stub bundle";
      return false;
    }
#endif
    (void)op;
    (void)reason;
    return true;
  }
};

using parenchyma::sdk::make_op;

inline float* floats(const bundle_context& c, const pcy_tensor& t) {
  auto* base = static_cast<std::byte*>(
      parenchyma::sdk::native_handle(*c.fw, PCY_NATIVE_MEMORY, c.context, 0, nullptr, t.memory));
  return reinterpret_cast<float*>(base + t.byte_offset);
}

inline void negate(bundle_context& c, const parenchyma::sdk::op_args& a) {
  const int64_t n = a.i(0);
  const pcy_tensor& t = a.t(1);
  if (n < 0 || t.dtype != PCY_DTYPE_F32) fail(PCY_ERR_INVALID_ARGUMENT, "negate: bad n or dtype");
  float* x = floats(c, t);
  for (int64_t i = 0; i < n; ++i)
    x[i] = -x[i];
}

inline void negate64(bundle_context& c, const parenchyma::sdk::op_args& a) {
  const int64_t n = a.i(0);
  const pcy_tensor& t = a.t(1);
  if (n < 0 || t.dtype != PCY_DTYPE_F64) fail(PCY_ERR_INVALID_ARGUMENT, "negate: bad n or dtype");
  auto* x = reinterpret_cast<double*>(floats(c, t));
  for (int64_t i = 0; i < n; ++i)
    x[i] = -x[i];
}

// negate for the half types (f16, bf16): the sign bit flipped.
[[maybe_unused]] inline void negate_half(bundle_context& c, const parenchyma::sdk::op_args& a) {
  const int64_t n = a.i(0);
  const pcy_tensor& t = a.t(1);
  if (n < 0 || (t.dtype != PCY_DTYPE_F16 && t.dtype != PCY_DTYPE_BF16))
    fail(PCY_ERR_INVALID_ARGUMENT, "negate: bad n or dtype");
  auto* x = reinterpret_cast<uint16_t*>(floats(c, t));
  for (int64_t i = 0; i < n; ++i)
    x[i] = static_cast<uint16_t>(x[i] ^ 0x8000u);
}

// "workspace_probe" (f32, "i t>"): asks for `bytes` of workspace and writes all of them (a pool
// that did not grow would be overrun, which ASan reports); out[0] = 1 when it got host-visible
// memory, out[1] = 1 when it is the same memory the previous call got (no allocation per op).
inline void workspace_probe(bundle_context& c, const parenchyma::sdk::op_args& a) {
  void* native = nullptr;
  pcy_memory m = a.workspace(static_cast<uint64_t>(a.i(0)), &native);
  if (native != nullptr) std::memset(native, 0x5a, static_cast<size_t>(a.i(0)));
  float* out = floats(c, a.t(1));
  out[0] = native != nullptr ? 1.0f : 0.0f;
  out[1] = !c.workspaces_seen.empty() && c.workspaces_seen.back() == m ? 1.0f : 0.0f;
  c.workspaces_seen.push_back(m);
}

inline void device_index(bundle_context& c, const parenchyma::sdk::op_args& a) {
  floats(c, a.t(0))[0] = static_cast<float>(c.plugin_device);
}

// "scribble" (f32, "i t<") breaks the promise of its `in` argument: it writes x; "copy_in"
// (f32, "i t< t>") keeps it: y[i] = x[i]. The validation layer must tell them apart.
[[maybe_unused]] inline void scribble(bundle_context& c, const parenchyma::sdk::op_args& a) {
  float* x = floats(c, a.t(1));
  for (int64_t i = 0; i < a.i(0); ++i)
    x[i] = 42.0f;
}
// "sleepy" (f32, "i"): sleeps i ms, so that a test can overlap another call with an op.
[[maybe_unused]] inline void sleepy(bundle_context&, const parenchyma::sdk::op_args& a) {
  std::this_thread::sleep_for(std::chrono::milliseconds(a.i(0)));
}
[[maybe_unused]] inline void copy_in(bundle_context& c, const parenchyma::sdk::op_args& a) {
  const float* x = floats(c, a.t(1));
  float* y = floats(c, a.t(2));
  for (int64_t i = 0; i < a.i(0); ++i)
    y[i] = x[i];
}

class bundle {
public:
  using context_type = bundle_context;
#if STUB_VARIANT == STUB_V_BUNDLE_ORPHAN
  static constexpr const char* name = "stubext_absent";
  static constexpr const char* framework = "absent_fw";
#elif STUB_VARIANT == STUB_V_BUNDLE_BAD_SIG
  static constexpr const char* name = "stubext_badsig";
  static constexpr const char* framework = "stubcpu";
#elif STUB_VARIANT == STUB_V_BUNDLE_SECOND
  static constexpr const char* name = "stubext_second";
  static constexpr const char* framework = "stub";
#elif STUB_VARIANT == STUB_V_BUNDLE_OPS_NULL
  static constexpr const char* name = "stubext_opsnull";
  static constexpr const char* framework = "stub";
#elif STUB_VARIANT == STUB_V_BUNDLE_WRITES_IN
  static constexpr const char* name = "stubext_scribble";
  static constexpr const char* framework = "stub";
#else
  static constexpr const char* name = "stubext_stub";
  static constexpr const char* framework = "stub";
#endif
  static constexpr const char* version = "1.0-test";
  static constexpr const char* description = "test bundle: extension stubext";
  static constexpr const char* extension = "stubext";
  static constexpr uint32_t min_framework_abi_minor = 0;

  explicit bundle(const pcy_host_services&) {}
  std::span<const pcy_op_desc> ops() const { return ops_; }
  context_type* create_context(const pcy_bundle_context_args& a) {
    return new bundle_context{a.framework, a.context, a.plugin_device, {}};
  }

private:
  template <void (*F)(bundle_context&, const parenchyma::sdk::op_args&)>
  static constexpr pcy_op_fn fn = &parenchyma::sdk::op_entry<bundle, F>;
#if STUB_VARIANT == STUB_V_BUNDLE_BAD_SIG
  static constexpr pcy_op_desc ops_[] = {
      make_op("negate", PCY_DTYPE_F32, "i q=", fn<&negate>, "negate with a broken signature"),
      make_op("Bad-Name!", PCY_DTYPE_F32, "i t=", fn<&negate>, "an op whose name is not valid"),
      make_op("device_index", PCY_DTYPE_F32, "t>", fn<&device_index>, "stub device index")};
#elif STUB_VARIANT == STUB_V_BUNDLE_SECOND
  static constexpr pcy_op_desc ops_[] = {
      make_op("negate", PCY_DTYPE_F32, "i t=", fn<&negate>, "second negate loop"),
      make_op("negate", PCY_DTYPE_F64, "i t=", fn<&negate64>, "second negate loop (f64)"),
      make_op("negate", PCY_DTYPE_F16, "i t=", fn<&negate_half>, "second negate (f16)"),
      make_op("negate", PCY_DTYPE_BF16, "i t=", fn<&negate_half>, "second negate (bf16)")};
#elif STUB_VARIANT == STUB_V_BUNDLE_WRITES_IN
  static constexpr pcy_op_desc ops_[] = {
      make_op("scribble", PCY_DTYPE_F32, "i t<", fn<&scribble>, "writes its in tensor"),
      make_op("copy_in", PCY_DTYPE_F32, "i t< t>", fn<&copy_in>, "copies x into y"),
      make_op("sleepy", PCY_DTYPE_F32, "i", fn<&sleepy>, "sleeps")};
#else
  static constexpr pcy_op_desc ops_[] = {
      make_op("negate", PCY_DTYPE_F32, "i t=", fn<&negate>, "stub negate loop"),
      make_op("negate", PCY_DTYPE_F64, "i t=", fn<&negate64>, "stub negate loop (f64)"),
      make_op("device_index", PCY_DTYPE_F32, "t>", fn<&device_index>, "stub device index"),
      make_op("workspace_probe", PCY_DTYPE_F32, "i t>", fn<&workspace_probe>,
              "stub workspace probe")};
#endif
};

#if STUB_VARIANT == STUB_V_BUNDLE_OPS_NULL
[[maybe_unused]] pcy_error* ops_null(pcy_bundle_plugin, const pcy_op_desc** ops,
                                     size_t* count) noexcept {
  *ops = nullptr;
  *count = 2;
  return nullptr;
}
constexpr pcy_bundle_api make_bundle_table() noexcept {
  pcy_bundle_api t = parenchyma::sdk::bundle_adapter<bundle>::make_table();
  t.ops = &ops_null;
  return t;
}
constexpr pcy_bundle_api bundle_table = make_bundle_table();
#endif

} // namespace stub

#if STUB_VARIANT == STUB_V_BUNDLE_OPS_NULL
extern "C" PCY_EXPORT const pcy_bundle_api* pcy_bundle_entry(void) { return &stub::bundle_table; }
#elif STUB_VARIANT == STUB_V_BUNDLE_GOOD || STUB_VARIANT == STUB_V_BUNDLE_ORPHAN ||                \
    STUB_VARIANT == STUB_V_BUNDLE_BAD_SIG || STUB_VARIANT == STUB_V_BUNDLE_SECOND ||               \
    STUB_VARIANT == STUB_V_BUNDLE_WRITES_IN
PCY_BUNDLE_PLUGIN(stub::bundle)
#elif STUB_VARIANT == STUB_V_NO_ENTRY
// A library that exports something, but not the entry symbol.
extern "C" PCY_EXPORT int pcy_framework_entry_misspelt(void) { return 42; }
#elif STUB_VARIANT == STUB_V_NEWER_MINOR
extern "C" PCY_EXPORT const pcy_framework_api* pcy_framework_entry(void) {
  return &stub::table.base;
}
#else
extern "C" PCY_EXPORT const pcy_framework_api* pcy_framework_entry(void) { return &stub::table; }
#endif
