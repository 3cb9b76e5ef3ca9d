// parenchyma Python bindings: parenchyma.Tensor, DLPack in and out (capsules), the buffer
// protocol and __cuda_array_interface__.
#include "bindings.hpp"

#include <parenchyma/sdk/dtype.hpp>

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <type_traits>

namespace parenchyma::python {

namespace {

constexpr const char* capsule_name = "dltensor";
constexpr const char* used_capsule_name = "used_dltensor";
constexpr const char* versioned_capsule_name = "dltensor_versioned";
constexpr const char* used_versioned_capsule_name = "used_dltensor_versioned";

struct DtypeName {
  pcy_dtype dtype;
  const char* name;
  const char* buffer_format; // PEP 3118 format; nullptr: none (bfloat16)
  const char* typestr;       // __cuda_array_interface__ typestr; nullptr: none
};
constexpr DtypeName dtype_names[] = {
    {PCY_DTYPE_F32, "float32", "f", "<f4"}, {PCY_DTYPE_F64, "float64", "d", "<f8"},
    {PCY_DTYPE_F16, "float16", "e", "<f2"}, {PCY_DTYPE_BF16, "bfloat16", nullptr, nullptr},
    {PCY_DTYPE_I32, "int32", "i", "<i4"},   {PCY_DTYPE_I64, "int64", "q", "<i8"},
    {PCY_DTYPE_U8, "uint8", "B", "|u1"},    {PCY_DTYPE_I8, "int8", "b", "|i1"},
    {PCY_DTYPE_I16, "int16", "h", "<i2"},   {PCY_DTYPE_BOOL, "bool", "?", "|b1"},
};

const DtypeName& dtype_entry(pcy_dtype t) {
  for (const auto& d : dtype_names)
    if (d.dtype == t) return d;
  fail(errc::internal, "parenchyma.Tensor", "unknown dtype " + std::to_string(int(t)));
}

// ---- DLPack capsules ---------------------------------------------------------------------------

void capsule_destructor(PyObject* capsule) {
  // Consumed capsules were renamed: only an unconsumed one still owns its tensor.
  if (!PyCapsule_IsValid(capsule, capsule_name)) return;
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, capsule_name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}

template <class M> py::capsule make_capsule(M* m, const char* name, PyCapsule_Destructor d) {
  PyObject* c = PyCapsule_New(m, name, d);
  if (c == nullptr) {
    if (m->deleter != nullptr) m->deleter(m);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(c);
}
py::capsule make_capsule(DLManagedTensor* m) {
  return make_capsule(m, capsule_name, &capsule_destructor);
}

void versioned_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, versioned_capsule_name)) return;
  auto* m =
      static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, versioned_capsule_name));
  if (m != nullptr && m->deleter != nullptr) m->deleter(m);
}
py::capsule make_capsule(DLManagedTensorVersioned* m) {
  return make_capsule(m, versioned_capsule_name, &versioned_capsule_destructor);
}

// A producer's tensor (DLManagedTensor or DLManagedTensorVersioned) wrapped so that its deleter
// runs with the GIL held: the core may drop its last use on any thread (a plugin callback, an op
// with the GIL released), and Python producers (NumPy's deleter decrements the array) need the
// GIL.
template <class M> struct GilGuarded {
  M self{};
  M* inner = nullptr;

  static void deleter(M* m) {
    auto* g = static_cast<GilGuarded*>(m->manager_ctx);
    M* inner = g->inner;
    delete g;
    if (inner == nullptr || inner->deleter == nullptr) return;
    // Interpreter gone, or exiting (taking the GIL would end this thread): leaking beats crashing.
    if (!Py_IsInitialized() || !gil_take_begin()) return;
    const PyGILState_STATE s = PyGILState_Ensure();
    gil_take_end();
    inner->deleter(inner);
    PyGILState_Release(s);
  }
  static std::unique_ptr<GilGuarded> wrap(M* inner) {
    auto g = std::make_unique<GilGuarded>();
    g->self = *inner; // dl_tensor (and version, flags where M has them)
    g->self.manager_ctx = g.get();
    g->self.deleter = &GilGuarded::deleter;
    g->inner = inner;
    return g;
  }
};

std::shared_ptr<TensorStorage> share(TensorStorage&& t) {
  return std::make_shared<TensorStorage>(std::move(t));
}

std::vector<int64_t> shape_from(const py::handle& shape) {
  if (py::hasattr(shape, "__index__")) return {int_arg(shape, "parenchyma.Tensor", "shape")};
  if (!py::isinstance<py::sequence>(shape) || py::isinstance<py::str>(shape))
    fail_type("parenchyma.Tensor",
              "argument shape: expected an int or a sequence of ints, got " +
                  std::string(py::str(py::type::handle_of(shape).attr("__name__"))));
  return ints_arg(shape, "parenchyma.Tensor", "shape");
}

// The mutexes an export takes: the tensor's and, when it exports on a backend, the backend's.
std::vector<std::mutex*> export_locks(const PyTensor& t) {
  std::vector<std::mutex*> l{t.mutex.get()};
  if (t.backend) l.push_back(&t.backend->mutex);
  return l;
}

// Exports on the tensor's backend (the host copy when it has none), GIL released: a
// DLManagedTensor, or with Versioned a DLManagedTensorVersioned.
// consumer_stream: DLPackExportOptions::consumer_stream (0: the host waits for the work).
template <bool Versioned = false>
auto export_tensor(const PyTensor& t, intptr_t consumer_stream = 0) {
  const PyTensor keep = t;
  return without_gil([&] {
    const OrderedLock lock(export_locks(keep));
    DLPackExportOptions o;
    o.consumer_stream = consumer_stream;
    if constexpr (Versioned)
      return keep.backend ? to_dlpack_versioned(*keep.storage, keep.backend->backend, o)
                          : to_dlpack_versioned_host(*keep.storage);
    else
      return keep.backend ? to_dlpack(*keep.storage, keep.backend->backend, o)
                          : to_dlpack_host(*keep.storage);
  });
}

DLManagedTensor* export_host(const PyTensor& t) {
  const PyTensor keep = t;
  return without_gil([&] {
    const OrderedLock lock({keep.mutex.get()});
    return to_dlpack_host(*keep.storage);
  });
}

// The managed tensor's deleter, as a scope guard (for exports that only read the pointer).
struct Release {
  DLManagedTensor* m;
  ~Release() {
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
};

DLDevice export_device(const PyTensor& t) {
  return t.backend ? dlpack_device(t.backend->backend) : DLDevice{kDLCPU, 0};
}

// Read-only queries of an unwritten tensor raise 'uninitialized' and leave it unwritten: an op
// reading it later must still raise, not read what happened to be in memory.
void require_written(const PyTensor& t, const char* what) {
  if (tensor_initialized(t)) return;
  fail(errc::uninitialized, "parenchyma.Tensor",
       std::string(what) +
           " reads the tensor, but nothing was ever written to it: write it first "
           "(t.numpy()[...] = values, an op output, Tensor.zeros or from_dlpack of written data)");
}

// ---- the buffer protocol (over the host copy) ----------------------------------------------

// What a Py_buffer holds until it is released: the export keeps the memory alive.
struct BufferHold {
  DLManagedTensor* managed = nullptr;
  std::vector<Py_ssize_t> shape, strides;
};

int tensor_getbuffer(PyObject* obj, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "parenchyma.Tensor: a NULL Py_buffer");
    return -1;
  }
  view->obj = nullptr;
  try {
    const py::handle self(obj);
    PyTensor& held = self.cast<PyTensor&>();
    const DtypeName d = dtype_entry(tensor_dtype(held));
    if (d.buffer_format == nullptr)
      fail(errc::unsupported, "parenchyma.Tensor",
           std::string("the buffer protocol has no format for ") + d.name +
               ": use __dlpack__ or convert the tensor first");
    // A read-only request (memoryview(t), numpy.asarray(t), bytes(t)) is a read: of an unwritten
    // tensor it raises 'uninitialized' and changes nothing. Only a writable request (readinto,
    // ctypes from_buffer), by which the caller says it writes, gets an unwritten tensor's host
    // copy, which then counts as written (as numpy() does).
    if ((flags & PyBUF_WRITABLE) != PyBUF_WRITABLE) require_written(held, "the buffer protocol");
    // A view of part of a tensor exports a dense copy: readable, not writable.
    const PyTensor t = dense(held);
    if (held.array && (flags & PyBUF_WRITABLE) == PyBUF_WRITABLE)
      fail(errc::invalid_argument, "parenchyma.Tensor",
           "a writable buffer of a view (a strided part of a tensor) was asked for: the buffer "
           "protocol exports dense memory; write through numpy() or copy() the view first");
    auto hold = std::make_unique<BufferHold>();
    hold->managed = export_host(t);
    const DLTensor& dl = hold->managed->dl_tensor;
    const Py_ssize_t item = static_cast<Py_ssize_t>((dl.dtype.bits + 7) / 8);
    hold->shape.assign(dl.shape, dl.shape + dl.ndim);
    hold->strides.resize(hold->shape.size());
    Py_ssize_t stride = item;
    for (size_t i = hold->shape.size(); i-- > 0;) {
      hold->strides[i] = stride;
      stride *= hold->shape[i];
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && t.storage->read_only())
      fail(errc::invalid_argument, "parenchyma.Tensor",
           "a writable buffer of a read-only tensor (imported read-only) was asked for");
    std::memset(view, 0, sizeof *view);
    view->buf = static_cast<char*>(dl.data) + dl.byte_offset;
    view->len = static_cast<Py_ssize_t>(t.storage->bytes());
    view->itemsize = item;
    view->readonly = t.storage->read_only() ? 1 : 0;
    view->ndim = dl.ndim;
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(d.buffer_format) : nullptr;
    view->shape = (flags & PyBUF_ND) ? hold->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? hold->strides.data() : nullptr;
    if (!(flags & PyBUF_ND)) view->ndim = 1;
    view->internal = hold.release();
    view->obj = py::handle(obj).inc_ref().ptr();
    return 0;
  } catch (const parenchyma::error& e) {
    set_python_error(e);
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) {
  auto* hold = static_cast<BufferHold*>(view->internal);
  if (hold == nullptr) return;
  if (hold->managed != nullptr && hold->managed->deleter != nullptr)
    hold->managed->deleter(hold->managed);
  delete hold;
  view->internal = nullptr;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << '(';
  for (size_t i = 0; i < s.size(); ++i)
    o << (i ? ", " : "") << s[i];
  if (s.size() == 1) o << ',';
  o << ')';
  return o.str();
}

py::tuple shape_tuple(const std::vector<int64_t>& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i)
    t[i] = py::int_(s[i]);
  return t;
}

// A pair of ints such as max_version (major, minor) or dl_device (type, id).
std::pair<int, int> int_pair(const py::handle& v, const char* origin, const char* name) {
  const std::vector<int64_t> p = ints_arg(v, origin, name);
  if (p.size() != 2)
    fail(errc::invalid_argument, origin,
         std::string("argument ") + name + ": expected a pair of ints, got " +
             std::to_string(p.size()) + " values");
  for (size_t i = 0; i < 2; ++i)
    if (p[i] < std::numeric_limits<int>::min() || p[i] > std::numeric_limits<int>::max())
      fail(errc::invalid_argument, origin,
           std::string("argument ") + name + "[" + std::to_string(i) +
               "]: " + std::to_string(p[i]) + " is out of range");
  return {static_cast<int>(p[0]), static_cast<int>(p[1])};
}

py::capsule dlpack_method(PyTensor& held, const py::object& stream, const py::object& max_version,
                          const py::object& dl_device, const py::object& copy) {
  // max_version (major, minor): the newest DLPack the consumer reads; >= 1 gets the versioned
  // capsule, anything else (None, (0, x)) the unversioned one.
  constexpr const char* origin = "parenchyma.Tensor.__dlpack__";
  const PyTensor t = dense(held); // a view exports a dense copy
  bool versioned = false;
  if (!max_version.is_none()) {
    const auto mv = int_pair(max_version, origin, "max_version");
    versioned = mv.first >= 1;
  }
  if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1)
    throw py::buffer_error("parenchyma.Tensor.__dlpack__: copy=True is not supported (the "
                           "export is always zero-copy); copy on the consumer side");
  if (!dl_device.is_none()) {
    const DLDevice d = export_device(t);
    const auto want = int_pair(dl_device, origin, "dl_device");
    if (want.first != static_cast<int>(d.device_type) || want.second != d.device_id)
      throw py::buffer_error("parenchyma.Tensor.__dlpack__: the tensor exports on device (" +
                             std::to_string(d.device_type) + ", " + std::to_string(d.device_id) +
                             "), not the requested one");
  }
  // The protocol's stream: None (the legacy default stream is assumed: the host waits, which
  // orders every stream), -1 (no ordering), 1 / 2 (the legacy / per-thread default stream) or
  // a CUstream as an int: that stream waits for our work through an event (CUDA only).
  intptr_t consumer = 0;
  if (!stream.is_none()) {
    consumer = static_cast<intptr_t>(int_arg(stream, origin, "stream",
                                             std::numeric_limits<intptr_t>::min(),
                                             std::numeric_limits<intptr_t>::max()));
    if (consumer == 0)
      throw py::value_error("parenchyma.Tensor.__dlpack__: stream=0 is ambiguous for CUDA and "
                            "not allowed by the DLPack protocol; pass 1 (legacy default "
                            "stream), 2 (per-thread default stream), a stream handle, or -1");
    if (export_device(t).device_type != kDLCUDA) consumer = 0; // host memory: nothing queued
  }
  if (versioned) return make_capsule(export_tensor<true>(t, consumer));
  return make_capsule(export_tensor(t, consumer));
}

// Tensor.numpy(): an ndarray over a host export, its base a capsule that releases the export.
// (numpy.from_dlpack would do, but NumPy 1.24 marks what it imports read-only.)
py::object host_array(const PyTensor& t) {
  DLManagedTensor* m = export_host(t);
  py::capsule base(m, [](void* p) {
    auto* managed = static_cast<DLManagedTensor*>(p);
    if (managed->deleter != nullptr) managed->deleter(managed);
  });
  const DLTensor& dl = m->dl_tensor;
  const auto item = static_cast<py::ssize_t>((dl.dtype.bits + 7) / 8);
  std::vector<py::ssize_t> shape(dl.shape, dl.shape + dl.ndim), strides(shape.size());
  py::ssize_t stride = item;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  py::array a(py::dtype(dtype_name(t.storage->dtype())), std::move(shape), std::move(strides),
              static_cast<char*>(dl.data) + dl.byte_offset, base);
  if (t.storage->read_only()) // a read-only import stays read-only through NumPy
    a.attr("flags").attr("writeable") = false;
  return a;
}

// numpy() of any Tensor: a view of part of a tensor is a strided ndarray over its base's host
// copy (writes through it reach the base); a pending expression runs first.
py::object numpy_of(PyTensor& t) {
  if (tensor_dtype(t) == PCY_DTYPE_BF16)
    fail(errc::unsupported, "parenchyma.Tensor.numpy",
         "NumPy has no bfloat16 dtype: export with __dlpack__ to a library that has one "
         "(PyTorch, JAX)");
  PyTensor base;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  if (!view_parts(t, base, offset, strides)) return host_array(t);
  const py::array whole = host_array(base);
  const auto item = static_cast<py::ssize_t>(whole.itemsize());
  const std::vector<int64_t> sh = tensor_shape(t);
  std::vector<py::ssize_t> shape(sh.begin(), sh.end()), bytes(strides.size());
  for (size_t i = 0; i < strides.size(); ++i)
    bytes[i] = static_cast<py::ssize_t>(strides[i]) * item;
  py::array a(whole.dtype(), std::move(shape), std::move(bytes),
              static_cast<const char*>(whole.data()) + offset * item, whole);
  if (base.storage->read_only()) a.attr("flags").attr("writeable") = false;
  return a;
}

} // namespace

const char* dtype_name(pcy_dtype t) noexcept {
  for (const auto& d : dtype_names)
    if (d.dtype == t) return d.name;
  return "unknown";
}

pcy_dtype dtype_from_name(std::string_view name, const char* what) {
  for (const auto& d : dtype_names)
    if (name == d.name) return d.dtype;
  // parenchyma's own short names (sdk::dtype_name).
  if (name == "f32") return PCY_DTYPE_F32;
  if (name == "f64") return PCY_DTYPE_F64;
  if (name == "f16") return PCY_DTYPE_F16;
  if (name == "bf16") return PCY_DTYPE_BF16;
  if (name == "i32") return PCY_DTYPE_I32;
  if (name == "i64") return PCY_DTYPE_I64;
  if (name == "u8") return PCY_DTYPE_U8;
  fail(errc::invalid_argument, "parenchyma",
       std::string("argument ") + what + ": unknown dtype '" + std::string(name) +
           "' (expected float32, float64, float16, bfloat16, int32, int64 or uint8)");
}

pcy_dtype dtype_from_object(const py::handle& obj, const char* what) {
  if (py::isinstance<py::str>(obj)) return dtype_from_name(obj.cast<std::string>(), what);
  // numpy.dtype, NumPy scalar types, Python's float and int: as NumPy names them.
  py::object name;
  try {
    name = py::module_::import("numpy").attr("dtype")(obj).attr("name");
  } catch (py::error_already_set&) {
    fail_type("parenchyma", std::string("argument ") + what +
                                ": expected a dtype such as 'float32', got " +
                                std::string(py::str(py::repr(obj))));
  }
  return dtype_from_name(name.cast<std::string>(), what);
}

// obj.__dlpack__(stream=...), asking for a versioned capsule (max_version); a producer older
// than the 2023 protocol (a TypeError for the keyword) is asked again without it.
py::object call_dlpack(const py::object& obj, const py::object& stream) {
  try {
    return obj.attr("__dlpack__")(py::arg("stream") = stream,
                                  py::arg("max_version") =
                                      py::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION));
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  if (stream.is_none()) return obj.attr("__dlpack__")(); // NumPy 1.24 takes no stream argument
  return obj.attr("__dlpack__")(py::arg("stream") = stream);
}

PyTensor import_dlpack(const py::object& obj, const std::shared_ptr<BackendState>& backend,
                       const DLPackImportOptions& options, const char* origin, const char* arg) {
  const std::string argument = std::string("argument ") + arg;
  py::object capsule;
  std::shared_ptr<BackendState> target = backend;
  if (PyCapsule_CheckExact(obj.ptr())) {
    capsule = obj;
  } else if (py::hasattr(obj, "__dlpack__")) {
    // A CUDA producer makes the data ready on the stream we name (the backend's); a host
    // producer takes no stream (NumPy 1.24 accepts none).
    try {
      py::object device = py::none();
      if (py::hasattr(obj, "__dlpack_device__")) device = obj.attr("__dlpack_device__")();
      const bool cuda = !device.is_none() && device.cast<std::pair<int, int>>().first == kDLCUDA;
      if (cuda) {
        if (!target) {
          const int id = device.cast<std::pair<int, int>>().second;
          target = without_gil([&] {
            return std::make_shared<BackendState>(Backend("cuda:" + std::to_string(id)));
          });
          register_backend(target);
        }
        const auto stream = reinterpret_cast<uintptr_t>(target->backend.native(PCY_NATIVE_QUEUE));
        capsule = call_dlpack(obj, py::int_(stream));
      } else {
        capsule = call_dlpack(obj, py::none());
      }
    } catch (py::error_already_set& e) {
      // The producer refused to export (NumPy: a read-only or a bool array): say which argument
      // and what to do, as a parenchyma.Error.
      if (!e.matches(PyExc_BufferError)) throw;
      fail(errc::invalid_argument, origin,
           argument + ": its producer (" +
               std::string(py::str(py::type::handle_of(obj).attr("__name__"))) +
               ") refused to export it through DLPack: " + std::string(py::str(e.value())) +
               " (pass an array the producer can export: a writable copy, or a supported dtype "
               "such as x.astype(numpy.uint8) for bool)");
    }
  } else {
    fail_type(origin, argument +
                          ": expected a parenchyma.Tensor, a DLPack capsule or an object with "
                          "__dlpack__ (a NumPy array, a PyTorch tensor, ...), got " +
                          std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
  }
  if (PyCapsule_IsValid(capsule.ptr(), used_capsule_name) ||
      PyCapsule_IsValid(capsule.ptr(), used_versioned_capsule_name))
    fail(errc::invalid_argument, origin,
         argument + ": the DLPack capsule was already consumed (a capsule imports once; call "
                    "__dlpack__ again for a new one)");
  std::shared_ptr<TensorStorage> storage;
  // Imports the capsule's tensor of type M (nothing is consumed when it fails).
  const auto take = [&](auto* inner, const char* used) {
    if (inner == nullptr) throw py::error_already_set();
    using M = std::remove_pointer_t<decltype(inner)>;
    auto guard = GilGuarded<M>::wrap(inner);
    try {
      without_gil([&] {
        std::vector<std::mutex*> locks;
        if (target) locks.push_back(&target->mutex);
        const OrderedLock lock(std::move(locks));
        storage = share(
            parenchyma::from_dlpack(&guard->self, target ? &target->backend : nullptr, options));
      });
    } catch (const parenchyma::error& e) {
      guard->inner = nullptr; // nothing was taken: the capsule still owns the producer's tensor
      fail(e.code(), origin, argument + ": " + e.message());
    }
    guard.release(); // owned by the storage now (or already released by a dense copy)
    PyCapsule_SetName(capsule.ptr(), used);
  };
  if (PyCapsule_IsValid(capsule.ptr(), capsule_name)) {
    take(static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), capsule_name)),
         used_capsule_name);
  } else if (PyCapsule_IsValid(capsule.ptr(), versioned_capsule_name)) {
    auto* inner = static_cast<DLManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule.ptr(), versioned_capsule_name));
    if (inner != nullptr && inner->version.major != DLPACK_MAJOR_VERSION)
      fail(errc::unsupported, origin,
           argument + ": a DLPack " + std::to_string(inner->version.major) + "." +
               std::to_string(inner->version.minor) + " capsule; this build reads DLPack " +
               std::to_string(DLPACK_MAJOR_VERSION) + ".x (the capsule was not consumed)");
    take(inner, used_versioned_capsule_name);
  } else {
    fail(errc::invalid_argument, origin,
         argument + ": expected a PyCapsule named 'dltensor' or 'dltensor_versioned'");
  }
  PyTensor t;
  t.storage = std::move(storage);
  t.backend = std::move(target);
  return t;
}

void bind_tensor(py::module_& m) {
  auto cls = py::class_<PyTensor>(m, "Tensor", py::buffer_protocol(), R"(An n-d array whose data
lives where it is used: a host copy plus one copy per backend it visited, kept coherent lazily
(only what an op needs moves, and only when it is stale).

Tensor(shape, dtype="float32") makes an uninitialised tensor (an op reading it before something
writes it raises parenchyma.Error 'uninitialized'; so do the read-only queries memoryview(t),
numpy.asarray(t), bytes(t) and data_ptr(), which leave it unwritten; numpy() of it is like
numpy.empty and counts as a write);
Tensor.zeros makes a zeroed one;
parenchyma.from_dlpack / parenchyma.asarray alias existing memory (NumPy, PyTorch, ...).

Interop: numpy() (a zero-copy NumPy view of the host copy), __dlpack__/__dlpack_device__ (on
the backend it was last used on, else the host copy), the buffer protocol (host copy) and
__cuda_array_interface__ (CUDA backends only).

Arrays: NumPy's operators, indexing (views), reductions and conversions, over the array
front-end (parenchyma/array.hpp); parenchyma.array_api is the Array API namespace
(t.__array_namespace__()). A Tensor made by them may be a view of part of another tensor or a
pending expression; everything above takes it (an expression runs first, a view is copied
densely where an export or op needs dense memory).

Threads: a tensor may be shared between Python threads; its operations are serialised.)");
  cls.def(py::init([](const py::object& shape, const py::object& dtype) {
            PyTensor t;
            t.storage = std::make_shared<TensorStorage>(dtype_from_object(dtype, "dtype"),
                                                        shape_from(shape));
            return t;
          }),
          py::arg("shape"), py::arg("dtype") = "float32",
          "An uninitialised tensor of the given shape (an int or a sequence of ints) and dtype "
          "(float32, float64, float16, bfloat16, int32, int64, uint8).")
      .def_static(
          "zeros",
          [](const py::object& shape, const py::object& dtype) {
            PyTensor t;
            t.storage = std::make_shared<TensorStorage>(dtype_from_object(dtype, "dtype"),
                                                        shape_from(shape));
            std::memset(t.storage->host(access::write_only), 0, t.storage->bytes());
            return t;
          },
          py::arg("shape"), py::arg("dtype") = "float32", "A tensor of zeros (on the host).")
      .def_static(
          "from_numpy",
          [](const py::object& array, const std::optional<PyBackend>& backend) {
            if (!py::hasattr(array, "__array_interface__") || !py::hasattr(array, "__dlpack__"))
              fail_type("parenchyma.Tensor.from_numpy",
                        "argument array: expected a numpy.ndarray, got " +
                            std::string(py::str(py::type::handle_of(array).attr("__name__"))));
            return import_dlpack(array, backend ? backend->state : nullptr, {},
                                 "parenchyma.from_dlpack", "array");
          },
          py::arg("array"), py::arg("backend") = py::none(),
          "A tensor aliasing a dense NumPy array's memory (no copy); see parenchyma.from_dlpack.")
      .def_property_readonly(
          "shape", [](const PyTensor& t) { return shape_tuple(tensor_shape(t)); },
          "The shape, as a tuple of ints.")
      .def_property_readonly(
          "dtype", [](const PyTensor& t) { return std::string(dtype_name(tensor_dtype(t))); },
          "The dtype's name as NumPy spells it: float32, float64, float16, bfloat16, int32, "
          "int64 or uint8.")
      .def_property_readonly(
          "size",
          [](const PyTensor& t) {
            uint64_t n = 1;
            for (int64_t e : tensor_shape(t))
              n *= static_cast<uint64_t>(e);
            return n;
          },
          "The element count.")
      .def_property_readonly(
          "ndim", [](const PyTensor& t) { return tensor_shape(t).size(); }, "The rank.")
      .def_property_readonly(
          "nbytes",
          [](const PyTensor& t) {
            uint64_t n = sdk::dtype_size(tensor_dtype(t));
            for (int64_t e : tensor_shape(t))
              n *= static_cast<uint64_t>(e);
            return n;
          },
          "The size in bytes (of the elements the tensor shows; a view's, not its base's).")
      .def_property_readonly(
          "initialized", [](const PyTensor& t) { return tensor_initialized(t); },
          "Whether some copy holds written data.")
      .def_property_readonly(
          "backend",
          [](const PyTensor& t) -> py::object {
            if (!t.backend) return py::none();
            return py::cast(PyBackend{t.backend});
          },
          "The backend the tensor was last used on (by an op, to() or from_dlpack(backend=)), "
          "or None; __dlpack__ exports on it.")
      .def(
          "to",
          [](PyTensor& t, const PyBackend& b) -> PyTensor& {
            if (t.array) {
              retarget(t, b.state);
              return t;
            }
            {
              const PyTensor keep = t;
              const std::shared_ptr<BackendState> s = b.state;
              without_gil([&] {
                const OrderedLock lock({keep.mutex.get(), &s->mutex});
                if (keep.storage->initialized())
                  (void)keep.storage->device(s->backend, access::read);
              });
            }
            t.backend = b.state;
            return t;
          },
          py::arg("backend"), py::return_value_policy::reference_internal,
          "Brings the tensor's data to `backend` (no-op when current there) and makes it the "
          "backend __dlpack__ exports on. Returns self.")
      .def(
          "numpy", [](PyTensor& t) { return numpy_of(t); },
          "A writable NumPy array viewing the tensor's host copy without a copy: the memory of "
          "a DLPack export of the host copy, which the array keeps alive (numpy.from_dlpack "
          "gives the same memory, read-only in NumPy 1.24). Writes through it are seen by the "
          "next parenchyma access. "
          "After an op that wrote the tensor on a device that does not share host memory, call "
          "numpy() again for the new data. A view (a strided part of a tensor: t[::2], t.T) gives "
          "a strided array over its base's host copy; a pending expression runs first.")
      .def("__dlpack__", &dlpack_method, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
           py::arg("copy") = py::none(),
           "A DLPack capsule of the tensor on its backend (Tensor.backend), or of the host copy "
           "when it has none: 'dltensor_versioned' (DLPack 1.x, READ_ONLY flag for read-only "
           "tensors; parenchyma.DLPACK_VERSION) when max_version >= (1, 0), else 'dltensor' "
           "(unversioned, DLPack 0.x). CUDA: with a `stream` "
           "(a CUstream as an int, 1 legacy default, 2 per-thread default) that stream waits "
           "for the backend's work through an event and the host does not wait; -1 asks for "
           "no ordering; None finishes the backend's queue first, so any stream may read. "
           "Raises parenchyma.Error ('unsupported') for an OpenCL device whose "
           "memory is not host memory: use numpy() or to() a host backend.")
      .def(
          "__dlpack_device__",
          [](const PyTensor& t) {
            const DLDevice d = export_device(t);
            return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
          },
          "(device_type, device_id) of what __dlpack__ exports: (1, 0) kDLCPU or (2, n) kDLCUDA.")
      .def(
          "data_ptr",
          [](PyTensor& held) {
            require_written(held, "data_ptr()");
            PyTensor t = held;
            int64_t offset = 0;
            std::vector<int64_t> strides;
            const bool view = view_parts(held, t, offset, strides);
            if (!view) t = held; // dense now (a pending expression ran into its own tensor)
            const Release r{export_tensor(t)};
            return reinterpret_cast<uintptr_t>(static_cast<char*>(r.m->dl_tensor.data) +
                                               r.m->dl_tensor.byte_offset) +
                   (view ? static_cast<uintptr_t>(
                               offset * static_cast<int64_t>(sdk::dtype_size(tensor_dtype(held))))
                         : 0);
          },
          "The address __dlpack__ would export (host or device memory), as an int; makes that "
          "copy current like an export does. A query: of a tensor nothing was written to it "
          "raises parenchyma.Error ('uninitialized') and leaves the tensor unwritten.")
      .def(
          "__array__",
          [](PyTensor& t, const py::object& dtype, const py::object&) {
            // NumPy reaches this only when the buffer protocol failed (an unwritten tensor,
            // bfloat16), whose error NumPy drops: raise it here instead of an object array.
            require_written(t, "numpy.asarray()");
            if (tensor_dtype(t) == PCY_DTYPE_BF16)
              fail(errc::unsupported, "parenchyma.Tensor.__array__",
                   "NumPy has no bfloat16 dtype: export with __dlpack__ to a library that has "
                   "one (PyTorch, JAX)");
            py::object a = numpy_of(t);
            if (!dtype.is_none()) a = a.attr("astype")(dtype);
            return a;
          },
          py::arg("dtype") = py::none(), py::arg("copy") = py::none(),
          "numpy.asarray(t): the host copy as a NumPy array (the buffer protocol serves it "
          "first); of an unwritten tensor raises parenchyma.Error ('uninitialized').")
      .def_property_readonly(
          "__cuda_array_interface__",
          [](PyTensor& held) {
            const PyTensor t = dense(held);
            if (held.array)
              throw py::attribute_error("__cuda_array_interface__: the tensor is a view (a "
                                        "strided part of a tensor): copy() it first");
            bool cuda = false;
            try {
              cuda = t.backend && export_device(t).device_type == kDLCUDA;
            } catch (const parenchyma::error&) {
            }
            if (!cuda)
              throw py::attribute_error("__cuda_array_interface__: the tensor is not on a CUDA "
                                        "backend (Tensor.backend)");
            const DtypeName d = dtype_entry(t.storage->dtype());
            if (d.typestr == nullptr)
              throw py::attribute_error(std::string("__cuda_array_interface__: no typestr for ") +
                                        d.name);
            const Release r{export_tensor(t)};
            py::dict cai;
            cai["shape"] = shape_tuple(t.storage->shape());
            cai["typestr"] = d.typestr;
            cai["data"] =
                py::make_tuple(reinterpret_cast<uintptr_t>(static_cast<char*>(r.m->dl_tensor.data) +
                                                           r.m->dl_tensor.byte_offset),
                               t.storage->read_only());
            cai["strides"] = py::none();
            cai["stream"] = py::none(); // the export finished the backend's queue
            cai["version"] = 3;
            return cai;
          },
          "CUDA Array Interface v3 (CuPy, Numba, PyTorch) for a tensor on a CUDA backend; "
          "AttributeError otherwise. The memory stays valid while the Tensor lives.")
      .def("__len__",
           [](const PyTensor& t) {
             const auto sh = tensor_shape(t);
             if (sh.empty()) throw py::type_error("len() of a 0-d tensor");
             return sh[0];
           })
      .def("_header", [](const PyTensor& t) {
        return "<parenchyma.Tensor shape=" + shape_text(tensor_shape(t)) +
               " dtype=" + dtype_name(tensor_dtype(t)) +
               (t.backend ? " backend='" + t.backend->backend.name() + "'" : std::string()) + ">";
      });

  // The buffer protocol by hand: pybind11's def_buffer cannot report an error nor keep the
  // export alive until the view is released.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = &tensor_getbuffer;
  heap->as_buffer.bf_releasebuffer = &tensor_releasebuffer;

  m.def(
      "from_dlpack",
      [](const py::object& obj, const std::optional<PyBackend>& backend, bool make_dense,
         bool read_only) {
        DLPackImportOptions o;
        o.make_dense = make_dense;
        o.read_only = read_only;
        return import_dlpack(obj, backend ? backend->state : nullptr, o, "parenchyma.from_dlpack",
                             "obj");
      },
      py::arg("obj"), py::arg("backend") = py::none(), py::kw_only(), py::arg("make_dense") = false,
      py::arg("read_only") = false,
      R"(Imports a DLPack tensor without copying: `obj` is an object with __dlpack__ (a NumPy
array, a PyTorch tensor, a parenchyma.Tensor) or a 'dltensor' capsule, which is consumed (renamed
'used_dltensor') only when the import succeeds.

Host memory (kDLCPU) becomes the tensor's host copy; CUDA memory (kDLCUDA) a slot of `backend`
(default: Backend("cuda:<device id>")), which is asked for the data on its stream. `backend`
also becomes the tensor's backend (Tensor.backend). Strides must be dense row-major: other
layouts raise parenchyma.Error ('invalid_argument'), or are copied into a dense tensor with
make_dense=True (host memory only). read_only=True refuses every write to the tensor.)");
}

} // namespace parenchyma::python
