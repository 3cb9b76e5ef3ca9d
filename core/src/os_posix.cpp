// parenchyma core: the operating-system services of os.hpp for Linux (and other POSIX systems).
#include "os.hpp"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace parenchyma {
inline namespace v1 {
namespace detail::os {

namespace fs = std::filesystem;

const char* plugin_suffix() noexcept { return sdk::os::shared_library_suffix; }
char path_list_separator() noexcept { return ':'; }
const char* dependency_tool() noexcept { return "ldd"; }

fs::path core_library_dir() {
  try {
    // Any address inside this library names it.
    Dl_info info{};
    if (::dladdr(reinterpret_cast<const void*>(&core_library_dir), &info) == 0 ||
        info.dli_fname == nullptr)
      return {};
    const fs::path p = fs::path(info.dli_fname).parent_path();
    std::error_code ec;
    fs::path c = fs::weakly_canonical(fs::absolute(p, ec), ec);
    return ec ? p : c;
  } catch (...) {
    return {};
  }
}

bool secure_process() noexcept { return sdk::os::secure_process(); }

namespace {

// One path component as a place code is loaded from: owned by root or by us, and writable by
// nobody else — a directory writable by others is acceptable only with the sticky bit (as /tmp
// is: then nobody but an entry's owner can replace it, and each entry is checked in turn).
std::optional<std::string> untrusted_component(const fs::path& p, const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid != 0 && st.st_uid != me)
    return p.string() + " is owned by another user (uid " + std::to_string(st.st_uid) + ")";
  const bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & S_IWOTH) != 0 && !sticky_dir) return p.string() + " is writable by all users";
  if ((st.st_mode & S_IWGRP) != 0 && !sticky_dir)
    return p.string() + " is writable by its group (gid " + std::to_string(st.st_gid) + ")";
  return std::nullopt;
}

std::optional<std::string> untrusted_chain(const fs::path& abs) {
  for (fs::path cur = abs;; cur = cur.parent_path()) {
    struct stat st {};
    if (::stat(cur.c_str(), &st) != 0)
      return cur.string() + " cannot be examined (" + std::strerror(errno) + ")";
    if (auto why = untrusted_component(cur, st)) return why;
    if (!cur.has_relative_path()) break; // reached the root
  }
  return std::nullopt;
}

} // namespace

// ld.so's and sudo's rules for trusted paths: the path itself and every directory above it,
// both as written and with symbolic links resolved, must pass untrusted_component.
std::optional<std::string> untrusted(const fs::path& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec).lexically_normal();
  if (ec) return p.string() + ": " + ec.message();
  if (auto why = untrusted_chain(abs)) return why;
  const fs::path canon = fs::canonical(abs, ec);
  if (ec) return abs.string() + ": " + ec.message();
  if (canon != abs)
    if (auto why = untrusted_chain(canon)) return why;
  return std::nullopt;
}

file_info examine(const fs::path& p) {
  file_info f;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    const int err = errno;
    f.missing = err == ENOENT;
    f.error = std::strerror(err);
    f.type = fs::file_type::not_found;
    return f;
  }
  f.type = S_ISREG(st.st_mode)    ? fs::file_type::regular
           : S_ISDIR(st.st_mode)  ? fs::file_type::directory
           : S_ISFIFO(st.st_mode) ? fs::file_type::fifo
           : S_ISCHR(st.st_mode)  ? fs::file_type::character
           : S_ISBLK(st.st_mode)  ? fs::file_type::block
           : S_ISSOCK(st.st_mode) ? fs::file_type::socket
                                  : fs::file_type::unknown;
  return f;
}

std::string read_regular_file(const fs::path& file, uint64_t limit, const char* expected) {
  // Opened non-blocking, so a FIFO or device at the path is refused instead of hanging.
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(std::string("cannot be opened (") + std::strerror(errno) + ")");
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw std::runtime_error(std::string("cannot be examined: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)                          ? "a directory"
                       : S_ISFIFO(st.st_mode)                       ? "a FIFO"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                                                                    : "not a regular file";
    throw std::runtime_error(std::string("is ") + what + ", not " + expected +
                             ": point it at a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > limit)
    throw std::runtime_error("is " + std::to_string(st.st_size) + " bytes, more than the " +
                             std::to_string(limit) + " a config file may have");
  std::string text;
  text.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("cannot be read: ") + std::strerror(errno));
    if (n == 0) break; // shrank while we read: use what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

std::string default_cache_dir(const std::function<std::optional<std::string>(const char*)>& env) {
  if (auto x = env("XDG_CACHE_HOME"); x && !x->empty()) return *x + "/parenchyma";
  if (auto home = env("HOME"); home && !home->empty()) return *home + "/.cache/parenchyma";
  return {};
}

bool on_fork_child(void (*child)()) noexcept {
  return ::pthread_atfork(nullptr, nullptr, child) == 0;
}

bool process_ending() noexcept { return false; }

} // namespace detail::os
} // namespace v1
} // namespace parenchyma
