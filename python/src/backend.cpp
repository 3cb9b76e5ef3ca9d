// parenchyma Python bindings: parenchyma.Backend, and the ordered lock the ops take.
#include "bindings.hpp"

#include <algorithm>
#include <iterator>

namespace parenchyma::python {

OrderedLock::OrderedLock(std::vector<std::mutex*> mutexes) : held_(std::move(mutexes)) {
  std::sort(held_.begin(), held_.end());
  held_.erase(std::unique(held_.begin(), held_.end()), held_.end());
  for (size_t i = 0; i < held_.size(); ++i) {
    try {
      held_[i]->lock();
    } catch (...) {
      held_.resize(i); // unlock only what was locked
      throw;
    }
  }
}

OrderedLock::~OrderedLock() {
  for (auto it = held_.rbegin(); it != held_.rend(); ++it)
    (*it)->unlock();
}

namespace {

struct LiveBackends {
  std::mutex mutex;
  std::vector<std::pair<std::string, std::weak_ptr<BackendState>>> made; // oldest first
};

LiveBackends& live_backends() {
  static auto* l = new LiveBackends(); // never destroyed: used until the process ends
  return *l;
}

} // namespace

void register_backend(const std::shared_ptr<BackendState>& s) {
  LiveBackends& l = live_backends();
  const std::lock_guard lock(l.mutex);
  std::erase_if(l.made, [](const auto& e) { return e.second.expired(); });
  l.made.emplace_back(s->backend.name(), s);
}

std::shared_ptr<BackendState> live_backend(const std::string& name, uintptr_t token) {
  LiveBackends& l = live_backends();
  const std::lock_guard lock(l.mutex);
  for (auto it = l.made.rbegin(); it != l.made.rend(); ++it)
    if (it->first == name)
      if (auto s = it->second.lock();
          s && (token == 0 || reinterpret_cast<uintptr_t>(s.get()) == token))
        return s;
  return nullptr;
}

std::vector<std::shared_ptr<BackendState>>& thread_backends() {
  thread_local std::vector<std::shared_ptr<BackendState>> stack;
  return stack;
}

namespace {

std::shared_ptr<BackendState> make_backend(const std::optional<std::string>& request) {
  // The first Backend loads and probes every plugin: without the GIL.
  auto s = without_gil(
      [&] { return std::make_shared<BackendState>(request ? Backend(*request) : Backend()); });
  register_backend(s);
  return s;
}

std::string repr(const PyBackend& b) {
  const Backend& be = b.state->backend;
  return "<parenchyma.Backend '" + be.name() + "' framework='" + be.framework().name() +
         "' device='" + be.device().name + "' (" + to_string(be.device().kind) + ")>";
}

} // namespace

void bind_backend(py::module_& m) {
  py::class_<PyBackend>(m, "Backend", R"(A framework and device with its own queue (a stream).

Backend() picks the default: PARENCHYMA_BACKEND, then the configuration, then the ranking: device
kind first (GPU, then accelerator, then CPU), then the framework order for that kind (GPUs: cuda,
then opencl; CPUs: native, then opencl). Backend(request) asks for one explicitly:
"native", "opencl", "opencl:1", "cuda:0", or a list such as "cuda,opencl,native" (the first
available). Raises parenchyma.Error (code 'unavailable') when the request cannot be met.

A backend is safe to share between Python threads: its calls are serialised (ops release the
GIL while they run, and take the backend's lock instead).)")
      .def(py::init(
               [](std::optional<std::string> request) { return PyBackend{make_backend(request)}; }),
           py::arg("request") = py::none(),
           "Selects a backend: the default one, or the one `request` names (see the class doc).")
      .def_property_readonly(
          "name", [](const PyBackend& b) { return b.state->backend.name(); },
          "The backend's name, e.g. 'opencl:0' (framework:device index).")
      .def_property_readonly(
          "framework", [](const PyBackend& b) { return b.state->backend.framework().name(); },
          "The framework's name: 'native', 'opencl' or 'cuda'.")
      .def_property_readonly(
          "device", [](const PyBackend& b) { return b.state->backend.device().name; },
          "The device's name as its framework reports it.")
      .def_property_readonly(
          "device_kind",
          [](const PyBackend& b) { return std::string(to_string(b.state->backend.device().kind)); },
          "The device's kind: 'cpu', 'gpu', 'accelerator' or 'other'.")
      .def_property_readonly(
          "selection_reason",
          [](const PyBackend& b) { return b.state->backend.selection().reason; },
          "Why this backend was selected, e.g. 'PARENCHYMA_BACKEND=opencl: first available entry'.")
      .def(
          "dlpack_device",
          [](const PyBackend& b) {
            const DLDevice d = parenchyma::dlpack_device(b.state->backend);
            return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
          },
          "The DLPack device (device_type, device_id) this backend's tensors export as: (1, 0) "
          "kDLCPU for native and OpenCL devices sharing host memory, (2, ordinal) kDLCUDA for "
          "CUDA. Raises parenchyma.Error ('unsupported') for an OpenCL device whose memory is not "
          "host memory.")
      .def(
          "synchronize",
          [](const PyBackend& b) {
            const std::shared_ptr<BackendState> s = b.state;
            without_gil([&] {
              const OrderedLock lock({&s->mutex});
              s->backend.synchronize();
            });
          },
          "Waits for all work enqueued on this backend (releases the GIL meanwhile).")
      .def("__repr__", &repr,
           "<parenchyma.Backend 'name' framework='...' device='...' (kind)>: the backend's name, "
           "framework, device and the device's kind.")
      .def(
          "__str__",
          [](const PyBackend& b) {
            const Backend& be = b.state->backend;
            return be.name() + " (" + be.device().name + ", " + to_string(be.device().kind) + ")";
          },
          "The backend's name, then its device and the device's kind: 'opencl:0 (pthread-..., "
          "cpu)'.")
      .def(
          "__enter__",
          [](const py::object& self) {
            thread_backends().push_back(self.cast<const PyBackend&>().state);
            return self;
          },
          "`with backend:` makes this backend the default of this thread (for the array "
          "operations on host tensors and the creation functions: parenchyma.asarray, "
          "array_api.zeros, ...) until the block ends; blocks nest, and each thread has its own.")
      .def(
          "__exit__",
          [](const PyBackend& b, const py::args&) {
            auto& stack = thread_backends();
            // The innermost entry of this backend (the last pushed, unless blocks were exited
            // out of order by hand).
            for (auto it = stack.rbegin(); it != stack.rend(); ++it)
              if (*it == b.state) {
                stack.erase(std::next(it).base());
                break;
              }
            return false; // an exception in the block propagates
          },
          "Ends a `with backend:` block: the thread's previous default comes back (also when the "
          "block raised, whose exception propagates).")
      .def(
          "__reduce__",
          [](const PyBackend& b) {
            return py::make_tuple(py::type::of<PyBackend>(),
                                  py::make_tuple(b.state->backend.name()));
          },
          "Pickles the backend as its request string (Backend.name, e.g. 'opencl:0'): unpickling "
          "calls Backend(name), a new backend (its own queue) on that device.")
      .def(
          "__eq__",
          [](const PyBackend& a, const py::object& o) {
            return py::isinstance<PyBackend>(o) &&
                   a.state->backend == o.cast<const PyBackend&>().state->backend;
          },
          py::is_operator())
      .def("__hash__",
           [](const PyBackend& b) { return std::hash<const void*>{}(&b.state->backend.impl()); });
}

} // namespace parenchyma::python
