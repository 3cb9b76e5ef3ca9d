// parenchyma SDK, C++ side: a bundle plugin is a C++ class plus one macro.
//
//   class my_bundle {
//   public:
//     using context_type = my_bundle_context;   // deleted with `delete`
//     static constexpr const char* name = "blas_mine", *version = "1.0", *description = "...";
//     static constexpr const char* extension = "blas", *framework = "native";
//     static constexpr uint32_t min_framework_abi_minor = 0;
//     explicit my_bundle(const pcy_host_services& host);      // may throw
//     const char* reason() const;                              // optional: why ops are missing
//     std::span<const pcy_op_desc> ops() const;
//     context_type* create_context(const pcy_bundle_context_args& args);
//     // optional (1.1): whether an op runs on this context's device, and why not
//     bool op_available(const context_type&, const pcy_op_desc&, const char** reason) const;
//   };
//   PCY_BUNDLE_PLUGIN(my_bundle)
//
// sdk::bundle_base (below) declares the identity and the context type from one
// sdk::bundle_identity, and keeps the host's logger and settings.
//
// An op is a function void f(context_type&, const parenchyma::sdk::op_args&) wrapped by
// parenchyma::sdk::op_entry<my_bundle, f> (the exception firewall) in its pcy_op_desc, which
// sdk::op_table (op_schema.hpp) builds from the extension's schema.
//
// The host checks every call against the op's schema before it reaches the bundle (kind,
// intent, dtype rule and rank of each argument; docs/abi.md I7), so op_args's accessors do not
// check kinds again; the decoders in op_schema.hpp check values (counts, extents, sizes).
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <initializer_list>
#include <span>
#include <string>

namespace parenchyma::sdk {

template <>
inline constexpr size_t min_struct_size<pcy_bundle_init_args> = PCY_BUNDLE_INIT_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_bundle_context_args> = PCY_BUNDLE_CONTEXT_ARGS_SIZE_1_0;
template <> inline constexpr size_t min_struct_size<pcy_op_call> = PCY_OP_CALL_SIZE_1_0;

// Access to an op call's arguments by index (op_schema.hpp gives the indices names).
class op_args {
public:
  explicit op_args(const pcy_op_call& call) : call_(call) {}
  int64_t i(uint32_t k) const noexcept { return call_.args[k].i; }
  double f(uint32_t k) const noexcept { return call_.args[k].f; }
  const pcy_tensor& t(uint32_t k) const noexcept { return *call_.args[k].tensor; }
  pcy_arg_intent intent(uint32_t k) const noexcept { return call_.args[k].intent; }
  // A scalar ("s") slot holds a host value (FLOAT) or a one-element tensor.
  bool is_tensor(uint32_t k) const noexcept { return call_.args[k].kind == PCY_OP_ARG_TENSOR; }
  // An int array (1.1): the values, or an empty span from a host that sent none.
  std::span<const int64_t> ints(uint32_t k) const noexcept {
    if (!PCY_HAS_FIELD(&call_, pcy_op_call, arg_ext) || call_.arg_ext == nullptr) return {};
    const pcy_op_arg_ext& e = call_.arg_ext[k];
    return e.ints == nullptr ? std::span<const int64_t>{}
                             : std::span<const int64_t>(e.ints, static_cast<size_t>(e.count));
  }
  uint32_t size() const noexcept { return call_.arg_count; }
  pcy_queue queue() const noexcept { return call_.queue; }
  const pcy_op_call& call() const noexcept { return call_; }
  // Temporary device memory for this op from the backend's pool (1.1); UNSUPPORTED from a host
  // that offers none. Returns the memory and sets `native` to its native handle.
  pcy_memory workspace(uint64_t bytes, void** native = nullptr) const {
    if (!PCY_HAS_FIELD(&call_, pcy_op_call, workspace_user) || call_.workspace == nullptr)
      fail(PCY_ERR_UNSUPPORTED, "the host offers no workspace memory (an ABI 1.0 host)");
    pcy_memory m = nullptr;
    void* n = nullptr;
    if (pcy_error* e = call_.workspace(&call_, bytes, &m, &n)) {
      const pcy_status code = e->code;
      std::string msg = str("workspace of ", bytes, " bytes: ", e->message);
      e->destroy(e);
      fail(code, msg);
    }
    if (native != nullptr) *native = n;
    return m;
  }

private:
  const pcy_op_call& call_;
};

// What names a bundle plugin: the identity fields of its pcy_bundle_api.
struct bundle_identity {
  const char* name;        // "<extension>_<implementation>", e.g. "blas_cuda"
  const char* extension;   // PCY_BLAS_EXTENSION, ...
  const char* framework;   // the framework plugin's name
  const char* description; // one line for the load report
  const char* version = "1.0";
  uint32_t min_framework_abi_minor = 0; // any 1.x framework unless the bundle needs more
};

// A base for a bundle class that gives it what the adapter reads (its identity and context
// type) and what every bundle keeps of the host: log_ (messages with the bundle's name as
// origin) and settings_ (sdk::settings, the host's setting service).
//   constexpr sdk::bundle_identity my_identity{"blas_mine", PCY_BLAS_EXTENSION, "native", "..."};
//   class my_bundle : public sdk::bundle_base<my_identity, my_context> { ... };
template <const bundle_identity& Id, class Context> class bundle_base {
public:
  using context_type = Context;
  static constexpr const char* name = Id.name;
  static constexpr const char* version = Id.version;
  static constexpr const char* description = Id.description;
  static constexpr const char* extension = Id.extension;
  static constexpr const char* framework = Id.framework;
  static constexpr uint32_t min_framework_abi_minor = Id.min_framework_abi_minor;

protected:
  explicit bundle_base(const pcy_host_services& host) : log_(&host, Id.name), settings_(&host) {}
  logger log_;
  settings settings_;
};

template <class B, void (*F)(typename B::context_type&, const op_args&)>
pcy_error* op_entry(const pcy_op_call* call) noexcept {
  return guard(B::name, [&] {
    require_struct(call, "pcy_op_call");
    F(*reinterpret_cast<typename B::context_type*>(call->context), op_args(*call));
  });
}

// A 1.0-style descriptor (signature string, no schema); op_table builds 1.1 ones.
constexpr pcy_op_desc make_op(const char* name, pcy_dtype dtype, const char* signature,
                              pcy_op_fn fn, const char* implementation,
                              const pcy_op_schema* schema = nullptr) noexcept {
  return pcy_op_desc{sizeof(pcy_op_desc), nullptr, name,           dtype,
                     signature,           fn,      implementation, schema};
}

template <class B> struct bundle_adapter {
  using Ctx = typename B::context_type;

  static pcy_error* initialize(pcy_bundle_init_args* a) noexcept {
    return guard(B::name, [&] {
      require_struct(a, "pcy_bundle_init_args");
      check_host_abi(a->host, B::name);
      auto* b = new B(*a->host);
      a->plugin = reinterpret_cast<pcy_bundle_plugin>(b);
      a->reason = nullptr;
      if constexpr (requires(const B& x) { x.reason(); }) a->reason = b->reason();
    });
  }
  static void shutdown(pcy_bundle_plugin p) noexcept { delete reinterpret_cast<B*>(p); }
  static pcy_error* ops(pcy_bundle_plugin p, const pcy_op_desc** out, size_t* count) noexcept {
    return guard(B::name, [&] {
      auto span = reinterpret_cast<const B*>(p)->ops();
      *out = span.data();
      *count = span.size();
    });
  }
  static pcy_error* context_init(pcy_bundle_context_args* a) noexcept {
    return guard(B::name, [&] {
      require_struct(a, "pcy_bundle_context_args");
      if (a->framework == nullptr || a->framework->abi_minor < B::min_framework_abi_minor)
        fail(PCY_ERR_VERSION, str("bundle '", B::name,
                                  "' needs framework ABI minor >= ", B::min_framework_abi_minor));
      a->bundle =
          reinterpret_cast<pcy_bundle_context>(reinterpret_cast<B*>(a->plugin)->create_context(*a));
    });
  }
  static void context_teardown(pcy_bundle_context c) noexcept { delete reinterpret_cast<Ctx*>(c); }
  // The bundle object is reached through the context, which keeps a pointer to it when the
  // bundle class needs one; op_available is a member of the context type.
  static bool op_available(pcy_bundle_context c, const pcy_op_desc* op,
                           const char** reason) noexcept {
    try {
      if (reason != nullptr) *reason = nullptr;
      return c == nullptr || op == nullptr ||
             reinterpret_cast<const Ctx*>(c)->op_available(*op, reason);
    } catch (...) {
      return false;
    }
  }

  // Every slot of the list (PCY_BUNDLE_API_SLOTS) is this class's function of its name; the
  // optional op_available only when the context type answers it.
  static constexpr bool offers(pcy_bundle_slot_index slot) noexcept {
    if (slot == PCY_BUNDLE_SLOT_op_available)
      return requires(const Ctx& c, const pcy_op_desc& d, const char** r) {
        { c.op_available(d, r) } -> std::convertible_to<bool>;
      };
    return true;
  }

  static constexpr pcy_bundle_api make_table() noexcept {
    pcy_bundle_api t{};
    t.struct_size = sizeof(pcy_bundle_api);
    t.abi_major = PCY_ABI_VERSION_MAJOR;
    t.abi_minor = PCY_ABI_VERSION_MINOR;
    t.kind = PCY_PLUGIN_BUNDLE;
    t.name = B::name;
    t.plugin_version = B::version;
    t.description = B::description;
    t.extension = B::extension;
    t.framework = B::framework;
    t.min_framework_abi_minor = B::min_framework_abi_minor;
#define PCY_SDK_BUNDLE_FILL(name, minor, need, thread, ret, params, args)                          \
  if constexpr (offers(PCY_BUNDLE_SLOT_##name)) t.name = &name;
    PCY_BUNDLE_API_SLOTS(PCY_SDK_BUNDLE_FILL)
#undef PCY_SDK_BUNDLE_FILL
    return t;
  }
  static constexpr pcy_bundle_api table = make_table();
};

// Framework calls from inside a bundle: throws sdk::error carrying the framework's message.
inline void check(pcy_error* e) {
  if (e == nullptr) return;
  const pcy_status code = e->code;
  std::string msg = str(e->origin, ": ", e->message);
  e->destroy(e);
  throw error(code, msg);
}

// The native object behind a framework handle (CUstream, cl_command_queue, cl_mem, ...). For a
// tensor's memory use the handle the host already resolved (pcy_tensor::data, native_of below).
inline void* native_handle(const pcy_framework_api& fw, pcy_native_object object,
                           pcy_context context, uint32_t device, pcy_queue queue,
                           pcy_memory memory) {
  if (fw.native_handle == nullptr)
    fail(PCY_ERR_UNSUPPORTED, str("framework '", fw.name, "' offers no native handles"));
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = object;
  a.context = context;
  a.device = device;
  a.queue = queue;
  a.memory = memory;
  check(fw.native_handle(&a));
  return a.handle;
}

// A tensor's native memory handle (host pointer, CUdeviceptr, cl_mem): the one the host resolved
// once into pcy_tensor::data, asked of the framework only when the host had none.
inline void* native_of(const pcy_framework_api& fw, const pcy_tensor& t) {
  if (t.data != nullptr) [[likely]]
    return t.data;
  return native_handle(fw, PCY_NATIVE_MEMORY, nullptr, 0, nullptr, t.memory);
}

// For create_context: fails UNSUPPORTED, naming each one, when the framework leaves any of
// `needed` empty (a bundle lists the slots it calls).
inline void require_slots(const pcy_framework_api& fw, const char* bundle,
                          std::initializer_list<pcy_framework_slot_index> needed) {
  std::string missing;
  for (const pcy_framework_slot_index i : needed)
    if (slot_value(fw, framework_slots[i]) == nullptr)
      missing += str(missing.empty() ? "" : ", ", framework_slots[i].name);
  if (!missing.empty())
    fail(PCY_ERR_UNSUPPORTED, str("framework '", fw.name, "' lacks ", missing, ", which ", bundle,
                                  " needs; update the framework plugin"));
}

} // namespace parenchyma::sdk

#define PCY_BUNDLE_PLUGIN(BundleClass)                                                             \
  extern "C" PCY_EXPORT const pcy_bundle_api* pcy_bundle_entry(void) {                             \
    return &::parenchyma::sdk::bundle_adapter<BundleClass>::table;                                 \
  }
