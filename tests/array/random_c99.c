/* pcy_array_random.h compiled as C99 (-std=c99 -Wpedantic): the C++ test compares these
 * functions' bits with its own C++ compile of the same header (random_test.cpp). */
#include "random_c99.h"

#include <parenchyma/abi/ext/pcy_array_random.h>

void pcy_test_c99_words(uint64_t seed, uint64_t offset, uint64_t e, uint32_t out[4]) {
  pcy_rng_words(seed, offset, e, out);
}
float pcy_test_c99_uniform_f32(uint32_t w0) { return pcy_rng_uniform_f32(w0); }
double pcy_test_c99_uniform_f64(uint32_t w0, uint32_t w1) { return pcy_rng_uniform_f64(w0, w1); }
float pcy_test_c99_normal_f32(uint32_t w0, uint32_t w1) { return pcy_rng_normal_f32(w0, w1); }
double pcy_test_c99_normal_f64(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3) {
  return pcy_rng_normal_f64(w0, w1, w2, w3);
}
int pcy_test_c99_bernoulli(uint32_t w0, uint64_t threshold) {
  return pcy_rng_bernoulli(w0, threshold);
}
uint64_t pcy_test_c99_bernoulli_threshold(double p) { return pcy_rng_bernoulli_threshold(p); }
int64_t pcy_test_c99_randint(uint32_t w0, uint32_t w1, int64_t lo, uint64_t range) {
  return pcy_rng_randint(w0, w1, lo, range);
}
