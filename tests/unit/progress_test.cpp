// The core's progress_line (core/src/progress.hpp): silent for its delay, then one updating line
// that is erased at the end; quiet when the descriptor is not a terminal unless
// PARENCHYMA_PROGRESS=1; off with =0.
#include "support/catch.hpp"
#include "support/pipe_capture.hpp"

#include "progress.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;
using parenchyma::detail::progress_line;

using pcy_test::captured;

struct scoped_env {
  explicit scoped_env(const char* value) {
    if (value)
      setenv("PARENCHYMA_PROGRESS", value, 1);
    else
      unsetenv("PARENCHYMA_PROGRESS");
  }
  ~scoped_env() { unsetenv("PARENCHYMA_PROGRESS"); }
};

} // namespace

TEST_CASE("progress_line: a slow step shows one line that updates, then erases it", "[core]") {
  scoped_env forced("1");
  const std::string out = captured([](int fd) {
    progress_line p("compiling kernels", 50ms, fd);
    CHECK(p.active());
    std::this_thread::sleep_for(400ms);
    p.update("linking");
    std::this_thread::sleep_for(400ms);
  });
  INFO(out);
  CHECK(out.find("\r[parenchyma] compiling kernels 0 s") != std::string::npos);
  CHECK(out.find("\r[parenchyma] linking") != std::string::npos);
  CHECK(out.find('\n') == std::string::npos); // one line, never a new one
  // The end erases what was shown: a carriage return, blanks, a carriage return.
  REQUIRE(out.size() >= 2);
  CHECK(out.back() == '\r');
  const size_t last = out.rfind('\r', out.size() - 2);
  REQUIRE(last != std::string::npos);
  CHECK(out.find_first_not_of(' ', last + 1) == out.size() - 1);
}

TEST_CASE("progress_line: a step shorter than the delay shows nothing", "[core]") {
  scoped_env forced("1");
  const std::string out = captured([](int fd) {
    progress_line p("quick", 2000ms, fd);
    std::this_thread::sleep_for(20ms);
  });
  CHECK(out.empty());
}

TEST_CASE("progress_line: quiet off a terminal, and with PARENCHYMA_PROGRESS=0", "[core]") {
  for (const char* v : {static_cast<const char*>(nullptr), "0"}) {
    scoped_env env(v);
    const std::string out = captured([](int fd) {
      progress_line p("not shown", 0ms, fd);
      CHECK_FALSE(p.active()); // a pipe is no terminal; no thread was started
      std::this_thread::sleep_for(50ms);
      p.erase();
    });
    CHECK(out.empty());
  }
}

TEST_CASE("kernels_in names what a program compiles, for a progress step", "[sdk]") {
  using parenchyma::sdk::kernels_in;
  CHECK(kernels_in("__kernel void axpy(int n) {}") == "axpy");
  CHECK(kernels_in("kernel void a(int n) {}\nkernel  void  b (int n) {}\n") ==
        "a (and 1 more kernel)");
  CHECK(kernels_in("__kernel void f(){}\n__kernel void g(){}\n__kernel void h(){}") ==
        "f (and 2 more kernels)");
  // CUDA C, past __launch_bounds__(...); a name pasted by a macro is not shown.
  CHECK(kernels_in("extern \"C\" __global__ void __launch_bounds__(256, 2) gemv_t(int n) {}") ==
        "gemv_t");
  CHECK(kernels_in("#define K(N) extern \"C\" __global__ void N##_fwd(int n) {}\nK(relu)\n") ==
        "a program of 1 kernel");
  // Words that only contain the tags are not kernels.
  CHECK(kernels_in("int my_kernel(int); void kernelish(void);") == "a program");
  CHECK(kernels_in("") == "a program");
}
