// Clean exit, on OpenCL (test exit) and on Vulkan (exit_vulkan; PCY_EXIT_FRAMEWORK says which):
// many short-lived processes (exit_child) under each kernel-cache directory
// condition — missing (created on demand), a regular file, read-only, and a full disk (a small
// tmpfs) — all exit 0 with nothing on stderr from a crash or a sanitizer, and a writable
// directory always ends with one complete, valid entry per run and no temporary files. Before
// the global registry was destroyed at exit, the cache writer outlived main(), crashed the
// process at exit in some runs and left no entry in others.
#include "support/catch.hpp"
#include "support/scale.hpp"

#include <parenchyma/sdk/blob_cache.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sched.h>
#include <string>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace {

// The framework under test (PCY_EXIT_FRAMEWORK, set by CTest: opencl or vulkan); the children
// inherit it.
std::string framework() {
  const char* e = std::getenv("PCY_EXIT_FRAMEWORK");
  return e != nullptr && *e ? e : "opencl";
}

// The number of runs of a case (fewer under the sanitizers, where each child takes seconds).
int runs_of(int n) { return parenchyma::test::stress_scaled(n, 2); }

struct child_result {
  int code = -1;
  std::string err;
};

enum class as { self, nobody };

// Runs exit_child with PARENCHYMA_CACHE_DIR=cache, optionally as nobody.
child_result run_child(const fs::path& cache, const std::string& salt, as who,
                       const std::string& device = {}) {
  const fs::path err_file = fs::path(PCY_EXIT_SCRATCH) / ("stderr-" + salt);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("PARENCHYMA_CACHE_DIR", cache.c_str(), 1);
    ::unsetenv("PARENCHYMA_BACKEND");
    if (std::FILE* f = std::freopen(err_file.c_str(), "w", stderr); f == nullptr) ::_exit(91);
    if (who == as::nobody && ::geteuid() == 0) {
      // PoCL needs a cache of its own that nobody can write (the inherited one is root's).
      const std::string pocl = (fs::path(PCY_EXIT_SCRATCH) / "pocl-nobody").string();
      ::mkdir(pocl.c_str(), 0777);
      ::chmod(pocl.c_str(), 01777);
      ::setenv("POCL_CACHE_DIR", pocl.c_str(), 1);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(90);
    }
    if (device.empty())
      ::execl(PCY_EXIT_CHILD, PCY_EXIT_CHILD, salt.c_str(), static_cast<char*>(nullptr));
    else
      ::execl(PCY_EXIT_CHILD, PCY_EXIT_CHILD, salt.c_str(), device.c_str(),
              static_cast<char*>(nullptr));
    // 94: nobody may not reach the program (a build tree below a 0700 folder, as mktemp -d makes)
    ::_exit(who == as::nobody && errno == EACCES ? 94 : 93);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  child_result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream in(err_file);
  r.err.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove(err_file, ec);
  return r;
}

bool crashed_output(const std::string& err) {
  for (const char* bad :
       {"Sanitizer", "Segmentation", "terminate called", "Aborted", "core dumped", "runtime error"})
    if (err.find(bad) != std::string::npos) return true;
  return false;
}

// The entries in <cache>/<framework>: every one must verify, and no temporary may be left.
struct cache_census {
  size_t valid = 0, invalid = 0, temporaries = 0;
};
cache_census census(const fs::path& cache) {
  cache_census c;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(cache / framework(), ec)) {
    const std::string name = f.path().filename().string();
    if (name.find(".tmp.") != std::string::npos) {
      ++c.temporaries;
      continue;
    }
    using cache_t = parenchyma::sdk::blob_cache;
    if (name.size() != 64 + cache_t::entry_suffix.size()) continue;
    cache_t::key_type key{};
    for (size_t i = 0; i < key.size(); ++i)
      key[i] = static_cast<unsigned char>(std::stoi(name.substr(2 * i, 2), nullptr, 16));
    std::ifstream in(f.path(), std::ios::binary);
    std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                     std::istreambuf_iterator<char>());
    std::string why;
    if (cache_t::verify(bytes, framework().c_str(), key, why))
      ++c.valid;
    else
      ++c.invalid;
  }
  return c;
}

std::string salt_base() { return std::to_string(std::random_device{}()) + "-"; }

class scratch {
public:
  explicit scratch(const char* tag) {
    fs::create_directories(PCY_EXIT_SCRATCH);
    std::string t = (fs::path(PCY_EXIT_SCRATCH) / (std::string(tag) + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path_ = t;
    ::chmod(path_.c_str(), 0755);
  }
  ~scratch() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

private:
  fs::path path_;
};

#define SKIP_WITHOUT_OPENCL(r)                                                                     \
  if ((r).code == 77) {                                                                            \
    WARN("skipped: no " << framework() << " device here");                                         \
    return;                                                                                        \
  }

} // namespace

TEST_CASE("short-lived processes with a writable cache exit 0 and always leave their entry") {
  scratch s("writable");
  const fs::path cache = s.path() / "not" / "yet" / "there";
  const std::string base = salt_base();
  const int runs = runs_of(10);
  for (int i = 0; i < runs; ++i) {
    const auto r = run_child(cache, base + std::to_string(i), as::self);
    SKIP_WITHOUT_OPENCL(r);
    INFO("run " << i << " stderr:\n" << r.err);
    REQUIRE(r.code == 0);
    CHECK_FALSE(crashed_output(r.err));
  }
  const auto c = census(cache);
  CHECK(c.invalid == 0);
  CHECK(c.temporaries == 0);
  // One entry per unique user kernel, plus the BLAS bundle's programs (the same every run).
  CHECK(c.valid >= static_cast<size_t>(runs));
}

TEST_CASE("a cache path that is a regular file: every run exits 0") {
  scratch s("file");
  const fs::path cache = s.path() / "cache";
  std::ofstream(cache) << "not a directory\n";
  const std::string base = salt_base();
  for (int i = 0; i < runs_of(5); ++i) {
    const auto r = run_child(cache, base + std::to_string(i), as::self);
    SKIP_WITHOUT_OPENCL(r);
    INFO("stderr:\n" << r.err);
    CHECK(r.code == 0);
    CHECK_FALSE(crashed_output(r.err));
  }
}

TEST_CASE("a read-only cache directory: every run exits 0 and writes nothing") {
  scratch s("readonly");
  const fs::path cache = s.path() / "cache";
  fs::create_directories(cache / framework());
  // As root permissions do not stop writes: the children then run as nobody, for whom this
  // root-owned 0755 directory is read-only. Otherwise it is made read-only for us.
  const bool root = ::geteuid() == 0;
  if (!root) {
    ::chmod((cache / framework()).c_str(), 0555);
    ::chmod(cache.c_str(), 0555);
  }
  const std::string base = salt_base();
  for (int i = 0; i < runs_of(5); ++i) {
    const auto r = run_child(cache, base + std::to_string(i), as::nobody);
    SKIP_WITHOUT_OPENCL(r);
    if (r.code == 94) {
      WARN("skipped: user nobody cannot reach " << PCY_EXIT_CHILD
                                                << " (a folder above it is not searchable by "
                                                   "others); build in a world-searchable path");
      ::chmod(cache.c_str(), 0755);
      return;
    }
    INFO("stderr:\n" << r.err);
    CHECK(r.code == 0);
    CHECK_FALSE(crashed_output(r.err));
  }
  ::chmod(cache.c_str(), 0755);
  ::chmod((cache / framework()).c_str(), 0755);
  const auto c = census(cache);
  CHECK(c.valid + c.invalid + c.temporaries == 0);
}

TEST_CASE("a full disk: every run exits 0 and leaves no partial file") {
  // A real full file system: a small tmpfs in a mount namespace of this process (so nothing
  // outlives the test), filled up to a few KiB. Mounting needs root (or a user namespace).
  scratch s("full");
  const fs::path mnt = s.path() / "disk";
  fs::create_directories(mnt);
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k,mode=0755") != 0) {
    WARN("skipped: cannot mount a small tmpfs here (" << std::strerror(errno)
                                                      << "); the SDK cache test covers ENOSPC");
    return;
  }
  {
    std::ofstream fill(mnt / "filler", std::ios::binary);
    const std::string chunk(4096, 'x');
    while (fill.write(chunk.data(), chunk.size()))
      ;
  }
  std::error_code ec;
  fs::resize_file(mnt / "filler", fs::file_size(mnt / "filler", ec) - 4096, ec);
  const fs::path cache = mnt / "cache";
  const std::string base = salt_base();
  for (int i = 0; i < runs_of(5); ++i) {
    const auto r = run_child(cache, base + std::to_string(i), as::self);
    if (r.code == 77) {
      ::umount2(mnt.c_str(), MNT_DETACH);
      WARN("skipped: no " << framework() << " device here");
      return;
    }
    INFO("stderr:\n" << r.err);
    CHECK(r.code == 0);
    CHECK_FALSE(crashed_output(r.err));
  }
  const auto c = census(cache);
  CHECK(c.invalid == 0);
  CHECK(c.temporaries == 0);
  ::umount2(mnt.c_str(), MNT_DETACH);
}

TEST_CASE("a short-lived process on every device of the framework exits 0 after a first build") {
  // The user kernel is new to the driver too (its source is unique), so the driver compiles it
  // as main returns. With the binaries once fetched on the cache's thread, PoCL 5 generated code
  // in LLVM while exit() ran LLVM's static destructors: a crash at exit in every run on the H200
  // machine (PoCL device beside NVIDIA's), not on the default device there (the GPU).
  // The child counts the devices: this process loads no driver before it forks (NVIDIA's OpenCL
  // held by a parent left the GPU out of its children's device lists on the H200).
  scratch s("every-device");
  const auto count = run_child(s.path() / "cache", salt_base() + "count", as::self, "count");
  INFO("counting child stderr:\n" << count.err);
  REQUIRE(count.code >= 64);
  REQUIRE(count.code <= 64 + 32);
  const int devices = count.code - 64;
  if (devices == 0) {
    WARN("skipped: no " << framework() << " device here");
    return;
  }
  const std::string base = salt_base();
  for (int d = 0; d < devices; ++d)
    for (int i = 0; i < runs_of(3); ++i) {
      const auto r =
          run_child(s.path() / "cache", base + "d" + std::to_string(d) + "-" + std::to_string(i),
                    as::self, std::to_string(d));
      INFO("device " << d << " run " << i << " stderr:\n" << r.err);
      REQUIRE(r.code == 0);
      CHECK_FALSE(crashed_output(r.err));
    }
}
