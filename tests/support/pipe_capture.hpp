// What a piece of work wrote into a pipe: for tests of output on a descriptor (progress lines).
#pragma once

#include "support/catch.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <string>

namespace pcy_test {

// Runs work(fd) with fd the write end of a fresh pipe, then returns what was written (the read
// end does not block: work must be done writing when it returns).
template <class F> std::string captured(F work) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  REQUIRE(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
  work(fds[1]);
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  return out;
}

} // namespace pcy_test
