// SHA-256 and the on-disk cubin cache (see program_cache.hpp).
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

// ---- SHA-256 ---------------------------------------------------------------------------------
namespace {
constexpr uint32_t k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
} // namespace

sha256::sha256()
    : h_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
         0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19},
      buf_{} {}

void sha256::block(const uint8_t* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) |
           (uint32_t(p[4 * i + 2]) << 8) | uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 =
        h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k256[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h_[0] += a;
  h_[1] += b;
  h_[2] += c;
  h_[3] += d;
  h_[4] += e;
  h_[5] += f;
  h_[6] += g;
  h_[7] += h;
}

sha256& sha256::update(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  total_ += size;
  while (size > 0) {
    const size_t take = std::min(size, sizeof buf_ - used_);
    std::memcpy(buf_ + used_, p, take);
    used_ += take;
    p += take;
    size -= take;
    if (used_ == sizeof buf_) {
      block(buf_);
      used_ = 0;
    }
  }
  return *this;
}

sha256& sha256::field(std::string_view s) {
  const uint64_t n = s.size();
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(n >> (8 * i));
  update(len, sizeof len);
  return update(s);
}

std::array<uint8_t, 32> sha256::finish() {
  const uint64_t bits = total_ * 8;
  const uint8_t pad = 0x80;
  update(&pad, 1);
  const uint8_t zero = 0;
  while (used_ != 56)
    update(&zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i)
    len[i] = static_cast<uint8_t>(bits >> (56 - 8 * i));
  update(len, 8);
  std::array<uint8_t, 32> out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j)
      out[4 * i + j] = static_cast<uint8_t>(h_[i] >> (24 - 8 * j));
  return out;
}

std::string sha256::hex(const std::array<uint8_t, 32>& d) {
  static const char digits[] = "0123456789abcdef";
  std::string s(64, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = digits[d[i] >> 4];
    s[2 * i + 1] = digits[d[i] & 15];
  }
  return s;
}

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
