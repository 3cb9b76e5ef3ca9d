/* The C99 compile of pcy_array_random.h (random_c99.c), for the C++ test. */
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
void pcy_test_c99_words(uint64_t seed, uint64_t offset, uint64_t e, uint32_t out[4]);
float pcy_test_c99_uniform_f32(uint32_t w0);
double pcy_test_c99_uniform_f64(uint32_t w0, uint32_t w1);
float pcy_test_c99_normal_f32(uint32_t w0, uint32_t w1);
double pcy_test_c99_normal_f64(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3);
int pcy_test_c99_bernoulli(uint32_t w0, uint64_t threshold);
uint64_t pcy_test_c99_bernoulli_threshold(double p);
int64_t pcy_test_c99_randint(uint32_t w0, uint32_t w1, int64_t lo, uint64_t range);
#ifdef __cplusplus
}
#endif
