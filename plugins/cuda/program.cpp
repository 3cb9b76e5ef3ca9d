// Programs: CUDA C compiled by NVRTC for the exact architecture of each device of the context
// (sm_90 on an H200), the cubin cached on disk (the SDK's blob_cache, kind "cuda") and loaded
// with cuModuleLoadData; kernels are looked up once at kernel_create, with what a launch needs to
// check its arguments.
#include "plugin.hpp"

#include <parenchyma/sdk/sha256.hpp>

namespace parenchyma::cuda {

namespace {
sdk::blob_cache::key_type cache_key(const driver& d, nvrtc& rtc, int cc, std::string_view source,
                                    const char* options) {
  // Everything that changes the cubin: the format, the device architecture, the driver, the
  // NVRTC library (by file identity, so a cache hit never loads NVRTC), the options, the source.
  sdk::sha256 h;
  h.field("parenchyma-cuda-program-v1");
  h.field(sdk::str("sm_", cc));
  h.field(sdk::str(d.version()));
  h.field(rtc.identity());
  h.field(options ? options : "");
  h.field(source);
  return h.finish();
}

bool load_module(const driver& d, CUcontext ctx, const void* image, CUmodule& out, CUresult& why) {
  make_current(d, ctx);
  why = d.api().cuModuleLoadData(&out, image);
  return why == CUDA_SUCCESS;
}
} // namespace

program* context::build(std::string_view source, const char* options, bool& cache_hit) {
  const auto& d = drv();
  auto& rtc = p_.nvrtc();
  auto& cache = p_.cache();
  if (rtc.identity().empty()) sdk::fail(PCY_ERR_UNAVAILABLE, rtc.reason());

  std::vector<CUmodule> modules;
  auto unload = [&] {
    for (CUmodule m : modules)
      d.api().cuModuleUnload(m);
  };
  cache_hit = true;
  try {
    for (auto& s : slots_) {
      const int cc = s.info->cc;
      const auto key = cache_key(d, rtc, cc, source, options);
      CUmodule mod = nullptr;
      CUresult why = CUDA_SUCCESS;
      if (auto cached = cache.load(key)) {
        if (load_module(d, s.ctx, cached->data(), mod, why)) {
          modules.push_back(mod);
          continue;
        }
        p_.log().warn("cached program ", cache.path(key), " was refused by the driver (",
                      d.describe(why), "): rebuilding it");
        cache.remove(key);
      }
      cache_hit = false;
      p_.log().progress(sdk::str("compiling ", sdk::kernels_in(source), " for sm_", cc));
      auto out = rtc.compile(source, split_options(options ? options : ""), cc);
      if (!out.log.empty()) p_.log().debug("NVRTC log for ", out.target, ":\n", out.log);
      if (!out.cubin)
        p_.log().warn("NVRTC ", rtc.version(), " does not know sm_", cc, " (", s.info->name,
                      "): built PTX for ", out.target,
                      ", which the driver compiles at every load; install a newer NVRTC");
      if (!load_module(d, s.ctx, out.image.data(), mod, why))
        sdk::fail(why == CUDA_ERROR_OUT_OF_MEMORY ? PCY_ERR_OUT_OF_MEMORY : PCY_ERR_BUILD,
                  sdk::str("cuModuleLoadData of the ", out.target, " image on ", s.info->name,
                           " failed: ", d.describe(why)));
      modules.push_back(mod);
      // PTX is not cached: it is not the warm path. The write happens on the cache's thread.
      if (out.cubin)
        cache.store_later(key, sdk::blob_cache::blob(out.image.begin(), out.image.end()));
    }
  } catch (...) {
    unload();
    throw;
  }
  return new program(*this, std::move(modules));
}

program::~program() {
  const auto& d = ctx_.drv();
  for (size_t i = 0; i < modules_.size(); ++i) {
    CUcontext c = ctx_.slot(static_cast<uint32_t>(i)).ctx;
    if (tl_current != c && d.api().cuCtxSetCurrent(c) == CUDA_SUCCESS) tl_current = c;
    d.api().cuModuleUnload(modules_[i]);
  }
}

kernel* program::create_kernel(const char* name, uint32_t flags) {
  const auto& d = ctx_.drv();
  std::vector<kernel::per_device> fns;
  std::vector<size_t> sizes;
  bool known = false;
  for (size_t i = 0; i < modules_.size(); ++i) {
    const device_slot& s = ctx_.slot(static_cast<uint32_t>(i));
    make_current(d, s.ctx);
    kernel::per_device f;
    const CUresult r = d.api().cuModuleGetFunction(&f.fn, modules_[i], name);
    if (r == CUDA_ERROR_NOT_FOUND)
      sdk::fail(PCY_ERR_NOT_FOUND, sdk::str("kernel '", name,
                                            "' not found in the program: declare it "
                                            "extern \"C\" __global__ (C++ names are mangled)"));
    check(d, r, sdk::str("cuModuleGetFunction('", name, "')").c_str());
    check(d,
          d.api().cuFuncGetAttribute(&f.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.fn),
          "cuFuncGetAttribute");
    int min_grid = 0, block = 0;
    if (d.api().cuOccupancyMaxPotentialBlockSize(&min_grid, &block, f.fn, nullptr, 0, 0) ==
            CUDA_SUCCESS &&
        block > 0)
      f.suggested_block = block;
    f.suggested_block = std::min(f.suggested_block, f.max_threads);
    // Programmatic dependent launch needs sm_90; the kernel's wait is empty below it.
    f.early = (flags & PCY_KERNEL_WAITS_FOR_PRIOR) != 0 && s.info->cc >= 90 &&
              ctx_.owner().early_launch();
    if (i == 0 && d.api().cuFuncGetParamInfo != nullptr) {
      // Parameter layout (CUDA 12.4+): lets a launch check the argument count and sizes.
      known = true;
      for (size_t p = 0; p < 4096; ++p) {
        size_t offset = 0, size = 0;
        const CUresult pr = d.api().cuFuncGetParamInfo(f.fn, p, &offset, &size);
        if (pr == CUDA_ERROR_INVALID_VALUE || pr == CUDA_ERROR_NOT_FOUND) break; // past the end
        if (pr != CUDA_SUCCESS) {
          known = false;
          break;
        }
        sizes.push_back(size);
      }
      if (sizes.size() > kernel::max_args)
        sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str("kernel '", name, "' has ", sizes.size(),
                                                " parameters; at most ", kernel::max_args));
    }
    fns.push_back(f);
  }
  return new kernel(name, std::move(fns), std::move(sizes), known);
}

} // namespace parenchyma::cuda
