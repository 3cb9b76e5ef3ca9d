// Finds, loads and calls NVRTC (see nvrtc_loader.hpp).
#include "nvrtc_loader.hpp"

#include "cuda_loader.hpp"

#include <parenchyma/sdk/library.hpp>

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <filesystem>

namespace parenchyma::cuda {

namespace {
#if defined(_WIN32)
constexpr const char* library_names[] = {"nvrtc64_130_0.dll", "nvrtc64_120_0.dll"};
constexpr char list_separator = ';';
constexpr const char* library_path_variable = "PATH";
constexpr const char* toolkit_library_dir = "/bin";
#else
constexpr const char* library_names[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
constexpr char list_separator = ':';
constexpr const char* library_path_variable = "LD_LIBRARY_PATH";
constexpr const char* toolkit_library_dir = "/lib64";
#endif

std::vector<std::string> search_dirs(const sdk::settings& settings) {
  std::vector<std::string> dirs;
  auto add_list = [&](const std::string& list) {
    size_t start = 0;
    while (start <= list.size()) {
      const size_t end = std::min(list.find(list_separator, start), list.size());
      if (end > start) dirs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  };
  add_list(safe_getenv(library_path_variable));
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const std::string root = settings.get(var);
    if (!root.empty()) dirs.push_back(root + toolkit_library_dir);
  }
#if !defined(_WIN32)
  for (const char* d : {"/usr/local/cuda/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64",
                        "/usr/lib/aarch64-linux-gnu", "/usr/lib"})
    dirs.emplace_back(d);
#endif
  return dirs;
}
} // namespace

std::vector<std::string> split_options(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false, any = false;
  for (char c : s) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
      if (any) out.push_back(std::move(cur));
      cur.clear();
      any = false;
    } else {
      cur += c;
      any = true;
    }
  }
  if (any) out.push_back(std::move(cur));
  return out;
}

nvrtc::~nvrtc() {
  // NVRTC stays loaded for the life of the process: it keeps allocations of its own that outlive
  // any program, and reloading it is the expensive part of a cold start. (Like libcuda.)
}

void nvrtc::locate() {
  if (located_) return;
  located_ = true;
  const std::string forced = settings_.get("PARENCHYMA_NVRTC");
  std::vector<std::string> candidates;
  if (!forced.empty()) {
    candidates.push_back(forced);
  } else {
    const auto dirs = search_dirs(settings_);
    for (const char* name : library_names)
      for (const auto& d : dirs)
        candidates.push_back(d + "/" + name);
  }
  for (const auto& c : candidates) {
#if defined(_WIN32)
    // The file's canonical path, size and time (the same identity as below, from std::filesystem).
    std::error_code ec;
    const std::filesystem::path p = sdk::os::path_from_utf8(c);
    if (!std::filesystem::is_regular_file(p, ec)) continue;
    const auto size = std::filesystem::file_size(p, ec);
    const auto time = std::filesystem::last_write_time(p, ec).time_since_epoch().count();
    const auto canon = std::filesystem::canonical(p, ec);
    path_ = c;
    identity_ = sdk::str(ec ? c : sdk::os::utf8(canon), ":", static_cast<long long>(size), ":",
                         static_cast<long long>(time));
#else
    struct stat st {};
    if (::stat(c.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    char real[PATH_MAX];
    const char* rp = ::realpath(c.c_str(), real);
    path_ = c;
    identity_ = sdk::str(rp ? rp : c.c_str(), ":", static_cast<long long>(st.st_size), ":",
                         static_cast<long long>(st.st_mtim.tv_sec), ".",
                         static_cast<long long>(st.st_mtim.tv_nsec));
#endif
    return;
  }
  if (!forced.empty()) {
    reason_ = sdk::str(forced, " (PARENCHYMA_NVRTC) does not exist");
    return;
  }
  path_.clear(); // not on disk where we look: the system loader may still know it (load()).
}

std::string nvrtc::identity() {
  std::lock_guard lock(mutex_);
  locate();
  if (identity_.empty() && reason_.empty()) {
    load();
    if (loaded_) identity_ = sdk::str("nvrtc ", major_, ".", minor_);
  }
  return identity_;
}

void nvrtc::load() {
  if (loaded_ || lib_ != nullptr) return;
  locate();
  if (!reason_.empty() && path_.empty()) return;
  std::string dl_error;
  // Never unloaded (~nvrtc): release() keeps the system's handle.
  if (!path_.empty()) {
    sdk::os::library l;
    if (const std::string e = l.open(sdk::os::path_from_utf8(path_)); !e.empty())
      dl_error = sdk::str(path_, ": ", e);
    else
      lib_ = l.release();
  } else {
    for (const char* name : library_names) {
      sdk::os::library l;
      if (l.open(name).empty()) {
        lib_ = l.release();
        path_ = name;
        break;
      }
    }
  }
  if (lib_ == nullptr) {
    reason_ = sdk::str(library_names[0],
                       " not found: install the CUDA NVRTC runtime "
                       "(cuda-nvrtc-13-0, or put its directory in ",
                       library_path_variable, ")");
    if (!dl_error.empty()) reason_ += sdk::str("; ", dl_error);
    return;
  }
  auto sym = [&](const char* name) {
    void* p = sdk::os::library::find(lib_, name);
    if (p == nullptr && reason_.empty())
      reason_ = sdk::str(path_, " lacks ", name, ": install a complete CUDA NVRTC runtime");
    return p;
  };
  error_string_ = reinterpret_cast<get_error_string_fn>(sym("nvrtcGetErrorString"));
  auto version = reinterpret_cast<version_fn>(sym("nvrtcVersion"));
  auto num_archs = reinterpret_cast<num_archs_fn>(sym("nvrtcGetNumSupportedArchs"));
  auto archs = reinterpret_cast<archs_fn>(sym("nvrtcGetSupportedArchs"));
  create_ = reinterpret_cast<create_fn>(sym("nvrtcCreateProgram"));
  destroy_ = reinterpret_cast<destroy_fn>(sym("nvrtcDestroyProgram"));
  compile_ = reinterpret_cast<compile_fn>(sym("nvrtcCompileProgram"));
  log_size_ = reinterpret_cast<size_fn>(sym("nvrtcGetProgramLogSize"));
  log_ = reinterpret_cast<get_fn>(sym("nvrtcGetProgramLog"));
  cubin_size_ = reinterpret_cast<size_fn>(sym("nvrtcGetCUBINSize"));
  cubin_ = reinterpret_cast<get_fn>(sym("nvrtcGetCUBIN"));
  ptx_size_ = reinterpret_cast<size_fn>(sym("nvrtcGetPTXSize"));
  ptx_ = reinterpret_cast<get_fn>(sym("nvrtcGetPTX"));
  if (!reason_.empty()) return;
  version(&major_, &minor_);
  int n = 0;
  if (num_archs(&n) == NVRTC_SUCCESS && n > 0) {
    archs_.resize(static_cast<size_t>(n));
    if (archs(archs_.data()) != NVRTC_SUCCESS) archs_.clear();
  }
  loaded_ = true;
}

bool nvrtc::available() {
  std::lock_guard lock(mutex_);
  load();
  return loaded_;
}

const std::string& nvrtc::reason() {
  std::lock_guard lock(mutex_);
  load();
  return reason_;
}

std::string nvrtc::version() {
  std::lock_guard lock(mutex_);
  load();
  return loaded_ ? sdk::str(major_, ".", minor_) : std::string();
}

nvrtc::output nvrtc::compile(std::string_view source, const std::vector<std::string>& options,
                             int cc) {
  std::lock_guard lock(mutex_);
  load();
  if (!loaded_) sdk::fail(PCY_ERR_UNAVAILABLE, reason_);

  // The exact architecture when this NVRTC knows it; otherwise PTX for the newest one it knows
  // below it, which the driver compiles at load time (slower, so the caller logs it).
  output out;
  int target = cc;
  bool exact = archs_.empty();
  for (int a : archs_)
    exact |= (a == cc);
  if (!exact) {
    target = 0;
    for (int a : archs_)
      if (a <= cc && a > target) target = a;
    if (target == 0)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("NVRTC ", major_, ".", minor_, " cannot compile for compute capability ",
                         cc / 10, ".", cc % 10, " or any older one: install a matching NVRTC"));
  }
  out.cubin = exact;
  out.target = sdk::str(exact ? "sm_" : "compute_", target);

  std::vector<const char*> argv;
  std::string arch_option = "--gpu-architecture=" + out.target;
  argv.push_back(arch_option.c_str());
  for (const auto& o : options) {
    if (o.rfind("--gpu-architecture", 0) == 0 || o.rfind("-arch", 0) == 0)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("option '", o,
                         "': the CUDA plugin compiles for the device's own "
                         "architecture; remove the option"));
    argv.push_back(o.c_str());
  }

  const std::string src(source); // NVRTC wants NUL-terminated text
  nvrtcProgram prog = nullptr;
  nvrtcResult r = create_(&prog, src.c_str(), "parenchyma_program.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS)
    sdk::fail(PCY_ERR_BUILD, sdk::str("nvrtcCreateProgram: ", error_string_(r)));
  struct destroyer {
    destroy_fn f;
    nvrtcProgram* p;
    ~destroyer() { f(p); }
  } guard{destroy_, &prog};

  r = compile_(prog, static_cast<int>(argv.size()), argv.data());
  size_t log_size = 0;
  if (log_size_(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    log_(prog, out.log.data());
    while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n'))
      out.log.pop_back();
  }
  if (r != NVRTC_SUCCESS) {
    std::string all;
    for (const auto* a : argv)
      all += sdk::str(all.empty() ? "" : " ", a);
    sdk::fail(PCY_ERR_BUILD,
              sdk::str("NVRTC ", major_, ".", minor_, " failed to compile for ", out.target, " (",
                       error_string_(r), ") with options [", all, "]:\n", out.log));
  }
  size_t size = 0;
  r = exact ? cubin_size_(prog, &size) : ptx_size_(prog, &size);
  if (r != NVRTC_SUCCESS || size == 0)
    sdk::fail(PCY_ERR_BUILD,
              sdk::str("NVRTC produced no ", exact ? "cubin" : "PTX", ": ", error_string_(r)));
  out.image.resize(size);
  r = exact ? cubin_(prog, out.image.data()) : ptx_(prog, out.image.data());
  if (r != NVRTC_SUCCESS)
    sdk::fail(PCY_ERR_BUILD, sdk::str("NVRTC could not return the image: ", error_string_(r)));
  return out;
}

} // namespace parenchyma::cuda
