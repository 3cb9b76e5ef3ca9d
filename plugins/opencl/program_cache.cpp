// The on-disk program binary cache: SHA-256, the entry format and atomic publication.
#include "program_cache.hpp"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace parenchyma::opencl {

// ---- entry format -----------------------------------------------------------------------------

namespace {
constexpr unsigned char magic[8] = {'P', 'C', 'Y', 'C', 'L', 'B', 'I', 'N'};
// magic(8) format(4) devices(4) key(32) payload size(8) payload sha256(32)
constexpr size_t header_size = 8 + 4 + 4 + 32 + 8 + 32;

void put_u32(std::vector<unsigned char>& o, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    o.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
void put_u64(std::vector<unsigned char>& o, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    o.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
uint64_t get_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}
} // namespace

std::vector<unsigned char> program_cache::encode(const key_type& key, const binaries& bins) {
  std::vector<unsigned char> payload;
  for (const auto& b : bins) {
    put_u64(payload, b.size());
    payload.insert(payload.end(), b.begin(), b.end());
  }
  const auto sum = sha256().update(payload.data(), payload.size()).finish();
  std::vector<unsigned char> out;
  out.reserve(header_size + payload.size());
  out.insert(out.end(), std::begin(magic), std::end(magic));
  put_u32(out, format_version);
  put_u32(out, static_cast<uint32_t>(bins.size()));
  out.insert(out.end(), key.begin(), key.end());
  put_u64(out, payload.size());
  out.insert(out.end(), sum.begin(), sum.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::optional<program_cache::binaries> program_cache::decode(std::span<const unsigned char> f,
                                                             const key_type& key,
                                                             size_t device_count,
                                                             std::string& why) {
  if (f.size() < header_size) {
    why = sdk::str("truncated header (", f.size(), " bytes)");
    return std::nullopt;
  }
  const unsigned char* p = f.data();
  if (std::memcmp(p, magic, sizeof magic) != 0) {
    why = "bad magic";
    return std::nullopt;
  }
  if (get_le(p + 8, 4) != format_version) {
    why = sdk::str("format version ", get_le(p + 8, 4), ", expected ", format_version);
    return std::nullopt;
  }
  if (get_le(p + 12, 4) != device_count) {
    why = sdk::str("entry holds ", get_le(p + 12, 4), " device binaries, expected ", device_count);
    return std::nullopt;
  }
  if (std::memcmp(p + 16, key.data(), key.size()) != 0) {
    why = "key mismatch";
    return std::nullopt;
  }
  const uint64_t payload_size = get_le(p + 48, 8);
  if (payload_size != f.size() - header_size) {
    why = sdk::str("payload of ", f.size() - header_size, " bytes, header says ", payload_size,
                   " (truncated or padded)");
    return std::nullopt;
  }
  const unsigned char* payload = p + header_size;
  const auto sum = sha256().update(payload, payload_size).finish();
  if (std::memcmp(p + 56, sum.data(), sum.size()) != 0) {
    why = "payload checksum mismatch (corrupted)";
    return std::nullopt;
  }
  binaries out;
  uint64_t at = 0;
  for (size_t i = 0; i < device_count; ++i) {
    if (payload_size - at < 8) {
      why = "payload ends inside a size field";
      return std::nullopt;
    }
    const uint64_t n = get_le(payload + at, 8);
    at += 8;
    if (n == 0 || n > payload_size - at) {
      why = sdk::str("binary ", i, " has a bad size ", n);
      return std::nullopt;
    }
    out.emplace_back(payload + at, payload + at + n);
    at += n;
  }
  if (at != payload_size) {
    why = "trailing bytes after the binaries";
    return std::nullopt;
  }
  return out;
}

// ---- the cache --------------------------------------------------------------------------------

program_cache::program_cache(const char* cache_dir, const sdk::logger& log) : log_(log) {
  if (cache_dir != nullptr && *cache_dir != '\0')
    dir_ = std::filesystem::path(cache_dir) / "opencl";
}

program_cache::key_type program_cache::key(std::span<const device_identity> devices,
                                           std::string_view source,
                                           std::string_view options) noexcept {
  sha256 h;
  h.field("parenchyma-opencl-program-cache").field(std::to_string(format_version));
  for (const auto& d : devices)
    h.field(d.name)
        .field(d.vendor)
        .field(d.platform_version)
        .field(d.version)
        .field(d.driver_version);
  h.field(options).field(source);
  return h.finish();
}

std::filesystem::path program_cache::path(const key_type& key) const {
  return dir_ / (sha256::hex(key) + ".clbin");
}

program_cache::~program_cache() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void program_cache::store_later(const key_type& key, fetch_fn fetch) {
  if (!enabled() || !writable_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { writer(); });
    jobs_.emplace_back(key, std::move(fetch));
    pending_.insert(key);
  }
  cv_.notify_all();
}

void program_cache::writer() noexcept {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return; // stop_ and nothing left to write
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    try {
      if (auto bins = job.second()) store(job.first, *bins);
    } catch (...) {
      log_.debug("program cache: fetching a program binary failed; not cached");
    }
    lock.lock();
    pending_.erase(pending_.find(job.first));
    cv_.notify_all();
  }
}

std::optional<program_cache::binaries> program_cache::load(const key_type& key,
                                                           size_t device_count) noexcept {
  if (!enabled()) return std::nullopt;
  try {
    {
      // This process may be writing this very entry right now: wait for it.
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return pending_.count(key) == 0; });
    }
    const auto file = path(key);
    std::FILE* f = std::fopen(file.c_str(), "rb");
    if (f == nullptr) return std::nullopt; // a miss
    std::vector<unsigned char> data;
    unsigned char chunk[1 << 16];
    size_t n = 0;
    while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0)
      data.insert(data.end(), chunk, chunk + n);
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    std::string why;
    std::optional<binaries> bins;
    if (failed)
      why = "read error";
    else
      bins = decode(data, key, device_count, why);
    if (!bins) {
      log_.debug("program cache: entry ", file.string(), " rejected (", why, "); rebuilding");
      remove(key);
    }
    return bins;
  } catch (...) {
    return std::nullopt;
  }
}

void program_cache::remove(const key_type& key) noexcept {
  std::error_code ec;
  std::filesystem::remove(path(key), ec);
}

void program_cache::disable_writes(const std::string& why) noexcept {
  writable_.store(false);
  std::call_once(warned_, [&] {
    log_.warn("program cache: ", why,
              "; continuing without the kernel cache (set "
              "PARENCHYMA_CACHE_DIR to a writable directory)");
  });
}

// A process killed while writing leaves its temporary file behind; one older than an hour is
// no longer being written by anyone.
void program_cache::remove_stale_temporaries() noexcept {
  try {
    std::error_code ec;
    const auto limit = std::filesystem::file_time_type::clock::now() - std::chrono::hours(1);
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
      if (f.path().filename().string().find(".tmp.") == std::string::npos) continue;
      const auto when = std::filesystem::last_write_time(f.path(), ec);
      if (!ec && when < limit) std::filesystem::remove(f.path(), ec);
    }
  } catch (...) {
    // best effort: a sweep that fails leaves files that the next one removes
  }
}

void program_cache::store(const key_type& key, const binaries& bins) noexcept {
  if (!enabled() || !writable_.load(std::memory_order_relaxed)) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) {
      disable_writes(sdk::str("cannot create ", dir_.string(), " (", ec.message(), ")"));
      return;
    }
    std::call_once(swept_, [this] { remove_stale_temporaries(); });
    const auto data = encode(key, bins);
    const auto final_path = path(key);
    // Unique per process and call, in the same directory so that rename() is atomic.
    static std::atomic<uint64_t> counter{0};
    const auto tmp =
        dir_ / sdk::str(sha256::hex(key), ".tmp.", ::getpid(), ".", counter.fetch_add(1));
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      disable_writes(sdk::str("cannot write in ", dir_.string(), " (", std::strerror(errno), ")"));
      return;
    }
    size_t done = 0;
    while (done < data.size()) {
      const ssize_t w = ::write(fd, data.data() + done, data.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      done += static_cast<size_t>(w);
    }
    const int write_errno = done == data.size() ? 0 : errno;
    const bool closed = ::close(fd) == 0;
    if (done != data.size() || !closed) {
      std::filesystem::remove(tmp, ec);
      disable_writes(sdk::str("writing ", tmp.string(), " failed (",
                              std::strerror(write_errno ? write_errno : EIO), ")"));
      return;
    }
    if (std::rename(tmp.c_str(), final_path.c_str()) != 0) {
      const int e = errno;
      std::filesystem::remove(tmp, ec);
      disable_writes(
          sdk::str("rename to ", final_path.string(), " failed (", std::strerror(e), ")"));
      return;
    }
    log_.debug("program cache: stored ", final_path.string(), " (", data.size(), " bytes)");
  } catch (const std::exception& e) {
    disable_writes(e.what());
  } catch (...) {
    disable_writes("unexpected error");
  }
}

} // namespace parenchyma::opencl
