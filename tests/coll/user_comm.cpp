// A communicator of the program's own: the program starts MPI itself (so the bundle must not
// finalise it), splits MPI_COMM_WORLD with the ranks reversed, and hands the MPI_Comm to
// Communicator::from_mpi. The ranks must be the reversed ones, and an all_reduce and a broadcast
// on it must give what a float64 reference says. Exit 0 on every rank = pass.
#include <parenchyma/coll.hpp>
#include <parenchyma/parenchyma.hpp>

#include <mpi.h>

#include <cstdio>
#include <exception>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int wrank = 0, wsize = 1, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_Comm reversed = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - 1 - wrank, &reversed);
  try {
    namespace pa = parenchyma;
    pa::Backend b("native");
    const auto comm = pa::coll::Communicator::from_mpi(b, reversed);
    if (comm.rank() != wsize - 1 - wrank || comm.size() != wsize) {
      std::fprintf(stderr, "[world rank %d] FAIL: rank %d of %d, expected %d of %d\n", wrank,
                   comm.rank(), comm.size(), wsize - 1 - wrank, wsize);
      ++failures;
    }
    // x = 1000 * rank + i; the sum over ranks is 1000 * size (size - 1) / 2 + size * i.
    pa::SharedTensor<double> x({5});
    auto w = x.write_only();
    for (int i = 0; i < 5; ++i)
      w[static_cast<size_t>(i)] = 1000.0 * comm.rank() + i;
    comm.all_reduce(x);
    const auto r = x.read();
    for (int i = 0; i < 5; ++i) {
      const double want = 1000.0 * wsize * (wsize - 1) / 2 + static_cast<double>(wsize) * i;
      if (r[static_cast<size_t>(i)] != want) {
        std::fprintf(stderr, "[world rank %d] FAIL: all_reduce element %d is %g, expected %g\n",
                     wrank, i, r[static_cast<size_t>(i)], want);
        ++failures;
      }
    }
    // Root 0 of the reversed communicator is the last world rank.
    pa::SharedTensor<int32_t> y({3});
    if (comm.rank() == 0)
      for (auto& v : y.write_only())
        v = 100 + wrank;
    comm.broadcast(y, 0);
    for (int32_t v : y.read())
      if (v != 100 + wsize - 1) {
        std::fprintf(stderr, "[world rank %d] FAIL: broadcast gave %d, expected %d\n", wrank, v,
                     100 + wsize - 1);
        ++failures;
      }
    // The program's own traffic on the same communicator does not mix with the bundle's.
    int token = wrank, sum = 0;
    MPI_Allreduce(&token, &sum, 1, MPI_INT, MPI_SUM, reversed);
    if (sum != wsize * (wsize - 1) / 2) ++failures;
    comm.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[world rank %d] FAIL: %s\n", wrank, e.what());
    ++failures;
  }
  MPI_Comm_free(&reversed);
  MPI_Finalize(); // the program's: it started MPI
  if (failures == 0) std::printf("[world rank %d] user communicator: passed\n", wrank);
  return failures == 0 ? 0 : 1;
}
