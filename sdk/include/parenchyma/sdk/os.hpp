// parenchyma SDK: the few operating-system services that the core and the plugins share, one
// spelling for POSIX (Linux) and one for Windows, so that no other file needs an #ifdef for them:
// reading the environment and converting paths between the UTF-8 of the API and the operating
// system's own form (wide on Windows). Loading shared libraries is in library.hpp (it needs
// <windows.h>, which this header keeps out of every plugin).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(_WIN32)
#include <malloc.h>
#else
#include <sys/auxv.h>
#endif

namespace parenchyma::sdk::os {

// The file name ending of a shared library, and so of a plugin.
#if defined(_WIN32)
inline constexpr const char* shared_library_suffix = ".dll";
#else
inline constexpr const char* shared_library_suffix = ".so";
#endif

// ---- paths: UTF-8 in the API, the OS's own form at its boundary -----------------------------

// A path from UTF-8 text (on Windows the narrow fs::path constructor would read the text in
// the ANSI code page instead).
inline std::filesystem::path path_from_utf8(std::string_view s) {
  return std::filesystem::path(std::u8string(s.begin(), s.end()));
}

// A path as UTF-8 text (on Windows path::string() converts to the ANSI code page, which cannot
// hold every name and throws on some).
inline std::string utf8(const std::filesystem::path& p) {
  const std::u8string s = p.u8string();
  return std::string(s.begin(), s.end());
}

// UTF-8 <-> the wide text of Windows' API (UTF-16); on Linux wide() is not needed.
inline std::wstring wide(std::string_view s) { return path_from_utf8(s).wstring(); }
inline std::string narrow(std::wstring_view w) { return utf8(std::filesystem::path(w)); }

// ---- environment -----------------------------------------------------------------------------

// The value of an environment variable, or nullptr. On Linux, secure_getenv: nullptr in set-uid
// and set-gid processes, whose environment belongs to a less trusted user. Windows has no such
// processes (a program runs with the rights of the user who started it and reads that user's
// environment), so there it is getenv.
inline const char* secure_getenv(const char* name) noexcept {
#if defined(_WIN32)
  return std::getenv(name);
#else
  return ::secure_getenv(name);
#endif
}

// ---- memory ------------------------------------------------------------------------------------

// Memory aligned to `alignment` (a power of two; `size` a multiple of it), or nullptr; freed with
// aligned_free only. (Windows' C runtime has no aligned_alloc: its free() cannot release it.)
inline void* aligned_alloc(size_t alignment, size_t size) noexcept {
#if defined(_WIN32)
  return ::_aligned_malloc(size, alignment);
#else
  return std::aligned_alloc(alignment, size);
#endif
}

inline void aligned_free(void* p) noexcept {
#if defined(_WIN32)
  ::_aligned_free(p);
#else
  std::free(p);
#endif
}

// An environment variable as UTF-8, or nullopt when unset (on Windows, read as wide text: getenv
// gives the ANSI code page's form). Not for set-uid processes: the caller decides (secure()).
inline std::optional<std::string> getenv_utf8(const char* name) {
#if defined(_WIN32)
  const wchar_t* v = ::_wgetenv(wide(name).c_str());
  if (v == nullptr) return std::nullopt;
  return narrow(v);
#else
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
#endif
}

// Whether the process's environment must not be trusted: set-uid or set-gid on Linux
// (AT_SECURE). Windows has no such processes: false there.
inline bool secure_process() noexcept {
#if defined(_WIN32)
  return false;
#else
  return ::getauxval(AT_SECURE) != 0;
#endif
}

} // namespace parenchyma::sdk::os
