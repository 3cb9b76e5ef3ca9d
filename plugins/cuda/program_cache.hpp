// The on-disk cubin cache: <cache_dir>/cuda/<sha256 of the key>.cubin, each file a header
// (magic, format version, payload size, SHA-256 of the payload) and the payload. Writes go to a
// temporary file renamed into place, so concurrent processes see a whole entry or none; an entry
// that fails any check is ignored (and rebuilt by the caller), never loaded.
#pragma once

#include <parenchyma/sdk/common.hpp>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::cuda {

// SHA-256 (FIPS 180-4), our own small implementation: the cache key and the payload checksum.
class sha256 {
public:
  sha256();
  sha256& update(const void* data, size_t size);
  sha256& update(std::string_view s) { return update(s.data(), s.size()); }
  // Adds a field with its length first, so ("ab","c") and ("a","bc") differ.
  sha256& field(std::string_view s);
  std::array<uint8_t, 32> finish();
  static std::string hex(const std::array<uint8_t, 32>& digest);

private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t total_ = 0;
};

class program_cache {
public:
  // dir: the host's cache_dir (may be empty: no cache). Creates <dir>/cuda lazily.
  program_cache(std::string dir, sdk::logger log);

  bool enabled() const noexcept { return enabled_; }
  const std::string& directory() const noexcept { return dir_; }

  // The file an entry for `key` lives in.
  std::string path_for(const std::string& key) const;
  // The payload, or nothing when absent or corrupt (a corrupt entry is removed and logged).
  std::optional<std::vector<char>> load(const std::string& key);
  // Stores atomically; failures are logged (once) and otherwise ignored.
  void store(const std::string& key, const std::vector<char>& payload);

  static constexpr char magic[8] = {'P', 'C', 'Y', 'C', 'U', 'B', 'I', 'N'};
  static constexpr uint32_t format_version = 1;

private:
  bool ensure_dir();
  std::mutex mutex_;
  std::string dir_;
  sdk::logger log_;
  bool enabled_ = true;
  bool dir_ready_ = false;
  bool warned_ = false;
};

} // namespace parenchyma::cuda
