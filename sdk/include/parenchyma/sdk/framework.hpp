// parenchyma SDK, C++ side: a framework plugin is a C++ class plus one macro.
//
//   class my_plugin : public sdk::framework_plugin<my_context, my_queue, my_event, my_memory,
//                                                  my_program, my_kernel> { // last two optional
//   public:
//     static constexpr sdk::plugin_info info{"mine", "1.0", "what it drives, in one line"};
//     explicit my_plugin(const pcy_host_services& host);    // may throw; adds its devices
//   };
//   PCY_FRAMEWORK_PLUGIN(my_plugin)
//
// The base (framework_plugin.hpp) names the object types and answers device_count(), reason()
// and properties(device) from the devices the constructor added. A class may also name the types
// itself (`using context_type = ...;` for context, queue, event, memory and the optional
// program/kernel and graph types) and define those three members.
// A context is made as `new context_type(plugin, devices)` (the device indices checked), or by
// the plugin's `context_type* create_context(std::span<const uint32_t> devices)` if it has one.
//
// Objects are destroyed with `delete` (destructors must not throw). Operations are member
// functions of the objects; each optional one that a type lacks becomes a NULL slot:
//   context: queue_type* create_queue(uint32_t device);
//            memory_type* alloc(uint32_t device, uint64_t bytes, uint32_t flags);
//            memory_type* import(uint32_t device, const pcy_memory_handle&);        [optional]
//            program_type* build(std::string_view source, const char* options, bool& cache_hit);
//                                                                                  [optional]
//            void* native_context(); void* native_device(uint32_t);
//            void* native_platform(uint32_t);                                       [optional]
//   queue:   void finish(); event_type* record(); void wait(event_type&);
//            void read(memory_type&, uint64_t off, void* host, uint64_t bytes, bool blocking);
//            void write(memory_type&, uint64_t off, const void* host, uint64_t bytes, bool
//            blocking); void copy(memory_type& src, uint64_t so, memory_type& dst, uint64_t d,
//            uint64_t bytes); void fill(memory_type&, uint64_t off, uint64_t bytes, const void*
//            pattern, uint32_t size); void launch(kernel_type&, const pcy_kernel_launch_args&);
//            [optional] void* native(); [optional]
//   event:   void wait();
//   memory:  bool export_to(pcy_handle_kind, pcy_memory_handle&);  false: kind unsupported [opt]
//            void* native();                                                        [optional]
//   program: kernel_type* create_kernel(const char* name); or create_kernel(const char* name,
//            uint32_t flags) to see pcy_kernel_create_args.flags (1.3; 0 from older hosts);
//   graphs (1.2, optional: a plugin class with a graph type, the base's seventh argument):
//   queue:   graph_type* create_graph(); void capture_begin(graph_type&);
//            void capture_end(graph_type&); void launch_graph(graph_type&);
//   graph:   void instantiate();
// The members every plugin has are declared by macros, so the lists are written once:
//   class my_context { public: PCY_SDK_CONTEXT_MEMBERS(my_context, my_plugin, my_queue,
//                                                      my_memory); ... };
//   class my_queue { public: PCY_SDK_QUEUE_MEMBERS(my_memory, my_event); ... };
// (each defined by the plugin; launch, native and the graph members are declared apart).
// Throw sdk::error (or anything) to fail: the firewall turns it into a pcy_error.
#pragma once

#include <parenchyma/abi/pcy_framework.h>
#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/framework_plugin.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <algorithm>
#include <cstring>
#include <span>
#include <string_view>
#include <type_traits>

namespace parenchyma::sdk {

template <>
inline constexpr size_t min_struct_size<pcy_framework_init_args> = PCY_FRAMEWORK_INIT_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_framework_probe> = PCY_FRAMEWORK_PROBE_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_alloc_args> = PCY_MEMORY_ALLOC_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_transfer_args> =
    PCY_MEMORY_TRANSFER_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_copy_args> = PCY_MEMORY_COPY_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_fill_args> = PCY_MEMORY_FILL_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_export_args> = PCY_MEMORY_EXPORT_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_memory_import_args> = PCY_MEMORY_IMPORT_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_native_handle_args> = PCY_NATIVE_HANDLE_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_program_build_args> = PCY_PROGRAM_BUILD_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_kernel_create_args> = PCY_KERNEL_CREATE_ARGS_SIZE_1_0;
template <>
inline constexpr size_t min_struct_size<pcy_kernel_launch_args> = PCY_KERNEL_LAUNCH_ARGS_SIZE_1_0;

namespace detail {
template <class T, class H> T* from(H h) { return reinterpret_cast<T*>(h); }
template <class H, class T> H to(T* p) { return reinterpret_cast<H>(p); }

template <class P> struct graph_types { using graph = void; };
template <class P>
requires requires { typename P::graph_type; }
struct graph_types<P> {
  using graph = typename P::graph_type;
};

template <class P> struct program_types {
  using program = void;
  using kernel = void;
};
template <class P>
requires requires { typename P::program_type; }
struct program_types<P> {
  using program = typename P::program_type;
  using kernel = typename P::kernel_type;
};
} // namespace detail

template <class P> struct framework_adapter {
  using C = typename P::context_type;
  using Q = typename P::queue_type;
  using E = typename P::event_type;
  using M = typename P::memory_type;
  using Prog = typename detail::program_types<P>::program;
  using K = typename detail::program_types<P>::kernel;
  static constexpr bool has_programs = !std::is_void_v<Prog>;
  using G = typename detail::graph_types<P>::graph;
  static constexpr bool has_graphs = !std::is_void_v<G>;
  static constexpr plugin_info info = detail::info_of<P>();

  static pcy_error* initialize(pcy_framework_init_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_framework_init_args");
      check_host_abi(a->host, info.name);
      a->plugin = detail::to<pcy_plugin>(new P(*a->host));
    });
  }
  static void shutdown(pcy_plugin p) noexcept { delete detail::from<P>(p); }
  static pcy_error* probe(pcy_plugin p, pcy_framework_probe* out) noexcept {
    return guard(info.name, [&] {
      require_struct(out, "pcy_framework_probe");
      auto* self = detail::from<P>(p);
      out->device_count = self->device_count();
      out->reason = self->reason();
    });
  }
  static pcy_error* device_properties(pcy_plugin p, uint32_t device, const pcy_property** props,
                                      size_t* count) noexcept {
    return guard(info.name, [&] {
      auto* self = detail::from<P>(p);
      if (device >= self->device_count())
        fail(PCY_ERR_NOT_FOUND,
             str("device ", device, " does not exist (", self->device_count(), " devices)"));
      auto span = self->properties(device);
      *props = span.data();
      *count = span.size();
    });
  }
  static pcy_error* context_create(pcy_plugin p, const uint32_t* devices, uint32_t n,
                                   pcy_context* out) noexcept {
    return guard(info.name, [&] {
      auto* self = detail::from<P>(p);
      if (n == 0 || devices == nullptr) fail(PCY_ERR_INVALID_ARGUMENT, "a context needs a device");
      for (uint32_t i = 0; i < n; ++i)
        if (devices[i] >= self->device_count())
          fail(PCY_ERR_NOT_FOUND,
               str("device ", devices[i], " does not exist (", self->device_count(), " devices)"));
      const std::span<const uint32_t> list(devices, n);
      if constexpr (requires { self->create_context(list); })
        *out = detail::to<pcy_context>(self->create_context(list));
      else
        *out = detail::to<pcy_context>(new C(*self, list));
    });
  }
  static void context_destroy(pcy_context c) noexcept { delete detail::from<C>(c); }
  static pcy_error* queue_create(pcy_context c, uint32_t device, pcy_queue* out) noexcept {
    return guard(info.name,
                 [&] { *out = detail::to<pcy_queue>(detail::from<C>(c)->create_queue(device)); });
  }
  static void queue_destroy(pcy_queue q) noexcept { delete detail::from<Q>(q); }
  static pcy_error* queue_finish(pcy_queue q) noexcept {
    return guard(info.name, [&] { detail::from<Q>(q)->finish(); });
  }
  static pcy_error* event_record(pcy_queue q, pcy_event* out) noexcept {
    return guard(info.name, [&] { *out = detail::to<pcy_event>(detail::from<Q>(q)->record()); });
  }
  static pcy_error* event_wait(pcy_event e) noexcept {
    return guard(info.name, [&] { detail::from<E>(e)->wait(); });
  }
  static pcy_error* queue_wait_event(pcy_queue q, pcy_event e) noexcept {
    return guard(info.name, [&] { detail::from<Q>(q)->wait(*detail::from<E>(e)); });
  }
  static void event_destroy(pcy_event e) noexcept { delete detail::from<E>(e); }

  static pcy_error* memory_alloc(pcy_memory_alloc_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_alloc_args");
      if (a->bytes == 0) fail(PCY_ERR_INVALID_ARGUMENT, "memory_alloc of 0 bytes");
      a->memory =
          detail::to<pcy_memory>(detail::from<C>(a->context)->alloc(a->device, a->bytes, a->flags));
    });
  }
  static void memory_free(pcy_memory m) noexcept { delete detail::from<M>(m); }
  static pcy_error* memory_read(const pcy_memory_transfer_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_transfer_args");
      detail::from<Q>(a->queue)->read(*detail::from<M>(a->memory), a->offset, a->host_pointer,
                                      a->bytes, a->blocking);
    });
  }
  static pcy_error* memory_write(const pcy_memory_transfer_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_transfer_args");
      detail::from<Q>(a->queue)->write(*detail::from<M>(a->memory), a->offset, a->host_pointer,
                                       a->bytes, a->blocking);
    });
  }
  static pcy_error* memory_copy(const pcy_memory_copy_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_copy_args");
      detail::from<Q>(a->queue)->copy(*detail::from<M>(a->src), a->src_offset,
                                      *detail::from<M>(a->dst), a->dst_offset, a->bytes);
    });
  }
  static pcy_error* memory_fill(const pcy_memory_fill_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_fill_args");
      const uint32_t ps = a->pattern_size;
      if (ps != 1 && ps != 2 && ps != 4 && ps != 8 && ps != 16)
        fail(PCY_ERR_INVALID_ARGUMENT,
             str("fill pattern of ", ps, " bytes: the pattern must be 1, 2, 4, 8 or 16 bytes"));
      if (a->pattern == nullptr) fail(PCY_ERR_INVALID_ARGUMENT, "fill pattern is NULL");
      if (a->bytes % a->pattern_size != 0)
        fail(PCY_ERR_INVALID_ARGUMENT, str("fill of ", a->bytes, " bytes is not a multiple of the ",
                                           a->pattern_size, "-byte pattern"));
      detail::from<Q>(a->queue)->fill(*detail::from<M>(a->memory), a->offset, a->bytes, a->pattern,
                                      a->pattern_size);
    });
  }
  static pcy_error* memory_export(pcy_memory_export_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_export_args");
      require_struct(a->handle, "pcy_memory_handle");
      const size_t size = a->handle->struct_size;
      std::memset(a->handle, 0, std::min(size, sizeof(pcy_memory_handle))); // never past its end
      a->handle->struct_size = size;
      if (!detail::from<M>(a->memory)->export_to(a->kind, *a->handle))
        fail(PCY_ERR_UNSUPPORTED, str(info.name, " memory cannot be exported as handle kind ",
                                      static_cast<int>(a->kind)));
      a->handle->kind = a->kind;
    });
  }
  static pcy_error* memory_import(pcy_memory_import_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_memory_import_args");
      require_struct(a->handle, "pcy_memory_handle");
      a->memory =
          detail::to<pcy_memory>(detail::from<C>(a->context)->import(a->device, *a->handle));
    });
  }
  static pcy_error* native_handle(pcy_native_handle_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_native_handle_args");
      a->handle = nullptr;
      // A member that exists answers, even with NULL (CUDA device 0 is a NULL CUdevice).
      bool answered = false;
      switch (a->object) {
      case PCY_NATIVE_CONTEXT:
        if constexpr (requires(C & c) { c.native_context(); }) {
          a->handle = detail::from<C>(a->context)->native_context();
          answered = true;
        }
        break;
      case PCY_NATIVE_DEVICE:
        if constexpr (requires(C & c) { c.native_device(0u); }) {
          a->handle = detail::from<C>(a->context)->native_device(a->device);
          answered = true;
        }
        break;
      case PCY_NATIVE_PLATFORM:
        if constexpr (requires(C & c) { c.native_platform(0u); }) {
          a->handle = detail::from<C>(a->context)->native_platform(a->device);
          answered = true;
        }
        break;
      case PCY_NATIVE_QUEUE:
        if constexpr (requires(Q & q) { q.native(); }) {
          a->handle = detail::from<Q>(a->queue)->native();
          answered = true;
        }
        break;
      case PCY_NATIVE_MEMORY:
        if constexpr (requires(M & m) { m.native(); }) {
          a->handle = detail::from<M>(a->memory)->native();
          answered = true;
        }
        break;
      }
      if (!answered)
        fail(PCY_ERR_UNSUPPORTED,
             str(info.name, " has no native handle of kind ", static_cast<int>(a->object)));
    });
  }

  static pcy_error* program_build(pcy_program_build_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_program_build_args");
      if (a->source == nullptr) fail(PCY_ERR_INVALID_ARGUMENT, "program source is NULL");
      std::string_view src = a->source_size ? std::string_view(a->source, a->source_size)
                                            : std::string_view(a->source);
      bool hit = false;
      a->program =
          detail::to<pcy_program>(detail::from<C>(a->context)->build(src, a->options, hit));
      a->cache_hit = hit;
    });
  }
  static void program_destroy(pcy_program p) noexcept { delete detail::from<Prog>(p); }
  static pcy_error* kernel_create(pcy_kernel_create_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_kernel_create_args");
      if (a->name == nullptr) fail(PCY_ERR_INVALID_ARGUMENT, "kernel name is NULL");
      Prog* prog = detail::from<Prog>(a->program);
      const uint32_t flags = PCY_HAS_FIELD(a, pcy_kernel_create_args, flags) ? a->flags : 0u; // 1.3
      if constexpr (requires { prog->create_kernel(a->name, flags); })
        a->kernel = detail::to<pcy_kernel>(prog->create_kernel(a->name, flags));
      else
        a->kernel = detail::to<pcy_kernel>(prog->create_kernel(a->name));
    });
  }
  static void kernel_destroy(pcy_kernel k) noexcept { delete detail::from<K>(k); }
  static pcy_error* kernel_launch(const pcy_kernel_launch_args* a) noexcept {
    return guard(info.name, [&] {
      require_struct(a, "pcy_kernel_launch_args");
      if (a->dims < 1 || a->dims > 3)
        fail(PCY_ERR_INVALID_ARGUMENT, str("kernel launch with ", a->dims, " dimensions (1..3)"));
      detail::from<Q>(a->queue)->launch(*detail::from<K>(a->kernel), *a);
    });
  }

  static pcy_error* graph_create(pcy_queue q, pcy_graph* out) noexcept {
    return guard(info.name, [&] {
      if (out == nullptr) fail(PCY_ERR_INVALID_ARGUMENT, "graph_create without an out pointer");
      *out = nullptr;
      if constexpr (has_graphs) *out = detail::to<pcy_graph>(detail::from<Q>(q)->create_graph());
    });
  }
  static pcy_error* queue_capture_begin(pcy_queue q, pcy_graph g) noexcept {
    return guard(info.name, [&] {
      if constexpr (has_graphs) detail::from<Q>(q)->capture_begin(*detail::from<G>(g));
    });
  }
  static pcy_error* queue_capture_end(pcy_queue q, pcy_graph g) noexcept {
    return guard(info.name, [&] {
      if constexpr (has_graphs) detail::from<Q>(q)->capture_end(*detail::from<G>(g));
    });
  }
  static pcy_error* graph_instantiate(pcy_graph g) noexcept {
    return guard(info.name, [&] {
      if constexpr (has_graphs) detail::from<G>(g)->instantiate();
    });
  }
  static pcy_error* graph_launch(pcy_queue q, pcy_graph g) noexcept {
    return guard(info.name, [&] {
      if constexpr (has_graphs) detail::from<Q>(q)->launch_graph(*detail::from<G>(g));
    });
  }
  static void graph_destroy(pcy_graph g) noexcept {
    if constexpr (has_graphs) delete detail::from<G>(g);
  }

  // Whether the plugin class offers a slot: the optional groups by their types, the optional
  // memory slots by their members; everything else always.
  static constexpr bool offers(pcy_framework_slot_index slot) noexcept {
    if (slot == PCY_FRAMEWORK_SLOT_memory_export) return requires(M & m, pcy_memory_handle & h) {
        m.export_to(PCY_HANDLE_NONE, h);
      };
    if (slot == PCY_FRAMEWORK_SLOT_memory_import)
      return requires(C & c, const pcy_memory_handle& h) { c.import(0u, h); };
    switch (framework_slots[slot].need) {
    case slot_need::programs: return has_programs;
    case slot_need::graphs: return has_graphs;
    default: return true;
    }
  }

  static constexpr pcy_framework_api make_table() noexcept {
    pcy_framework_api t{};
    t.struct_size = sizeof(pcy_framework_api);
    t.ext = nullptr;
    t.abi_major = PCY_ABI_VERSION_MAJOR;
    t.abi_minor = PCY_ABI_VERSION_MINOR;
    t.kind = PCY_PLUGIN_FRAMEWORK;
    t.name = info.name;
    t.plugin_version = info.version;
    t.description = info.description;
    // Every slot of the list (PCY_FRAMEWORK_API_SLOTS) is this class's function of its name,
    // unless the plugin class does not offer it.
#define PCY_SDK_FRAMEWORK_FILL(name, minor, need, thread, ret, params, args)                       \
  if constexpr (offers(PCY_FRAMEWORK_SLOT_##name)) t.name = &name;
    PCY_FRAMEWORK_API_SLOTS(PCY_SDK_FRAMEWORK_FILL)
#undef PCY_SDK_FRAMEWORK_FILL
    return t;
  }
  static constexpr pcy_framework_api table = make_table();
};

} // namespace parenchyma::sdk

// The required context members (the list above), declared in a plugin's context class: the
// constructor the adapter calls (`new context(plugin, devices)`), the destructor, no copies,
// create_queue and alloc.
#define PCY_SDK_CONTEXT_MEMBERS(context_type, plugin_type, queue_type, memory_type)                \
  context_type(plugin_type& owner, std::span<const uint32_t> devices);                             \
  ~context_type();                                                                                 \
  context_type(const context_type&) = delete;                                                      \
  context_type& operator=(const context_type&) = delete;                                           \
  queue_type* create_queue(uint32_t device);                                                       \
  memory_type* alloc(uint32_t device, uint64_t bytes, uint32_t flags)

// The required queue members (the list above), declared in a plugin's queue class.
#define PCY_SDK_QUEUE_MEMBERS(memory_type, event_type)                                             \
  void finish();                                                                                   \
  event_type* record();                                                                            \
  void wait(event_type& e);                                                                        \
  void read(memory_type& m, uint64_t offset, void* host, uint64_t bytes, bool blocking);           \
  void write(memory_type& m, uint64_t offset, const void* host, uint64_t bytes, bool blocking);    \
  void copy(memory_type& src, uint64_t src_offset, memory_type& dst, uint64_t dst_offset,          \
            uint64_t bytes);                                                                       \
  void fill(memory_type& m, uint64_t offset, uint64_t bytes, const void* pattern, uint32_t size)

// Emits the plugin's one exported symbol. Use once, at namespace scope, in one source file.
#define PCY_FRAMEWORK_PLUGIN(PluginClass)                                                          \
  extern "C" PCY_EXPORT const pcy_framework_api* pcy_framework_entry(void) {                       \
    return &::parenchyma::sdk::framework_adapter<PluginClass>::table;                              \
  }
