// What every coll bundle shares: the dtypes it serves each op in, and how it reads the timeout
// setting (PCY_COLL_TIMEOUT_SETTING, docs/distributed.md).
#pragma once

#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/sdk/common.hpp>

#include <cmath>
#include <cstdlib>

// The six instantiations of an op template, in the order a bundle's add_all takes them:
//   add_all<PCY_COLL_DTYPES(op_all_reduce)>(pcy_coll_all_reduce_schema, "...");
#define PCY_COLL_DTYPES(op)                                                                        \
  op<PCY_DTYPE_F16>, op<PCY_DTYPE_BF16>, op<PCY_DTYPE_F32>, op<PCY_DTYPE_F64>, op<PCY_DTYPE_I32>,  \
      op<PCY_DTYPE_I64>

namespace parenchyma::coll_bundle {

// The timeout in seconds from the settings, or `fallback` (with a warning when the value given
// is not a positive number).
inline double timeout_setting(const sdk::settings& settings, const sdk::logger& log,
                              double fallback) {
  const char* t = settings.find(PCY_COLL_TIMEOUT_SETTING);
  if (t == nullptr) return fallback;
  char* end = nullptr;
  const double v = std::strtod(t, &end);
  if (end == t || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
    log.warn(PCY_COLL_TIMEOUT_SETTING, "=", t, " is not a positive number of seconds; using ",
             PCY_COLL_TIMEOUT_DEFAULT);
    return fallback;
  }
  return v;
}

} // namespace parenchyma::coll_bundle
