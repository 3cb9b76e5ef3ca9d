// parenchyma: the one exception type the core throws, carrying a code, a message and an origin
// (the plugin, config file or core part that failed).
#pragma once

#include <parenchyma/export.hpp>

#include <parenchyma/abi/pcy_base.h>

#include <stdexcept>
#include <string>

namespace parenchyma {
inline namespace v1 {

enum class errc {
  invalid_argument, // bad argument: a shape mismatch, a wrong leading dimension, ...
  unsupported,      // the backend or plugin does not offer this
  out_of_memory,    // a device or host allocation failed; nothing else changed
  device,           // the driver or device failed
  build,            // a kernel program did not compile; the message holds the build log
  not_found,        // a named thing (kernel, op, backend, device) does not exist
  version,          // ABI or driver version mismatch
  unavailable,      // a requested backend is not available here
  internal,         // a bug
  launch,           // a kernel launch was refused
  config,           // malformed configuration (file, key or environment variable)
  uninitialized,    // reading a tensor nobody wrote
  plugin            // a plugin could not be loaded
};

PARENCHYMA_API const char* to_string(errc code) noexcept;
PARENCHYMA_API errc from_status(pcy_status status) noexcept;

class PARENCHYMA_API error : public std::runtime_error {
public:
  error(errc code, std::string origin, const std::string& message);
  errc code() const noexcept { return code_; }
  const std::string& origin() const noexcept { return origin_; }
  // The message without the "origin: " prefix that what() carries.
  const std::string& message() const noexcept { return message_; }

private:
  errc code_;
  std::string origin_;
  std::string message_;
};

// Turns a pcy_error from a plugin into a parenchyma::error (and frees it). No-op on NULL.
PARENCHYMA_API void throw_if(pcy_error* e, const char* context = nullptr);

} // namespace v1
} // namespace parenchyma
