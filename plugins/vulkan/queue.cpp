// Queues and events. A pcy queue records its work into command buffers ("batches") submitted to
// the device's one VkQueue; each submit waits for the queue's previous one and signals the next
// value of the queue's timeline semaphore, so work runs in order, and an event is a (timeline,
// value) pair. Inside a batch a full memory barrier separates commands. Transfers go through
// host-visible staging buffers that live until their batch has completed, then go back to the
// device's pool (device.cpp: acquire_staging).
#include "vulkan.hpp"

#include <algorithm>
#include <cstring>

namespace parenchyma::vulkan {
namespace {
// A batch is submitted without waiting once it holds this many commands or staged bytes, so a
// long stream of work without a finish neither grows without bound nor waits to start.
constexpr uint32_t max_batch_commands = 256;
constexpr uint64_t max_batch_staging = uint64_t{64} << 20;
} // namespace

// ---- events -----------------------------------------------------------------------------------

void event::wait() {
  if (value_ == 0) return; // recorded before any work
  VkSemaphoreWaitInfo w{};
  w.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  w.semaphoreCount = 1;
  const VkSemaphore s = timeline_->semaphore;
  w.pSemaphores = &s;
  w.pValues = &value_;
  vk_check(dev_->fn.vkWaitSemaphores(dev_->device, &w, UINT64_MAX), "vkWaitSemaphores",
           PCY_ERR_DEVICE, sdk::str("waiting for an event on '", dev_->info.name, "'"));
}

// ---- queues -----------------------------------------------------------------------------------

queue::queue(const context& ctx, uint32_t device) : dev_(ctx.ref(device)) {
  VkSemaphoreTypeCreateInfo type{};
  type.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO;
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type.initialValue = 0;
  VkSemaphoreCreateInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO;
  si.pNext = &type;
  VkSemaphore s = VK_NULL_HANDLE;
  vk_check(dev_->fn.vkCreateSemaphore(dev_->device, &si, nullptr, &s), "vkCreateSemaphore",
           PCY_ERR_DEVICE, sdk::str("a timeline semaphore for a queue on '", dev_->info.name, "'"));
  timeline_ = std::make_shared<timeline>(dev_->device, dev_->fn.vkDestroySemaphore, s);
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pi.queueFamilyIndex = dev_->info.queue_family;
  vk_check(dev_->fn.vkCreateCommandPool(dev_->device, &pi, nullptr, &pool_), "vkCreateCommandPool",
           PCY_ERR_DEVICE, sdk::str("a command pool on '", dev_->info.name, "'"));
  dev_->add_timeline(timeline_);
}

queue::~queue() {
  std::lock_guard lock(mutex_);
  // The ABI: queue_destroy waits for the queue's work first.
  try {
    submit();
    wait_value(submitted_, "queue_destroy");
  } catch (const std::exception& e) {
    dev_->log.warn("queue_destroy on '", dev_->info.name, "': ", e.what(),
                   "; waiting for the whole device instead");
  }
  // Then the VkQueue idle: the timeline's value says the batches' signals happened, not that the
  // driver is done with the semaphore; destroying it (below, or by the last event holding it) may
  // follow only once every batch that signals it has completed execution (vkDestroySemaphore's
  // rule). lavapipe's queue thread still unlocked the semaphore's mutex after the waiter woke:
  // ThreadSanitizer saw the semaphore freed under it (the install test, 2026-12-06).
  {
    std::lock_guard submit_lock(dev_->submit_mutex);
    dev_->fn.vkQueueWaitIdle(dev_->queue);
  }
  in_flight_.push_back(std::move(open_)); // an open batch that was never submitted
  for (batch& b : in_flight_) {
    for (const auto& s : b.staging)
      dev_->release_staging(s);
    for (VkDescriptorPool p : b.pools)
      dev_->fn.vkDestroyDescriptorPool(dev_->device, p, nullptr);
  }
  dev_->fn.vkDestroyCommandPool(dev_->device, pool_, nullptr); // frees its command buffers
  dev_->remove_timeline(timeline_.get());
  dev_->collect();
}

VkCommandBuffer queue::command() {
  if (capture_ != nullptr) { // into the graph: its command buffer is begun at creation
    batch& g = capture_->rec_;
    if (g.commands > 0) {
      VkMemoryBarrier mb{};
      mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
      mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
      mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
      dev_->fn.vkCmdPipelineBarrier(g.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                    VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, nullptr, 0,
                                    nullptr);
    }
    ++g.commands;
    return g.cmd;
  }
  if (open_.cmd == VK_NULL_HANDLE) {
    reap();
    if (!spare_.empty()) {
      open_.cmd = spare_.back();
      spare_.pop_back();
    } else {
      VkCommandBufferAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
      ai.commandPool = pool_;
      ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
      ai.commandBufferCount = 1;
      vk_check(dev_->fn.vkAllocateCommandBuffers(dev_->device, &ai, &open_.cmd),
               "vkAllocateCommandBuffers");
    }
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    if (const VkResult r = dev_->fn.vkBeginCommandBuffer(open_.cmd, &bi); r != VK_SUCCESS) {
      spare_.push_back(open_.cmd);
      open_.cmd = VK_NULL_HANDLE;
      vk_fail(status_for(r, PCY_ERR_DEVICE), "vkBeginCommandBuffer", r);
    }
  } else if (open_.commands > 0) {
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
    dev_->fn.vkCmdPipelineBarrier(open_.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                  VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, nullptr, 0,
                                  nullptr);
  }
  ++open_.commands;
  timeline_->covers.store(submitted_ + 1, std::memory_order_release);
  return open_.cmd;
}

void queue::submit(VkCommandBuffer also) {
  const bool has_commands = open_.cmd != VK_NULL_HANDLE && open_.commands > 0;
  if (!has_commands && waits_.empty() && also == VK_NULL_HANDLE) return;
  if (open_.cmd != VK_NULL_HANDLE) {
    // The host reads staging buffers once the timeline says the batch is done: make the
    // batch's writes visible to it.
    VkMemoryBarrier mb{};
    mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    dev_->fn.vkCmdPipelineBarrier(open_.cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                                  VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    vk_check(dev_->fn.vkEndCommandBuffer(open_.cmd), "vkEndCommandBuffer");
  }
  const uint64_t value = submitted_ + 1;
  std::vector<VkSemaphore> wait_semaphores;
  std::vector<uint64_t> wait_values;
  if (submitted_ > 0) { // in order after this queue's previous batch
    wait_semaphores.push_back(timeline_->semaphore);
    wait_values.push_back(submitted_);
  }
  for (const auto& [s, v] : waits_) {
    wait_semaphores.push_back(s);
    wait_values.push_back(v);
  }
  const std::vector<VkPipelineStageFlags> stages(wait_semaphores.size(),
                                                 VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  VkTimelineSemaphoreSubmitInfo ti{};
  ti.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO;
  ti.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  ti.pWaitSemaphoreValues = wait_values.data();
  ti.signalSemaphoreValueCount = 1;
  ti.pSignalSemaphoreValues = &value;
  VkSubmitInfo si{};
  si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  si.pNext = &ti;
  si.waitSemaphoreCount = static_cast<uint32_t>(wait_semaphores.size());
  si.pWaitSemaphores = wait_semaphores.data();
  si.pWaitDstStageMask = stages.data();
  // The open batch, then a graph's command buffer (which begins with a full barrier).
  const VkCommandBuffer buffers[2] = {open_.cmd, also};
  const uint32_t first = open_.cmd != VK_NULL_HANDLE ? 0 : 1;
  si.commandBufferCount = (open_.cmd != VK_NULL_HANDLE ? 1 : 0) + (also != VK_NULL_HANDLE ? 1 : 0);
  si.pCommandBuffers = buffers + first;
  si.signalSemaphoreCount = 1;
  si.pSignalSemaphores = &timeline_->semaphore;
  VkResult r;
  {
    std::lock_guard lock(dev_->submit_mutex);
    r = dev_->fn.vkQueueSubmit(dev_->queue, 1, &si, VK_NULL_HANDLE);
  }
  waits_.clear();
  if (r != VK_SUCCESS) {
    // Nothing of the batch runs: drop it (its staging goes now) and say so.
    for (const auto& s : open_.staging)
      dev_->release_staging(s);
    for (VkDescriptorPool p : open_.pools)
      dev_->fn.vkDestroyDescriptorPool(dev_->device, p, nullptr);
    if (open_.cmd != VK_NULL_HANDLE) {
      dev_->fn.vkResetCommandBuffer(open_.cmd, 0);
      spare_.push_back(open_.cmd);
    }
    open_ = batch{};
    timeline_->covers.store(submitted_, std::memory_order_release);
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkQueueSubmit", r,
            sdk::str("the work enqueued on '", dev_->info.name, "' since the last finish was lost",
                     r == VK_ERROR_DEVICE_LOST ? " (the device was lost: a kernel may have faulted)"
                                               : ""));
  }
  submitted_ = value;
  open_.value = value;
  in_flight_.push_back(std::move(open_));
  open_ = batch{};
}

void queue::wait_value(uint64_t value, const char* what) {
  if (value == 0) return;
  VkSemaphoreWaitInfo w{};
  w.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO;
  w.semaphoreCount = 1;
  w.pSemaphores = &timeline_->semaphore;
  w.pValues = &value;
  const VkResult r = dev_->fn.vkWaitSemaphores(dev_->device, &w, UINT64_MAX);
  if (r != VK_SUCCESS)
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkWaitSemaphores", r,
            sdk::str(what, ": work on '", dev_->info.name, "' failed",
                     r == VK_ERROR_DEVICE_LOST ? " (the device was lost: a kernel may have faulted)"
                                               : ""));
}

void queue::reap() {
  if (in_flight_.empty()) return;
  uint64_t done = 0;
  if (dev_->fn.vkGetSemaphoreCounterValue(dev_->device, timeline_->semaphore, &done) != VK_SUCCESS)
    return;
  std::erase_if(in_flight_, [&](batch& b) {
    if (b.value > done) return false;
    for (const auto& s : b.staging)
      dev_->release_staging(s);
    for (VkDescriptorPool p : b.pools)
      dev_->fn.vkDestroyDescriptorPool(dev_->device, p, nullptr);
    if (b.cmd != VK_NULL_HANDLE && dev_->fn.vkResetCommandBuffer(b.cmd, 0) == VK_SUCCESS)
      spare_.push_back(b.cmd);
    return true;
  });
  dev_->collect();
}

device_state::buffer queue::staging(uint64_t bytes) {
  if (!in_flight_.empty()) reap();
  device_state::buffer b = dev_->acquire_staging(bytes);
  try {
    batch& into = recording(); // a graph's staging lives as long as the graph
    into.staging.push_back(b);
    into.staged += bytes;
  } catch (...) {
    dev_->release_staging(b);
    throw;
  }
  return b;
}

void queue::refuse_in_capture(const char* what) {
  if (capture_ == nullptr) [[likely]]
    return;
  capture_->broken_ = true; // as a CUDA capture is invalidated: capture_end reports it
  sdk::fail(PCY_ERR_UNSUPPORTED,
            sdk::str(what, " on a queue that is capturing a graph: it waits for the device or the "
                           "host, and the captured work does not run until the graph is "
                           "launched; a graph holds launches, copies and fills only (the "
                           "capture is broken: end it and destroy the graph)"));
}

void queue::finish() {
  std::lock_guard lock(mutex_);
  refuse_in_capture("queue_finish");
  submit();
  wait_value(submitted_, "queue_finish");
  reap();
}

event* queue::record() {
  std::lock_guard lock(mutex_);
  refuse_in_capture("event_record");
  submit();
  return new event(dev_, timeline_, submitted_);
}

void queue::wait(event& e) {
  {
    std::lock_guard lock(mutex_);
    refuse_in_capture("queue_wait_event");
  }
  if (e.device() != dev_.get()) {
    // A semaphore cannot be waited for on another VkDevice: wait on the host instead.
    e.wait();
    return;
  }
  std::lock_guard lock(mutex_);
  if (e.semaphore() == timeline_->semaphore || e.value() == 0) return; // already in order
  // Work recorded so far does not wait; what is recorded after this call does.
  submit();
  waits_.emplace_back(e.semaphore(), e.value());
}

void queue::same_device(const memory& m, const char* what) const {
  if (m.device() != dev_.get()) [[unlikely]]
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(what, ": the memory belongs to another context or device than the queue"));
}

void queue::read(memory& m, uint64_t offset, void* host, uint64_t bytes, bool) {
  m.check_range(offset, bytes, "memory_read");
  same_device(m, "memory_read");
  if (bytes == 0) return;
  if (host == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_read: host pointer is NULL");
  std::lock_guard lock(mutex_);
  refuse_in_capture("memory_read");
  // Always blocking (allowed: a non-blocking read "may" return early): the bytes come through a
  // staging buffer that the host copies from once the batch is done; in pieces of at most
  // max_batch_staging, so a large read needs no staging buffer as large as itself.
  auto* out = static_cast<unsigned char*>(host);
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t piece = std::min(bytes - done, max_batch_staging);
    const device_state::buffer s = staging(piece);
    VkCommandBuffer cmd = command();
    const VkBufferCopy region{offset + done, 0, piece};
    dev_->fn.vkCmdCopyBuffer(cmd, m.handle(), s.handle, 1, &region);
    submit();
    wait_value(submitted_, "memory_read");
    std::memcpy(out + done, s.mapped, static_cast<size_t>(piece));
    reap();
    done += piece;
  }
}

void queue::write(memory& m, uint64_t offset, const void* host, uint64_t bytes, bool blocking) {
  m.check_range(offset, bytes, "memory_write");
  same_device(m, "memory_write");
  if (bytes == 0) return;
  if (host == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_write: host pointer is NULL");
  std::lock_guard lock(mutex_);
  // A captured write would take the host bytes at capture, not at launch: refused (as CUDA
  // refuses transfers from pageable memory in a capture).
  refuse_in_capture("memory_write");
  // The host bytes are taken now (reads are blocking, so no earlier read still fills them). A
  // write larger than max_batch_staging goes in pieces, each waited for before the next.
  const auto* in = static_cast<const unsigned char*>(host);
  const bool pieces = bytes > max_batch_staging;
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t piece = std::min(bytes - done, max_batch_staging);
    const device_state::buffer s = staging(piece);
    std::memcpy(s.mapped, in + done, static_cast<size_t>(piece));
    VkCommandBuffer cmd = command();
    const VkBufferCopy region{0, offset + done, piece};
    dev_->fn.vkCmdCopyBuffer(cmd, s.handle, m.handle(), 1, &region);
    done += piece;
    if (blocking || pieces) {
      submit();
      wait_value(submitted_, "memory_write");
      reap();
    } else if (open_.commands >= max_batch_commands || open_.staged >= max_batch_staging) {
      submit();
    }
  }
}

void queue::copy(memory& src, uint64_t src_offset, memory& dst, uint64_t dst_offset,
                 uint64_t bytes) {
  src.check_range(src_offset, bytes, "memory_copy (source)");
  dst.check_range(dst_offset, bytes, "memory_copy (destination)");
  if (src.device() != dev_.get() || dst.device() != dev_.get())
    sdk::fail(PCY_ERR_UNSUPPORTED,
              "memory_copy: source and destination are not both memory of the queue's VkDevice "
              "(another context or device), which cannot copy directly (the core stages the "
              "data through host memory)");
  if (bytes == 0) return;
  sdk::refuse_overlap_in_one_buffer(src.handle() == dst.handle(), src_offset, dst_offset, bytes);
  std::lock_guard lock(mutex_);
  VkCommandBuffer cmd = command();
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  dev_->fn.vkCmdCopyBuffer(cmd, src.handle(), dst.handle(), 1, &region);
  if (open_.commands >= max_batch_commands) submit();
}

void queue::fill(memory& m, uint64_t offset, uint64_t bytes, const void* pattern, uint32_t size) {
  m.check_range(offset, bytes, "memory_fill");
  same_device(m, "memory_fill");
  if (pattern == nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "memory_fill: pattern is NULL");
  if (size != 1 && size != 2 && size != 4 && size != 8 && size != 16)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("memory_fill: pattern of ", size, " bytes (1, 2, 4, 8 or 16)"));
  if (bytes == 0) return;
  std::lock_guard lock(mutex_);
  if (size <= 4 && offset % 4 == 0 && bytes % 4 == 0) {
    // vkCmdFillBuffer writes one 4-byte word: the pattern repeated to 4 bytes.
    unsigned char word[4];
    for (uint32_t i = 0; i < 4; i += size)
      std::memcpy(word + i, pattern, size);
    uint32_t data = 0;
    std::memcpy(&data, word, 4);
    VkCommandBuffer cmd = command();
    dev_->fn.vkCmdFillBuffer(cmd, m.handle(), offset, bytes, data);
    if (open_.commands >= max_batch_commands) submit();
    return;
  }
  // Otherwise copies of a staging chunk that holds the pattern repeated (copies have no
  // alignment rule).
  const uint64_t chunk = std::min<uint64_t>(bytes, (uint64_t{1} << 20) / size * size);
  const device_state::buffer s = staging(chunk);
  for (uint64_t i = 0; i < chunk; i += size)
    std::memcpy(static_cast<unsigned char*>(s.mapped) + i, pattern, size);
  std::vector<VkBufferCopy> regions;
  for (uint64_t done = 0; done < bytes; done += chunk)
    regions.push_back({0, offset + done, std::min(chunk, bytes - done)});
  VkCommandBuffer cmd = command();
  dev_->fn.vkCmdCopyBuffer(cmd, s.handle, m.handle(), static_cast<uint32_t>(regions.size()),
                           regions.data());
  if (open_.commands >= max_batch_commands) submit();
}

} // namespace parenchyma::vulkan
