// parenchyma Python bindings: integer arguments. pybind11's own conversion of an int that does
// not fit (2**63 for a shape) raises "Unable to cast Python instance to C++ type", naming
// nothing; every integer argument of the package goes through int_arg instead.
#include "bindings.hpp"

namespace parenchyma::python {

namespace {

std::string type_name(const py::handle& v) {
  return std::string(py::str(py::type::handle_of(v).attr("__name__")));
}

std::string repr_prefix(const py::handle& v) {
  std::string r = py::str(py::repr(v));
  if (r.size() > 40) r = r.substr(0, 40) + "...";
  return r;
}

} // namespace

int64_t int_arg(const py::handle& v, const std::string& origin, const std::string& name,
                int64_t min, int64_t max) {
  // int, bool, NumPy integers (__index__); a float or a str is not an integer.
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {
    PyErr_Clear();
    fail_type(origin, "argument " + name + ": expected an int, got " + type_name(v));
  }
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow != 0 || x < min || x > max)
    fail(errc::invalid_argument, origin,
         "argument " + name + ": " + repr_prefix(index) + " is out of range (" +
             std::to_string(min) + " to " + std::to_string(max) + ")");
  return x;
}

uint64_t uint_arg(const py::handle& v, const std::string& origin, const std::string& name) {
  py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
  if (!index) {
    PyErr_Clear();
    fail_type(origin, "argument " + name + ": expected an int, got " + type_name(v));
  }
  const unsigned long long x = PyLong_AsUnsignedLongLong(index.ptr());
  if (x == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear(); // OverflowError: negative or >= 2**64
    fail(errc::invalid_argument, origin,
         "argument " + name + ": " + repr_prefix(index) + " is out of range (0 to " +
             std::to_string(std::numeric_limits<uint64_t>::max()) + ")");
  }
  return x;
}

std::vector<int64_t> ints_arg(const py::handle& v, const std::string& origin,
                              const std::string& name) {
  if (!py::isinstance<py::sequence>(v) || py::isinstance<py::str>(v) ||
      py::isinstance<py::bytes>(v))
    fail_type(origin, "argument " + name + ": expected a sequence of ints, got " + type_name(v));
  std::vector<int64_t> out;
  const py::sequence seq = py::reinterpret_borrow<py::sequence>(v);
  const size_t n = seq.size();
  out.reserve(n);
  for (size_t i = 0; i < n; ++i)
    out.push_back(int_arg(seq[i], origin, name + "[" + std::to_string(i) + "]"));
  return out;
}

} // namespace parenchyma::python
