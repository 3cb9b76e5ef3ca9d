// Test sizes under the sanitizers: PARENCHYMA_STRESS_SCALE (tools/run-tests sets 0.5 in the ASan
// and TSan builds, where each iteration costs 10-20x) scales the repetitions of stress-like
// cases; what each repetition checks stays the same. Unset or not positive: 1.
#pragma once

#include <algorithm>
#include <cstdlib>

namespace parenchyma::test {

inline double stress_scale() {
  const char* e = std::getenv("PARENCHYMA_STRESS_SCALE");
  const double v = e != nullptr ? std::atof(e) : 1.0;
  return v > 0 ? v : 1.0;
}

// n repetitions, scaled and rounded, and never fewer than `at_least`.
inline int stress_scaled(int n, int at_least = 1) {
  return std::max(at_least, static_cast<int>(n * stress_scale() + 0.5));
}

} // namespace parenchyma::test
