// Where does a small dependent op's time go on this GPU? Launch-cost probe for P1 and P6
// (docs/performance.md). Alternating y = a*x + y / x = s*x on 1024 floats, each kernel
// dependent on the one before, issued:
//   stream        one by one on a stream (cudaLaunchKernelEx), CPU time of the loop and total
//   stream+pdl    the same with programmatic dependent launch (the next kernel is launched while
//                 the previous runs and waits in griddepcontrol.wait)
//   graph         100 ops captured once, replayed
//   graph+pdl     the same captured with the PDL attribute (programmatic edges)
//   segments      each op captured on its own into one graph, as the CUDA plugin records
// and an empty kernel for the floor. Prints microseconds per op; checks the result against a
// double-precision host loop.
//   nvcc -O2 -arch=sm_90 -o /tmp/pdl_probe tools/debug/pdl_probe.cu && /tmp/pdl_probe
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__global__ void empty_k() {}
// early: let the next kernel launch right after the wait, not at the end.
__global__ void axpy_k(int n, float a, const float* x, float* y, int early) {
  pdl_wait();
  if (early) pdl_trigger();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
  if (!early) pdl_trigger();
}
__global__ void scal_k(int n, float a, float* x, int early) {
  pdl_wait();
  if (early) pdl_trigger();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
  if (!early) pdl_trigger();
}

using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

static const int N = 1024;
static float *dx, *dy;
static int trigger_early = 0; // set for the last variant of the segments run

static void launch(cudaStream_t s, int i, bool pdl, bool empty) {
  cudaLaunchConfig_t c{};
  c.gridDim = dim3(empty ? 1 : (N + 255) / 256);
  c.blockDim = dim3(empty ? 32 : 256);
  c.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at;
  c.numAttrs = pdl ? 1 : 0;
  if (empty) {
    CK(cudaLaunchKernelEx(&c, empty_k));
  } else if (i % 2 == 0) {
    CK(cudaLaunchKernelEx(&c, axpy_k, N, 0.5f, (const float*)dx, dy, trigger_early));
  } else {
    CK(cudaLaunchKernelEx(&c, scal_k, N, 0.999f, dx, trigger_early));
  }
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMalloc(&dx, N * sizeof(float)));
  CK(cudaMalloc(&dy, N * sizeof(float)));
  std::vector<float> hx(N), hy(N);
  auto reset = [&] {
    for (int i = 0; i < N; ++i) {
      hx[i] = 0.25f + (i % 97) * 0.01f;
      hy[i] = 1.0f - (i % 89) * 0.005f;
    }
    CK(cudaMemcpy(dx, hx.data(), N * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dy, hy.data(), N * 4, cudaMemcpyHostToDevice));
  };
  auto check = [&](int ops, const char* what) {
    std::vector<double> x(N), y(N);
    for (int i = 0; i < N; ++i) {
      x[i] = 0.25 + (i % 97) * 0.01;
      y[i] = 1.0 - (i % 89) * 0.005;
    }
    for (int k = 0; k < ops; ++k)
      for (int i = 0; i < N; ++i) {
        if (k % 2 == 0)
          y[i] += 0.5 * x[i];
        else
          x[i] *= 0.999;
      }
    std::vector<float> gy(N);
    CK(cudaMemcpy(gy.data(), dy, N * 4, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (int i = 0; i < N; ++i)
      worst = std::fmax(worst, std::fabs(gy[i] - y[i]) / std::fabs(y[i]));
    std::printf("  %-12s result check: max rel err %.2e %s\n", what, worst,
                worst < 1e-3 ? "ok" : "WRONG");
  };

  // Instantiates g, replays it `replays` times from fresh data and returns microseconds per node.
  auto replay_us = [&](cudaGraph_t g, int nodes, int replays) {
    cudaGraphExec_t ge;
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphUpload(ge, s));
    CK(cudaStreamSynchronize(s));
    reset();
    auto t0 = clk::now();
    for (int r = 0; r < replays; ++r)
      CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    auto t1 = clk::now();
    CK(cudaGraphExecDestroy(ge));
    return us(t0, t1) / (nodes * replays);
  };

  const int ops = 10000;
  for (int rep = 0; rep < 3; ++rep) {
    std::printf("round %d\n", rep);
    for (int mode = 0; mode < 4; ++mode) {
      const bool pdl = mode & 1, empty = mode >= 2;
      reset();
      CK(cudaStreamSynchronize(s));
      auto t0 = clk::now();
      for (int i = 0; i < ops; ++i)
        launch(s, i, pdl, empty);
      auto t1 = clk::now();
      CK(cudaStreamSynchronize(s));
      auto t2 = clk::now();
      std::printf("  stream%-5s %-6s enqueue %.2f us/op, total %.2f us/op\n", pdl ? "+pdl" : "",
                  empty ? "empty" : "ops", us(t0, t1) / ops, us(t0, t2) / ops);
      if (!empty) check(ops, pdl ? "stream+pdl" : "stream");
    }
    for (int pdl = 0; pdl < 2; ++pdl) {
      const int nodes = 100, replays = 100;
      reset();
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < nodes; ++i)
        launch(s, i, pdl, false);
      CK(cudaStreamEndCapture(s, &g));
      const double per_node = replay_us(g, nodes, replays);
      std::printf("  graph%-5s  %d nodes x %d replays: %.3f us/op\n", pdl ? "+pdl" : "", nodes,
                  replays, per_node);
      check(nodes * replays, pdl ? "graph+pdl" : "graph");
      CK(cudaGraphDestroy(g));
    }
    // The way the CUDA plugin records: each op captured on its own into the one graph
    // (cuStreamBeginCaptureToGraph after the previous segment's leaves). edata 1 carries the
    // leaves' edge data from one segment to the next; 0 passes none (the plugin before PDL).
    for (int variant = 0; variant < 4; ++variant) {
      const bool pdl = variant > 0, edata = variant == 2;
      trigger_early = variant == 3;
      const int nodes = 100, replays = 100;
      reset();
      cudaGraph_t g;
      CK(cudaGraphCreate(&g, 0));
      std::vector<cudaGraphNode_t> leaves;
      std::vector<cudaGraphEdgeData> leaf_data;
      for (int i = 0; i < nodes; ++i) {
        CK(cudaStreamBeginCaptureToGraph(s, g, leaves.data(), edata ? leaf_data.data() : nullptr,
                                         leaves.size(), cudaStreamCaptureModeThreadLocal));
        launch(s, i, pdl, false);
        cudaStreamCaptureStatus st;
        const cudaGraphNode_t* deps = nullptr;
        const cudaGraphEdgeData* ed = nullptr;
        size_t nd = 0;
        CK(cudaStreamGetCaptureInfo(s, &st, nullptr, nullptr, &deps, &ed, &nd));
        leaves.assign(deps, deps + nd);
        if (ed != nullptr)
          leaf_data.assign(ed, ed + nd);
        else
          leaf_data.assign(nd, cudaGraphEdgeData{});
        cudaGraph_t same;
        CK(cudaStreamEndCapture(s, &same));
      }
      size_t ne = 0;
      CK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &ne));
      std::vector<cudaGraphNode_t> from(ne), to(ne);
      std::vector<cudaGraphEdgeData> data(ne);
      CK(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &ne));
      int programmatic = 0;
      for (auto& e : data)
        programmatic += e.type == cudaGraphDependencyTypeProgrammatic;
      const double per_node = replay_us(g, nodes, replays);
      std::printf("  segments%-4s%-6s%s %d nodes x %d replays: %.3f us/op (%zu edges, %d "
                  "programmatic)\n",
                  pdl ? "+pdl" : "", edata ? "+edata" : "",
                  trigger_early ? "+trigger-at-start" : "", nodes, replays, per_node, ne,
                  programmatic);
      check(nodes * replays, "segments");
      CK(cudaGraphDestroy(g));
    }
    trigger_early = 0;
  }
  return 0;
}
