// The pinned staging pool and its copy team (see staging.hpp).
#include "staging.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace parenchyma::cuda {

namespace {
uint64_t env_u64(const sdk::settings& s, const char* name, uint64_t fallback, uint64_t lo,
                 uint64_t hi) {
  const std::string v = s.get(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (end == v.c_str()) return fallback;
  return std::clamp<uint64_t>(x, lo, hi);
}
// Below this a helper thread costs more than it saves.
constexpr size_t min_part_bytes = 256 << 10;
} // namespace

staging_config staging_config::from_environment(const sdk::settings& s) {
  staging_config c;
  const uint32_t hw = std::max(1u, std::thread::hardware_concurrency());
  c.threads = std::clamp(hw / 2, 1u, 8u);
  c.chunk_bytes = env_u64(s, "PARENCHYMA_CUDA_STAGING_CHUNK", c.chunk_bytes, 4096, 1ull << 30);
  c.chunks = static_cast<uint32_t>(env_u64(s, "PARENCHYMA_CUDA_STAGING_CHUNKS", c.chunks, 2, 64));
  c.threshold = env_u64(s, "PARENCHYMA_CUDA_STAGING_THRESHOLD", c.threshold, 0, ~0ull);
  c.write_threshold = env_u64(s, "PARENCHYMA_CUDA_STAGING_THRESHOLD", c.write_threshold, 0, ~0ull);
  c.threads =
      static_cast<uint32_t>(env_u64(s, "PARENCHYMA_CUDA_STAGING_THREADS", c.threads, 1, 64));
  return c;
}

// ---- copy team -------------------------------------------------------------------------------
copy_team::copy_team(uint32_t threads) {
  for (uint32_t i = 1; i < threads; ++i)
    threads_.emplace_back([this, i] { work(i); });
}

copy_team::~copy_team() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void copy_team::part(uint32_t index, uint32_t parts) {
  // Parts on 4 KiB boundaries so that no two threads write one page.
  const size_t per = ((bytes_ / parts) + 4095) & ~size_t(4095);
  const size_t begin = std::min(bytes_, per * index);
  const size_t end = index + 1 == parts ? bytes_ : std::min(bytes_, begin + per);
  if (end > begin) std::memcpy(dst_ + begin, src_ + begin, end - begin);
}

void copy_team::work(uint32_t index) {
  uint64_t seen = 0;
  for (;;) {
    generation_.wait(seen);
    seen = generation_.load();
    if (stop_.load()) return;
    // Every helper reports for every job, so none can lag into the next one.
    if (index < parts_) part(index, parts_);
    if (remaining_.fetch_sub(1) == 1) remaining_.notify_one();
  }
}

void copy_team::copy(void* dst, const void* src, size_t bytes) {
  const uint32_t parts = static_cast<uint32_t>(
      std::min<size_t>(threads_.size() + 1, std::max<size_t>(1, bytes / min_part_bytes)));
  if (parts <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  dst_ = static_cast<char*>(dst);
  src_ = static_cast<const char*>(src);
  bytes_ = bytes;
  parts_ = parts;
  remaining_.store(static_cast<uint32_t>(threads_.size()));
  generation_.fetch_add(1); // publishes the job (seq_cst) to the helpers
  generation_.notify_all();
  part(0, parts);
  for (uint32_t left = remaining_.load(); left != 0; left = remaining_.load())
    remaining_.wait(left);
}

// ---- staging pool ----------------------------------------------------------------------------
staging_pool::staging_pool(const driver& d, const staging_config& cfg, sdk::logger log)
    : d_(d), cfg_(cfg), log_(log) {}

staging_pool::~staging_pool() {
  const auto& api = d_.api();
  for (auto& c : chunks_) {
    if (c.pending) api.cuEventSynchronize(c.done);
    if (c.done) api.cuEventDestroy(c.done);
    if (c.host) api.cuMemFreeHost(c.host);
  }
}

void staging_pool::ensure_chunks() {
  if (!chunks_.empty()) return;
  const auto& api = d_.api();
  std::vector<chunk> made(cfg_.chunks);
  auto release = [&] {
    for (auto& c : made) {
      if (c.done) api.cuEventDestroy(c.done);
      if (c.host) api.cuMemFreeHost(c.host);
    }
  };
  for (auto& c : made) {
    CUresult r = api.cuMemHostAlloc(&c.host, cfg_.chunk_bytes, CU_MEMHOSTALLOC_PORTABLE);
    if (r == CUDA_SUCCESS) r = api.cuEventCreate(&c.done, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
      release();
      sdk::fail(status_of(r), sdk::str("creating the pinned staging pool (", cfg_.chunks, " x ",
                                       pretty_bytes(cfg_.chunk_bytes), "): ", d_.describe(r)));
    }
  }
  chunks_ = std::move(made);
  if (cfg_.threads > 1) team_ = std::make_unique<copy_team>(cfg_.threads);
  log_.debug("pinned staging pool: ", cfg_.chunks, " x ", pretty_bytes(cfg_.chunk_bytes), ", ",
             cfg_.threads, " copy threads");
}

void staging_pool::wait(chunk& c) {
  if (!c.pending) return;
  check(d_, d_.api().cuEventSynchronize(c.done), "waiting for a staging chunk");
  c.pending = false;
}

void staging_pool::host_copy(void* dst, const void* src, size_t bytes) {
  if (team_)
    team_->copy(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

// Mid-sized transfers use smaller pieces of the chunks so that copy and DMA still overlap
// (at least `chunks` pieces, none under 1 MiB); large ones use whole chunks.
uint64_t staging_pool::chunk_for(uint64_t bytes) const {
  const uint64_t piece = ((bytes / cfg_.chunks) + 4095) & ~uint64_t(4095);
  return std::min(cfg_.chunk_bytes, std::max<uint64_t>(piece, 1ull << 20));
}

void staging_pool::write(CUstream stream, CUdeviceptr dst, const void* src, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  ensure_chunks();
  const auto& api = d_.api();
  const auto* from = static_cast<const char*>(src);
  const uint64_t n = chunks_.size();
  const uint64_t piece = chunk_for(bytes);
  uint64_t i = 0;
  for (uint64_t off = 0; off < bytes; off += piece, ++i) {
    const uint64_t len = std::min(piece, bytes - off);
    chunk& c = chunks_[i % n];
    wait(c); // the DMA that last read this chunk is done
    host_copy(c.host, from + off, len);
    check(d_, api.cuMemcpyHtoDAsync(dst + off, c.host, len, stream), "staged cuMemcpyHtoDAsync");
    check(d_, api.cuEventRecord(c.done, stream), "cuEventRecord (staging)");
    c.pending = true;
  }
  transfers_.fetch_add(1, std::memory_order_relaxed);
  log_.trace("staged write of ", bytes, " bytes in ", i, " chunks");
}

void staging_pool::read(CUstream stream, void* dst, CUdeviceptr src, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  ensure_chunks();
  const auto& api = d_.api();
  auto* to = static_cast<char*>(dst);
  const uint64_t n = chunks_.size();
  const uint64_t piece = chunk_for(bytes);
  const uint64_t count = (bytes + piece - 1) / piece;
  // Chunk j's bytes land in slot j % n; they are copied out once its DMA completed, which
  // happens before slot j % n is reused for chunk j + n.
  auto drain = [&](uint64_t j) {
    chunk& c = chunks_[j % n];
    wait(c);
    const uint64_t off = j * piece;
    host_copy(to + off, c.host, std::min(piece, bytes - off));
  };
  for (uint64_t i = 0; i < count; ++i) {
    if (i >= n) drain(i - n);
    chunk& c = chunks_[i % n];
    wait(c); // a DMA of an earlier transfer may still read this chunk
    const uint64_t off = i * piece;
    const uint64_t len = std::min(piece, bytes - off);
    check(d_, api.cuMemcpyDtoHAsync(c.host, src + off, len, stream), "staged cuMemcpyDtoHAsync");
    check(d_, api.cuEventRecord(c.done, stream), "cuEventRecord (staging)");
    c.pending = true;
  }
  for (uint64_t j = count > n ? count - n : 0; j < count; ++j)
    drain(j);
  transfers_.fetch_add(1, std::memory_order_relaxed);
  log_.trace("staged read of ", bytes, " bytes in ", count, " chunks");
}

} // namespace parenchyma::cuda
