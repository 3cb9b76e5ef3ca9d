// Device discovery (every device of every platform, with its properties) and contexts.
#include "opencl.hpp"

#include <parenchyma/sdk/library.hpp>

#include <algorithm>
#include <cctype>

#include <CL/cl_ext.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#ifndef CL_DEVICE_UUID_KHR
#define CL_DEVICE_UUID_KHR 0x106A
#endif

namespace parenchyma::opencl {
namespace {

constexpr cl_int platform_not_found_khr = -1001;

std::string platform_string(const cl_api& cl, cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (cl.clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (cl.clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  s.resize(s.find('\0') == std::string::npos ? n : s.find('\0'));
  return s;
}

std::string device_string(const cl_api& cl, cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (cl.clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return {};
  std::string s(n, '\0');
  if (cl.clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return {};
  s.resize(s.find('\0') == std::string::npos ? n : s.find('\0'));
  // Some drivers pad names with spaces.
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

template <class T> T device_value(const cl_api& cl, cl_device_id d, cl_device_info what) {
  T v{};
  if (cl.clGetDeviceInfo(d, what, sizeof v, &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

bool has_extension(const std::string& list, std::string_view ext) {
  size_t pos = 0;
  while ((pos = list.find(ext, pos)) != std::string::npos) {
    const size_t end = pos + ext.size();
    if ((pos == 0 || list[pos - 1] == ' ') && (end == list.size() || list[end] == ' ')) return true;
    pos = end;
  }
  return false;
}

// "OpenCL 3.0 PoCL ..." -> 300; 0 when unparsable.
int parse_version(const std::string& v) {
  int major = 0, minor = 0;
  if (std::sscanf(v.c_str(), "OpenCL %d.%d", &major, &minor) != 2) return 0;
  return major * 100 + minor * 10;
}

} // namespace

void plugin::discover() {
  // The setting PARENCHYMA_OPENCL_LIBRARY names another loader (a vendor's libOpenCL, or a
  // test's missing one); through the host, so ignored in set-uid processes like every setting.
  std::string library = settings_.get("PARENCHYMA_OPENCL_LIBRARY");
  if (library.empty()) library = sdk::os::opencl_library;
  if (!cl_.load(library.c_str(), reason_)) {
    log_.info("0 devices: ", reason_);
    return;
  }

  cl_uint platform_count = 0;
  cl_int err = cl_.clGetPlatformIDs(0, nullptr, &platform_count);
  if (err == platform_not_found_khr || (err == CL_SUCCESS && platform_count == 0)) {
    reason_ = "no OpenCL platform (clGetPlatformIDs: CL_PLATFORM_NOT_FOUND_KHR): install a vendor "
              "driver such as pocl-opencl-icd, or check /etc/OpenCL/vendors and OCL_ICD_VENDORS";
    log_.info("0 devices: ", reason_);
    return;
  }
  if (err != CL_SUCCESS) {
    reason_ = sdk::str("clGetPlatformIDs: ", cl_error_name(err), " (", err,
                       "): the OpenCL driver installation looks broken; run clinfo to see why");
    log_.warn("0 devices: ", reason_);
    return;
  }
  std::vector<cl_platform_id> platforms(platform_count);
  err = cl_.clGetPlatformIDs(platform_count, platforms.data(), nullptr);
  if (err != CL_SUCCESS) {
    reason_ = sdk::str("clGetPlatformIDs: ", cl_error_name(err), " (", err, ")");
    log_.warn("0 devices: ", reason_);
    return;
  }

  std::string notes; // why some platform or device is not offered
  auto note = [&](const std::string& s) { notes += (notes.empty() ? "" : "; ") + s; };
  // PARENCHYMA_OPENCL_PLATFORMS="nvidia,pocl": offer only platforms whose name contains one of
  // these words (case-insensitive); ignored in set-uid processes.
  std::vector<std::string> wanted;
  if (const std::string f = settings_.get("PARENCHYMA_OPENCL_PLATFORMS"); !f.empty()) {
    for (size_t start = 0; start <= f.size();) {
      const size_t comma = f.find(',', start);
      std::string word =
          f.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      for (char& c : word)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!word.empty()) wanted.push_back(word);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  // PARENCHYMA_OPENCL_SHARED_QUEUE=auto|on|off: whether the queues of a device share one
  // (auto: on PoCL before 7.0, see shared_queues in opencl.hpp).
  std::string share = settings_.get("PARENCHYMA_OPENCL_SHARED_QUEUE");
  for (char& c : share)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!share.empty() && share != "auto" && share != "on" && share != "off") {
    log_.warn("PARENCHYMA_OPENCL_SHARED_QUEUE='", share,
              "' is not one of auto, on, off: using auto");
    share = "auto";
  }
  for (cl_platform_id p : platforms) {
    const std::string pname = platform_string(cl_, p, CL_PLATFORM_NAME);
    const std::string pversion = platform_string(cl_, p, CL_PLATFORM_VERSION);
    if (!wanted.empty()) {
      std::string lower = pname;
      for (char& c : lower)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      bool keep = false;
      for (const auto& w : wanted)
        keep = keep || lower.find(w) != std::string::npos;
      if (!keep) {
        note(sdk::str("platform '", pname, "' left out by PARENCHYMA_OPENCL_PLATFORMS"));
        continue;
      }
    }
    cl_uint n = 0;
    err = cl_.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n);
    if (err == CL_DEVICE_NOT_FOUND || n == 0) {
      note(sdk::str("platform '", pname, "' has no device"));
      continue;
    }
    if (err != CL_SUCCESS) {
      note(sdk::str("platform '", pname, "': clGetDeviceIDs: ", cl_error_name(err)));
      continue;
    }
    std::vector<cl_device_id> ids(n);
    if (cl_.clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr) != CL_SUCCESS) continue;
    for (cl_device_id id : ids) {
      auto d = std::make_unique<device_info>();
      d->platform = p;
      d->id = id;
      d->platform_name = pname;
      d->platform_version = pversion;
      d->name = device_string(cl_, id, CL_DEVICE_NAME);
      d->vendor = device_string(cl_, id, CL_DEVICE_VENDOR);
      d->version = device_string(cl_, id, CL_DEVICE_VERSION);
      d->c_version = device_string(cl_, id, CL_DEVICE_OPENCL_C_VERSION);
      d->driver_version = device_string(cl_, id, CL_DRIVER_VERSION);
      d->extensions = device_string(cl_, id, CL_DEVICE_EXTENSIONS);
      if (!device_value<cl_bool>(cl_, id, CL_DEVICE_AVAILABLE)) {
        note(sdk::str("device '", d->name, "' is not available (CL_DEVICE_AVAILABLE false)"));
        continue;
      }
      if (parse_version(d->version) < 120) {
        note(sdk::str("device '", d->name, "' speaks '", d->version,
                      "', this plugin needs OpenCL 1.2: update the driver"));
        continue;
      }
      const auto type = device_value<cl_device_type>(cl_, id, CL_DEVICE_TYPE);
      d->kind = (type & CL_DEVICE_TYPE_GPU)           ? PCY_DEVICE_GPU
                : (type & CL_DEVICE_TYPE_ACCELERATOR) ? PCY_DEVICE_ACCELERATOR
                : (type & CL_DEVICE_TYPE_CPU)         ? PCY_DEVICE_CPU
                                                      : PCY_DEVICE_OTHER;
      d->host_unified = d->kind == PCY_DEVICE_CPU ||
                        device_value<cl_bool>(cl_, id, CL_DEVICE_HOST_UNIFIED_MEMORY) != CL_FALSE;
      d->fp64 = has_extension(d->extensions, "cl_khr_fp64") ||
                device_value<cl_device_fp_config>(cl_, id, CL_DEVICE_DOUBLE_FP_CONFIG) != 0;
      d->compute_units = device_value<cl_uint>(cl_, id, CL_DEVICE_MAX_COMPUTE_UNITS);
      d->global_memory = device_value<cl_ulong>(cl_, id, CL_DEVICE_GLOBAL_MEM_SIZE);
      d->local_memory = device_value<cl_ulong>(cl_, id, CL_DEVICE_LOCAL_MEM_SIZE);
      d->max_alloc = device_value<cl_ulong>(cl_, id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d->max_work_group = device_value<size_t>(cl_, id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      size_t items[3] = {0, 0, 0};
      cl_.clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_ITEM_SIZES, sizeof items, items, nullptr);
      for (int i = 0; i < 3; ++i)
        d->max_work_item[i] = items[i];
      const cl_uint align_bits = device_value<cl_uint>(cl_, id, CL_DEVICE_MEM_BASE_ADDR_ALIGN);
      if (align_bits >= 8) d->base_align = align_bits / 8;
      if (has_extension(d->extensions, "cl_khr_device_uuid")) {
        unsigned char u[16] = {};
        if (cl_.clGetDeviceInfo(id, CL_DEVICE_UUID_KHR, sizeof u, u, nullptr) == CL_SUCCESS) {
          char buf[40];
          std::snprintf(buf, sizeof buf,
                        "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                        u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                        u[12], u[13], u[14], u[15]);
          d->uuid = buf;
        }
      }

      d->shared_queue = share == "on" || (share != "off" && shared_queues::needed(pname, pversion));
      sdk::property_list& pr = add_device();
      pr.text(PCY_PROP_NAME, d->name);
      pr.text(PCY_PROP_VENDOR, d->vendor);
      pr.text("platform", d->platform_name);
      pr.number(PCY_PROP_KIND, d->kind);
      pr.number(PCY_PROP_COMPUTE_UNITS, d->compute_units);
      pr.number(PCY_PROP_GLOBAL_MEMORY, static_cast<int64_t>(d->global_memory));
      pr.number(PCY_PROP_LOCAL_MEMORY, static_cast<int64_t>(d->local_memory));
      pr.number(PCY_PROP_MAX_WORK_GROUP, static_cast<int64_t>(d->max_work_group));
      pr.number("max_alloc", static_cast<int64_t>(d->max_alloc));
      pr.text("opencl_version", d->version);
      pr.text("opencl_c_version", d->c_version);
      pr.text("platform_version", d->platform_version);
      pr.text(PCY_PROP_DRIVER_VERSION, d->driver_version);
      pr.text("extensions", d->extensions);
      pr.flag(PCY_PROP_FP64, d->fp64);
      pr.flag(PCY_PROP_HOST_UNIFIED, d->host_unified);
      if (!d->uuid.empty()) pr.text(PCY_PROP_UUID, d->uuid);
      pr.flag("shared_queue", d->shared_queue);
      if (d->shared_queue && share != "on")
        log_.info("device '", d->name, "' (", pversion,
                  "): its queues share one in-order OpenCL queue, process-wide (PoCL before 7.0 "
                  "aborts when one kernel runs from several queues at once); "
                  "PARENCHYMA_OPENCL_SHARED_QUEUE=off turns this off");

      log_.debug("device ", devices_.size(), ": '", d->name, "' (", d->vendor, ", platform '",
                 pname, "', ", d->version, ", driver ", d->driver_version, ")");
      devices_.push_back(std::move(d));
    }
  }
  if (devices_.empty()) {
    reason_ = "no usable OpenCL device" + (notes.empty() ? std::string() : ": " + notes);
    log_.info("0 devices: ", reason_);
  } else if (!notes.empty()) {
    reason_ = notes;
    log_.info(reason_);
  }
}

// ---- contexts ---------------------------------------------------------------------------------

namespace {
void CL_CALLBACK context_notify(const char* info, const void*, size_t, void* user) {
  static_cast<const sdk::logger*>(user)->warn("OpenCL driver: ", info ? info : "(no text)");
}
} // namespace

context::context(plugin& owner, std::span<const uint32_t> devices)
    : owner_(owner), cl_(owner.cl()) {
  std::set<uint32_t> seen;
  for (uint32_t index : devices) {
    if (!seen.insert(index).second)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("context_create: device ", index, " is listed twice"));
    const device_info& d = owner.device(index);
    if (!devices_.empty() && d.platform != devices_.front()->platform)
      sdk::fail(PCY_ERR_INVALID_ARGUMENT,
                sdk::str("context_create: devices '", devices_.front()->name, "' (platform '",
                         devices_.front()->platform_name, "') and '", d.name, "' (platform '",
                         d.platform_name,
                         "') are on different OpenCL platforms: one context cannot span "
                         "platforms; create one context per platform"));
    devices_.push_back(&d);
    ids_.push_back(d.id);
  }
  const cl_context_properties props[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(devices_.front()->platform), 0};
  cl_int err = CL_SUCCESS;
  shared_ = std::all_of(devices_.begin(), devices_.end(),
                        [](const device_info* d) { return d->shared_queue; });
  if (shared_)
    ctx_ = shared_queues::acquire_context(cl_, props, ids_, err);
  else
    ctx_ = cl_.clCreateContext(props, static_cast<cl_uint>(ids_.size()), ids_.data(),
                               &context_notify, const_cast<sdk::logger*>(&owner.log()), &err);
  if (err != CL_SUCCESS || ctx_ == nullptr)
    cl_fail(status_for(err, PCY_ERR_DEVICE), "clCreateContext", err,
            sdk::str("could not create a context on '", devices_.front()->name, "'"));
  map_queues_.assign(devices_.size(), nullptr);
}

context::~context() {
  for (cl_command_queue q : map_queues_)
    if (q != nullptr) cl_.clReleaseCommandQueue(q);
  if (ctx_ == nullptr) return;
  if (shared_)
    shared_queues::release_context(cl_, ctx_);
  else
    cl_.clReleaseContext(ctx_);
}

const device_info& context::dev(uint32_t device) const {
  if (device >= devices_.size()) [[unlikely]]
    sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("device ", device, " is not in this context (",
                                          devices_.size(), " devices)"));
  return *devices_[device];
}

cl_command_queue context::map_queue(uint32_t device) {
  std::lock_guard lock(map_mutex_);
  if (map_queues_[device] == nullptr) {
    cl_int err = CL_SUCCESS;
    cl_command_queue q = cl_.clCreateCommandQueue(ctx_, ids_[device], 0, &err);
    cl_check(err, "clCreateCommandQueue", status_for(err, PCY_ERR_DEVICE));
    map_queues_[device] = q;
  }
  return map_queues_[device];
}

queue* context::create_queue(uint32_t device) { return new queue(*this, device); }

// ---- queues shared by every context of a device (PoCL before 7.0) ---------------------------

namespace shared_queues {
namespace {
struct context_entry {
  std::vector<cl_device_id> devices;
  cl_context ctx;
  size_t users;
};
struct queue_entry {
  cl_context ctx;
  cl_device_id device;
  cl_command_queue q;
  size_t users;
};
// Process-wide: every plugin instance (one per Registry) shares it. The entries hold no
// callback into any instance, so an instance may go while others keep using them.
struct state {
  std::mutex mu;
  std::vector<context_entry> contexts;
  std::vector<queue_entry> queues;
};
state& the_state() {
  static state s;
  return s;
}
} // namespace

bool needed(std::string_view platform_name, std::string_view platform_version) {
  if (platform_name.find("Portable Computing Language") == std::string_view::npos) return false;
  const size_t at = platform_version.find("PoCL ");
  if (at == std::string_view::npos) return true; // a PoCL that does not say: assume affected
  int major = 0;
  for (size_t i = at + 5;
       i < platform_version.size() && std::isdigit(static_cast<unsigned char>(platform_version[i]));
       ++i)
    major = major * 10 + (platform_version[i] - '0');
  return major < 7;
}

cl_context acquire_context(const cl_api& cl, const cl_context_properties* props,
                           const std::vector<cl_device_id>& devices, cl_int& err) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  for (auto& e : s.contexts)
    if (e.devices == devices) {
      ++e.users;
      err = CL_SUCCESS;
      return e.ctx;
    }
  cl_context ctx = cl.clCreateContext(props, static_cast<cl_uint>(devices.size()), devices.data(),
                                      nullptr, nullptr, &err);
  if (err != CL_SUCCESS || ctx == nullptr) return nullptr;
  s.contexts.push_back({devices, ctx, 1});
  return ctx;
}

void release_context(const cl_api& cl, cl_context ctx) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  for (auto it = s.contexts.begin(); it != s.contexts.end(); ++it)
    if (it->ctx == ctx) {
      if (--it->users == 0) {
        cl.clReleaseContext(ctx);
        s.contexts.erase(it);
      }
      return;
    }
}

cl_command_queue acquire_queue(const cl_api& cl, cl_context ctx, cl_device_id device, cl_int& err) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  for (auto& e : s.queues)
    if (e.ctx == ctx && e.device == device) {
      ++e.users;
      err = CL_SUCCESS;
      return e.q;
    }
  cl_command_queue q = cl.clCreateCommandQueue(ctx, device, 0, &err);
  if (err != CL_SUCCESS || q == nullptr) return nullptr;
  s.queues.push_back({ctx, device, q, 1});
  return q;
}

void release_queue(const cl_api& cl, cl_command_queue q) {
  state& s = the_state();
  std::lock_guard lock(s.mu);
  for (auto it = s.queues.begin(); it != s.queues.end(); ++it)
    if (it->q == q) {
      if (--it->users == 0) {
        cl.clReleaseCommandQueue(q);
        s.queues.erase(it);
      }
      return;
    }
}
} // namespace shared_queues

} // namespace parenchyma::opencl
