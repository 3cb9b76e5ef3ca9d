// OpenCL plugin programs and kernels: builds, launches with buffers, scalars and local memory
// (f32 and f64 against double-precision references), bad input (build errors with the log,
// missing kernels, wrong arguments, refused work sizes), and the on-disk binary cache as the
// plugin uses it (the SDK's blob_cache: hit, miss, corrupted/truncated/rejected entries,
// concurrent builders, unwritable directory; the cache itself is tested in tests/sdk).
#include "plugin_fixture.hpp"
#include "support/scale.hpp"

#include <parenchyma/sdk/blob_cache.hpp>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

using namespace pcy_test;
namespace fs = std::filesystem;
using parenchyma::sdk::blob_cache;
using parenchyma::sdk::sha256;

namespace {

const char* kernels_source = R"CL(
__kernel void axpy(const int n, const float a, __global const float* x, __global float* y) {
  const int i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i];
}
// One partial sum per work-group, through local memory.
__kernel void block_sum(const int n, __global const float* x, __global float* out,
                        __local float* scratch) {
  const int i = get_global_id(0), l = get_local_id(0), g = get_local_size(0);
  scratch[l] = i < n ? x[i] : 0.0f;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = g / 2; s > 0; s >>= 1) {
    if (l < s) scratch[l] += scratch[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (l == 0) out[get_group_id(0)] = scratch[0];
}
)CL";

const char* double_source = R"CL(
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
__kernel void scale_add(const long n, const double a, __global const double* x,
                        __global double* y) {
  const long i = get_global_id(0);
  if (i < n) y[i] = a * x[i] + y[i] * 0.5;
}
)CL";

constexpr std::string_view entry_suffix = blob_cache::entry_suffix;

std::vector<fs::path> entries(const fs::path& dir, std::string_view suffix) {
  std::vector<fs::path> v;
  if (!fs::exists(dir)) return v;
  for (const auto& f : fs::directory_iterator(dir))
    if (f.path().string().find(suffix) != std::string::npos) v.push_back(f.path());
  return v;
}

// Runs axpy through the plugin on fresh data; CHECKs the result against a double reference.
void check_axpy(const env& e, pcy_program p, int n, uint32_t local) {
  auto k = make_kernel(e, p, "axpy");
  const float a = 1.75f;
  auto x = random_floats(n), y = random_floats(n);
  auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
  auto my = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
  host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(float));
  host::write(e.fw, e.q.get(), my.get(), 0, y.data(), n * sizeof(float));
  launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, n,
         local);
  std::vector<float> out(n);
  host::read(e.fw, e.q.get(), my.get(), 0, out.data(), n * sizeof(float));
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const double want = double(a) * double(x[i]) + double(y[i]);
    if (std::abs(double(out[i]) - want) > 1e-6 * (1 + std::abs(want)) && bad++ < 5)
      FAIL_CHECK("axpy[" << i << "] = " << out[i] << ", want " << want);
  }
  CHECK(bad == 0);
}

fs::path cache_entry(const fs::path& cache_root) {
  auto v = entries(cache_root / "opencl", entry_suffix);
  REQUIRE(v.size() == 1);
  return v.front();
}

} // namespace

TEST_CASE("kernels run with buffers, scalars and awkward sizes", "[opencl][kernels]") {
  env e;
  auto b = build(e, kernels_source);
  CHECK_FALSE(b.cache_hit); // no cache directory given
  for (int n : {1, 7, 1000, 100003}) {
    INFO("n " << n);
    check_axpy(e, b.program.get(), n, 0);
    check_axpy(e, b.program.get(), n, 64); // global rounded up to whole groups
  }
}

TEST_CASE("local memory arguments", "[opencl][kernels]") {
  env e;
  auto b = build(e, kernels_source);
  auto k = make_kernel(e, b.program.get(), "block_sum");
  const int n = 5000, group = 64, groups = (n + group - 1) / group;
  auto x = random_floats(n);
  auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
  auto mo = host::alloc(e.fw, e.ctx.get(), 0, groups * sizeof(float));
  host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(float));
  launch(e, k.get(),
         {scalar_arg(n), mem_arg(mx.get()), mem_arg(mo.get()), local_arg(group * sizeof(float))}, n,
         group);
  std::vector<float> out(groups);
  host::read(e.fw, e.q.get(), mo.get(), 0, out.data(), groups * sizeof(float));
  for (int g = 0; g < groups; ++g) {
    double want = 0;
    for (int i = g * group; i < std::min(n, (g + 1) * group); ++i)
      want += x[i];
    CHECK(std::abs(out[g] - want) < 1e-4);
  }
}

TEST_CASE("double precision kernels where the device has fp64", "[opencl][kernels]") {
  env e;
  bool fp64 = false;
  for (const auto& p : e.fw.properties(0))
    if (std::string_view(p.key) == "fp64") fp64 = p.i != 0;
  if (!fp64) {
    SUCCEED("device has no fp64");
    return;
  }
  auto b = build(e, double_source);
  auto k = make_kernel(e, b.program.get(), "scale_add");
  const int64_t n = 77777;
  const double a = -0.3;
  auto x = random_doubles(n), y = random_doubles(n);
  auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(double));
  auto my = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(double));
  host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(double));
  host::write(e.fw, e.q.get(), my.get(), 0, y.data(), n * sizeof(double));
  launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, n, 32);
  std::vector<double> out(n);
  host::read(e.fw, e.q.get(), my.get(), 0, out.data(), n * sizeof(double));
  int bad = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::abs(out[i] - (a * x[i] + y[i] * 0.5)) > 1e-14) ++bad;
  CHECK(bad == 0);
}

TEST_CASE("bad programs and launches fail clearly and the context keeps working",
          "[opencl][kernels][bad-input]") {
  env e;
  // A source that does not compile: BUILD with the compiler's log.
  const std::string broken =
      "__kernel void broken(__global float* y) { y[0] = undeclared_thing + 1; }\n";
  const auto msg =
      expect_error([&] { build(e, broken); }, PCY_ERR_BUILD,
                   {"clBuildProgram", "CL_BUILD_PROGRAM_FAILURE", "undeclared_thing", "build log"});
  // Bad build options.
  expect_error([&] { build(e, kernels_source, "-this-is-not-an-option"); }, PCY_ERR_BUILD,
               {"-this-is-not-an-option"});

  auto b = build(e, kernels_source);
  // A kernel name the program lacks: NOT_FOUND naming it and listing what exists.
  expect_error([&] { make_kernel(e, b.program.get(), "axpz"); }, PCY_ERR_NOT_FOUND,
               {"'axpz'", "axpy", "block_sum"});

  auto k = make_kernel(e, b.program.get(), "axpy");
  const int n = 100;
  const float a = 2.0f;
  auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
  auto my = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
  // Wrong argument count.
  expect_error(
      [&] {
        launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get())}, n);
      },
      PCY_ERR_INVALID_ARGUMENT, {"kernel 'axpy' takes 4 arguments, got 3"});
  // Wrong argument type: a scalar where a buffer goes, a buffer where a scalar goes.
  expect_error(
      [&] {
        launch(e, k.get(), {scalar_arg(n), scalar_arg(a), scalar_arg(n), mem_arg(my.get())}, n);
      },
      PCY_ERR_INVALID_ARGUMENT, {"argument 2 of kernel 'axpy'"});
  expect_error(
      [&] {
        launch(e, k.get(), {mem_arg(mx.get()), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())},
               n);
      },
      PCY_ERR_INVALID_ARGUMENT, {"argument 0 of kernel 'axpy'"});
  // A scalar of the wrong size.
  const double wide = 2.0;
  expect_error(
      [&] {
        launch(e, k.get(), {scalar_arg(n), scalar_arg(wide), mem_arg(mx.get()), mem_arg(my.get())},
               n);
      },
      PCY_ERR_INVALID_ARGUMENT, {"argument 1 of kernel 'axpy'"});
  // A work-group size the device refuses.
  int64_t max_group = 0;
  for (const auto& p : e.fw.properties(0))
    if (std::string_view(p.key) == "max_work_group") max_group = p.i;
  const auto big = static_cast<uint32_t>(max_group * 2);
  expect_error(
      [&] {
        launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())},
               big * 2, big);
      },
      PCY_ERR_LAUNCH, {"clEnqueueNDRangeKernel", "CL_INVALID_WORK_", "local size"});
  // Mixed zero / non-zero local sizes.
  {
    pcy_kernel_arg args[] = {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())};
    pcy_kernel_launch_args la{};
    la.struct_size = sizeof la;
    la.queue = e.q.get();
    la.kernel = k.get();
    la.dims = 2;
    la.global[0] = la.global[1] = 10;
    la.local[0] = 2;
    la.args = args;
    la.arg_count = 4;
    expect_error([&] { host::check(e.api().kernel_launch(&la)); }, PCY_ERR_INVALID_ARGUMENT,
                 {"all 0"});
    la.dims = 4;
    expect_error([&] { host::check(e.api().kernel_launch(&la)); }, PCY_ERR_INVALID_ARGUMENT,
                 {"dimensions"});
  }
  // After all that, the same kernel still runs correctly (argument cache not poisoned).
  check_axpy(e, b.program.get(), n, 0);
  auto x = random_floats(n), y = random_floats(n);
  host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(float));
  host::write(e.fw, e.q.get(), my.get(), 0, y.data(), n * sizeof(float));
  launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, n);
  std::vector<float> out(n);
  host::read(e.fw, e.q.get(), my.get(), 0, out.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i)
    CHECK(std::abs(out[i] - (double(a) * x[i] + y[i])) <= 1e-6 * (1 + std::abs(double(out[i]))));
}

TEST_CASE("kernel arguments follow buffers freed and reallocated", "[opencl][kernels]") {
  // The argument cache must not confuse a new buffer with a freed one at the same address.
  env e;
  auto b = build(e, kernels_source);
  auto k = make_kernel(e, b.program.get(), "axpy");
  const int n = 512;
  const float a = 3.0f;
  for (int round = 0; round < 20; ++round) {
    auto x = random_floats(n), y = random_floats(n);
    auto mx = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
    auto my = host::alloc(e.fw, e.ctx.get(), 0, n * sizeof(float));
    host::write(e.fw, e.q.get(), mx.get(), 0, x.data(), n * sizeof(float));
    host::write(e.fw, e.q.get(), my.get(), 0, y.data(), n * sizeof(float));
    launch(e, k.get(), {scalar_arg(n), scalar_arg(a), mem_arg(mx.get()), mem_arg(my.get())}, n);
    std::vector<float> out(n);
    host::read(e.fw, e.q.get(), my.get(), 0, out.data(), n * sizeof(float));
    int bad = 0;
    for (int i = 0; i < n; ++i)
      if (std::abs(out[i] - (double(a) * x[i] + y[i])) > 1e-5) ++bad;
    REQUIRE(bad == 0);
  }
}

TEST_CASE("the program cache: miss, hit, and damaged entries rebuilt", "[opencl][cache]") {
  const fs::path root = fresh_dir("cache");
  const std::string source = unique_source(kernels_source);
  {
    env e(root.string());
    auto first = build(e, source);
    CHECK_FALSE(first.cache_hit);
    check_axpy(e, first.program.get(), 1000, 0);
    // The entry is written in the background; a build of the same key waits for it.
    auto second = build(e, source);
    CHECK(second.cache_hit);
    check_axpy(e, second.program.get(), 1000, 16);
    const auto entry = cache_entry(root);
    CHECK(entries(root / "opencl", ".tmp").empty());
    // Other options are another program.
    auto other = build(e, source, "-cl-fast-relaxed-math");
    CHECK_FALSE(other.cache_hit);
  }
  // A fresh plugin instance (as another process would) hits too.
  {
    env e(root.string());
    auto again = build(e, source);
    CHECK(again.cache_hit);
    check_axpy(e, again.program.get(), 333, 0);
  }
  SECTION("a corrupted entry is detected, not loaded, and rebuilt") {
    env e(root.string());
    auto probe = build(e, source, "-DVARIANT=1");
    CHECK_FALSE(probe.cache_hit);
    CHECK(build(e, source, "-DVARIANT=1").cache_hit); // waits for the background write
    auto files = entries(root / "opencl", entry_suffix);
    REQUIRE(files.size() == 3);
    for (const auto& f : files) {
      std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
      io.seekg(0, std::ios::end);
      const auto size = static_cast<long>(io.tellg());
      io.seekp(size - 17);
      char c = 0;
      io.seekg(size - 17);
      io.read(&c, 1);
      c = static_cast<char>(c ^ 0x5A);
      io.seekp(size - 17);
      io.write(&c, 1);
    }
    auto rebuilt = build(e, source);
    CHECK_FALSE(rebuilt.cache_hit);
    check_axpy(e, rebuilt.program.get(), 1000, 0);
    auto hit = build(e, source);
    CHECK(hit.cache_hit);
  }
  SECTION("a truncated entry is detected, not loaded, and rebuilt") {
    env e(root.string());
    auto build1 = build(e, source);
    REQUIRE(build1.cache_hit);
    for (const auto& f : entries(root / "opencl", entry_suffix)) {
      const auto size = fs::file_size(f);
      fs::resize_file(f, size / 2);
    }
    auto rebuilt = build(e, source);
    CHECK_FALSE(rebuilt.cache_hit);
    check_axpy(e, rebuilt.program.get(), 999, 0);
    REQUIRE(build(e, source).cache_hit); // the rewritten entry is complete
    for (const auto& f : entries(root / "opencl", entry_suffix))
      fs::resize_file(f, 10); // shorter than the header
    CHECK_FALSE(build(e, source).cache_hit);
    CHECK(build(e, source).cache_hit);
  }
  SECTION("an intact entry the driver rejects is deleted and rebuilt") {
    env e(root.string());
    REQUIRE(build(e, source).cache_hit);
    // Same key, valid header and checksum, but a binary no driver accepts. The key is read
    // back from the entry the plugin wrote (bytes 32..63 of the header).
    for (const auto& f : entries(root / "opencl", entry_suffix))
      fs::remove(f);
    REQUIRE_FALSE(build(e, source).cache_hit);
    REQUIRE(build(e, source).cache_hit); // waits for the background write
    const fs::path target = cache_entry(root);
    blob_cache::key_type key{};
    {
      std::ifstream in(target, std::ios::binary);
      in.seekg(32);
      in.read(reinterpret_cast<char*>(key.data()), static_cast<long>(key.size()));
      REQUIRE(in.good());
    }
    CHECK(target.filename().string() == sha256::hex(key) + std::string(entry_suffix));
    const std::vector<blob_cache::blob> garbage{random_bytes(4096)};
    const auto bytes = blob_cache::encode("opencl", key, blob_cache::pack(garbage));
    {
      std::ofstream out(target, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
    }
    auto rebuilt = build(e, source);
    CHECK_FALSE(rebuilt.cache_hit);
    check_axpy(e, rebuilt.program.get(), 1000, 0);
    CHECK(e.h->log.count(PCY_LOG_INFO, "rejected") == 1);
    CHECK(build(e, source).cache_hit); // the rebuilt entry replaced the bad one
  }
  fs::remove_all(root);
}

TEST_CASE("no cache directory: never a hit", "[opencl][cache]") {
  env e(std::nullopt);
  const std::string source = unique_source(kernels_source);
  CHECK_FALSE(build(e, source).cache_hit);
  CHECK_FALSE(build(e, source).cache_hit);
}

TEST_CASE("an unwritable cache directory warns once and builds still work", "[opencl][cache]") {
  // A path below a regular file can never be created, even by root.
  const fs::path root = fresh_dir("unwritable");
  { std::ofstream(root / "file") << "x"; }
  const std::string bad = (root / "file" / "cache").string();
  env e(bad);
  const std::string source = unique_source(kernels_source);
  for (int i = 0; i < 3; ++i) {
    auto b = build(e, source);
    CHECK_FALSE(b.cache_hit);
    check_axpy(e, b.program.get(), 100, 0);
  }
  INFO(e.h->log.dump());
  CHECK(e.h->log.count(PCY_LOG_WARN, "continuing without the kernel cache") == 1);
  CHECK(e.h->log.count(PCY_LOG_WARN, "PARENCHYMA_CACHE_DIR") == 1);
  fs::remove_all(root);
}

TEST_CASE("several processes building the same program leave one valid entry",
          "[opencl][cache][concurrency]") {
  const fs::path root = fresh_dir("concurrent");
  const std::string source = unique_source(axpy_source);
  const fs::path src_file = root / "source.cl";
  { std::ofstream(src_file) << source; }
  const int children = 6;
  std::vector<std::vector<std::string>> argvs(children,
                                              {"--child-build", root.string(), src_file.string()});
  const auto results = run_children(argvs);
  for (const auto& r : results) {
    INFO(r.output);
    CHECK(r.exit_code == 0);
  }
  CHECK(entries(root / "opencl", ".tmp").empty());
  REQUIRE(entries(root / "opencl", entry_suffix).size() == 1);
  env e(root.string());
  auto b = build(e, source);
  CHECK(b.cache_hit);
  check_axpy(e, b.program.get(), 4097, 0);
  // Once the entry exists, every newcomer hits it.
  const auto again = run_children(argvs);
  for (const auto& r : again) {
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK(r.output.find("cache_hit=1") != std::string::npos);
  }
  fs::remove_all(root);
}

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[opencl][cache]") {
  CHECK(sha256::hex(sha256().update("abc").finish()) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256::hex(sha256().finish()) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256::hex(
            sha256().update("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq").finish()) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::string million(1000000, 'a');
  sha256 h;
  for (size_t i = 0; i < million.size(); i += 999)
    h.update(million.data() + i, std::min<size_t>(999, million.size() - i));
  CHECK(sha256::hex(h.finish()) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("temporary files left by killed writers are swept, live ones kept", "[opencl][cache]") {
  const fs::path root = fresh_dir("sweep");
  fs::create_directories(root / "opencl");
  const fs::path stale = root / "opencl" / "0123.tmp.99999.0";
  const fs::path fresh_tmp = root / "opencl" / "4567.tmp.99999.1";
  std::ofstream(stale) << "half an entry";
  std::ofstream(fresh_tmp) << "being written";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  {
    env e(root.string());
    const std::string source = unique_source(axpy_source);
    CHECK_FALSE(build(e, source).cache_hit);
    CHECK(build(e, source).cache_hit); // the write (and the sweep before it) happened
  }
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh_tmp));
  fs::remove_all(root);
}

// PoCL before 7.0 aborted the process here (pocl_release_dlhandle_cache: Assertion
// `found->ref_count > 0') in most runs: one kernel in flight from several queues at once with
// different launch sizes. The plugin now gives every queue of such a device one in-order queue
// (shared_queues in opencl.hpp); on other platforms this is a plain concurrency test.
TEST_CASE("one kernel launched from many queues and contexts at once, sizes varying",
          "[opencl][kernels][threads]") {
  // PoCL's hazard is in the first launches of a kernel: each round builds new ones (another
  // build option, another PoCL kernel hash). Under the sanitizers half the rounds and
  // iterations (87 s of the test's 100 under ThreadSanitizer at full size).
  constexpr int per_context = 4, contexts = 2, slots = 4;
  const int iterations = parenchyma::test::stress_scaled(40),
            rounds = parenchyma::test::stress_scaled(10);
  std::vector<std::unique_ptr<env>> envs;
  for (int c = 0; c < contexts; ++c)
    envs.push_back(std::make_unique<env>());
  std::atomic<int> wrong{0}, errors{0};
  std::mutex first_error_mu;
  std::string first_error;
  for (int round = 0; round < rounds; ++round) {
    const std::string options = "-DPCY_ROUND=" + std::to_string(round);
    std::vector<host::program> programs;
    for (int c = 0; c < contexts; ++c)
      programs.push_back(build(*envs[c], kernels_source, options.c_str()).program);
    std::vector<std::thread> threads;
    for (int c = 0; c < contexts; ++c)
      for (int t = 0; t < per_context; ++t)
        threads.emplace_back([&, c, t] {
          try {
            const env& e = *envs[c];
            std::mt19937 r(std::random_device{}() + static_cast<unsigned>(c * 31 + t));
            std::uniform_real_distribution<float> u(-1.0f, 1.0f);
            auto q = host::make_queue(e.fw, e.ctx.get(), 0);
            auto k = make_kernel(e, programs[c].get(), "axpy");
            constexpr int cap = 1 << 16;
            auto mx = host::alloc(e.fw, e.ctx.get(), 0, cap * sizeof(float));
            std::vector<host::memory> my;
            std::vector<float> x(cap), out(cap);
            std::vector<std::vector<float>> y(slots, std::vector<float>(cap));
            for (auto& v : x)
              v = u(r);
            host::write(e.fw, q.get(), mx.get(), 0, x.data(), cap * sizeof(float));
            for (int j = 0; j < slots; ++j) {
              my.push_back(host::alloc(e.fw, e.ctx.get(), 0, cap * sizeof(float)));
              for (auto& v : y[j])
                v = u(r);
              host::write(e.fw, q.get(), my[j].get(), 0, y[j].data(), cap * sizeof(float));
            }
            for (int it = 0; it < iterations; ++it) {
              // Several launches in flight on this queue, each with its own size and work-group;
              // y[j] holds what the device last returned.
              int n[slots];
              const float a = 0.5f / static_cast<float>(it + 1);
              for (int j = 0; j < slots; ++j) {
                n[j] = 1 + static_cast<int>(r() % cap);
                const uint32_t local = 8u << (r() % 3);
                const pcy_kernel_arg args[] = {scalar_arg(n[j]), scalar_arg(a), mem_arg(mx.get()),
                                               mem_arg(my[j].get())};
                pcy_kernel_launch_args la{};
                la.struct_size = sizeof la;
                la.queue = q.get();
                la.kernel = k.get();
                la.dims = 1;
                la.global[0] = (static_cast<uint64_t>(n[j]) + local - 1) / local * local;
                la.local[0] = local;
                la.args = args;
                la.arg_count = 4;
                host::check(e.api().kernel_launch(&la));
              }
              for (int j = 0; j < slots; ++j) {
                host::read(e.fw, q.get(), my[j].get(), 0, out.data(), n[j] * sizeof(float));
                for (int i = 0; i < n[j]; ++i) {
                  const double want = double(a) * x[i] + y[j][i];
                  if (std::abs(out[i] - want) > 1e-5 * (1 + std::abs(want))) ++wrong;
                  y[j][i] = out[i];
                }
              }
            }
          } catch (const std::exception& ex) {
            ++errors;
            std::lock_guard lock(first_error_mu);
            if (first_error.empty()) first_error = ex.what();
          }
        });
    for (auto& th : threads)
      th.join();
  }
  INFO(first_error);
  CHECK(errors == 0);
  CHECK(wrong == 0);
}
