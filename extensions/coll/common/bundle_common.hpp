// What every coll bundle shares: the dtypes it serves each op in, and how it reads the timeout
// setting (PCY_COLL_TIMEOUT_SETTING, docs/distributed.md).
#pragma once

#include <parenchyma/abi/ext/pcy_coll.h>
#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/dtype.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

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

// The communicator with handle `id` (1-based) in a bundle's state (members `mu` and `comms`, a
// container whose entries keep their addresses and have a `broken` reason): an error for an id
// the bundle never made, and for a communicator an earlier failure broke.
template <class State> auto& entry_of(State& s, int64_t id) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (id < 1 || static_cast<uint64_t>(id) > s.comms.size())
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str("argument comm: ", id,
                       " is no communicator of this bundle; make one with coll::Communicator"));
  auto& c = s.comms[static_cast<size_t>(id - 1)];
  if (!c.broken.empty())
    sdk::fail(PCY_ERR_DEVICE, sdk::str("the communicator broke earlier (", c.broken,
                                       "); end the job on every rank"));
  return c;
}

// Arguments every op checks against its communicator; `where` starts each message ("rank r of
// n: ").
inline void check_reduce(const std::string& where, int64_t r) {
  if (r < PCY_COLL_REDUCE_SUM || r > PCY_COLL_REDUCE_AVG)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(where, "argument reduce: ", r, " is not a reduction"));
}
inline void check_rank(const std::string& where, int size, int64_t r, const char* name) {
  if (r < 0 || r >= size)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              sdk::str(where, "argument ", name, ": ", r, " outside 0 .. ", size - 1));
}

} // namespace parenchyma::coll_bundle
