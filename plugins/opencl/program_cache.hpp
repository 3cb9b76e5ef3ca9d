// The on-disk cache of compiled OpenCL program binaries, under <cache_dir>/opencl.
//
// Key: SHA-256 over the cache format, every device's name, vendor, platform version, device
// version and driver version, the options and the source (each field length-prefixed). One
// file per key, "<hex key>.clbin": a header (magic, format version, the key, device count,
// payload size, SHA-256 of the payload) followed by the payload (per device: u64 size, bytes).
// Writers write a unique temporary file in the same directory and rename it into place, so
// concurrent processes never see a partial entry; readers verify everything and delete an entry
// that does not check out. Nothing here throws: a cache that cannot be used is logged once and
// the plugin goes on without it.
//
// Entries are written by one background thread: fetching a program's binaries can cost as much
// as the build itself (PoCL generates code then), and a cold first op should not wait for it.
// A load of a key whose write is still pending in this process waits for that write.
#pragma once

#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/sha256.hpp>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace parenchyma::opencl {

using sha256 = ::parenchyma::sdk::sha256; // the SDK's one implementation

// What identifies one device's compiler output.
struct device_identity {
  std::string_view name, vendor, platform_version, version, driver_version;
};

class program_cache {
public:
  using key_type = sha256::digest;
  using binaries = std::vector<std::vector<unsigned char>>;
  static constexpr uint32_t format_version = 1;

  // cache_dir NULL or empty: disabled.
  program_cache(const char* cache_dir, const sdk::logger& log);
  ~program_cache(); // finishes the pending writes
  program_cache(const program_cache&) = delete;
  program_cache& operator=(const program_cache&) = delete;

  bool enabled() const noexcept { return !dir_.empty(); }
  const std::filesystem::path& directory() const noexcept { return dir_; }
  static key_type key(std::span<const device_identity> devices, std::string_view source,
                      std::string_view options) noexcept;
  std::filesystem::path path(const key_type& key) const;

  // The entry's binaries when it exists and is intact (one per device); a damaged entry is
  // deleted and reported at debug level.
  std::optional<binaries> load(const key_type& key, size_t device_count) noexcept;
  // Writes an entry (temporary file + rename). The first failure disables writing, with one
  // warning through the host log.
  void store(const key_type& key, const binaries& bins) noexcept;
  // Runs `fetch` on the writer thread and stores what it returns (nothing when it returns
  // nullopt or throws).
  using fetch_fn = std::function<std::optional<binaries>()>;
  void store_later(const key_type& key, fetch_fn fetch);
  void remove(const key_type& key) noexcept;

  // The file format, shared with tests that craft entries.
  static std::vector<unsigned char> encode(const key_type& key, const binaries& bins);
  static std::optional<binaries> decode(std::span<const unsigned char> file, const key_type& key,
                                        size_t device_count, std::string& why);

private:
  void disable_writes(const std::string& why) noexcept;
  void writer() noexcept;
  void remove_stale_temporaries() noexcept;
  std::filesystem::path dir_;
  const sdk::logger& log_;
  std::atomic<bool> writable_{true};
  std::once_flag warned_;
  std::once_flag swept_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<key_type, fetch_fn>> jobs_;
  std::multiset<key_type> pending_;
  bool stop_ = false;
  std::thread thread_;
};

} // namespace parenchyma::opencl
