// parenchyma Python bindings: the module _parenchyma, which parenchyma/__init__.py re-exports.
#include "bindings.hpp"

PYBIND11_MODULE(_parenchyma, m) {
  namespace pp = parenchyma::python;
  namespace py = pybind11;
  m.doc() = "parenchyma: one runtime over CUDA, OpenCL and the host CPU, chosen at run time "
            "(the compiled part of the `parenchyma` package; import `parenchyma` instead).";
  m.attr("__version__") = PARENCHYMA_PYTHON_VERSION;
  // The newest DLPack this build speaks (parenchyma/dlpack_abi.h); 0.x capsules are spoken too.
  m.attr("DLPACK_VERSION") = py::make_tuple(DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  pp::bind_errors(m);
  pp::bind_backend(m);
  pp::bind_tensor(m);
  pp::bind_blas(m);
  pp::bind_nn(m);
  pp::bind_info(m);
  pp::bind_array(m);
  pp::bind_coll(m);
  pp::install_exit_guard();
}
