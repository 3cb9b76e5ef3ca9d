// Thread stress over one framework (argv[1]: native, opencl, cuda or vulkan): the thread rules of
// docs/threads.md under load, every result checked against a double-precision loop.
//   1. N threads, each with its own Backend and tensors, running BLAS ops (dot, axpy, scal,
//      asum, nrm2, gemv, gemm) on fresh random data of awkward sizes;
//   2. threads racing the first use of ops, on one Backend's copies and on their own backends;
//   3. registries constructed and destroyed concurrently, each running an op;
//   4. tensors handed from one thread's backend to another's.
// A framework without devices exits 77 with the reason. PARENCHYMA_STRESS_SCALE scales the
// iteration counts (tools/run-tests sets 0.5 in the sanitizer builds).
#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace parenchyma;
namespace blas = parenchyma::blas;

std::string fw;
std::atomic<int> failures{0};
std::atomic<uint64_t> checks{0};
std::mutex print_mutex;

template <class... A> void fail(const char* fmt, A... a) {
  if (failures.fetch_add(1) < 20) {
    std::lock_guard lock(print_mutex);
    std::printf("FAIL %s: ", fw.c_str());
    std::printf(fmt, a...);
    std::printf("\n");
  }
}

double scale() {
  const char* s = std::getenv("PARENCHYMA_STRESS_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}
int scaled(int n) { return std::max(1, static_cast<int>(n * scale())); }

// Relative closeness with a bound that grows with the number of summed terms.
bool near(double got, double ref, double magnitude, double terms, double eps) {
  return std::fabs(got - ref) <= 16 * eps * (std::sqrt(terms) + 1) * magnitude + 1e-30;
}

template <class T> struct rng_data {
  std::mt19937_64 gen;
  explicit rng_data(uint64_t seed) : gen(seed) {}
  std::vector<T> values(size_t n) {
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<T> v(n);
    for (auto& x : v)
      x = static_cast<T>(u(gen));
    return v;
  }
  int64_t size(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
};

template <class T> void fill(SharedTensor<T>& t, const std::vector<T>& v) {
  std::copy(v.begin(), v.end(), t.write_only().begin());
}

// One round of every op on one backend, each result checked. Returns false on an error throw.
template <class T> void one_round(const Backend& b, rng_data<T>& r, int thread, int iter) {
  const double eps = std::numeric_limits<T>::epsilon();
  const int64_t n = r.size(1, 3000);
  const auto xv = r.values(static_cast<size_t>(n)), yv = r.values(static_cast<size_t>(n));
  SharedTensor<T> x({n}), y({n}), result({1});
  fill(x, xv);
  fill(y, yv);
  const double alpha = std::uniform_real_distribution<double>(-2, 2)(r.gen);

  blas::dot(b, x, y, result);
  double ref = 0, mag = 0;
  for (int64_t i = 0; i < n; ++i) {
    ref += double(xv[i]) * double(yv[i]);
    mag += std::fabs(double(xv[i]) * double(yv[i]));
  }
  ++checks;
  if (!near(result.read()[0], ref, mag, double(n), eps))
    fail("thread %d iter %d: dot n=%lld got %.9g expected %.9g", thread, iter, (long long)n,
         double(result.read()[0]), ref);

  // A burst of reductions with no host read between them: they overlap on the queue, and with
  // other threads' bursts, so shared scratch memory or kernel arguments would mix results.
  {
    std::vector<SharedTensor<T>> sums;
    for (int j = 0; j < 6; ++j)
      sums.emplace_back(std::vector<int64_t>{1});
    for (int j = 0; j < 6; ++j)
      blas::dot(b, x, y, sums[static_cast<size_t>(j)]);
    for (int j = 0; j < 6; ++j) {
      ++checks;
      if (!near(sums[static_cast<size_t>(j)].read()[0], ref, mag, double(n), eps))
        fail("thread %d iter %d: dot burst %d n=%lld got %.9g expected %.9g", thread, iter, j,
             (long long)n, double(sums[static_cast<size_t>(j)].read()[0]), ref);
    }
  }

  blas::asum(b, x, result);
  ref = 0;
  for (int64_t i = 0; i < n; ++i)
    ref += std::fabs(double(xv[i]));
  ++checks;
  if (!near(result.read()[0], ref, ref, double(n), eps))
    fail("thread %d iter %d: asum n=%lld got %.9g expected %.9g", thread, iter, (long long)n,
         double(result.read()[0]), ref);

  blas::axpy(b, alpha, x, y); // y = alpha x + y, on the device
  blas::scal(b, 0.5, y);      // then y *= 0.5
  blas::nrm2(b, y, result);
  const auto got = y.read();
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = 0.5 * (alpha * double(xv[i]) + double(yv[i]));
    ss += want * want;
    ++checks;
    if (!near(got[i], want, std::fabs(alpha * double(xv[i])) + std::fabs(double(yv[i])), 2, eps)) {
      fail("thread %d iter %d: axpy+scal n=%lld element %lld got %.9g expected %.9g", thread, iter,
           (long long)n, (long long)i, double(got[i]), want);
      break;
    }
  }
  ++checks;
  if (!near(result.read()[0], std::sqrt(ss), std::sqrt(ss), double(n), eps))
    fail("thread %d iter %d: nrm2 got %.9g expected %.9g", thread, iter, double(result.read()[0]),
         std::sqrt(ss));

  // A small gemv and gemm of awkward sizes.
  const int64_t m = r.size(1, 70), k = r.size(1, 70), c = r.size(1, 70);
  const auto av = r.values(static_cast<size_t>(m * k)), bv = r.values(static_cast<size_t>(k * c));
  const auto vv = r.values(static_cast<size_t>(k));
  SharedTensor<T> A({m, k}), B({k, c}), C({m, c}), v({k}), w({m});
  fill(A, av);
  fill(B, bv);
  fill(v, vv);
  blas::gemv(b, blas::no_trans, 1.0, A, v, 0.0, w);
  blas::gemm(b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
  const auto wg = w.read();
  for (int64_t i = 0; i < m; ++i) {
    double s = 0, sm = 0;
    for (int64_t j = 0; j < k; ++j) {
      s += double(av[i * k + j]) * double(vv[j]);
      sm += std::fabs(double(av[i * k + j]) * double(vv[j]));
    }
    ++checks;
    if (!near(wg[i], s, sm, double(k), eps)) {
      fail("thread %d iter %d: gemv %lldx%lld row %lld got %.9g expected %.9g", thread, iter,
           (long long)m, (long long)k, (long long)i, double(wg[i]), s);
      break;
    }
  }
  const auto cg = C.read();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < c; ++j) {
      double s = 0, sm = 0;
      for (int64_t l = 0; l < k; ++l) {
        s += double(av[i * k + l]) * double(bv[l * c + j]);
        sm += std::fabs(double(av[i * k + l]) * double(bv[l * c + j]));
      }
      ++checks;
      if (!near(cg[i * c + j], s, sm, double(k), eps)) {
        fail("thread %d iter %d: gemm %lldx%lldx%lld (%lld,%lld) got %.9g expected %.9g", thread,
             iter, (long long)m, (long long)k, (long long)c, (long long)i, (long long)j,
             double(cg[i * c + j]), s);
        return;
      }
    }
}

template <class F> void run_threads(int count, F&& body) {
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t)
    threads.emplace_back([&, t] {
      try {
        body(t);
      } catch (const std::exception& e) {
        fail("thread %d threw: %s", t, e.what());
      }
    });
  for (auto& t : threads)
    t.join();
}

bool f64_ok(const Backend& b) {
  try {
    (void)b.route(blas::detail::dot_key(PCY_DTYPE_F64));
    return true;
  } catch (const error&) {
    return false;
  }
}

// 1. Own backends per thread.
void own_backends(Registry& reg) {
  const int threads = 8, iters = scaled(25);
  run_threads(threads, [&](int t) {
    Backend b(reg, fw);
    rng_data<float> rf(std::random_device{}() + static_cast<uint64_t>(t));
    rng_data<double> rd(std::random_device{}() + 1000 + static_cast<uint64_t>(t));
    const bool dbl = f64_ok(b);
    for (int i = 0; i < iters; ++i) {
      one_round<float>(b, rf, t, i);
      if (dbl && i % 3 == 0) one_round<double>(b, rd, t, i);
    }
  });
}

// 2. Threads racing the first use of ops in a fresh registry: on copies of one Backend (one
//    stream: the threads take turns through a mutex, as the thread rules say) and on backends of
//    their own (no lock at all).
void first_use_race() {
  const int rounds = scaled(4), threads = 6;
  for (int round = 0; round < rounds; ++round) {
    Registry reg;
    Backend shared(reg, fw);
    std::mutex shared_turn;
    std::barrier start(threads);
    run_threads(threads, [&](int t) {
      rng_data<float> r(std::random_device{}() + static_cast<uint64_t>(t));
      Backend own(reg, fw);
      start.arrive_and_wait();
      // Every thread resolves ops at once on its own backend and asks for the routes of the
      // shared one (resolution is lock-free to read once published).
      for (const OpKey* k :
           {&blas::detail::axpy_key(PCY_DTYPE_F32), &blas::detail::dot_key(PCY_DTYPE_F32),
            &blas::detail::gemm_key(PCY_DTYPE_F32), &blas::detail::scal_key(PCY_DTYPE_F32)}) {
        (void)own.route(*k);
        (void)shared.route(*k);
      }
      one_round<float>(own, r, t, round);
      std::lock_guard lock(shared_turn);
      one_round<float>(shared, r, t, round);
    });
  }
}

// 3. Registries made and destroyed by several threads at once.
void concurrent_registries() {
  const int rounds = scaled(3), threads = 4;
  for (int round = 0; round < rounds; ++round) {
    std::barrier start(threads);
    run_threads(threads, [&](int t) {
      start.arrive_and_wait();
      Registry reg;
      Backend b(reg, fw);
      rng_data<float> r(std::random_device{}() + static_cast<uint64_t>(t));
      one_round<float>(b, r, t, round);
    });
  }
}

// 4. A tensor computed on one thread's backend, then used and read by another thread's.
void handoff(Registry& reg) {
  const int pairs = 4, iters = scaled(10);
  run_threads(pairs, [&](int t) {
    Backend producer(reg, fw);
    rng_data<float> r(std::random_device{}() + static_cast<uint64_t>(t));
    for (int i = 0; i < iters; ++i) {
      const int64_t n = r.size(1, 5000);
      const auto xv = r.values(static_cast<size_t>(n));
      auto x = std::make_shared<SharedTensor<float>>(std::vector<int64_t>{n});
      fill(*x, xv);
      blas::scal(producer, 2.0, *x); // enqueued on the producer's queue, not waited for
      std::promise<std::shared_ptr<SharedTensor<float>>> p;
      auto f = p.get_future();
      std::thread consumer([&, n] {
        try {
          auto y = f.get();
          Backend mine(reg, fw);
          blas::scal(mine, 0.25, *y); // waits for the producer's queue first
          const auto got = y->read();
          for (int64_t j = 0; j < n; ++j) {
            ++checks;
            if (got[j] != static_cast<float>(0.5 * xv[j])) {
              fail("handoff %d/%d: element %lld got %.9g expected %.9g", t, i, (long long)j,
                   double(got[j]), 0.5 * xv[j]);
              break;
            }
          }
        } catch (const std::exception& e) {
          fail("handoff consumer threw: %s", e.what());
        }
      });
      p.set_value(std::move(x));
      consumer.join();
      // The producer keeps working on its own queue meanwhile in the next iteration.
    }
  });
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s native|opencl|cuda\n", argv[0]);
    return 2;
  }
  fw = argv[1];
  try {
    Registry reg;
    const Framework* f = reg.find_framework(fw);
    if (f == nullptr || f->devices().empty()) {
      std::printf("skipped: %s is not available here (%s)\n", fw.c_str(),
                  f == nullptr ? "no plugin loaded" : f->reason().c_str());
      return 77;
    }
    try {
      (void)Backend(reg, fw).route(blas::detail::dot_key(PCY_DTYPE_F32));
    } catch (const error& e) {
      std::printf("skipped: no BLAS for %s (%s)\n", fw.c_str(), e.what());
      return 77;
    }
    own_backends(reg);
    std::printf("own backends: %d failures so far\n", failures.load());
    first_use_race();
    std::printf("first-use race: %d failures so far\n", failures.load());
    concurrent_registries();
    std::printf("concurrent registries: %d failures so far\n", failures.load());
    handoff(reg);
  } catch (const std::exception& e) {
    std::printf("FAIL %s: %s\n", fw.c_str(), e.what());
    return 1;
  }
  std::printf("%s: %llu checks, %d failures\n", fw.c_str(),
              static_cast<unsigned long long>(checks.load()), failures.load());
  return failures.load() == 0 ? 0 : 1;
}
