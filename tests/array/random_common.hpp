// Shared by the array random tests: the C++ compile of pcy_array_random.h and the edge-case
// words every transform is checked on.
#pragma once

#include <parenchyma/abi/ext/pcy_array_random.h>

#include <array>
#include <cstdint>
#include <vector>

namespace pcy_array_random_test {

using words = std::array<uint32_t, 4>;

// The words of element e of the draw (seed, offset).
inline words draw(uint64_t seed, uint64_t offset, uint64_t e) {
  words w{};
  pcy_rng_words(seed, offset, e, w.data());
  return w;
}

// Integers k = w >> 8 (binary32) at the ends of [0, 2^24), around powers of two and the
// sqrt(2) switch of the logarithm; j = w >> 8 at the quadrant boundaries and their midpoints.
inline std::vector<uint32_t> edge_k24() {
  std::vector<uint32_t> k = {0, 1, 2, 3, (1u << 24) - 1, (1u << 24) - 2, (1u << 24) - 3};
  for (uint32_t b = 1; b < 24; ++b) {
    const uint32_t p = 1u << b;
    k.insert(k.end(), {p - 2, p - 1, p});
    const uint32_t s = static_cast<uint32_t>(static_cast<double>(p) * 1.4142135623730951);
    k.insert(k.end(), {s - 2, s - 1, s, s + 1});
  }
  return k;
}
inline std::vector<uint32_t> edge_j24() {
  std::vector<uint32_t> j;
  for (uint32_t q = 0; q < 4; ++q) {
    for (uint32_t base : {q << 22, (q << 22) + (1u << 21)}) {
      for (int d = -2; d <= 2; ++d) {
        const uint32_t v = base + static_cast<uint32_t>(d);
        if (v < (1u << 24)) j.push_back(v);
      }
    }
  }
  j.push_back((1u << 24) - 1);
  return j;
}
// The same at 53 bits.
inline std::vector<uint64_t> edge_k53() {
  const uint64_t top = uint64_t(1) << 53;
  std::vector<uint64_t> k = {0, 1, 2, 3, top - 1, top - 2, top - 3};
  for (int b = 1; b < 53; ++b) {
    const uint64_t p = uint64_t(1) << b;
    k.insert(k.end(), {p - 2, p - 1, p});
    const auto s = static_cast<uint64_t>(static_cast<long double>(p) * 1.41421356237309504880L);
    k.insert(k.end(), {s - 2, s - 1, s, s + 1});
  }
  return k;
}
inline std::vector<uint64_t> edge_j53() {
  std::vector<uint64_t> j;
  for (uint64_t q = 0; q < 4; ++q) {
    for (uint64_t base : {q << 51, (q << 51) + (uint64_t(1) << 50)}) {
      for (int d = -2; d <= 2; ++d) {
        const uint64_t v = base + static_cast<uint64_t>(static_cast<int64_t>(d));
        if (v < (uint64_t(1) << 53)) j.push_back(v);
      }
    }
  }
  j.push_back((uint64_t(1) << 53) - 1);
  return j;
}

// Words whose transforms see the edge integers: w0 >> 8 = k, w1 >> 8 = j (binary32), and
// (w0 >> 11, w1) = k, (w2 >> 11, w3) = j (binary64), low bits varied.
inline std::vector<words> edge_words() {
  std::vector<words> out;
  const auto k24 = edge_k24(), j24 = edge_j24();
  const auto k53 = edge_k53(), j53 = edge_j53();
  uint32_t low = 0x5a;
  for (size_t a = 0; a < k24.size(); ++a) {
    for (size_t b = 0; b < j24.size(); ++b) {
      const uint64_t k = k53[(a * 7 + b) % k53.size()], j = j53[(a + b * 3) % j53.size()];
      low = low * 1103515245u + 12345u;
      out.push_back({k24[a] << 8 | (low & 0xff), j24[b] << 8 | (low >> 8 & 0xff),
                     static_cast<uint32_t>(j >> 32) << 11 | (low >> 16 & 0x7ff),
                     static_cast<uint32_t>(j)});
      // the binary64 u1 lives in (w0, w1): a second word set with k in it
      out.push_back({static_cast<uint32_t>(k >> 32) << 11 | (low & 0x7ff), static_cast<uint32_t>(k),
                     static_cast<uint32_t>(j >> 32) << 11 | (low >> 11 & 0x7ff),
                     static_cast<uint32_t>(j)});
    }
  }
  return out;
}

} // namespace pcy_array_random_test
