// G12: cold start to the first op, each sample in a fresh process (fork + exec of this binary):
//   ours: dlopen the plugin + initialise + context + queue + program_build (a cache hit) +
//         kernel + alloc + first launch + finish;
//   peer: dlopen libcuda + cuInit + primary context + cuModuleLoadData of the same cubin +
//         cuModuleGetFunction + alloc + first launch + sync.
// Also reports the plugin load time (dlopen + entry) alone and checks that the warm path hit the
// cache (no NVRTC, no PTX JIT: the cached image is a cubin for the device's exact arch).
#include "common.hpp"

#include "harness.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

using namespace cuda_bench;

namespace {
const char* source = R"(
extern "C" __global__ void add_one(float* x, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
)";

// Child: ours. Prints "total_ns load_ns cache_hit".
int child_ours(const char* cache) {
  const double t0 = now_ns();
  const pcy_framework_api* api = load_plugin();
  const double t_load = now_ns();
  pcy_host_services svc = services(cache);
  host::framework fw(api, &svc);
  if (fw.probe().device_count == 0) return 77;
  const uint32_t dev = 0;
  auto ctx = host::make_context(fw, std::span<const uint32_t>(&dev, 1));
  auto q = host::make_queue(fw, ctx.get(), 0);
  pcy_program_build_args b{};
  b.struct_size = sizeof b;
  b.context = ctx.get();
  b.source = source;
  host::check(api->program_build(&b));
  host::program prog(b.program, api->program_destroy);
  pcy_kernel_create_args k{};
  k.struct_size = sizeof k;
  k.program = prog.get();
  k.name = "add_one";
  host::check(api->kernel_create(&k));
  host::kernel kern(k.kernel, api->kernel_destroy);
  auto m = host::alloc(fw, ctx.get(), 0, 1024 * 4);
  const unsigned n = 1024;
  pcy_kernel_arg args[2] = {{PCY_ARG_MEMORY, m.get(), nullptr, 0},
                            {PCY_ARG_SCALAR, nullptr, &n, sizeof n}};
  pcy_kernel_launch_args l{};
  l.struct_size = sizeof l;
  l.queue = q.get();
  l.kernel = kern.get();
  l.dims = 1;
  l.global[0] = n;
  l.args = args;
  l.arg_count = 2;
  host::check(api->kernel_launch(&l));
  host::finish(fw, q.get());
  const double t1 = now_ns();
  std::printf("%.0f %.0f %d\n", t1 - t0, t_load - t0, b.cache_hit ? 1 : 0);
  std::fflush(stdout);
  std::_Exit(0); // teardown is not part of the cold start
}

// Child: raw driver. Prints "total_ns".
int child_raw(const char* cubin_path) {
  const double t0 = now_ns();
  pc::driver d; // dlopen libcuda.so.1, cuGetProcAddress, cuInit
  if (!d.ok()) return 77;
  const auto& api = d.api();
  std::ifstream in(cubin_path, std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  cu(d, api.cuDeviceGet(&dev, 0), "cuDeviceGet");
  cu(d, api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  cu(d, api.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  cu(d, api.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  CUmodule mod = nullptr;
  cu(d, api.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData");
  CUfunction f = nullptr;
  cu(d, api.cuModuleGetFunction(&f, mod, "add_one"), "cuModuleGetFunction");
  CUdeviceptr p = 0;
  cu(d, api.cuMemAlloc(&p, 1024 * 4), "cuMemAlloc");
  unsigned n = 1024;
  void* params[2] = {&p, &n};
  cu(d, api.cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, stream, params, nullptr), "cuLaunchKernel");
  cu(d, api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  const double t1 = now_ns();
  std::printf("%.0f\n", t1 - t0);
  std::fflush(stdout);
  std::_Exit(0);
}

// Runs this binary with `args`, returns its stdout.
std::string run_child(const std::string& self, const std::vector<std::string>& args) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(self.c_str())};
    for (auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(self.c_str(), argv.data());
    std::_Exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[256];
  ssize_t k;
  while ((k = ::read(fds[0], buf, sizeof buf)) > 0)
    out.append(buf, static_cast<size_t>(k));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("child " + args[0] + " failed (status " + std::to_string(status) +
                             ")");
  return out;
}
} // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--child-ours") return child_ours(argv[2]);
  if (argc == 3 && std::string(argv[1]) == "--child-raw") return child_raw(argv[2]);
  try {
    const std::string self = "/proc/self/exe";
    char exe[4096] = {};
    const ssize_t len = ::readlink(self.c_str(), exe, sizeof exe - 1);
    if (len <= 0) throw std::runtime_error("cannot find this executable");
    const std::string me(exe, static_cast<size_t>(len));
    const std::string cache = "/tmp/pcy-bench-cuda-coldstart-" + std::to_string(::getpid());
    const std::string cubin = cache + "/raw.cubin";
    std::filesystem::create_directories(cache);

    std::string arch;
    {
      // The peer's cubin: the same source compiled the same way (NVRTC, exact arch).
      rig r(cache.c_str());
      arch = r.arch;
      auto out = r.rtc.compile(source, {}, r.cc);
      std::ofstream(cubin, std::ios::binary)
          .write(out.image.data(), static_cast<std::streamsize>(out.image.size()));
    }
    // Fill our cache once (a cold build), then every sample is the warm path.
    const std::string first = run_child(me, {"--child-ours", cache});
    std::printf("first run of ours (builds the cache): %s", first.c_str());

    bench::suite s("cuda_coldstart");
    s.meta("arch", arch);
    std::vector<double> loads;
    int misses = 0;
    bench::options o;
    o.reps = 15;
    o.warmup = 1;
    s.compare_sampled(
        "G12 cold start to first op",
        [&] {
          return std::stod(run_child(me, {"--child-raw", cubin}));
        },
        [&] {
          double total = 0, load = 0;
          int hit = 0;
          std::sscanf(run_child(me, {"--child-ours", cache}).c_str(), "%lf %lf %d", &total, &load,
                      &hit);
          loads.push_back(load);
          misses += hit ? 0 : 1;
          return total;
        },
        o, "raw driver", "parenchyma");
    const double load_ms = bench::percentile(loads, 0.5) / 1e6;
    std::printf(
        "plugin load (dlopen + entry), median: %.3f ms; cache misses on the warm path: %d\n",
        load_ms, misses);
    s.meta("plugin_load_ms_median", std::to_string(load_ms));
    s.meta("warm_cache_misses", std::to_string(misses));
    s.write();
    std::error_code ec;
    std::filesystem::remove_all(cache, ec);
    return misses == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("SKIPPED: bench_cuda_coldstart: %s\n", e.what());
    return 77;
  }
}
