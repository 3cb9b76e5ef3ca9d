// parenchyma Python bindings: the array operations of parenchyma.Tensor (operators, views,
// reductions, creation) over the array front-end parenchyma/array.hpp, as the private module
// parenchyma._parenchyma._array; parenchyma/_tensor.py and parenchyma/array_api.py build the
// public API on it. The semantics (promotion, broadcasting, views, fusion) are the front-end's.
#include "bindings.hpp"

#include <parenchyma/array.hpp>

#include <cmath>
#include <functional>
#include <map>
#include <string>

namespace parenchyma::python {

namespace pa = parenchyma::array;

namespace {

constexpr const char* origin_prefix = "array.";

// ---- operands --------------------------------------------------------------------------------

// One operand of an array operation: a Tensor, or a Python scalar (weak, as NumPy 2's).
struct Value {
  PyTensor* tensor = nullptr;
  pa::Array scalar; // when tensor is null
};

Value value_of(const py::handle& obj, const std::string& fn, const char* arg) {
  Value v;
  if (py::isinstance<PyTensor>(obj)) {
    v.tensor = &obj.cast<PyTensor&>();
    return v;
  }
  if (PyBool_Check(obj.ptr())) {
    v.scalar = pa::scalar_bool(obj.ptr() == Py_True);
    return v;
  }
  if (PyLong_Check(obj.ptr())) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow != 0)
      fail(errc::invalid_argument, origin_prefix + fn,
           std::string("argument ") + arg + ": the Python int " + std::string(py::str(obj)) +
               " does not fit in int64");
    if (x == -1 && PyErr_Occurred()) throw py::error_already_set();
    v.scalar = pa::scalar_int(x);
    return v;
  }
  if (PyFloat_Check(obj.ptr())) {
    v.scalar = pa::scalar(PyFloat_AsDouble(obj.ptr()));
    return v;
  }
  fail_type(origin_prefix + fn,
            std::string("argument ") + arg +
                ": expected a parenchyma.Tensor or a Python bool, int "
                "or float, got " +
                std::string(py::str(py::type::handle_of(obj).attr("__name__"))));
}

// The backend of an operation: its operands' (they must agree), else the default one.
std::shared_ptr<BackendState> pick_backend(const std::vector<const Value*>& values,
                                           const std::string& fn) {
  std::shared_ptr<BackendState> s;
  for (const Value* v : values) {
    if (v->tensor == nullptr || !v->tensor->backend) continue;
    const auto& b = v->tensor->backend;
    if (!s)
      s = b;
    else if (s != b && !(s->backend == b->backend))
      fail(errc::invalid_argument, origin_prefix + fn,
           "the operands live on different backends ('" + s->backend.name() + "' and '" +
               b->backend.name() + "'); bring one to the other's with Tensor.to(backend)");
  }
  return s ? s : default_backend();
}

// The front-end Array of a Tensor on backend s (a host tensor records s, as ops do).
pa::Array array_of(PyTensor& t, const std::shared_ptr<BackendState>& s) {
  if (t.array) return *t.array;
  if (!t.backend) t.backend = s;
  const auto& sh = t.storage->shape();
  return pa::Array(pa::Array::leaf(t.storage, 0, pa::detail::dense_strides(sh), sh),
                   t.backend->backend);
}
pa::Array array_of(const Value& v, const std::shared_ptr<BackendState>& s) {
  return v.tensor != nullptr ? array_of(*v.tensor, s) : v.scalar;
}

// Whether `a` is its tensor, whole: dense, in order, of the tensor's shape.
bool whole(const pa::Array& a) {
  return a.is_view() && a.is_dense_whole() && a.shape() == a.node()->storage->shape();
}

// A Tensor holding `a`: its storage when `a` is a whole dense tensor, else the Array. `mutex`:
// a view shares its base's.
PyTensor tensor_of(pa::Array a, const std::shared_ptr<BackendState>& s,
                   std::shared_ptr<std::mutex> mutex = nullptr) {
  PyTensor r;
  if (mutex) r.mutex = std::move(mutex);
  r.backend = s;
  if (whole(a))
    r.storage = a.node()->storage;
  else
    r.array = std::make_shared<const pa::Array>(std::move(a));
  return r;
}

// Runs f() (building or running front-end work) with the GIL released, holding the backend's
// lock and the tensors'.
template <class F>
pa::Array locked(const std::shared_ptr<BackendState>& s, std::initializer_list<const Value*> values,
                 F&& f) {
  std::vector<std::mutex*> locks{&s->mutex};
  for (const Value* v : values)
    if (v->tensor != nullptr) locks.push_back(v->tensor->mutex.get());
  return without_gil([&] {
    const OrderedLock lock(std::move(locks));
    return f();
  });
}

// A unary operation on a Tensor (results never alias the operand: an identity is a copy).
PyTensor apply1(const py::handle& x, const std::string& fn,
                const std::function<pa::Array(const pa::Array&)>& f, bool view = false) {
  const Value vx = value_of(x, fn, "x");
  if (vx.tensor == nullptr)
    fail_type(origin_prefix + fn, "argument x: expected a parenchyma.Tensor");
  const auto s = pick_backend({&vx}, fn);
  const pa::Array ax = array_of(vx, s);
  pa::Array r = locked(s, {&vx}, [&] {
    pa::Array out = f(ax);
    if (!view && out.node() == ax.node()) out = out.copy();
    return out;
  });
  return tensor_of(std::move(r), s, view ? vx.tensor->mutex : nullptr);
}

using Unary = pa::Array (*)(const pa::Array&);
const std::map<std::string, Unary>& unary_ops() {
  static const std::map<std::string, Unary> ops = {
      {"negative", &pa::negative},
      {"abs", &pa::abs},
      {"sign", &pa::sign},
      {"square", &pa::square},
      {"exp", &pa::exp},
      {"expm1", &pa::expm1},
      {"log", &pa::log},
      {"log1p", &pa::log1p},
      {"log2", &pa::log2},
      {"log10", &pa::log10},
      {"sqrt", &pa::sqrt},
      {"rsqrt", &pa::rsqrt},
      {"sin", &pa::sin},
      {"cos", &pa::cos},
      {"tan", &pa::tan},
      {"asin", &pa::asin},
      {"acos", &pa::acos},
      {"atan", &pa::atan},
      {"sinh", &pa::sinh},
      {"cosh", &pa::cosh},
      {"tanh", &pa::tanh},
      {"asinh", &pa::asinh},
      {"acosh", &pa::acosh},
      {"atanh", &pa::atanh},
      {"erf", &pa::erf},
      {"floor", &pa::floor},
      {"ceil", &pa::ceil},
      {"round", &pa::round},
      {"trunc", &pa::trunc},
      {"isnan", &pa::isnan},
      {"isinf", &pa::isinf},
      {"isfinite", &pa::isfinite},
      {"bitwise_invert", &pa::bitwise_invert},
      {"logical_not", &pa::logical_not},
      {"positive", &pa::positive},
      {"reciprocal", &pa::reciprocal},
  };
  return ops;
}

using Binary = pa::Array (*)(const pa::Array&, const pa::Array&);
const std::map<std::string, Binary>& binary_ops() {
  static const std::map<std::string, Binary> ops = {
      {"add", &pa::add},
      {"subtract", &pa::subtract},
      {"multiply", &pa::multiply},
      {"divide", &pa::divide},
      {"floor_divide", &pa::floor_divide},
      {"remainder", &pa::remainder},
      {"pow", static_cast<Binary>(&pa::pow)},
      {"minimum", static_cast<Binary>(&pa::minimum)},
      {"maximum", static_cast<Binary>(&pa::maximum)},
      {"atan2", &pa::atan2},
      {"copysign", &pa::copysign},
      {"nextafter", &pa::nextafter},
      {"hypot", &pa::hypot},
      {"logaddexp", &pa::logaddexp},
      {"bitwise_and", &pa::bitwise_and},
      {"bitwise_or", &pa::bitwise_or},
      {"bitwise_xor", &pa::bitwise_xor},
      {"bitwise_left_shift", &pa::bitwise_left_shift},
      {"bitwise_right_shift", &pa::bitwise_right_shift},
      {"equal", &pa::equal},
      {"not_equal", &pa::not_equal},
      {"less", &pa::less},
      {"less_equal", &pa::less_equal},
      {"greater", &pa::greater},
      {"greater_equal", &pa::greater_equal},
      {"logical_and", &pa::logical_and},
      {"logical_or", &pa::logical_or},
      {"logical_xor", &pa::logical_xor},
  };
  return ops;
}

std::vector<int64_t> axes_arg(const py::object& axes, const std::string& fn) {
  if (axes.is_none()) return {};
  if (py::hasattr(axes, "__index__")) return {int_arg(axes, origin_prefix + fn, "axis")};
  return ints_arg(axes, origin_prefix + fn, "axis");
}

std::optional<int64_t> opt_int(const py::object& v, const std::string& fn, const char* name) {
  if (v.is_none()) return std::nullopt;
  return int_arg(v, origin_prefix + fn, name);
}

std::shared_ptr<BackendState> backend_arg(const py::object& backend) {
  if (backend.is_none()) return default_backend();
  if (!py::isinstance<PyBackend>(backend))
    fail_type("array", "argument device: expected a parenchyma.Backend, got " +
                           std::string(py::str(py::type::handle_of(backend).attr("__name__"))));
  return backend.cast<const PyBackend&>().state;
}

// A Python scalar as the front-end's weak scalar, for full()/assign of a value.
pa::Array fill_value(const py::handle& v, const char* fn) {
  const Value x = value_of(v, fn, "fill_value");
  if (x.tensor != nullptr)
    fail_type(std::string(origin_prefix) + fn,
              "argument fill_value: expected a Python bool, int or float");
  return x.scalar;
}

pa::Array new_array(const std::shared_ptr<BackendState>& s, pa::Shape shape, pcy_dtype t,
                    const char* fn) {
  for (int64_t e : shape)
    if (e < 0)
      fail(errc::invalid_argument, std::string(origin_prefix) + fn,
           "argument shape: extent " + std::to_string(e) + " < 0");
  pa::Array a(s->backend, std::move(shape), t);
  // No elements: nothing to write, so it counts as written (a reduction over an empty axis
  // reads it).
  if (a.size() == 0) (void)a.node()->storage->host(access::write_only);
  return a;
}

} // namespace

// ---- what the rest of the bindings use ------------------------------------------------------

std::shared_ptr<BackendState> default_backend() {
  if (const auto& stack = thread_backends(); !stack.empty()) return stack.back();
  // Never destroyed: a backend outliving the interpreter's teardown is not unloaded mid-exit.
  static auto* slot = new std::shared_ptr<BackendState>();
  if (!*slot) {
    auto s = without_gil([] { return std::make_shared<BackendState>(Backend()); });
    if (!*slot) { // another thread may have made it meanwhile
      register_backend(s);
      *slot = std::move(s);
    }
  }
  return *slot;
}

std::vector<int64_t> tensor_shape(const PyTensor& t) {
  return t.array ? t.array->shape() : t.storage->shape();
}
pcy_dtype tensor_dtype(const PyTensor& t) { return t.array ? t.array->type() : t.storage->dtype(); }

bool tensor_initialized(const PyTensor& t) {
  if (!t.array) return t.storage->initialized();
  return !t.array->is_view() || t.array->node()->storage->initialized();
}

PyTensor dense(PyTensor& t) {
  if (!t.array) return t;
  const PyTensor keep = t;
  const std::shared_ptr<BackendState> s = t.backend;
  std::shared_ptr<TensorStorage> whole_st, copy;
  without_gil([&] {
    const OrderedLock lock({&s->mutex, keep.mutex.get()});
    pa::Array a = *keep.array;
    a.eval(s->backend);
    if (whole(a))
      whole_st = a.node()->storage;
    else
      copy = a.copy().node()->storage;
  });
  if (whole_st) {
    t.storage = std::move(whole_st);
    t.array.reset();
    return t;
  }
  PyTensor r;
  r.storage = std::move(copy);
  r.backend = s;
  return r;
}

bool view_parts(PyTensor& t, PyTensor& base, int64_t& offset, std::vector<int64_t>& strides) {
  if (!t.array) return false;
  if (t.array->is_pending()) {
    (void)dense(t);
    if (!t.array) return false;
  }
  const pa::Array& a = *t.array;
  base = PyTensor{};
  base.storage = a.node()->storage;
  base.mutex = t.mutex;
  base.backend = t.backend;
  offset = a.offset();
  strides = a.strides();
  return true;
}

void retarget(PyTensor& t, const std::shared_ptr<BackendState>& s) {
  if (!t.array) {
    t.backend = s;
    return;
  }
  if (t.array->is_pending()) (void)dense(t);
  if (t.array) t.array = std::make_shared<const pa::Array>(pa::Array(t.array->node(), s->backend));
  t.backend = s;
}

void write_back(PyTensor& view, const PyTensor& copy) {
  if (!view.array || !copy.storage || !copy.storage->initialized()) return;
  const PyTensor keep = view;
  const std::shared_ptr<BackendState> s = view.backend;
  without_gil([&] {
    const OrderedLock lock({&s->mutex, keep.mutex.get(), copy.mutex.get()});
    pa::Array target = *keep.array;
    if (!target.is_view() || target.node()->storage->read_only()) return;
    const auto& sh = copy.storage->shape();
    target.assign(
        pa::Array(pa::Array::leaf(copy.storage, 0, pa::detail::dense_strides(sh), sh), s->backend));
  });
}

void flush_array_readers(const Backend& b, TensorStorage& st) {
  pa::detail::flush_readers(&st, nullptr, b);
}

void bind_array(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "_array", "The array front-end's operations on Tensors (private: parenchyma.array_api and "
                "the Tensor methods are the API).");

  m.def("default_backend", [] { return PyBackend{default_backend()}; });
  m.def(
      "live_backend",
      [](const std::string& name, uintptr_t token) -> py::object {
        const auto s = live_backend(name, token);
        if (!s) return py::none();
        return py::cast(PyBackend{s});
      },
      py::arg("name"), py::arg("token") = 0,
      "The backend named `name` this process made and still uses: the one backend_token() "
      "gave `token` for, or (token 0) the most recently made one; None when there is none.");
  m.def(
      "backend_token",
      [](const PyBackend& b) { return reinterpret_cast<uintptr_t>(b.state.get()); },
      "An integer naming this backend in this process (for live_backend).");
  m.def("context_backend", []() -> py::object {
    const auto& stack = thread_backends();
    if (stack.empty()) return py::none();
    return py::cast(PyBackend{stack.back()});
  });
  m.def(
      "programs_run", [] { return pa::programs_run(); },
      "The array programs (op calls) this thread has run.");
  m.def("kind", [](const PyTensor& t) -> std::string {
    if (!t.array) return "dense";
    return t.array->is_pending() ? "pending" : "view";
  });
  m.def("view_layout", [](const PyTensor& t) {
    // (offset, strides) in elements over the view's base tensor, for numpy().
    if (!t.array || !t.array->is_view()) fail(errc::internal, "array.view_layout", "not a view");
    return py::make_tuple(t.array->offset(), t.array->strides());
  });

  m.def("unary", [](const std::string& name, const py::object& x) {
    const auto it = unary_ops().find(name);
    if (it == unary_ops().end())
      fail(errc::unsupported, origin_prefix + name, "no such elementwise function");
    return apply1(x, name, it->second);
  });
  m.def("binary", [](const std::string& name, const py::object& x, const py::object& y) {
    const auto it = binary_ops().find(name);
    if (it == binary_ops().end())
      fail(errc::unsupported, origin_prefix + name, "no such elementwise function");
    const Value vx = value_of(x, name, "x1"), vy = value_of(y, name, "x2");
    if (vx.tensor == nullptr && vy.tensor == nullptr)
      fail(errc::invalid_argument, origin_prefix + name, "at least one operand must be a Tensor");
    const auto s = pick_backend({&vx, &vy}, name);
    const pa::Array ax = array_of(vx, s), ay = array_of(vy, s);
    return tensor_of(locked(s, {&vx, &vy}, [&] { return it->second(ax, ay); }), s);
  });
  m.def("where", [](const py::object& c, const py::object& x, const py::object& y) {
    const Value vc = value_of(c, "where", "condition"), vx = value_of(x, "where", "x1"),
                vy = value_of(y, "where", "x2");
    const auto s = pick_backend({&vc, &vx, &vy}, "where");
    const pa::Array ac = array_of(vc, s), ax = array_of(vx, s), ay = array_of(vy, s);
    return tensor_of(locked(s, {&vc, &vx, &vy}, [&] { return pa::where(ac, ax, ay); }), s);
  });
  m.def(
      "astype",
      [](const py::object& x, const py::object& dtype, bool copy) {
        const pcy_dtype t = dtype_from_object(dtype, "dtype");
        return apply1(
            x, "astype",
            [&](const pa::Array& a) {
              pa::Array r = pa::astype(a, t);
              return r;
            },
            !copy);
      },
      py::arg("x"), py::arg("dtype"), py::arg("copy") = true);
  m.def("copy", [](const py::object& x) {
    return apply1(x, "copy", [](const pa::Array& a) { return a.copy(); });
  });
  m.def("eval", [](PyTensor& t) {
    if (t.array) (void)dense(t); // a pending expression becomes dense; a view stays
  });

  // ---- views ----
  m.def("reshape", [](const py::object& x, const py::object& shape) {
    const std::vector<int64_t> sh =
        py::hasattr(shape, "__index__")
            ? std::vector<int64_t>{int_arg(shape, "array.reshape", "shape")}
            : ints_arg(shape, "array.reshape", "shape");
    return apply1(
        x, "reshape", [&](const pa::Array& a) { return a.reshape(sh); }, true);
  });
  m.def("permute_dims", [](const py::object& x, const py::object& axes) {
    const auto ax = ints_arg(axes, "array.permute_dims", "axes");
    return apply1(
        x, "permute_dims", [&](const pa::Array& a) { return a.permute_dims(ax); }, true);
  });
  m.def("expand_dims", [](const py::object& x, const py::object& axis) {
    const int64_t ax = int_arg(axis, "array.expand_dims", "axis");
    return apply1(
        x, "expand_dims", [&](const pa::Array& a) { return a.expand_dims(ax); }, true);
  });
  m.def("squeeze", [](const py::object& x, const py::object& axes) {
    const auto ax = axes_arg(axes, "squeeze");
    return apply1(
        x, "squeeze", [&](const pa::Array& a) { return a.squeeze(ax); }, true);
  });
  m.def("broadcast_to", [](const py::object& x, const py::object& shape) {
    const auto sh = ints_arg(shape, "array.broadcast_to", "shape");
    return apply1(
        x, "broadcast_to", [&](const pa::Array& a) { return a.broadcast_to(sh); }, true);
  });
  m.def("flip", [](const py::object& x, const py::object& axes) {
    std::vector<int64_t> ax = axes_arg(axes, "flip");
    if (!axes.is_none() && ax.empty())
      return apply1(
          x, "flip", [](const pa::Array& a) { return a; }, true);
    return apply1(
        x, "flip", [&](const pa::Array& a) { return a.flip(ax); }, true);
  });
  m.def("slice", [](const py::object& x, int64_t axis, const py::object& start,
                    const py::object& stop, const py::object& step) {
    const int64_t b = start.is_none() ? pa::Array::npos : int_arg(start, "array.slice", "start");
    const int64_t e = stop.is_none() ? pa::Array::npos : int_arg(stop, "array.slice", "stop");
    const int64_t st = step.is_none() ? 1 : int_arg(step, "array.slice", "step");
    return apply1(
        x, "slice", [&](const pa::Array& a) { return a.slice(axis, b, e, st); }, true);
  });
  m.def("at", [](const py::object& x, const py::object& index, int64_t axis) {
    const int64_t i = int_arg(index, "array.at", "index");
    return apply1(
        x, "at", [&](const pa::Array& a) { return a.at(i, axis); }, true);
  });

  // ---- indexing, joining, products ----
  m.def("take", [](const py::object& x, const py::object& indices, int64_t axis) {
    const Value vx = value_of(x, "take", "x"), vi = value_of(indices, "take", "indices");
    if (vx.tensor == nullptr || vi.tensor == nullptr)
      fail(errc::invalid_argument, "array.take", "x and indices must be Tensors");
    const auto s = pick_backend({&vx, &vi}, "take");
    const pa::Array ax = array_of(vx, s), ai = array_of(vi, s);
    return tensor_of(locked(s, {&vx, &vi}, [&] { return pa::take(ax, ai, axis); }), s);
  });
  m.def("join", [](const std::string& name, const py::sequence& arrays, int64_t axis) {
    std::vector<Value> vs;
    vs.reserve(arrays.size());
    for (size_t i = 0; i < arrays.size(); ++i) {
      vs.push_back(value_of(arrays[i], name, "arrays"));
      if (vs.back().tensor == nullptr)
        fail(errc::invalid_argument, origin_prefix + name, "argument arrays: expected Tensors");
    }
    std::vector<const Value*> all;
    for (const Value& v : vs)
      all.push_back(&v);
    const auto s = pick_backend(all, name);
    std::vector<pa::Array> as;
    for (const Value& v : vs)
      as.push_back(array_of(v, s));
    std::vector<std::mutex*> locks{&s->mutex};
    for (const Value& v : vs)
      locks.push_back(v.tensor->mutex.get());
    pa::Array r = without_gil([&] {
      const OrderedLock lock(std::move(locks));
      return name == "stack" ? pa::stack(std::span<const pa::Array>(as), axis)
                             : pa::concat(std::span<const pa::Array>(as), axis);
    });
    return tensor_of(std::move(r), s);
  });
  m.def("product", [](const std::string& name, const py::object& x, const py::object& y,
                      int64_t arg) {
    const Value vx = value_of(x, name, "x1"), vy = value_of(y, name, "x2");
    if (vx.tensor == nullptr || vy.tensor == nullptr)
      fail(errc::invalid_argument, origin_prefix + name, "x1 and x2 must be Tensors");
    const auto s = pick_backend({&vx, &vy}, name);
    const pa::Array ax = array_of(vx, s), ay = array_of(vy, s);
    return tensor_of(locked(s, {&vx, &vy},
                            [&] {
                              if (name == "matmul") return pa::matmul(ax, ay);
                              if (name == "vecdot") return pa::vecdot(ax, ay, arg);
                              if (name == "tensordot") return pa::tensordot(ax, ay, arg);
                              fail(errc::unsupported, origin_prefix + name, "no such product");
                            }),
                     s);
  });

  // ---- writes ----
  m.def("assign", [](PyTensor& target, const py::object& value) {
    Value vt;
    vt.tensor = &target;
    const Value vv = value_of(value, "assign", "value");
    const auto s = pick_backend({&vt, &vv}, "assign");
    // A dense tensor is written as a whole view of itself; a pending expression runs first
    // (assign makes it a tensor of its own, which `target` then holds).
    pa::Array at = array_of(target, s);
    const pa::Array av = array_of(vv, s);
    if (at.is_view() && at.node()->storage->read_only())
      fail(errc::invalid_argument, "array.assign", "the target is read-only (imported read-only)");
    pa::Array r = locked(s, {&vt, &vv}, [&] {
      at.assign(av);
      return at;
    });
    if (target.array && whole(r)) {
      target.storage = r.node()->storage;
      target.array.reset();
    }
  });

  // ---- reductions and scans ----
  m.def(
      "reduce",
      [](const std::string& name, const py::object& x, const py::object& axes, bool keepdims,
         double correction) {
        const auto ax = axes_arg(axes, name);
        const std::span<const int64_t> sp(ax);
        std::function<pa::Array(const pa::Array&)> f;
        if (name == "sum")
          f = [&](const pa::Array& a) { return pa::sum(a, sp, keepdims); };
        else if (name == "prod")
          f = [&](const pa::Array& a) { return pa::prod(a, sp, keepdims); };
        else if (name == "max")
          f = [&](const pa::Array& a) { return pa::max(a, sp, keepdims); };
        else if (name == "min")
          f = [&](const pa::Array& a) { return pa::min(a, sp, keepdims); };
        else if (name == "mean")
          f = [&](const pa::Array& a) { return pa::mean(a, sp, keepdims); };
        else if (name == "all")
          f = [&](const pa::Array& a) { return pa::all(a, sp, keepdims); };
        else if (name == "any")
          f = [&](const pa::Array& a) { return pa::any(a, sp, keepdims); };
        else if (name == "logsumexp")
          f = [&](const pa::Array& a) { return pa::logsumexp(a, sp, keepdims); };
        else if (name == "var")
          f = [&](const pa::Array& a) { return pa::var(a, sp, correction, keepdims); };
        else if (name == "std")
          f = [&](const pa::Array& a) { return pa::std(a, sp, correction, keepdims); };
        else
          fail(errc::unsupported, origin_prefix + name, "no such reduction");
        return apply1(x, name, f);
      },
      py::arg("name"), py::arg("x"), py::arg("axis") = py::none(), py::arg("keepdims") = false,
      py::arg("correction") = 0.0);
  m.def("argreduce",
        [](const std::string& name, const py::object& x, const py::object& axis, bool keepdims) {
          const auto ax = opt_int(axis, name, "axis");
          if (name == "argmax")
            return apply1(x, name, [&](const pa::Array& a) { return pa::argmax(a, ax, keepdims); });
          if (name == "argmin")
            return apply1(x, name, [&](const pa::Array& a) { return pa::argmin(a, ax, keepdims); });
          fail(errc::unsupported, origin_prefix + name, "no such reduction");
        });
  m.def("vector_norm", [](const py::object& x, const py::object& axes, double ord, bool keepdims) {
    const auto ax = axes_arg(axes, "vector_norm");
    return apply1(x, "vector_norm", [&](const pa::Array& a) {
      return pa::vector_norm(a, std::span<const int64_t>(ax), ord, keepdims);
    });
  });
  m.def("scan", [](const std::string& name, const py::object& x, const py::object& axis,
                   bool include_initial) {
    const auto ax = opt_int(axis, name, "axis");
    if (name == "cumulative_sum")
      return apply1(x, name,
                    [&](const pa::Array& a) { return pa::cumulative_sum(a, ax, include_initial); });
    if (name == "cumulative_prod")
      return apply1(
          x, name, [&](const pa::Array& a) { return pa::cumulative_prod(a, ax, include_initial); });
    fail(errc::unsupported, origin_prefix + name, "no such scan");
  });
  m.def("sort", [](const std::string& name, const py::object& x, int64_t axis, bool descending,
                   bool stable) {
    if (name == "sort")
      return apply1(x, name,
                    [&](const pa::Array& a) { return pa::sort(a, axis, descending, stable); });
    if (name == "argsort")
      return apply1(x, name,
                    [&](const pa::Array& a) { return pa::argsort(a, axis, descending, stable); });
    fail(errc::unsupported, origin_prefix + name, "no such sort");
  });

  // ---- creation ----
  m.def("empty", [](const py::object& shape, const py::object& dtype, const py::object& backend) {
    const auto s = backend_arg(backend);
    const auto sh = ints_arg(shape, "array.empty", "shape");
    const pcy_dtype t = dtype_from_object(dtype, "dtype");
    return tensor_of(new_array(s, sh, t, "empty"), s);
  });
  m.def("full", [](const py::object& shape, const py::object& value, const py::object& dtype,
                   const py::object& backend) {
    const auto s = backend_arg(backend);
    const auto sh = ints_arg(shape, "array.full", "shape");
    const pcy_dtype t = dtype_from_object(dtype, "dtype");
    const pa::Array v = fill_value(value, "full");
    pa::Array a = new_array(s, sh, t, "full");
    return tensor_of(locked(s, {},
                            [&] {
                              a.assign(v);
                              return a;
                            }),
                     s);
  });
  m.def("arange", [](double start, double stop, double step, const py::object& dtype,
                     const py::object& backend) {
    const auto s = backend_arg(backend);
    const pcy_dtype t = dtype_from_object(dtype, "dtype");
    return tensor_of(locked(s, {}, [&] { return pa::arange(s->backend, start, stop, step, t); }),
                     s);
  });
  m.def("linspace", [](double start, double stop, int64_t num, bool endpoint,
                       const py::object& dtype, const py::object& backend) {
    const auto s = backend_arg(backend);
    const pcy_dtype t = dtype_from_object(dtype, "dtype");
    return tensor_of(
        locked(s, {}, [&] { return pa::linspace(s->backend, start, stop, num, endpoint, t); }), s);
  });
  m.def("eye", [](int64_t n, const py::object& m_, int64_t k, const py::object& dtype,
                  const py::object& backend) {
    const auto s = backend_arg(backend);
    const pcy_dtype t = dtype_from_object(dtype, "dtype");
    const auto cols = opt_int(m_, "eye", "n_cols");
    return tensor_of(locked(s, {}, [&] { return pa::eye(s->backend, n, cols, k, t); }), s);
  });

  // ---- random numbers (counter-based Philox: the same values on every backend) ----
  using Gen = pa::random::Generator;
  py::class_<Gen>(m, "Generator")
      .def(py::init([](const py::object& seed, const py::object& offset) {
             return Gen(uint_arg(seed, "random.Generator", "seed"),
                        uint_arg(offset, "random.Generator", "offset"));
           }),
           py::arg("seed"), py::arg("offset") = 0)
      .def_property_readonly("seed", &Gen::seed)
      .def_property_readonly("offset", &Gen::offset)
      .def("draw", [](Gen& g, const std::string& dist, const py::object& shape, const py::object& a,
                      const py::object& c, const py::object& dtype, const py::object& backend) {
        const auto s = backend_arg(backend);
        const auto sh = py::hasattr(shape, "__index__")
                            ? std::vector<int64_t>{int_arg(shape, "random." + dist, "shape")}
                            : ints_arg(shape, "random." + dist, "shape");
        for (int64_t e : sh)
          if (e < 0)
            fail(errc::invalid_argument, "random." + dist,
                 "argument shape: extent " + std::to_string(e) + " < 0");
        const pcy_dtype t = dtype_from_object(dtype, "dtype");
        if (dist == "permutation") {
          const int64_t n = int_arg(a, "random.permutation", "n");
          const pcy_dtype pt = dtype_from_object(dtype, "dtype");
          return tensor_of(locked(s, {}, [&] { return g.permutation(s->backend, n, pt); }), s);
        }
        const bool ints = dist == "randint";
        const int64_t ia = ints ? int_arg(a, "random.randint", "low") : 0;
        const int64_t ic = ints ? int_arg(c, "random.randint", "high") : 0;
        const double fa = ints ? 0 : a.cast<double>();
        const double fc = ints || c.is_none() ? 0 : c.cast<double>();
        return tensor_of(locked(s, {},
                                [&] {
                                  if (dist == "uniform")
                                    return g.uniform(s->backend, sh, fa, fc, t);
                                  if (dist == "normal") return g.normal(s->backend, sh, fa, fc, t);
                                  if (dist == "bernoulli")
                                    return g.bernoulli(s->backend, sh, fa, t);
                                  if (ints) return g.randint(s->backend, sh, ia, ic, t);
                                  fail(errc::unsupported, "random." + dist, "no such distribution");
                                }),
                         s);
      });

  // ---- dtypes ----
  m.def("promote", [](const py::object& a, const py::object& b) {
    return std::string(
        dtype_name(pa::promote(dtype_from_object(a, "dtype"), dtype_from_object(b, "dtype"))));
  });
  m.def("result_type", [](const py::object& a, const py::object& b) {
    // a, b: dtype names (strong) or Python scalars (weak): the front-end's rule on two
    // constants (no backend, nothing runs).
    auto node = [](const py::object& v) {
      if (PyBool_Check(v.ptr()) || PyLong_Check(v.ptr()) || PyFloat_Check(v.ptr()))
        return value_of(v, "result_type", "x").scalar;
      const pcy_dtype t = dtype_from_object(v, "dtype");
      return pa::Array(pa::detail::int_scalar_node(0, t, false));
    };
    const pa::Array x = node(a), y = node(b);
    return std::string(dtype_name(pa::where(pa::scalar_bool(true), x, y).type()));
  });
}

} // namespace parenchyma::python
