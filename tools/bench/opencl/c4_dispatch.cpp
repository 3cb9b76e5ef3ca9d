// C4: OpenCL dispatch on PoCL. A burst of launches of a tiny kernel through the plugin's C
// table (kernel_launch, arguments passed on every call as the core does) against raw
// clEnqueueNDRangeKernel of the same source's kernel on the same queue; then launch + wait
// (queue_finish vs clFinish). Target: <= 1.10x or <= +0.5 us per launch.
#include "common.hpp"

#include <chrono>
#include <cmath>

using namespace opencl_bench;

namespace {
const char* source = R"CL(
__kernel void tiny(const int n, const float a, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * y[i] + 1.0f;
}
)CL";

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

int main() {
  plugin p;
  const auto& cl = raw();
  bench::suite s("c4_opencl_dispatch");
  p.describe(s);

  // Ours: program and kernel through the table.
  pcy_program_build_args b{};
  b.struct_size = sizeof b;
  b.context = p.ctx.get();
  b.source = source;
  host::check(p.api->program_build(&b));
  host::program prog(b.program, p.api->program_destroy);
  pcy_kernel_create_args kc{};
  kc.struct_size = sizeof kc;
  kc.program = prog.get();
  kc.name = "tiny";
  host::check(p.api->kernel_create(&kc));
  host::kernel kern(kc.kernel, p.api->kernel_destroy);

  // Peer: the same source built raw in the same cl_context, launched on the same queue.
  cl_int err = CL_SUCCESS;
  cl_program raw_prog = cl.clCreateProgramWithSource(p.cl_ctx, 1, &source, nullptr, &err);
  cl_ok(err, "clCreateProgramWithSource");
  cl_ok(cl.clBuildProgram(raw_prog, 1, &p.cl_dev, "", nullptr, nullptr), "clBuildProgram");
  cl_kernel raw_kernel = cl.clCreateKernel(raw_prog, "tiny", &err);
  cl_ok(err, "clCreateKernel");

  const int n = 64;
  const float a = 0.5f;
  pcy_memory_alloc_args ma{};
  ma.struct_size = sizeof ma;
  ma.context = p.ctx.get();
  ma.bytes = n * sizeof(float);
  host::check(p.api->memory_alloc(&ma));
  host::memory y(ma.memory, p.api->memory_free);
  auto y_mem = static_cast<cl_mem>(p.native(PCY_NATIVE_MEMORY, y.get()));
  std::vector<float> init(n, 1.0f);
  cl_ok(cl.clEnqueueWriteBuffer(p.cl_queue, y_mem, CL_TRUE, 0, n * sizeof(float), init.data(), 0,
                                nullptr, nullptr),
        "clEnqueueWriteBuffer");

  pcy_kernel_arg args[3]{};
  args[0].kind = PCY_ARG_SCALAR;
  args[0].value = &n;
  args[0].size = sizeof n;
  args[1].kind = PCY_ARG_SCALAR;
  args[1].value = &a;
  args[1].size = sizeof a;
  args[2].kind = PCY_ARG_MEMORY;
  args[2].memory = y.get();
  pcy_kernel_launch_args la{};
  la.struct_size = sizeof la;
  la.queue = p.queue.get();
  la.kernel = kern.get();
  la.dims = 1;
  la.global[0] = n;
  la.args = args;
  la.arg_count = 3;
  const size_t global = n;

  auto ours = [&] { host::check(p.api->kernel_launch(&la)); };
  auto peer_set = [&] { // what a raw caller writes per launch: set arguments, enqueue
    cl.clSetKernelArg(raw_kernel, 0, sizeof n, &n);
    cl.clSetKernelArg(raw_kernel, 1, sizeof a, &a);
    cl.clSetKernelArg(raw_kernel, 2, sizeof(cl_mem), &y_mem);
    cl.clEnqueueNDRangeKernel(p.cl_queue, raw_kernel, 1, nullptr, &global, nullptr, 0, nullptr,
                              nullptr);
  };
  cl.clSetKernelArg(raw_kernel, 0, sizeof n, &n);
  cl.clSetKernelArg(raw_kernel, 1, sizeof a, &a);
  cl.clSetKernelArg(raw_kernel, 2, sizeof(cl_mem), &y_mem);
  auto peer = [&] { // the strictest peer: arguments set once, enqueue only
    cl.clEnqueueNDRangeKernel(p.cl_queue, raw_kernel, 1, nullptr, &global, nullptr, 0, nullptr,
                              nullptr);
  };

  // Enqueue cost: a burst shorter than the queue, timed on the host; the drain is not timed.
  for (int burst : {64, 256}) {
    auto sampler = [&](auto& f) {
      return [&, burst] {
        const double t0 = now_ns();
        for (int i = 0; i < burst; ++i)
          f();
        const double t1 = now_ns();
        cl.clFinish(p.cl_queue);
        return (t1 - t0) / burst;
      };
    };
    s.compare_sampled("enqueue burst " + std::to_string(burst), sampler(peer), sampler(ours),
                      {.reps = 31}, "raw enqueue", "parenchyma");
    s.compare_sampled("enqueue burst " + std::to_string(burst) + " (peer sets args)",
                      sampler(peer_set), sampler(ours), {.reps = 31}, "raw set+enq", "parenchyma");
  }
  // Round trip: one launch, then wait for it.
  s.compare(
      "launch + finish",
      [&] {
        peer();
        cl.clFinish(p.cl_queue);
      },
      [&] {
        ours();
        host::check(p.api->queue_finish(p.queue.get()));
      },
      {.reps = 31, .inner = 200}, "raw+clFinish", "parenchyma");

  // The work really ran: y went through many y = a*y + 1 steps from 1; it converges to 2.
  std::vector<float> out(n);
  cl_ok(cl.clEnqueueReadBuffer(p.cl_queue, y_mem, CL_TRUE, 0, n * sizeof(float), out.data(), 0,
                               nullptr, nullptr),
        "clEnqueueReadBuffer");
  for (float v : out)
    if (std::abs(v - 2.0f) > 1e-5f) {
      std::fprintf(stderr, "wrong result %g\n", double(v));
      return 1;
    }
  cl.clReleaseKernel(raw_kernel);
  cl.clReleaseProgram(raw_prog);
  s.write();
  return 0;
}
