// Each array bundle re-checks the programs it is given: hostile programs sent straight through
// Backend::invoke (no front-end) are refused with an error naming the argument and the word, and
// seeded random mutations of valid programs are either refused or run without touching memory
// outside the tensors (the sanitizer builds run this too).
#include "array_backends.hpp"
#include "support/catch.hpp"
#include "support/scale.hpp"

#include <parenchyma/abi/ext/pcy_array.h>
#include <parenchyma/extension.hpp>
#include <parenchyma/parenchyma.hpp>
#include <parenchyma/registry.hpp>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

using namespace parenchyma;

namespace {

using array_test::array_backends;

int64_t w(int op, pcy_dtype t) { return PCY_ARRAY_WORD(op, t); }

// out[i] = in[i] * 2 over 16 elements: the program every case below starts from.
std::vector<int64_t> valid_copy() {
  return {PCY_ARRAY_PROGRAM_VERSION,
          1,
          0,
          2,
          3,
          16,
          /*out*/ 0,
          1,
          /*in*/ 0,
          1,
          w(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32),
          1,
          0,
          0,
          w(PCY_ARRAY_OP_CONST, PCY_DTYPE_F32),
          0x4000000000000000,
          0,
          0, // 2.0
          w(PCY_ARRAY_OP_MUL, PCY_DTYPE_F32),
          0,
          1,
          0};
}

std::string run(const Backend& b, const std::vector<int64_t>& prog, TensorStorage& out,
                TensorStorage& in) {
  const OpArg args[] = {OpArg::integers(prog), OpArg::out(out), OpArg::in(in)};
  try {
    b.invoke(ext::op_key<pcy_array_eval_1_schema>(PCY_DTYPE_F32), args);
    b.synchronize();
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument && e.code() != errc::unsupported)
      return std::string("unexpected code: ") + e.what();
    return e.what();
  }
  return "";
}

// The program over one tensor, its output and its input (in place).
std::string run_in_place(const Backend& b, const std::vector<int64_t>& prog, TensorStorage& t) {
  const OpArg args[] = {OpArg::integers(prog), OpArg::inout(t), OpArg::in(t)};
  try {
    b.invoke(ext::op_key<pcy_array_eval_1_schema>(PCY_DTYPE_F32), args);
    b.synchronize();
  } catch (const error& e) {
    if (e.code() != errc::invalid_argument && e.code() != errc::unsupported)
      return std::string("unexpected code: ") + e.what();
    return e.what();
  }
  return "";
}

} // namespace

TEST_CASE("array bundles refuse hostile programs, naming the argument and the word", "[array]") {
  for (const Backend& b : array_backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> in({16}), out({16});
    for (float& v : in.write_only())
      v = 1.5f;
    REQUIRE(run(b, valid_copy(), out, in).empty());
    CHECK(out.read()[15] == 3.0f);
    struct bad {
      const char* why;
      size_t word;
      int64_t value;
      const char* says;
    };
    const bad cases[] = {
        {"version", 0, 7, "version"},
        {"rank", 1, 9, "rank"},
        {"reduced dimensions in eval", 2, 1, "reduced"},
        {"operand count", 3, 3, "operands"},
        {"instruction count", 4, 0, "instructions"},
        {"negative extent", 5, -1, "extent"},
        {"output past its end", 7, 2, "addresses elements"},
        {"input before its start", 8, -1, "addresses elements"},
        {"huge stride", 9, int64_t{1} << 60, "addresses elements"},
        {"unknown op", 10, w(99, PCY_DTYPE_F32), "unknown op"},
        {"LOAD of a missing operand", 11, 5, "not an input"},
        {"LOAD of the wrong dtype", 10, w(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F64), "dtype"},
        {"a later register", 19, 2, "earlier instruction"},
        {"a negative register", 20, -1, "earlier instruction"},
        {"unknown dtype", 18, w(PCY_ARRAY_OP_MUL, static_cast<pcy_dtype>(42)), "unknown dtype"},
        {"value of another dtype", 18, w(PCY_ARRAY_OP_MUL, PCY_DTYPE_F64), "operands"},
    };
    for (const bad& c : cases) {
      INFO(c.why);
      std::vector<int64_t> p = valid_copy();
      p[c.word] = c.value;
      const std::string msg = run(b, p, out, in);
      CHECK(msg.find("argument program") != std::string::npos);
      CHECK(msg.find(c.says) != std::string::npos);
    }
    // A truncated and an over-long program.
    std::vector<int64_t> p = valid_copy();
    p.pop_back();
    CHECK(run(b, p, out, in).find("argument program") != std::string::npos);
    p = valid_copy();
    p.push_back(0);
    CHECK(run(b, p, out, in).find("argument program") != std::string::npos);
    // The output through another view of an input: refused.
    p = valid_copy();
    p[8] = 0;
    p[9] = 1;
    const OpArg same[] = {OpArg::integers(p), OpArg::inout(out), OpArg::in(out)};
    p[6] = 15;
    p[7] = -1; // out reversed over the same memory
    try {
      b.invoke(ext::op_key<pcy_array_eval_1_schema>(PCY_DTYPE_F32), same);
      FAIL("aliasing through another view was accepted");
    } catch (const error& e) {
      CHECK(std::string(e.what()).find("shares memory with the output") != std::string::npos);
    }
  }
}

TEST_CASE("array bundles survive seeded random mutations of valid programs", "[array]") {
  const int rounds = parenchyma::test::stress_scaled(3000);
  for (const Backend& b : array_backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> in({16}), out({16});
    for (float& v : in.write_only())
      v = 0.5f;
    std::mt19937_64 rng(20261206);
    const std::vector<int64_t> base = valid_copy();
    int refused = 0, ran = 0;
    for (int r = 0; r < rounds; ++r) {
      std::vector<int64_t> p = base;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % p.size();
        switch (rng() % 4) {
        case 0: p[at] = static_cast<int64_t>(rng() % 40) - 20; break;
        case 1: p[at] = static_cast<int64_t>(rng()); break;
        case 2: p[at] ^= int64_t{1} << (rng() % 63); break;
        default:
          p[at] = w(static_cast<int>(1 + rng() % 70), static_cast<pcy_dtype>(1 + rng() % 10));
        }
      }
      const std::string msg = run(b, p, out, in);
      INFO("round " << r << ": " << msg);
      REQUIRE(msg.find("unexpected code") == std::string::npos);
      (msg.empty() ? ran : refused)++;
    }
    CHECK(refused > 0);
    CHECK(ran > 0);
  }
}

TEST_CASE("array bundles refuse bad sort_1 arguments, naming them", "[array][sort]") {
  for (const Backend& b : array_backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> in({16}), out({16});
    SharedTensor<int64_t> idx({16});
    for (float& v : in.write_only())
      v = 1.5f;
    // out = sort(in) over one row of 16: rank 1, one reduced dimension, a LOAD
    const std::vector<int64_t> prog = {
        PCY_ARRAY_PROGRAM_VERSION,           1, 1, 2, 1, 16, 0, 1, 0, 1,
        w(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32), 1, 0, 0};
    auto sort = [&](const std::vector<int64_t>& p, TensorStorage& o, pcy_dtype t, int64_t kind,
                    int64_t desc, TensorStorage& i) -> std::string {
      const OpArg args[] = {OpArg::integers(p), OpArg::out(o), OpArg::integer(kind),
                            OpArg::integer(desc), OpArg::in(i)};
      try {
        b.invoke(ext::op_key<pcy_array_sort_1_schema>(t), args);
        b.synchronize();
      } catch (const error& e) {
        return e.what();
      }
      return "";
    };
    TensorStorage &fo = out.storage(), &fi = in.storage(), &io = idx.storage();
    CHECK(sort(prog, fo, PCY_DTYPE_F32, PCY_ARRAY_SORT_SORT, 0, fi).empty());
    CHECK(sort(prog, io, PCY_DTYPE_I64, PCY_ARRAY_SORT_ARGSORT, 1, fi).empty());
    CHECK(idx.read()[15] == 15); // all equal: stable, descending too
    CHECK(sort(prog, fo, PCY_DTYPE_F32, 2, 0, fi).find("argument kind") != std::string::npos);
    CHECK(sort(prog, fo, PCY_DTYPE_F32, PCY_ARRAY_SORT_SORT, 2, fi).find("argument descending") !=
          std::string::npos);
    CHECK(sort(prog, fo, PCY_DTYPE_F32, PCY_ARRAY_SORT_ARGSORT, 0, fi).find("i64") !=
          std::string::npos);
    std::vector<int64_t> p = prog;
    p[2] = 0; // no sorted dimension
    CHECK(sort(p, fo, PCY_DTYPE_F32, PCY_ARRAY_SORT_SORT, 0, fi).find("argument program") !=
          std::string::npos);
    p = prog;
    p[5] = 17; // a row past the tensors' end
    CHECK(sort(p, fo, PCY_DTYPE_F32, PCY_ARRAY_SORT_SORT, 0, fi).find("addresses elements") !=
          std::string::npos);
    // in place (the output is the input): refused, a sort reads the whole row first
    CHECK(sort(prog, fi, PCY_DTYPE_F32, PCY_ARRAY_SORT_SORT, 0, fi).find("shares memory") !=
          std::string::npos);
  }
}

TEST_CASE("array bundles check a repeated program again when its tensors change (the memo of "
          "the last program is keyed by its words and its tensors)",
          "[array][memo]") {
  for (const Backend& b : array_backends()) {
    INFO("backend " << b.name());
    SharedTensor<float> in({16}), out({16}), small({8});
    for (float& v : in.write_only())
      v = 1.5f;
    for (float& v : small.write_only())
      v = 1.5f;
    const std::vector<int64_t> p = valid_copy();
    REQUIRE(run(b, p, out, in).empty());
    REQUIRE(run(b, p, out, in).empty()); // repeated
    CHECK(out.read()[15] == 3.0f);
    // The same words over a tensor too small for them: refused, as the first time.
    CHECK(run(b, p, out, small).find("addresses elements") != std::string::npos);
    REQUIRE(run(b, p, out, in).empty());
    CHECK(run(b, p, small, in).find("addresses elements") != std::string::npos);
    REQUIRE(run(b, p, out, in).empty());
    CHECK(out.read()[0] == 3.0f);
    // The memo binds memory per call: new tensors of the same views repeat the program...
    for (int i = 0; i < 4; ++i) {
      SharedTensor<float> in2({16}), out2({16});
      for (size_t j = 0; j < 16; ++j)
        in2.write_only()[j] = static_cast<float>(i * 16 + static_cast<int>(j));
      REQUIRE(run(b, p, out2, in2).empty());
      for (size_t j = 0; j < 16; ++j)
        CHECK(out2.read()[j] == 2.0f * static_cast<float>(i * 16 + static_cast<int>(j)));
    }
    // ... but which operands share memory is part of its key: the same words with the output
    // reversed over distinct tensors run, over the input's own memory they are refused (the
    // aliasing check runs again), and distinct again they run.
    std::vector<int64_t> rev = valid_copy();
    rev[6] = 15;
    rev[7] = -1;
    for (int round = 0; round < 2; ++round) {
      REQUIRE(run(b, rev, out, in).empty());
      REQUIRE(run(b, rev, out, in).empty());
      CHECK(out.read()[0] == 3.0f);
      CHECK(run_in_place(b, rev, in).find("shares memory with the output") != std::string::npos);
      CHECK(in.read()[0] == 1.5f); // refused before running
    }
    // In place through the same view, after the distinct tensors (and back).
    REQUIRE(run(b, p, out, in).empty());
    REQUIRE(run_in_place(b, p, in).empty());
    CHECK(in.read()[3] == 3.0f);
    REQUIRE(run(b, p, out, in).empty());
    CHECK(out.read()[3] == 6.0f);
  }
}
