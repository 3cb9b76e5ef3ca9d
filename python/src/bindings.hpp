// parenchyma Python bindings: the objects the module's parts share (backend and tensor state,
// dtype names, argument conversion, ordered locking while the GIL is released).
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/dlpack.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::python {

namespace py = pybind11;

// A Backend with the mutex that serialises its use from Python threads (a C++ Backend is used by
// one thread at a time; with the GIL released during ops, Python threads could share one).
struct BackendState {
  explicit BackendState(Backend b) : backend(std::move(b)) {}
  Backend backend;
  std::mutex mutex;
};

// The Python Tensor: the storage, its mutex (same reason) and the backend it was last used on,
// which decides the device __dlpack__ exports on.
struct PyTensor {
  std::shared_ptr<TensorStorage> storage;
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<BackendState> backend; // null: never used on a backend (exports the host copy)
};

struct PyBackend {
  std::shared_ptr<BackendState> state;
};

// dtype names as NumPy spells them, and back (errc::invalid_argument naming `what`).
const char* dtype_name(pcy_dtype t) noexcept;
pcy_dtype dtype_from_name(std::string_view name, const char* what);
// A dtype given as a string, a numpy.dtype or a NumPy scalar type (anything with a `.name`
// after numpy.dtype()).
pcy_dtype dtype_from_object(const py::handle& obj, const char* what);

// Locks a set of mutexes in address order (duplicates once), after the caller released the
// GIL: two threads locking overlapping sets cannot deadlock, and no thread holding one of these
// ever waits for the GIL while another waits for it (every locker released the GIL first).
class OrderedLock {
public:
  explicit OrderedLock(std::vector<std::mutex*> mutexes);
  ~OrderedLock();
  OrderedLock(const OrderedLock&) = delete;
  OrderedLock& operator=(const OrderedLock&) = delete;

private:
  std::vector<std::mutex*> held_;
};

// Imports a DLPack producer (an object with __dlpack__, or a "dltensor" capsule) as a Tensor
// aliasing its memory; `origin`/`arg` name the caller in errors.
PyTensor import_dlpack(const py::object& obj, const std::shared_ptr<BackendState>& backend,
                       const DLPackImportOptions& options, const char* origin, const char* arg);

[[noreturn]] void fail(errc code, const std::string& origin, const std::string& message);

void bind_errors(py::module_& m);
void bind_backend(py::module_& m);
void bind_tensor(py::module_& m);
void bind_blas(py::module_& m);
void bind_nn(py::module_& m);
void bind_info(py::module_& m);

} // namespace parenchyma::python
