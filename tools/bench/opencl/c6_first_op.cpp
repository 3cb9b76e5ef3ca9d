// C6: OpenCL first op — build a program, create its kernel, launch once and wait — cold (a
// source nobody has built: our build, which also writes the cache entry) against raw
// clBuildProgram of the same source, and warm from our on-disk cache against the same raw
// build (and against raw clCreateProgramWithBinary, the best any cache can do). PoCL's own
// kernel cache is disabled (POCL_KERNEL_CACHE=0) so that "cold" means cold.
// Targets: cold <= 1.5 s; with our cache <= 100 ms.
#include "common.hpp"

#include <chrono>
#include <filesystem>
#include <unistd.h>

using namespace opencl_bench;

namespace {
const char* body = R"CL(
__kernel void axpy(const int n, const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
__kernel void scal(const int n, const float a, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * y[i];
}
)CL";

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
} // namespace

int main() {
  ::setenv("POCL_KERNEL_CACHE", "0", 1); // before anything loads PoCL
  const std::string cache = "/tmp/pcy-bench-c6-" + std::to_string(::getpid());
  plugin p({{"PARENCHYMA_CACHE_DIR", cache}});
  const auto& cl = raw();
  bench::suite s("c6_opencl_first_op");
  p.describe(s);
  s.meta("pocl_kernel_cache", "0");

  const int n = 1024;
  const float a = 2.0f;
  pcy_memory_alloc_args ma{};
  ma.struct_size = sizeof ma;
  ma.context = p.ctx.get();
  ma.bytes = n * sizeof(float);
  host::check(p.api->memory_alloc(&ma));
  host::memory x(ma.memory, p.api->memory_free);
  host::check(p.api->memory_alloc(&ma));
  host::memory y(ma.memory, p.api->memory_free);
  cl_mem xm = static_cast<cl_mem>(p.native(PCY_NATIVE_MEMORY, x.get()));
  cl_mem ym = static_cast<cl_mem>(p.native(PCY_NATIVE_MEMORY, y.get()));
  std::vector<float> init(n, 1.0f);
  cl.clEnqueueWriteBuffer(p.cl_queue, xm, CL_TRUE, 0, n * sizeof(float), init.data(), 0, nullptr,
                          nullptr);
  cl.clEnqueueWriteBuffer(p.cl_queue, ym, CL_TRUE, 0, n * sizeof(float), init.data(), 0, nullptr,
                          nullptr);

  bool last_hit = false;
  auto ours = [&](const std::string& src) {
    const double t0 = now_ns();
    pcy_program_build_args b{};
    b.struct_size = sizeof b;
    b.context = p.ctx.get();
    b.source = src.c_str();
    b.source_size = src.size();
    host::check(p.api->program_build(&b));
    host::program prog(b.program, p.api->program_destroy);
    last_hit = b.cache_hit;
    pcy_kernel_create_args kc{};
    kc.struct_size = sizeof kc;
    kc.program = prog.get();
    kc.name = "axpy";
    host::check(p.api->kernel_create(&kc));
    host::kernel k(kc.kernel, p.api->kernel_destroy);
    pcy_kernel_arg args[4]{};
    args[0] = {PCY_ARG_SCALAR, nullptr, &n, sizeof n};
    args[1] = {PCY_ARG_SCALAR, nullptr, &a, sizeof a};
    args[2] = {PCY_ARG_MEMORY, x.get(), nullptr, 0};
    args[3] = {PCY_ARG_MEMORY, y.get(), nullptr, 0};
    pcy_kernel_launch_args la{};
    la.struct_size = sizeof la;
    la.queue = p.queue.get();
    la.kernel = k.get();
    la.dims = 1;
    la.global[0] = n;
    la.args = args;
    la.arg_count = 4;
    host::check(p.api->kernel_launch(&la));
    host::check(p.api->queue_finish(p.queue.get()));
    return now_ns() - t0;
  };
  // The peer's program, from source or from a binary.
  auto raw_first_op = [&](cl_program prog) {
    cl_int err = CL_SUCCESS;
    cl_kernel k = cl.clCreateKernel(prog, "axpy", &err);
    cl_ok(err, "clCreateKernel");
    cl.clSetKernelArg(k, 0, sizeof n, &n);
    cl.clSetKernelArg(k, 1, sizeof a, &a);
    cl.clSetKernelArg(k, 2, sizeof(cl_mem), &xm);
    cl.clSetKernelArg(k, 3, sizeof(cl_mem), &ym);
    const size_t global = n;
    cl_ok(
        cl.clEnqueueNDRangeKernel(p.cl_queue, k, 1, nullptr, &global, nullptr, 0, nullptr, nullptr),
        "clEnqueueNDRangeKernel");
    cl_ok(cl.clFinish(p.cl_queue), "clFinish");
    cl.clReleaseKernel(k);
    cl.clReleaseProgram(prog);
  };
  auto peer = [&](const std::string& src) {
    const double t0 = now_ns();
    const char* text = src.c_str();
    cl_int err = CL_SUCCESS;
    cl_program prog = cl.clCreateProgramWithSource(p.cl_ctx, 1, &text, nullptr, &err);
    cl_ok(err, "clCreateProgramWithSource");
    cl_ok(cl.clBuildProgram(prog, 1, &p.cl_dev, "", nullptr, nullptr), "clBuildProgram");
    raw_first_op(prog);
    return now_ns() - t0;
  };

  int counter = 0;
  auto fresh = [&] {
    return "// cold " + std::to_string(::getpid()) + "." + std::to_string(counter++) + "\n" + body;
  };
  s.compare_sampled(
      "first op, cold", [&] { return peer(fresh()); },
      [&] {
        const double t = ours(fresh());
        if (last_hit) std::fprintf(stderr, "unexpected cache hit on a fresh source\n");
        return t;
      },
      {.reps = 15, .warmup = 1}, "raw build", "parenchyma");

  const std::string warm = fresh();
  ours(warm); // writes the entry
  // The best a cache can do: the driver's own binary of the same program.
  std::vector<unsigned char> binary;
  {
    const char* text = warm.c_str();
    cl_int err = CL_SUCCESS;
    cl_program prog = cl.clCreateProgramWithSource(p.cl_ctx, 1, &text, nullptr, &err);
    cl_ok(cl.clBuildProgram(prog, 1, &p.cl_dev, "", nullptr, nullptr), "clBuildProgram");
    size_t size = 0;
    cl.clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
    binary.resize(size);
    unsigned char* ptr = binary.data();
    cl.clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr);
    cl.clReleaseProgram(prog);
  }
  auto ours_cached = [&] {
    const double t = ours(warm);
    if (!last_hit) std::fprintf(stderr, "expected a cache hit\n");
    return t;
  };
  s.compare_sampled(
      "first op, our cache vs raw build", [&] { return peer(fresh()); }, ours_cached,
      {.reps = 15, .warmup = 1}, "raw build", "parenchyma");
  s.compare_sampled(
      "first op, our cache vs raw binary",
      [&] {
        const double t0 = now_ns();
        const unsigned char* ptr = binary.data();
        const size_t size = binary.size();
        cl_int err = CL_SUCCESS, status = CL_SUCCESS;
        cl_program prog =
            cl.clCreateProgramWithBinary(p.cl_ctx, 1, &p.cl_dev, &size, &ptr, &status, &err);
        cl_ok(err, "clCreateProgramWithBinary");
        cl_ok(cl.clBuildProgram(prog, 1, &p.cl_dev, "", nullptr, nullptr), "clBuildProgram");
        raw_first_op(prog);
        return now_ns() - t0;
      },
      ours_cached, {.reps = 15, .warmup = 1}, "raw binary", "parenchyma");

  std::filesystem::remove_all(cache);
  s.write();
  return 0;
}
