// parenchyma SDK: the set-up every bundle over a device framework (CUDA, OpenCL) makes once per
// context, written once. A bundle's context type derives from sdk::device_context, which keeps the
// framework objects the context was made for and owns what it creates through them (memory,
// programs, kernels: freed when the context goes); create_context checks the framework slots the
// bundle needs (require_slots, bundle.hpp), reads the device's facts (device_facts_of) and asks the
// native handles it binds a vendor library to (device_context::native). A CUDA bundle's context
// derives from cuda_device_context, which keeps the CUcontext and CUstream and makes the context
// current for cuBLAS/cuDNN (cuda_driver); open_cuda_library finds such a vendor library. For a
// vendor library whose first use of a routine is not thread-safe, first_use serialises it.
// device_number reads a framework's own device property; kernel_sections cuts a GLSL source of
// `#kernel` sections into one source per kernel (the Vulkan bundles build each on first use).
//
//   struct my_context : sdk::device_context {
//     explicit my_context(const pcy_bundle_context_args& a) : device_context(a) {}
//     pcy_kernel k = nullptr;
//   };
//   my_context* create_context(const pcy_bundle_context_args& a) {
//     sdk::require_slots(*a.framework, name, {PCY_FRAMEWORK_SLOT_program_build, ...});
//     auto cx = std::make_unique<my_context>(a);
//     const sdk::device_facts dev = sdk::device_facts_of(a);
//     void* stream = cx->native(PCY_NATIVE_QUEUE);
//     cx->k = cx->kernel(cx->build(source, options), "my_kernel");
//     return cx.release();
//   }
//
// Nothing here runs per op but device_context::launch (a few stores and the framework's call).
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/launch.hpp>
#include <parenchyma/sdk/slots.hpp>

#include <parenchyma/sdk/library.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parenchyma::sdk {

// What a bundle sizes itself by, from the device's properties (by the plugin's own device
// index). A framework that answers none leaves the defaults: a GPU-like device with fp64.
struct device_facts {
  bool cpu = false;           // PCY_PROP_KIND is PCY_DEVICE_CPU
  bool fp64 = true;           // PCY_PROP_FP64
  int64_t compute_units = 0;  // PCY_PROP_COMPUTE_UNITS; 0: not said
  int64_t max_work_group = 0; // PCY_PROP_MAX_WORK_GROUP; 0: not said
  std::string uuid, name;     // PCY_PROP_UUID, PCY_PROP_NAME; empty: not said
};

// Calls f(property) for each of the device's properties (none when the framework answers none,
// fails, or sends malformed ones).
template <class F> void each_device_property(const pcy_bundle_context_args& a, F&& f) {
  const pcy_framework_api& fw = *a.framework;
  if (fw.device_properties == nullptr) return;
  const pcy_property* props = nullptr;
  size_t count = 0;
  if (pcy_error* e = fw.device_properties(a.framework_plugin, a.plugin_device, &props, &count)) {
    e->destroy(e);
    return;
  }
  // Stepped by the elements' own struct_size: a newer framework may send larger ones (a smaller
  // one is malformed: none).
  if (count == 0 || props == nullptr || props[0].struct_size < sizeof(pcy_property)) return;
  const size_t stride = props[0].struct_size;
  for (size_t i = 0; i < count; ++i) {
    const pcy_property& p =
        *reinterpret_cast<const pcy_property*>(reinterpret_cast<const char*>(props) + i * stride);
    if (p.key != nullptr) f(p);
  }
}

inline device_facts device_facts_of(const pcy_bundle_context_args& a) {
  device_facts f; // a framework that answers none leaves the defaults
  each_device_property(a, [&](const pcy_property& p) {
    const std::string_view key = p.key;
    if (key == PCY_PROP_KIND) f.cpu = p.i == PCY_DEVICE_CPU;
    if (key == PCY_PROP_FP64) f.fp64 = p.i != 0;
    if (key == PCY_PROP_COMPUTE_UNITS) f.compute_units = p.i;
    if (key == PCY_PROP_MAX_WORK_GROUP) f.max_work_group = p.i;
    if (key == PCY_PROP_UUID && p.s != nullptr) f.uuid = p.s;
    if (key == PCY_PROP_NAME && p.s != nullptr) f.name = p.s;
  });
  return f;
}

// A number property of the device by its key (a framework's own, such as the Vulkan plugin's
// "max_storage_buffer_range"); `otherwise` when the framework does not say.
inline int64_t device_number(const pcy_bundle_context_args& a, std::string_view key,
                             int64_t otherwise) {
  int64_t v = otherwise;
  each_device_property(a, [&](const pcy_property& p) {
    if (key == p.key) v = p.i;
  });
  return v;
}

// A GLSL source of `#kernel NAME` sections (the Vulkan plugin's form, docs/vulkan.md) cut into one
// source per kernel of `names`: the shared lines before the first `#kernel`, that kernel's
// section, every other line blank, so that the compiler's line numbers are the file's. A bundle
// that builds each kernel as its own program, on its first use, compiles only what it calls.
inline std::vector<std::string> kernel_sections(std::string_view source,
                                                std::span<const char* const> names) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at <= source.size();) {
    const size_t nl = source.find('\n', at);
    lines.push_back(source.substr(at, nl == std::string_view::npos ? source.size() - at : nl - at));
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  std::vector<int> owner(lines.size(), -1); // -1: shared; -2: a kernel not named; else its index
  int current = -1;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].substr(0, 8) == "#kernel ") {
      current = -2;
      int k = 0;
      for (const char* name : names) {
        if (lines[i].substr(8) == name) current = k;
        ++k;
      }
    }
    owner[i] = current;
  }
  std::vector<std::string> out(names.size());
  for (size_t k = 0; k < out.size(); ++k)
    for (size_t i = 0; i < lines.size(); ++i) {
      if (owner[i] == -1 || owner[i] == static_cast<int>(k)) out[k].append(lines[i]);
      out[k].push_back('\n');
    }
  return out;
}

// A program built for one dtype (the OpenCL bundles build one per dtype, -DREAL=float|double).
// A dtype the device may lack (f64 without cl_khr_fp64) is optional: when its build fails it is
// unavailable with the reason, and the context keeps serving the others.
struct dtype_program {
  bool available = false;
  std::string reason; // why not available
  pcy_program program = nullptr;
};

// The f32 and f64 programs of a bundle that builds one per dtype: f32 always (a failure fails
// the context), f64 where the device has fp64 (device_facts::fp64), and even then optional (a
// failed build leaves it unavailable). build(program, real, required) builds one, real being
// "float" or "double"; `what` names the ops in the reason ("f64 <what> on this device: ...").
template <class Build>
void build_f32_f64(const device_facts& dev, dtype_program& f32, dtype_program& f64,
                   const char* what, Build&& build) {
  build(f32, "float", true);
  if (dev.fp64)
    build(f64, "double", false);
  else
    f64.reason = str("f64 ", what, " on this device: the device has no fp64 (cl_khr_fp64)");
}

// The base of a device bundle's context: the framework objects it was made for, and the calls
// every device bundle makes through them. What it creates it owns: freed (kernels, then
// programs, then memory) when the context is deleted, after the derived context's own teardown.
// The host serialises a context's ops; the set-up calls are not for the hot path.
class device_context {
public:
  explicit device_context(const pcy_bundle_context_args& a) noexcept
      : fw(a.framework), context(a.context), device(a.device), queue(a.queue) {}
  device_context(const device_context&) = delete;
  device_context& operator=(const device_context&) = delete;
  ~device_context() {
    for (pcy_kernel k : kernels_)
      fw->kernel_destroy(k);
    for (pcy_program p : programs_)
      fw->program_destroy(p);
    for (pcy_memory m : memory_)
      fw->memory_free(m);
  }

  const pcy_framework_api* fw;
  pcy_context context;
  uint32_t device;
  pcy_queue queue; // the backend's queue this context serves

  // The native object behind the context, device or queue (CUcontext, cl_device_id, CUstream /
  // cl_command_queue, ...).
  void* native(pcy_native_object object) const {
    return native_handle(*fw, object, context, device, object == PCY_NATIVE_QUEUE ? queue : nullptr,
                         nullptr);
  }
  // A memory's native handle (CUdeviceptr, cl_mem). For a tensor use native_of (bundle.hpp).
  void* native(pcy_memory memory) const {
    return native_handle(*fw, PCY_NATIVE_MEMORY, nullptr, 0, nullptr, memory);
  }

  // Device memory owned by the context (freed with it, or earlier by free()).
  pcy_memory alloc(uint64_t bytes) {
    pcy_memory_alloc_args m{};
    m.struct_size = sizeof m;
    m.context = context;
    m.device = device;
    m.bytes = bytes;
    memory_.reserve(memory_.size() + 1); // nothing to undo once allocated
    check(fw->memory_alloc(&m));
    memory_.push_back(m.memory);
    return m.memory;
  }
  // Frees memory from alloc() before the context goes (no work may use it any more).
  void free(pcy_memory m) noexcept {
    const auto it = std::find(memory_.begin(), memory_.end(), m);
    if (it == memory_.end()) return;
    memory_.erase(it);
    fw->memory_free(m);
  }
  // Fills `bytes` at `offset` of `m` with a pattern, enqueued on `q`.
  void fill(pcy_queue q, pcy_memory m, uint64_t offset, uint64_t bytes, const void* pattern,
            uint32_t pattern_size) const {
    pcy_memory_fill_args f{};
    f.struct_size = sizeof f;
    f.queue = q;
    f.memory = m;
    f.offset = offset;
    f.bytes = bytes;
    f.pattern = pattern;
    f.pattern_size = pattern_size;
    check(fw->memory_fill(&f));
  }

  // Why a program did not build: the framework's status and message (its build log included).
  struct build_failure {
    pcy_status code = PCY_OK;
    std::string message;
  };
  // A program built from `source` (through the framework's kernel cache) and owned by the
  // context. A failure throws the framework's error, or, given `failed`, is reported there and
  // returns nullptr (for kernels a context can do without).
  pcy_program build(const char* source, const char* options = nullptr,
                    build_failure* failed = nullptr, bool* cache_hit = nullptr) {
    pcy_program_build_args b{};
    b.struct_size = sizeof b;
    b.context = context;
    b.source = source;
    b.options = options;
    programs_.reserve(programs_.size() + 1);
    if (pcy_error* e = fw->program_build(&b)) {
      if (failed == nullptr) check(e);
      failed->code = e->code;
      failed->message = e->message != nullptr ? e->message : "";
      e->destroy(e);
      return nullptr;
    }
    programs_.push_back(b.program);
    if (cache_hit != nullptr) *cache_hit = b.cache_hit;
    return b.program;
  }
  // Builds `d` (see dtype_program): a failure throws when `required`, else leaves `d` unavailable
  // with the reason "<what> did not build on this device (<message>)", logged at info. `what`
  // names the kernels in the messages ("f64 BLAS kernels"). True when built (the caller then
  // creates the kernels and sets d.available).
  bool build(dtype_program& d, const char* source, const std::string& options, bool required,
             const char* what, const logger& log) {
    build_failure failed;
    bool cache_hit = false;
    d.program = build(source, options.c_str(), required ? nullptr : &failed, &cache_hit);
    if (d.program == nullptr) {
      d.reason = str(what, " did not build on this device (", failed.message, ")");
      log.info(d.reason);
      return false;
    }
    log.debug("built ", what, cache_hit ? " (from the cache)" : "");
    return true;
  }
  // A kernel of a program, owned by the context. `flags`: pcy_kernel_flags (1.3).
  pcy_kernel kernel(pcy_program program, const char* name, uint32_t flags = 0) {
    pcy_kernel_create_args k{};
    k.struct_size = sizeof k;
    k.program = program;
    k.name = name;
    k.flags = flags;
    kernels_.reserve(kernels_.size() + 1);
    check(fw->kernel_create(&k));
    kernels_.push_back(k.kernel);
    return k.kernel;
  }
  // A kernel launch on `q`; unused dimensions of global and local are 1.
  void launch(pcy_queue q, pcy_kernel k, uint32_t dims, const std::array<uint64_t, 3>& global,
              const std::array<uint32_t, 3>& local,
              std::initializer_list<pcy_kernel_arg> args) const {
    const pcy_kernel_launch_args l =
        launch_args(q, k, dims, global, local, args.begin(), static_cast<uint32_t>(args.size()));
    check(fw->kernel_launch(&l));
  }

private:
  std::vector<pcy_kernel> kernels_;
  std::vector<pcy_program> programs_;
  std::vector<pcy_memory> memory_;
};

// Serialises process-wide the calls a vendor library is not safe to make concurrently the
// first time (CLBlast fills its kernel database unlocked on a routine's first use): run(done, f)
// takes the lock until f has completed once for `done`, a flag of the caller's bundle context
// (whose ops the host serialises); later calls test the flag and take no lock.
class first_use {
public:
  template <class F> void run(bool& done, F&& f) {
    if (done) [[likely]] {
      std::forward<F>(f)();
      return;
    }
    std::lock_guard lock(mutex_);
    std::forward<F>(f)();
    done = true; // not when f threw: the next call is a first one again
  }

private:
  std::mutex mutex_;
};

// ---- CUDA bundles ----------------------------------------------------------------------------

// The driver calls a CUDA bundle makes to run a vendor library (cuBLAS, cuDNN) in its context:
// cuCtxGetCurrent and cuCtxSetCurrent from libcuda.so.1, which the CUDA framework plugin has
// loaded already. The types come from the bundle's cuda.h: sdk::cuda_driver<CUcontext, CUresult>.
template <class Context, class Result> class cuda_driver {
public:
  // Empty when loaded, else why not (the bundle's reason).
  std::string load() {
    const char* driver = os::cuda_driver_library;
    os::library l;
    if (std::string e = l.open(driver); !e.empty()) return str(driver, " not found: ", e);
    lib_ = l.release();
    get_ = symbol<Result (*)(Context*)>("cuCtxGetCurrent");
    set_ = symbol<Result (*)(Context)>("cuCtxSetCurrent");
    if (get_ == nullptr || set_ == nullptr) {
      set_ = nullptr;
      return str(driver, " lacks cuCtxGetCurrent/cuCtxSetCurrent: update the NVIDIA driver");
    }
    return {};
  }
  bool loaded() const noexcept { return set_ != nullptr; }
  // Another driver entry point (nullptr when absent), e.g. the events a bundle times with.
  template <class F> F symbol(const char* name) const noexcept {
    return reinterpret_cast<F>(os::library::find(lib_, name));
  }
  // Makes `c` the calling thread's current context (vendor libraries run in it); one driver call
  // when it is already. Throws naming `origin` when the driver refuses.
  void make_current(Context c, const char* origin) const {
    Context now = nullptr;
    if (get_(&now) == Result{} && now == c) return; // Result{}: CUDA_SUCCESS
    if (const Result r = set_(c); r != Result{})
      fail(PCY_ERR_DEVICE,
           str(origin, ": cuCtxSetCurrent failed (CUresult ", static_cast<int>(r), ")"));
  }

private:
  void* lib_ = nullptr; // left loaded: the framework plugin holds the driver anyway
  Result (*get_)(Context*) = nullptr;
  Result (*set_)(Context) = nullptr;
};

// The base of a CUDA bundle's context: device_context plus the CUcontext and the CUstream of the
// backend's queue (asked once), which the bundle binds its vendor library to, and current(),
// which makes that context the calling thread's before a vendor call.
template <class Context, class Result, class Stream>
class cuda_device_context : public device_context {
public:
  cuda_device_context(const pcy_bundle_context_args& a, const cuda_driver<Context, Result>& driver,
                      const char* origin)
      : device_context(a), cu_ctx(static_cast<Context>(native(PCY_NATIVE_CONTEXT))),
        stream(static_cast<Stream>(native(PCY_NATIVE_QUEUE))), driver_(&driver), origin_(origin) {}
  void current() const { driver_->make_current(cu_ctx, origin_); }

  const Context cu_ctx;
  const Stream stream;

private:
  const cuda_driver<Context, Result>* driver_;
  const char* origin_;
};

// A vendor library a CUDA bundle loads at run time (cuBLAS, cuDNN): each of `names` as the
// dynamic loader finds it, then each of `toolkit_names` under $CUDA_HOME/lib64, $CUDA_PATH/lib64
// (read through `s`, so the host's rules hold) and /usr/local/cuda/lib64. Left loaded for the
// process: these libraries keep process-wide state and register exit work.
struct cuda_library {
  void* handle = nullptr;  // dlopen's handle (an HMODULE on Windows), never closed
  std::string soname;      // the file name that loaded (when handle is set)
  std::string first_error; // dlerror of the first name tried (when it is not)
};
inline cuda_library open_cuda_library(const settings& s, std::initializer_list<const char*> names,
                                      std::initializer_list<const char*> toolkit_names) {
  std::vector<std::string> candidates(names.begin(), names.end());
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* root = s.find(var))
      for (const char* n : toolkit_names)
        candidates.push_back(str(root, "/lib64/", n));
  for (const char* n : toolkit_names)
    candidates.push_back(str("/usr/local/cuda/lib64/", n));
  cuda_library lib;
  for (const std::string& c : candidates) {
    os::library l;
    const std::string e = l.open(os::path_from_utf8(c));
    if (e.empty()) {
      lib.handle = l.release();
      lib.soname = c.substr(c.rfind('/') == std::string::npos ? 0 : c.rfind('/') + 1);
      return lib;
    }
    if (lib.first_error.empty()) lib.first_error = e;
  }
  return lib;
}

} // namespace parenchyma::sdk
