// The on-disk cubin cache (see program_cache.hpp); SHA-256 comes from the SDK.
#include "program_cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace parenchyma::cuda {

// ---- the cache -------------------------------------------------------------------------------
namespace {
constexpr size_t header_size = 64;

void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<char>(v >> (8 * i));
}
void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}
} // namespace

program_cache::program_cache(std::string dir, sdk::logger log)
    : dir_(dir.empty() ? std::string() : dir + "/cuda"), log_(log), enabled_(!dir.empty()) {}

bool program_cache::ensure_dir() {
  if (dir_ready_) return true;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || ::access(dir_.c_str(), W_OK | X_OK) != 0) {
    if (!warned_)
      log_.warn("kernel cache directory ", dir_, " is not writable (",
                ec ? ec.message() : std::string(std::strerror(errno)),
                "): compiled CUDA programs will not be cached; set PARENCHYMA_CACHE_DIR to a "
                "writable directory");
    warned_ = true;
    enabled_ = false;
    return false;
  }
  dir_ready_ = true;
  return true;
}

std::string program_cache::path_for(const std::string& key) const {
  sha256 h;
  h.update(key);
  return dir_ + "/" + sha256::hex(h.finish()) + ".cubin";
}

std::optional<std::vector<char>> program_cache::load(const std::string& key) {
  std::lock_guard lock(mutex_);
  if (!enabled_) return std::nullopt;
  const std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const char* why = nullptr;
  if (data.size() < header_size)
    why = "truncated header";
  else if (std::memcmp(data.data(), magic, sizeof magic) != 0)
    why = "bad magic";
  else if (get_u32(data.data() + 8) != format_version)
    why = "other format version";
  else if (get_u64(data.data() + 16) != data.size() - header_size)
    why = "truncated payload";
  if (why == nullptr) {
    sha256 h;
    h.update(data.data() + header_size, data.size() - header_size);
    const auto sum = h.finish();
    if (std::memcmp(sum.data(), data.data() + 24, sum.size()) != 0) why = "checksum mismatch";
  }
  if (why != nullptr) {
    log_.warn("kernel cache entry ", path, " is unusable (", why, "): rebuilding it");
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::nullopt;
  }
  return std::vector<char>(data.begin() + header_size, data.end());
}

void program_cache::store(const std::string& key, const std::vector<char>& payload) {
  std::lock_guard lock(mutex_);
  if (!enabled_ || !ensure_dir()) return;
  const std::string path = path_for(key);
  static std::atomic<uint64_t> serial{0};
  const std::string tmp = sdk::str(path, ".tmp.", ::getpid(), ".", serial.fetch_add(1), ".",
                                   std::chrono::steady_clock::now().time_since_epoch().count());
  char header[header_size] = {};
  std::memcpy(header, magic, sizeof magic);
  put_u32(header + 8, format_version);
  put_u64(header + 16, payload.size());
  sha256 h;
  h.update(payload.data(), payload.size());
  const auto sum = h.finish();
  std::memcpy(header + 24, sum.data(), sum.size());
  bool ok = false;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      out.write(header, sizeof header);
      out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
      out.flush();
      ok = static_cast<bool>(out);
    }
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return;
  const int err = errno;
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  if (!warned_)
    log_.warn("could not write kernel cache entry ", path, " (", std::strerror(err),
              "): continuing without caching it");
  warned_ = true;
}

} // namespace parenchyma::cuda
