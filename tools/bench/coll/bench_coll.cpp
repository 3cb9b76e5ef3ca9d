// all_reduce through parenchyma (coll::Communicator on the native backend, in place, f32 sum)
// against MPI_Allreduce(MPI_IN_PLACE) called directly on a host buffer, 8 B to 64 MiB, the two
// interleaved sample by sample in one MPI job, with MPI_Iallreduce + MPI_Wait (what the bundle
// builds on, minus its polling) as a third column. Every rank runs the same fixed schedule (no
// adaptive repetition counts: ranks must call the same collectives); rank 0 prints the medians and
// the ratio parenchyma / MPI.
//   mpirun -np 2 build/bin/bench_coll            (PARENCHYMA_COLL_CHECK=0: without the check)
#include <parenchyma/coll.hpp>
#include <parenchyma/parenchyma.hpp>

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F> double time_us(F&& f, int inner) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < inner; ++i)
    f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
         inner;
}

} // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  {
    namespace pa = parenchyma;
    pa::Backend b("native");
    pa::coll::Communicator comm(b);
    const char* check = std::getenv("PARENCHYMA_COLL_CHECK");
    if (rank == 0)
      std::printf("all_reduce f32 sum in place, %d ranks, cross-rank check %s\n"
                  "%10s %12s %12s %12s %8s %10s\n",
                  size, check != nullptr && check[0] == '0' ? "off" : "on", "bytes", "MPI us",
                  "MPI_I* us", "pcy us", "pcy/MPI", "pcy GB/s");
    for (size_t bytes :
         {size_t{8}, size_t{64}, size_t{512}, size_t{4} << 10, size_t{32} << 10, size_t{256} << 10,
          size_t{1} << 20, size_t{4} << 20, size_t{16} << 20, size_t{64} << 20}) {
      const size_t n = bytes / sizeof(float);
      std::vector<float> host(n, 1.0f);
      pa::SharedTensor<float> t({static_cast<int64_t>(n)});
      for (float& v : t.write_only())
        v = 1.0f;
      // Enough calls per sample for about a millisecond at small sizes; a fixed function of the
      // size so every rank agrees.
      const int inner = bytes <= 4096 ? 200 : bytes <= (1 << 20) ? 20 : 2;
      const int reps = bytes <= (8 << 20) ? 15 : 7;
      auto mpi = [&] {
        MPI_Allreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      };
      // What the bundle builds on: the non-blocking MPI_Iallreduce, completed by MPI_Wait.
      auto nonblocking = [&] {
        MPI_Request r;
        MPI_Iallreduce(MPI_IN_PLACE, host.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                       MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      };
      auto ours = [&] { comm.all_reduce(t); };
      mpi();
      nonblocking();
      ours();
      std::vector<double> a, nb, c;
      for (int r = 0; r < reps; ++r) {
        a.push_back(time_us(mpi, inner));
        nb.push_back(time_us(nonblocking, inner));
        c.push_back(time_us(ours, inner));
      }
      const double ma = median(a), mn = median(nb), mc = median(c);
      if (rank == 0)
        std::printf("%10zu %12.2f %12.2f %12.2f %8.2f %10.3f\n", bytes, ma, mn, mc, mc / ma,
                    static_cast<double>(bytes) / mc / 1e3);
    }
  }
  MPI_Finalize();
  return 0;
}
