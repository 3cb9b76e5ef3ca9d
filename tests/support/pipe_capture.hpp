// What a piece of work wrote into a pipe: for tests of output on a descriptor (progress lines).
#pragma once

#include "support/catch.hpp"

#include <fcntl.h>
#if defined(_WIN32)
#include <io.h>
#else
#include <unistd.h>
#endif

#include <string>

namespace pcy_test {

// Runs work(fd) with fd the write end of a fresh pipe, then returns what was written (the read
// end does not block: work must be done writing when it returns).
template <class F> std::string captured(F work) {
  int fds[2];
  std::string out;
  char buf[4096];
#if defined(_WIN32)
  // No O_NONBLOCK on Windows: a pipe of 1 MiB holds what the work writes, and reading stops at
  // the end of file once the write end is closed.
  REQUIRE(::_pipe(fds, 1 << 20, _O_BINARY) == 0);
  work(fds[1]);
  ::_close(fds[1]);
  for (int n; (n = ::_read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::_close(fds[0]);
#else
  REQUIRE(pipe(fds) == 0);
  REQUIRE(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
  work(fds[1]);
  close(fds[1]);
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
#endif
  return out;
}

} // namespace pcy_test
