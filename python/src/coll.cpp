// parenchyma Python bindings: parenchyma.coll, the collectives front-end (parenchyma/coll.hpp)
// over Tensors or any DLPack producer, with the GIL released while an op runs. An mpi4py
// communicator is taken by its handle (asked of mpi4py at run time: the package does not depend
// on mpi4py, at build time or otherwise).
#include "bindings.hpp"
#include "ops.hpp"

#include <parenchyma/coll.hpp>

#include <limits>
#include <memory>
#include <string>

namespace parenchyma::python {

namespace {

// A Communicator and the backend it was made for (kept alive with it).
struct PyCommunicator {
  PyBackend backend;
  std::unique_ptr<coll::Communicator> comm;
};

coll::reduce_op reduce_of(const py::object& v, const std::string& origin) {
  if (!py::isinstance<py::str>(v))
    fail_type(origin, "argument op: expected str ('sum', 'prod', 'min', 'max' or 'avg'), got " +
                          std::string(py::str(py::type::of(v).attr("__name__"))));
  const auto s = v.cast<std::string>();
  if (s == "sum") return coll::reduce_op::sum;
  if (s == "prod") return coll::reduce_op::prod;
  if (s == "min") return coll::reduce_op::min;
  if (s == "max") return coll::reduce_op::max;
  if (s == "avg") return coll::reduce_op::avg;
  fail(errc::invalid_argument, origin,
       "argument op: '" + s + "', expected 'sum', 'prod', 'min', 'max' or 'avg'");
}

// The MPI_Comm handle of an mpi4py communicator, as an integer (mpi4py's MPI._handleof: the
// pointer in Open MPI, the int in MPICH). mpi4py is imported only here, when one is passed.
int64_t handle_of(const py::object& comm) {
  constexpr const char* origin = "coll.Communicator";
  const auto type_name = [&] { return std::string(py::str(py::type::of(comm).attr("__name__"))); };
  // Only an mpi4py object makes mpi4py worth importing (its import starts MPI).
  const auto module = std::string(py::str(py::type::of(comm).attr("__module__")));
  if (module.rfind("mpi4py", 0) != 0)
    fail_type(origin, "argument comm: expected None (MPI_COMM_WORLD) or an mpi4py.MPI.Comm, got " +
                          type_name());
  py::module_ mpi;
  try {
    mpi = py::module_::import("mpi4py.MPI");
  } catch (py::error_already_set&) {
    fail_type(origin, "argument comm: expected None (MPI_COMM_WORLD) or an mpi4py.MPI.Comm, got " +
                          type_name() + " (and mpi4py cannot be imported)");
  }
  if (!py::isinstance(comm, mpi.attr("Comm")))
    fail_type(origin, "argument comm: expected None (MPI_COMM_WORLD) or an mpi4py.MPI.Comm, got " +
                          type_name());
  if (comm.equal(mpi.attr("COMM_NULL")))
    fail(errc::invalid_argument, origin,
         "argument comm: MPI.COMM_NULL; pass a valid communicator (this rank may not be in it)");
  if (!py::isinstance(comm, mpi.attr("Intracomm")))
    fail(errc::invalid_argument, origin,
         "argument comm: an intercommunicator; the coll ops need an intracommunicator");
  // An integer of at most 8 bytes (a pointer or an int); its bytes are the MPI_Comm's.
  const py::object h = mpi.attr("_handleof")(comm);
  const auto wide = h.cast<py::int_>();
  const auto v = static_cast<unsigned long long>(PyLong_AsUnsignedLongLongMask(wide.ptr()));
  return static_cast<int64_t>(v);
}

// Runs one op of the communicator as every op module does (ops.hpp's run: the GIL released, the
// backend's and the operands' locks held); the front-end checks the arguments (origin coll.<op>).
template <class F>
void run_op(const PyCommunicator& c, std::initializer_list<const Operand*> operands, F&& f) {
  run(c.backend, operands, [&](const Backend&) { f(*c.comm); });
}

} // namespace

void bind_coll(py::module_& parent) {
  py::module_ m = parent.def_submodule(
      "coll", R"(Collectives between the processes of an MPI job (parenchyma/coll.hpp).

A Communicator groups the ranks of an MPI communicator (MPI_COMM_WORLD, or an mpi4py one) on a
backend. Its ops take parenchyma.Tensor objects or any DLPack producer imported for the call
without a copy (results written to such an operand land in its memory). Every argument is
checked on this rank before anything moves: a bad one raises parenchyma.Error (code
'invalid_argument', origin 'coll.<op>') naming it. The GIL is released while an op runs; an op
returns once the exchange is complete. Semantics: docs/distributed.md.)");

  py::class_<PyCommunicator>(m, "Communicator", R"(A group of ranks that run collectives together,
on one backend. Making one is collective: every rank of the MPI communicator constructs it.
comm: None for MPI_COMM_WORLD (MPI is started if the program has not, and finalised at exit),
or an mpi4py.MPI.Comm (an intracommunicator), passed by its handle. The communicator is
duplicated, so its messages never mix with the program's own; it lives until the process ends.
Tensors: float16, bfloat16, float32, float64, int32, int64; only element counts matter. op:
'sum', 'prod', 'min', 'max' or 'avg' (float16/bfloat16 reduce through float32).)")
      .def(py::init([](const PyBackend& b, const py::object& comm) {
             const bool world = comm.is_none();
             const int64_t handle = world ? 0 : handle_of(comm);
             auto c = std::make_unique<PyCommunicator>();
             c->backend = b;
             without_gil([&] {
               const OrderedLock lock({&b.state->mutex});
               c->comm = std::make_unique<coll::Communicator>(
                   world ? coll::Communicator(b.state->backend)
                         : coll::Communicator::from_mpi(b.state->backend, handle));
             });
             return c;
           }),
           py::arg("backend"), py::arg("comm") = py::none(),
           "Joins the ranks of `comm` (None: MPI_COMM_WORLD) on `backend` (collective: every "
           "rank calls it). Raises parenchyma.Error when no coll bundle serves the backend "
           "(the native one needs MPI) or MPI fails.")
      .def_property_readonly(
          "rank", [](const PyCommunicator& c) { return c.comm->rank(); },
          "This process's rank in the communicator, 0 .. size - 1.")
      .def_property_readonly(
          "size", [](const PyCommunicator& c) { return c.comm->size(); }, "The number of ranks.")
      .def_property_readonly(
          "local_rank", [](const PyCommunicator& c) { return c.comm->local_rank(); },
          "The rank among the ranks on this host (the device index to use).")
      .def_property_readonly(
          "local_size", [](const PyCommunicator& c) { return c.comm->local_size(); },
          "The number of ranks on this host.")
      .def_property_readonly(
          "backend", [](const PyCommunicator& c) { return c.backend; }, "The backend it runs on.")
      .def(
          "__repr__",
          [](const PyCommunicator& c) {
            return "<parenchyma.coll.Communicator rank=" + std::to_string(c.comm->rank()) +
                   " size=" + std::to_string(c.comm->size()) +
                   " local_rank=" + std::to_string(c.comm->local_rank()) +
                   " local_size=" + std::to_string(c.comm->local_size()) + " backend='" +
                   c.backend.state->backend.name() + "'>";
          },
          "The rank, size, local rank and size and the backend's name.")
      .def(
          "all_reduce",
          [](const PyCommunicator& c, const py::object& x, const py::object& y,
             const py::object& op) {
            const coll::reduce_op r = reduce_of(op, "coll.all_reduce");
            const Operand ox = operand(c.backend, x, "coll.all_reduce", "x");
            if (y.is_none()) {
              run_op(c, {&ox}, [&](const coll::Communicator& k) { k.all_reduce(ox.storage(), r); });
              return x;
            }
            const Operand oy = operand(c.backend, y, "coll.all_reduce", "y");
            run_op(c, {&ox, &oy}, [&](const coll::Communicator& k) {
              k.all_reduce(ox.storage(), oy.storage(), r);
            });
            return y;
          },
          py::arg("x"), py::arg("y") = py::none(), py::arg("op") = "sum",
          "y = op over the ranks of x, on every rank (y: x's element count); without y, x in "
          "place. Returns the result (y, or x).")
      .def(
          "broadcast",
          [](const PyCommunicator& c, const py::object& x, const py::object& root_arg) {
            const int root = static_cast<int>(int_arg(root_arg, "coll.broadcast", "root",
                                                      std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
            const Operand ox = operand(c.backend, x, "coll.broadcast", "x");
            run_op(c, {&ox}, [&](const coll::Communicator& k) { k.broadcast(ox.storage(), root); });
            return x;
          },
          py::arg("x"), py::arg("root") = 0,
          "x = root's x, on every rank (read on root only; the same element count everywhere). "
          "Returns x.")
      .def(
          "reduce",
          [](const PyCommunicator& c, const py::object& x, const py::object& y,
             const py::object& op, const py::object& root_arg) {
            const coll::reduce_op r = reduce_of(op, "coll.reduce");
            const int root = static_cast<int>(int_arg(root_arg, "coll.reduce", "root",
                                                      std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
            const Operand ox = operand(c.backend, x, "coll.reduce", "x");
            if (y.is_none()) {
              run_op(c, {&ox},
                     [&](const coll::Communicator& k) { k.reduce(ox.storage(), r, root); });
              return x;
            }
            const Operand oy = operand(c.backend, y, "coll.reduce", "y");
            run_op(c, {&ox, &oy}, [&](const coll::Communicator& k) {
              k.reduce(ox.storage(), oy.storage(), r, root);
            });
            return y;
          },
          py::arg("x"), py::arg("y") = py::none(), py::arg("op") = "sum", py::arg("root") = 0,
          "root's y = op over the ranks of x (y: x's element count on every rank; left as it is "
          "on the other ranks); without y, root's x in place (x unchanged elsewhere). Returns y "
          "(or x).")
      .def(
          "all_gather",
          [](const PyCommunicator& c, const py::object& x, const py::object& y) {
            const Operand ox = operand(c.backend, x, "coll.all_gather", "x");
            if (y.is_none()) {
              run_op(c, {&ox}, [&](const coll::Communicator& k) { k.all_gather(ox.storage()); });
              return x;
            }
            const Operand oy = operand(c.backend, y, "coll.all_gather", "y");
            run_op(c, {&ox, &oy},
                   [&](const coll::Communicator& k) { k.all_gather(ox.storage(), oy.storage()); });
            return y;
          },
          py::arg("x"), py::arg("y") = py::none(),
          "y = every rank's x, in rank order (y: size times x's element count). Without y, in "
          "place: x holds size equal blocks and this rank's input is its block `rank`. Returns "
          "the result (y, or x).")
      .def(
          "reduce_scatter",
          [](const PyCommunicator& c, const py::object& x, const py::object& y,
             const py::object& op) {
            const coll::reduce_op r = reduce_of(op, "coll.reduce_scatter");
            const Operand ox = operand(c.backend, x, "coll.reduce_scatter", "x");
            if (y.is_none()) {
              run_op(c, {&ox},
                     [&](const coll::Communicator& k) { k.reduce_scatter(ox.storage(), r); });
              return x;
            }
            const Operand oy = operand(c.backend, y, "coll.reduce_scatter", "y");
            run_op(c, {&ox, &oy}, [&](const coll::Communicator& k) {
              k.reduce_scatter(ox.storage(), oy.storage(), r);
            });
            return y;
          },
          py::arg("x"), py::arg("y") = py::none(), py::arg("op") = "sum",
          "y = block `rank` of op over the ranks of x (x: size times y's element count). Without "
          "y, in place: block `rank` of x becomes the result and x's other blocks are left "
          "unspecified. Returns y (or x).")
      .def(
          "all_to_all",
          [](const PyCommunicator& c, const py::object& x, const py::object& y) {
            const Operand ox = operand(c.backend, x, "coll.all_to_all", "x"),
                          oy = operand(c.backend, y, "coll.all_to_all", "y");
            run_op(c, {&ox, &oy},
                   [&](const coll::Communicator& k) { k.all_to_all(ox.storage(), oy.storage()); });
            return y;
          },
          py::arg("x"), py::arg("y"),
          "Block j of y = block `rank` of rank j's x (x and y: the same element count, a "
          "multiple of size). Returns y.")
      .def(
          "send",
          [](const PyCommunicator& c, const py::object& x, const py::object& peer_arg,
             const py::object& tag_arg) {
            const int peer = static_cast<int>(int_arg(peer_arg, "coll.send", "peer",
                                                      std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
            const int tag = static_cast<int>(int_arg(tag_arg, "coll.send", "tag",
                                                     std::numeric_limits<int>::min(),
                                                     std::numeric_limits<int>::max()));
            const Operand ox = operand(c.backend, x, "coll.send", "x");
            run_op(c, {&ox}, [&](const coll::Communicator& k) { k.send(ox.storage(), peer, tag); });
          },
          py::arg("x"), py::arg("peer"), py::arg("tag") = 0,
          "Sends x to rank `peer` (tag 0 .. 32767); returns once the peer took it (as MPI_Send "
          "may: pair sends and receives so that no two ranks both send first).")
      .def(
          "recv",
          [](const PyCommunicator& c, const py::object& y, const py::object& peer_arg,
             const py::object& tag_arg) {
            const int peer = static_cast<int>(int_arg(peer_arg, "coll.recv", "peer",
                                                      std::numeric_limits<int>::min(),
                                                      std::numeric_limits<int>::max()));
            const int tag = static_cast<int>(int_arg(tag_arg, "coll.recv", "tag",
                                                     std::numeric_limits<int>::min(),
                                                     std::numeric_limits<int>::max()));
            const Operand oy = operand(c.backend, y, "coll.recv", "y");
            run_op(c, {&oy}, [&](const coll::Communicator& k) { k.recv(oy.storage(), peer, tag); });
            return y;
          },
          py::arg("y"), py::arg("peer"), py::arg("tag") = 0,
          "y = the x rank `peer` sent with this tag (y: the sender's dtype and element count). "
          "Returns y.")
      .def(
          "barrier",
          [](const PyCommunicator& c) {
            run_op(c, {}, [&](const coll::Communicator& k) { k.barrier(); });
          },
          "Returns once every rank has called it.");
}

} // namespace parenchyma::python
