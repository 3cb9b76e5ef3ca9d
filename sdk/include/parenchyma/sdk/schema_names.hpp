// The words a host prints for an op schema's fields (parenchyma-info, the Python package's
// info()): one spelling everywhere, and a plugin's strings made printable and bounded.
#pragma once

#include <parenchyma/abi/pcy_bundle.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace parenchyma::sdk {

// A string from a plugin's schema: at most 64 characters, anything not printable ASCII as '?'
// (the registry checked the structure, not the text).
inline std::string schema_text(const char* s) {
  std::string out;
  for (size_t i = 0; s != nullptr && s[i] != '\0' && i < 64; ++i)
    out += (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
  return out;
}

// An argument's kind: "int", "float", "scalar", "tensor", "int array" ("?" for another value).
inline const char* schema_kind_name(uint8_t k) noexcept {
  switch (k) {
  case PCY_SCHEMA_INT: return "int";
  case PCY_SCHEMA_FLOAT: return "float";
  case PCY_SCHEMA_SCALAR: return "scalar";
  case PCY_SCHEMA_TENSOR: return "tensor";
  case PCY_SCHEMA_INT_ARRAY: return "int array";
  default: return "?";
  }
}

// An argument's intent: a tensor's "in", "out", "inout" or "overwrite"; "in" for a scalar
// (a float, or a one-element tensor read); "" for the other kinds.
inline const char* schema_intent_name(uint8_t kind, uint8_t intent) noexcept {
  if (kind != PCY_SCHEMA_TENSOR) return kind == PCY_SCHEMA_SCALAR ? "in" : "";
  switch (intent) {
  case PCY_INTENT_IN: return "in";
  case PCY_INTENT_OUT: return "out";
  case PCY_INTENT_INOUT: return "inout";
  case PCY_SCHEMA_INTENT_OVERWRITE: return "overwrite";
  default: return "?";
  }
}

} // namespace parenchyma::sdk
