// parenchyma Python bindings: what the op modules (parenchyma.blas, parenchyma.nn) share — an
// operand (a Tensor, or a DLPack producer imported for the call) and running an op with the GIL
// released and the backend's and operands' locks held.
#pragma once

#include "bindings.hpp"

#include <parenchyma/registry.hpp>

#include <initializer_list>
#include <mutex>
#include <vector>

namespace parenchyma::python {

// One tensor argument: a parenchyma.Tensor (held: the Python object's own state) or a DLPack
// producer imported for the call (temporary). A temporary of host memory sees only its host
// copy, so results are brought there after the op; one of CUDA memory is the op's own slot.
struct Operand {
  PyTensor* held = nullptr;
  PyTensor tensor;
  bool host_import = true;
  bool copied = false; // `tensor` is a dense copy of the held view: written back after the op
  bool temporary() const noexcept { return held == nullptr; }
  TensorStorage& storage() const noexcept { return *tensor.storage; }
};

// `b`: the op's backend, which a producer's CUDA memory is imported into.
inline Operand operand(const PyBackend& b, const py::object& obj, const char* op,
                       const char* name) {
  Operand o;
  if (py::isinstance<PyTensor>(obj)) {
    o.held = &obj.cast<PyTensor&>();
    o.tensor = dense(*o.held); // an array expression runs; a view of part of a tensor: a copy
    o.copied = o.held->array != nullptr;
    return o;
  }
  if (py::hasattr(obj, "__dlpack_device__")) {
    const auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int, int>>();
    o.host_import = dev.first == kDLCPU || dev.first == kDLCUDAHost;
  }
  // Device memory goes to the op's backend when that is a CUDA backend (its stream is the one
  // the producer orders its work before); else to "cuda:<id>" of the producer's device.
  const bool cuda_backend = b.state->backend.framework().name() == "cuda";
  o.tensor = import_dlpack(obj, !o.host_import && cuda_backend ? b.state : nullptr, {}, op, name);
  return o;
}

// Runs `f` on the backend with the GIL released and the backend's and tensors' locks held, then
// records the backend on each Tensor argument.
template <class F>
void run(const PyBackend& b, std::initializer_list<const Operand*> operands, F&& f) {
  const std::shared_ptr<BackendState> s = b.state;
  std::vector<std::mutex*> locks{&s->mutex};
  for (const Operand* o : operands)
    locks.push_back(o->tensor.mutex.get());
  without_gil([&] {
    const OrderedLock lock(std::move(locks));
    // Array expressions still to run that read an operand run first: the op may write it.
    for (const Operand* o : operands)
      flush_array_readers(s->backend, o->storage());
    f(s->backend);
    for (const Operand* o : operands)
      if (o->temporary() && o->host_import && o->storage().initialized())
        (void)o->storage().host_read();
  });
  for (const Operand* o : operands) {
    if (o->copied) write_back(*o->held, o->tensor);
    else if (!o->temporary()) o->held->backend = s;
  }
}

} // namespace parenchyma::python
