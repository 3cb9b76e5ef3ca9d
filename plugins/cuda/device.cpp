// Devices and contexts: the plugin enumerates GPUs once at initialisation (with their
// properties); a context holds each device's PRIMARY context, shared with every other CUDA
// library in the process (cuBLAS, the runtime API, PyTorch).
#include "plugin.hpp"

#include <cstdio>

namespace parenchyma::cuda {

namespace {
std::string format_uuid(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char s[64];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

const char* cache_dir_of(const pcy_host_services& host) {
  if (!PCY_HAS_FIELD(&host, pcy_host_services, cache_dir)) return nullptr;
  return host.cache_dir;
}
} // namespace

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, info.name), driver_({}, sdk::settings(&host)),
      staging_(staging_config::from_environment(sdk::settings(&host))),
      nvrtc_(sdk::settings(&host)), cache_(cache_dir_of(host), info.name, log_) {
  if (!driver_.ok()) {
    reason_ = driver_.reason();
    log_.info("0 devices: ", reason_);
    return;
  }
  // Early launch of kernels that wait for prior work themselves (PCY_KERNEL_WAITS_FOR_PRIOR).
  const std::string early = sdk::settings(&host).get("PARENCHYMA_CUDA_EARLY_LAUNCH");
  if (early != "" && early != "0" && early != "1")
    log_.warn("PARENCHYMA_CUDA_EARLY_LAUNCH=", early, " ignored: expected 0 or 1");
  early_launch_ = driver_.api().cuLaunchKernelEx != nullptr && early != "0";
  if (early == "0")
    log_.info("PARENCHYMA_CUDA_EARLY_LAUNCH=0: every kernel launches after the work before it");
  int count = 0;
  const CUresult r = driver_.api().cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    reason_ = sdk::str("cuDeviceGetCount: ", driver_.describe(r));
    return;
  }
  if (count == 0) {
    reason_ = "cuDeviceGetCount: 0 devices (the driver sees no NVIDIA GPU)";
    return;
  }
  devices_.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    try {
      add_gpu(i);
    } catch (const sdk::error& e) {
      // One broken GPU must not hide the others; the reason says why it is missing.
      reason_ += sdk::str(reason_.empty() ? "" : "; ", "device ", i, " skipped: ", e.what());
      log_.warn("device ", i, " skipped: ", e.what());
    }
  }
  if (cache_.enabled()) log_.debug("kernel cache: ", cache_.directory());
}

void plugin::add_gpu(int ordinal) {
  const auto& api = driver_.api();
  device_info d;
  d.ordinal = ordinal;
  check(driver_, api.cuDeviceGet(&d.device, ordinal), "cuDeviceGet");
  char name_buf[256] = {};
  check(driver_, api.cuDeviceGetName(name_buf, sizeof name_buf - 1, d.device), "cuDeviceGetName");
  d.name = name_buf;
  auto attr = [&](CUdevice_attribute a, const char* what) {
    int v = 0;
    check(driver_, api.cuDeviceGetAttribute(&v, a, d.device), what);
    return v;
  };
  const int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability");
  const int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability");
  d.cc = 10 * major + minor;
  d.multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  d.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads");
  d.shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory");
  const bool integrated = attr(CU_DEVICE_ATTRIBUTE_INTEGRATED, "integrated") != 0;
  const int clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, "clock rate");
  size_t total = 0;
  check(driver_, api.cuDeviceTotalMem(&total, d.device), "cuDeviceTotalMem");
  d.memory = total;
  CUuuid uuid{};
  check(driver_, api.cuDeviceGetUuid(&uuid, d.device), "cuDeviceGetUuid");
  char bus[64] = {};
  check(driver_, api.cuDeviceGetPCIBusId(bus, sizeof bus - 1, d.device), "cuDeviceGetPCIBusId");

  // Everything the driver can refuse is asked above: the device and its properties are added
  // together or not at all.
  sdk::property_list& p = add_device();
  p.text(PCY_PROP_NAME, d.name);
  p.text(PCY_PROP_VENDOR, "NVIDIA");
  p.number(PCY_PROP_KIND, PCY_DEVICE_GPU);
  p.text("compute_capability", sdk::str(major, ".", minor));
  p.text("architecture", sdk::str("sm_", d.cc));
  p.number(PCY_PROP_COMPUTE_UNITS, d.multiprocessors);
  p.number(PCY_PROP_GLOBAL_MEMORY, static_cast<int64_t>(d.memory));
  p.number(PCY_PROP_LOCAL_MEMORY, d.shared_per_block);
  p.number(PCY_PROP_MAX_WORK_GROUP, d.max_threads_per_block);
  p.text(PCY_PROP_DRIVER_VERSION, sdk::str("CUDA ", driver_.version_string()));
  p.text(PCY_PROP_UUID, format_uuid(uuid));
  p.text("pci_bus_id", bus);
  p.flag(PCY_PROP_HOST_UNIFIED, integrated);
  p.flag(PCY_PROP_FP64, true);
  p.number("clock_mhz", clock_khz / 1000);
  p.number("device_ordinal", ordinal);
  p.flag("kernel_param_checks", api.cuFuncGetParamInfo != nullptr);
  p.number("staging_chunk", static_cast<int64_t>(staging_.chunk_bytes));
  p.number("staging_chunks", staging_.chunks);
  p.number("staging_threshold", static_cast<int64_t>(staging_.threshold));
  p.number("staging_write_threshold", static_cast<int64_t>(staging_.write_threshold));
  p.number("staging_threads", staging_.threads);
  log_.info("device ", ordinal, ": ", d.name, " (sm_", d.cc, ", ", d.multiprocessors, " SMs, ",
            pretty_bytes(d.memory), ", ", bus, ")");
  devices_.push_back(std::move(d));
}

// ---- context ---------------------------------------------------------------------------------
context::context(plugin& p, std::span<const uint32_t> devices) : p_(p) {
  const auto& d = p.drv();
  slots_.reserve(devices.size());
  try {
    for (uint32_t index : devices) {
      device_slot s;
      s.index = index;
      s.info = &p.device(index);
      check(d, d.api().cuDevicePrimaryCtxRetain(&s.ctx, s.info->device),
            sdk::str("cuDevicePrimaryCtxRetain on ", s.info->name).c_str());
      s.staging = std::make_unique<staging_pool>(d, p.staging(), p.log());
      slots_.push_back(std::move(s));
    }
  } catch (...) {
    for (auto& s : slots_)
      d.api().cuDevicePrimaryCtxRelease(s.info->device);
    throw;
  }
}

context::~context() {
  const auto& d = p_.drv();
  for (auto& s : slots_) {
    if (d.api().cuCtxSetCurrent(s.ctx) == CUDA_SUCCESS) tl_current = s.ctx;
    s.staging.reset();    // frees pinned chunks while the context is alive and current
    tl_current = nullptr; // the release below may deactivate it: check again next time
    d.api().cuDevicePrimaryCtxRelease(s.info->device);
  }
}

device_slot& context::slot(uint32_t device) {
  if (device >= slots_.size()) [[unlikely]]
    sdk::fail(PCY_ERR_NOT_FOUND,
              sdk::str("device ", device, " is not in this context (", slots_.size(), " devices)"));
  return slots_[device];
}

void* context::native_device(uint32_t device) const {
  if (device >= slots_.size())
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context"));
  return reinterpret_cast<void*>(static_cast<intptr_t>(slots_[device].info->device));
}

queue* context::create_queue(uint32_t device) { return new queue(*this, device); }

} // namespace parenchyma::cuda
