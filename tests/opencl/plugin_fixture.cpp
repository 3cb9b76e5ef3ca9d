// Plugin-level test support (see plugin_fixture.hpp).
#include "plugin_fixture.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

extern char** environ;

namespace pcy_test {

size_t captured_log::count(pcy_log_level level, std::string_view needle) {
  std::lock_guard lock(mu);
  size_t n = 0;
  for (const auto& [l, text] : lines)
    if (l == level && text.find(needle) != std::string::npos) ++n;
  return n;
}

std::string captured_log::dump() {
  std::lock_guard lock(mu);
  std::string s;
  for (const auto& [l, text] : lines)
    s += std::to_string(int(l)) + ": " + text + "\n";
  return s;
}

test_host::test_host(std::optional<std::string> dir) {
  if (dir) cache_dir = *dir;
  services.struct_size = sizeof services;
  services.host_abi_major = PCY_ABI_VERSION_MAJOR;
  services.host_abi_minor = PCY_ABI_VERSION_MINOR;
  services.log_user = &log;
  services.log = [](void* user, pcy_log_level level, const char*, const char* message) {
    auto* l = static_cast<captured_log*>(user);
    std::lock_guard lock(l->mu);
    l->lines.emplace_back(level, message);
  };
  services.log_level = PCY_LOG_DEBUG;
  services.cache_dir = dir ? cache_dir.c_str() : nullptr;
  // Settings from the environment, as the core answers them without a config.
  services.setting = [](void*, const char* name) -> const char* { return std::getenv(name); };
}

const pcy_framework_api& plugin_api() {
  static const pcy_framework_api* api = [] {
    void* lib = ::dlopen(PCY_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      std::fprintf(stderr, "cannot load %s: %s\n", PCY_OPENCL_PLUGIN, ::dlerror());
      std::exit(1);
    }
    auto entry = reinterpret_cast<pcy_framework_entry_fn>(::dlsym(lib, PCY_FRAMEWORK_ENTRY_SYMBOL));
    if (entry == nullptr) {
      std::fprintf(stderr, "%s has no %s\n", PCY_OPENCL_PLUGIN, PCY_FRAMEWORK_ENTRY_SYMBOL);
      std::exit(1);
    }
    return entry();
  }();
  return *api;
}

env::env(std::optional<std::string> cache_dir)
    : h(std::make_unique<test_host>(std::move(cache_dir))), fw(&plugin_api(), &h->services) {
  const uint32_t dev = 0;
  ctx = host::make_context(fw, std::span<const uint32_t>(&dev, 1));
  q = host::make_queue(fw, ctx.get(), 0);
}

std::string fresh_dir(const std::string& tag) {
  const char* base = std::getenv("PARENCHYMA_CACHE_DIR");
  std::filesystem::path root = base && *base ? base : "/tmp";
  std::filesystem::create_directories(root);
  std::string templ = (root / ("opencl-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + templ);
  return templ;
}

std::mt19937_64& rng() {
  static std::mt19937_64 r = [] {
    const uint64_t seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
    std::printf("random seed %llu\n", static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return r;
}

std::vector<unsigned char> random_bytes(size_t n) {
  std::vector<unsigned char> v(n);
  for (auto& b : v)
    b = static_cast<unsigned char>(rng()());
  return v;
}
std::vector<float> random_floats(size_t n) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v)
    x = d(rng());
  return v;
}
std::vector<double> random_doubles(size_t n) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v)
    x = d(rng());
  return v;
}

std::string expect_error(const std::function<void()>& fn, pcy_status code,
                         std::initializer_list<std::string_view> needles) {
  try {
    fn();
  } catch (const host::abi_error& e) {
    INFO("error: " << e.what());
    if (std::getenv("PCY_TEST_SHOW_ERRORS"))
      std::printf("[error %d] %s\n", int(e.code()), e.what());
    CHECK(e.code() == code);
    CHECK(e.origin() == "opencl");
    for (auto n : needles) {
      INFO("expected in the message: " << n);
      CHECK(std::string(e.what()).find(n) != std::string::npos);
    }
    return e.what();
  }
  FAIL("expected an error with code " << int(code) << ", got success");
  return {};
}

built build(const env& e, const std::string& source, const char* options) {
  pcy_program_build_args a{};
  a.struct_size = sizeof a;
  a.context = e.ctx.get();
  a.source = source.c_str();
  a.source_size = source.size();
  a.options = options;
  host::check(e.api().program_build(&a));
  return {host::program(a.program, e.api().program_destroy), a.cache_hit};
}

host::kernel make_kernel(const env& e, pcy_program p, const char* name) {
  pcy_kernel_create_args a{};
  a.struct_size = sizeof a;
  a.program = p;
  a.name = name;
  host::check(e.api().kernel_create(&a));
  return {a.kernel, e.api().kernel_destroy};
}

void launch(const env& e, pcy_kernel k, std::initializer_list<pcy_kernel_arg> args, uint64_t global,
            uint32_t local) {
  pcy_kernel_launch_args a{};
  a.struct_size = sizeof a;
  a.queue = e.q.get();
  a.kernel = k;
  a.dims = 1;
  a.global[0] = global;
  a.local[0] = local;
  a.args = args.begin();
  a.arg_count = static_cast<uint32_t>(args.size());
  host::check(e.api().kernel_launch(&a));
}

pcy_kernel_arg mem_arg(pcy_memory m) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_MEMORY;
  a.memory = m;
  return a;
}
pcy_kernel_arg local_arg(size_t bytes) {
  pcy_kernel_arg a{};
  a.kind = PCY_ARG_LOCAL;
  a.size = bytes;
  return a;
}

std::vector<child_result> run_children(const std::vector<std::vector<std::string>>& argvs,
                                       const std::map<std::string, std::string>& extra_env) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string s = *e;
    if (!extra_env.count(s.substr(0, s.find('=')))) env_strings.push_back(s);
  }
  for (const auto& [k, v] : extra_env)
    if (v != unset_env) env_strings.push_back(k + "=" + v); // unset_env: drop the variable
  std::vector<char*> envp;
  for (auto& s : env_strings)
    envp.push_back(s.data());
  envp.push_back(nullptr);

  static std::atomic<int> counter{0};
  struct running {
    pid_t pid;
    std::string out_file;
  };
  std::vector<running> procs;
  for (const auto& args : argvs) {
    std::string self = "/proc/self/exe";
    std::vector<std::string> storage{self};
    storage.insert(storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& s : storage)
      argv.push_back(s.data());
    argv.push_back(nullptr);
    const std::string out = "/tmp/pcy-opencl-child-" + std::to_string(::getpid()) + "-" +
                            std::to_string(counter++) + ".txt";
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, self.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) throw std::runtime_error("posix_spawn failed");
    procs.push_back({pid, out});
  }
  std::vector<child_result> results;
  for (auto& p : procs) {
    int status = 0;
    ::waitpid(p.pid, &status, 0);
    child_result r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::FILE* f = std::fopen(p.out_file.c_str(), "r");
    if (f) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        r.output.append(buf, n);
      std::fclose(f);
    }
    std::remove(p.out_file.c_str());
    results.push_back(std::move(r));
  }
  return results;
}

std::string unique_source(const std::string& body) {
  std::ostringstream os;
  os << "// unique " << rng()() << "\n" << body;
  return os.str();
}

const char* axpy_source = R"CL(
__kernel void axpy(const int n, const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
)CL";

} // namespace pcy_test
