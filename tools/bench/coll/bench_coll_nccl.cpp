// all_reduce on one GPU through the NCCL bundle (coll::Communicator on the cuda backend, one rank,
// in place, f32 sum) against ncclAllReduce called directly on the same stream and buffer, with a
// communicator of the benchmark's own (libnccl.so.2 loaded here with dlopen, as the bundle does),
// interleaved sample by sample in one process:
//   stream  `inner` ops enqueued back to back, then one stream synchronisation; per op. Target:
//           parenchyma at most +1 us per op over the direct call.
//   graph   100 ops recorded into a graph (parenchyma::Graph; the direct side: stream capture of
//           100 ncclAllReduce, cuGraphInstantiate), replayed `inner` times, then one
//           synchronisation; per op. Target: parenchyma at most 0.6 us per op.
//   bench_coll_nccl [--quick]     (one rank; no MPI; JSON coll_nccl.json to $PARENCHYMA_BENCH_OUT)
#include "harness.hpp"

#include <parenchyma/coll.hpp>
#include <parenchyma/graph.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cuda.h>
#include <nccl.h>

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

namespace pa = parenchyma;

struct direct_api {
  decltype(&::ncclGetUniqueId) get_id = nullptr;
  decltype(&::ncclCommInitRank) init = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclGetVersion) version = nullptr;
  CUresult (*ctx_set)(CUcontext) = nullptr;
  CUresult (*sync)(CUstream) = nullptr;
  CUresult (*begin)(CUstream, CUstreamCaptureMode) = nullptr;
  CUresult (*end)(CUstream, CUgraph*) = nullptr;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = nullptr;
  CUresult (*launch)(CUgraphExec, CUstream) = nullptr;
};

template <class F> void resolve(void* lib, F& f, const char* name, bool& ok) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  if (f == nullptr) {
    std::fprintf(stderr, "missing %s\n", name);
    ok = false;
  }
}

bool load(direct_api& a) {
  void* nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr) nccl = dlopen("/usr/local/cuda/lib64/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nccl == nullptr || cuda == nullptr) {
    std::fprintf(stderr, "libnccl.so.2 or libcuda.so.1 not found: %s\n", dlerror());
    return false;
  }
  bool ok = true;
  resolve(nccl, a.get_id, "ncclGetUniqueId", ok);
  resolve(nccl, a.init, "ncclCommInitRank", ok);
  resolve(nccl, a.all_reduce, "ncclAllReduce", ok);
  resolve(nccl, a.version, "ncclGetVersion", ok);
  resolve(cuda, a.ctx_set, "cuCtxSetCurrent", ok);
  resolve(cuda, a.sync, "cuStreamSynchronize", ok);
  resolve(cuda, a.begin, "cuStreamBeginCapture_v2", ok);
  resolve(cuda, a.end, "cuStreamEndCapture", ok);
  resolve(cuda, a.instantiate, "cuGraphInstantiateWithFlags", ok);
  resolve(cuda, a.launch, "cuGraphLaunch", ok);
  return ok;
}

void must(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    std::exit(1);
  }
}

} // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::unique_ptr<pa::Backend> gpu;
  try {
    gpu = std::make_unique<pa::Backend>("cuda");
  } catch (const std::exception& e) {
    std::printf("SKIPPED: no CUDA device (%s)\n", e.what());
    return 0;
  }
  if (!pa::coll::Communicator::uses_unique_id(*gpu)) {
    std::printf("FAILED: the cuda backend has no NCCL coll bundle (parenchyma-info says why)\n");
    return 1;
  }
  direct_api api;
  must(load(api), "loading libnccl.so.2 / libcuda.so.1");
  const auto comm =
      pa::coll::Communicator::from_unique_id(*gpu, pa::coll::Communicator::unique_id(*gpu), 0, 1);
  const auto ctx = static_cast<CUcontext>(gpu->native(PCY_NATIVE_CONTEXT));
  const auto stream = static_cast<CUstream>(gpu->native(PCY_NATIVE_QUEUE));
  must(api.ctx_set(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
  ncclUniqueId id{};
  ncclComm_t own = nullptr;
  must(api.get_id(&id) == ncclSuccess && api.init(&own, 1, id, 0) == ncclSuccess,
       "the benchmark's own NCCL communicator");
  int version = 0;
  api.version(&version);

  bench::suite s("coll_nccl");
  s.meta("nccl", std::to_string(version));
  s.meta("device", gpu->device().name);
  const pa::OpRoute route =
      gpu->route(pa::ext::op_key<pcy_coll_all_reduce_inplace_schema>(PCY_DTYPE_F32));
  s.meta("implementation", route.implementation);
  const int reps = quick ? 15 : 31;
  constexpr int graph_ops = 100;
  for (const int64_t n : {int64_t{1}, int64_t{1024}, int64_t{1} << 18}) {
    pa::SharedTensor<float> x({n});
    for (float& v : x.write_only())
      v = 1.0f;
    comm.all_reduce(x); // now current on the device
    gpu->synchronize();
    void* ptr = gpu->native_memory(x);
    const auto count = static_cast<size_t>(n);
    const long inner = n <= 1024 ? 200 : 50;
    auto direct = [&] {
      for (long i = 0; i < inner; ++i)
        api.all_reduce(ptr, ptr, count, ncclFloat32, ncclSum, own, stream);
      api.sync(stream);
    };
    auto ours = [&] {
      for (long i = 0; i < inner; ++i)
        comm.all_reduce(x);
      gpu->synchronize();
    };
    const std::string bytes = std::to_string(n * 4) + " B";
    s.compare_sampled(
        "all_reduce stream " + bytes,
        [&] { return bench::suite::time_ns(direct, 1) / static_cast<double>(inner); },
        [&] { return bench::suite::time_ns(ours, 1) / static_cast<double>(inner); },
        {.reps = reps, .inner = 1, .warmup = 3, .bytes = static_cast<double>(n * 4)},
        "ncclAllReduce", "parenchyma");

    // Graphs of graph_ops all_reduces: the direct side captured by hand.
    must(api.ctx_set(ctx) == CUDA_SUCCESS, "cuCtxSetCurrent");
    CUgraph raw = nullptr;
    CUgraphExec raw_exec = nullptr;
    must(api.begin(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS,
         "cuStreamBeginCapture");
    for (int i = 0; i < graph_ops; ++i)
      api.all_reduce(ptr, ptr, count, ncclFloat32, ncclSum, own, stream);
    must(api.end(stream, &raw) == CUDA_SUCCESS, "cuStreamEndCapture");
    must(api.instantiate(&raw_exec, raw, 0) == CUDA_SUCCESS, "cuGraphInstantiateWithFlags");
    const pa::Graph g = pa::Graph::record(*gpu, [&] {
      for (int i = 0; i < graph_ops; ++i)
        comm.all_reduce(x);
    });
    const long replays = n <= 1024 ? 10 : 3;
    auto direct_graph = [&] {
      for (long i = 0; i < replays; ++i)
        api.launch(raw_exec, stream);
      api.sync(stream);
    };
    auto ours_graph = [&] {
      for (long i = 0; i < replays; ++i)
        g.replay();
      gpu->synchronize();
    };
    const double per = static_cast<double>(replays * graph_ops);
    s.compare_sampled(
        "all_reduce graph node " + bytes,
        [&] { return bench::suite::time_ns(direct_graph, 1) / per; },
        [&] { return bench::suite::time_ns(ours_graph, 1) / per; },
        {.reps = reps, .inner = 1, .warmup = 2, .bytes = static_cast<double>(n * 4)}, "raw graph",
        "parenchyma");
  }
  std::printf("targets: stream <= +1000 ns per op over ncclAllReduce; graph <= 600 ns per op\n");
  s.write();
  return 0;
}
