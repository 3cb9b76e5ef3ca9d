// Graphs behind pcy_framework_api's graph slots: a graph is one command buffer of its own. While
// a queue captures (the core brackets one op at a time), the launches, copies and fills enqueued
// on it are recorded into the graph's command buffer instead of the open batch, each after a
// full barrier, with their descriptor sets, push constants and staging buffers owned by the
// graph: kernel arguments are taken by value at capture and stay valid for every launch.
// Whatever waits for the device or the host (finish, event record and wait, read, write) is
// refused and breaks the capture. instantiate ends the command buffer; launch_graph submits it
// with one vkQueueSubmit, after the queue's open batch in the same submit, waiting for the
// queue's previous submit and signalling the next value of its timeline like any batch. The
// command buffer is recorded with SIMULTANEOUS_USE: a launch may be submitted while the one
// before it is still pending.
#include "vulkan.hpp"

namespace parenchyma::vulkan {
namespace {
// A full memory barrier: everything before it (earlier commands, and the command buffers
// before this one in submission order) is done and visible before anything after it starts.
void full_barrier(const device_state& d, VkCommandBuffer cmd, VkAccessFlags dst,
                  VkPipelineStageFlags dst_stage) {
  VkMemoryBarrier mb{};
  mb.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask = dst;
  d.fn.vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, dst_stage, 0, 1, &mb, 0,
                            nullptr, 0, nullptr);
}
} // namespace

graph::graph(device_ref dev, queue* owner) : dev_(std::move(dev)), owner_(owner) {
  const device_state& d = *dev_;
  VkCommandPoolCreateInfo pi{};
  pi.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pi.queueFamilyIndex = d.info.queue_family;
  vk_check(d.fn.vkCreateCommandPool(d.device, &pi, nullptr, &pool_), "vkCreateCommandPool",
           PCY_ERR_DEVICE, sdk::str("a command pool for a graph on '", d.info.name, "'"));
  try {
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    vk_check(d.fn.vkAllocateCommandBuffers(d.device, &ai, &rec_.cmd), "vkAllocateCommandBuffers");
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT; // launched again while pending
    vk_check(d.fn.vkBeginCommandBuffer(rec_.cmd, &bi), "vkBeginCommandBuffer");
    // Submitted after the queue's open batch in one submit: wait for its writes.
    full_barrier(d, rec_.cmd, VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT,
                 VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  } catch (...) {
    d.fn.vkDestroyCommandPool(d.device, pool_, nullptr); // frees the command buffer
    throw;
  }
}

graph::~graph() {
  // Never left capturing by the core, but the queue must not record into a freed graph.
  if (capturing_) owner_->abandon_capture(*this);
  device_state* d = dev_.get();
  // Raw handles only: a device_ref in the graveyard would keep the device alive forever.
  auto release = [d, pool = pool_, staging = std::move(rec_.staging),
                  pools = std::move(rec_.pools)] {
    for (const auto& s : staging)
      d->release_staging(s);
    for (VkDescriptorPool p : pools)
      d->fn.vkDestroyDescriptorPool(d->device, p, nullptr);
    d->fn.vkDestroyCommandPool(d->device, pool, nullptr);
  };
  // A launch may still be pending (graph_destroy may come while it runs): freed after it.
  try {
    d->bury(release);
  } catch (...) {
    std::lock_guard lock(d->submit_mutex);
    d->fn.vkDeviceWaitIdle(d->device);
    release();
  }
}

void graph::instantiate() {
  if (broken_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "instantiating a graph whose capture failed: destroy it and capture again");
  if (capturing_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "instantiating a graph that is still capturing");
  if (ready_) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "the graph is already instantiated");
  // The host may read what the graph wrote once the launch's timeline value is reached.
  full_barrier(*dev_, rec_.cmd, VK_ACCESS_HOST_READ_BIT, VK_PIPELINE_STAGE_HOST_BIT);
  if (const VkResult r = dev_->fn.vkEndCommandBuffer(rec_.cmd); r != VK_SUCCESS) {
    broken_ = true;
    vk_fail(status_for(r, PCY_ERR_DEVICE), "vkEndCommandBuffer", r,
            sdk::str("finishing a graph of ", rec_.commands, " commands"));
  }
  ready_ = true;
}

graph* queue::create_graph() { return new graph(dev_, this); }

void queue::abandon_capture(const graph& g) noexcept {
  std::lock_guard lock(mutex_);
  if (capture_ == &g) capture_ = nullptr;
}

void queue::capture_begin(graph& g) {
  if (g.owner_ != this)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "capturing into a graph made on another queue");
  if (g.ready_ || g.broken_ || g.capturing_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "capturing into a graph that is instantiated, broken or already capturing");
  std::lock_guard lock(mutex_);
  if (capture_ != nullptr)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "the queue is already capturing into another graph");
  capture_ = &g;
  g.capturing_ = true;
}

void queue::capture_end(graph& g) {
  std::lock_guard lock(mutex_);
  if (capture_ != &g || !g.capturing_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "capture_end without capture_begin on this queue");
  capture_ = nullptr; // the queue runs work again, whatever comes next
  g.capturing_ = false;
  if (g.broken_)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              "the capture failed: something in the captured work waited for the device or the "
              "host (finish, event, read or write) or failed half-recorded; destroy the graph");
}

void queue::launch_graph(graph& g) {
  if (g.owner_ != this || !g.ready_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "launching a graph that is not instantiated or was made on another queue");
  std::lock_guard lock(mutex_);
  refuse_in_capture("graph_launch");
  if (g.rec_.commands == 0) return; // nothing was captured
  // Anything freed from now on waits for this launch too (the graveyard reads `covers`).
  timeline_->covers.store(submitted_ + 1, std::memory_order_release);
  submit(g.rec_.cmd); // one vkQueueSubmit: the open batch, if any, then the graph
}

} // namespace parenchyma::vulkan
