// CUDA plugin internals that need no GPU: SHA-256, the on-disk cubin cache as the plugin uses it
// (the SDK's blob_cache: hit, corrupt, truncated, foreign, unwritable) and NVRTC itself (exact
// architecture, build log, PTX fallback). The NVRTC cases are skipped, with the reason printed,
// where NVRTC is not installed.
#include "fixture.hpp"
#include "support/catch_run.hpp"

#include "nvrtc_loader.hpp"

#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/sha256.hpp>

#include <filesystem>
#include <fstream>

using namespace cuda_test;
namespace pc = parenchyma::cuda;
namespace sdk = parenchyma::sdk;
namespace fs = std::filesystem;

namespace {
std::string digest(std::string_view s) {
  sdk::sha256 h;
  h.update(s);
  return sdk::sha256::hex(h.finish());
}
sdk::blob_cache::key_type key_of(std::string_view s) { return sdk::sha256().field(s).finish(); }

fs::path fresh_dir(const char* tag) {
  const fs::path d = fs::temp_directory_path() /
                     ("pcy-cuda-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
                      std::to_string(rng()() % 1000000));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

const char* good_source = R"(
extern "C" __global__ void axpy(unsigned long long n, double a, const double* x, double* y) {
  unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
})";
} // namespace

TEST_CASE("sha256 matches the FIPS 180-4 test vectors", "[cuda][offline]") {
  CHECK(digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  sdk::sha256 h;
  const std::string chunk(1000, 'a');
  for (int i = 0; i < 1000; ++i)
    h.update(chunk);
  CHECK(sdk::sha256::hex(h.finish()) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // Fields are length-prefixed: a boundary moved between two fields changes the key.
  sdk::sha256 a, b;
  a.field("ab").field("c");
  b.field("a").field("bc");
  CHECK(a.finish() != b.finish());
}

TEST_CASE("compiler options are split like a shell would", "[cuda][offline]") {
  auto o = pc::split_options("  -DX=1\t--use_fast_math \"-DNAME=a b\"  ");
  REQUIRE(o.size() == 3);
  CHECK(o[0] == "-DX=1");
  CHECK(o[1] == "--use_fast_math");
  CHECK(o[2] == "-DNAME=a b");
  CHECK(pc::split_options("").empty());
}

// The plugin's cache is the SDK's blob_cache of kind "cuda" (plugin.hpp), fully tested in
// tests/sdk; these cases check it as the plugin uses it: <dir>/cuda, a cubin-sized payload,
// damaged and foreign entries refused, writes on the writer thread, an unwritable directory.
TEST_CASE("the cubin cache stores, finds and rejects damaged entries", "[cuda][offline]") {
  test_host h;
  const fs::path dir = fresh_dir("cache");
  sdk::blob_cache cache(dir.c_str(), "cuda", sdk::logger(&h.services, "cuda"));
  REQUIRE(cache.enabled());
  const auto payload = random_bytes(10007);
  const auto k1 = key_of("key-1"), k2 = key_of("key-2");

  CHECK_FALSE(cache.load(k1).has_value()); // miss
  REQUIRE(cache.store(k1, payload));
  const fs::path file = cache.path(k1);
  CHECK(fs::exists(file));
  CHECK(file.parent_path() == dir / "cuda");
  auto hit = cache.load(k1);
  REQUIRE(hit.has_value());
  CHECK(*hit == payload);
  CHECK_FALSE(cache.load(k2).has_value());
  // No temporary files are left behind.
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir / "cuda"))
    files += e.is_regular_file();
  CHECK(files == 1);

  SECTION("a flipped payload byte is caught by the checksum and the entry removed") {
    const auto at = static_cast<std::streamoff>(sdk::blob_cache::header_size + 5000);
    {
      std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
      char c = 0;
      f.seekg(at);
      f.read(&c, 1);
      c = static_cast<char>(c ^ 0x40);
      f.seekp(at);
      f.write(&c, 1);
    }
    CHECK_FALSE(cache.load(k1).has_value());
    CHECK(h.log.count("checksum mismatch") == 1);
    CHECK_FALSE(fs::exists(file));
  }
  SECTION("a truncated entry is never loaded") {
    fs::resize_file(file, sdk::blob_cache::header_size + 100);
    CHECK_FALSE(cache.load(k1).has_value());
    CHECK(h.log.count("truncated") == 1);
    REQUIRE(cache.store(k1, payload)); // rebuilt entry is good again
    CHECK(cache.load(k1) == payload);
  }
  SECTION("a short or foreign file is never loaded") {
    {
      std::ofstream f(file, std::ios::binary | std::ios::trunc);
      f << "not a cubin";
    }
    CHECK_FALSE(cache.load(k1).has_value());
    CHECK(h.log.count("truncated") == 1);
  }
  SECTION("an OpenCL entry at the same name is another plugin's and never loaded") {
    const auto bytes = sdk::blob_cache::encode("opencl", k1, payload);
    {
      std::ofstream f(file, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
    }
    CHECK_FALSE(cache.load(k1).has_value());
    CHECK(h.log.count("another kind") == 1);
  }
  fs::remove_all(dir);
}

TEST_CASE("cubins written on the writer thread are complete by shutdown", "[cuda][offline]") {
  test_host h;
  const fs::path dir = fresh_dir("later");
  const auto payload = random_bytes(70001);
  const auto k = key_of("later");
  {
    sdk::blob_cache cache(dir.c_str(), "cuda", sdk::logger(&h.services, "cuda"));
    cache.store_later(k, sdk::blob_cache::blob(payload.begin(), payload.end()));
    CHECK(cache.load(k) == payload); // waits for the pending write
    cache.store_later(key_of("at-shutdown"), sdk::blob_cache::blob(payload));
  } // the destructor finishes the pending write
  sdk::blob_cache again(dir.c_str(), "cuda", sdk::logger(&h.services, "cuda"));
  CHECK(again.load(key_of("at-shutdown")) == payload);
  fs::remove_all(dir);
}

TEST_CASE("an unwritable cache directory warns once and disables writing", "[cuda][offline]") {
  test_host h;
  const fs::path dir = fresh_dir("unwritable");
  const fs::path blocker = dir / "a-file";
  { std::ofstream(blocker) << "x"; }
  sdk::blob_cache cache(blocker.c_str(), "cuda", sdk::logger(&h.services, "cuda"));
  const auto payload = random_bytes(100);
  CHECK_FALSE(cache.store(key_of("k"), payload));
  CHECK_FALSE(cache.store(key_of("k2"), payload));
  CHECK(h.log.count("continuing without the kernel cache") == 1);
  CHECK(h.log.count("PARENCHYMA_CACHE_DIR") == 1);
  CHECK_FALSE(cache.writable());
  CHECK_FALSE(cache.load(key_of("k")).has_value());
  fs::remove_all(dir);
}

TEST_CASE("a missing NVRTC is reported with what to install", "[cuda][offline]") {
  scoped_env e("PARENCHYMA_NVRTC", "/nonexistent/libnvrtc.so.13");
  pc::nvrtc rtc;
  CHECK(rtc.identity().empty());
  CHECK_FALSE(rtc.available());
  CHECK(rtc.reason().find("PARENCHYMA_NVRTC") != std::string::npos);
  try {
    rtc.compile(good_source, {}, 90);
    FAIL("compile without NVRTC succeeded");
  } catch (const parenchyma::sdk::error& ex) {
    CHECK(ex.code() == PCY_ERR_UNAVAILABLE);
  }
}

TEST_CASE("NVRTC compiles for the exact architecture", "[cuda][nvrtc]") {
  pc::nvrtc rtc;
  REQUIRE(rtc.available());
  CHECK_FALSE(rtc.identity().empty());
  auto out = rtc.compile(good_source, {"-DUNUSED=1"}, 90);
  CHECK(out.cubin);
  CHECK(out.target == "sm_90");
  REQUIRE(out.image.size() > 4);
  CHECK(std::string(out.image.data(), 4) == "\x7f"
                                            "ELF");
}

TEST_CASE("NVRTC errors carry the compiler log", "[cuda][nvrtc]") {
  pc::nvrtc rtc;
  REQUIRE(rtc.available());
  try {
    rtc.compile("extern \"C\" __global__ void k(float* p) { p[0] = undefined_thing_42; }", {}, 90);
    FAIL("a broken source compiled");
  } catch (const parenchyma::sdk::error& ex) {
    CHECK(ex.code() == PCY_ERR_BUILD);
    const std::string m = ex.what();
    INFO(m);
    CHECK(m.find("undefined_thing_42") != std::string::npos);
    CHECK(m.find("sm_90") != std::string::npos);
  }
  try {
    rtc.compile(good_source, {"--gpu-architecture=sm_70"}, 90);
    FAIL("an architecture option was accepted");
  } catch (const parenchyma::sdk::error& ex) {
    CHECK(ex.code() == PCY_ERR_INVALID_ARGUMENT);
  }
}

TEST_CASE("an architecture NVRTC does not know falls back to PTX", "[cuda][nvrtc]") {
  pc::nvrtc rtc;
  REQUIRE(rtc.available());
  auto out = rtc.compile(good_source, {}, 990); // a compute capability 99.0 from the future
  CHECK_FALSE(out.cubin);
  CHECK(out.target.rfind("compute_", 0) == 0);
  CHECK(std::string(out.image.data()).find(".target") != std::string::npos);
  try {
    rtc.compile(good_source, {}, 10); // older than anything NVRTC supports
    FAIL("compute capability 1.0 was accepted");
  } catch (const parenchyma::sdk::error& ex) {
    CHECK(ex.code() == PCY_ERR_UNSUPPORTED);
  }
}

int main(int argc, char** argv) {
  std::string reason;
  {
    pc::nvrtc rtc;
    if (!rtc.available()) reason = rtc.reason();
  }
  if (!reason.empty()) {
    std::printf("SKIPPED (partly): NVRTC cases: %s\n", reason.c_str());
    char filter[] = "~[nvrtc]";
    char* args[] = {argv[0], filter};
    const int rc = parenchyma_test::run_catch(2, args);
    return rc != 0 ? rc : 77;
  }
  return parenchyma_test::run_catch(argc, argv);
}
