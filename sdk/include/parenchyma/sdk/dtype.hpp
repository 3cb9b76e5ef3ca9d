// parenchyma SDK: the one table of dtype facts (size, short name), for plugins, the core and the
// extension front-ends alike. Plain C++ over pcy_base.h; nothing else.
#pragma once

#include <parenchyma/abi/pcy_base.h>

#include <cstddef>
#include <cstdint>

namespace parenchyma::sdk {

inline constexpr size_t dtype_size(pcy_dtype t) noexcept {
  switch (t) {
  case PCY_DTYPE_F32:
  case PCY_DTYPE_I32: return 4;
  case PCY_DTYPE_F64:
  case PCY_DTYPE_I64: return 8;
  case PCY_DTYPE_U8:
  case PCY_DTYPE_I8:
  case PCY_DTYPE_BOOL: return 1;
  case PCY_DTYPE_I16:
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: return 2;
  }
  return 0;
}

// The short name ("f32", "bf16", ...) of a dtype value as a plugin sent it, taken as its integer
// (reading an out-of-range value through the enum type would be undefined); nullptr when it
// names no dtype.
inline constexpr const char* dtype_name_or_null(int64_t t) noexcept {
  switch (t) {
  case PCY_DTYPE_F32: return "f32";
  case PCY_DTYPE_F64: return "f64";
  case PCY_DTYPE_I32: return "i32";
  case PCY_DTYPE_I64: return "i64";
  case PCY_DTYPE_U8: return "u8";
  case PCY_DTYPE_F16: return "f16";
  case PCY_DTYPE_BF16: return "bf16";
  case PCY_DTYPE_I8: return "i8";
  case PCY_DTYPE_I16: return "i16";
  case PCY_DTYPE_BOOL: return "bool";
  }
  return nullptr;
}

// The short name of a dtype; "?" for a value that names none.
inline constexpr const char* dtype_name(pcy_dtype t) noexcept {
  const char* n = dtype_name_or_null(static_cast<int64_t>(t));
  return n != nullptr ? n : "?";
}

} // namespace parenchyma::sdk
