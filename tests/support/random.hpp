// The tests' random generator: fresh data every run, the seed printed (once per thread) so a
// failing run can be told apart. One per thread: tests that spawn threads may use it freely.
#pragma once

#include <cstdint>
#include <cstdio>
#include <random>

namespace pcy_test_support {

inline std::mt19937_64& rng() {
  thread_local std::mt19937_64 r = [] {
    const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

} // namespace pcy_test_support
