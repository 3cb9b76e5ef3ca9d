// NVRTC, loaded at run time (libnvrtc.so.13, then .12; also from /usr/local/cuda/lib64) and only
// when a program must really be compiled: the warm path (a cache hit) never loads it. The cache
// key uses identity(), which names the library file without loading it.
#pragma once

#include <nvrtc.h>
#include <parenchyma/sdk/common.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::cuda {

class nvrtc {
public:
  nvrtc() = default;
  // Settings (PARENCHYMA_NVRTC, CUDA_HOME, CUDA_PATH) from `settings`; default: the environment.
  explicit nvrtc(sdk::settings settings) : settings_(settings) {}
  nvrtc(const nvrtc&) = delete;
  nvrtc& operator=(const nvrtc&) = delete;
  ~nvrtc();

  // Which NVRTC a compile would use: "<real path>:<size>:<mtime>" or "nvrtc <version>"; empty
  // when none is installed. Cheap (stat only) unless the library is found only by the loader.
  std::string identity();

  // True when the library is (or can be) loaded; reason() says why not.
  bool available();
  const std::string& reason();
  std::string version(); // "13.0"

  struct output {
    std::vector<char> image; // a cubin, or NUL-terminated PTX when !cubin
    bool cubin = true;
    std::string target; // "sm_90" or "compute_90"
    std::string log;    // the compiler's log (warnings), may be empty
  };
  // Compiles CUDA C for compute capability cc (e.g. 90). Throws sdk::error: PCY_ERR_BUILD with
  // the log, PCY_ERR_UNAVAILABLE when NVRTC is missing, PCY_ERR_INVALID_ARGUMENT for options.
  output compile(std::string_view source, const std::vector<std::string>& options, int cc);

private:
  sdk::settings settings_;
  void locate();
  void load();

  using get_error_string_fn = const char* (*)(nvrtcResult);
  using version_fn = nvrtcResult (*)(int*, int*);
  using num_archs_fn = nvrtcResult (*)(int*);
  using archs_fn = nvrtcResult (*)(int*);
  using create_fn = nvrtcResult (*)(nvrtcProgram*, const char*, const char*, int,
                                    const char* const*, const char* const*);
  using destroy_fn = nvrtcResult (*)(nvrtcProgram*);
  using compile_fn = nvrtcResult (*)(nvrtcProgram, int, const char* const*);
  using size_fn = nvrtcResult (*)(nvrtcProgram, size_t*);
  using get_fn = nvrtcResult (*)(nvrtcProgram, char*);

  std::mutex mutex_;
  bool located_ = false, loaded_ = false;
  std::string path_;     // the file found by locate(), or the bare name for the system loader
  std::string identity_; // see identity()
  std::string reason_;
  void* lib_ = nullptr;
  int major_ = 0, minor_ = 0;
  std::vector<int> archs_;
  get_error_string_fn error_string_ = nullptr;
  create_fn create_ = nullptr;
  destroy_fn destroy_ = nullptr;
  compile_fn compile_ = nullptr;
  size_fn log_size_ = nullptr, cubin_size_ = nullptr, ptx_size_ = nullptr;
  get_fn log_ = nullptr, cubin_ = nullptr, ptx_ = nullptr;
};

// Splits a compiler option string on blank space, honouring "double quotes".
std::vector<std::string> split_options(std::string_view options);

} // namespace parenchyma::cuda
