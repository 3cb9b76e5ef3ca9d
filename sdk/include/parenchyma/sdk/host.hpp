// parenchyma SDK, host side: RAII wrappers over a framework plugin's C table, for hosts and
// test harnesses (the conformance suite uses them). Loading the library is the caller's job.
#pragma once

#include <parenchyma/abi/pcy_framework.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace parenchyma::sdk::host {

// A pcy_error turned into a C++ exception (the host's side of the firewall).
class abi_error : public std::runtime_error {
public:
  abi_error(pcy_status code, std::string origin, const std::string& message)
      : std::runtime_error(origin + ": " + message), code_(code), origin_(std::move(origin)) {}
  pcy_status code() const noexcept { return code_; }
  const std::string& origin() const noexcept { return origin_; }

private:
  pcy_status code_;
  std::string origin_;
};

inline void check(pcy_error* e) {
  if (e == nullptr) return;
  const pcy_status code = e->code;
  std::string origin = e->origin ? e->origin : "?";
  std::string message = e->message ? e->message : "";
  e->destroy(e);
  throw abi_error(code, std::move(origin), message);
}

// Owns one initialised framework plugin instance.
class framework {
public:
  framework(const pcy_framework_api* api, const pcy_host_services* host) : api_(api) {
    pcy_framework_init_args a{};
    a.struct_size = sizeof a;
    a.host = host;
    check(api_->initialize(&a));
    plugin_ = a.plugin;
  }
  framework(const framework&) = delete;
  framework& operator=(const framework&) = delete;
  ~framework() {
    if (plugin_ != nullptr) api_->shutdown(plugin_);
  }
  const pcy_framework_api& api() const noexcept { return *api_; }
  pcy_plugin plugin() const noexcept { return plugin_; }

  pcy_framework_probe probe() const {
    pcy_framework_probe p{};
    p.struct_size = sizeof p;
    check(api_->probe(plugin_, &p));
    return p;
  }
  std::span<const pcy_property> properties(uint32_t device) const {
    const pcy_property* props = nullptr;
    size_t n = 0;
    check(api_->device_properties(plugin_, device, &props, &n));
    return {props, n};
  }

private:
  const pcy_framework_api* api_;
  pcy_plugin plugin_ = nullptr;
};

// A unique owner of one ABI handle with its destroy slot.
template <class H> class handle {
public:
  handle() = default;
  handle(H h, void (*destroy)(H)) : h_(h), destroy_(destroy) {}
  handle(handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)), destroy_(o.destroy_) {}
  handle& operator=(handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      destroy_ = o.destroy_;
    }
    return *this;
  }
  ~handle() { reset(); }
  void reset() noexcept {
    if (h_ != nullptr && destroy_ != nullptr) destroy_(h_);
    h_ = nullptr;
  }
  H get() const noexcept { return h_; }
  H release() noexcept { return std::exchange(h_, nullptr); }
  explicit operator bool() const noexcept { return h_ != nullptr; }

private:
  H h_ = nullptr;
  void (*destroy_)(H) = nullptr;
};

using context = handle<pcy_context>;
using queue = handle<pcy_queue>;
using event = handle<pcy_event>;
using memory = handle<pcy_memory>;
using program = handle<pcy_program>;
using kernel = handle<pcy_kernel>;

inline context make_context(const framework& fw, std::span<const uint32_t> devices) {
  pcy_context c = nullptr;
  check(fw.api().context_create(fw.plugin(), devices.data(), static_cast<uint32_t>(devices.size()),
                                &c));
  return {c, fw.api().context_destroy};
}
inline queue make_queue(const framework& fw, pcy_context c, uint32_t device) {
  pcy_queue q = nullptr;
  check(fw.api().queue_create(c, device, &q));
  return {q, fw.api().queue_destroy};
}
inline memory alloc(const framework& fw, pcy_context c, uint32_t device, uint64_t bytes,
                    uint32_t flags = PCY_MEMORY_DEFAULT) {
  pcy_memory_alloc_args a{};
  a.struct_size = sizeof a;
  a.context = c;
  a.device = device;
  a.bytes = bytes;
  a.flags = flags;
  check(fw.api().memory_alloc(&a));
  return {a.memory, fw.api().memory_free};
}
inline void write(const framework& fw, pcy_queue q, pcy_memory m, uint64_t offset, const void* src,
                  uint64_t bytes, bool blocking = true) {
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = q;
  a.memory = m;
  a.offset = offset;
  a.host_pointer = const_cast<void*>(src);
  a.bytes = bytes;
  a.blocking = blocking;
  check(fw.api().memory_write(&a));
}
inline void read(const framework& fw, pcy_queue q, pcy_memory m, uint64_t offset, void* dst,
                 uint64_t bytes, bool blocking = true) {
  pcy_memory_transfer_args a{};
  a.struct_size = sizeof a;
  a.queue = q;
  a.memory = m;
  a.offset = offset;
  a.host_pointer = dst;
  a.bytes = bytes;
  a.blocking = blocking;
  check(fw.api().memory_read(&a));
}
inline void copy(const framework& fw, pcy_queue q, pcy_memory src, uint64_t so, pcy_memory dst,
                 uint64_t d, uint64_t bytes) {
  pcy_memory_copy_args a{};
  a.struct_size = sizeof a;
  a.queue = q;
  a.src = src;
  a.src_offset = so;
  a.dst = dst;
  a.dst_offset = d;
  a.bytes = bytes;
  check(fw.api().memory_copy(&a));
}
inline void fill(const framework& fw, pcy_queue q, pcy_memory m, uint64_t offset, uint64_t bytes,
                 const void* pattern, uint32_t pattern_size) {
  pcy_memory_fill_args a{};
  a.struct_size = sizeof a;
  a.queue = q;
  a.memory = m;
  a.offset = offset;
  a.bytes = bytes;
  a.pattern = pattern;
  a.pattern_size = pattern_size;
  check(fw.api().memory_fill(&a));
}
inline void finish(const framework& fw, pcy_queue q) { check(fw.api().queue_finish(q)); }

} // namespace parenchyma::sdk::host
