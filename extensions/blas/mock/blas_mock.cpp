// blas_mock: an example BLAS bundle for the mock framework, written with the SDK's extension kit
// (parenchyma/sdk/op_schema.hpp): two ops of the extension, scal and axpy, in f32 and f64. It
// shows what every bundle does — descriptors built from the extension's schemas (sdk::op_table),
// arguments found by name at compile time (sdk::arg_index) and checked by value (sdk::decoder), a
// scalar that may be a host value or a one-element tensor, the framework reached through the
// table the host passes in, and per-context op availability (1.1: f64 off on a device without
// fp64). The other BLAS ops are simply not served: a call falls back to another framework or
// fails with errc::unsupported, and parenchyma-conformance skips their cases.
#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/sdk/op_schema.hpp>

#include <cstring>
#include <span>
#include <string>
#include <type_traits>

namespace {

namespace sdk = parenchyma::sdk;

// Per-context state: what the ops need of the framework, found once in create_context.
struct mock_blas_context {
  const pcy_framework_api* fw = nullptr;
  bool fp64 = true;

  // The mock's memory is host memory: a tensor's native handle (resolved by the host into
  // pcy_tensor::data) is its host pointer.
  template <class T> T* ptr(const pcy_tensor& t) const {
    return reinterpret_cast<T*>(static_cast<char*>(sdk::native_of(*fw, t)) + t.byte_offset);
  }
  // A scalar argument: a host value, or a one-element tensor that stays on the device.
  template <class T> T value(const sdk::scalar_arg& s) const {
    return s.tensor != nullptr ? *ptr<T>(*s.tensor) : static_cast<T>(s.value);
  }
  // The host has queued the arguments' transfers on the backend's queue, which may still run
  // them (PARENCHYMA_MOCK_ASYNC=1): ops computed here, on the calling thread, wait for it first.
  void settle(pcy_queue q) const { sdk::check(fw->queue_finish(q)); }

  // 1.1: asked once per op and context; false routes the op elsewhere instead of failing later.
  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !fp64) {
      *reason = "the mock device reports no fp64";
      return false;
    }
    return true;
  }
};

// Argument indices by name, checked against the schema at compile time.
constexpr uint32_t SCAL_N = sdk::arg_index(pcy_blas_scal_schema, "n"),
                   SCAL_ALPHA = sdk::arg_index(pcy_blas_scal_schema, "alpha"),
                   SCAL_X = sdk::arg_index(pcy_blas_scal_schema, "x"),
                   SCAL_INCX = sdk::arg_index(pcy_blas_scal_schema, "incx");
constexpr uint32_t AXPY_N = sdk::arg_index(pcy_blas_axpy_schema, "n"),
                   AXPY_ALPHA = sdk::arg_index(pcy_blas_axpy_schema, "alpha"),
                   AXPY_X = sdk::arg_index(pcy_blas_axpy_schema, "x"),
                   AXPY_INCX = sdk::arg_index(pcy_blas_axpy_schema, "incx"),
                   AXPY_Y = sdk::arg_index(pcy_blas_axpy_schema, "y"),
                   AXPY_INCY = sdk::arg_index(pcy_blas_axpy_schema, "incy");

template <class T>
constexpr pcy_dtype dtype_of = std::is_same_v<T, float> ? PCY_DTYPE_F32 : PCY_DTYPE_F64;

// x = alpha * x, as reference BLAS computes it: alpha == 0 multiplies too (NaN stays NaN).
template <class T> void op_scal(mock_blas_context& cx, const sdk::op_args& a) {
  // Every value re-checked against what the op needs; an error names the op and the argument.
  const sdk::decoder<pcy_blas_scal_schema> dc(a, dtype_of<T>);
  const int64_t n = dc.count(SCAL_N);
  const sdk::scalar_arg alpha = dc.scalar(SCAL_ALPHA);
  const sdk::vec_arg x = dc.vector(SCAL_X, SCAL_INCX, n);
  if (n == 0) return;
  cx.settle(a.queue());
  const T al = cx.value<T>(alpha);
  T* p = cx.ptr<T>(*x.t);
  for (int64_t i = 0; i < n; ++i)
    p[i * x.inc] *= al;
}

// y = alpha * x + y; alpha == 0 returns at once (reference BLAS: x is not read).
template <class T> void op_axpy(mock_blas_context& cx, const sdk::op_args& a) {
  const sdk::decoder<pcy_blas_axpy_schema> dc(a, dtype_of<T>);
  const int64_t n = dc.count(AXPY_N);
  const sdk::scalar_arg alpha = dc.scalar(AXPY_ALPHA);
  const sdk::vec_arg x = dc.vector(AXPY_X, AXPY_INCX, n);
  const sdk::vec_arg y = dc.vector(AXPY_Y, AXPY_INCY, n);
  if (n == 0) return;
  cx.settle(a.queue());
  const T al = cx.value<T>(alpha);
  if (al == T(0)) return;
  const T* xp = cx.ptr<T>(*x.t);
  T* yp = cx.ptr<T>(*y.t);
  for (int64_t i = 0; i < n; ++i)
    yp[i * y.inc] += al * xp[i * x.inc];
}

class blas_mock_bundle {
public:
  using context_type = mock_blas_context;
  static constexpr const char* name = "blas_mock";
  static constexpr const char* version = "1.0";
  static constexpr const char* description = "example BLAS bundle for the mock framework";
  static constexpr const char* extension = PCY_BLAS_EXTENSION;
  static constexpr const char* framework = "mock";
  static constexpr uint32_t min_framework_abi_minor = 0;

  explicit blas_mock_bundle(const pcy_host_services&) {
    // One descriptor per op and dtype, each carrying the schema and the 1.0 signature.
    table_.add<op_scal<float>, op_scal<double>>(pcy_blas_scal_schema, "mock loop sscal",
                                                "mock loop dscal");
    table_.add<op_axpy<float>, op_axpy<double>>(pcy_blas_axpy_schema, "mock loop saxpy",
                                                "mock loop daxpy");
  }
  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    if (a.framework->queue_finish == nullptr || a.framework->native_handle == nullptr)
      sdk::fail(PCY_ERR_UNSUPPORTED, "blas_mock needs the framework's queue_finish and native "
                                     "handles to reach the tensors' host pointers");
    auto* c = new mock_blas_context;
    c->fw = a.framework;
    // The device's properties by the plugin's own index (plugin_device, not device).
    const pcy_property* props = nullptr;
    size_t count = 0;
    if (pcy_error* e =
            a.framework->device_properties(a.framework_plugin, a.plugin_device, &props, &count)) {
      delete c;
      sdk::check(e);
    }
    // Stepped by the elements' own struct_size: a newer framework may send larger ones.
    const size_t stride = count > 0 ? props[0].struct_size : sizeof(pcy_property);
    if (stride < PCY_PROPERTY_SIZE_1_0) count = 0; // not a property array: keep the defaults
    for (size_t i = 0; i < count; ++i) {
      const auto& p =
          *reinterpret_cast<const pcy_property*>(reinterpret_cast<const char*>(props) + i * stride);
      if (p.key != nullptr && std::strcmp(p.key, PCY_PROP_FP64) == 0) c->fp64 = p.i != 0;
    }
    return c;
  }

private:
  sdk::op_table<blas_mock_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(blas_mock_bundle)
