// "oot": a complete framework plugin written outside the parenchyma tree, against the installed
// SDK alone. One pretend GPU whose memory is host memory: enough to be discovered, ranked,
// selected and used by an unmodified application. See docs/plugin-guide.md.
#include <parenchyma/sdk/framework.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <span>

namespace oot {

using parenchyma::sdk::fail;
using parenchyma::sdk::str;

class memory {
public:
  explicit memory(uint64_t bytes) : data_(new std::byte[bytes]), bytes_(bytes) {}
  // Bounds-checked view: a bad offset is an error for the caller, never a crash.
  std::byte* at(uint64_t offset, uint64_t bytes) const {
    if (offset > bytes_ || bytes > bytes_ - offset)
      fail(PCY_ERR_INVALID_ARGUMENT,
           str(bytes, " bytes at offset ", offset, " overrun a ", bytes_, "-byte allocation"));
    return data_.get() + offset;
  }

private:
  std::unique_ptr<std::byte[]> data_;
  uint64_t bytes_;
};

class event {
public:
  void wait() {} // the queue below runs each operation before returning
};

class queue {
public:
  void finish() {}
  event* record() { return new event; }
  void wait(event&) {}
  void read(memory& m, uint64_t off, void* host, uint64_t bytes, bool /*blocking*/) {
    std::memcpy(host, m.at(off, bytes), bytes);
  }
  void write(memory& m, uint64_t off, const void* host, uint64_t bytes, bool /*blocking*/) {
    std::memcpy(m.at(off, bytes), host, bytes);
  }
  void copy(memory& src, uint64_t so, memory& dst, uint64_t d, uint64_t bytes) {
    std::memmove(dst.at(d, bytes), src.at(so, bytes), bytes);
  }
  void fill(memory& m, uint64_t off, uint64_t bytes, const void* pattern, uint32_t size) {
    std::byte* p = m.at(off, bytes);
    for (uint64_t i = 0; i < bytes; i += size)
      std::memcpy(p + i, pattern, size);
  }
};

class context {
public:
  queue* create_queue(uint32_t device) {
    check(device);
    return new queue;
  }
  memory* alloc(uint32_t device, uint64_t bytes, uint32_t /*flags*/) {
    check(device);
    return new memory(bytes);
  }

private:
  static void check(uint32_t device) {
    if (device != 0) fail(PCY_ERR_INVALID_ARGUMENT, str("device ", device, ": oot has one"));
  }
};

constexpr pcy_property prop(const char* key, pcy_value_type type, const char* s, int64_t i) {
  return pcy_property{sizeof(pcy_property), nullptr, key, type, s, i, 0.0};
}
// Device properties: static, so they live until shutdown as the ABI asks.
constexpr pcy_property device_properties[] = {
    prop(PCY_PROP_NAME, PCY_VALUE_STRING, "OOT Pretend GPU", 0),
    prop(PCY_PROP_VENDOR, PCY_VALUE_STRING, "Example Vendor", 0),
    prop(PCY_PROP_KIND, PCY_VALUE_INT, nullptr, PCY_DEVICE_GPU),
    prop(PCY_PROP_COMPUTE_UNITS, PCY_VALUE_INT, nullptr, 1),
    prop(PCY_PROP_GLOBAL_MEMORY, PCY_VALUE_INT, nullptr, int64_t{1} << 30)};

class plugin {
public:
  using context_type = context;
  using queue_type = queue;
  using event_type = event;
  using memory_type = memory;
  static constexpr const char* name = "oot";
  static constexpr const char* version = "1.0";
  static constexpr const char* description = "out-of-tree example: one pretend GPU";

  explicit plugin(const pcy_host_services& host) : log_(&host, name) {
    log_.info("oot plugin initialised");
  }
  uint32_t device_count() const { return 1; }
  const char* reason() const { return nullptr; }
  std::span<const pcy_property> properties(uint32_t) const { return device_properties; }
  context* create_context(std::span<const uint32_t>) { return new context; }

private:
  parenchyma::sdk::logger log_;
};

} // namespace oot

PCY_FRAMEWORK_PLUGIN(oot::plugin)
