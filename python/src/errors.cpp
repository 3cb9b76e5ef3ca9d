// parenchyma Python bindings: parenchyma.Error, into which every parenchyma::error turns.
#include "bindings.hpp"

namespace parenchyma::python {

namespace {

// The exception type; created once per process and deliberately never released (it must
// outlive every translator call, also during interpreter shutdown).
PyObject* error_type = nullptr;
// parenchyma.ArgumentTypeError(Error, TypeError): an argument of the wrong Python type.
PyObject* type_error_type = nullptr;

// The code as the enumerator's name: stable for programs to compare (to_string(errc) is the
// human-readable form, "invalid argument").
const char* code_name(errc code) noexcept {
  switch (code) {
  case errc::invalid_argument: return "invalid_argument";
  case errc::unsupported: return "unsupported";
  case errc::out_of_memory: return "out_of_memory";
  case errc::device: return "device";
  case errc::build: return "build";
  case errc::not_found: return "not_found";
  case errc::version: return "version";
  case errc::unavailable: return "unavailable";
  case errc::internal: return "internal";
  case errc::launch: return "launch";
  case errc::config: return "config";
  case errc::uninitialized: return "uninitialized";
  case errc::plugin: return "plugin";
  }
  return "internal";
}

void raise(const parenchyma::error& e, PyObject* type = error_type) {
  py::object inst = py::reinterpret_steal<py::object>(PyObject_CallFunction(type, "s", e.what()));
  if (!inst) return; // the call set a Python error (MemoryError); that one propagates
  inst.attr("code") = code_name(e.code());
  inst.attr("description") = to_string(e.code());
  inst.attr("origin") = e.origin();
  inst.attr("message") = e.message();
  PyErr_SetObject(type, inst.ptr());
}

} // namespace

void set_python_error(const parenchyma::error& e) { raise(e); }

[[noreturn]] void fail(errc code, const std::string& origin, const std::string& message) {
  throw parenchyma::error(code, origin, message);
}

[[noreturn]] void fail_type(const std::string& origin, const std::string& message) {
  throw argument_type_error(errc::invalid_argument, origin, message);
}

void bind_errors(py::module_& m) {
  py::dict attrs;
  attrs["code"] = py::none();
  attrs["origin"] = py::none();
  attrs["message"] = py::none();
  attrs["description"] = py::none();
  error_type = PyErr_NewExceptionWithDoc(
      "parenchyma.Error",
      "The error every parenchyma operation raises.\n\n"
      "Attributes:\n"
      "  code: the kind of failure, e.g. 'invalid_argument', 'unsupported', 'unavailable',\n"
      "        'out_of_memory', 'device', 'uninitialized', 'config' (the name of the C++\n"
      "        enumerator parenchyma::errc::<code>).\n"
      "  description: the code in words ('invalid argument'), parenchyma::to_string(errc).\n"
      "  origin: what failed: a plugin, a config file, or an op such as 'blas.axpy'.\n"
      "  message: the message without the 'origin: ' prefix that str(error) carries.",
      PyExc_Exception, attrs.ptr());
  if (error_type == nullptr) throw py::error_already_set();
  m.add_object("Error", py::handle(error_type));
  py::tuple bases = py::make_tuple(py::handle(error_type), py::handle(PyExc_TypeError));
  type_error_type = PyErr_NewExceptionWithDoc(
      "parenchyma.ArgumentTypeError",
      "An argument of the wrong type: both a parenchyma.Error (code 'invalid_argument') and a\n"
      "TypeError. The message names the function, the argument and the type expected:\n"
      "'parenchyma.blas.axpy: argument alpha: expected float (or int), got str'.",
      bases.ptr(), nullptr);
  if (type_error_type == nullptr) throw py::error_already_set();
  m.add_object("ArgumentTypeError", py::handle(type_error_type));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const argument_type_error& e) {
      raise(e, type_error_type);
    } catch (const parenchyma::error& e) {
      raise(e);
    }
  });
}

} // namespace parenchyma::python
