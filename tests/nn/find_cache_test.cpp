// The CUDA NN bundle's measured convolution algorithms on disk (nn_cuda.cpp, "the measured
// choices on disk"; docs/nn.md). A Convolution with algorithm_auto measures each direction once
// per problem and device; the choice is saved under <cache>/cudnn-find/ and a later process (here:
// a later Registry over the same cache directory) takes it from there instead of measuring. The
// test proves the load by rewriting each entry with another valid choice (cuDNN's algorithm 0,
// no workspace) and reading it back through Convolution::algorithm, then shows that entries which
// do not hold here (an algorithm cuDNN does not have; a damaged file) are measured again and
// replaced. Skips (77) where there is no CUDA device or the bundle runs without cuDNN.
#include "support/catch.hpp"
#include "support/catch_run.hpp"

#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/sdk/blob_cache.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;
namespace fs = std::filesystem;
using blob = std::vector<unsigned char>;

namespace {
fs::path cache_root;

RegistryOptions options() {
  RegistryOptions o;
  o.plugin_paths = {PCY_TEST_PLUGIN_DIR};
  o.default_plugin_dir = false;
  o.default_config = false;
  o.environment = std::map<std::string, std::string>{{"PARENCHYMA_CACHE_DIR", cache_root.string()}};
  return o;
}

struct choice {
  std::array<int64_t, 3> algorithm{};
  std::array<uint64_t, 3> workspace{};
  bool operator==(const choice&) const = default;
};
constexpr nn::direction all_directions[3] = {nn::direction::forward, nn::direction::grad_data,
                                             nn::direction::grad_filter};

// One process's worth: a registry over the cache, the convolution configured (each direction
// measured or loaded), the registry closed (the bundle unloads, its pending writes finish).
choice configure() {
  Registry r(options());
  Backend b(r, "cuda");
  nn::ConvolutionParams p;
  p.padding = {1, 1};
  p.math = nn::math_mode::strict;
  const nn::Convolution c(b, {4, 16, 19, 23}, {24, 16, 3, 3}, p);
  choice out;
  for (int i = 0; i < 3; ++i) {
    out.algorithm[i] = c.algorithm(all_directions[i]);
    out.workspace[i] = c.workspace_bytes(all_directions[i]);
  }
  return out;
}

std::vector<fs::path> entries() {
  std::vector<fs::path> out;
  const fs::path dir = cache_root / "cudnn-find";
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".pcyblob") out.push_back(e.path());
  return out;
}

blob read_file(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return blob((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_file(const fs::path& f, const blob& b) {
  std::ofstream out(f, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// The six int64 of an entry's payload (format, direction, algorithm, workspace, numerics,
// engine), after the cache's header.
std::array<int64_t, 6> fields(const fs::path& f) {
  const blob b = read_file(f);
  REQUIRE(b.size() == sdk::blob_cache::header_size + 48);
  std::array<int64_t, 6> v{};
  for (size_t i = 0; i < 6; ++i)
    v[i] = static_cast<int64_t>(
        sdk::detail::get_le(b.data() + sdk::blob_cache::header_size + 8 * i, 8));
  return v;
}

// Rewrites entry f (its key is its file name) with the payload v, as the bundle would have.
void rewrite(const fs::path& f, const std::array<int64_t, 6>& v) {
  const std::string hex = f.stem().string();
  REQUIRE(hex.size() == 64);
  sdk::blob_cache::key_type key{};
  for (size_t i = 0; i < key.size(); ++i)
    key[i] = static_cast<unsigned char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  blob payload(48);
  for (size_t i = 0; i < 6; ++i)
    sdk::detail::put_le(payload.data() + 8 * i, static_cast<uint64_t>(v[i]), 8);
  write_file(f, sdk::blob_cache::encode("cudnn-find", key, payload));
}
} // namespace

TEST_CASE("measured convolution algorithms are saved, loaded and checked") {
  const choice first = configure();
  INFO("measured: " << first.algorithm[0] << " " << first.algorithm[1] << " "
                    << first.algorithm[2]);
  std::vector<fs::path> saved = entries();
  REQUIRE(saved.size() == 3); // one per direction

  // Another process takes the same choices from the disk.
  CHECK(configure() == first);

  // Proof that they come from the disk: each entry rewritten to cuDNN's algorithm 0 of its
  // direction (no workspace), which a later process reports.
  for (const fs::path& f : saved) {
    std::array<int64_t, 6> v = fields(f);
    CHECK(v[0] == 1);
    rewrite(f, {1, v[1], 0, 0, -1, -1});
  }
  const choice zero = configure();
  for (int i = 0; i < 3; ++i) {
    CHECK(zero.algorithm[i] == 0);
    CHECK(zero.workspace[i] == 0);
  }

  // Entries that do not hold here are measured again and replaced: an algorithm cuDNN does not
  // have, and a damaged file (the cache's checksum refuses it).
  saved = entries();
  REQUIRE(saved.size() == 3);
  for (const fs::path& f : saved)
    rewrite(f, {1, fields(f)[1], 999, 0, -1, -1});
  blob damaged = read_file(saved[0]);
  damaged.back() ^= 0x5a;
  write_file(saved[0], damaged);
  const choice again = configure();
  for (int i = 0; i < 3; ++i) {
    CHECK(again.algorithm[i] != 999);
    CHECK(again.algorithm[i] >= 0);
  }
  for (const fs::path& f : entries())
    CHECK(fields(f)[2] != 999);
}

int main(int argc, char** argv) {
  char tmpl[] = "/tmp/pcy-nn-find-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::printf("FAILED: mkdtemp\n");
    return 1;
  }
  cache_root = tmpl;
  int rc = 0;
  try {
    bool skip = false;
    {
      Registry r(options());
      const Framework* f = r.find_framework("cuda");
      if (f == nullptr || f->devices().empty()) {
        std::printf("SKIPPED: no CUDA device (%s)\n",
                    f == nullptr ? "the cuda plugin is not loaded" : f->reason().c_str());
        skip = true;
      } else {
        std::string impl;
        for (const auto& c : r.op_coverage())
          if (c.framework == "cuda" && c.op == "convolution_algorithm" && c.dtype == PCY_DTYPE_F32)
            impl = c.implementation;
        if (impl.find("cudnnFind") == std::string::npos) {
          std::printf("SKIPPED: the CUDA NN bundle does not measure with cuDNN here (%s)\n",
                      impl.empty() ? "no convolution_algorithm on cuda" : impl.c_str());
          skip = true;
        }
      }
    }
    rc = skip ? 77 : parenchyma_test::run_catch(argc, argv);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    rc = 1;
  }
  std::error_code ec;
  fs::remove_all(cache_root, ec);
  return rc;
}
