// Loader test: PARENCHYMA_* environment overrides are ignored in a set-uid process.
//
// Run as root, the test copies its own binary into a scratch directory, makes the copy set-uid
// (owner "daemon"), and runs it as "nobody" with PARENCHYMA_PLUGIN_PATH, PARENCHYMA_BACKEND and
// PARENCHYMA_CONFIG set. The child (a real set-uid process reading the real environment) must see
// none of them. A control run of the same copy without the set-uid bit must see all of them, so
// a pass cannot come from an unreadable plugin directory. Not root, a nosuid mount or
// no_new_privs: exit 77 with the reason.
#include "loader/testing.hpp"

#include <parenchyma/parenchyma.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <pwd.h>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace pcy_test;

namespace {

constexpr int skipped = 77;

// In the child: what the registry made of the real environment.
int child(bool expect_setuid) {
  const bool is_setuid = ::getuid() != ::geteuid();
  if (is_setuid != expect_setuid) {
    std::cout << "CHILD-NOT-SETUID: uid " << ::getuid() << " euid " << ::geteuid()
              << " (nosuid mount or no_new_privs?)\n";
    return 3;
  }
  const fs::path plugin = stub_dir("good") / "parenchyma-stub" PCY_TEST_SO;
  if (std::FILE* f = std::fopen(plugin.c_str(), "rb")) {
    std::fclose(f);
  } else {
    std::cout << "CHILD-CANNOT-READ: " << plugin << " is not readable by uid " << ::geteuid()
              << "\n";
    return 4;
  }
  parenchyma::RegistryOptions o;
  o.default_plugin_dir = false;
  o.default_config = false; // PARENCHYMA_CONFIG would still be read if it were honoured
  // o.environment stays nullopt: the real environment, as a real program sees it.
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) {
      std::cout << "CHILD-FAIL: " << what << "\n";
      ++failures;
    }
  };
  try {
    parenchyma::Registry r(o);
    const bool sees_backend = r.env("PARENCHYMA_BACKEND").has_value();
    const bool found_stub = r.find_framework("stub") != nullptr;
    bool read_config = false;
    for (const auto& s : r.config().sources)
      read_config = read_config || s.find("setuid.json") != std::string::npos;
    if (expect_setuid) {
      expect(!sees_backend, "env(PARENCHYMA_BACKEND) is visible in a set-uid process");
      expect(!r.env("PARENCHYMA_PLUGIN_PATH").has_value(),
             "env(PARENCHYMA_PLUGIN_PATH) is visible in a set-uid process");
      expect(!found_stub, "a plugin was loaded from PARENCHYMA_PLUGIN_PATH in a set-uid process");
      expect(!read_config, "the PARENCHYMA_CONFIG file was read in a set-uid process");
      for (const auto& p : r.search_path())
        expect(p != stub_dir("good"), "PARENCHYMA_PLUGIN_PATH is in the search path");
    } else {
      expect(sees_backend, "env(PARENCHYMA_BACKEND) is not visible in a normal process");
      expect(read_config, "PARENCHYMA_CONFIG was not read in a normal process");
      expect(found_stub,
             "PARENCHYMA_PLUGIN_PATH was not honoured in a normal process:\n" + describe(r));
    }
  } catch (const std::exception& e) {
    expect(false, std::string("unexpected error: ") + e.what());
  }
  if (failures == 0) std::cout << "CHILD-OK\n";
  return failures == 0 ? 0 : 1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct run_result {
  int code;
  std::string output;
};

run_result run_as_nobody(const fs::path& binary, const char* mode, const fs::path& out,
                         const fs::path& config) {
  const std::string cmd = "setpriv --reuid=65534 --regid=65534 --clear-groups env -i"
                          " PARENCHYMA_PLUGIN_PATH='" +
                          stub_dir("good").string() +
                          "'"
                          " PARENCHYMA_BACKEND=stub PARENCHYMA_CONFIG='" +
                          config.string() + "' '" + binary.string() + "' " + mode + " > '" +
                          out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, slurp(out)};
}

} // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") {
    // A set-uid process is not dumpable, so LeakSanitizer's exit-time check (which needs to
    // stop the world) cannot run in it: leave without the exit handlers.
    const int code = child(true);
    std::cout.flush();
    std::fflush(nullptr);
    std::_Exit(code);
  }
  if (argc > 1 && std::string(argv[1]) == "--control") return child(false);

  // A cross build's tests run under qemu-user: the set-uid copy would run inside the emulator
  // (not itself set-uid), so the kernel's secure-execution mode this test is about never starts.
  if (const char* emulator = std::getenv("PARENCHYMA_TEST_EMULATOR");
      emulator != nullptr && *emulator != '\0') {
    std::cout << "SKIPPED: loader_setuid: set-uid execution cannot be tested under an emulator ("
              << emulator << " runs the program; the kernel never executes the set-uid copy)\n";
    return skipped;
  }
  if (::geteuid() != 0) {
    std::cout << "SKIPPED: loader_setuid: needs root to make a set-uid copy of itself (euid "
              << ::geteuid() << ")\n";
    return skipped;
  }
  if (std::system("command -v setpriv > /dev/null 2>&1") != 0) {
    std::cout << "SKIPPED: loader_setuid: setpriv (util-linux) is not installed\n";
    return skipped;
  }
  scratch_dir dir("setuid");
  const fs::path copy = dir / "test_loader_setuid_copy";
  fs::copy_file("/proc/self/exe", copy);
  const fs::path config = dir.write("setuid.json", R"({"log_level": "error"})");
  const fs::path out = dir / "out.txt"; // written by the shell, as root, before setpriv
  ::chmod(config.c_str(), 0644);

  // Control: no set-uid bit; the environment must be honoured.
  ::chmod(copy.c_str(), 0755);
  const run_result control = run_as_nobody(copy, "--control", out, config);
  if (control.code != 0) {
    std::cout << "SKIPPED: loader_setuid: the unprivileged control run did not work here (exit "
              << control.code << "), so a set-uid run would prove nothing:\n"
              << control.output;
    return skipped;
  }

  // The real run: set-uid to daemon (not root: least privilege), run by nobody.
  const passwd* owner = ::getpwnam("daemon");
  const uid_t uid = owner != nullptr ? owner->pw_uid : 0;
  const gid_t gid = owner != nullptr ? owner->pw_gid : 0;
  if (::chown(copy.c_str(), uid, gid) != 0 || ::chmod(copy.c_str(), 04755) != 0) {
    std::cout << "SKIPPED: loader_setuid: could not make " << copy << " set-uid\n";
    return skipped;
  }
  const run_result r = run_as_nobody(copy, "--child", out, config);
  ::chmod(copy.c_str(), 0600); // never leave a set-uid binary behind, even briefly
  if (r.code == 3 || r.output.find("CHILD-NOT-SETUID") != std::string::npos) {
    std::cout << "SKIPPED: loader_setuid: the set-uid bit had no effect here (nosuid mount or "
                 "no_new_privs): "
              << r.output;
    return skipped;
  }
  if (r.code == 4) {
    std::cout << "SKIPPED: loader_setuid: " << r.output;
    return skipped;
  }
  std::cout << "control run:\n" << control.output << "set-uid run:\n" << r.output;
  if (r.code != 0 || r.output.find("CHILD-OK") == std::string::npos) {
    std::cout << "FAILED: the set-uid child exited " << r.code << "\n";
    return 1;
  }
  std::cout << "PASSED: environment overrides are ignored in a set-uid process\n";
  return 0;
}
