// CUDA plugin tests that need no GPU (CI runs them): the table, clean initialisation with 0
// devices and a reason when the driver is missing, a stub or broken, and ABI refusal.
#include "fixture.hpp"

#include <sys/stat.h>

using namespace cuda_test;

TEST_CASE("the cuda plugin's table names it and fills every slot", "[cuda][probe]") {
  const auto& api = plugin_api();
  CHECK(std::string(api.name) == "cuda");
  CHECK(api.kind == PCY_PLUGIN_FRAMEWORK);
  CHECK(api.abi_major == PCY_ABI_VERSION_MAJOR);
  CHECK(api.struct_size >= PCY_FRAMEWORK_API_SIZE_1_0);
  CHECK(api.memory_export != nullptr);
  CHECK(api.memory_import != nullptr);
  CHECK(api.program_build != nullptr);
  CHECK(api.kernel_launch != nullptr);
  CHECK(api.native_handle != nullptr);
}

TEST_CASE("the cuda plugin initialises cleanly whatever the machine has", "[cuda][probe]") {
  test_host h;
  host::framework fw(&plugin_api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  if (p.device_count == 0) {
    REQUIRE(p.reason != nullptr);
    CHECK(std::string(p.reason).size() > 10);
    WARN("0 CUDA devices: " << p.reason);
    const pcy_property* props = nullptr;
    size_t n = 0;
    std::string msg;
    CHECK(status_of(plugin_api().device_properties(fw.plugin(), 0, &props, &n), &msg) ==
          PCY_ERR_NOT_FOUND);
    CHECK(msg.find("cuda") == 0);
  } else {
    auto props = fw.properties(0);
    const pcy_property* vendor = find_property(props, PCY_PROP_VENDOR);
    REQUIRE(vendor != nullptr);
    CHECK(std::string(vendor->s) == "NVIDIA");
  }
}

TEST_CASE("a missing driver library gives 0 devices and says which file", "[cuda][probe]") {
  scoped_env e("PARENCHYMA_CUDA_DRIVER", "/nonexistent/libcuda.so.1");
  test_host h;
  host::framework fw(&plugin_api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  CHECK(p.device_count == 0);
  REQUIRE(p.reason != nullptr);
  const std::string reason = p.reason;
  INFO(reason);
  CHECK(reason.find("/nonexistent/libcuda.so.1") != std::string::npos);
  CHECK(reason.find("could not be loaded") != std::string::npos);
  CHECK(h.log.count("0 devices") == 1);
}

TEST_CASE("the toolkit's stub libcuda is recognised, not mistaken for a driver", "[cuda][probe]") {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  struct stat st {};
  if (::stat(stub, &st) != 0) {
    WARN("no CUDA stub library at " << stub << ": case not exercised");
    return;
  }
  scoped_env e("PARENCHYMA_CUDA_DRIVER", stub);
  test_host h;
  host::framework fw(&plugin_api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  CHECK(p.device_count == 0);
  REQUIRE(p.reason != nullptr);
  INFO(p.reason);
  CHECK(std::string(p.reason).find("stub library") != std::string::npos);
}

TEST_CASE("a library that is not a CUDA driver is refused with a reason", "[cuda][probe]") {
  scoped_env e("PARENCHYMA_CUDA_DRIVER", "libm.so.6");
  test_host h;
  host::framework fw(&plugin_api(), &h.services);
  const pcy_framework_probe p = fw.probe();
  CHECK(p.device_count == 0);
  REQUIRE(p.reason != nullptr);
  INFO(p.reason);
  CHECK(std::string(p.reason).find("not a CUDA driver library") != std::string::npos);
}

TEST_CASE("a host speaking another ABI major is refused", "[cuda][probe]") {
  test_host h;
  h.services.host_abi_major = PCY_ABI_VERSION_MAJOR + 1;
  pcy_framework_init_args a{};
  a.struct_size = sizeof a;
  a.host = &h.services;
  std::string msg;
  CHECK(status_of(plugin_api().initialize(&a), &msg) == PCY_ERR_VERSION);
  CHECK(msg.find("cuda") == 0);
  CHECK(msg.find("ABI") != std::string::npos);
}
