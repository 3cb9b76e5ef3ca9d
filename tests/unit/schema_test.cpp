// Unit tests for the typed op schema (ABI 1.1): every call is checked against the op's schema
// in the core (kind, intent, dtype, rank, count), so a front-end that packs an argument wrongly
// fails on that call naming the op and the argument; the per-backend workspace; per-context op
// availability; the half types' conversions.
#include "loader/testing.hpp"
#include "support/catch.hpp"

#include <parenchyma/abi/ext/pcy_blas.h>
#include <parenchyma/extension.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstring>
#include <limits>

using namespace parenchyma;
using namespace pcy_test;

namespace {

Registry native_blas() {
  return Registry(isolated(
      {native_plugin(), fs::path(PCY_TEST_PLUGIN_DIR) / "parenchyma-blas-native" PCY_TEST_SO}));
}

// Calls axpy through the core with hand-packed arguments, as a buggy front-end would.
error call_axpy(const Backend& b, std::vector<OpArg> args, pcy_dtype dtype = PCY_DTYPE_F32) {
  return catch_error([&] { b.invoke(ext::op_key<pcy_blas_axpy_schema>(dtype), args); });
}

} // namespace

TEST_CASE("a front-end call that does not match the schema fails naming the op and argument") {
  if (native_plugin().empty()) return;
  Registry r = native_blas();
  Backend b(r, "native");
  SharedTensor<float> x({8}), y({8}), two({2});
  SharedTensor<double> xd({8});
  for (auto* t : {&x, &y, &two})
    for (float& v : t->write_only())
      v = 1;
  for (double& v : xd.write_only())
    v = 1;
  const auto n = OpArg::integer(8), one = OpArg::integer(1);
  SECTION("y passed as an input (the schema says inout)") {
    const auto e = call_axpy(b, {n, OpArg::real(2), OpArg::in(x), one, OpArg::in(y), one});
    INFO(e.what());
    CHECK(e.code() == errc::invalid_argument);
    CHECK(e.origin() == "blas.axpy");
    CHECK(contains(e.message(), "argument y"));
    CHECK(contains(e.message(), "inout"));
  }
  SECTION("an int where the schema wants a tensor") {
    const auto e = call_axpy(b, {n, OpArg::real(2), OpArg::integer(3), one, OpArg::inout(y), one});
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.message(), "argument x"));
  }
  SECTION("a tensor of another dtype than the op's") {
    const auto e = call_axpy(b, {n, OpArg::real(2), OpArg::in(xd), one, OpArg::inout(y), one});
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.message(), "argument x"));
    CHECK(contains(e.message(), "f64"));
  }
  SECTION("a scalar tensor of two elements") {
    const auto e = call_axpy(b, {n, OpArg::in(two), OpArg::in(x), one, OpArg::inout(y), one});
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.message(), "argument alpha"));
  }
  SECTION("a scalar tensor passed as an output") {
    const auto e = call_axpy(b, {n, OpArg::out(two), OpArg::in(x), one, OpArg::inout(y), one});
    CHECK(contains(e.message(), "argument alpha"));
  }
  SECTION("too few arguments") {
    const auto e = call_axpy(b, {n, OpArg::real(2), OpArg::in(x), one, OpArg::inout(y)});
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.message(), "6"));
  }
  SECTION("a matrix of the wrong rank for gemm") {
    SharedTensor<float> A({4}), B({2, 2}), C({2, 2});
    for (auto* t : {&A, &B, &C})
      for (float& v : t->write_only())
        v = 1;
    const OpArg args[] = {OpArg::integer(0), OpArg::integer(0), OpArg::integer(2),
                          OpArg::integer(2), OpArg::integer(2), OpArg::real(1),
                          OpArg::in(A),      OpArg::integer(2), OpArg::in(B),
                          OpArg::integer(2), OpArg::real(0),    OpArg::out(C),
                          OpArg::integer(2)};
    const auto e =
        catch_error([&] { b.invoke(ext::op_key<pcy_blas_gemm_schema>(PCY_DTYPE_F32), args); });
    CHECK(contains(e.message(), "argument A"));
    CHECK(contains(e.message(), "dimensions"));
  }
  SECTION("a refused call touches no tensor, also an output before the bad argument") {
    // copy's y may be passed OUT (write-only); a bad incy after it must not have y synced or
    // marked written first (its host values would be lost).
    SharedTensor<float> z({8});
    for (float& v : z.write_only())
      v = 3;
    z.storage().reset_stats();
    const std::vector<OpArg> args{n, OpArg::in(x), one, OpArg::out(z), OpArg::real(1)};
    const auto e =
        catch_error([&] { b.invoke(ext::op_key<pcy_blas_copy_schema>(PCY_DTYPE_F32), args); });
    CHECK(contains(e.message(), "argument incy"));
    const TransferStats& st = z.stats();
    CHECK(st.aliases == 0);
    CHECK(st.transfers() == 0);
    for (float v : z.read())
      CHECK(v == 3);
  }
  SECTION("a correct call, and an overwritten output passed out or inout, run") {
    y.write_only()[0] = 5;
    CHECK_NOTHROW(
        b.invoke(ext::op_key<pcy_blas_axpy_schema>(PCY_DTYPE_F32),
                 std::vector<OpArg>{n, OpArg::real(2), OpArg::in(x), one, OpArg::inout(y), one}));
    CHECK(y.read()[0] == 7);
    SharedTensor<float> z({8});
    for (OpArg out : {OpArg::out(z), OpArg::inout(z)}) {
      const std::vector<OpArg> args{n, OpArg::in(x), one, out, one};
      CHECK_NOTHROW(b.invoke(ext::op_key<pcy_blas_copy_schema>(PCY_DTYPE_F32), args));
      CHECK(z.read()[7] == 1);
    }
  }
}

TEST_CASE("ops get workspace memory from a pool of their backend, grown only when needed") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_good")}));
  static const OpKey probe{"stubext", "workspace_probe", PCY_DTYPE_F32, "i t>"};
  Backend b(r, "stub");
  SharedTensor<float> out({2});
  const int64_t sizes[] = {100, 50, 100, 4096, 1000, 4000, 64};
  for (size_t i = 0; i < std::size(sizes); ++i) {
    INFO("call " << i << ": " << sizes[i] << " bytes");
    const OpArg args[] = {OpArg::integer(sizes[i]), OpArg::out(out)};
    b.invoke(probe, args);
    CHECK(out.read()[0] == 1);
    // The same memory as the call before, except at the first call and where it had to grow.
    if (i != 0 && sizes[i] != 4096) CHECK(out.read()[1] == 1);
  }
}

TEST_CASE("an op its bundle reports unavailable on a device goes to another bundle or fails") {
  static const OpKey negate64{"stubext", "negate", PCY_DTYPE_F64, "i t="};
  {
    Registry r(isolated({stub_dir("good"), stub_dir("bundle_good")}));
    Backend b(r, "stub");
    const auto e = catch_error([&] { (void)b.route(negate64); });
    INFO(e.what());
    CHECK(e.code() == errc::unsupported);
    CHECK(contains(e.message(), "switched off"));
  }
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_good"), stub_dir("bundle_second")}));
  Backend b(r, "stub");
  CHECK(b.route(negate64).bundle == "stubext_second");
  SharedTensor<double> x({3});
  x.write_only()[2] = 4;
  const OpArg args[] = {OpArg::integer(3), OpArg::inout(x)};
  b.invoke(negate64, args);
  CHECK(x.read()[2] == -4);
}

TEST_CASE("ops in f16 and bf16 load, resolve and run on SharedTensors of the half types") {
  Registry r(isolated({stub_dir("good"), stub_dir("bundle_second")}));
  bool listed16 = false, listed_b16 = false;
  for (const auto& c : r.op_coverage()) {
    listed16 = listed16 || (c.op == "negate" && c.dtype == PCY_DTYPE_F16);
    listed_b16 = listed_b16 || (c.op == "negate" && c.dtype == PCY_DTYPE_BF16);
  }
  CHECK(listed16);
  CHECK(listed_b16);
  Backend b(r, "stub");
  SharedTensor<f16> h({5});
  SharedTensor<bf16> g({5});
  for (int i = 0; i < 5; ++i) {
    h.write_only()[i] = f16(1.5f * float(i) - 2.0f);
    g.write_only()[i] = bf16(-3.25f * float(i) + 1.0f);
  }
  const OpArg ah[] = {OpArg::integer(5), OpArg::inout(h)};
  const OpArg ag[] = {OpArg::integer(5), OpArg::inout(g)};
  b.invoke(OpKey{"stubext", "negate", PCY_DTYPE_F16, "i t="}, ah);
  b.invoke(OpKey{"stubext", "negate", PCY_DTYPE_BF16, "i t="}, ag);
  for (int i = 0; i < 5; ++i) {
    CHECK(float(h.read()[i]) == -(1.5f * float(i) - 2.0f));
    CHECK(float(g.read()[i]) == -(-3.25f * float(i) + 1.0f));
  }
}

TEST_CASE("f16 and bf16 convert with round-to-nearest-even, keeping specials") {
  struct Case {
    float in;
    uint16_t h, b;
  };
  for (const Case& c :
       {Case{1.0f, 0x3c00, 0x3f80}, Case{-2.0f, 0xc000, 0xc000}, Case{65504.0f, 0x7bff, 0x4780},
        Case{1e6f, 0x7c00, 0x4974}, Case{5.9604645e-8f, 0x0001, 0x3380}, Case{0.0f, 0x0000, 0x0000},
        Case{-0.0f, 0x8000, 0x8000}, Case{1.0009765625f, 0x3c01, 0x3f80},
        Case{std::numeric_limits<float>::infinity(), 0x7c00, 0x7f80}}) {
    INFO("value " << c.in);
    CHECK(f16(c.in).bits == c.h);
    CHECK(bf16(c.in).bits == c.b);
  }
  // NaN stays NaN; every f16 value survives a round trip through float.
  CHECK(std::isnan(static_cast<float>(f16(std::nanf("")))));
  CHECK(std::isnan(static_cast<float>(bf16(std::nanf("")))));
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue; // NaNs
    const float v = f16::to_float(static_cast<uint16_t>(h));
    REQUIRE(f16::from_float(v) == h);
  }
  CHECK(SharedTensor<f16>({3}).storage().bytes() == 6);
  CHECK(SharedTensor<bf16>({3}).storage().bytes() == 6);
}

TEST_CASE("a front-end error message keeps its parts after a null C string") {
  const char* unset = nullptr; // a reason nobody filled in
  try {
    ext::fail(pcy_blas_scal_schema, errc::invalid_argument, "argument alpha: ", unset,
              " (this op's choices: a, b)");
    FAIL("ext::fail returned");
  } catch (const error& e) {
    const std::string m = e.what();
    CHECK(m.find("blas.scal") != std::string::npos);
    CHECK(m.find("(null)") != std::string::npos);
    CHECK(m.find("this op's choices: a, b") != std::string::npos);
  }
}
