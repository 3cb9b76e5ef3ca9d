// parenchyma SDK: the on-disk cache of compiled kernels that plugins share (OpenCL binaries, CUDA
// cubins, or any blob a plugin can rebuild). Header-only, POSIX and Windows (the file calls go
// through detail::blob_io below); a plugin includes it and links nothing. docs/plugin-guide.md
// ("Kernel cache") says how a plugin uses it.
//
// Layout: <root>/<kind>/<64 hex digits of the key><entry_suffix>. The key is a SHA-256 the plugin
// computes over everything that changes its compiler's output. An entry file is
//
//   offset size
//        0    8  magic "PCYBLOB\0"
//        8    4  format version (u32, little-endian)
//       12    4  header size, 104 (u32)
//       16   16  kind, NUL-padded ("opencl", "cuda"): one plugin never reads another's entries
//       32   32  the key
//       64    8  payload size (u64)
//       72   32  SHA-256 over bytes 0..71 AND the payload: it covers the header and the key, so
//                an entry copied to another key's name, or with its key field patched, is refused
//      104       the payload
//
// Reading never trusts the file: the name is lstat()ed and opened O_RDONLY | O_NONBLOCK |
// O_NOFOLLOW | O_CLOEXEC, the descriptor fstat()ed; anything but a regular file (symlink, FIFO,
// socket, device, directory) and any file larger than the size limit is refused before a byte
// is read, and reading is a loop bounded by the size fstat() gave. A refused entry is a miss,
// logged at WARN once per entry path per process. Removal policy: a refused REGULAR file is
// unlinked (after checking that the name still refers to the inode we examined); anything else
// is left where it is, since we did not create it and unlink() on a name someone else controls
// is their business. The rebuild's rename() then replaces that name with a regular entry anyway
// (rename replaces the name and follows nothing), except a directory, which keeps that one key
// uncached.
//
// Writing: a temporary file in the same directory (<hex>.tmp.<pid>.<serial>, O_CREAT | O_EXCL)
// renamed into place, so a reader in any process sees a whole entry or none. The first failure
// that is about the directory (cannot be created, is a file, read-only, disk full: ENOSPC, EFBIG)
// removes the temporary, logs ONE warning per directory per process saying what to do, and turns
// writing off for this cache; the plugin goes on without caching. Temporaries older than an hour
// (their writer was killed) are swept at the first write, once per directory per process. There
// is no fsync: a crash may leave a damaged entry, which the checksum refuses.
//
// Background writes: store_later() runs on one writer thread per cache, started at the first
// store_later (no thread when nothing is written), because fetching a program's binaries can cost
// as much as the build and the first op must not wait for it. A load of a key whose write is
// pending in this process waits for that write. The destructor finishes every pending write and
// joins the thread, so a plugin's shutdown completes its writes, and nothing is logged from the
// writer after the destructor returned.
//
// A fetch function runs on the writer thread, at any time until the destructor returns — also
// while the process is exiting and other libraries run their static destructors. It must not
// call into a driver or compiler (PoCL generating code in LLVM while exit() tears LLVM down
// crashes the process): take the bytes from the driver on the thread that built the program and
// pass them to store_later(key, payload). A fetch may compute from data it owns.
//
// Threads: every member function may be called from any thread at once. No public function
// throws; none blocks forever (only a load of a key pending in this process waits, for that
// write). A forked child must not use its parent's cache object (its writer thread does not
// exist there): construct another. The static format helpers (pack, unpack, encode, verify)
// throw only std::bad_alloc.
#pragma once

#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/sha256.hpp>

#include <parenchyma/sdk/os.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#if defined(_WIN32)
#include <io.h>
#include <process.h>
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#else
#include <unistd.h>
#endif

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace parenchyma::sdk {

namespace detail {

// What the caches of one plugin library share in a process: which directories were swept or
// warned about, which entries were reported, the temporary-file serial. A static of the plugin
// library, destroyed when it is unloaded (not leaked: a leaked block would be reported by
// LeakSanitizer once the library holding its pointer is unmapped). Every blob_cache asks for it
// in its constructor, so it is constructed before, and destroyed after, any cache (even a
// static one).
struct blob_cache_process {
  std::mutex mu;
  std::set<std::string> seen;
  std::atomic<uint64_t> serial{0};
};
inline blob_cache_process& blob_cache_state() noexcept {
  static blob_cache_process state;
  return state;
}
// True the first time `what` is asked about in this process.
inline bool blob_cache_first(std::string what) {
  auto& s = blob_cache_state();
  std::lock_guard lock(s.mu);
  return s.seen.insert(std::move(what)).second;
}

// The file calls of the cache, one spelling per system. Windows: wide paths (UTF-8 in), 64-bit
// sizes, binary mode, handles not inherited, and rename replacing an existing entry
// (MoveFileExW); it has no O_NOFOLLOW, O_NONBLOCK or lstat: a symbolic link or junction at an
// entry's name is followed there (creating one needs a privilege an ordinary user lacks), and the
// same-file check before deleting a refused entry compares sizes and times only.
namespace blob_io {
#if defined(_WIN32)
using stat_t = struct _stat64;
inline int stat(const std::string& p, stat_t& st) noexcept {
  return ::_wstat64(os::wide(p).c_str(), &st);
}
inline int lstat(const std::string& p, stat_t& st) noexcept { return stat(p, st); }
inline int fstat(int fd, stat_t& st) noexcept { return ::_fstat64(fd, &st); }
inline int open_read(const std::string& p) noexcept {
  return ::_wopen(os::wide(p).c_str(), _O_RDONLY | _O_BINARY | _O_NOINHERIT);
}
inline int create_new(const std::string& p) noexcept {
  return ::_wopen(os::wide(p).c_str(), _O_WRONLY | _O_CREAT | _O_EXCL | _O_BINARY | _O_NOINHERIT,
                  _S_IREAD | _S_IWRITE);
}
inline long long read(int fd, void* b, size_t n) noexcept {
  return ::_read(fd, b, static_cast<unsigned>(std::min<size_t>(n, 1u << 30)));
}
inline long long write(int fd, const void* b, size_t n) noexcept {
  return ::_write(fd, b, static_cast<unsigned>(std::min<size_t>(n, 1u << 30)));
}
inline int close(int fd) noexcept { return ::_close(fd); }
inline int unlink(const std::string& p) noexcept { return ::_wunlink(os::wide(p).c_str()); }
inline int rename(const std::string& from, const std::string& to) noexcept {
  if (::MoveFileExW(os::wide(from).c_str(), os::wide(to).c_str(), MOVEFILE_REPLACE_EXISTING) != 0)
    return 0;
  const DWORD e = ::GetLastError();
  errno = e == ERROR_ACCESS_DENIED ? EISDIR : e == ERROR_ALREADY_EXISTS ? EEXIST : EIO;
  return -1;
}
inline long pid() noexcept { return static_cast<long>(::_getpid()); }
inline bool same_file(const stat_t& a, const stat_t& b) noexcept {
  return a.st_size == b.st_size && a.st_mtime == b.st_mtime && a.st_ctime == b.st_ctime;
}
inline bool is_link(unsigned) noexcept { return false; }
inline bool is_socket(unsigned) noexcept { return false; }
inline bool is_block(unsigned) noexcept { return false; }
#else
using stat_t = struct ::stat;
inline int stat(const std::string& p, stat_t& st) noexcept { return ::stat(p.c_str(), &st); }
inline int lstat(const std::string& p, stat_t& st) noexcept { return ::lstat(p.c_str(), &st); }
inline int fstat(int fd, stat_t& st) noexcept { return ::fstat(fd, &st); }
inline int open_read(const std::string& p) noexcept {
  return ::open(p.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
}
inline int create_new(const std::string& p) noexcept {
  return ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
}
inline long long read(int fd, void* b, size_t n) noexcept { return ::read(fd, b, n); }
inline long long write(int fd, const void* b, size_t n) noexcept { return ::write(fd, b, n); }
inline int close(int fd) noexcept { return ::close(fd); }
inline int unlink(const std::string& p) noexcept { return ::unlink(p.c_str()); }
inline int rename(const std::string& from, const std::string& to) noexcept {
  return ::rename(from.c_str(), to.c_str());
}
inline long pid() noexcept { return static_cast<long>(::getpid()); }
inline bool same_file(const stat_t& a, const stat_t& b) noexcept {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}
inline bool is_link(unsigned m) noexcept { return S_ISLNK(m); }
inline bool is_socket(unsigned m) noexcept { return S_ISSOCK(m); }
inline bool is_block(unsigned m) noexcept { return S_ISBLK(m); }
#endif
} // namespace blob_io

inline void put_le(unsigned char* p, uint64_t v, int bytes) noexcept {
  for (int i = 0; i < bytes; ++i)
    p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline uint64_t get_le(const unsigned char* p, int bytes) noexcept {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// Closes a descriptor on every path out.
struct blob_fd {
  int fd = -1;
  ~blob_fd() {
    if (fd >= 0) blob_io::close(fd);
  }
};

inline const char* file_type_name(unsigned m) noexcept {
  if (blob_io::is_link(m)) return "a symbolic link";
  if (S_ISFIFO(m)) return "a FIFO";
  if (blob_io::is_socket(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (blob_io::is_block(m)) return "a block device";
  if (S_ISDIR(m)) return "a directory";
  return "not a regular file";
}

} // namespace detail

class blob_cache {
public:
  using key_type = sha256::digest;
  using blob = std::vector<unsigned char>;
  // Produces the payload on the writer thread; nullopt (or an exception): nothing is written.
  using fetch_fn = std::function<std::optional<blob>()>;

  static constexpr uint32_t format_version = 1;
  static constexpr size_t header_size = 104;
  static constexpr size_t max_kind_size = 15;
  static constexpr uint64_t default_max_entry_size = uint64_t(256) << 20; // whole file, bytes
  static constexpr std::string_view entry_suffix = ".pcyblob";
  static constexpr unsigned char magic[8] = {'P', 'C', 'Y', 'B', 'L', 'O', 'B', '\0'};
  static constexpr int stale_temporary_seconds = 3600;

  // root: the host's cache_dir (NULL or empty: the cache is disabled; every load misses).
  // kind: [a-z0-9_-], 1 to 15 characters; names the subdirectory and is checked in every entry.
  // log: copied; its host services must outlive this object.
  blob_cache(const char* root, std::string_view kind, const logger& log,
             uint64_t max_entry_size = default_max_entry_size) noexcept
      : log_(log), max_entry_size_(max_entry_size) {
    (void)detail::blob_cache_state(); // outlives this cache (see blob_cache_process)
    try {
      if (root == nullptr || *root == '\0') return;
      if (!valid_kind(kind)) {
        warn("kernel cache: kind '", kind,
             "' is not 1 to 15 characters of [a-z0-9_-]; caching is off");
        return;
      }
      kind_ = std::string(kind);
      dir_ = (std::filesystem::path(root) / kind_).string();
    } catch (...) {
      dir_.clear();
    }
  }

  // Finishes the pending writes and joins the writer thread.
  ~blob_cache() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      if (detail::blob_io::pid() == writer_pid_)
        thread_.join();
      else
        thread_.detach(); // a forked child: the thread is not in this process
    }
  }
  blob_cache(const blob_cache&) = delete;
  blob_cache& operator=(const blob_cache&) = delete;

  bool enabled() const noexcept { return !dir_.empty(); }
  bool writable() const noexcept { return enabled() && writable_.load(std::memory_order_relaxed); }
  const std::string& directory() const noexcept { return dir_; } // <root>/<kind>, or empty
  const std::string& kind() const noexcept { return kind_; }
  uint64_t max_entry_size() const noexcept { return max_entry_size_; }
  // The file an entry for `key` lives in (empty when disabled, or out of memory).
  std::string path(const key_type& key) const noexcept {
    try {
      return enabled() ? dir_ + "/" + sha256::hex(key) + std::string(entry_suffix) : std::string();
    } catch (...) {
      return {};
    }
  }

  // The payload of an intact entry for `key`; nullopt on a miss or a refused entry (see the top
  // of this file). Waits for a write of `key` still pending in this process.
  std::optional<blob> load(const key_type& key) noexcept {
    if (!enabled()) return std::nullopt;
    try {
      wait_pending(key);
      const std::string file = path(key);
      detail::blob_io::stat_t st{};
      refusal r;
      auto data = read_entry(file, st, r);
      if (data && verify(*data, kind_, key, r.why)) {
        data->erase(data->begin(), data->begin() + header_size);
        return data;
      }
      if (!r.why.empty()) refuse(file, st, r);
      return std::nullopt;
    } catch (...) {
      return std::nullopt;
    }
  }

  // Writes an entry now, on the calling thread; false when it was not written.
  bool store(const key_type& key, std::span<const unsigned char> payload) noexcept {
    return write_entry(key, payload);
  }
  // Writes an entry on the writer thread: `payload` as given, or what `fetch` returns there.
  void store_later(const key_type& key, blob payload) noexcept {
    enqueue(key, std::move(payload), nullptr);
  }
  void store_later(const key_type& key, fetch_fn fetch) noexcept {
    enqueue(key, {}, std::move(fetch));
  }
  // Waits until every write this cache has pending is done.
  void flush() noexcept {
    try {
      std::unique_lock lock(mu_);
      if (!thread_.joinable() || detail::blob_io::pid() != writer_pid_) return;
      cv_.wait(lock, [&] { return pending_.empty(); });
    } catch (...) {
    }
  }
  // Deletes the entry for `key` (the plugin's driver refused what load returned).
  void remove(const key_type& key) noexcept {
    try {
      if (enabled()) detail::blob_io::unlink(path(key)); // removes the name; follows nothing
    } catch (...) {
    }
  }

  // ---- the file format, for plugins with several blobs per entry and for tests ----------------

  // A multi-part payload (one binary per device): u32 count, then per part u64 size and bytes.
  static blob pack(std::span<const blob> parts) {
    size_t total = 4;
    for (const auto& p : parts)
      total += 8 + p.size();
    blob out(total);
    unsigned char* at = out.data();
    detail::put_le(at, parts.size(), 4);
    at += 4;
    for (const auto& p : parts) {
      detail::put_le(at, p.size(), 8);
      if (!p.empty()) std::memcpy(at + 8, p.data(), p.size());
      at += 8 + p.size();
    }
    return out;
  }
  static std::optional<std::vector<blob>> unpack(std::span<const unsigned char> payload,
                                                 std::string& why) {
    if (payload.size() < 4) {
      why = "multi-part payload shorter than its count";
      return std::nullopt;
    }
    const uint64_t count = detail::get_le(payload.data(), 4);
    size_t at = 4;
    std::vector<blob> parts;
    for (uint64_t i = 0; i < count; ++i) {
      if (payload.size() - at < 8) {
        why = str("multi-part payload ends inside the size of part ", i);
        return std::nullopt;
      }
      const uint64_t n = detail::get_le(payload.data() + at, 8);
      at += 8;
      if (n > payload.size() - at) {
        why = str("part ", i, " claims ", n, " bytes, ", payload.size() - at, " are left");
        return std::nullopt;
      }
      parts.emplace_back(payload.begin() + static_cast<std::ptrdiff_t>(at),
                         payload.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
    }
    if (at != payload.size()) {
      why = str(payload.size() - at, " bytes after the last part");
      return std::nullopt;
    }
    return parts;
  }

  // A whole entry file.
  static blob encode(std::string_view kind, const key_type& key,
                     std::span<const unsigned char> payload) {
    blob out(header_size + payload.size());
    unsigned char* h = out.data();
    std::memcpy(h, magic, sizeof magic);
    detail::put_le(h + 8, format_version, 4);
    detail::put_le(h + 12, header_size, 4);
    std::memcpy(h + 16, kind.data(), std::min(kind.size(), max_kind_size));
    std::memcpy(h + 32, key.data(), key.size());
    detail::put_le(h + 64, payload.size(), 8);
    if (!payload.empty()) std::memcpy(h + header_size, payload.data(), payload.size());
    const auto sum = checksum(out);
    std::memcpy(h + 72, sum.data(), sum.size());
    return out;
  }
  // Whether `file` is an intact entry of this kind for this key; if not, `why` says what is wrong.
  static bool verify(std::span<const unsigned char> file, std::string_view kind,
                     const key_type& key, std::string& why) {
    const unsigned char* h = file.data();
    if (file.size() < header_size) {
      why =
          str("truncated: ", file.size(), " bytes, shorter than the ", header_size, "-byte header");
      return false;
    }
    if (std::memcmp(h, magic, sizeof magic) != 0) {
      why = "bad magic (not a parenchyma cache entry)";
      return false;
    }
    if (detail::get_le(h + 8, 4) != format_version) {
      why =
          str("format version ", detail::get_le(h + 8, 4), ", this plugin reads ", format_version);
      return false;
    }
    if (detail::get_le(h + 12, 4) != header_size) {
      why = str("header size ", detail::get_le(h + 12, 4), ", expected ", header_size);
      return false;
    }
    unsigned char want_kind[16] = {};
    std::memcpy(want_kind, kind.data(), std::min(kind.size(), max_kind_size));
    if (std::memcmp(h + 16, want_kind, sizeof want_kind) != 0) {
      why = "entry of another kind (another plugin's cache)";
      return false;
    }
    if (std::memcmp(h + 32, key.data(), key.size()) != 0) {
      why = "key mismatch (an entry of another program)";
      return false;
    }
    const uint64_t size = detail::get_le(h + 64, 8);
    if (size != file.size() - header_size) {
      why = str("truncated or padded: header says ", size, " payload bytes, the file holds ",
                file.size() - header_size);
      return false;
    }
    const auto sum = checksum(file);
    if (std::memcmp(h + 72, sum.data(), sum.size()) != 0) {
      why = "checksum mismatch (corrupted)";
      return false;
    }
    return true;
  }

private:
  struct refusal {
    std::string why;
    bool regular = false; // the name is a regular file we examined: it may be deleted
  };
  struct job {
    key_type key;
    blob payload;
    fetch_fn fetch; // when set, produces the payload
  };

  static bool valid_kind(std::string_view k) noexcept {
    if (k.empty() || k.size() > max_kind_size) return false;
    for (char c : k)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
  }

  // SHA-256 over the header fields before the checksum and the payload after it.
  static key_type checksum(std::span<const unsigned char> file) noexcept {
    sha256 h;
    h.update(file.data(), 72);
    h.update(file.data() + header_size, file.size() - header_size);
    return h.finish();
  }

  // The file's bytes (header included), or nullopt: a plain miss (r.why empty) or a refusal.
  std::optional<blob> read_entry(const std::string& file, detail::blob_io::stat_t& st,
                                 refusal& r) const {
    // lstat first, so that a FIFO or device planted at our name is not even opened.
    if (detail::blob_io::lstat(file, st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) r.why = str("lstat: ", std::strerror(errno));
      return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) {
      r.why = str(detail::file_type_name(st.st_mode), ", not a regular file");
      return std::nullopt;
    }
    if (!size_ok(st, r)) return std::nullopt;
    // O_NOFOLLOW and O_NONBLOCK again: the name may have been swapped since lstat.
    detail::blob_fd fd{detail::blob_io::open_read(file)};
    r.regular = false; // until fstat says so again
    if (fd.fd < 0) {
      const int e = errno;
      if (e == ENOENT) return std::nullopt; // removed since lstat: a miss
      r.why = e == ELOOP ? std::string("a symbolic link, not a regular file")
                         : str("open: ", std::strerror(e));
      return std::nullopt;
    }
    if (detail::blob_io::fstat(fd.fd, st) != 0) {
      r.why = str("fstat: ", std::strerror(errno));
      return std::nullopt;
    }
    if (!S_ISREG(st.st_mode)) {
      r.why = str(detail::file_type_name(st.st_mode), ", not a regular file");
      return std::nullopt;
    }
    if (!size_ok(st, r)) return std::nullopt;
    const auto size = static_cast<size_t>(st.st_size);
    blob data(size);
    size_t got = 0;
    while (got < size) {
      const long long n = detail::blob_io::read(fd.fd, data.data() + got, size - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        r.why = str("read: ", std::strerror(errno));
        r.regular = false; // an I/O error says nothing about the content
        return std::nullopt;
      }
      if (n == 0) break; // shorter than fstat said: truncated under us, refused by verify
      got += static_cast<size_t>(n);
    }
    data.resize(got);
    r.regular = true;
    return data;
  }

  bool size_ok(const detail::blob_io::stat_t& st, refusal& r) const {
    r.regular = true;
    if (st.st_size < 0 || static_cast<uint64_t>(st.st_size) > max_entry_size_) {
      r.why = str(st.st_size, " bytes, larger than the ", max_entry_size_, "-byte limit");
      return false;
    }
    return true;
  }

  // Logs a refused entry (once per path per process) and deletes it when it is a regular file
  // still at that name.
  void refuse(const std::string& file, const detail::blob_io::stat_t& seen,
              const refusal& r) noexcept {
    try {
      bool removed = false;
      detail::blob_io::stat_t now{};
      if (r.regular && detail::blob_io::lstat(file, now) == 0 && S_ISREG(now.st_mode) &&
          detail::blob_io::same_file(now, seen))
        removed = detail::blob_io::unlink(file) == 0;
      if (detail::blob_cache_first("entry:" + file))
        warn("kernel cache: refused ", file, " (", r.why, "); ",
             removed     ? "deleted it"
             : r.regular ? "could not delete it"
                         : "left it in place (not a file this cache wrote)",
             "; building afresh");
    } catch (...) {
    }
  }

  void wait_pending(const key_type& key) {
    std::unique_lock lock(mu_);
    if (!thread_.joinable() || detail::blob_io::pid() != writer_pid_) return;
    cv_.wait(lock, [&] { return pending_.count(key) == 0; });
  }

  void enqueue(const key_type& key, blob payload, fetch_fn fetch) noexcept {
    if (!writable()) return; // the closure (and what it holds) is released here
    job j{key, std::move(payload), std::move(fetch)};
    try {
      std::unique_lock lock(mu_);
      if (!thread_.joinable()) {
        thread_ = std::thread([this] { writer(); });
        writer_pid_ = detail::blob_io::pid();
      }
      pending_.insert(key);
      try {
        jobs_.push_back(std::move(j)); // strong guarantee: j is intact if this throws
      } catch (...) {
        pending_.erase(pending_.find(key));
        throw;
      }
      lock.unlock();
      cv_.notify_all();
    } catch (...) {
      run(j); // no thread or no memory: write on this thread rather than not at all
    }
  }

  void writer() noexcept {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return; // stopping, and every write is done
      const key_type key = jobs_.front().key;
      {
        job j = std::move(jobs_.front());
        jobs_.pop_front();
        lock.unlock();
        run(j);
      } // the job (and what its closure holds) is released before the key stops being pending
      lock.lock();
      pending_.erase(pending_.find(key));
      cv_.notify_all();
    }
  }

  void run(job& j) noexcept {
    if (!writable()) return;
    try {
      if (j.fetch) {
        auto data = j.fetch();
        if (!data) return;
        j.payload = std::move(*data);
      }
    } catch (...) {
      debug("kernel cache: producing the entry failed; not cached");
      return;
    }
    write_entry(j.key, j.payload);
  }

  bool ensure_directory() {
    std::lock_guard lock(dir_mu_);
    if (dir_ready_) return true;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    detail::blob_io::stat_t st{};
    if (ec) {
      disable_writes(str("cannot create it: ", ec.message()));
      return false;
    }
    if (detail::blob_io::stat(dir_, st) != 0 || !S_ISDIR(st.st_mode)) {
      disable_writes("it is not a directory");
      return false;
    }
    dir_ready_ = true;
    return true;
  }

  // Removes the temporaries of writers that were killed: one older than an hour is written by
  // no one. Only regular files with our temporary-name pattern are touched.
  void sweep_once() noexcept {
    try {
      if (!detail::blob_cache_first("sweep:" + dir_)) return;
      std::error_code ec;
      const std::time_t now = std::time(nullptr);
      std::filesystem::directory_iterator it(dir_, ec), end;
      for (; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.find(".tmp.") == std::string::npos) continue;
        const std::string file = it->path().string();
        detail::blob_io::stat_t st{};
        if (detail::blob_io::lstat(file, st) == 0 && S_ISREG(st.st_mode) &&
            now - st.st_mtime > stale_temporary_seconds)
          detail::blob_io::unlink(file);
      }
    } catch (...) {
      // best effort: what stays is swept by the next process
    }
  }

  bool write_entry(const key_type& key, std::span<const unsigned char> payload) noexcept {
    if (!writable()) return false;
    std::string tmp;
    try {
      if (payload.size() > max_entry_size_ - std::min<uint64_t>(max_entry_size_, header_size)) {
        debug("kernel cache: a ", payload.size(), "-byte entry exceeds the ", max_entry_size_,
              "-byte limit; not cached");
        return false;
      }
      if (!ensure_directory()) return false;
      sweep_once();
      const blob data = encode(kind_, key, payload);
      const std::string final_path = path(key);
      const std::string stem =
          dir_ + "/" + sha256::hex(key) + ".tmp." + std::to_string(detail::blob_io::pid());
      detail::blob_fd fd;
      for (int attempt = 0; attempt < 16 && fd.fd < 0; ++attempt) {
        tmp = str(stem, ".", detail::blob_cache_state().serial.fetch_add(1));
        fd.fd = detail::blob_io::create_new(tmp);
        if (fd.fd < 0 && errno != EEXIST) break;
      }
      if (fd.fd < 0) {
        const int e = errno;
        tmp.clear(); // nothing was created
        disable_writes(str("cannot create a file in it: ", std::strerror(e)));
        return false;
      }
      size_t done = 0;
      int err = 0;
      while (done < data.size()) {
        const long long n = detail::blob_io::write(fd.fd, data.data() + done, data.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          err = n < 0 ? errno : EIO;
          break;
        }
        done += static_cast<size_t>(n);
      }
      const int fd_now = fd.fd;
      fd.fd = -1;
      if (detail::blob_io::close(fd_now) != 0 && err == 0) err = errno;
      if (err != 0) {
        detail::blob_io::unlink(tmp);
        tmp.clear();
        disable_writes(str("writing an entry failed: ", std::strerror(err)));
        return false;
      }
      if (detail::blob_io::rename(tmp, final_path) != 0) {
        const int e = errno;
        detail::blob_io::unlink(tmp);
        tmp.clear();
        if (e == EISDIR || e == ENOTEMPTY || e == EEXIST) {
          // Something we did not make occupies this one name: only this key goes uncached.
          if (detail::blob_cache_first("replace:" + final_path))
            warn("kernel cache: cannot replace ", final_path, " (", std::strerror(e),
                 "); this program is not cached");
          return false;
        }
        disable_writes(str("renaming an entry into place failed: ", std::strerror(e)));
        return false;
      }
      tmp.clear();
      debug("kernel cache: stored ", final_path, " (", data.size(), " bytes)");
      return true;
    } catch (...) {
      if (!tmp.empty()) detail::blob_io::unlink(tmp);
      disable_writes("out of memory");
      return false;
    }
  }

  // One warning per directory per process, naming the directory and what to do.
  void disable_writes(const std::string& why) noexcept {
    writable_.store(false);
    try {
      if (detail::blob_cache_first("write:" + dir_))
        warn("kernel cache: cannot write to ", dir_, " (", why,
             "); continuing without the kernel cache: set PARENCHYMA_CACHE_DIR to a "
             "writable directory");
    } catch (...) {
    }
  }

  // Logging that never throws (building the message allocates).
  template <class... A> void warn(A&&... a) const noexcept {
    try {
      log_.warn(std::forward<A>(a)...);
    } catch (...) {
    }
  }
  template <class... A> void debug(A&&... a) const noexcept {
    try {
      log_.debug(std::forward<A>(a)...);
    } catch (...) {
    }
  }

  logger log_;
  uint64_t max_entry_size_;
  std::string kind_;
  std::string dir_; // empty: disabled
  std::atomic<bool> writable_{true};

  std::mutex dir_mu_;
  bool dir_ready_ = false;

  std::mutex mu_; // guards what follows
  std::condition_variable cv_;
  std::deque<job> jobs_;
  std::multiset<key_type> pending_; // queued or being written
  bool stop_ = false;
  std::thread thread_;
  long writer_pid_ = 0;
};

} // namespace parenchyma::sdk
