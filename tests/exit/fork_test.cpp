// Use after fork: in a child forked from a process that created the runtime, every use of what
// the parent made — an op, synchronize(), tensor host access, a new Backend from the inherited
// (global) registry — and a new Registry (it would reuse the parent's initialised drivers: a
// fresh registry's first OpenCL op hung in such a child) raises errc::unavailable naming fork
// and the fix; and the child exits without hanging, also when it destroys the inherited
// backend and tensor and runs the exit handlers (the global registry's destructor). A child
// forked before any registry existed makes its own and works. Before, its
// first op waited forever (OpenCL in queue_finish, oneDNN in libgomp). The parent waits for the
// child with a deadline, so a regression fails instead of hanging.
#include "support/catch.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace pa = parenchyma;

// A child abandons what the parent made, by design (it must not call into the parent's plugins):
// LeakSanitizer, where the test runs under it, is told not to report that at the child's exit.
namespace {
bool in_forked_child = false;
}
extern "C" __attribute__((visibility("default"))) int __lsan_is_turned_off() {
  return in_forked_child ? 1 : 0;
}

namespace {

// In the child: 1 when f raises errc::unavailable naming fork and what to do, else 0.
int refused(const char* what, const std::function<void()>& f) {
  try {
    f();
    std::fprintf(stderr, "child: %s was not refused\n", what);
  } catch (const pa::error& e) {
    const std::string m = e.what();
    if (e.code() == pa::errc::unavailable && m.find("fork") != std::string::npos &&
        m.find("spawn") != std::string::npos && m.find("only after fork()") != std::string::npos)
      return 1;
    std::fprintf(stderr, "child: %s: unexpected error: %s\n", what, m.c_str());
  } catch (...) {
    std::fprintf(stderr, "child: %s: unexpected exception\n", what);
  }
  return 0;
}

// Waits for pid at most `seconds`; kills it then. The exit status, or -1 when it hung.
int wait_for(pid_t pid, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

enum class ending { exit_handlers, quick };

void check_framework(const std::string& fw, ending how) {
  const pa::Framework* f = pa::Registry::global().find_framework(fw);
  if (f == nullptr || f->devices().empty()) {
    WARN("skipped " << fw << ": not present here");
    return;
  }
  std::optional<pa::Backend> b(std::in_place, fw);
  std::optional<pa::SharedTensor<float>> x(std::in_place, std::vector<int64_t>{4096});
  for (float& v : x->write_only())
    v = 1.0f;
  pa::blas::scal(*b, 2.0, *x); // the runtime is in use: queues, driver threads
  b->synchronize();
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    in_forked_child = true;
    int ok = 0;
    ok += refused("an op", [&] { pa::blas::scal(*b, 2.0, *x); });
    ok += refused("synchronize()", [&] { b->synchronize(); });
    ok += refused("host access", [&] { (void)x->read(); });
    ok += refused("a new Backend", [&] { pa::Backend again(fw); });
    ok += refused("a new Registry", [&] { pa::Registry r; }); // the drivers are the parent's
    // The inherited objects go away in the child without calling into the parent's plugins.
    x.reset();
    b.reset();
    const int code = ok == 5 ? 0 : 10 + ok;
    if (how == ending::quick) ::_exit(code);
    std::exit(code); // exit handlers: the global registry's destructor
  }
  const int status = wait_for(pid, 120);
  INFO(fw << ": child status " << status << " (-1: hung, killed)");
  CHECK(status == 0);
  // The parent is unaffected.
  pa::blas::scal(*b, 2.0, *x);
  CHECK(x->read()[4095] == 4.0f);
}

} // namespace

// Declared first (Catch2 runs test cases in declaration order): the process has created no
// registry yet, so a child forked now makes a runtime of its own and uses it.
TEST_CASE("a child forked before the runtime was created makes its own", "[fork]") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    try {
      pa::Backend b("native");
      pa::SharedTensor<float> x({64});
      for (float& v : x.write_only())
        v = 1.0f;
      pa::blas::scal(b, 3.0, x);
      ::_exit(x.read()[63] == 3.0f ? 0 : 4);
    } catch (const pa::error& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      ::_exit(e.code() == pa::errc::not_found || e.code() == pa::errc::unavailable ? 77 : 3);
    }
  }
  const int status = wait_for(pid, 120);
  INFO("child status " << status << " (-1: hung, killed; 77: no native backend)");
  CHECK((status == 0 || status == 77));
}

TEST_CASE("a forked child gets a clear error from every use, never a hang", "[fork]") {
  for (const char* fw : {"native", "opencl"}) {
    SECTION(std::string(fw) + ", exit handlers") { check_framework(fw, ending::exit_handlers); }
    SECTION(std::string(fw) + ", _exit") { check_framework(fw, ending::quick); }
  }
}
