// parenchyma SDK: the extent arithmetic of op arguments, written once for both sides of the ABI
// boundary: an extension's front-end (core's extension.hpp) checks a call with it before anything
// is enqueued, and a bundle's decoder (op_schema.hpp) re-checks the same call with it, because a
// bundle may be called by any host. Every product and sum is overflow-checked, so a bound check
// can never wrap modulo 2^64 into "fits". Plain C++; nothing else.
#pragma once

#include <cstdint>

// Checks that run on every op: inlined, so only their (cold) failure paths cost a call.
#ifndef PCY_SDK_HOT
#if defined(__GNUC__)
#define PCY_SDK_HOT [[gnu::always_inline]]
#else
#define PCY_SDK_HOT
#endif
#endif

namespace parenchyma::sdk {

PCY_SDK_HOT inline bool mul_ok(uint64_t a, uint64_t b, uint64_t& out) noexcept {
  return !__builtin_mul_overflow(a, b, &out);
}
PCY_SDK_HOT inline bool add_ok(uint64_t a, uint64_t b, uint64_t& out) noexcept {
  return !__builtin_add_overflow(a, b, &out);
}

// The elements a strided vector of n >= 1 elements with increment inc >= 1 spans:
// 1 + (n - 1) * inc. False when that overflows.
PCY_SDK_HOT inline bool vector_extent(int64_t n, int64_t inc, uint64_t& out) noexcept {
  return mul_ok(static_cast<uint64_t>(n - 1), static_cast<uint64_t>(inc), out) &&
         add_ok(out, 1, out);
}

// The elements a row-major matrix of rows x cols (both >= 1) with leading dimension ld >= cols
// spans: (rows - 1) * ld + cols. False when that overflows.
PCY_SDK_HOT inline bool matrix_extent(int64_t rows, int64_t cols, int64_t ld,
                                      uint64_t& out) noexcept {
  return mul_ok(static_cast<uint64_t>(rows - 1), static_cast<uint64_t>(ld), out) &&
         add_ok(out, static_cast<uint64_t>(cols), out);
}

// The elements `count` >= 1 blocks of `one` elements each span when block i starts at element
// i * stride (stride >= 0; 0: one block serves every index): (count - 1) * stride + one. False
// when that overflows. A strided batch of matrices is this with one = matrix_extent(...).
PCY_SDK_HOT inline bool strided_extent(int64_t count, int64_t stride, uint64_t one,
                                       uint64_t& out) noexcept {
  return mul_ok(static_cast<uint64_t>(count - 1), static_cast<uint64_t>(stride), out) &&
         add_ok(out, one, out);
}

} // namespace parenchyma::sdk
