// parenchyma core: the error type and the bridge from ABI error objects.
#include <parenchyma/error.hpp>

#include <string>

namespace parenchyma {
inline namespace v1 {

const char* to_string(errc code) noexcept {
  switch (code) {
  case errc::invalid_argument: return "invalid argument";
  case errc::unsupported: return "unsupported";
  case errc::out_of_memory: return "out of memory";
  case errc::device: return "device error";
  case errc::build: return "build error";
  case errc::not_found: return "not found";
  case errc::version: return "version mismatch";
  case errc::unavailable: return "unavailable";
  case errc::internal: return "internal error";
  case errc::launch: return "launch error";
  case errc::config: return "configuration error";
  case errc::uninitialized: return "uninitialized data";
  case errc::plugin: return "plugin error";
  }
  return "error";
}

errc from_status(pcy_status status) noexcept {
  switch (status) {
  case PCY_OK:
  case PCY_ERR_INTERNAL: return errc::internal;
  case PCY_ERR_INVALID_ARGUMENT: return errc::invalid_argument;
  case PCY_ERR_UNSUPPORTED: return errc::unsupported;
  case PCY_ERR_OUT_OF_MEMORY: return errc::out_of_memory;
  case PCY_ERR_DEVICE: return errc::device;
  case PCY_ERR_BUILD: return errc::build;
  case PCY_ERR_NOT_FOUND: return errc::not_found;
  case PCY_ERR_VERSION: return errc::version;
  case PCY_ERR_UNAVAILABLE: return errc::unavailable;
  case PCY_ERR_LAUNCH: return errc::launch;
  }
  return errc::internal;
}

error::error(errc code, std::string origin, const std::string& message)
    : std::runtime_error(origin + ": " + message), code_(code), origin_(std::move(origin)),
      message_(message) {}

void throw_if(pcy_error* e, const char* context) {
  if (e == nullptr) return;
  const errc code = from_status(e->code);
  std::string origin = e->origin != nullptr ? e->origin : "plugin";
  std::string message = e->message != nullptr ? e->message : "(no message)";
  if (e->destroy != nullptr) e->destroy(e);
  // The context says what the core was doing (e.g. the op "nn.lrn"); a plugin's message that
  // already opens with it (the SDK's argument checks name their op) does not get it twice.
  if (context != nullptr) {
    const std::string prefix = std::string(context) + ": ";
    if (message.compare(0, prefix.size(), prefix) != 0) message = prefix + message;
  }
  throw error(code, std::move(origin), message);
}

} // namespace v1
} // namespace parenchyma
