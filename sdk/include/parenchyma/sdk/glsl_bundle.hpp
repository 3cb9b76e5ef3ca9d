// parenchyma SDK: the plumbing of a bundle whose kernels are the `#kernel` sections of one GLSL
// source, built per dtype (f32 always, f64 where the device has it) in two forms — buffers bound
// as descriptors, or taken by device address past maxStorageBufferRange — each kernel on its
// first use (the Vulkan bundles blas_vulkan and nn_vulkan; docs/vulkan.md). Written once:
//   - glsl_context<N>: a device_context with the two dtypes' kernel tables, `get<T>(id)` (the
//     kernel of the current op's form, built on first use), `op_available` (f64 routed elsewhere
//     on a device without it), `prepare` (builds one kernel per dtype at context creation, so a
//     device or build without a GLSL compiler fails at once) and `choose_form` (before each op:
//     refuses tensors at a byte offset or too large for 32-bit indices, and picks descriptors or
//     device addresses);
//   - setting_count: a count setting (a test aid such as PARENCHYMA_NN_VULKAN_GRID_CAP) read and
//     range-checked, a bad value ignored with a warning.
//
//   struct my_context : sdk::glsl_context<K_COUNT> {
//     explicit my_context(const pcy_bundle_context_args& a)
//         : glsl_context(a, "my_vulkan", kernel_sources(), kernel_names) {}
//   };
//   // create_context: cx->read_binding_limits(a, cap); cx->prepare(cx->f32, opts, K_FIRST, true,
//   log_);
//   // each op: cx.choose_form(args, "my.op: ", name_of_argument); cx.get<float>(K_X) ...
//
// Per op: get<T> is an array load (and a build the first time); choose_form walks the tensors once.
#pragma once

#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/dtype.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace parenchyma::sdk {

// Element indices are 32-bit ints in the shaders: a tensor stays below 2^31 - 2^21 elements, so
// that no index, nor an index a grid stride (at most 2^20 invocations) past one, reaches 2^31.
inline constexpr uint64_t glsl_max_index_elements = (uint64_t(1) << 31) - (uint64_t(1) << 21);

// One dtype's kernels: available (with the options every kernel of it is built with) or not
// (with the reason); each kernel built on first use, in either form.
template <size_t N> struct glsl_dtype_kernels {
  bool available = false;
  std::string reason;             // why not available
  std::string options;            // the program_build options: -DREAL=... and sizes
  std::array<pcy_kernel, N> k{};  // buffers bound as descriptors
  std::array<pcy_kernel, N> ka{}; // buffers by device address (-DPCY_ADDRESSES)
};

template <size_t N> struct glsl_context : device_context {
  glsl_context(const pcy_bundle_context_args& a, const char* bundle,
               const std::vector<std::string>& sources, const std::array<const char*, N>& names)
      : device_context(a), bundle_(bundle), sources_(&sources), names_(&names) {}

  glsl_dtype_kernels<N> f32, f64;
  // A tensor of more than `max_binding` bytes cannot be a descriptor: the op then runs the
  // kernels' address form (bufferDeviceAddress, `device_address`). Set per op by choose_form.
  uint64_t max_binding = UINT64_MAX;
  bool device_address = false;
  bool addresses = false; // the current op takes its buffers by address

  // The kernel `id` of dtype T in the current op's form, built on its first use (the host
  // serialises a context's ops).
  template <class T> pcy_kernel get(size_t id) {
    glsl_dtype_kernels<N>& d = std::is_same_v<T, float> ? f32 : f64;
    if (!d.available) fail(PCY_ERR_UNSUPPORTED, d.reason);
    pcy_kernel& k = addresses ? d.ka[id] : d.k[id];
    if (k == nullptr) [[unlikely]]
      k = make_kernel(d, id, addresses);
    return k;
  }
  // Builds one kernel's program (a failure throws the framework's error, its compiler log in it).
  pcy_kernel make_kernel(const glsl_dtype_kernels<N>& d, size_t id, bool by_address) {
    build_failure failed;
    const std::string options = by_address ? d.options + " -DPCY_ADDRESSES" : d.options;
    pcy_program p = build((*sources_)[id].c_str(), options.c_str(), &failed);
    if (p == nullptr)
      fail(failed.code,
           str(bundle_, ": shader ", (*names_)[id], " (", options, "): ", failed.message));
    return kernel(p, (*names_)[id]);
  }
  // f64 ops on a device without shaderFloat64 are unavailable here, so the host routes them to
  // another framework instead of failing at call time.
  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !f64.available) {
      *reason = f64.reason.c_str();
      return false;
    }
    return true;
  }
  // The binding limit (the device's maxStorageBufferRange, lowered to `cap`) and whether the
  // device has buffer device addresses.
  void read_binding_limits(const pcy_bundle_context_args& a, uint64_t cap) {
    max_binding = static_cast<uint64_t>(
        std::max<int64_t>(0, device_number(a, "max_storage_buffer_range", INT64_MAX)));
    max_binding = std::min(max_binding, cap);
    device_address = device_number(a, "buffer_device_address", 0) != 0;
  }
  // Makes `d` available with `options`, building kernel `first` now. f32 (`must`): a failure
  // throws (the context fails). f64: a device that fails to build or load it keeps f32 serving,
  // with the reason logged and kept; `what` names the kernels ("f64 NN shaders").
  void prepare(glsl_dtype_kernels<N>& d, std::string options, size_t first, bool must,
               const logger& log, const char* what) {
    d.options = std::move(options);
    try {
      d.k[first] = make_kernel(d, first, false);
    } catch (const std::exception& e) {
      if (must) throw;
      d.reason = str(what, " did not build on this device (", e.what(), ")");
      log.info(d.reason);
      return;
    }
    d.available = true;
  }

  // Before every op: the kernels take each buffer from its start, so a tensor that begins
  // elsewhere (byte_offset != 0, which no host in this tree passes) is refused rather than
  // touching the memory before it; a tensor too large for 32-bit indices is refused; and the
  // op's form is chosen: descriptors when every tensor fits a binding, else device addresses
  // (every buffer of the op), or a refusal naming the limit on a device without them. `prefix`
  // starts each message ("nn.softmax: " or ""); name_of(k) names argument k.
  template <class NameOf>
  void choose_form(const op_args& a, std::string_view prefix, NameOf&& name_of) {
    uint64_t largest = 0;
    uint32_t largest_arg = 0;
    for (uint32_t k = 0; k < a.size(); ++k) {
      if (!a.is_tensor(k)) continue;
      const pcy_tensor& t = a.t(k);
      if (t.byte_offset != 0)
        fail(PCY_ERR_UNSUPPORTED, str(prefix, "argument ", name_of(k), " starts at byte offset ",
                                      t.byte_offset, "; ", bundle_, " takes tensors at offset 0"));
      // The element count; a negative or overflowing shape is left to the op's decoder, which
      // refuses it by name (INVALID_ARGUMENT).
      uint64_t elements = 1;
      bool valid = t.shape != nullptr || t.ndim == 0;
      for (int32_t d = 0; valid && d < t.ndim; ++d) {
        const int64_t e = t.shape[d];
        valid = e >= 0 && (e == 0 || elements <= UINT64_MAX / static_cast<uint64_t>(e));
        if (valid) elements *= static_cast<uint64_t>(e);
      }
      if (!valid) continue;
      if (elements >= glsl_max_index_elements)
        fail(PCY_ERR_UNSUPPORTED,
             str(prefix, "argument ", name_of(k), " has ", elements, " elements; ", bundle_,
                 "'s shaders index with 32-bit integers and take tensors below ",
                 glsl_max_index_elements, " elements: split the data into smaller tensors"));
      const uint64_t bytes = elements * std::max<uint64_t>(dtype_size(t.dtype), 1);
      if (bytes > largest) {
        largest = bytes;
        largest_arg = k;
      }
    }
    addresses = largest > max_binding;
    if (addresses && !device_address)
      fail(PCY_ERR_UNSUPPORTED,
           str(prefix, "argument ", name_of(largest_arg), " is a tensor of ", largest,
               " bytes, above the device's maxStorageBufferRange (", max_binding,
               " bytes), the most a shader can bind, and the device has no "
               "bufferDeviceAddress (its 'buffer_device_address' property is false), which ",
               bundle_,
               " uses past that limit: use smaller tensors on this device, or another "
               "framework"));
  }

private:
  const char* bundle_;
  const std::vector<std::string>* sources_;
  const std::array<const char*, N>* names_;
};

// A count setting (`name`, e.g. a test aid), or `otherwise` when unset; a value that is not a
// whole number in [lo, hi] is ignored with a warning that says what was expected (`unit`:
// "work-groups", "bytes").
inline uint64_t setting_count(const settings& s, const logger& log, const char* name, uint64_t lo,
                              uint64_t hi, const char* unit, uint64_t otherwise) {
  const char* e = s.find(name);
  if (e == nullptr) return otherwise;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(e, &end, 10);
  if (end != e && *end == '\0' && *e != '-' && v >= lo && v <= hi) return v;
  log.warn(name, "=", e, " ignored: expected ", lo, " to ", hi, " ", unit);
  return otherwise;
}

} // namespace parenchyma::sdk
