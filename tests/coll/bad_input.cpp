// coll bad input, in one process (a communicator of one rank; run under `mpirun -np 1`). Through
// the front-end (parenchyma/coll.hpp): dtypes, sizes, aliasing, roots, peers, tags, reductions and
// tensors never written throw the right errc with origin "coll.<op>" and a message naming the
// argument, before anything runs. Then the native bundle is called directly with values the
// front-end would refuse (an unknown communicator, sizes that differ): it must refuse them too.
#include "support/catch.hpp"

#include <parenchyma/coll.hpp>
#include <parenchyma/parenchyma.hpp>

#include <string>
#include <vector>

using namespace parenchyma;
using coll::reduce_op;

namespace {

template <class F>
void expect_error(F&& f, errc code, const std::string& origin, std::vector<std::string> needles) {
  try {
    f();
    FAIL("no error thrown (expected " << needles.front() << ")");
  } catch (const parenchyma::error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    if (!origin.empty()) CHECK(e.origin() == origin);
    for (const auto& n : needles)
      CHECK(std::string(e.what()).find(n) != std::string::npos);
  }
}

SharedTensor<float> filled(int64_t n, float v = 1) {
  SharedTensor<float> t({n});
  for (float& x : t.write_only())
    x = v;
  return t;
}

const coll::Communicator& world() {
  static const Backend b;
  static const coll::Communicator c(b);
  return c;
}

} // namespace

TEST_CASE("a communicator of one process reports rank 0 of 1", "[coll]") {
  const auto& c = world();
  CHECK(c.rank() == 0);
  CHECK(c.size() == 1);
  CHECK(c.local_rank() == 0);
  CHECK(c.local_size() == 1);
  // Every op of one rank is the identity (or a copy).
  auto x = filled(7, 3);
  SharedTensor<float> y({7});
  c.all_reduce(x, y, reduce_op::avg);
  for (float v : y.read())
    CHECK(v == 3);
}

TEST_CASE("the front-end refuses bad input before anything runs", "[coll]") {
  const auto& c = world();
  auto x = filled(7);
  SharedTensor<float> y8({8});
  expect_error([&] { c.all_reduce(x, y8); }, errc::invalid_argument, "coll.all_reduce",
               {"argument y", "8 elements", "expected 7"});
  expect_error([&] { c.all_reduce(x, x); }, errc::invalid_argument, "coll.all_reduce", {"x", "y"});
  SharedTensor<double> yd({7});
  expect_error([&] { c.all_reduce(x, yd); }, errc::invalid_argument, "coll.all_reduce",
               {"argument y", "dtype"});
  SharedTensor<uint8_t> u({7});
  u.write_only();
  expect_error([&] { c.all_reduce(u); }, errc::invalid_argument, "coll.all_reduce_inplace", {"u8"});
  SharedTensor<float> never({7});
  expect_error([&] { c.all_reduce(never); }, errc::uninitialized, "coll.all_reduce_inplace",
               {"argument x", "never written"});
  expect_error([&] { c.all_reduce(x, static_cast<reduce_op>(9)); }, errc::invalid_argument,
               "coll.all_reduce_inplace", {"argument reduce", "9"});
  expect_error([&] { c.broadcast(x, 1); }, errc::invalid_argument, "coll.broadcast",
               {"argument root", "rank 1", "1 ranks"});
  expect_error([&] { c.reduce(x, reduce_op::sum, -1); }, errc::invalid_argument,
               "coll.reduce_inplace", {"argument root"});
  expect_error([&] { c.all_gather(x, y8); }, errc::invalid_argument, "coll.all_gather",
               {"argument y", "expected 7"});
  auto x14 = filled(14);
  expect_error([&] { c.reduce_scatter(x14, y8); }, errc::invalid_argument, "coll.reduce_scatter",
               {"argument x", "14 elements", "expected 8"});
  expect_error([&] { c.all_to_all(x, y8); }, errc::invalid_argument, "coll.all_to_all",
               {"argument y"});
  expect_error([&] { c.send(x, 0); }, errc::invalid_argument, "coll.send",
               {"argument peer", "this rank"});
  expect_error([&] { c.recv(x, 3); }, errc::invalid_argument, "coll.recv", {"argument peer"});
  // x kept its contents through every refusal.
  for (float v : x.read())
    CHECK(v == 1);
}

TEST_CASE("the native bundle re-checks what the front-end checks", "[coll]") {
  const auto& c = world();
  const Backend& b = c.backend();
  // An id that no comm_init returned.
  expect_error(
      [&] { ext::invoke<pcy_coll_barrier_schema>(b, PCY_DTYPE_I64, {OpArg::integer(999)}); },
      errc::invalid_argument, "", {"argument comm", "999"});
  // Sizes that differ, past the front-end.
  auto x = filled(7);
  SharedTensor<float> y({8});
  expect_error(
      [&] {
        ext::invoke<pcy_coll_all_reduce_schema>(b, PCY_DTYPE_F32,
                                                {OpArg::integer(1), OpArg::integer(0),
                                                 OpArg::in(x.storage()), OpArg::out(y.storage())});
      },
      errc::invalid_argument, "", {"all_reduce", "argument y", "expected 7"});
  // A reduction outside the list.
  expect_error(
      [&] {
        ext::invoke<pcy_coll_all_reduce_inplace_schema>(
            b, PCY_DTYPE_F32, {OpArg::integer(1), OpArg::integer(-3), OpArg::inout(x.storage())});
      },
      errc::invalid_argument, "", {"argument reduce", "-3"});
  for (float v : x.read())
    CHECK(v == 1);
}
