// parenchyma Python bindings: the objects the module's parts share (backend and tensor state,
// dtype names, argument conversion, ordered locking while the GIL is released).
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/dlpack.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cxxabi.h>

#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace parenchyma::array {
class Array;
}

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
// which decides the device __dlpack__ exports on. A Tensor made by the array operations
// (array.cpp) may instead hold an array front-end value: a view of part of another tensor
// (sharing its mutex) or a pending expression; exactly one of `storage` and `array` is set.
// Code that needs a dense tensor asks dense() (array.cpp) for one.
struct PyTensor {
  std::shared_ptr<TensorStorage> storage; // the dense whole tensor; null while `array` is set
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();
  std::shared_ptr<BackendState> backend; // null: never used on a backend (exports the host copy)
  std::shared_ptr<const array::Array> array; // set: a view or an expression (backend set too)
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
// An argument of the wrong Python type: raises parenchyma.ArgumentTypeError (a subclass of both
// parenchyma.Error, code 'invalid_argument', and TypeError). `message` names the argument and
// the type expected ("argument x: expected a parenchyma.Tensor, got str").
struct argument_type_error : parenchyma::error {
  using parenchyma::error::error;
};
[[noreturn]] void fail_type(const std::string& origin, const std::string& message);
// Sets the Python error for `e` (a parenchyma.Error), for C callbacks that report by return value.
void set_python_error(const parenchyma::error& e);

// ---- argument conversion (args.cpp) ----------------------------------------------------------
// Every integer argument goes through these: a Python int or anything with __index__ (NumPy
// integers). Not an integer, or outside [min, max]: parenchyma.Error ('invalid_argument',
// `origin`) naming the argument `name` and the accepted range, never pybind11's cast error.
int64_t int_arg(const py::handle& v, const std::string& origin, const std::string& name,
                int64_t min = std::numeric_limits<int64_t>::min(),
                int64_t max = std::numeric_limits<int64_t>::max());
uint64_t uint_arg(const py::handle& v, const std::string& origin, const std::string& name);
// A sequence of integers (not a str), each through int_arg as name[i].
std::vector<int64_t> ints_arg(const py::handle& v, const std::string& origin,
                              const std::string& name);

// ---- the GIL (gil.cpp) -------------------------------------------------------------------------
// Taking the GIL back while the interpreter exits would end the thread by a forced unwind
// (pthread_exit), fatal through a noexcept destructor; gil.cpp's protocol avoids it.
// reacquire_gil takes it back, or parks the thread for good when the interpreter exits.
void reacquire_gil(PyThreadState* state);
// Around a PyGILState_Ensure: false when this thread must not take the GIL (the interpreter
// exits); after true, gil_take_end() once the GIL is held.
bool gil_take_begin() noexcept;
void gil_take_end() noexcept;
// Registers the atexit hook the protocol needs (module init).
void install_exit_guard();
// Around runtime code run without the GIL: a thread inside one at process exit keeps the global
// registry loaded (Registry::keep_global_at_exit).
void runtime_call_begin() noexcept;
void runtime_call_end() noexcept;

// Runs f() with the GIL released and returns its result. The GIL is taken back by a plain call,
// never in a destructor (see gil.cpp); an exception f throws is rethrown once the GIL is held.
// Every place that releases the GIL goes through this (not py::gil_scoped_release).
template <class F> auto without_gil(F&& f) {
  using R = std::invoke_result_t<F&>;
  std::exception_ptr failure;
  runtime_call_begin(); // before the GIL goes: the exit hook, holding it, sees this thread
  PyThreadState* const state = PyEval_SaveThread();
  if constexpr (std::is_void_v<R>) {
    try {
      f();
    } catch (abi::__forced_unwind&) {
      runtime_call_end();
      throw; // thread cancellation: must propagate
    } catch (...) {
      failure = std::current_exception();
    }
    runtime_call_end();
    reacquire_gil(state);
    if (failure) std::rethrow_exception(failure);
  } else {
    std::optional<R> result;
    try {
      result.emplace(f());
    } catch (abi::__forced_unwind&) {
      runtime_call_end();
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    runtime_call_end();
    reacquire_gil(state);
    if (failure) std::rethrow_exception(failure);
    return R(std::move(*result));
  }
}

// ---- array values (array.cpp) --------------------------------------------------------------
// The shape and dtype, whichever the tensor holds.
std::vector<int64_t> tensor_shape(const PyTensor& t);
pcy_dtype tensor_dtype(const PyTensor& t);
// Whether some copy holds written data (a view: its base's; an expression: yes, its inputs are
// checked when it runs).
bool tensor_initialized(const PyTensor& t);
// A Tensor whose storage is dense and whole: t itself when it holds a storage; a pending
// expression runs into a tensor of its own, which t then holds; a view of part of another
// tensor gives a dense copy (a new Tensor; t stays the view).
PyTensor dense(PyTensor& t);
// A view (after running a pending expression, which makes t dense): its base tensor (the whole
// storage, with t's mutex and backend), offset and strides in elements; false when t is dense.
bool view_parts(PyTensor& t, PyTensor& base, int64_t& offset, std::vector<int64_t>& strides);
// Tensor.to(backend) of a Tensor holding an Array: a pending expression runs on its backend
// first; the value then lives on `s` (its data moves when next used there).
void retarget(PyTensor& t, const std::shared_ptr<BackendState>& s);
// After an op wrote `copy` (a dense() copy of the view `view`): the values written into the view.
void write_back(PyTensor& view, const PyTensor& copy);
// Runs this thread's pending array expressions that read `st` (before an op writes it: the
// front-end tracks only its own writes).
void flush_array_readers(const Backend& b, TensorStorage& st);
// The backend array operations and creation functions on host tensors use: the innermost
// `with backend:` of this thread, else Backend(), made on first use.
std::shared_ptr<BackendState> default_backend();
// This thread's stack of `with backend:` blocks (backend.cpp), innermost last.
std::vector<std::shared_ptr<BackendState>>& thread_backends();
// The backends the package made, by name (backend.cpp): unpickling finds one still in use.
void register_backend(const std::shared_ptr<BackendState>& s);
// The backend named `name` still in use: the one at address `token` (a BackendState*, as an
// integer; 0: any), else (token 0) the most recently made one; null when there is none.
std::shared_ptr<BackendState> live_backend(const std::string& name, uintptr_t token = 0);

void bind_errors(py::module_& m);
void bind_backend(py::module_& m);
void bind_tensor(py::module_& m);
void bind_blas(py::module_& m);
void bind_nn(py::module_& m);
void bind_info(py::module_& m);
void bind_array(py::module_& m);
void bind_coll(py::module_& m);

} // namespace parenchyma::python
