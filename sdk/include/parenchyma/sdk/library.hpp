// parenchyma SDK: loading a shared library (.so / .dll) and finding its symbols, for the core's
// plugin loader and for plugins that load their vendor library at run time; one spelling for
// POSIX (dlopen) and one for Windows (LoadLibraryExW), with each system's own error text.
#pragma once

#include <parenchyma/sdk/os.hpp>

#include <cwchar>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <dlfcn.h>
#include <unistd.h> // environ
#endif

namespace parenchyma::sdk::os {

#if defined(_WIN32)
// Windows' own text for an error code (FormatMessageW), without the trailing line break.
inline std::string error_text(unsigned long code) {
  wchar_t* buf = nullptr;
  const DWORD n = ::FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                       FORMAT_MESSAGE_IGNORE_INSERTS,
                                   nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
  std::string text = n > 0 && buf != nullptr ? narrow(std::wstring_view(buf, n)) : std::string();
  if (buf != nullptr) ::LocalFree(buf);
  while (!text.empty() &&
         (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '.'))
    text.pop_back();
  // Templates keep their inserts unfilled (ERROR_BAD_EXE_FORMAT: "%1 is not a valid Win32
  // application"); the report names the file beside this text.
  for (size_t at = text.find("%1"); at != std::string::npos; at = text.find("%1", at))
    text.replace(at, 2, "the file");
  if (text.empty()) text = "Windows error";
  return text + " (error " + std::to_string(code) + ")";
}
#endif

// The whole process environment as UTF-8 name/value pairs (Windows: GetEnvironmentStringsW, the
// wide block itself; the C runtime's _wenviron may not have been made yet).
inline std::vector<std::pair<std::string, std::string>> environment_utf8() {
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](std::string kv) {
    const size_t eq = kv.find('=', 1); // Windows keeps "=C:=C:\\dir" entries: not variables
    if (!kv.empty() && kv[0] != '=' && eq != std::string::npos)
      out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  };
#if defined(_WIN32)
  wchar_t* block = ::GetEnvironmentStringsW();
  for (const wchar_t* e = block; e != nullptr && *e != L'\0'; e += std::wcslen(e) + 1)
    add(narrow(e));
  if (block != nullptr) ::FreeEnvironmentStringsW(block);
#else
  for (char** e = ::environ; e != nullptr && *e != nullptr; ++e)
    add(*e);
#endif
  return out;
}

// The vendor libraries that plugins load at run time, by their name on this system.
#if defined(_WIN32)
inline constexpr const char* cuda_driver_library = "nvcuda.dll";
inline constexpr const char* opencl_library = "OpenCL.dll";
inline constexpr const char* vulkan_library = "vulkan-1.dll";
#else
inline constexpr const char* cuda_driver_library = "libcuda.so.1";
inline constexpr const char* opencl_library = "libOpenCL.so.1";
inline constexpr const char* vulkan_library = "libvulkan.so.1";
#endif

// ---- shared libraries --------------------------------------------------------------------------

// A loaded shared library (.so / .dll), unloaded when destroyed. Symbols resolve at load time
// (RTLD_NOW) and stay local to it (RTLD_LOCAL); on Windows both are how LoadLibrary works.
class library {
public:
  library() = default;
  library(const library&) = delete;
  library& operator=(const library&) = delete;
  library(library&& o) noexcept { *this = std::move(o); }
  library& operator=(library&& o) noexcept {
    if (this != &o) {
      close();
      h_ = std::exchange(o.h_, nullptr);
#if defined(_WIN32)
      keep_ = o.keep_;
#endif
    }
    return *this;
  }
  ~library() { close(); }

  // Loads `path` (a file path, or a bare name the system searches for). Returns "" on success,
  // else the system's own reason (dlerror; FormatMessageW on Windows). `keep_loaded`: the code
  // stays mapped after close() (RTLD_NODELETE; on Windows close() then leaves it loaded), for
  // libraries whose threads or exit handlers outlive our use of them (OpenCL ICD drivers).
  std::string open(const std::filesystem::path& path, bool keep_loaded = false) {
    close();
#if defined(_WIN32)
    // A path with a folder: its own folder is searched for its dependencies first (this needs
    // an absolute path).
    std::filesystem::path file = path;
    std::error_code ec;
    if (path.has_parent_path() && !path.is_absolute()) file = std::filesystem::absolute(path, ec);
    const DWORD flags = file.has_parent_path() ? LOAD_WITH_ALTERED_SEARCH_PATH : 0;
    // No "insert the disk" or "bad image" message boxes for a broken plugin.
    DWORD old_mode = 0;
    const bool have_mode =
        ::SetThreadErrorMode(SEM_FAILCRITICALERRORS | SEM_NOOPENFILEERRORBOX, &old_mode) != 0;
    h_ = ::LoadLibraryExW(file.c_str(), nullptr, flags);
    const DWORD err = ::GetLastError();
    if (have_mode) ::SetThreadErrorMode(old_mode, nullptr);
    keep_ = keep_loaded;
    return h_ != nullptr ? std::string() : error_text(err);
#else
    ::dlerror();
    h_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | (keep_loaded ? RTLD_NODELETE : 0));
    if (h_ != nullptr) return {};
    const char* e = ::dlerror();
    return e != nullptr ? std::string(e) : std::string("dlopen failed");
#endif
  }

  // Loads a library already in the process only (RTLD_NOLOAD; GetModuleHandle): "" on success.
  std::string open_loaded(const char* name) {
    close();
#if defined(_WIN32)
    HMODULE m = nullptr;
    if (::GetModuleHandleExW(0, wide(name).c_str(), &m) == 0) return error_text(::GetLastError());
    h_ = m; // a reference of our own, released by close()
    keep_ = false;
    return {};
#else
    h_ = ::dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return h_ != nullptr ? std::string() : std::string(name) + " is not loaded";
#endif
  }

  bool loaded() const noexcept { return h_ != nullptr; }

  // The address of an exported symbol, or nullptr.
  void* symbol(const char* name) const noexcept {
    if (h_ == nullptr) return nullptr;
#if defined(_WIN32)
    return reinterpret_cast<void*>(::GetProcAddress(static_cast<HMODULE>(h_), name));
#else
    return ::dlsym(h_, name);
#endif
  }

  template <class F> F function(const char* name) const noexcept {
    return reinterpret_cast<F>(symbol(name));
  }

  void close() noexcept {
    if (h_ == nullptr) return;
#if defined(_WIN32)
    if (!keep_) ::FreeLibrary(static_cast<HMODULE>(h_));
#else
    ::dlclose(h_);
#endif
    h_ = nullptr;
  }

  // Forgets the library without unloading it (it stays for the rest of the process).
  void leak() noexcept { h_ = nullptr; }
  // The same, returning the system's handle (dlopen's; an HMODULE on Windows) for find().
  void* release() noexcept { return reinterpret_cast<void*>(std::exchange(h_, nullptr)); }

  // A symbol of a library held by its system handle (from release()), or nullptr.
  static void* find(void* handle, const char* name) noexcept {
    if (handle == nullptr) return nullptr;
#if defined(_WIN32)
    return reinterpret_cast<void*>(::GetProcAddress(static_cast<HMODULE>(handle), name));
#else
    return ::dlsym(handle, name);
#endif
  }

private:
#if defined(_WIN32)
  HMODULE h_ = nullptr;
  bool keep_ = false;
#else
  void* h_ = nullptr;
#endif
};

} // namespace parenchyma::sdk::os
