// Shared helpers for the loader, unit and conformance tests: where the stub plugin variants and
// the in-tree plugins live, isolated Registry options, scratch directories and random data.
// Every test builds its own Registry from these, so tests never share state and `ctest -j` works.
#pragma once

#include <parenchyma/parenchyma.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#ifndef PCY_TEST_STUBS
#error "PCY_TEST_STUBS (the stub variants' root directory) must be defined by CMake"
#endif
#ifndef PCY_TEST_SCRATCH
#error "PCY_TEST_SCRATCH (a scratch directory inside the build tree) must be defined by CMake"
#endif
#ifndef PCY_TEST_PLUGIN_DIR
#define PCY_TEST_PLUGIN_DIR ""
#endif
#ifndef PCY_TEST_NATIVE_PLUGIN
#define PCY_TEST_NATIVE_PLUGIN ""
#endif

// A plugin file's ending on this system: "parenchyma-stub" PCY_TEST_SO.
// The separator of PARENCHYMA_PLUGIN_PATH: ":" (";" on Windows).
#if defined(_WIN32)
#define PCY_TEST_SO ".dll"
#define PCY_TEST_PATH_SEP ";"
#else
#define PCY_TEST_SO ".so"
#define PCY_TEST_PATH_SEP ":"
#endif

namespace pcy_test {

namespace fs = std::filesystem;

// The directory holding one stub variant (see tests/loader/CMakeLists.txt for the list).
inline fs::path stub_dir(std::string_view variant) { return fs::path(PCY_TEST_STUBS) / variant; }

// The in-tree native plugin file (empty when the build has none).
inline fs::path native_plugin() { return fs::path(PCY_TEST_NATIVE_PLUGIN); }

// Options that see exactly `paths`, no default directory or config, and an empty environment.
inline parenchyma::RegistryOptions isolated(std::vector<fs::path> paths,
                                            std::map<std::string, std::string> env = {}) {
  parenchyma::RegistryOptions o;
  o.plugin_paths = std::move(paths);
  o.default_plugin_dir = false;
  o.default_config = false;
  o.environment = std::move(env);
  return o;
}

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}
inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}
inline bool icontains(const std::string& haystack, std::string_view needle) {
  return lower(haystack).find(lower(std::string(needle))) != std::string::npos;
}

// The report entry for a file whose name is `file_name` inside `dir` (nullptr if none).
inline const parenchyma::LoadReportEntry* entry_for(const parenchyma::Registry& r,
                                                    const fs::path& file) {
  for (const auto& e : r.load_report()) {
    std::error_code ec;
    // lexically: "dir\\name" and "dir/name" are one path on Windows (where fs::equivalent of
    // libstdc++ 12 cannot tell).
    if (e.path == file.string() || fs::path(e.path).lexically_normal() == file.lexically_normal() ||
        fs::equivalent(fs::path(e.path), file, ec))
      return &e;
  }
  return nullptr;
}

inline std::string describe(const parenchyma::Registry& r) {
  std::ostringstream os;
  for (const auto& e : r.load_report())
    os << "  [" << e.status << " @" << e.stage << "] " << e.name << " (" << e.kind << ") " << e.path
       << ": " << e.reason << " | advice: " << e.advice << "\n";
  return os.str();
}

// A unique directory under the build tree's scratch area, removed with its contents at the end.
// (Under the build tree, not /tmp: /tmp itself is writable by others.)
class scratch_dir {
public:
  explicit scratch_dir(std::string_view tag) {
    fs::create_directories(PCY_TEST_SCRATCH);
    // A name nobody else has (as mkdtemp makes, which Windows lacks): create_directory is false
    // for one that exists, and another random name is tried.
    std::random_device rd;
    for (int attempt = 0;; ++attempt) {
      std::ostringstream name;
      name << tag << '-' << std::hex << rd() << rd();
      fs::path p = fs::path(PCY_TEST_SCRATCH) / name.str();
      if (fs::create_directory(p)) {
        path_ = std::move(p);
        break;
      }
      if (attempt == 100)
        throw std::runtime_error("no fresh scratch directory under " +
                                 std::string(PCY_TEST_SCRATCH));
    }
    fs::permissions(path_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                               fs::perms::others_read | fs::perms::others_exec);
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  const fs::path& path() const noexcept { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

  fs::path write(std::string_view name, std::string_view text) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }

private:
  fs::path path_;
};

// Fresh random data on every run; the seed is printed by Catch on failure through INFO.
// One generator per thread: tests call this from several threads at once.
inline std::mt19937_64& rng() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return gen;
}
template <class T> std::vector<T> random_values(size_t n, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v)
    x = static_cast<T>(d(rng()));
  return v;
}
inline std::vector<unsigned char> random_bytes(size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<unsigned char> v(n);
  for (auto& x : v)
    x = static_cast<unsigned char>(d(rng()));
  return v;
}

// Sets or removes a variable of the process environment (Windows: _putenv_s, where an empty
// value removes it).
inline void set_env(const char* name, const char* value) {
#if defined(_WIN32)
  ::_putenv_s(name, value);
#else
  ::setenv(name, value, 1);
#endif
}
inline void unset_env(const char* name) {
#if defined(_WIN32)
  ::_putenv_s(name, "");
#else
  ::unsetenv(name);
#endif
}

// Runs f and returns the parenchyma::error it throws; fails the test if it throws nothing else.
template <class F> parenchyma::error catch_error(F&& f) {
  try {
    f();
  } catch (const parenchyma::error& e) {
    return e;
  }
  throw std::runtime_error("expected a parenchyma::error, but the call succeeded");
}

} // namespace pcy_test
