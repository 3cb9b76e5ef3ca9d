// The backends whose framework has an array bundle and a device here (native always; OpenCL and
// CUDA where present), for the array tests.
#pragma once

#include <parenchyma/parenchyma.hpp>
#include <parenchyma/registry.hpp>

#include <vector>

namespace array_test {

inline std::vector<parenchyma::Backend> array_backends() {
  std::vector<parenchyma::Backend> out;
  parenchyma::Registry& reg = parenchyma::Registry::global();
  for (const char* name : {"native", "opencl", "cuda"}) {
    const parenchyma::Framework* fw = reg.find_framework(name);
    if (fw == nullptr || fw->devices().empty()) continue;
    bool has = false;
    for (const auto& b : reg.bundles())
      has = has || (b->extension() == "array" && b->framework() == name && !b->ops().empty());
    if (has) out.emplace_back(name);
  }
  return out;
}

} // namespace array_test
