// parenchyma: Backend, the single entry point — a framework, a device, its context and queue —
// plus generic op invocation (what extension front-ends call) and user kernels.
#pragma once

#include <parenchyma/export.hpp>

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/registry.hpp>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace parenchyma {
inline namespace v1 {

class TensorStorage;
class BackendImpl;
struct ProgramImpl;
struct KernelImpl;

// Identifies one op of one extension for one dtype. Front-ends declare these as function-local
// statics (parenchyma/extension.hpp's op_key does); the first use gives the key a process-wide
// slot, so later calls resolve with an index instead of a name lookup. A key made from the
// extension's schema (pcy_bundle.h) has every call checked against it; a key with only a 1.0
// signature string ("i t=") is checked against the rules the string gives.
struct OpKey {
  const char* extension;
  const char* name;
  pcy_dtype dtype;
  const char* signature;                 // 1.0-style key; nullptr when `schema` is set
  const pcy_op_schema* schema = nullptr; // the extension's schema of the op
  mutable std::atomic<int32_t> slot{-1};

  constexpr OpKey(const char* ext, const char* op, pcy_dtype t, const char* sig) noexcept
      : extension(ext), name(op), dtype(t), signature(sig) {}
  constexpr OpKey(const pcy_op_schema& s, pcy_dtype t) noexcept
      : extension(s.extension), name(s.name), dtype(t), signature(nullptr), schema(&s) {}
  OpKey(const OpKey&) = delete;
  OpKey& operator=(const OpKey&) = delete;
  PARENCHYMA_API int32_t index() const; // assigns the slot on first use
};

// One argument of an op call. Tensors carry their access intent.
struct OpArg {
  pcy_op_arg_kind kind = PCY_OP_ARG_INT;
  pcy_arg_intent intent = PCY_INTENT_IN;
  TensorStorage* tensor = nullptr;
  int64_t i = 0; // INT; INT_ARRAY: the count
  double f = 0;
  const int64_t* ints = nullptr; // INT_ARRAY: the values (borrowed for the call)

  static OpArg in(const TensorStorage& t) noexcept {
    return {PCY_OP_ARG_TENSOR, PCY_INTENT_IN, const_cast<TensorStorage*>(&t), 0, 0, nullptr};
  }
  static OpArg out(TensorStorage& t) noexcept {
    return {PCY_OP_ARG_TENSOR, PCY_INTENT_OUT, &t, 0, 0, nullptr};
  }
  static OpArg inout(TensorStorage& t) noexcept {
    return {PCY_OP_ARG_TENSOR, PCY_INTENT_INOUT, &t, 0, 0, nullptr};
  }
  static OpArg integer(int64_t v) noexcept {
    return {PCY_OP_ARG_INT, PCY_INTENT_IN, nullptr, v, 0, nullptr};
  }
  static OpArg real(double v) noexcept {
    return {PCY_OP_ARG_FLOAT, PCY_INTENT_IN, nullptr, 0, v, nullptr};
  }
  static OpArg integers(std::span<const int64_t> v) noexcept {
    return {
        PCY_OP_ARG_INT_ARRAY, PCY_INTENT_IN, nullptr, static_cast<int64_t>(v.size()), 0, v.data()};
  }
};

// Where an op runs for a backend, resolved once per backend and op.
struct OpRoute {
  std::string framework;      // where it runs
  std::string bundle;         // the bundle plugin serving it
  std::string implementation; // the bundle's description of the cell
  bool fallback = false;      // runs on another framework than the backend's
};

// Kernel arguments for Backend::launch.
struct KernelArg {
  enum class kind { tensor, scalar, local } type = kind::scalar;
  TensorStorage* tensor = nullptr;
  pcy_arg_intent intent = PCY_INTENT_IN;
  unsigned char value[16] = {};
  size_t size = 0;

  static KernelArg in(const TensorStorage& t) noexcept {
    KernelArg a;
    a.type = kind::tensor;
    a.tensor = const_cast<TensorStorage*>(&t);
    a.intent = PCY_INTENT_IN;
    return a;
  }
  static KernelArg out(TensorStorage& t) noexcept {
    KernelArg a = in(t);
    a.intent = PCY_INTENT_OUT;
    return a;
  }
  static KernelArg inout(TensorStorage& t) noexcept {
    KernelArg a = in(t);
    a.intent = PCY_INTENT_INOUT;
    return a;
  }
  template <class T> static KernelArg scalar(T v) noexcept {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16);
    KernelArg a;
    a.type = kind::scalar;
    std::memcpy(a.value, &v, sizeof(T));
    a.size = sizeof(T);
    return a;
  }
  static KernelArg local(size_t bytes) noexcept {
    KernelArg a;
    a.type = kind::local;
    a.size = bytes;
    return a;
  }
};

struct LaunchDims {
  uint32_t dims = 1;
  uint64_t global[3] = {1, 1, 1};
  uint32_t local[3] = {0, 0, 0}; // 0: the plugin chooses
  static LaunchDims linear(uint64_t global, uint32_t local = 0) noexcept {
    LaunchDims d;
    d.global[0] = global;
    d.local[0] = local;
    return d;
  }
};

class PARENCHYMA_API Kernel {
public:
  Kernel() = default;
  pcy_kernel handle() const noexcept;
  const std::string& name() const noexcept;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

private:
  friend class Program;
  friend class Backend;
  std::shared_ptr<KernelImpl> impl_;
};

class PARENCHYMA_API Program {
public:
  Program() = default;
  // Throws errc::not_found naming the kernel when the program has none of that name.
  Kernel kernel(std::string_view name) const;
  bool cache_hit() const noexcept;
  pcy_program handle() const noexcept;

private:
  friend class Backend;
  std::shared_ptr<ProgramImpl> impl_;
};

// A Backend is a stream on one device: its own queue and bundle contexts, sharing the device's
// context with the other backends of that device. Copies of one Backend share its stream.
// Threads (docs/threads.md): like a CUDA stream, a backend (and its copies) is used by one
// thread at a time; separately constructed backends are independent, so use one per thread.
class PARENCHYMA_API Backend {
public:
  // The default backend: PARENCHYMA_BACKEND > config > ranking (device kind first, then the
  // framework order per kind: docs/config.md). Throws errc::unavailable when none can be had.
  Backend();
  // An explicit request ("opencl", "cuda:1", "cuda,opencl,native"): an error if it cannot be met.
  explicit Backend(std::string_view request);
  explicit Backend(Registry& registry, std::string_view request = {});

  const std::string& name() const noexcept; // e.g. "opencl:0"
  const Framework& framework() const noexcept;
  const Device& device() const noexcept;
  const Selection& selection() const noexcept;
  Registry& registry() const noexcept;

  pcy_context context() const noexcept;
  pcy_queue queue() const noexcept;
  // Waits for all work enqueued on this backend's queue.
  void synchronize() const;
  // The framework's native object (cl_context, cl_command_queue, CUcontext, CUstream, ...).
  void* native(pcy_native_object object) const;
  void* native_memory(const TensorStorage& t) const; // cl_mem / CUdeviceptr of t on this backend

  // User kernels in the framework's own language (OpenCL C, CUDA C).
  Program build_program(std::string_view source, std::string_view options = {}) const;
  void launch(const Kernel& kernel, const LaunchDims& dims,
              std::initializer_list<KernelArg> args) const;
  void launch(const Kernel& kernel, const LaunchDims& dims, std::span<const KernelArg> args) const;

  // Runs one op: checks every argument against the op's schema (kind, intent, dtype, rank:
  // errc::invalid_argument naming the op and the argument), syncs each tensor as its intent
  // needs on the device the op runs on (this backend, or another framework's under the fallback
  // policy), then enqueues it.
  void invoke(const OpKey& key, std::span<const OpArg> args) const;
  // Where the op would run; throws errc::unsupported (deny / nowhere) naming the op.
  OpRoute route(const OpKey& key) const;
  // Number of op calls that ran on another framework than this backend's.
  uint64_t fallback_count() const noexcept;

  BackendImpl& impl() const noexcept { return *impl_; }
  bool operator==(const Backend& o) const noexcept { return impl_ == o.impl_; }

private:
  std::shared_ptr<BackendImpl> impl_;
};

} // namespace v1
} // namespace parenchyma
