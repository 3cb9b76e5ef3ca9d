// G1 enqueue of one op, G2 op + sync, G3 small-op rate: the plugin's kernel_launch slot against
// raw cuLaunchKernel of the same function on the same stream (docs/performance.md).
//   G1: a burst of 128 launches timed on the host (shorter than the queue), then a sync.
//   G2: launch + wait, 64 times per sample.
//   G3: 10k alternating axpy/scal launches on 1024 floats, then one sync (time per op);
//       tools/bench/cuda/g3_torch.py measures PyTorch eager on the same ops.
#include "common.hpp"

#include "harness.hpp"

using namespace cuda_bench;

namespace {
const char* source = R"(
extern "C" __global__ void axpy(unsigned n, float a, const float* x, float* y) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
extern "C" __global__ void scal(unsigned n, float a, float* x) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";
} // namespace

int main() {
  try {
    const std::string cache = "/tmp/pcy-bench-cuda-cache";
    rig r(cache.c_str());
    bench::suite s("cuda_dispatch");
    s.meta("device", r.device_name);
    s.meta("driver", r.driver_version);
    s.meta("arch", r.arch);
    const auto& d = r.drv;
    const auto& api = d.api();

    auto prog = r.build(source);
    auto k_axpy = r.kernel(prog.get(), "axpy");
    auto k_scal = r.kernel(prog.get(), "scal");
    CUfunction f_axpy = r.raw_function(source, "axpy");
    CUfunction f_scal = r.raw_function(source, "scal");

    const unsigned n = 1024;
    float a = 1.0001f, sc = 0.9999f;
    auto x = host::alloc(r.fw, r.ctx.get(), 0, n * 4);
    auto y = host::alloc(r.fw, r.ctx.get(), 0, n * 4);
    auto xs = random_bytes(n * 4);
    host::write(r.fw, r.q.get(), x.get(), 0, xs.data(), n * 4);
    host::write(r.fw, r.q.get(), y.get(), 0, xs.data(), n * 4);
    CUdeviceptr px = 0;
    {
      pcy_native_handle_args h{};
      h.struct_size = sizeof h;
      h.object = PCY_NATIVE_MEMORY;
      h.memory = x.get();
      host::check(r.api->native_handle(&h));
      px = reinterpret_cast<CUdeviceptr>(h.handle);
    }
    CUdeviceptr py = 0;
    {
      pcy_native_handle_args h{};
      h.struct_size = sizeof h;
      h.object = PCY_NATIVE_MEMORY;
      h.memory = y.get();
      host::check(r.api->native_handle(&h));
      py = reinterpret_cast<CUdeviceptr>(h.handle);
    }

    // Our launch: the ABI slot with arguments as an application passes them.
    pcy_kernel_arg axpy_args[4] = {};
    axpy_args[0] = {PCY_ARG_SCALAR, nullptr, &n, sizeof n};
    axpy_args[1] = {PCY_ARG_SCALAR, nullptr, &a, sizeof a};
    axpy_args[2] = {PCY_ARG_MEMORY, x.get(), nullptr, 0};
    axpy_args[3] = {PCY_ARG_MEMORY, y.get(), nullptr, 0};
    pcy_kernel_arg scal_args[3] = {};
    scal_args[0] = {PCY_ARG_SCALAR, nullptr, &n, sizeof n};
    scal_args[1] = {PCY_ARG_SCALAR, nullptr, &sc, sizeof sc};
    scal_args[2] = {PCY_ARG_MEMORY, x.get(), nullptr, 0};
    pcy_kernel_launch_args la{};
    la.struct_size = sizeof la;
    la.queue = r.q.get();
    la.kernel = k_axpy.get();
    la.dims = 1;
    la.global[0] = n;
    la.local[0] = 256;
    la.args = axpy_args;
    la.arg_count = 4;
    pcy_kernel_launch_args ls = la;
    ls.kernel = k_scal.get();
    ls.args = scal_args;
    ls.arg_count = 3;
    auto* const launch = r.api->kernel_launch;
    auto* const finish = r.api->queue_finish;
    pcy_queue q = r.q.get();

    auto ours_launch = [&] {
      if (pcy_error* e = launch(&la)) host::check(e);
    };
    void* raw_params[4] = {const_cast<unsigned*>(&n), &a, &px, &py};
    auto raw_launch = [&] {
      cu(d,
         api.cuLaunchKernel(f_axpy, (n + 255) / 256, 1, 1, 256, 1, 1, 0, r.stream, raw_params,
                            nullptr),
         "cuLaunchKernel");
    };
    auto sync_raw = [&] { cu(d, api.cuStreamSynchronize(r.stream), "cuStreamSynchronize"); };

    // G1: enqueue cost.
    const int burst = 128;
    auto burst_of = [&](auto& one) {
      return [&, one]() mutable {
        sync_raw();
        const double t0 = now_ns();
        for (int i = 0; i < burst; ++i)
          one();
        const double t1 = now_ns();
        sync_raw();
        return (t1 - t0) / burst;
      };
    };
    bench::options o;
    o.reps = 31;
    o.warmup = 5;
    s.compare_sampled("G1 enqueue one launch (burst 128)", burst_of(raw_launch),
                      burst_of(ours_launch), o, "cuLaunchKernel", "parenchyma");

    // G2: launch + wait.
    const int rounds = 64;
    s.compare_sampled(
        "G2 launch + sync",
        [&] {
          const double t0 = now_ns();
          for (int i = 0; i < rounds; ++i) {
            raw_launch();
            sync_raw();
          }
          return (now_ns() - t0) / rounds;
        },
        [&] {
          const double t0 = now_ns();
          for (int i = 0; i < rounds; ++i) {
            ours_launch();
            if (pcy_error* e = finish(q)) host::check(e);
          }
          return (now_ns() - t0) / rounds;
        },
        o, "launch+cuStreamSync", "parenchyma");

    // G3: small-op rate, alternating axpy and scal (as g3_torch.py does with PyTorch).
    const int ops = 10000;
    void* raw_scal[3] = {const_cast<unsigned*>(&n), &sc, &px};
    bench::options o3;
    o3.reps = 15;
    o3.warmup = 2;
    s.compare_sampled(
        "G3 10k small ops (axpy/scal 1024 f32)",
        [&] {
          const double t0 = now_ns();
          for (int i = 0; i < ops; i += 2) {
            raw_launch();
            cu(d, api.cuLaunchKernel(f_scal, 4, 1, 1, 256, 1, 1, 0, r.stream, raw_scal, nullptr),
               "cuLaunchKernel");
          }
          sync_raw();
          return (now_ns() - t0) / ops;
        },
        [&] {
          const double t0 = now_ns();
          for (int i = 0; i < ops; i += 2) {
            ours_launch();
            if (pcy_error* e = launch(&ls)) host::check(e);
          }
          if (pcy_error* e = finish(q)) host::check(e);
          return (now_ns() - t0) / ops;
        },
        o3, "raw driver", "parenchyma");
    s.write();
    return 0;
  } catch (const std::exception& e) {
    std::printf("SKIPPED: bench_cuda_dispatch: %s\n", e.what());
    return 77;
  }
}
