// What the public-path benches of tools/bench/core share: the backends to run on (the requests
// on the command line, default the first device of cuda, opencl and native; one that is not
// present is skipped with the reason) and a nanosecond clock.
#pragma once

#include <parenchyma/parenchyma.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace bench {

inline double now_ns() {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                 std::chrono::steady_clock::now().time_since_epoch())
                                 .count());
}

// Calls f(backend) for each backend asked for that is present, one at a time (each is made just
// before and destroyed just after its turn); returns how many ran, and `asked` how many were asked.
template <class F> size_t for_each_backend(int argc, char** argv, size_t& asked, F&& f) {
  std::vector<std::string> requests(argv + 1, argv + argc);
  if (requests.empty())
    for (const char* fw : {"cuda", "opencl", "native"})
      requests.emplace_back(fw);
  asked = requests.size();
  size_t ran = 0;
  for (const std::string& req : requests) {
    std::unique_ptr<parenchyma::Backend> b;
    try {
      b = std::make_unique<parenchyma::Backend>(req);
    } catch (const parenchyma::error& e) {
      std::printf("skipped %s: %s\n", req.c_str(), e.what());
      continue;
    }
    f(*b);
    ++ran;
  }
  return ran;
}

} // namespace bench
