// parenchyma mock framework plugin: host memory posing as device memory, written with the SDK's
// class + macro. Everything a test or a plugin author wants to vary is a host setting (read
// through pcy_host_services::setting: the environment, else the config's "settings"):
//   PARENCHYMA_MOCK_DEVICES       device count, 0..64 (default 1)
//   PARENCHYMA_MOCK_KIND          gpu, cpu, accelerator or other (default gpu)
//   PARENCHYMA_MOCK_SLOTS         the optional parts offered: a comma list of export, import,
//                                 native, programs, or all / none (default all)
//   PARENCHYMA_MOCK_HOST_UNIFIED  1/0: the host_unified property (default 1 for cpu, else 0)
//   PARENCHYMA_MOCK_FP64          1/0: the fp64 property (default 1)
//   PARENCHYMA_MOCK_ASYNC         1/0: queues run their work on a thread of their own (default 0)
//   PARENCHYMA_MOCK_BREAK         fill or properties: one behaviour deliberately wrong, for
//                                 testing the conformance suite itself (default none)
//   PARENCHYMA_MOCK_BUILD_MS      0..60000: a program build takes this long (a slow compile,
//                                 for testing progress reporting; default 0)
// The SDK fixes the slot table when the library is loaded, before any setting can be read, so
// a part switched off keeps its slot and answers PCY_ERR_UNSUPPORTED — what the host does for a
// NULL slot (docs/abi.md C5).
#pragma once

#include <parenchyma/sdk/framework.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace parenchyma::mock {

class plugin;

// What the host's settings made of one plugin instance.
struct settings {
  uint32_t devices = 1;
  pcy_device_kind kind = PCY_DEVICE_GPU;
  bool exports = true, imports = true, natives = true, programs = true;
  bool host_unified = false;
  bool fp64 = true;
  bool async = false;
  uint32_t build_ms = 0;
  std::string broken; // empty, "fill" or "properties"

  // Throws sdk::error (PCY_ERR_INVALID_ARGUMENT) naming a setting whose value is not understood.
  static settings read(const pcy_host_services& host);
  // Fails with PCY_ERR_UNSUPPORTED when `on` is false: the part is switched off.
  static void offered(bool on, const char* part);
};

class memory {
public:
  memory(std::byte* p, uint64_t bytes, bool owned, bool pinned, const plugin& owner)
      : ptr_(p), bytes_(bytes), owned_(owned), pinned_(pinned), plugin_(owner) {}
  ~memory();
  memory(const memory&) = delete;
  memory& operator=(const memory&) = delete;

  // Bounds-checked view: a bad range is an error for the caller, never a stray access.
  std::byte* at(uint64_t offset, uint64_t bytes, const char* what) const;
  bool export_to(pcy_handle_kind kind, pcy_memory_handle& h);
  void* native();

private:
  std::byte* ptr_;
  uint64_t bytes_;
  bool owned_, pinned_;
  const plugin& plugin_;
};

// The work of one queue: in sync mode each job runs when it is submitted; in async mode a
// thread of the queue's own runs them in order. Jobs never fail (every argument is checked
// before a job is made), so nothing is reported late.
class queue_state {
public:
  explicit queue_state(bool async);
  ~queue_state(); // runs what is left, then joins the thread
  queue_state(const queue_state&) = delete;
  queue_state& operator=(const queue_state&) = delete;

  uint64_t submit(std::function<void()> job); // returns the job's ticket
  uint64_t ticket() const;                    // the ticket of the last job submitted
  void wait_for(uint64_t ticket);             // until that job and all before it have run

private:
  void run();
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  uint64_t submitted_ = 0, completed_ = 0;
  bool stop_ = false;
  std::thread worker_; // async mode only; last, so it starts after everything above
};

class event {
public:
  event(std::shared_ptr<queue_state> q, uint64_t ticket) : queue_(std::move(q)), ticket_(ticket) {}
  void wait() { queue_->wait_for(ticket_); }
  const std::shared_ptr<queue_state>& queue() const noexcept { return queue_; }
  uint64_t ticket() const noexcept { return ticket_; }

private:
  std::shared_ptr<queue_state> queue_; // kept alive by the event: it may outlive its queue
  uint64_t ticket_;
};

class kernel {
public:
  explicit kernel(std::string name) : name_(std::move(name)) {}
  const std::string& name() const noexcept { return name_; }

private:
  std::string name_;
};

// The mock's "kernel language": one line per kernel, "kernel <name>", from a fixed set
// (add_one(float* x, uint32 n): x[i] += 1 for i < n).
class program {
public:
  explicit program(std::vector<std::string> kernels) : kernels_(std::move(kernels)) {}
  kernel* create_kernel(const char* name);

private:
  std::vector<std::string> kernels_;
};

class queue {
public:
  queue(const plugin& p, uint32_t device, bool async)
      : plugin_(p), device_(device), state_(std::make_shared<queue_state>(async)) {}
  PCY_SDK_QUEUE_MEMBERS(memory, event);
  void launch(kernel& k, const pcy_kernel_launch_args& args);
  void* native();

private:
  const plugin& plugin_;
  uint32_t device_;
  std::shared_ptr<queue_state> state_;
};

class context {
public:
  PCY_SDK_CONTEXT_MEMBERS(context, plugin, queue, memory);
  memory* import(uint32_t device, const pcy_memory_handle& h);
  program* build(std::string_view source, const char* options, bool& cache_hit);
  void* native_context();
  void* native_device(uint32_t device);

private:
  void check_device(uint32_t device) const;
  plugin& plugin_;
  std::vector<uint32_t> devices_; // the plugin's device indices, in the context's order
};

class plugin : public sdk::framework_plugin<context, queue, event, memory, program, kernel> {
public:
  static constexpr sdk::plugin_info info{
      "mock", "1.0", "mock devices over host memory, configured by PARENCHYMA_MOCK_* settings"};

  explicit plugin(const pcy_host_services& host);

  const settings& config() const noexcept { return settings_; }
  // A stand-in for a driver's device handle: stable while the plugin lives.
  void* device_handle(uint32_t device) { return &ordinals_[device]; }

private:
  settings settings_;
  std::vector<uint32_t> ordinals_; // one per device: their addresses are the device handles
};

} // namespace parenchyma::mock
