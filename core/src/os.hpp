// parenchyma core, private: the operating-system services of the core, behind one interface
// with one implementation per system (os_posix.cpp for Linux, os_windows.cpp for Windows), so
// that the loader, the config reader and the fork guard hold no #ifdef. What the core shares with
// the plugins (environment, shared libraries, UTF-8 paths, aligned memory) is in the SDK's
// parenchyma/sdk/os.hpp and library.hpp.
#pragma once

#include <parenchyma/sdk/library.hpp>
#include <parenchyma/sdk/os.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace parenchyma {
inline namespace v1 {
namespace detail::os {

using sdk::os::path_from_utf8;
using sdk::os::utf8;

// The file name ending of a plugin (".so", ".dll") and the separator of PARENCHYMA_PLUGIN_PATH
// (':' as in PATH on Linux, ';' as in PATH on Windows, where ':' follows every drive letter).
const char* plugin_suffix() noexcept;
char path_list_separator() noexcept;

// The tool that lists a library's dependencies, for the load report's advice ("ldd"; on
// Windows "objdump -p", which mingw and MSYS2 have).
const char* dependency_tool() noexcept;

// The folder holding the core library itself (dladdr; GetModuleHandleExW on Windows), or empty
// when it cannot be found.
std::filesystem::path core_library_dir();

// A process whose environment must not be trusted: set-uid or set-gid on Linux (AT_SECURE).
// Always false on Windows, which has no such processes (docs/platforms.md).
bool secure_process() noexcept;

// Why `p` (a plugin file or folder) is no trusted place to load code from, or nullopt when it
// is. The rules are each system's (docs/plugins.md, docs/platforms.md): on Linux, owner and
// mode bits of the path and each folder above it; on Windows, owner and ACL of the same.
std::optional<std::string> untrusted(const std::filesystem::path& p);

// What kind of file a path names (following links); `error` is set when it cannot be examined.
struct file_info {
  std::filesystem::file_type type = std::filesystem::file_type::none;
  std::string error; // empty, or the system's reason ("No such file or directory")
  bool missing = false;
};
file_info examine(const std::filesystem::path& p);
// "a regular file", "a directory", "a FIFO", ...
inline const char* describe(std::filesystem::file_type t) noexcept {
  switch (t) {
  case std::filesystem::file_type::regular: return "a regular file";
  case std::filesystem::file_type::directory: return "a directory";
  case std::filesystem::file_type::fifo: return "a FIFO";
  case std::filesystem::file_type::character: return "a character device";
  case std::filesystem::file_type::block: return "a block device";
  case std::filesystem::file_type::socket: return "a socket";
  default: return "not a regular file";
  }
}

// The whole of a regular file of at most `limit` bytes. A FIFO or device at the path is refused,
// not waited on. Throws std::runtime_error whose text completes "<file> ..." ("cannot be opened
// (reason)", "is a directory, not ...", "is N bytes, more than ...").
std::string read_regular_file(const std::filesystem::path& file, uint64_t limit,
                              const char* expected);

// The default folder of the kernel cache when neither PARENCHYMA_CACHE_DIR nor the config name
// one: $XDG_CACHE_HOME/parenchyma, else $HOME/.cache/parenchyma (Linux);
// %LOCALAPPDATA%\parenchyma\cache (Windows). Empty when the environment names no such place. `env`
// reads a variable.
std::string default_cache_dir(const std::function<std::optional<std::string>(const char*)>& env);

// Calls `child` in the child after each fork(); false where the system has no fork (Windows).
bool on_fork_child(void (*child)()) noexcept;

// Whether the process is ending and the system has already taken down what the core would tear
// down itself. On Windows, when ExitProcess unloads the core's DLL, the other threads are gone and
// every plugin DLL (loaded after the core) has already been detached: the global registry must
// then leave its plugins alone (calling into them hangs or crashes) and let the system reclaim
// the memory. Always false on Linux, where the exit handlers run before any library is unloaded.
bool process_ending() noexcept;

} // namespace detail::os
} // namespace v1
} // namespace parenchyma
