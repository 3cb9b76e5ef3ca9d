// The coll bundles' own f16 / bf16 conversions (extensions/coll/common/half.hpp: they link only
// the SDK) against the core's parenchyma::f16 / bf16: every 16-bit pattern widened, and floats
// narrowed (every tie between neighbouring half values and the floats next to it, every f32
// exponent, a strided sweep of all 2^32 patterns). NaN must stay NaN (payloads may differ).
#include "support/catch.hpp"

#include "half.hpp"

#include <parenchyma/shared_tensor.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

using namespace parenchyma;
namespace cb = parenchyma::coll_bundle;

namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// 0 when the two 16-bit results agree (both NaN counts as agreeing).
template <class Core, class Ours> int narrow_mismatch(float x, Ours ours) {
  const uint16_t want = Core::from_float(x), got = ours(x);
  if (want == got) return 0;
  if (std::isnan(Core::to_float(want)) && std::isnan(Core::to_float(got))) return 0;
  UNSCOPED_INFO("x = " << x << " (bits 0x" << std::hex << bits_of(x) << "): core 0x" << want
                       << ", bundle 0x" << got << std::dec);
  return 1;
}

} // namespace

TEST_CASE("f16 and bf16 widen exactly like the core's", "[coll][half]") {
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto b = static_cast<uint16_t>(h);
    const float a16 = f16::to_float(b), o16 = cb::f16_to_f32(b);
    const float a8 = bf16::to_float(b), o8 = cb::bf16_to_f32(b);
    if (!(bits_of(a16) == bits_of(o16) || (std::isnan(a16) && std::isnan(o16)))) ++bad;
    if (!(bits_of(a8) == bits_of(o8) || (std::isnan(a8) && std::isnan(o8)))) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("f16 and bf16 narrow like the core's (round to nearest even)", "[coll][half]") {
  int bad = 0;
  // Every tie between neighbouring values, and the floats on either side of it.
  for (uint32_t h = 0; h < 65535 && bad < 10; ++h) {
    const float lo16 = f16::to_float(static_cast<uint16_t>(h)),
                hi16 = f16::to_float(static_cast<uint16_t>(h + 1));
    const float lo8 = bf16::to_float(static_cast<uint16_t>(h)),
                hi8 = bf16::to_float(static_cast<uint16_t>(h + 1));
    for (float mid : {static_cast<float>((static_cast<double>(lo16) + hi16) / 2)})
      if (std::isfinite(mid))
        for (float x : {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)})
          bad += narrow_mismatch<f16>(x, cb::f32_to_f16);
    const double mid8 = (static_cast<double>(lo8) + hi8) / 2;
    if (std::isfinite(mid8)) {
      const auto m = static_cast<float>(mid8); // exact: a bf16 tie has 9 significant bits
      for (float x : {m, std::nextafter(m, -INFINITY), std::nextafter(m, INFINITY)})
        bad += narrow_mismatch<bf16>(x, cb::f32_to_bf16);
    }
  }
  // A strided sweep over every f32 bit pattern (an odd stride reaches every exponent and sign).
  for (uint64_t b = 0; b < (uint64_t{1} << 32) && bad < 10; b += 4099) {
    const float x = from_bits(static_cast<uint32_t>(b));
    bad += narrow_mismatch<f16>(x, cb::f32_to_f16);
    bad += narrow_mismatch<bf16>(x, cb::f32_to_bf16);
  }
  CHECK(bad == 0);
}
