// The on-disk cubin cache: <cache_dir>/cuda/<sha256 of the key>.cubin, each file a header
// (magic, format version, payload size, SHA-256 of the payload) and the payload. Writes go to a
// temporary file renamed into place, so concurrent processes see a whole entry or none; an entry
// that fails any check is ignored (and rebuilt by the caller), never loaded.
#pragma once

#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/sha256.hpp>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::cuda {

using sha256 = ::parenchyma::sdk::sha256; // the SDK's one implementation

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
