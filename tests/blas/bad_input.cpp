// BLAS front-end bad input: mismatched shapes and dtypes, wrong leading dimensions (also of a
// transposed operand), bad increments, a tensor never written, an op nobody serves under the
// "deny" fallback policy. Each must throw a parenchyma::error naming the op and the argument,
// before anything runs: every tensor keeps its contents.
#include "support/catch.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {

std::mt19937 rng{std::random_device{}()};

template <class T> SharedTensor<T> filled(std::vector<int64_t> shape) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<float> u(-1, 1);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}
template <class T> std::vector<T> snapshot(const SharedTensor<T>& t) {
  auto s = t.read();
  return {s.begin(), s.end()};
}

// Runs f, which must throw errc `code` from "blas.<op>" with every piece of `needles` in it.
template <class F>
void expect_error(F&& f, errc code, const std::string& op, std::vector<std::string> needles) {
  try {
    f();
    FAIL("no error thrown for blas." << op);
  } catch (const parenchyma::error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    CHECK(std::string(e.what()).find(op) != std::string::npos);
    for (const auto& n : needles)
      CHECK(std::string(e.what()).find(n) != std::string::npos);
  }
}

Backend& native() {
  static Backend b("native");
  return b;
}

} // namespace

TEST_CASE("mismatched shapes name the op and the argument; nothing changes", "[blas]") {
  auto x = filled<float>({10}), y = filled<float>({11});
  const auto x0 = snapshot(x), y0 = snapshot(y);
  expect_error([&] { blas::axpy(native(), 2.0, x, y); }, errc::invalid_argument, "blas.axpy",
               {"argument y", "11", "10"});
  expect_error([&] { blas::axpy(native(), 6, 2.0, x, 2, y, 1); }, errc::invalid_argument,
               "blas.axpy", {"argument x", "incx"});
  expect_error([&] { blas::scal(native(), 3, 2.0, x, 0); }, errc::invalid_argument, "blas.scal",
               {"incx", ">= 1"});
  SharedTensor<float> r2({2});
  expect_error([&] { blas::dot(native(), x, x, r2); }, errc::invalid_argument, "blas.dot",
               {"argument result", "one-element"});
  auto A = filled<float>({4, 6}), B = filled<float>({5, 3}), C = filled<float>({4, 3});
  const auto C0 = snapshot(C);
  expect_error([&] { blas::gemm(native(), blas::no_trans, blas::no_trans, 1.0, A, B, 1.0, C); },
               errc::invalid_argument, "blas.gemm", {"argument B", "[5, 3]", "[6, 3]"});
  auto v = filled<float>({5});
  expect_error([&] { blas::gemv(native(), blas::no_trans, 1.0, A, v, 0.0, v); },
               errc::invalid_argument, "blas.gemv", {"argument x"});
  CHECK(snapshot(x) == x0);
  CHECK(snapshot(y) == y0);
  CHECK(snapshot(C) == C0);
}

TEST_CASE("mismatched dtypes name the argument", "[blas]") {
  auto x = filled<float>({8});
  auto y = filled<double>({8});
  const auto y0 = snapshot(y);
  expect_error([&] { blas::axpy(native(), 1.0, x, y); }, errc::invalid_argument, "blas.axpy",
               {"argument y", "f64", "f32"});
  auto alpha = filled<double>({1});
  auto z = filled<float>({8});
  const auto z0 = snapshot(z);
  expect_error([&] { blas::scal(native(), alpha, z); }, errc::invalid_argument, "blas.scal",
               {"argument alpha", "f64"});
  CHECK(snapshot(y) == y0);
  CHECK(snapshot(z) == z0);
}

TEST_CASE("a transposed operand with a wrong leading dimension is refused", "[blas]") {
  // op(A) = A^T is m x k = 6 x 4, so A is stored 4 x 6 and needs lda >= 6.
  auto A = filled<float>({4, 6}), B = filled<float>({4, 5}), C = filled<float>({6, 5});
  const auto C0 = snapshot(C);
  blas::gemm_dims d;
  d.m = 6;
  d.n = 5;
  d.k = 4;
  d.lda = 4; // the untransposed row length: wrong
  expect_error([&] { blas::gemm(native(), blas::trans, blas::no_trans, 1.0, A, B, 0.5, C, d); },
               errc::invalid_argument, "blas.gemm", {"argument lda", "4", ">= 6", "transposed"});
  d.lda = 6;
  d.ldb = 3; // B is 4 x 5: ldb must be >= 5
  expect_error([&] { blas::gemm(native(), blas::trans, blas::no_trans, 1.0, A, B, 0.5, C, d); },
               errc::invalid_argument, "blas.gemm", {"argument ldb", ">= 5"});
  d.ldb = 5;
  d.ldc = 9; // fits the row length but not the tensor: 5 rows x 9 + 5 > 30
  expect_error([&] { blas::gemm(native(), blas::trans, blas::no_trans, 1.0, A, B, 0.5, C, d); },
               errc::invalid_argument, "blas.gemm", {"argument C", "ldc"});
  CHECK(snapshot(C) == C0);
  d.ldc = 5; // and the good call works
  blas::gemm(native(), blas::trans, blas::no_trans, 1.0, A, B, 0.5, C, d);
  CHECK(snapshot(C) != C0);
}

TEST_CASE("a tensor never written is refused before anything runs", "[blas]") {
  SharedTensor<float> x({16});
  auto y = filled<float>({16});
  const auto y0 = snapshot(y);
  expect_error([&] { blas::axpy(native(), 1.0, x, y); }, errc::uninitialized, "blas.axpy",
               {"argument x", "never written"});
  SharedTensor<float> r({1});
  expect_error([&] { blas::nrm2(native(), x, r); }, errc::uninitialized, "blas.nrm2",
               {"argument x"});
  auto A = filled<float>({4, 4}), B = filled<float>({4, 4});
  SharedTensor<float> C({4, 4});
  // beta != 0 reads C: it must have been written.
  expect_error([&] { blas::gemm(native(), blas::no_trans, blas::no_trans, 1.0, A, B, 1.0, C); },
               errc::uninitialized, "blas.gemm", {"argument C"});
  CHECK(!C.initialized());
  CHECK(snapshot(y) == y0);
  // beta == 0 takes C write-only: an unwritten C is fine.
  blas::gemm(native(), blas::no_trans, blas::no_trans, 1.0, A, B, 0.0, C);
  CHECK(C.initialized());
}

TEST_CASE("aliasing that BLAS cannot honour is refused", "[blas]") {
  auto A = filled<float>({3, 3});
  const auto A0 = snapshot(A);
  expect_error([&] { blas::gemm(native(), blas::no_trans, blas::no_trans, 1.0, A, A, 0.0, A); },
               errc::invalid_argument, "blas.gemm", {"same tensor"});
  auto x = filled<float>({5});
  expect_error([&] { blas::swap(native(), x, x); }, errc::invalid_argument, "blas.swap",
               {"same tensor"});
  CHECK(snapshot(A) == A0);
}

namespace {
// A plugin directory holding the given plugin files only, and a config file.
struct sandbox {
  std::filesystem::path dir;
  explicit sandbox(const std::vector<std::string>& plugins, const std::string& config) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "pcy-blas-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    dir = tmpl;
    std::filesystem::create_directory(dir / "plugins");
    for (const auto& p : plugins)
      std::filesystem::copy_file(std::filesystem::path(PARENCHYMA_TEST_PLUGIN_DIR) / p,
                                 dir / "plugins" / p);
    std::ofstream(dir / "config.json") << config;
  }
  ~sandbox() { std::filesystem::remove_all(dir); }
  RegistryOptions options() const {
    RegistryOptions o;
    o.plugin_paths = {dir / "plugins"};
    o.config_file = dir / "config.json";
    o.environment = std::map<std::string, std::string>{};
    o.default_plugin_dir = false;
    o.default_config = false;
    return o;
  }
};
bool have_plugin(const char* file) {
  return std::filesystem::exists(std::filesystem::path(PARENCHYMA_TEST_PLUGIN_DIR) / file);
}
} // namespace

TEST_CASE("an op no framework offers fails under fallback deny, naming the op", "[blas]") {
  // native has no blas bundle here; only OpenCL's bundle (if OpenCL is present) could serve it.
  std::vector<std::string> plugins{"parenchyma-native.so"};
  const bool opencl =
      have_plugin("parenchyma-opencl.so") && have_plugin("parenchyma-blas-opencl.so");
  if (opencl) {
    plugins.push_back("parenchyma-opencl.so");
    plugins.push_back("parenchyma-blas-opencl.so");
  }
  sandbox s(plugins, R"({"fallback": "deny", "log_level": "off"})");
  Registry reg(s.options());
  Backend b(reg, "native");
  auto x = filled<float>({32}), y = filled<float>({32});
  const auto y0 = snapshot(y);
  expect_error([&] { blas::axpy(b, 2.0, x, y); }, errc::unsupported, "blas.axpy",
               {"deny", "native"});
  CHECK(snapshot(y) == y0);
  CHECK(b.fallback_count() == 0);

  if (!opencl || reg.find_framework("opencl") == nullptr ||
      reg.find_framework("opencl")->devices().empty())
    return; // nothing to fall back to on this machine
  sandbox s2(plugins, R"({"fallback": "allow", "log_level": "off"})");
  Registry reg2(s2.options());
  Backend b2(reg2, "native");
  const auto x0 = snapshot(x);
  blas::axpy(b2, 2.0, x, y);
  const auto y1 = snapshot(y);
  for (size_t i = 0; i < y1.size(); ++i)
    CHECK(std::fabs(y1[i] - (2 * x0[i] + y0[i])) <= 1e-5f);
  CHECK(b2.fallback_count() == 1);
  CHECK(b2.route(blas::detail::axpy_key(PCY_DTYPE_F32)).framework == "opencl");
}
