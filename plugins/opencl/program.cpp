// Programs built from OpenCL C source (through the on-disk binary cache), kernels, and kernel
// launch — the per-op hot path: no allocation, lock or name lookup unless something fails.
#include "opencl.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <type_traits>

namespace parenchyma::opencl {

// ---- building ---------------------------------------------------------------------------------

namespace {
std::string build_log(const cl_api& cl, cl_program p, cl_device_id d) {
  size_t n = 0;
  if (cl.clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS || n == 0)
    return {};
  std::string s(n, '\0');
  if (cl.clGetProgramBuildInfo(p, d, CL_PROGRAM_BUILD_LOG, n, s.data(), nullptr) != CL_SUCCESS)
    return {};
  while (!s.empty() && (s.back() == '\0' || s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}
} // namespace

cl_program context::build_from_source(std::string_view source, const std::string& options) {
  const char* text = source.data();
  const size_t size = source.size();
  cl_int err = CL_SUCCESS;
  cl_program p = cl_.clCreateProgramWithSource(ctx_, 1, &text, &size, &err);
  if (err != CL_SUCCESS || p == nullptr)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateProgramWithSource", err);
  err = cl_.clBuildProgram(p, static_cast<cl_uint>(ids_.size()), ids_.data(), options.c_str(),
                           nullptr, nullptr);
  if (err == CL_SUCCESS) {
    if (owner_.log().enabled(PCY_LOG_DEBUG))
      for (size_t i = 0; i < ids_.size(); ++i)
        if (auto log = build_log(cl_, p, ids_[i]); !log.empty())
          owner_.log().debug("build log for '", devices_[i]->name, "':\n", log);
    return p;
  }
  // Every device's log goes into the error: the user needs the compiler's words.
  std::string msg;
  for (size_t i = 0; i < ids_.size(); ++i) {
    cl_build_status status = CL_BUILD_NONE;
    cl_.clGetProgramBuildInfo(p, ids_[i], CL_PROGRAM_BUILD_STATUS, sizeof status, &status, nullptr);
    if (status == CL_BUILD_SUCCESS && ids_.size() > 1) continue;
    const std::string log = build_log(cl_, p, ids_[i]);
    msg += sdk::str("\n--- build log for '", devices_[i]->name, "' ---\n",
                    log.empty() ? "(the driver gave no build log)" : log);
  }
  cl_.clReleaseProgram(p);
  std::string advice;
  pcy_status code = PCY_ERR_BUILD;
  switch (err) {
  case CL_BUILD_PROGRAM_FAILURE: advice = "the OpenCL C source did not compile; fix it"; break;
  case CL_INVALID_BUILD_OPTIONS:
    advice =
        sdk::str("the build options '", options.substr(0, options.rfind(" -cl-kernel-arg-info")),
                 "' were refused; fix them");
    break;
  case CL_COMPILER_NOT_AVAILABLE:
    advice = "this device has no OpenCL C compiler";
    code = PCY_ERR_UNSUPPORTED;
    break;
  default: code = status_for(err, PCY_ERR_BUILD); break;
  }
  cl_fail(code, "clBuildProgram", err, advice + msg);
}

cl_program context::build_from_binaries(const std::vector<std::vector<unsigned char>>& bins,
                                        const std::string& options, std::string& why) {
  std::vector<size_t> sizes;
  std::vector<const unsigned char*> ptrs;
  for (const auto& b : bins) {
    sizes.push_back(b.size());
    ptrs.push_back(b.data());
  }
  std::vector<cl_int> status(bins.size(), CL_SUCCESS);
  cl_int err = CL_SUCCESS;
  cl_program p = cl_.clCreateProgramWithBinary(ctx_, static_cast<cl_uint>(ids_.size()), ids_.data(),
                                               sizes.data(), ptrs.data(), status.data(), &err);
  if (err != CL_SUCCESS || p == nullptr) {
    why = sdk::str("clCreateProgramWithBinary: ", cl_error_name(err));
    if (p != nullptr) cl_.clReleaseProgram(p);
    return nullptr;
  }
  for (cl_int s : status)
    if (s != CL_SUCCESS) {
      why = sdk::str("clCreateProgramWithBinary: binary status ", cl_error_name(s));
      cl_.clReleaseProgram(p);
      return nullptr;
    }
  err = cl_.clBuildProgram(p, static_cast<cl_uint>(ids_.size()), ids_.data(), options.c_str(),
                           nullptr, nullptr);
  if (err != CL_SUCCESS) {
    why = sdk::str("clBuildProgram (binary): ", cl_error_name(err));
    cl_.clReleaseProgram(p);
    return nullptr;
  }
  return p;
}

namespace {
// Everything that changes the compiler's output: each device's identity, the options and the
// source, every field length-prefixed.
sdk::blob_cache::key_type program_key(const std::vector<const device_info*>& devices,
                                      std::string_view source, std::string_view options) {
  sdk::sha256 h;
  h.field("parenchyma-opencl-program-v2");
  for (const device_info* d : devices)
    h.field(d->name)
        .field(d->vendor)
        .field(d->platform_version)
        .field(d->version)
        .field(d->driver_version);
  h.field(options).field(source);
  return h.finish();
}

// The program's binaries, one per device in the order the program was built for; runs on the
// cache's writer thread. nullopt when the driver offers none.
std::optional<sdk::blob_cache::blob> fetch_binaries(const cl_api& cl, const sdk::logger& log,
                                                    cl_program p, size_t n) {
  std::vector<size_t> sizes(n, 0);
  cl_int err = cl.clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizes.size() * sizeof(size_t),
                                   sizes.data(), nullptr);
  if (err != CL_SUCCESS ||
      std::any_of(sizes.begin(), sizes.end(), [](size_t s) { return s == 0; })) {
    log.debug("kernel cache: the driver offers no program binary (", cl_error_name(err),
              "); not cached");
    return std::nullopt;
  }
  std::vector<sdk::blob_cache::blob> bins(n);
  std::vector<unsigned char*> ptrs;
  for (size_t i = 0; i < n; ++i) {
    bins[i].resize(sizes[i]);
    ptrs.push_back(bins[i].data());
  }
  err = cl.clGetProgramInfo(p, CL_PROGRAM_BINARIES, ptrs.size() * sizeof(unsigned char*),
                            ptrs.data(), nullptr);
  if (err != CL_SUCCESS) return std::nullopt;
  return sdk::blob_cache::pack(bins);
}
} // namespace

program* context::build(std::string_view source, const char* options, bool& cache_hit) {
  cache_hit = false;
  // Argument metadata lets launches check kinds and name types in errors; it costs nothing at
  // run time.
  const std::string opts = std::string(options != nullptr ? options : "") + " -cl-kernel-arg-info";
  sdk::blob_cache& cache = owner_.cache();
  sdk::blob_cache::key_type key{};
  if (cache.enabled()) {
    key = program_key(devices_, source, opts);
    if (auto payload = cache.load(key)) {
      // The entry is intact (the cache checked it); its parts are one binary per device.
      std::string why;
      auto bins = sdk::blob_cache::unpack(*payload, why);
      if (bins && bins->size() != ids_.size())
        why = sdk::str("the entry holds ", bins->size(), " device binaries, this context has ",
                       ids_.size());
      if (bins && why.empty())
        if (cl_program p = build_from_binaries(*bins, opts, why)) {
          cache_hit = true;
          return new program(cl_, p, ctx_);
        }
      owner_.log().info("kernel cache: the driver rejected ", cache.path(key), " (", why,
                        "); rebuilding from source");
      cache.remove(key);
    }
  }

  owner_.log().progress(sdk::str("compiling ", sdk::kernels_in(source)));
  cl_program p = build_from_source(source, opts);
  if (cache.writable()) {
    // The binaries are fetched here, on the thread that built the program, and only the bytes
    // are written on the cache's thread. A fetch on that thread could still be inside the driver
    // when the process exits: PoCL then generates code in LLVM while exit() runs LLVM's static
    // destructors (a crash at exit seen on the H200 with a cold PoCL cache). Driver calls stay
    // on threads the application owns.
    try {
      if (auto bins = fetch_binaries(cl_, owner_.log(), p, ids_.size()))
        cache.store_later(key, std::move(*bins));
    } catch (const std::bad_alloc&) {
      // not cached; the program is fine
    }
  }
  return new program(cl_, p, ctx_);
}

// ---- programs and kernels ---------------------------------------------------------------------

program::~program() { cl_.clReleaseProgram(prog_); }

kernel* program::create_kernel(const char* name) {
  cl_int err = CL_SUCCESS;
  cl_kernel k = cl_.clCreateKernel(prog_, name, &err);
  if (err == CL_INVALID_KERNEL_NAME || (err == CL_SUCCESS && k == nullptr)) {
    size_t n = 0;
    std::string names;
    if (cl_.clGetProgramInfo(prog_, CL_PROGRAM_KERNEL_NAMES, 0, nullptr, &n) == CL_SUCCESS && n) {
      names.resize(n);
      cl_.clGetProgramInfo(prog_, CL_PROGRAM_KERNEL_NAMES, n, names.data(), nullptr);
      names.resize(std::strlen(names.c_str()));
    }
    sdk::fail(PCY_ERR_NOT_FOUND,
              sdk::str("clCreateKernel: CL_INVALID_KERNEL_NAME (-46): the program has no kernel '",
                       name, "' (its kernels: ", names.empty() ? "none" : names, ")"));
  }
  if (err != CL_SUCCESS)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateKernel", err,
            sdk::str("creating kernel '", name, "'"));
  try {
    return new kernel(cl_, k, ctx_, name);
  } catch (...) {
    cl_.clReleaseKernel(k);
    throw;
  }
}

kernel::kernel(const cl_api& cl, cl_kernel k, cl_context ctx, std::string name)
    : cl_(cl), k_(k), ctx_(ctx), name_(std::move(name)) {
  cl_uint n = 0;
  cl_check(cl_.clGetKernelInfo(k_, CL_KERNEL_NUM_ARGS, sizeof n, &n, nullptr),
           "clGetKernelInfo(CL_KERNEL_NUM_ARGS)");
  args_.resize(n);
  expect_.assign(n, expects::unknown);
  type_names_.resize(n);
  // Argument kinds when the driver keeps them (source builds; some drivers always do).
  for (cl_uint i = 0; i < n; ++i) {
    cl_kernel_arg_address_qualifier q = 0;
    if (cl_.clGetKernelArgInfo(k_, i, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof q, &q, nullptr) !=
        CL_SUCCESS)
      continue;
    expect_[i] = (q == CL_KERNEL_ARG_ADDRESS_GLOBAL || q == CL_KERNEL_ARG_ADDRESS_CONSTANT)
                     ? expects::memory
                 : q == CL_KERNEL_ARG_ADDRESS_LOCAL ? expects::local
                                                    : expects::scalar;
    size_t len = 0;
    if (cl_.clGetKernelArgInfo(k_, i, CL_KERNEL_ARG_TYPE_NAME, 0, nullptr, &len) == CL_SUCCESS &&
        len > 0) {
      std::string t(len, '\0');
      if (cl_.clGetKernelArgInfo(k_, i, CL_KERNEL_ARG_TYPE_NAME, len, t.data(), nullptr) ==
          CL_SUCCESS) {
        t.resize(std::strlen(t.c_str()));
        type_names_[i] = std::move(t);
      }
    }
  }
}

kernel::~kernel() { cl_.clReleaseKernel(k_); }

std::string kernel::describe(uint32_t i) const {
  std::string s = sdk::str("argument ", i, " of kernel '", name_, "'");
  if (!type_names_[i].empty()) s += sdk::str(" (", type_names_[i], ")");
  return s;
}

namespace {
const char* arg_kind_name(int kind) {
  switch (kind) {
  case PCY_ARG_MEMORY: return "a buffer";
  case PCY_ARG_SCALAR: return "a scalar";
  case PCY_ARG_LOCAL: return "local memory";
  default: return "an unknown argument kind";
  }
}
} // namespace

void kernel::bad_arg(uint32_t i, const pcy_kernel_arg& a, cl_int err) {
  args_[i] = arg_state{}; // what the driver holds is unknown now
  if (err == CL_SUCCESS) {
    const expects e = expect_[i];
    const char* want = e == expects::memory  ? "a buffer"
                       : e == expects::local ? "local memory (PCY_ARG_LOCAL)"
                                             : "a scalar";
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(describe(i), " takes ", want, ", got ", arg_kind_name(a.kind)));
  }
  std::string detail;
  if (a.kind == PCY_ARG_SCALAR) detail = sdk::str(" (a scalar of ", a.size, " bytes)");
  if (a.kind == PCY_ARG_LOCAL) detail = sdk::str(" (", a.size, " bytes of local memory)");
  cl_fail(PCY_ERR_INVALID_ARGUMENT, "clSetKernelArg", err,
          sdk::str(describe(i), " refused ", arg_kind_name(a.kind), detail,
                   ": pass the type the kernel declares"));
}

void kernel::set(uint32_t i, const pcy_kernel_arg& a) {
  arg_state& s = args_[i];
  const expects e = expect_[i];
  cl_int err = CL_SUCCESS;
  switch (a.kind) {
  case PCY_ARG_MEMORY: {
    if (e != expects::unknown && e != expects::memory) [[unlikely]]
      bad_arg(i, a, CL_SUCCESS);
    const auto* m = reinterpret_cast<const memory*>(a.memory);
    if (m == nullptr) [[unlikely]]
      sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(describe(i), ": NULL memory"));
    if (m->context_handle() != ctx_) [[unlikely]]
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str(describe(i), ": the memory belongs to another OpenCL context"));
    if (s.kind == PCY_ARG_MEMORY && s.serial == m->serial()) return;
    cl_mem h = m->handle();
    err = cl_.clSetKernelArg(k_, i, sizeof(cl_mem), &h);
    if (err != CL_SUCCESS) [[unlikely]]
      bad_arg(i, a, err);
    s.kind = PCY_ARG_MEMORY;
    s.serial = m->serial();
    return;
  }
  case PCY_ARG_SCALAR: {
    if (e != expects::unknown && e != expects::scalar) [[unlikely]]
      bad_arg(i, a, CL_SUCCESS);
    if (a.value == nullptr || a.size == 0) [[unlikely]]
      sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str(describe(i), ": scalar without a value"));
    const bool cacheable = a.size <= sizeof s.bytes;
    if (cacheable && s.kind == PCY_ARG_SCALAR && s.size == a.size &&
        std::memcmp(s.bytes, a.value, a.size) == 0)
      return;
    err = cl_.clSetKernelArg(k_, i, a.size, a.value);
    if (err != CL_SUCCESS) [[unlikely]]
      bad_arg(i, a, err);
    if (cacheable) {
      s.kind = PCY_ARG_SCALAR;
      s.size = static_cast<uint32_t>(a.size);
      std::memcpy(s.bytes, a.value, a.size);
    } else {
      s.kind = 0;
    }
    return;
  }
  case PCY_ARG_LOCAL: {
    if (e != expects::unknown && e != expects::local) [[unlikely]]
      bad_arg(i, a, CL_SUCCESS);
    if (s.kind == PCY_ARG_LOCAL && s.size == a.size) return;
    err = cl_.clSetKernelArg(k_, i, a.size, nullptr);
    if (err != CL_SUCCESS) [[unlikely]]
      bad_arg(i, a, err);
    s.kind = PCY_ARG_LOCAL;
    s.size = static_cast<uint32_t>(a.size);
    return;
  }
  }
  sdk::fail(PCY_ERR_INVALID_ARGUMENT,
            sdk::str(describe(i), ": unknown argument kind ", static_cast<int>(a.kind)));
}

// ---- launch -----------------------------------------------------------------------------------

void queue::launch(kernel& k, const pcy_kernel_launch_args& a) {
  if (a.arg_count != k.arg_count()) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, sdk::str("kernel '", k.name(), "' takes ", k.arg_count(),
                                                 " arguments, got ", a.arg_count));
  if (a.arg_count != 0 && a.args == nullptr) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "kernel launch: args is NULL");
  for (uint32_t i = 0; i < a.arg_count; ++i)
    k.set(i, a.args[i]);

  size_t global[3] = {1, 1, 1};
  size_t local[3] = {1, 1, 1};
  const bool has_local = a.local[0] != 0;
  for (uint32_t d = 0; d < a.dims; ++d) {
    if ((a.local[d] != 0) != has_local) [[unlikely]]
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("kernel '", k.name(),
                         "': local sizes must be all 0 (the driver chooses) "
                         "or all non-zero"));
    if (a.global[d] == 0) return; // nothing to run
    global[d] = static_cast<size_t>(a.global[d]);
    if (has_local) {
      // Round the global size up to whole work-groups: kernels bounds-check (documented).
      local[d] = a.local[d];
      global[d] = (global[d] + local[d] - 1) / local[d] * local[d];
    }
  }
  const cl_int err = cl_.clEnqueueNDRangeKernel(q_, k.handle(), a.dims, nullptr, global,
                                                has_local ? local : nullptr, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) [[unlikely]]
    launch_failed(k, a, err, global, has_local ? local : nullptr);
}

void queue::launch_failed(const kernel& k, const pcy_kernel_launch_args& a, cl_int err,
                          const size_t* global, const size_t* local) const {
  std::string sizes = "global ";
  for (uint32_t d = 0; d < a.dims; ++d)
    sizes += sdk::str(d ? "x" : "", global[d]);
  if (local != nullptr) {
    sizes += ", local ";
    for (uint32_t d = 0; d < a.dims; ++d)
      sizes += sdk::str(d ? "x" : "", local[d]);
  }
  size_t kernel_max = 0;
  cl_.clGetKernelWorkGroupInfo(k.handle(), dev_.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof kernel_max,
                               &kernel_max, nullptr);
  std::string advice;
  pcy_status code = PCY_ERR_LAUNCH;
  switch (err) {
  case CL_INVALID_WORK_GROUP_SIZE:
  case CL_INVALID_WORK_ITEM_SIZE:
    advice = sdk::str("'", dev_.name, "' runs kernel '", k.name(), "' with at most ", kernel_max,
                      " work-items per group (", dev_.max_work_item[0], "x", dev_.max_work_item[1],
                      "x", dev_.max_work_item[2],
                      " per dimension); pass a smaller local size, or 0 to let the driver choose");
    break;
  case CL_INVALID_GLOBAL_WORK_SIZE: advice = "the global size is too large for this device"; break;
  case CL_INVALID_KERNEL_ARGS: advice = "some kernel argument was never set"; break;
  case CL_OUT_OF_RESOURCES:
    advice = "the device lacks resources for this launch (registers, local memory); use a "
             "smaller local size or less local memory";
    break;
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    code = PCY_ERR_OUT_OF_MEMORY;
    advice = "the device could not back the kernel's buffers; free memory or use smaller tensors";
    break;
  case CL_INVALID_CONTEXT:
  case CL_INVALID_MEM_OBJECT: code = PCY_ERR_INVALID_ARGUMENT; break;
  default: code = PCY_ERR_LAUNCH; break;
  }
  cl_fail(code, "clEnqueueNDRangeKernel", err,
          sdk::str("launching '", k.name(), "' (", sizes, ")", advice.empty() ? "" : ": ", advice));
}

} // namespace parenchyma::opencl
