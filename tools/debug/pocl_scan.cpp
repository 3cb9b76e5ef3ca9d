// pocl_scan: which kernel of an OpenCL program makes a CPU OpenCL driver's kernel compiler crash
// (PoCL 5 with LLVM 16+ aborts on the NN bundle's program: docs/opencl.md). Builds the whole
// program, then each kernel alone (the other kernels' definitions cut out), each in a child
// process, and asks for the program binaries, which makes PoCL compile every kernel's
// work-group function. Prints one line per build: ok, a build error, or the signal it died of.
//
//   g++ -std=c++20 -O1 -I. tools/debug/pocl_scan.cpp -o pocl_scan -lOpenCL
//   ./pocl_scan [platform substring, default "Portable"] [options, default the f32 NN options]
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include "extensions/nn/opencl/kernels_cl.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

namespace {

// The source with every kernel but `keep` removed (its whole definition, matched by braces).
std::string only_kernel(const std::string& src, const std::string& keep) {
  std::string out;
  size_t pos = 0;
  const std::regex def(
      R"(__kernel\s+(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)?void\s+(\w+)\s*\()");
  for (std::sregex_iterator it(src.begin(), src.end(), def), end; it != end; ++it) {
    const size_t start = static_cast<size_t>(it->position(0));
    const size_t open = src.find('{', start);
    if (open == std::string::npos) break;
    size_t close = open;
    for (int depth = 0; close < src.size(); ++close) {
      if (src[close] == '{') ++depth;
      if (src[close] == '}' && --depth == 0) break;
    }
    out += src.substr(pos, start - pos);
    if ((*it)[1] == keep) out += src.substr(start, close + 1 - start);
    pos = close + 1;
  }
  return out + src.substr(pos);
}

// Builds `src` and fetches the binaries in a child process; returns its pid.
pid_t start_build(cl_platform_id platform, const std::string& src, const std::string& options) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    cl_device_id dev = nullptr;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, nullptr) != CL_SUCCESS) _exit(3);
    cl_int err = 0;
    cl_context ctx = clCreateContext(nullptr, 1, &dev, nullptr, nullptr, &err);
    const char* text = src.c_str();
    cl_program prog = clCreateProgramWithSource(ctx, 1, &text, nullptr, &err);
    if (clBuildProgram(prog, 1, &dev, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
      char log[4096] = {};
      clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, nullptr);
      std::fprintf(stderr, "%s\n", log);
      _exit(4);
    }
    size_t size = 0;
    clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr);
    std::vector<unsigned char> bin(size);
    unsigned char* p = bin.data();
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof p, &p, nullptr) != CL_SUCCESS) _exit(5);
    _exit(0);
  }
  return pid;
}

// Waits for a build started above; a line saying how it went.
std::string finish_build(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    return std::string("CRASH (signal ") + std::to_string(WTERMSIG(status)) + ", " +
           strsignal(WTERMSIG(status)) + ")";
  const int rc = WEXITSTATUS(status);
  return rc == 0 ? "ok" : rc == 4 ? "build error" : "failed (" + std::to_string(rc) + ")";
}

} // namespace

int main(int argc, char** argv) {
  const std::string want = argc > 1 ? argv[1] : "Portable";
  const std::string options = argc > 2 ? argv[2] : "-DREAL=float -DSWG=256 -DTS=16";
  cl_uint n = 0;
  clGetPlatformIDs(0, nullptr, &n);
  std::vector<cl_platform_id> ps(n);
  clGetPlatformIDs(n, ps.data(), nullptr);
  cl_platform_id platform = nullptr;
  for (cl_platform_id p : ps) {
    char name[256] = {}, version[256] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
    clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof version - 1, version, nullptr);
    std::printf("platform: %s (%s)\n", name, version);
    if (platform == nullptr && std::strstr(name, want.c_str()) != nullptr) platform = p;
  }
  if (platform == nullptr) {
    std::printf("no platform matching '%s'\n", want.c_str());
    return 77;
  }
  const std::string src = parenchyma::nn_opencl::kernel_source;
  std::printf("options: %s\n", options.c_str());
  const std::regex def(
      R"(__kernel\s+(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)?void\s+(\w+)\s*\()");
  // All builds at once (one process each; a CPU driver compiles on the calling thread).
  std::vector<std::pair<std::string, pid_t>> runs{
      {"(whole program)", start_build(platform, src, options)}};
  for (std::sregex_iterator it(src.begin(), src.end(), def), end; it != end; ++it) {
    const std::string name = (*it)[1];
    runs.emplace_back(name, start_build(platform, only_kernel(src, name), options));
  }
  int crashed = 0;
  for (const auto& [name, pid] : runs) {
    const std::string r = finish_build(pid);
    crashed += r.rfind("CRASH", 0) == 0 && name[0] != '(';
    std::printf("  %-28s %s\n", name.c_str(), r.c_str());
  }
  std::printf("%d kernel(s) crash the compiler alone\n", crashed);
  return 0;
}
