// parenchyma Python bindings: parenchyma.blas, the BLAS front-end (parenchyma/blas.hpp) over
// Tensors or any DLPack producer, with the GIL released while an op runs.
#include "bindings.hpp"
#include "ops.hpp"

#include <parenchyma/blas.hpp>

namespace parenchyma::python {

namespace {

double host_value(const TensorStorage& r) {
  const void* p = r.host_read();
  return r.dtype() == PCY_DTYPE_F64 ? *static_cast<const double*>(p)
                                    : static_cast<double>(*static_cast<const float*>(p));
}

// A reduction to a host float: a one-element result tensor of x's dtype, read after the op.
template <class F>
double reduce(const PyBackend& b, std::initializer_list<const Operand*> operands,
              const TensorStorage& x, F&& f) {
  double out = 0;
  run(b, operands, [&](const Backend& be) {
    TensorStorage r(x.dtype(), {1});
    f(be, r);
    out = host_value(r);
  });
  return out;
}

blas::transpose tr(bool t) noexcept { return t ? blas::trans : blas::no_trans; }

} // namespace

void bind_blas(py::module_& parent) {
  py::module_ m = parent.def_submodule("blas", R"(BLAS on parenchyma backends (parenchyma/blas.hpp).

Every op takes the backend first, then its operands: parenchyma.Tensor objects, or any DLPack
producer (a NumPy array, ...) imported for the call without a copy (results written to such an
operand land in its memory). float32 and float64; matrices are row-major 2-d tensors. Every
argument is checked before anything runs: a bad one raises parenchyma.Error (code
'invalid_argument', origin 'blas.<op>') naming it. The GIL is released while an op runs.)");

  m.def(
      "asum",
      [](const PyBackend& b, const py::object& x) {
        const Operand ox = operand(b, x, "blas.asum", "x");
        return reduce(b, {&ox}, ox.storage(), [&](const Backend& be, TensorStorage& r) {
          blas::asum(be, ox.storage(), r);
        });
      },
      py::arg("backend"), py::arg("x"), "sum(|x_i|), as a Python float (waits for the result).");
  m.def(
      "nrm2",
      [](const PyBackend& b, const py::object& x) {
        const Operand ox = operand(b, x, "blas.nrm2", "x");
        return reduce(b, {&ox}, ox.storage(), [&](const Backend& be, TensorStorage& r) {
          blas::nrm2(be, ox.storage(), r);
        });
      },
      py::arg("backend"), py::arg("x"),
      "sqrt(sum(x_i^2)), as a Python float (waits for the result).");
  m.def(
      "dot",
      [](const PyBackend& b, const py::object& x, const py::object& y) {
        const Operand ox = operand(b, x, "blas.dot", "x"), oy = operand(b, y, "blas.dot", "y");
        return reduce(b, {&ox, &oy}, ox.storage(), [&](const Backend& be, TensorStorage& r) {
          blas::dot(be, ox.storage(), oy.storage(), r);
        });
      },
      py::arg("backend"), py::arg("x"), py::arg("y"),
      "x . y over all elements (same size), as a Python float (waits for the result).");
  m.def(
      "axpy",
      [](const PyBackend& b, double alpha, const py::object& x, const py::object& y) {
        const Operand ox = operand(b, x, "blas.axpy", "x"), oy = operand(b, y, "blas.axpy", "y");
        run(b, {&ox, &oy},
            [&](const Backend& be) { blas::axpy(be, alpha, ox.storage(), oy.storage()); });
        return y;
      },
      py::arg("backend"), py::arg("alpha"), py::arg("x"), py::arg("y"),
      "y = alpha * x + y (same size). Returns y.");
  m.def(
      "axpby",
      [](const PyBackend& b, double alpha, const py::object& x, double beta, const py::object& y) {
        const Operand ox = operand(b, x, "blas.axpby", "x"), oy = operand(b, y, "blas.axpby", "y");
        run(b, {&ox, &oy},
            [&](const Backend& be) { blas::axpby(be, alpha, ox.storage(), beta, oy.storage()); });
        return y;
      },
      py::arg("backend"), py::arg("alpha"), py::arg("x"), py::arg("beta"), py::arg("y"),
      "y = alpha * x + beta * y (same size; beta == 0 never reads y). Returns y.");
  m.def(
      "copy",
      [](const PyBackend& b, const py::object& x, const py::object& y) {
        const Operand ox = operand(b, x, "blas.copy", "x"), oy = operand(b, y, "blas.copy", "y");
        run(b, {&ox, &oy}, [&](const Backend& be) { blas::copy(be, ox.storage(), oy.storage()); });
        return y;
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), "y = x (same size). Returns y.");
  m.def(
      "scal",
      [](const PyBackend& b, double alpha, const py::object& x) {
        const Operand ox = operand(b, x, "blas.scal", "x");
        run(b, {&ox}, [&](const Backend& be) { blas::scal(be, alpha, ox.storage()); });
        return x;
      },
      py::arg("backend"), py::arg("alpha"), py::arg("x"), "x = alpha * x. Returns x.");
  m.def(
      "swap",
      [](const PyBackend& b, const py::object& x, const py::object& y) {
        const Operand ox = operand(b, x, "blas.swap", "x"), oy = operand(b, y, "blas.swap", "y");
        run(b, {&ox, &oy}, [&](const Backend& be) { blas::swap(be, ox.storage(), oy.storage()); });
      },
      py::arg("backend"), py::arg("x"), py::arg("y"), "Exchanges x and y (same size).");
  m.def(
      "gemv",
      [](const PyBackend& b, const py::object& a, const py::object& x, const py::object& y,
         double alpha, double beta, bool trans) {
        const Operand oa = operand(b, a, "blas.gemv", "A"), ox = operand(b, x, "blas.gemv", "x"),
                      oy = operand(b, y, "blas.gemv", "y");
        run(b, {&oa, &ox, &oy}, [&](const Backend& be) {
          blas::gemv(be, tr(trans), alpha, oa.storage(), ox.storage(), beta, oy.storage());
        });
        return y;
      },
      py::arg("backend"), py::arg("a"), py::arg("x"), py::arg("y"), py::arg("alpha") = 1.0,
      py::arg("beta") = 0.0, py::arg("trans") = false,
      "y = alpha * op(A) x + beta * y, A an m x n row-major matrix, op(A) = A.T when trans. "
      "beta == 0 never reads y. Returns y.");
  m.def(
      "gemm",
      [](const PyBackend& b, const py::object& a, const py::object& bm, const py::object& c,
         double alpha, double beta, bool trans_a, bool trans_b) {
        const Operand oa = operand(b, a, "blas.gemm", "A"), ob = operand(b, bm, "blas.gemm", "B"),
                      oc = operand(b, c, "blas.gemm", "C");
        run(b, {&oa, &ob, &oc}, [&](const Backend& be) {
          blas::gemm(be, tr(trans_a), tr(trans_b), alpha, oa.storage(), ob.storage(), beta,
                     oc.storage());
        });
        return c;
      },
      py::arg("backend"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha") = 1.0,
      py::arg("beta") = 0.0, py::arg("trans_a") = false, py::arg("trans_b") = false,
      "C = alpha * op(A) op(B) + beta * C for row-major 2-d tensors: C is m x n, op(A) m x k, "
      "op(B) k x n (op(X) = X.T when trans_x). beta == 0 never reads C. Returns c.");
  m.def(
      "gemm_batched",
      [](const PyBackend& b, const py::object& a, const py::object& bm, const py::object& c,
         double alpha, double beta, bool trans_a, bool trans_b) {
        const Operand oa = operand(b, a, "blas.gemm_batched", "A"),
                      ob = operand(b, bm, "blas.gemm_batched", "B"),
                      oc = operand(b, c, "blas.gemm_batched", "C");
        run(b, {&oa, &ob, &oc}, [&](const Backend& be) {
          blas::gemm_batched(be, tr(trans_a), tr(trans_b), alpha, oa.storage(), ob.storage(), beta,
                             oc.storage());
        });
        return c;
      },
      py::arg("backend"), py::arg("a"), py::arg("b"), py::arg("c"), py::arg("alpha") = 1.0,
      py::arg("beta") = 0.0, py::arg("trans_a") = false, py::arg("trans_b") = false,
      "C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i] for every i of the batch: C is "
      "[..., m, n] (the batch is the product of its leading extents), A [..., m, k] and B "
      "[..., k, n] (op(X) = X.T when trans_x: the last two extents swapped), each with as many "
      "matrices as C or exactly one (a 2-d A or B: the same matrix for every product). "
      "beta == 0 never reads C. Returns c.");
}

} // namespace parenchyma::python
