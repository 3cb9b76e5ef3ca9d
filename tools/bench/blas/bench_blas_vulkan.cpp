// Issue 25's Vulkan figures, as ratios measured in one run through the public API
// (docs/vulkan.md, "Measuring"):
//   BLAS-1  sdot, saxpy, sscal, scopy, snrm2 at 256 MiB, 512 MiB and 1 GiB per vector, each
//           against a device copy (the framework's memory_copy, vkCmdCopyBuffer, on the same
//           queue) scaled to the bytes the op moves: the fraction of device-copy bandwidth
//           reached (target >= 0.85).
//   sgemm   n = 1024 ... 8192 on vulkan against the same gemm on parenchyma's `cuda` backend
//           (blas_cuda, cuBLAS) in the same process, when the cuda framework has a device; else
//           the column says why it is absent.
//   small   scal / axpy on 1024 floats through the public API plus the synchronize that observes
//           their completion, against a raw Vulkan record + vkCmdDispatch + vkQueueSubmit + fence
//           wait of a trivial scal shader (vk_scal.comp), done by this program on its own
//           VkInstance / VkDevice of the same physical device (matched by deviceUUID), with the
//           loader opened by dlopen (nothing links libvulkan). Both sides wait for completion on
//           every call (round trip), and in a burst of 64 ops then one wait (target <= 1.3x).
//   NN      nn_vulkan's relu, softmax (rows of 1024) and 2 x 2 max pooling on 256 MiB, each
//           against the device copy scaled to the bytes the op must move (target >= 0.8).
// Every time is host wall time of `inner` calls followed by a wait for the queue (the Vulkan
// plugin has no device timers), interleaved with the peer (harness.hpp), after a warm-up.
//   bench_blas_vulkan [--quick] [--backend vulkan:N] [--small-n N]
// --quick: small sizes (1 and 8 MiB, gemm 64-256, plus a 256 MiB row, above lavapipe's 128 MiB
// maxStorageBufferRange: blas_vulkan takes it by device address), for a smoke run on lavapipe in
// seconds. --small-n N: the
// small ops on N floats instead of 1024 (how the per-call cost grows with the grid).
#include "harness.hpp"
#include "vk_scal_spv.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#ifndef VK_NO_PROTOTYPES
#define VK_NO_PROTOTYPES
#endif
#include <vulkan/vulkan.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

using namespace parenchyma;
namespace blas = parenchyma::blas;
namespace nn = parenchyma::nn;

namespace {

// ---- helpers ----------------------------------------------------------------------------------

std::string size_name(size_t bytes) {
  return bytes >= (size_t(1) << 30)   ? std::to_string(bytes >> 30) + " GiB"
         : bytes >= (size_t(1) << 20) ? std::to_string(bytes >> 20) + " MiB"
                                      : std::to_string(bytes >> 10) + " KiB";
}

// A device property as text, or "".
std::string prop_text(const Device& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key) {
      if (const auto* s = std::get_if<std::string>(&v)) return *s;
      if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
      if (const auto* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
      if (const auto* f = std::get_if<double>(&v)) return std::to_string(*f);
    }
  return "";
}
int64_t prop_int(const Device& d, const std::string& key) {
  for (const auto& [k, v] : d.properties)
    if (k == key)
      if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return 0;
}

// Fresh random data in [-1, 1) (never zeros), quick enough for 1 GiB vectors.
void fill_random(std::span<float> v, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    f = static_cast<float>(static_cast<double>(s >> 11) * 0x1.0p-52 - 1.0);
  }
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void check_failed(const std::string& what) {
  std::printf("CHECK FAILED: %s\n", what.c_str());
  std::exit(1);
}

// The median of `reps` samples of one side alone (no peer to interleave with).
double solo(const std::function<double()>& sample, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i)
    sample();
  std::vector<double> v;
  for (int i = 0; i < reps; ++i)
    v.push_back(sample());
  return bench::percentile(v, 0.5);
}

// ---- the raw Vulkan baseline ------------------------------------------------------------------

// A Vulkan info struct, zeroed, with its sType.
template <class T> T vk(VkStructureType type) {
  T v{};
  v.sType = type;
  return v;
}

#define BENCH_VK_INSTANCE(X)                                                                       \
  X(vkDestroyInstance)                                                                             \
  X(vkEnumeratePhysicalDevices)                                                                    \
  X(vkGetPhysicalDeviceProperties2)                                                                \
  X(vkGetPhysicalDeviceQueueFamilyProperties)                                                      \
  X(vkGetPhysicalDeviceMemoryProperties)                                                           \
  X(vkCreateDevice)                                                                                \
  X(vkGetDeviceProcAddr)
#define BENCH_VK_DEVICE(X)                                                                         \
  X(vkDestroyDevice)                                                                               \
  X(vkDeviceWaitIdle)                                                                              \
  X(vkGetDeviceQueue)                                                                              \
  X(vkCreateBuffer)                                                                                \
  X(vkDestroyBuffer)                                                                               \
  X(vkGetBufferMemoryRequirements)                                                                 \
  X(vkAllocateMemory)                                                                              \
  X(vkFreeMemory)                                                                                  \
  X(vkBindBufferMemory)                                                                            \
  X(vkCreateDescriptorSetLayout)                                                                   \
  X(vkDestroyDescriptorSetLayout)                                                                  \
  X(vkCreatePipelineLayout)                                                                        \
  X(vkDestroyPipelineLayout)                                                                       \
  X(vkCreateDescriptorPool)                                                                        \
  X(vkDestroyDescriptorPool)                                                                       \
  X(vkAllocateDescriptorSets)                                                                      \
  X(vkUpdateDescriptorSets)                                                                        \
  X(vkCreateShaderModule)                                                                          \
  X(vkDestroyShaderModule)                                                                         \
  X(vkCreateComputePipelines)                                                                      \
  X(vkDestroyPipeline)                                                                             \
  X(vkCreateCommandPool)                                                                           \
  X(vkDestroyCommandPool)                                                                          \
  X(vkAllocateCommandBuffers)                                                                      \
  X(vkBeginCommandBuffer)                                                                          \
  X(vkEndCommandBuffer)                                                                            \
  X(vkCmdBindPipeline)                                                                             \
  X(vkCmdBindDescriptorSets)                                                                       \
  X(vkCmdPushConstants)                                                                            \
  X(vkCmdDispatch)                                                                                 \
  X(vkCmdPipelineBarrier)                                                                          \
  X(vkCmdFillBuffer)                                                                               \
  X(vkQueueSubmit)                                                                                 \
  X(vkCreateFence)                                                                                 \
  X(vkDestroyFence)                                                                                \
  X(vkWaitForFences)                                                                               \
  X(vkResetFences)

// One VkDevice on the backend's physical device, an n-float storage buffer, the scal pipeline
// and one command buffer re-recorded for every call (begin resets it), with a fence to wait on.
class raw_vulkan {
public:
#define BENCH_VK_FIELD(f) PFN_##f f = nullptr;
  BENCH_VK_INSTANCE(BENCH_VK_FIELD)
  BENCH_VK_DEVICE(BENCH_VK_FIELD)
#undef BENCH_VK_FIELD

  // Sets `why` and returns false when the baseline cannot be had.
  bool init(const std::string& uuid, uint32_t n, std::string& why) {
    n_ = n;
    const char* env = std::getenv("PARENCHYMA_VULKAN_LIBRARY"); // the plugin's loader, if set
    const char* name = env && *env ? env : "libvulkan.so.1";
    lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return fail(why, std::string("dlopen ") + name + ": " + dlerror());
    auto gipa = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(lib_, "vkGetInstanceProcAddr"));
    if (!gipa) return fail(why, "no vkGetInstanceProcAddr in the loader");
    auto create = reinterpret_cast<PFN_vkCreateInstance>(gipa(nullptr, "vkCreateInstance"));
    auto app = vk<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "bench_blas_vulkan";
    app.apiVersion = VK_API_VERSION_1_2;
    auto ici = vk<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    ici.pApplicationInfo = &app;
    if (!create || !ok(create(&ici, nullptr, &instance_), "vkCreateInstance", why)) return false;
    bool found = true;
#define BENCH_VK_LOAD_I(f)                                                                         \
  f = reinterpret_cast<PFN_##f>(gipa(instance_, #f));                                              \
  found = found && f != nullptr;
    BENCH_VK_INSTANCE(BENCH_VK_LOAD_I)
#undef BENCH_VK_LOAD_I
    if (!found) return fail(why, "an instance function is missing");
    // The physical device whose deviceUUID is the backend's.
    uint32_t count = 0;
    vkEnumeratePhysicalDevices(instance_, &count, nullptr);
    std::vector<VkPhysicalDevice> pds(count);
    vkEnumeratePhysicalDevices(instance_, &count, pds.data());
    for (VkPhysicalDevice pd : pds) {
      auto id = vk<VkPhysicalDeviceIDProperties>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES);
      auto p2 = vk<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
      p2.pNext = &id;
      vkGetPhysicalDeviceProperties2(pd, &p2);
      const uint8_t* u = id.deviceUUID;
      char text[40];
      std::snprintf(text, sizeof text,
                    "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                    u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
                    u[13], u[14], u[15]);
      if (text == uuid) {
        physical_ = pd;
        device_name = p2.properties.deviceName;
      }
    }
    if (!physical_) return fail(why, "no physical device with the backend's uuid " + uuid);
    uint32_t nf = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nf, nullptr);
    std::vector<VkQueueFamilyProperties> fams(nf);
    vkGetPhysicalDeviceQueueFamilyProperties(physical_, &nf, fams.data());
    uint32_t family = UINT32_MAX;
    for (uint32_t i = 0; i < nf && family == UINT32_MAX; ++i)
      if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) family = i;
    if (family == UINT32_MAX) return fail(why, "no compute queue family");
    const float priority = 1;
    auto qci = vk<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    qci.queueFamilyIndex = family;
    qci.queueCount = 1;
    qci.pQueuePriorities = &priority;
    auto dci = vk<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    if (!ok(vkCreateDevice(physical_, &dci, nullptr, &device_), "vkCreateDevice", why))
      return false;
#define BENCH_VK_LOAD_D(f)                                                                         \
  f = reinterpret_cast<PFN_##f>(vkGetDeviceProcAddr(device_, #f));                                 \
  found = found && f != nullptr;
    BENCH_VK_DEVICE(BENCH_VK_LOAD_D)
#undef BENCH_VK_LOAD_D
    if (!found) return fail(why, "a device function is missing");
    vkGetDeviceQueue(device_, family, 0, &queue_);
    return make_objects(family, why);
  }

  // Records `ops` dispatches of scal (a full barrier between them, as the plugin puts between
  // the commands of a batch), submits them once and waits for the fence.
  void run(int ops, float a) {
    auto bi = vk<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cmd_, &bi);
    struct {
      uint32_t n;
      float a;
    } pc{n_, a};
    auto mb = vk<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT;
    for (int i = 0; i < ops; ++i) {
      if (i > 0)
        vkCmdPipelineBarrier(cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, nullptr, 0,
                             nullptr);
      vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
      vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set_, 0,
                              nullptr);
      vkCmdPushConstants(cmd_, layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
      vkCmdDispatch(cmd_, (n_ + 255) / 256, 1, 1);
    }
    vkEndCommandBuffer(cmd_);
    auto si = vk<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    if (vkQueueSubmit(queue_, 1, &si, fence_) != VK_SUCCESS) check_failed("raw vkQueueSubmit");
    if (vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX) != VK_SUCCESS)
      check_failed("raw vkWaitForFences");
    vkResetFences(device_, 1, &fence_);
  }

  std::string device_name;

  ~raw_vulkan() {
    if (device_ && vkDestroyDevice) {
      if (vkDeviceWaitIdle) vkDeviceWaitIdle(device_);
      if (fence_) vkDestroyFence(device_, fence_, nullptr);
      if (pool_) vkDestroyCommandPool(device_, pool_, nullptr);
      if (pipeline_) vkDestroyPipeline(device_, pipeline_, nullptr);
      if (module_) vkDestroyShaderModule(device_, module_, nullptr);
      if (dpool_) vkDestroyDescriptorPool(device_, dpool_, nullptr);
      if (layout_) vkDestroyPipelineLayout(device_, layout_, nullptr);
      if (dsl_) vkDestroyDescriptorSetLayout(device_, dsl_, nullptr);
      if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
      if (memory_) vkFreeMemory(device_, memory_, nullptr);
      vkDestroyDevice(device_, nullptr);
    }
    if (instance_ && vkDestroyInstance) vkDestroyInstance(instance_, nullptr);
    // The loader stays open: the plugin may share it, and its atexit handlers may need it.
  }

private:
  static bool fail(std::string& why, std::string text) {
    why = std::move(text);
    return false;
  }
  static bool ok(VkResult r, const char* what, std::string& why) {
    if (r == VK_SUCCESS) return true;
    return fail(why, std::string(what) + " failed: VkResult " + std::to_string(r));
  }

  bool make_objects(uint32_t family, std::string& why) {
    auto bci = vk<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    bci.size = uint64_t(n_) * sizeof(float);
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    if (!ok(vkCreateBuffer(device_, &bci, nullptr, &buffer_), "vkCreateBuffer", why)) return false;
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, buffer_, &req);
    VkPhysicalDeviceMemoryProperties mp;
    vkGetPhysicalDeviceMemoryProperties(physical_, &mp);
    uint32_t type = UINT32_MAX;
    for (int pass = 0; pass < 2 && type == UINT32_MAX; ++pass)
      for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; ++i)
        if ((req.memoryTypeBits & (1u << i)) &&
            (pass == 1 || (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
          type = i;
    auto mai = vk<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = type;
    if (type == UINT32_MAX ||
        !ok(vkAllocateMemory(device_, &mai, nullptr, &memory_), "vkAllocateMemory", why))
      return why.empty() ? fail(why, "no memory type for the buffer") : false;
    if (!ok(vkBindBufferMemory(device_, buffer_, memory_, 0), "vkBindBufferMemory", why))
      return false;
    VkDescriptorSetLayoutBinding binding{0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                         VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    auto dlci =
        vk<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    dlci.bindingCount = 1;
    dlci.pBindings = &binding;
    if (!ok(vkCreateDescriptorSetLayout(device_, &dlci, nullptr, &dsl_),
            "vkCreateDescriptorSetLayout", why))
      return false;
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, 8};
    auto plci = vk<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    plci.setLayoutCount = 1;
    plci.pSetLayouts = &dsl_;
    plci.pushConstantRangeCount = 1;
    plci.pPushConstantRanges = &range;
    if (!ok(vkCreatePipelineLayout(device_, &plci, nullptr, &layout_), "vkCreatePipelineLayout",
            why))
      return false;
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1};
    auto dpci = vk<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    dpci.maxSets = 1;
    dpci.poolSizeCount = 1;
    dpci.pPoolSizes = &ps;
    if (!ok(vkCreateDescriptorPool(device_, &dpci, nullptr, &dpool_), "vkCreateDescriptorPool",
            why))
      return false;
    auto dsai = vk<VkDescriptorSetAllocateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
    dsai.descriptorPool = dpool_;
    dsai.descriptorSetCount = 1;
    dsai.pSetLayouts = &dsl_;
    if (!ok(vkAllocateDescriptorSets(device_, &dsai, &set_), "vkAllocateDescriptorSets", why))
      return false;
    VkDescriptorBufferInfo dbi{buffer_, 0, VK_WHOLE_SIZE};
    auto w = vk<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
    w.dstSet = set_;
    w.descriptorCount = 1;
    w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    w.pBufferInfo = &dbi;
    vkUpdateDescriptorSets(device_, 1, &w, 0, nullptr);
    auto smci = vk<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    smci.codeSize = sizeof bench_vk::scal_spv;
    smci.pCode = bench_vk::scal_spv;
    if (!ok(vkCreateShaderModule(device_, &smci, nullptr, &module_), "vkCreateShaderModule", why))
      return false;
    auto cpci = vk<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    cpci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpci.stage.module = module_;
    cpci.stage.pName = "main";
    cpci.layout = layout_;
    if (!ok(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &cpci, nullptr, &pipeline_),
            "vkCreateComputePipelines", why))
      return false;
    auto cpi = vk<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    cpi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    cpi.queueFamilyIndex = family;
    if (!ok(vkCreateCommandPool(device_, &cpi, nullptr, &pool_), "vkCreateCommandPool", why))
      return false;
    auto cbai = vk<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    cbai.commandPool = pool_;
    cbai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cbai.commandBufferCount = 1;
    if (!ok(vkAllocateCommandBuffers(device_, &cbai, &cmd_), "vkAllocateCommandBuffers", why))
      return false;
    auto fci = vk<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    if (!ok(vkCreateFence(device_, &fci, nullptr, &fence_), "vkCreateFence", why)) return false;
    // The data: 1.0f everywhere (not zeros), then one dispatch to check the pipeline runs.
    auto bi = vk<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    vkBeginCommandBuffer(cmd_, &bi);
    vkCmdFillBuffer(cmd_, buffer_, 0, VK_WHOLE_SIZE, 0x3f800000u);
    vkEndCommandBuffer(cmd_);
    auto si = vk<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    if (!ok(vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit", why) ||
        !ok(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences", why))
      return false;
    vkResetFences(device_, 1, &fence_);
    return true;
  }

  void* lib_ = nullptr;
  uint32_t n_ = 0;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout dsl_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkDescriptorPool dpool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
};

// ---- the three parts ---------------------------------------------------------------------------

struct l1_row {
  std::string op{}, size{};
  std::string status{}; // "" when timed, else why not
  double ours_gbs = 0, copy_gbs = 0, fraction = 0, f10 = 0, f90 = 0;
  double cuda_copy_gbs = 0; // the cuda framework's device copy of the same bytes; 0: none
};
struct gemm_row {
  int n = 0;
  std::string status{};
  std::string form{};                             // blas_vulkan's shader for this call (gemm_form)
  double vk_gflops = 0, cu_gflops = 0, ratio = 0; // ratio: vulkan speed / cuBLAS speed
};
struct small_row {
  std::string name{}, status{};
  double raw_ns = 0, ours_ns = 0, ratio = 0, p10 = 0, p90 = 0;
};

struct bench_ctx {
  const Backend& b;
  bench::suite& s;
  bool quick;
  int reps;
  const Backend* cu = nullptr; // the cuda backend on the same machine, when there is one
};

// The cuda framework's device copy (cuMemcpyDtoD on its stream) of `bytes`, in GB/s of bytes read
// and written (2 x bytes), best of 7 runs of a few copies; 0 where it cannot run. On NVIDIA
// hardware this is the memory's limit, which vkCmdCopyBuffer (the Vulkan copy) may not reach.
double cuda_copy_gbs(const Backend& cu, size_t bytes) {
  try {
    const int64_t n = int64_t(bytes / sizeof(float));
    SharedTensor<float> x({n}), y({n});
    for (float& v : x.write_only())
      v = 1.0f;
    const pcy_memory xm = x.read(cu), ym = y.write_only(cu);
    const auto& api = cu.framework().api();
    if (!api.memory_copy) throw std::runtime_error("the cuda framework has no memory_copy");
    auto copy = [&] {
      pcy_memory_copy_args a{};
      a.struct_size = sizeof a;
      a.queue = cu.queue();
      a.src = xm;
      a.dst = ym;
      a.bytes = bytes;
      throw_if(api.memory_copy(&a), "cuda memory_copy");
    };
    copy();
    cu.synchronize();
    double best = 1e300;
    for (int rep = 0; rep < 7; ++rep) {
      const double t0 = now_ns();
      for (int i = 0; i < 4; ++i)
        copy();
      cu.synchronize();
      best = std::min(best, (now_ns() - t0) / 4);
    }
    return 2.0 * double(bytes) / best;
  } catch (const std::exception& e) {
    std::printf("# cuda copy of %s absent: %s\n", size_name(bytes).c_str(), e.what());
    return 0;
  }
}

// Small ops on n floats (1024; --small-n): the public API against the raw dispatch, both waiting.
void small_ops(bench_ctx& c, uint32_t n, std::vector<small_row>& rows) {
  const std::string sn = " n=" + std::to_string(n);
  const std::string uuid = prop_text(c.b.device(), "uuid");
  raw_vulkan raw;
  std::string why;
  if (!raw.init(uuid, n, why)) {
    rows.push_back({"raw baseline", "absent: " + why});
    c.s.meta("raw_vulkan", "absent: " + why);
    return;
  }
  c.s.meta("raw_vulkan_device", raw.device_name);
  SharedTensor<float> x({n}), y({n});
  fill_random(x.write_only(), 11);
  fill_random(y.write_only(), 12);
  const float a = 0.999999f, alpha = 1e-6f;
  blas::scal(c.b, a, x); // uploads, builds scal
  blas::axpy(c.b, alpha, x, y);
  c.b.synchronize();
  raw.run(1, a);
  const long inner = c.quick ? 50 : 400;
  bench::options o{.reps = c.reps, .inner = inner, .warmup = 3};
  auto add = [&](const bench::result& r) {
    rows.push_back({r.name, "", r.peer_ns, r.ours_ns, r.ratio, r.p10, r.p90});
  };
  add(c.s.compare(
      "scal" + sn + " op+wait", [&] { raw.run(1, a); },
      [&] {
        blas::scal(c.b, a, x);
        c.b.synchronize();
      },
      o, "raw_vk"));
  add(c.s.compare(
      "axpy" + sn + " op+wait", [&] { raw.run(1, a); },
      [&] {
        blas::axpy(c.b, alpha, x, y);
        c.b.synchronize();
      },
      o, "raw_vk"));
  // A burst of 64 ops then one wait, per op: the enqueue cost with the submit shared.
  constexpr int burst = 64;
  bench::options ob{.reps = c.reps, .inner = 1, .warmup = 3};
  const long bursts = c.quick ? 4 : 20;
  auto per_op = [&](auto f) {
    return [f, bursts]() mutable {
      const double t0 = now_ns();
      for (long i = 0; i < bursts; ++i)
        f();
      return (now_ns() - t0) / double(bursts * burst);
    };
  };
  add(c.s.compare_sampled("scal" + sn + " burst of 64, one wait",
                          per_op([&] { raw.run(burst, a); }), per_op([&] {
                            for (int i = 0; i < burst; ++i)
                              blas::scal(c.b, a, x);
                            c.b.synchronize();
                          }),
                          ob, "raw_vk"));
}

// One op of a part timed against the device copy: its name, the bytes it must move, the call,
// and why it was refused ("" when it ran and was checked).
struct vs_copy_op {
  std::string name;
  double moved;
  std::function<void()> f;
  std::string refused;
};

// Times each op against the device copy of `bytes` (src to dst, the framework's memory_copy on
// the backend's queue) scaled to the bytes the op moves, `inner` calls a sample; a refused op is
// reported, not timed. Returns the reason when the device copy itself fails ("" otherwise).
std::string time_vs_copy(bench_ctx& c, const std::string& sz, size_t bytes, long inner,
                         pcy_memory src, pcy_memory dst, const std::vector<vs_copy_op>& ops,
                         std::vector<l1_row>& rows) {
  const auto& api = c.b.framework().api();
  if (!api.memory_copy) return "skipped: the framework has no memory_copy";
  auto device_copy = [&] {
    pcy_memory_copy_args a{};
    a.struct_size = sizeof a;
    a.queue = c.b.queue();
    a.src = src;
    a.dst = dst;
    a.bytes = bytes;
    throw_if(api.memory_copy(&a), "memory_copy");
  };
  // The device copy itself must work before it is a ceiling.
  try {
    device_copy();
    c.b.synchronize();
  } catch (const parenchyma::error& e) {
    return std::string("skipped: the device copy failed: ") + e.what();
  }
  auto timed = [&](auto f) {
    return [f, inner, &c]() mutable {
      const double t0 = now_ns();
      for (long i = 0; i < inner; ++i)
        f();
      c.b.synchronize();
      return (now_ns() - t0) / double(inner);
    };
  };
  const double B = double(bytes);
  auto copy_ns = timed(device_copy);
  const double cu_gbs = c.cu != nullptr ? cuda_copy_gbs(*c.cu, bytes) : 0;
  if (cu_gbs > 0) c.s.meta("cuda copy GB/s " + sz, std::to_string(cu_gbs));
  for (const vs_copy_op& op : ops) {
    if (!op.refused.empty()) {
      rows.push_back({op.name, sz, op.refused});
      c.s.meta(op.name + " " + sz, op.refused);
      std::printf("%-44s %s\n", (op.name + " " + sz).c_str(), op.refused.c_str());
      continue;
    }
    bench::options o{.reps = c.reps, .inner = 1, .warmup = 2, .bytes = op.moved};
    // The copy of `bytes` reads and writes 2 B: scaled to the bytes the op moves.
    const bench::result res = c.s.compare_sampled(
        op.name + " " + sz + " vs copy", [&] { return copy_ns() * op.moved / (2 * B); },
        timed(op.f), o, "copy", "vulkan");
    rows.push_back({op.name, sz, "", op.moved / res.ours_ns, op.moved / res.peer_ns, 1 / res.ratio,
                    1 / res.p90, 1 / res.p10, cu_gbs});
    if (cu_gbs > 0)
      c.s.meta(op.name + " " + sz + " of cuda copy",
               std::to_string(op.moved / res.ours_ns / cu_gbs));
  }
  return "";
}

// BLAS-1 at one size: each op against the device copy moving the same bytes.
void level1(bench_ctx& c, size_t bytes, std::vector<l1_row>& rows) {
  const std::string sz = size_name(bytes);
  const char* ops[] = {"dot", "axpy", "scal", "copy", "nrm2"};
  auto skip_all = [&](const std::string& why) {
    for (const char* op : ops)
      rows.push_back({std::string("s") + op, sz, why});
    c.s.meta("s* " + sz, why);
    std::printf("  %s: %s\n", sz.c_str(), why.c_str());
  };
  const Device& d = c.b.device();
  const int64_t global = prop_int(d, "global_memory"), max_alloc = prop_int(d, "max_alloc");
  if (global > 0 && double(2 * bytes) > 0.9 * double(global))
    return skip_all("skipped: two vectors of " + sz + " do not fit in the device's " +
                    size_name(size_t(global)) + " (global_memory)");
  if (max_alloc > 0 && int64_t(bytes) > max_alloc)
    return skip_all("skipped: " + sz + " is above the device's max_alloc " +
                    size_name(size_t(max_alloc)));
  const int64_t n = int64_t(bytes / sizeof(float));
  std::optional<SharedTensor<float>> xo, yo;
  SharedTensor<float> r({1});
  // Host references, and a few elements to check the elementwise ops by.
  double dot_ref = 0, dot_abs = 0, nrm_ref = 0;
  std::vector<int64_t> idx;
  for (int i = 0; i < 61; ++i)
    idx.push_back(i == 60 ? n - 1 : int64_t((uint64_t(i) * 2654435761u) % uint64_t(n)));
  std::vector<float> xs, ys;
  pcy_memory xm = nullptr, ym = nullptr;
  try {
    xo.emplace(std::vector<int64_t>{n});
    yo.emplace(std::vector<int64_t>{n});
    auto hx = xo->write_only();
    auto hy = yo->write_only();
    fill_random(hx, bytes + 1);
    fill_random(hy, bytes + 2);
    for (int64_t i = 0; i < n; ++i) {
      dot_ref += double(hx[i]) * hy[i];
      dot_abs += std::fabs(double(hx[i]) * hy[i]);
      nrm_ref += double(hx[i]) * hx[i];
    }
    nrm_ref = std::sqrt(nrm_ref);
    for (int64_t i : idx) {
      xs.push_back(hx[i]);
      ys.push_back(hy[i]);
    }
    xm = xo->read(c.b); // uploads
    ym = yo->write(c.b);
    r.write_only()[0] = 0;
  } catch (const parenchyma::error& e) {
    return skip_all(std::string("skipped: ") + e.what());
  }
  auto& x = *xo;
  auto& y = *yo;
  // Each op once, checked; an op the plugin refuses (a buffer above maxStorageBufferRange on a
  // device without bufferDeviceAddress, say) is reported with the error's text and not timed.
  const float alpha = 1e-3f, sa = 0.999999f;
  std::vector<std::string> refused(5);
  auto once = [&](int k, auto f) {
    try {
      f();
      c.b.synchronize();
    } catch (const parenchyma::error& e) {
      refused[k] = std::string("refused: ") + e.what();
    }
  };
  auto rel = [](double got, double want, double scale) {
    return std::fabs(got - want) <= 1e-5 * scale + 1e-30;
  };
  once(0, [&] { blas::dot(c.b, n, x, 1, y, 1, r); });
  if (refused[0].empty() && !rel(r.read()[0], dot_ref, dot_abs))
    check_failed("sdot " + sz + ": " + std::to_string(r.read()[0]) + " vs " +
                 std::to_string(dot_ref));
  once(4, [&] { blas::nrm2(c.b, n, x, 1, r); });
  if (refused[4].empty() && !rel(r.read()[0], nrm_ref, 10 * nrm_ref))
    check_failed("snrm2 " + sz + ": " + std::to_string(r.read()[0]) + " vs " +
                 std::to_string(nrm_ref));
  auto check_y = [&](const char* op, auto want) {
    auto hy = y.read();
    for (size_t i = 0; i < idx.size(); ++i)
      if (!(std::fabs(hy[idx[i]] - want(i)) <= 1e-6f * std::fabs(want(i)) + 1e-30f))
        check_failed(std::string(op) + " " + sz + ": y[" + std::to_string(idx[i]) +
                     "] = " + std::to_string(hy[idx[i]]) + ", want " + std::to_string(want(i)));
  };
  once(3, [&] { blas::copy(c.b, n, x, 1, y, 1); });
  if (refused[3].empty()) check_y("scopy", [&](size_t i) { return xs[i]; });
  once(1, [&] { blas::axpy(c.b, n, alpha, x, 1, y, 1); });
  if (refused[1].empty())
    check_y("saxpy",
            [&](size_t i) { return std::fma(alpha, xs[i], refused[3].empty() ? xs[i] : ys[i]); });
  once(2, [&] { blas::scal(c.b, n, sa, x, 1); });
  if (refused[2].empty()) {
    auto hx = x.read();
    for (size_t i = 0; i < idx.size(); ++i)
      if (!(std::fabs(hx[idx[i]] - sa * xs[i]) <= 1e-6f * std::fabs(xs[i])))
        check_failed("sscal " + sz + ": x[" + std::to_string(idx[i]) + "] wrong");
  }
  xm = x.read(c.b); // the device slots are current again (the checks read them to the host)
  ym = y.write(c.b);
  const size_t budget = c.quick ? (size_t(16) << 20) : (size_t(2) << 30);
  const long inner = std::clamp<long>(long(budget / bytes), 2, 64);
  const double B = double(bytes);
  const std::string why =
      time_vs_copy(c, sz, bytes, inner, xm, ym,
                   {{"sdot", 2 * B, [&] { blas::dot(c.b, n, x, 1, y, 1, r); }, refused[0]},
                    {"saxpy", 3 * B, [&] { blas::axpy(c.b, n, alpha, x, 1, y, 1); }, refused[1]},
                    {"sscal", 2 * B, [&] { blas::scal(c.b, n, sa, x, 1); }, refused[2]},
                    {"scopy", 2 * B, [&] { blas::copy(c.b, n, x, 1, y, 1); }, refused[3]},
                    {"snrm2", B, [&] { blas::nrm2(c.b, n, x, 1, r); }, refused[4]}},
                   rows);
  if (!why.empty()) skip_all(why);
}

// NN on one 256 MiB tensor (8 MiB with --quick): relu, softmax over rows of 1024 and 2 x 2 max
// pooling (stride 2) of an N x 16 x 64 x 64 batch, each against the device copy scaled to the bytes
// the op must move (relu and softmax: read and write every element once; pooling: read all,
// write a quarter). Each op is run once and checked at sampled elements against a double loop.
void nn_part(bench_ctx& c, std::vector<l1_row>& rows) {
  const size_t bytes = c.quick ? (size_t(8) << 20) : (size_t(256) << 20);
  const std::string sz = size_name(bytes);
  const int64_t n = int64_t(bytes / sizeof(float)), row = 1024, plane = 64 * 64;
  const int64_t batch = n / (16 * plane);
  const char* names[] = {"relu", "softmax", "pool_max"};
  auto skip_all = [&](const std::string& why) {
    for (const char* op : names)
      rows.push_back({op, sz, why});
    c.s.meta("nn " + sz, why);
    std::printf("  nn %s: %s\n", sz.c_str(), why.c_str());
  };
  std::optional<SharedTensor<float>> xo, yo, po;
  pcy_memory xm = nullptr, ym = nullptr;
  try {
    xo.emplace(std::vector<int64_t>{batch, 16, 64, 64});
    yo.emplace(std::vector<int64_t>{batch, 16, 64, 64});
    po.emplace(std::vector<int64_t>{batch, 16, 32, 32});
    auto hx = xo->write_only();
    fill_random(hx, bytes + 7);
    for (auto& v : hx)
      v *= 8; // softmax over values in [-8, 8)
    xm = xo->read(c.b);
    ym = yo->write_only(c.b);
    po->write_only(c.b);
  } catch (const parenchyma::error& e) {
    return skip_all(std::string("skipped: ") + e.what());
  }
  auto& x = *xo;
  auto& y = *yo;
  auto& pooled = *po;
  const std::vector<int64_t> rows2{n / row, row};
  const std::string refused_by = "refused: ";
  std::vector<std::string> refused(3);
  auto once = [&](int k, auto f) {
    try {
      f();
      c.b.synchronize();
    } catch (const parenchyma::error& e) {
      refused[k] = refused_by + e.what();
    }
  };
  std::vector<float> hx;
  {
    auto v = x.read();
    hx.assign(v.begin(), v.end());
  }
  // relu, checked at 61 places.
  once(0, [&] { nn::relu(c.b, x, y); });
  if (refused[0].empty()) {
    auto hy = y.read();
    for (int i = 0; i < 61; ++i) {
      const int64_t at = int64_t((uint64_t(i) * 2654435761u) % uint64_t(n));
      if (hy[at] != std::max(hx[at], 0.0f))
        check_failed("relu " + sz + ": y[" + std::to_string(at) + "] wrong");
    }
  }
  // softmax over the last axis of an (n / 1024) x 1024 view: the same memory, reshaped.
  SharedTensor<float> xr(rows2), yr(rows2);
  {
    auto hr = xr.write_only();
    std::copy(hx.begin(), hx.end(), hr.begin());
  }
  once(1, [&] { nn::softmax(c.b, xr, yr); });
  if (refused[1].empty()) {
    auto hy = yr.read();
    for (int64_t r : {int64_t(0), n / row / 2, n / row - 1}) {
      double m = -1e300, sum = 0;
      for (int64_t j = 0; j < row; ++j)
        m = std::max(m, double(hx[r * row + j]));
      for (int64_t j = 0; j < row; ++j)
        sum += std::exp(double(hx[r * row + j]) - m);
      for (int64_t j = 0; j < row; j += 97) {
        const double want = std::exp(double(hx[r * row + j]) - m) / sum;
        if (!(std::fabs(hy[r * row + j] - want) <= 1e-5 * want + 1e-12))
          check_failed("softmax " + sz + ": row " + std::to_string(r) + " wrong");
      }
    }
  }
  once(2, [&] { nn::pooling_max(c.b, x, pooled); });
  if (refused[2].empty()) {
    auto hp = pooled.read();
    for (int i = 0; i < 61; ++i) {
      const int64_t at = int64_t((uint64_t(i) * 2654435761u) % uint64_t(n / 4));
      const int64_t p = at / (32 * 32), oy = (at % (32 * 32)) / 32, ox = at % 32;
      const float* src = hx.data() + p * plane;
      const float want = std::max(std::max(src[2 * oy * 64 + 2 * ox], src[2 * oy * 64 + 2 * ox + 1]),
                                  std::max(src[(2 * oy + 1) * 64 + 2 * ox],
                                           src[(2 * oy + 1) * 64 + 2 * ox + 1]));
      if (hp[at] != want) check_failed("pool_max " + sz + ": y[" + std::to_string(at) + "] wrong");
    }
  }
  xm = x.read(c.b);
  ym = y.write(c.b);
  xr.read(c.b);
  yr.write(c.b);
  const double B = double(bytes);
  const std::string why = time_vs_copy(
      c, sz, bytes, c.quick ? 4 : 8, xm, ym,
      {{names[0], 2 * B, [&] { nn::relu(c.b, x, y); }, refused[0]},
       {names[1], 2 * B, [&] { nn::softmax(c.b, xr, yr); }, refused[1]},
       {names[2], 1.25 * B, [&] { nn::pooling_max(c.b, x, pooled); }, refused[2]}},
      rows);
  if (!why.empty()) skip_all(why);
}

// Which of blas_vulkan's gemm shaders an f32 call runs: the bundle's rule
// (extensions/blas/vulkan/blas_vulkan.cpp, create_context and gemm_launch; docs/vulkan.md), from
// the device's properties and the environment (a setting from a config file is not seen here).
// The op's route names the bundle only.
std::string gemm_form(const Device& d) {
  const char* env = std::getenv("PARENCHYMA_BLAS_VULKAN_GEMM");
  const std::string forced = env ? env : "";
  const bool cpu = prop_text(d, "device_type") == "cpu";
  if (forced == "direct" || (forced != "tiled" && forced != "tiled32" && cpu)) return "gemm_direct";
  const char* wg = std::getenv("PARENCHYMA_BLAS_VULKAN_WORK_GROUP");
  const int64_t max_wg = prop_int(d, "max_work_group"), shared = prop_int(d, "local_memory");
  const bool reg = forced == "tiled" && !(wg && std::string(wg) == "128") &&
                   !(max_wg > 0 && max_wg < 256) && !(shared > 0 && shared < 16384);
  if (reg) return "gemm_reg 128x128";
  return "gemm 32x32";
}

// sgemm n x n on vulkan, against the cuda backend's (cuBLAS) when there is one.
void sgemm(bench_ctx& c, const Backend* cu, const std::string& cu_why, int n,
           std::vector<gemm_row>& rows) {
  const Device& d = c.b.device();
  const double mat = double(n) * n * sizeof(float);
  const int64_t global = prop_int(d, "global_memory");
  if (global > 0 && 3 * mat > 0.9 * double(global)) {
    rows.push_back({n, "skipped: three " + size_name(size_t(mat)) + " matrices do not fit"});
    return;
  }
  std::vector<float> ha(size_t(n) * n), hb(size_t(n) * n);
  fill_random(ha, uint64_t(n) * 3 + 1);
  fill_random(hb, uint64_t(n) * 3 + 2);
  auto make = [&](const std::vector<float>& h) {
    SharedTensor<float> t({n, n});
    std::copy(h.begin(), h.end(), t.write_only().begin());
    return t;
  };
  // C sampled at 16 places against a double-precision sum.
  auto check = [&](const SharedTensor<float>& C, const char* who) {
    auto hc = C.read();
    for (int s = 0; s < 16; ++s) {
      const int i = int((uint64_t(s) * 7919u + 3u) % uint64_t(n));
      const int j = int((uint64_t(s) * 104729u + 5u) % uint64_t(n));
      double ref = 0, mag = 0;
      for (int k = 0; k < n; ++k) {
        ref += double(ha[size_t(i) * n + k]) * hb[size_t(k) * n + j];
        mag += std::fabs(double(ha[size_t(i) * n + k]) * hb[size_t(k) * n + j]);
      }
      if (!(std::fabs(hc[size_t(i) * n + j] - ref) <= 1e-4 * mag))
        check_failed(std::string("sgemm ") + std::to_string(n) + " on " + who + ": C[" +
                     std::to_string(i) + "][" + std::to_string(j) + "] = " +
                     std::to_string(hc[size_t(i) * n + j]) + ", want " + std::to_string(ref));
    }
  };
  gemm_row row{n};
  row.form = gemm_form(d);
  c.s.meta("sgemm " + std::to_string(n) + " form", row.form);
  const double flops = 2.0 * n * n * n;
  try {
    auto A = make(ha), B = make(hb);
    SharedTensor<float> C({n, n});
    const double t0 = now_ns();
    blas::gemm(c.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
    c.b.synchronize();
    const double first_ns = now_ns() - t0;
    check(C, "vulkan");
    // Slow cells get fewer samples, so that the run stays within its time.
    const int inner = n <= 256 ? 4 : n <= 2048 ? 3 : 1;
    const int reps = std::clamp(int(20e9 / (first_ns * inner * (cu ? 1.2 : 1))), 5, c.reps);
    auto vk = [&] {
      const double s0 = now_ns();
      for (int i = 0; i < inner; ++i)
        blas::gemm(c.b, blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
      c.b.synchronize();
      return (now_ns() - s0) / inner;
    };
    if (!cu) {
      const double ns = solo(vk, reps, 2);
      row.vk_gflops = flops / ns;
      row.status = cu_why;
      std::printf("%-44s vulkan %12.1f ns  %.1f GFLOP/s (%d samples)\n",
                  ("sgemm " + std::to_string(n) + " (" + row.form + ")").c_str(), ns, row.vk_gflops,
                  reps);
      c.s.meta("sgemm " + std::to_string(n) + " vulkan_ns", std::to_string(ns));
    } else {
      auto Ac = make(ha), Bc = make(hb);
      SharedTensor<float> Cc({n, n});
      blas::gemm(*cu, blas::no_trans, blas::no_trans, 1.0, Ac, Bc, 0.0, Cc);
      cu->synchronize();
      check(Cc, "cuda");
      auto cub = [&] {
        const double s0 = now_ns();
        for (int i = 0; i < inner; ++i)
          blas::gemm(*cu, blas::no_trans, blas::no_trans, 1.0, Ac, Bc, 0.0, Cc);
        cu->synchronize();
        return (now_ns() - s0) / inner;
      };
      bench::options o{.reps = reps, .inner = 1, .warmup = 2, .flops = flops};
      const bench::result res =
          c.s.compare_sampled("sgemm " + std::to_string(n), cub, vk, o, "cublas", "vulkan");
      row.vk_gflops = flops / res.ours_ns;
      row.cu_gflops = flops / res.peer_ns;
      row.ratio = 1 / res.ratio;
    }
  } catch (const parenchyma::error& e) {
    row.status = std::string("refused: ") + e.what();
    std::printf("sgemm %d: %s\n", n, row.status.c_str());
  }
  rows.push_back(row);
}

// Whether the op runs on the backend's own framework (not a fallback to another).
bool runs_here(const Backend& b, const OpKey& key) {
  try {
    const OpRoute r = b.route(key);
    return !r.fallback && r.framework == b.framework().name();
  } catch (const parenchyma::error&) {
    return false;
  }
}

std::string route_text(const Backend& b, const OpKey& key) {
  try {
    const OpRoute r = b.route(key);
    return r.framework + " / " + r.bundle + (r.fallback ? " (fallback)" : "") + ": " +
           r.implementation;
  } catch (const parenchyma::error& e) {
    return std::string("none: ") + e.what();
  }
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  uint32_t small_n = 1024; // the small ops' size
  std::string request = "vulkan";
  std::string parts = "small,blas1,nn,gemm"; // --parts: which of the four parts run
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--parts") == 0 && i + 1 < argc)
      parts = argv[++i];
    else if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc)
      request = argv[++i];
    else if (std::strcmp(argv[i], "--small-n") == 0 && i + 1 < argc)
      small_n = uint32_t(std::max(1L, std::atol(argv[++i])));
    else {
      std::printf("usage: bench_blas_vulkan [--quick] [--backend vulkan:N] [--small-n N] "
                  "[--parts small,blas1,nn,gemm]\n");
      return 2;
    }
  }
  std::optional<Backend> vb;
  try {
    vb.emplace(request);
  } catch (const parenchyma::error& e) {
    std::printf("no Vulkan backend: %s\n", e.what());
    return 77;
  }
  const Backend& b = *vb;
  const Device& d = b.device();
  auto part = [&](const char* name) {
    return ("," + parts + ",").find(std::string(",") + name + ",") != std::string::npos;
  };
  bench::suite s(quick ? "vulkan_blas_quick" : "vulkan_blas");
  s.meta("backend", b.name());
  s.meta("device", d.name);
  for (const char* k : {"device_type", "driver_name", "driver_version", "vulkan_version",
                        "global_memory", "max_storage_buffer_range", "uuid"})
    s.meta(k, prop_text(d, k));
  s.meta("scal_route", route_text(b, blas::detail::scal_key(PCY_DTYPE_F32)));
  s.meta("gemm_route", route_text(b, blas::detail::gemm_key(PCY_DTYPE_F32)));
  s.meta("timing", "host wall time of `inner` calls + Backend::synchronize, per call");
  std::printf("# bench_blas_vulkan%s on %s: %s (%s, %s %s)\n", quick ? " --quick" : "",
              b.name().c_str(), d.name.c_str(), prop_text(d, "device_type").c_str(),
              prop_text(d, "driver_name").c_str(), prop_text(d, "driver_version").c_str());
  std::printf("# routes: scal %s; gemm %s\n",
              route_text(b, blas::detail::scal_key(PCY_DTYPE_F32)).c_str(),
              route_text(b, blas::detail::gemm_key(PCY_DTYPE_F32)).c_str());
  // Figures of another framework would be mislabelled: every op timed must run on vulkan.
  for (const OpKey* k :
       {&blas::detail::scal_key(PCY_DTYPE_F32), &blas::detail::axpy_key(PCY_DTYPE_F32),
        &blas::detail::dot_key(PCY_DTYPE_F32), &blas::detail::nrm2_key(PCY_DTYPE_F32),
        &blas::detail::copy_key(PCY_DTYPE_F32), &blas::detail::gemm_key(PCY_DTYPE_F32)})
    if (!runs_here(b, *k)) {
      std::printf("blas.%s f32 does not run on %s: %s\n", k->name, b.name().c_str(),
                  route_text(b, *k).c_str());
      return 1;
    }
  // The cuBLAS column: parenchyma's cuda backend, when the cuda framework has a device.
  std::optional<Backend> cb;
  std::string cu_why;
  try {
    cb.emplace("cuda");
    s.meta("cuda_device", cb->device().name);
    s.meta("cuda_gemm_route", route_text(*cb, blas::detail::gemm_key(PCY_DTYPE_F32)));
    if (!runs_here(*cb, blas::detail::gemm_key(PCY_DTYPE_F32))) {
      cu_why = "cuBLAS absent: the cuda backend's sgemm does not run on cuda: " +
               route_text(*cb, blas::detail::gemm_key(PCY_DTYPE_F32));
      cb.reset();
    }
  } catch (const parenchyma::error& e) {
    cu_why = std::string("cuBLAS absent: no cuda backend: ") + e.what();
  }
  if (!cb) s.meta("cuda", cu_why);
  std::printf("# cuBLAS column: %s\n",
              cb ? ("cuda backend on " + cb->device().name).c_str() : cu_why.c_str());
  bench_ctx c{b, s, quick, 15, cb ? &*cb : nullptr};

  std::printf("\n# small ops: public API (op + synchronize) vs raw Vulkan (record + dispatch + "
              "submit + fence wait), both waiting for completion\n");
  std::vector<small_row> small;
  if (part("small")) small_ops(c, small_n, small);

  std::printf("\n# BLAS-1 f32 vs the device copy (memory_copy) of the same bytes\n");
  std::vector<l1_row> l1;
  const std::vector<size_t> sizes =
      quick ? std::vector<size_t>{size_t(1) << 20, size_t(8) << 20, size_t(256) << 20}
            : std::vector<size_t>{size_t(256) << 20, size_t(512) << 20, size_t(1) << 30};
  if (part("blas1"))
    for (size_t bytes : sizes)
      level1(c, bytes, l1);

  std::printf("\n# NN f32 (nn_vulkan) vs the device copy of the same bytes\n");
  std::vector<l1_row> nnrows;
  for (const OpKey* k : {&ext::op_key<pcy_nn_relu_schema>(PCY_DTYPE_F32),
                         &ext::op_key<pcy_nn_softmax_schema>(PCY_DTYPE_F32),
                         &ext::op_key<pcy_nn_pooling_max_schema>(PCY_DTYPE_F32)})
    s.meta(std::string("nn_route ") + k->name, route_text(b, *k));
  if (part("nn")) {
    if (runs_here(b, ext::op_key<pcy_nn_relu_schema>(PCY_DTYPE_F32)))
      nn_part(c, nnrows);
    else
      std::printf("  skipped: nn.relu f32 does not run on %s: %s\n", b.name().c_str(),
                  route_text(b, ext::op_key<pcy_nn_relu_schema>(PCY_DTYPE_F32)).c_str());
  }

  std::printf("\n# sgemm vulkan vs cuBLAS (the cuda backend)\n");
  std::vector<gemm_row> gm;
  if (part("gemm"))
    for (int n : quick ? std::vector<int>{64, 128, 256} : std::vector<int>{1024, 2048, 4096, 8192})
      sgemm(c, cb ? &*cb : nullptr, cu_why, n, gm);

  // ---- the summary ----
  std::printf("\n== BLAS-1 f32 on %s: fraction of device-copy bandwidth (target >= 0.85)\n",
              d.name.c_str());
  std::printf("(copy: vkCmdCopyBuffer; cuda copy: the cuda framework's cuMemcpyDtoD of the same "
              "bytes, the memory's limit on NVIDIA hardware)\n");
  std::printf("%-6s %-8s %12s %12s %9s  %-15s %12s %8s\n", "op", "size", "ours GB/s", "copy GB/s",
              "fraction", "[p10 p90]", "cuda copy", "of cuda");
  for (const l1_row& r : l1)
    if (r.status.empty() && r.cuda_copy_gbs > 0)
      std::printf("%-6s %-8s %12.2f %12.2f %9.3f  [%.3f %.3f] %12.2f %8.3f\n", r.op.c_str(),
                  r.size.c_str(), r.ours_gbs, r.copy_gbs, r.fraction, r.f10, r.f90, r.cuda_copy_gbs,
                  r.ours_gbs / r.cuda_copy_gbs);
    else if (r.status.empty())
      std::printf("%-6s %-8s %12.2f %12.2f %9.3f  [%.3f %.3f]\n", r.op.c_str(), r.size.c_str(),
                  r.ours_gbs, r.copy_gbs, r.fraction, r.f10, r.f90);
    else
      std::printf("%-6s %-8s %12s %12s %9s  %s\n", r.op.c_str(), r.size.c_str(), "-", "-", "-",
                  r.status.c_str());
  std::printf("\n== NN f32 on %s: fraction of device-copy bandwidth (target >= 0.8)\n",
              d.name.c_str());
  std::printf("%-9s %-8s %12s %12s %9s  %-15s %8s\n", "op", "size", "ours GB/s", "copy GB/s",
              "fraction", "[p10 p90]", "of cuda");
  for (const l1_row& r : nnrows)
    if (r.status.empty())
      std::printf("%-9s %-8s %12.2f %12.2f %9.3f  [%.3f %.3f] %8.3f\n", r.op.c_str(),
                  r.size.c_str(), r.ours_gbs, r.copy_gbs, r.fraction, r.f10, r.f90,
                  r.cuda_copy_gbs > 0 ? r.ours_gbs / r.cuda_copy_gbs : 0.0);
    else
      std::printf("%-9s %-8s %12s %12s %9s  %s\n", r.op.c_str(), r.size.c_str(), "-", "-", "-",
                  r.status.c_str());
  std::printf("\n== sgemm on %s vs cuBLAS (ratio: vulkan speed / cuBLAS speed)\n", d.name.c_str());
  std::printf("%-6s %-17s %14s %14s %9s  %s\n", "n", "shader", "vulkan GF/s", "cuBLAS GF/s",
              "ratio", "status");
  for (const gemm_row& r : gm)
    if (r.cu_gflops > 0)
      std::printf("%-6d %-17s %14.1f %14.1f %9.3f\n", r.n, r.form.c_str(), r.vk_gflops, r.cu_gflops,
                  r.ratio);
    else if (r.vk_gflops > 0)
      std::printf("%-6d %-17s %14.1f %14s %9s  %s\n", r.n, r.form.c_str(), r.vk_gflops, "-", "-",
                  r.status.c_str());
    else
      std::printf("%-6d %-17s %14s %14s %9s  %s\n", r.n, r.form.c_str(), "-", "-", "-",
                  r.status.c_str());
  std::printf("\n== small ops, %u f32, per op, both sides waiting for completion (target <= "
              "1.3x)\n",
              small_n);
  std::printf("%-36s %12s %12s %9s  %s\n", "case", "raw Vk ns", "ours ns", "ratio",
              "[p10 p90] / status");
  for (const small_row& r : small)
    if (r.status.empty())
      std::printf("%-36s %12.0f %12.0f %9.3f  [%.3f %.3f]\n", r.name.c_str(), r.raw_ns, r.ours_ns,
                  r.ratio, r.p10, r.p90);
    else
      std::printf("%-36s %12s %12s %9s  %s\n", r.name.c_str(), "-", "-", "-", r.status.c_str());
  s.write();
  return 0;
}
