// The pinned staging pool: moves pageable host memory at pinned speed. A few page-locked chunks
// per device context, made on first use and reused; a transfer is cut into chunks, and the host
// copy of one chunk (split over a small team of threads) overlaps the DMA of the previous one.
// Per-chunk events make reuse safe across transfers and streams.
#pragma once

#include "cuda_loader.hpp"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace parenchyma::cuda {

struct staging_config {
  uint64_t chunk_bytes = 8ull << 20; // each pinned chunk
  uint32_t chunks = 4;               // chunks in flight
  // Pageable transfers at least this big are staged. Measured on an H200 (docs/cuda.md): the
  // driver's own pageable path wins for writes below ~4 MiB, ours wins for reads from 256 KiB.
  uint64_t threshold = 256ull << 10;     // reads (device -> host)
  uint64_t write_threshold = 4ull << 20; // writes (host -> device)
  uint32_t threads = 8;                  // host threads copying into/out of a chunk (1: no team)
  // Reads the settings PARENCHYMA_CUDA_STAGING_{CHUNK,CHUNKS,THRESHOLD,THREADS} over the
  // defaults (THRESHOLD sets both thresholds); default `s`: the process environment.
  static staging_config from_environment(const sdk::settings& s = {});
};

// Copies one block with up to `threads` threads; the helpers live as long as the team.
class copy_team {
public:
  explicit copy_team(uint32_t threads);
  ~copy_team();
  copy_team(const copy_team&) = delete;
  copy_team& operator=(const copy_team&) = delete;
  void copy(void* dst, const void* src, size_t bytes);

private:
  void work(uint32_t index);
  void part(uint32_t index, uint32_t parts);
  std::vector<std::thread> threads_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint32_t> remaining_{0};
  std::atomic<bool> stop_{false};
  char* dst_ = nullptr;
  const char* src_ = nullptr;
  size_t bytes_ = 0;
  uint32_t parts_ = 1;
};

class staging_pool {
public:
  staging_pool(const driver& d, const staging_config& cfg, sdk::logger log);
  ~staging_pool(); // the owning context must be current
  staging_pool(const staging_pool&) = delete;
  staging_pool& operator=(const staging_pool&) = delete;

  // The context that owns `stream` must be current. write returns once `src` has been copied
  // into pinned chunks (the DMA may still run); read returns once `dst` holds the data.
  void write(CUstream stream, CUdeviceptr dst, const void* src, uint64_t bytes);
  void read(CUstream stream, void* dst, CUdeviceptr src, uint64_t bytes);

  const staging_config& config() const noexcept { return cfg_; }
  uint64_t transfers() const noexcept { return transfers_.load(std::memory_order_relaxed); }

private:
  struct chunk {
    void* host = nullptr;
    CUevent done = nullptr;
    bool pending = false; // `done` was recorded after the last DMA that used `host`
  };
  void ensure_chunks();
  void wait(chunk& c);
  void host_copy(void* dst, const void* src, size_t bytes);
  uint64_t chunk_for(uint64_t bytes) const;

  const driver& d_;
  staging_config cfg_;
  sdk::logger log_;
  std::mutex mutex_;
  std::vector<chunk> chunks_;
  std::unique_ptr<copy_team> team_;
  std::atomic<uint64_t> transfers_{0};
};

} // namespace parenchyma::cuda
