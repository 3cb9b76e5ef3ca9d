// The CUDA dialect of the array code generator (extensions/array/common/array_codegen.hpp)
// compiles with NVRTC for sm_90 exactly as array_cuda hands it to the CUDA plugin (--fmad=false),
// for representative programs: every instruction on every dtype, every cast both ways, every
// reduce kind, both scans, every random distribution, each with F32 functions in F32 and through
// F64. No GPU needed; skipped (77) without NVRTC.
#include "codegen_programs.hpp"
#include "nvrtc_loader.hpp"

#include <parenchyma/abi/ext/pcy_array_random.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

namespace pc = parenchyma::cuda;
namespace cg = parenchyma::array_bundle::codegen;
namespace act = array_codegen_test;

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
  std::ifstream f(PCY_ARRAY_RANDOM_HEADER);
  std::stringstream text;
  text << f.rdbuf();
  const std::string random_header = text.str();
  if (random_header.empty()) {
    std::printf("FAILED: cannot read %s\n", PCY_ARRAY_RANDOM_HEADER);
    return 1;
  }
  int failed = 0, count = 0;
  // CI's time: every 4th program by default (each instruction and dtype still appears in most
  // of them); PARENCHYMA_ARRAY_CODEGEN_ALL=1 compiles them all (about 30 s).
  // PARENCHYMA_ARRAY_CODEGEN_SLICE=E:O compiles every E-th starting at O instead: the sanitizer
  // builds take other programs than the normal build's (8:2 and 8:6), so CI compiles half.
  const char* all_env = std::getenv("PARENCHYMA_ARRAY_CODEGEN_ALL");
  size_t every = all_env != nullptr && *all_env == '1' ? 1 : 4, first = 0;
  if (const char* sl = std::getenv("PARENCHYMA_ARRAY_CODEGEN_SLICE"); sl != nullptr && *sl) {
    char* end = nullptr;
    every = std::max<size_t>(1, std::strtoull(sl, &end, 10));
    first = end != nullptr && *end == ':' ? std::strtoull(end + 1, nullptr, 10) % every : 0;
  }
  size_t seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const act::named_spec& n : act::representative()) {
    if (seen++ % every != first) continue;
    for (bool wide : {false, true}) {
      if (wide && n.s.what == cg::job::random) continue;
      cg::spec s = n.s;
      s.f32_via_f64 = wide;
      const std::string src = cg::source(s, cg::dialect::cuda, random_header, 256);
      ++count;
      try {
        const pc::nvrtc::output out = rtc.compile(src, {"--fmad=false", "--disable-warnings"}, 90);
        if (!out.cubin || out.target != "sm_90") {
          std::printf("FAILED: %s: expected a cubin for sm_90 (got %s)\n", n.name.c_str(),
                      out.target.c_str());
          ++failed;
        }
      } catch (const std::exception& e) {
        std::printf("FAILED: %s%s: %s\n--- source ---\n%s\n", n.name.c_str(),
                    wide ? " (f32 via f64)" : "", e.what(), src.c_str());
        ++failed;
        if (failed > 3) return 1;
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d generated CUDA sources compiled for sm_90 in %.1f s (NVRTC %s), %d failed\n",
              count, secs, rtc.version().c_str(), failed);
  return failed == 0 ? 0 : 1;
}
