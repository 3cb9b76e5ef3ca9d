// The CUDA bundles' run-time kernel sources (extensions/{blas,nn}/cuda/kernels.cu after the SDK's
// common part, as blas_cuda and nn_cuda join them) compile with NVRTC for the H200's
// architecture, sm_90, exactly as the bundles hand them to the CUDA plugin (no options):
// a source error shows here, on a machine without a GPU, instead of at first use on one.
// Skipped (77) without NVRTC, and under the validation layer (no plugin call to check).
#include "nvrtc_loader.hpp"

#include "extensions/blas/cuda/kernels_cu.hpp"
#include "extensions/nn/cuda/kernels_cu.hpp"
#ifdef PARENCHYMA_TEST_COLL_CUDA
#include "extensions/coll/cuda/kernels_cu.hpp"
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace pc = parenchyma::cuda;

int main() {
  if (const char* v = std::getenv("PARENCHYMA_VALIDATE"); v != nullptr && *v && *v != '0') {
    std::printf("SKIPPED: a compile check; the validation layer has no plugin call to check\n");
    return 77;
  }
  pc::nvrtc rtc;
  if (!rtc.available()) {
    std::printf("SKIPPED: NVRTC is not available: %s\n", rtc.reason().c_str());
    return 77;
  }
  int failed = 0;
  const struct {
    const char* name;
    const char* source;
  } sources[] = {
      {"blas_cuda", parenchyma::blas_cuda::kernel_source()},
      {"nn_cuda", parenchyma::nn_cuda::kernel_source()},
#ifdef PARENCHYMA_TEST_COLL_CUDA
      {"coll_cuda", parenchyma::coll_cuda::kernel_source()},
#endif
  };
  for (const auto& s : sources) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const pc::nvrtc::output out = rtc.compile(s.source, {}, 90);
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%s: %s, %zu bytes, %.1f s (NVRTC %s)%s%s\n", s.name, out.target.c_str(),
                  out.image.size(), secs, rtc.version().c_str(), out.log.empty() ? "" : "\nlog:\n",
                  out.log.c_str());
      if (!out.cubin || out.target != "sm_90") {
        std::printf("FAILED: %s: expected a cubin for sm_90\n", s.name);
        ++failed;
      }
    } catch (const std::exception& e) {
      std::printf("FAILED: %s: %s\n", s.name, e.what());
      ++failed;
    }
  }
  return failed == 0 ? 0 : 1;
}
