// parenchyma-conformance: which devices may flush f32 subnormals, decided in one place for the
// bundle suites (extension_suite.hpp holds the comparison rule) and the GPU array test.
// docs/vulkan.md, "On NVIDIA's Vulkan driver": a Vulkan device that does not report
// shaderDenormPreserveFloat32 (the plugin's property denorm_preserve_f32) cannot be asked to keep
// f32 subnormals, and NVIDIA's driver flushes them: there an f32 subnormal input or result may be
// a zero of its sign. f64 keeps its subnormals there.
#pragma once

#include <parenchyma/parenchyma.hpp>

#include <string_view>
#include <variant>

namespace parenchyma::conformance {

// Whether `b`'s device may flush f32 subnormals: the vulkan framework and a device whose
// denorm_preserve_f32 is not true (lavapipe reports false too, and keeps them: the rule allows
// flushing, it does not require it). Every other framework keeps them (IEEE).
inline bool may_flush_f32(const Backend& b) {
  if (b.framework().name() != "vulkan") return false;
  for (const auto& [key, value] : b.device().properties)
    if (std::string_view(key) == "denorm_preserve_f32") {
      const bool* keeps = std::get_if<bool>(&value);
      return keeps == nullptr || !*keeps;
    }
  return true;
}

} // namespace parenchyma::conformance
