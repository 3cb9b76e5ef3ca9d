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
//   };
//   PCY_BUNDLE_PLUGIN(my_bundle)
//
// An op is a function void f(context_type&, const parenchyma::sdk::op_args&) wrapped by
// parenchyma::sdk::op_entry<my_bundle, f> (the exception firewall) in its pcy_op_desc.
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/sdk/common.hpp>

#include <span>

namespace parenchyma::sdk {

// Typed access to an op call's arguments. The host already checked kinds against the
// signature, so accessors only assert in debug builds.
class op_args {
public:
  explicit op_args(const pcy_op_call& call) : call_(call) {}
  int64_t i(uint32_t k) const noexcept { return call_.args[k].i; }
  double f(uint32_t k) const noexcept { return call_.args[k].f; }
  const pcy_tensor& t(uint32_t k) const noexcept { return *call_.args[k].tensor; }
  pcy_arg_intent intent(uint32_t k) const noexcept { return call_.args[k].intent; }
  // A scalar ("s") slot holds a host value (FLOAT) or a one-element tensor.
  bool is_tensor(uint32_t k) const noexcept { return call_.args[k].kind == PCY_OP_ARG_TENSOR; }
  uint32_t size() const noexcept { return call_.arg_count; }
  pcy_queue queue() const noexcept { return call_.queue; }
  const pcy_op_call& call() const noexcept { return call_; }

private:
  const pcy_op_call& call_;
};

template <class B, void (*F)(typename B::context_type&, const op_args&)>
pcy_error* op_entry(const pcy_op_call* call) noexcept {
  return guard(B::name, [&] {
    F(*reinterpret_cast<typename B::context_type*>(call->context), op_args(*call));
  });
}

constexpr pcy_op_desc make_op(const char* name, pcy_dtype dtype, const char* signature,
                              pcy_op_fn fn, const char* implementation) noexcept {
  return pcy_op_desc{sizeof(pcy_op_desc), nullptr, name, dtype, signature, fn, implementation};
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
    t.initialize = &initialize;
    t.shutdown = &shutdown;
    t.ops = &ops;
    t.context_init = &context_init;
    t.context_teardown = &context_teardown;
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

// The native object behind a framework handle (CUstream, cl_command_queue, cl_mem, ...).
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

} // namespace parenchyma::sdk

#define PCY_BUNDLE_PLUGIN(BundleClass)                                                             \
  extern "C" PCY_EXPORT const pcy_bundle_api* pcy_bundle_entry(void) {                             \
    return &::parenchyma::sdk::bundle_adapter<BundleClass>::table;                                 \
  }
