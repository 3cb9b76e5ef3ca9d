// The OpenCL framework plugin's entry point: the plugin object (loader, devices, kernel cache),
// the error helpers every file uses, and the one exported symbol.
#include "opencl.hpp"

namespace parenchyma::opencl {

void cl_fail(pcy_status status, std::string_view call, cl_int err, std::string_view advice) {
  std::string msg = sdk::str(call, ": ", cl_error_name(err), " (", err, ")");
  if (!advice.empty()) msg.append(": ").append(advice);
  sdk::fail(status, msg);
}

pcy_status status_for(cl_int err, pcy_status otherwise) noexcept {
  switch (err) {
  case CL_MEM_OBJECT_ALLOCATION_FAILURE:
  case CL_OUT_OF_RESOURCES:
  case CL_OUT_OF_HOST_MEMORY: return PCY_ERR_OUT_OF_MEMORY;
  default: return otherwise;
  }
}

plugin::plugin(const pcy_host_services& host)
    : framework_plugin(host, plugin_name), settings_(&host),
      cache_(host.cache_dir, plugin_name, log_) {
  discover();
}

// Shutdown: the cache's destructor completes the entries still being written.
plugin::~plugin() = default;

} // namespace parenchyma::opencl

PCY_FRAMEWORK_PLUGIN(parenchyma::opencl::plugin)
