// The GPU array bundles (array_opencl, array_cuda: one code generator; array_vulkan: its GLSL
// dialect) against the native bundle,
// program by program, on raw bit patterns: every exact instruction (integer wrap, NumPy's divmod,
// minimum/maximum, comparisons, shifts, floor/ceil/round/trunc, sqrt, division, copysign,
// nextafter) on every dtype it takes, every cast between the ten dtypes (half inputs as arbitrary
// 16-bit patterns), gathers and indices through strided, transposed and broadcast views — all
// to the bit (NaNs compared as NaNs); reductions of every kind along inner and outer dimensions
// (exact where the order cannot matter: integers, min/max, arg kinds, all/any; within a few ulp
// of f32/f64 rounding for sums); scans (sequential on every bundle: to the bit); random draws
// against pcy_array_random.h computed here, and against the native bundle once it has the op.
// Runs on every framework here with a device and an array bundle besides native (opencl with
// PoCL on the CPU machine; cuda on a GPU machine).
#include "suite/flush_rule.hpp"
#include "support/catch.hpp"
#include "support/random.hpp"

#include <parenchyma/abi/ext/pcy_array.h>
#include <parenchyma/abi/ext/pcy_array_random.h>
#include <parenchyma/array.hpp>
#include <parenchyma/extension.hpp>
#include <parenchyma/registry.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

using namespace parenchyma;
namespace pa = parenchyma::array;
using pcy_test_support::rng;

namespace {

bool has_array_bundle(const char* fw) {
  Registry& reg = Registry::global();
  const Framework* f = reg.find_framework(fw);
  if (f == nullptr || f->devices().empty()) return false;
  for (const auto& b : reg.bundles())
    if (b->extension() == "array" && b->framework() == fw && !b->ops().empty()) return true;
  return false;
}
bool has_op(const char* fw, const char* op) {
  for (const auto& b : Registry::global().bundles())
    if (b->extension() == "array" && b->framework() == fw)
      for (const auto& o : b->ops())
        if (std::string(o->name) == op) return true;
  return false;
}
// The GPU frameworks with an array bundle; with `op`, only those whose bundle has it (an op a
// bundle lacks would fall back to native and compare native with itself).
std::vector<Backend> gpu_backends(const char* op = nullptr) {
  std::vector<Backend> out;
  for (const char* n : {"opencl", "cuda", "vulkan"})
    if (has_array_bundle(n) && (op == nullptr || has_op(n, op))) out.emplace_back(n);
  return out;
}

size_t dsize(int d) {
  switch (d) {
  case PCY_DTYPE_F64:
  case PCY_DTYPE_I64: return 8;
  case PCY_DTYPE_F32:
  case PCY_DTYPE_I32: return 4;
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16:
  case PCY_DTYPE_I16: return 2;
  default: return 1;
  }
}
bool is_floating(int d) {
  return d == PCY_DTYPE_F32 || d == PCY_DTYPE_F64 || d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16;
}
bool is_integer(int d) {
  return d == PCY_DTYPE_I8 || d == PCY_DTYPE_I16 || d == PCY_DTYPE_I32 || d == PCY_DTYPE_I64 ||
         d == PCY_DTYPE_U8;
}
const char* dname(int d) {
  switch (d) {
  case PCY_DTYPE_F32: return "f32";
  case PCY_DTYPE_F64: return "f64";
  case PCY_DTYPE_I8: return "i8";
  case PCY_DTYPE_I16: return "i16";
  case PCY_DTYPE_I32: return "i32";
  case PCY_DTYPE_I64: return "i64";
  case PCY_DTYPE_U8: return "u8";
  case PCY_DTYPE_BOOL: return "bool";
  case PCY_DTYPE_F16: return "f16";
  case PCY_DTYPE_BF16: return "bf16";
  default: return "?";
  }
}
// Element i of raw data as a double (NaN-aware comparisons; halves decoded).
double value_at(const std::vector<uint8_t>& b, int d, size_t i) {
  const uint8_t* p = b.data() + i * dsize(d);
  auto half = [](uint16_t h, int mant, int bias, int ebits) {
    const int e = (h >> mant) & ((1 << ebits) - 1);
    const int f = h & ((1 << mant) - 1);
    double v = e == 0                  ? std::ldexp(f, 1 - bias - mant)
               : e == (1 << ebits) - 1 ? (f ? std::numeric_limits<double>::quiet_NaN() : INFINITY)
                                       : std::ldexp(f | (1 << mant), e - bias - mant);
    return (h & 0x8000) ? -v : v;
  };
  switch (d) {
  case PCY_DTYPE_F32: {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  case PCY_DTYPE_F64: {
    double f;
    std::memcpy(&f, p, 8);
    return f;
  }
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return d == PCY_DTYPE_F16 ? half(h, 10, 15, 5) : half(h, 7, 127, 8);
  }
  default: return 0;
  }
}

// Raw bytes equal element by element, NaN == NaN for floating dtypes; returns the first
// differing element or -1.
int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, int d) {
  const size_t es = dsize(d), n = a.size() / es;
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(a.data() + i * es, b.data() + i * es, es) == 0) continue;
    if (is_floating(d) && std::isnan(value_at(a, d, i)) && std::isnan(value_at(b, d, i))) continue;
    return static_cast<int64_t>(i);
  }
  return -1;
}
std::string show(const std::vector<uint8_t>& b, int d, int64_t i) {
  std::string s;
  const size_t es = dsize(d);
  uint64_t bits = 0;
  std::memcpy(&bits, b.data() + static_cast<size_t>(i) * es, es);
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(bits));
  s = buf;
  if (is_floating(d)) s += " (" + std::to_string(value_at(b, d, static_cast<size_t>(i))) + ")";
  return s;
}

// Raw data of n elements of dtype d: special values first, then random ones.
std::vector<uint8_t> awkward(int d, size_t n, bool shift_counts = false) {
  std::vector<uint8_t> out(n * dsize(d));
  auto& g = rng();
  std::uniform_int_distribution<uint64_t> bits;
  for (size_t i = 0; i < n; ++i) {
    uint8_t* p = out.data() + i * dsize(d);
    const uint64_t r = bits(g);
    switch (d) {
    case PCY_DTYPE_F32:
    case PCY_DTYPE_F64: {
      static const double specials[] = {0.0,
                                        -0.0,
                                        1.0,
                                        -1.0,
                                        0.5,
                                        -0.5,
                                        1.5,
                                        2.5,
                                        -2.5,
                                        3.0,
                                        -7.0,
                                        INFINITY,
                                        -INFINITY,
                                        NAN,
                                        1e300,
                                        -1e300,
                                        3e38,
                                        -3.4e38,
                                        1e-310,
                                        -1e-40,
                                        1e-45,
                                        65504.0,
                                        65520.0,
                                        1e-8,
                                        9.2233720368547758e18,
                                        -9.2233720368547758e18,
                                        2147483647.5,
                                        -2147483648.7,
                                        300.5,
                                        -128.5,
                                        255.9,
                                        1.0000001,
                                        0.1,
                                        1e-30};
      double v;
      if (i < std::size(specials))
        v = specials[i];
      else {
        // random sign, exponent, mantissa; a quarter small integers and halves
        const int e = static_cast<int>(r % 160) - 80;
        v = std::ldexp(static_cast<double>(r >> 11) * 0x1p-53 + 0.5, e) * ((r >> 10) & 1 ? -1 : 1);
        if ((r & 3) == 0) v = std::round(v * 2) / 2;
        if ((r & 15) == 1) v = static_cast<double>(static_cast<int>(r >> 40) % 20 - 10);
      }
      if (d == PCY_DTYPE_F32) {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else {
        std::memcpy(p, &v, 8);
      }
      break;
    }
    case PCY_DTYPE_F16:
    case PCY_DTYPE_BF16: {
      const uint16_t h = static_cast<uint16_t>(r);
      std::memcpy(p, &h, 2);
      break;
    }
    case PCY_DTYPE_BOOL:
      *p = (r & 3) == 0 ? static_cast<uint8_t>(r >> 8) : static_cast<uint8_t>(r & 1);
      break;
    default: {
      const size_t es = dsize(d);
      uint64_t v = r;
      const uint64_t top = es == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * es)) - 1;
      const uint64_t smin = uint64_t{1} << (8 * es - 1);
      static const int64_t small[] = {0, 1, -1, 2, -2, 7, -7, 3};
      if (i < 8)
        v = static_cast<uint64_t>(small[i]);
      else if (i == 8)
        v = smin; // MIN (signed) / 128 (u8)
      else if (i == 9)
        v = smin - 1; // MAX
      else if ((r & 3) == 0)
        v = static_cast<uint64_t>(static_cast<int64_t>(r >> 20) % 100 - 50);
      if (shift_counts && (r & 1))
        v = static_cast<uint64_t>(static_cast<int64_t>(r >> 30) % 75 - 3);
      v &= top;
      std::memcpy(p, &v, es);
      break;
    }
    }
  }
  return out;
}

// A program's words.
struct program_words {
  int64_t rank = 1, reduced = 0;
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> views; // per operand: offset, strides[rank]
  std::vector<std::array<int64_t, 4>> code;
  int add(int op, int dtype, int64_t a = 0, int64_t b = 0, int64_t c = 0, int64_t extent = 0) {
    code.push_back({PCY_ARRAY_WORD(op, dtype) | (extent << 16), a, b, c});
    return static_cast<int>(code.size()) - 1;
  }
  std::vector<int64_t> words() const {
    std::vector<int64_t> w{PCY_ARRAY_PROGRAM_VERSION, rank, reduced,
                           static_cast<int64_t>(views.size()), static_cast<int64_t>(code.size())};
    w.insert(w.end(), shape.begin(), shape.end());
    for (const auto& v : views)
      w.insert(w.end(), v.begin(), v.end());
    for (const auto& c : code)
      w.insert(w.end(), c.begin(), c.end());
    return w;
  }
};

// A scan's program over `rows` dense rows of `len` values of dtype t, as loaded.
program_words scan_rows(int64_t rows, int64_t len, int t) {
  program_words p;
  p.rank = 2;
  p.reduced = 1;
  p.shape = {rows, len};
  p.views = {{0, len, 1}, {0, len, 1}};
  p.add(PCY_ARRAY_OP_LOAD, t, 1);
  return p;
}

struct input {
  int dtype;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> shape; // the tensor's shape
};

std::shared_ptr<TensorStorage> upload(const Backend& b, const input& in) {
  pa::Array a(b, in.shape, static_cast<pcy_dtype>(in.dtype));
  auto st = a.node()->storage;
  std::memcpy(st->host(access::write_only), in.bytes.data(), in.bytes.size());
  return st;
}

enum class opkind { eval, reduce, scan };

// Runs a program on b; returns the output's bytes (out_elems elements of out_dtype).
std::vector<uint8_t> run_on(const Backend& b, opkind k, const program_words& p, int out_dtype,
                            int64_t out_elems, const std::vector<input>& inputs, int64_t kind,
                            double correction);
// array_vulkan serves only the programs it writes exactly in GLSL and refuses the others
// (transcendental functions, the half types) with errc::unsupported: such a case is reported
// (once per reason) and checked on the native bundle only.
std::vector<uint8_t> run(const Backend& b, opkind k, const program_words& p, int out_dtype,
                         int64_t out_elems, const std::vector<input>& inputs, int64_t kind = 0,
                         double correction = 0) {
  if (b.framework().name() != "vulkan")
    return run_on(b, k, p, out_dtype, out_elems, inputs, kind, correction);
  try {
    return run_on(b, k, p, out_dtype, out_elems, inputs, kind, correction);
  } catch (const error& e) {
    if (e.code() != errc::unsupported) throw;
    static std::set<std::string> seen;
    if (seen.insert(e.what()).second) WARN("skipped on vulkan: " << e.what());
    return run_on(Backend("native"), k, p, out_dtype, out_elems, inputs, kind, correction);
  }
}
std::vector<uint8_t> run_on(const Backend& b, opkind k, const program_words& p, int out_dtype,
                            int64_t out_elems, const std::vector<input>& inputs, int64_t kind,
                            double correction) {
  pa::Array out(b, {out_elems}, static_cast<pcy_dtype>(out_dtype));
  auto ost = out.node()->storage;
  std::memset(ost->host(access::write_only), 0xA5,
              static_cast<size_t>(out_elems) * dsize(out_dtype));
  std::vector<std::shared_ptr<TensorStorage>> ins;
  for (const input& in : inputs)
    ins.push_back(upload(b, in));
  const std::vector<int64_t> words = p.words();
  std::vector<OpArg> args{OpArg::integers(words), OpArg::inout(*ost)};
  if (k == opkind::reduce) {
    args.push_back(OpArg::integer(kind));
    args.push_back(OpArg::real(correction));
  } else if (k == opkind::scan) {
    args.push_back(OpArg::integer(kind));
  }
  for (auto& s : ins)
    args.push_back(OpArg::in(*s));
  const pcy_dtype t = static_cast<pcy_dtype>(out_dtype);
  const size_t n = inputs.size();
  if (k == opkind::eval) {
    static const OpKey& (*keys[])(pcy_dtype) = {
        &ext::op_key<pcy_array_eval_0_schema>, &ext::op_key<pcy_array_eval_1_schema>,
        &ext::op_key<pcy_array_eval_2_schema>, &ext::op_key<pcy_array_eval_3_schema>};
    b.invoke(keys[n](t), args);
  } else if (k == opkind::reduce) {
    static const OpKey& (*keys[])(pcy_dtype) = {&ext::op_key<pcy_array_reduce_1_schema>,
                                                &ext::op_key<pcy_array_reduce_2_schema>};
    b.invoke(keys[n - 1](t), args);
  } else {
    b.invoke(ext::op_key<pcy_array_scan_1_schema>(t), args);
  }
  const auto* r = static_cast<const uint8_t*>(ost->host_read());
  return std::vector<uint8_t>(r, r + static_cast<size_t>(out_elems) * dsize(out_dtype));
}

constexpr int arith_all[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_I16,
                             PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_BOOL};
constexpr int all_types_all[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_I16,
                                 PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_BOOL,
                                 PCY_DTYPE_F16, PCY_DTYPE_BF16};
// Every dtype where a GPU is present or PARENCHYMA_ARRAY_GPU_ALL=1; with only CPU devices (PoCL in
// CI, where each new program costs its compiler about 0.7 s) one of each kind: f32, f64, i8
// (narrow signed), i64, u8 (unsigned), bool, and f16 for the casts.
bool exhaustive() {
  static const bool yes = [] {
    if (const char* v = std::getenv("PARENCHYMA_ARRAY_GPU_ALL"); v != nullptr && *v == '1')
      return true;
    for (const Backend& b : gpu_backends())
      if (b.device().kind != device_kind::cpu) return true;
    return false;
  }();
  return yes;
}
// Vulkan's cases trimmed (only CPU devices, as lavapipe in CI, where each new shader costs its
// compile, and no PARENCHYMA_ARRAY_GPU_ALL=1): the reductions', scans' and sorts' kernels in a
// few dtypes that take each code path.
bool lean_on(const Backend& b) { return b.framework().name() == "vulkan" && !exhaustive(); }

std::vector<int> arith_types() {
  if (exhaustive()) return {std::begin(arith_all), std::end(arith_all)};
  return {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_BOOL};
}
std::vector<int> reduce_types() {
  if (exhaustive()) return {std::begin(arith_all), std::end(arith_all)};
  return {PCY_DTYPE_F32, PCY_DTYPE_I64, PCY_DTYPE_BOOL};
}
std::vector<int> cast_types() {
  if (exhaustive()) return {std::begin(all_types_all), std::end(all_types_all)};
  return {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_U8, PCY_DTYPE_BOOL, PCY_DTYPE_F16};
}

bool defined_on(int op, int t) {
  const bool num = is_integer(t) || t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64;
  const bool fl = t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64;
  switch (op) {
  case PCY_ARRAY_OP_NEG:
  case PCY_ARRAY_OP_ABS:
  case PCY_ARRAY_OP_SIGN:
  case PCY_ARRAY_OP_SQUARE:
  case PCY_ARRAY_OP_ADD:
  case PCY_ARRAY_OP_SUB:
  case PCY_ARRAY_OP_MUL:
  case PCY_ARRAY_OP_FLOORDIV:
  case PCY_ARRAY_OP_REM:
  case PCY_ARRAY_OP_MINIMUM:
  case PCY_ARRAY_OP_MAXIMUM: return num;
  case PCY_ARRAY_OP_POW: return is_integer(t); // floating pow is not exact
  case PCY_ARRAY_OP_NOT:
  case PCY_ARRAY_OP_AND:
  case PCY_ARRAY_OP_OR:
  case PCY_ARRAY_OP_XOR: return is_integer(t) || t == PCY_DTYPE_BOOL;
  case PCY_ARRAY_OP_SHL:
  case PCY_ARRAY_OP_SHR: return is_integer(t);
  case PCY_ARRAY_OP_ISNAN:
  case PCY_ARRAY_OP_ISINF:
  case PCY_ARRAY_OP_ISFINITE:
  case PCY_ARRAY_OP_SQRT:
  case PCY_ARRAY_OP_RSQRT:
  case PCY_ARRAY_OP_FLOOR:
  case PCY_ARRAY_OP_CEIL:
  case PCY_ARRAY_OP_ROUND:
  case PCY_ARRAY_OP_TRUNC:
  case PCY_ARRAY_OP_DIV:
  case PCY_ARRAY_OP_COPYSIGN:
  case PCY_ARRAY_OP_NEXTAFTER: return fl;
  case PCY_ARRAY_OP_EQ:
  case PCY_ARRAY_OP_NE:
  case PCY_ARRAY_OP_LT:
  case PCY_ARRAY_OP_LE:
  case PCY_ARRAY_OP_GT:
  case PCY_ARRAY_OP_GE: return true;
  default: return false;
  }
}
int arity(int op) {
  if (op >= PCY_ARRAY_OP_ADD && op <= PCY_ARRAY_OP_LOGADDEXP) return 2;
  return 1;
}
int result_of(int op, int t) {
  if ((op >= PCY_ARRAY_OP_EQ && op <= PCY_ARRAY_OP_GE) || op == PCY_ARRAY_OP_ISNAN ||
      op == PCY_ARRAY_OP_ISINF || op == PCY_ARRAY_OP_ISFINITE)
    return PCY_DTYPE_BOOL;
  return t;
}

} // namespace

namespace {

// On a device that may flush f32 subnormals (may_flush_f32, shared with the conformance suites:
// tools/conformance/suite/flush_rule.hpp) an f32 subnormal input or result may be a zero of the
// same sign (docs/vulkan.md).
using parenchyma::conformance::may_flush_f32;
// f32 bits with a subnormal replaced by the zero of its sign.
uint32_t flushed(uint32_t bits) {
  return (bits & 0x7F800000u) == 0 ? (bits & 0x80000000u) : bits;
}
std::vector<uint8_t> flushed_f32(std::vector<uint8_t> v) {
  for (size_t i = 0; i + 4 <= v.size(); i += 4) {
    uint32_t b;
    std::memcpy(&b, v.data() + i, 4);
    b = flushed(b);
    std::memcpy(v.data() + i, &b, 4);
  }
  return v;
}
// The first element of got that is neither want's nor, with f32 subnormals flushed, the native
// result from flushed inputs (want_ftz) or either with its result flushed; there got's own
// subnormal counts as the zero of its sign (a select, as minimum's, passes the bits of an operand
// it compared as zero); -1 if none.
int64_t first_difference_ftz(const std::vector<uint8_t>& want,
                             const std::vector<uint8_t>& want_ftz,
                             const std::vector<uint8_t>& got, int d) {
  const size_t es = dsize(d), n = want.size() / es;
  if (want.size() != got.size() || want_ftz.size() != got.size()) return 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* g = got.data() + i * es;
    if (std::memcmp(want.data() + i * es, g, es) == 0 ||
        std::memcmp(want_ftz.data() + i * es, g, es) == 0)
      continue;
    if (is_floating(d) && std::isnan(value_at(got, d, i)) &&
        (std::isnan(value_at(want, d, i)) || std::isnan(value_at(want_ftz, d, i))))
      continue;
    if (d == PCY_DTYPE_F32) {
      uint32_t gb, wb, fb;
      std::memcpy(&gb, g, 4);
      std::memcpy(&wb, want.data() + i * es, 4);
      std::memcpy(&fb, want_ftz.data() + i * es, 4);
      if (flushed(gb) == flushed(wb) || flushed(gb) == flushed(fb)) continue;
    }
    return static_cast<int64_t>(i);
  }
  return -1;
}

} // namespace

TEST_CASE("array gpu: every exact instruction matches the native bundle to the bit",
          "[array][gpu]") {
  const auto gpus = gpu_backends();
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  const int64_t rows = 13, cols = 21, n = rows * cols;
  for (int t : arith_types()) {
    // x: a transposed view of a cols x rows tensor; y: dense; both rows x cols
    const input x{t, awkward(t, static_cast<size_t>(n)), {cols, rows}};
    for (int op = PCY_ARRAY_OP_NEG; op < PCY_ARRAY_OP_WHERE; ++op) {
      if (!defined_on(op, t)) continue;
      const bool shifts =
          op == PCY_ARRAY_OP_SHL || op == PCY_ARRAY_OP_SHR || op == PCY_ARRAY_OP_POW;
      const input y{t, awkward(t, static_cast<size_t>(n), shifts), {rows, cols}};
      program_words p;
      p.rank = 2;
      p.shape = {rows, cols};
      p.views = {{0, cols, 1}, {0, 1, rows}, {0, cols, 1}};
      const int a = p.add(PCY_ARRAY_OP_LOAD, t, 1);
      const int b = p.add(PCY_ARRAY_OP_LOAD, t, 2);
      const int out_t = result_of(op, t);
      p.add(op, out_t, a, arity(op) == 2 ? b : 0);
      const auto want = run(native, opkind::eval, p, out_t, n, {x, y});
      for (const Backend& g : gpus) {
        INFO(g.name() << ": op " << op << " on " << dname(t));
        const auto got = run(g, opkind::eval, p, out_t, n, {x, y});
        int64_t i = first_difference(want, got, out_t);
        if (i >= 0 && t == PCY_DTYPE_F32 && may_flush_f32(g)) {
          const input fx{t, flushed_f32(x.bytes), x.shape}, fy{t, flushed_f32(y.bytes), y.shape};
          i = first_difference_ftz(want, run(native, opkind::eval, p, out_t, n, {fx, fy}), got,
                                   out_t);
        }
        INFO("element " << i << ": native " << (i >= 0 ? show(want, out_t, i) : "") << ", "
                        << g.name() << " " << (i >= 0 ? show(got, out_t, i) : ""));
        CHECK(i == -1);
      }
    }
  }
}

TEST_CASE("array gpu: every cast between the ten dtypes matches the native bundle to the bit",
          "[array][gpu]") {
  const auto gpus = gpu_backends();
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  const int64_t n = 4096;
  for (int from : cast_types()) {
    const input x{from, awkward(from, static_cast<size_t>(n)), {n}};
    for (int to : cast_types()) {
      if (to == from) continue;
      program_words p;
      p.shape = {n};
      p.views = {{0, 1}, {0, 1}};
      const int a = p.add(PCY_ARRAY_OP_LOAD, from, 1);
      p.add(PCY_ARRAY_OP_CAST, to, a);
      const auto want = run(native, opkind::eval, p, to, n, {x});
      for (const Backend& g : gpus) {
        INFO(g.name() << ": cast " << dname(from) << " -> " << dname(to));
        const auto got = run(g, opkind::eval, p, to, n, {x});
        const int64_t i = first_difference(want, got, to);
        INFO("element " << i << ": from " << (i >= 0 ? show(x.bytes, from, i) : "") << " native "
                        << (i >= 0 ? show(want, to, i) : "") << ", " << g.name() << " "
                        << (i >= 0 ? show(got, to, i) : ""));
        CHECK(i == -1);
      }
    }
  }
}

TEST_CASE("array gpu: gather, index, where and constants through broadcast views", "[array][gpu]") {
  const auto gpus = gpu_backends();
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  // out[i, j] = where(idx[i, j] > 2, table[i, clip(idx[i, j])] + j, -1.5) with table 9 x 6
  // (gathered along dim 1, extent 6), idx broadcast along i (a row of 11).
  const int64_t rows = 9, cols = 11;
  std::vector<int64_t> idx(static_cast<size_t>(cols));
  for (int64_t j = 0; j < cols; ++j)
    idx[static_cast<size_t>(j)] = j - 3; // -3..7: clipped
  // (the gathered operand's view must fit the whole index space too: rows of 11, 6 gathered)
  input table{PCY_DTYPE_F32, awkward(PCY_DTYPE_F32, rows * cols), {rows, cols}};
  input ix{PCY_DTYPE_I64, std::vector<uint8_t>(sizeof(int64_t) * cols), {cols}};
  std::memcpy(ix.bytes.data(), idx.data(), ix.bytes.size());
  program_words p;
  p.rank = 2;
  p.shape = {rows, cols};
  p.views = {{0, cols, 1}, {0, cols, 1}, {0, 0, 1}};
  const int r0 = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_I64, 2);
  const int g = p.add(PCY_ARRAY_OP_GATHER, PCY_DTYPE_F32, 1, r0, 1, 6);
  const int j = p.add(PCY_ARRAY_OP_INDEX, PCY_DTYPE_I64, 1);
  const int jf = p.add(PCY_ARRAY_OP_CAST, PCY_DTYPE_F32, j);
  const int s = p.add(PCY_ARRAY_OP_ADD, PCY_DTYPE_F32, g, jf);
  const int two = p.add(PCY_ARRAY_OP_CONST, PCY_DTYPE_I64, 2);
  const int c = p.add(PCY_ARRAY_OP_GT, PCY_DTYPE_BOOL, r0, two);
  double m15 = -1.5;
  int64_t m15w;
  std::memcpy(&m15w, &m15, 8);
  const int k = p.add(PCY_ARRAY_OP_CONST, PCY_DTYPE_F32, m15w);
  p.add(PCY_ARRAY_OP_WHERE, PCY_DTYPE_F32, c, s, k);
  const auto want = run(native, opkind::eval, p, PCY_DTYPE_F32, rows * cols, {table, ix});
  for (const Backend& gb : gpus) {
    INFO(gb.name());
    const auto got = run(gb, opkind::eval, p, PCY_DTYPE_F32, rows * cols, {table, ix});
    CHECK(first_difference(want, got, PCY_DTYPE_F32) == -1);
  }
}

TEST_CASE("array gpu: reductions of every kind along inner and outer dimensions",
          "[array][gpu][reduce]") {
  const auto gpus = gpu_backends("reduce_1");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  struct layout {
    const char* name;
    std::vector<int64_t> shape; // program index space (kept dims first)
    int64_t reduced;
    std::vector<int64_t> strides; // the input's
    int64_t elements;             // of the input tensor
    // On vulkan, trimmed (lean_on): 0 not run, 1 f32 only (one kind per code path), 2 every
    // dtype and kind. Every kernel runs there in f32 (row, column, split parts and their
    // combination, empty); the other dtypes take the row kernel (the generated code differs only
    // in the value type).
    int vk;
  };
  const layout layouts[] = {
      {"inner 1 (row kernel)", {6, 1000}, 1, {1000, 1}, 6000, 2},
      {"inner 2", {5, 7, 33}, 2, {231, 33, 1}, 1155, 0},
      {"outer 2 (column kernel)", {33, 5, 7}, 2, {1, 231, 33}, 1155, 1},
      {"all", {40, 50}, 2, {50, 1}, 2000, 0},
      {"none", {17}, 0, {1}, 17, 0},
      {"empty", {4, 0}, 1, {0, 1}, 1, 1},
      // long reductions to few outputs: split into chunks (parts, then their combination)
      {"split, all of 600 x 1000", {600, 1000}, 2, {1000, 1}, 600000, 0},
      {"split, one row of 300000", {1, 300000}, 1, {300000, 1}, 300000, 1},
      // one invocation per output (the column kernel) would outlast lavapipe's loop limit in
      // LOGSUMEXP's second pass (65535 iterations: the rest silently dropped; this case failed
      // so); array_vulkan sizes the launch within it (the tiled kernel here)
      {"outer, 16 columns of 100000", {16, 100000}, 1, {1, 16}, 1600000, 1},
  };
  // The array_gpu_tiled run (PARENCHYMA_ARRAY_OUTER_SLICES set): on vulkan only the outer
  // layouts, which the setting sends to the tiled kernel (the rest is the first run's again).
  const bool tiled_run = std::getenv("PARENCHYMA_ARRAY_OUTER_SLICES") != nullptr;
  for (const layout& L : layouts) {
    int64_t outs = 1;
    for (size_t d = 0; d + static_cast<size_t>(L.reduced) < L.shape.size(); ++d)
      outs *= L.shape[d];
    std::vector<int64_t> out_strides(L.shape.size(), 0);
    for (int64_t d = static_cast<int64_t>(L.shape.size()) - L.reduced - 1, s = 1; d >= 0; --d) {
      out_strides[static_cast<size_t>(d)] = s;
      s *= L.shape[static_cast<size_t>(d)];
    }
    for (int kind = PCY_ARRAY_REDUCE_SUM; kind < PCY_ARRAY_REDUCE_END; ++kind) {
      for (int t : reduce_types()) {
        const bool fl = t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64;
        int out_t = t;
        bool exact = true;
        switch (kind) {
        case PCY_ARRAY_REDUCE_ARGMIN:
        case PCY_ARRAY_REDUCE_ARGMAX: out_t = PCY_DTYPE_I64; break;
        case PCY_ARRAY_REDUCE_ALL:
        case PCY_ARRAY_REDUCE_ANY:
          if (t != PCY_DTYPE_BOOL) continue;
          break;
        case PCY_ARRAY_REDUCE_MIN:
        case PCY_ARRAY_REDUCE_MAX:
          if (t == PCY_DTYPE_BOOL) continue;
          if (std::string(L.name) == "empty") continue; // refused
          break;
        case PCY_ARRAY_REDUCE_SUM:
        case PCY_ARRAY_REDUCE_PROD:
          if (t == PCY_DTYPE_BOOL) continue;
          exact = !fl;
          break;
        default:
          if (!fl) continue;
          exact = false;
          break;
        }
        if ((kind == PCY_ARRAY_REDUCE_ARGMIN || kind == PCY_ARRAY_REDUCE_ARGMAX) &&
            std::string(L.name) == "empty")
          continue;
        // moderate floating values (sums stay meaningful); a NaN in a few rows
        input x{t, awkward(t, static_cast<size_t>(L.elements)), {L.elements}};
        if (fl) {
          auto& g = rng();
          std::uniform_real_distribution<double> u(-2, 2);
          for (int64_t i = 0; i < L.elements; ++i) {
            double v = u(g);
            if (kind <= PCY_ARRAY_REDUCE_ARGMAX && i % 997 == 500) v = NAN;
            if (kind == PCY_ARRAY_REDUCE_PROD) v = 1 + v / 64;
            if (t == PCY_DTYPE_F32) {
              const float f = static_cast<float>(v);
              std::memcpy(x.bytes.data() + i * 4, &f, 4);
            } else {
              std::memcpy(x.bytes.data() + i * 8, &v, 8);
            }
          }
        }
        program_words p;
        p.rank = static_cast<int64_t>(L.shape.size());
        p.reduced = L.reduced;
        p.shape = L.shape;
        std::vector<int64_t> ov{0}, iv{0};
        ov.insert(ov.end(), out_strides.begin(), out_strides.end());
        iv.insert(iv.end(), L.strides.begin(), L.strides.end());
        p.views = {ov, iv};
        p.add(PCY_ARRAY_OP_LOAD, t, 1);
        const double corr = kind == PCY_ARRAY_REDUCE_VAR ? 1.0 : 0.0;
        const auto want = run(native, opkind::reduce, p, out_t, outs, {x}, kind, corr);
        // vulkan's f32-only layouts: one kind per code path (the blocked sum, NaN in min, the
        // index trees, Welford's blocks, LOGSUMEXP's two passes)
        const bool lean_kind = kind == PCY_ARRAY_REDUCE_SUM || kind == PCY_ARRAY_REDUCE_MIN ||
                               kind == PCY_ARRAY_REDUCE_ARGMAX || kind == PCY_ARRAY_REDUCE_VAR ||
                               kind == PCY_ARRAY_REDUCE_LOGSUMEXP;
        for (const Backend& gb : gpus) {
          if (lean_on(gb) && (L.vk == 0 || (L.vk == 1 && (t != PCY_DTYPE_F32 || !lean_kind)) ||
                              (tiled_run && std::string(L.name).rfind("outer", 0) != 0)))
            continue;
          INFO(gb.name() << ": " << L.name << ", kind " << kind << " on " << dname(t));
          const auto got = run(gb, opkind::reduce, p, out_t, outs, {x}, kind, corr);
          if (exact) {
            const int64_t i = first_difference(want, got, out_t);
            INFO("output " << i << ": native " << (i >= 0 ? show(want, out_t, i) : "") << ", "
                           << gb.name() << " " << (i >= 0 ? show(got, out_t, i) : ""));
            CHECK(i == -1);
          } else {
            // a sequential sum's bound, n_red roundings (native sums NORM2 in order; the GPU
            // bundles in chunks and trees)
            int64_t n_red = 1;
            for (size_t d = L.shape.size() - static_cast<size_t>(L.reduced); d < L.shape.size();
                 ++d)
              n_red *= L.shape[d];
            const double tol =
                (t == PCY_DTYPE_F32 ? 1.2e-7 : 2.3e-16) * static_cast<double>(n_red + 64);
            for (int64_t o = 0; o < outs; ++o) {
              const double w = value_at(want, out_t, static_cast<size_t>(o));
              const double v = value_at(got, out_t, static_cast<size_t>(o));
              INFO("output " << o << ": native " << w << ", " << gb.name() << " " << v);
              if (std::isnan(w) || std::isinf(w))
                CHECK(((std::isnan(v) && std::isnan(w)) || v == w));
              else
                CHECK(std::fabs(v - w) <= tol * (1 + std::fabs(w)));
            }
          }
        }
      }
    }
  }
  { // the NN demo's fused reductions, through the front-end (reduce_2, where, argmax, f64
    // LOGSUMEXP)
    const int64_t rows = 37, cols = 10;
    std::vector<float> logp(static_cast<size_t>(rows * cols));
    std::vector<int64_t> labels(static_cast<size_t>(rows));
    std::uniform_real_distribution<float> u(-4, 0);
    for (float& v : logp)
      v = u(rng());
    for (int64_t r = 0; r < rows; ++r)
      labels[static_cast<size_t>(r)] = (r * 7) % cols;
    std::vector<double> logp64(logp.begin(), logp.end());
    struct results {
      float loss;
      std::vector<int64_t> guess;
      int64_t right;
      std::vector<double> lse; // LOGSUMEXP of f64 rows (vulkan: helpers.glsl's exp and log)
    };
    auto go = [&](const Backend& b) {
      const pa::Array lp = pa::asarray(b, logp, {rows, cols});
      const pa::Array lab = pa::asarray(b, labels, {rows, 1});
      const pa::Array hot = pa::arange(b, 0, cols, 1, PCY_DTYPE_I64) == lab; // rows x cols
      results r;
      r.loss = pa::sum(pa::where(hot, lp, 0.0f)).item<float>();
      const pa::Array guess = pa::argmax(lp, int64_t{1}, true);
      r.guess = guess.to_vector<int64_t>();
      r.right = pa::sum(guess == lab).item<int64_t>();
      r.lse = pa::logsumexp(pa::asarray(b, logp64, {rows, cols}), {1}).to_vector<double>();
      return r;
    };
    const results want = go(native);
    for (const Backend& gb : gpus) {
      INFO(gb.name());
      const results got = go(gb);
      CHECK(std::fabs(got.loss - want.loss) <= 1e-5f * std::fabs(want.loss));
      CHECK(got.guess == want.guess);
      CHECK(got.right == want.right);
      REQUIRE(got.lse.size() == want.lse.size());
      for (size_t i = 0; i < want.lse.size(); ++i) {
        INFO("row " << i << ": native " << want.lse[i] << ", " << gb.name() << " " << got.lse[i]);
        CHECK(std::fabs(got.lse[i] - want.lse[i]) <= 1e-14 * (1 + std::fabs(want.lse[i])));
      }
    }
  }
}

TEST_CASE("array gpu: scans are sequential: the native bundle's bits", "[array][gpu]") {
  const auto gpus = gpu_backends("scan_1");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  const int64_t rows = 7, len = 300;
  for (int t : arith_types()) {
    if (t == PCY_DTYPE_BOOL) continue;
    for (int kind : {PCY_ARRAY_SCAN_SUM, PCY_ARRAY_SCAN_PROD}) {
      input x{t, awkward(t, static_cast<size_t>(rows * len)), {rows * len}};
      program_words p;
      p.rank = 2;
      p.reduced = 1;
      p.shape = {rows, len};
      p.views = {{0, len, 1}, {0, 1, rows}}; // the input transposed
      p.add(PCY_ARRAY_OP_LOAD, t, 1);
      const auto want = run(native, opkind::scan, p, t, rows * len, {x}, kind);
      for (const Backend& gb : gpus) {
        if (lean_on(gb) && t != PCY_DTYPE_F32 && t != PCY_DTYPE_I8) continue;
        INFO(gb.name() << ": scan " << kind << " on " << dname(t));
        const auto got = run(gb, opkind::scan, p, t, rows * len, {x}, kind);
        CHECK(first_difference(want, got, t) == -1);
      }
    }
  }
}

namespace {
// Element e of a draw, computed here from pcy_array_random.h (the contract's formulas: counter
// offset + e / P, lane l = e mod P; P = 2 for the two-word draws, 4 for the others).
std::vector<uint8_t> host_draw(int dist, int d, uint64_t seed, uint64_t offset, double a, double b,
                               int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * dsize(d));
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  const bool two_words =
      dist == PCY_ARRAY_RANDOM_RANDINT || dist == PCY_ARRAY_RANDOM_BITS ||
      ((dist == PCY_ARRAY_RANDOM_UNIFORM || dist == PCY_ARRAY_RANDOM_NORMAL) && d == PCY_DTYPE_F64);
  const int64_t P = two_words ? 2 : 4;
  for (int64_t e = 0; e < n; ++e) {
    uint32_t all[4];
    pcy_rng_words(seed, offset, static_cast<uint64_t>(e / P), all);
    const int64_t l = e % P;
    // the lane's words first: w[0] (and w[1]) are the lane's own; a normal pair's are 2 h, 2 h + 1
    uint32_t w[4] = {all[0], all[1], all[2], all[3]};
    const bool normal = dist == PCY_ARRAY_RANDOM_NORMAL;
    const bool odd = (l & 1) != 0; // a normal's sine member
    if (normal && d != PCY_DTYPE_F64) {
      w[0] = all[(l / 2) * 2];
      w[1] = all[(l / 2) * 2 + 1];
    } else if (!normal) {
      const int64_t k = two_words ? 2 * l : l;
      w[0] = all[k];
      w[1] = two_words ? all[k + 1] : 0;
    }
    uint8_t* p = out.data() + e * static_cast<int64_t>(dsize(d));
    auto put_f32 = [&](float f) { std::memcpy(p, &f, 4); }; // F32 draws only here
    switch (dist) {
    case PCY_ARRAY_RANDOM_UNIFORM:
      if (d == PCY_DTYPE_F64) {
        const double v = a + (b - a) * pcy_rng_uniform_f64(w[0], w[1]);
        std::memcpy(p, &v, 8);
      } else {
        put_f32(fa + (fb - fa) * pcy_rng_uniform_f32(w[0]));
      }
      break;
    case PCY_ARRAY_RANDOM_NORMAL:
      if (d == PCY_DTYPE_F64) {
        const double z = odd ? pcy_rng_normal_sin_f64(w[0], w[1], w[2], w[3])
                             : pcy_rng_normal_f64(w[0], w[1], w[2], w[3]);
        const double v = a + b * z;
        std::memcpy(p, &v, 8);
      } else {
        put_f32(fa +
                fb * (odd ? pcy_rng_normal_sin_f32(w[0], w[1]) : pcy_rng_normal_f32(w[0], w[1])));
      }
      break;
    case PCY_ARRAY_RANDOM_BERNOULLI: {
      const int v = pcy_rng_bernoulli(w[0], pcy_rng_bernoulli_threshold(a));
      if (d == PCY_DTYPE_F32) {
        const float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else if (d == PCY_DTYPE_F64) {
        const double f = v;
        std::memcpy(p, &f, 8);
      } else {
        const int64_t i = v;
        std::memcpy(p, &i, dsize(d)); // little-endian: the low bytes
      }
      break;
    }
    case PCY_ARRAY_RANDOM_RANDINT: {
      const int64_t lo = static_cast<int64_t>(a), hi = static_cast<int64_t>(b);
      const int64_t v =
          pcy_rng_randint(w[0], w[1], lo, static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo));
      std::memcpy(p, &v, dsize(d));
      break;
    }
    default: {
      const uint64_t v = static_cast<uint64_t>(w[1]) << 32 | w[0];
      std::memcpy(p, &v, 8);
      break;
    }
    }
  }
  return out;
}

std::vector<uint8_t> device_draw(const Backend& b, int dist, int d, std::vector<int64_t> shape,
                                 std::vector<int64_t> strides, int64_t view_offset,
                                 int64_t tensor_elems, uint64_t seed, uint64_t offset, double a,
                                 double c) {
  pa::Array out(b, {tensor_elems}, static_cast<pcy_dtype>(d));
  auto st = out.node()->storage;
  std::memset(st->host(access::write_only), 0, static_cast<size_t>(tensor_elems) * dsize(d));
  std::vector<int64_t> view{static_cast<int64_t>(shape.size())};
  view.insert(view.end(), shape.begin(), shape.end());
  view.push_back(view_offset);
  view.insert(view.end(), strides.begin(), strides.end());
  const OpArg args[] = {OpArg::inout(*st),
                        OpArg::integers(view),
                        OpArg::integer(dist),
                        OpArg::integer(static_cast<int64_t>(seed)),
                        OpArg::integer(static_cast<int64_t>(offset)),
                        OpArg::real(a),
                        OpArg::real(c)};
  b.invoke(ext::op_key<pcy_array_random_schema>(static_cast<pcy_dtype>(d)), args);
  const auto* r = static_cast<const uint8_t*>(st->host_read());
  return std::vector<uint8_t>(r, r + static_cast<size_t>(tensor_elems) * dsize(d));
}
} // namespace

TEST_CASE("array gpu: random draws give pcy_array_random.h's bits, through any view",
          "[array][gpu][random]") {
  const auto gpus = gpu_backends("random");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  struct draw {
    int dist, d;
    double a, b;
  };
  const draw draws[] = {{PCY_ARRAY_RANDOM_UNIFORM, PCY_DTYPE_F32, -2, 3},
                        {PCY_ARRAY_RANDOM_UNIFORM, PCY_DTYPE_F64, -2, 3},
                        {PCY_ARRAY_RANDOM_NORMAL, PCY_DTYPE_F32, 1, 2},
                        {PCY_ARRAY_RANDOM_NORMAL, PCY_DTYPE_F64, 1, 2},
                        {PCY_ARRAY_RANDOM_BERNOULLI, PCY_DTYPE_BOOL, 0.3, 0},
                        {PCY_ARRAY_RANDOM_BERNOULLI, PCY_DTYPE_F32, 0.7, 0},
                        {PCY_ARRAY_RANDOM_RANDINT, PCY_DTYPE_I64, -5, 1000003},
                        {PCY_ARRAY_RANDOM_RANDINT, PCY_DTYPE_I32, 0, 10},
                        {PCY_ARRAY_RANDOM_BITS, PCY_DTYPE_I64, 0, 0}};
  const uint64_t seed = 0x0123456789ABCDEFull, offset = 0xFFFFFFFFFFFFFF00ull; // wraps
  for (const draw& dr : draws) {
    // a 2-D view, transposed into a 6 x 50 tensor at offset 0: element e = (i, j) row-major in
    // the view (50 x 6) lands at j * 50 + i
    const auto want_flat = host_draw(dr.dist, dr.d, seed, offset, dr.a, dr.b, 300);
    std::vector<uint8_t> want(want_flat.size());
    const size_t es = dsize(dr.d);
    for (int64_t i = 0; i < 50; ++i)
      for (int64_t j = 0; j < 6; ++j)
        std::memcpy(want.data() + static_cast<size_t>(j * 50 + i) * es,
                    want_flat.data() + static_cast<size_t>(i * 6 + j) * es, es);
    for (const Backend& g : gpus) {
      INFO(g.name() << ": distribution " << dr.dist << " " << dname(dr.d));
      const auto got =
          device_draw(g, dr.dist, dr.d, {50, 6}, {1, 50}, 0, 300, seed, offset, dr.a, dr.b);
      const int64_t i = first_difference(want, got, dr.d);
      INFO("element " << i << ": expected " << (i >= 0 ? show(want, dr.d, i) : "") << ", got "
                      << (i >= 0 ? show(got, dr.d, i) : ""));
      CHECK(i == -1);
    }
  }
}

TEST_CASE("array gpu: random draws give the native bundle's bits", "[array][gpu][random]") {
  const auto gpus = gpu_backends("random");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  if (!has_op("native", "random")) {
    WARN("skipped: the native bundle has no random op yet (array_native registers none)");
    return;
  }
  const Backend native("native");
  const uint64_t seed = 42, offset = 7;
  for (int d : all_types_all) {
    // parameters exact in f32, and not (0.1, 0.7: the f32 roundings of a and b matter)
    std::vector<std::pair<int, std::pair<double, double>>> dists{
        {PCY_ARRAY_RANDOM_BERNOULLI, {0.25, 0}}, {PCY_ARRAY_RANDOM_BERNOULLI, {0.3, 0}}};
    if (is_floating(d)) {
      dists.push_back({PCY_ARRAY_RANDOM_UNIFORM, {-1.5, 2.25}});
      dists.push_back({PCY_ARRAY_RANDOM_UNIFORM, {0.1, 0.7}});
      dists.push_back({PCY_ARRAY_RANDOM_NORMAL, {0.5, 3}});
      dists.push_back({PCY_ARRAY_RANDOM_NORMAL, {0.1, 1.3}});
    }
    if (is_integer(d)) {
      dists.push_back({PCY_ARRAY_RANDOM_RANDINT, {-100, 1000}});
      dists.push_back({PCY_ARRAY_RANDOM_RANDINT, {-9e18, 9e18}}); // a range beyond 2^63
    }
    if (d == PCY_DTYPE_I64) dists.push_back({PCY_ARRAY_RANDOM_BITS, {0, 0}});
    if (d == PCY_DTYPE_I32 || d == PCY_DTYPE_I64)
      dists.push_back({PCY_ARRAY_RANDOM_PERMUTATION, {0, 0}});
    // dense views: aligned and whole vectors; then one starting 3 elements in (no vector
    // aligned on cuda) and ending 1 past a multiple of 4 (a partial last work-item)
    for (const auto& [dist, ab] : dists)
      for (const auto& [len, at] : {std::pair<int64_t, int64_t>{1000, 0}, {1001, 3}}) {
        const auto want = device_draw(native, dist, d, {len}, {1}, at, len + at, seed, offset,
                                      ab.first, ab.second);
        for (const Backend& g : gpus) {
          INFO(g.name() << ": distribution " << dist << " " << dname(d) << ", " << len << " at "
                        << at);
          const auto got =
              device_draw(g, dist, d, {len}, {1}, at, len + at, seed, offset, ab.first, ab.second);
          const int64_t i = first_difference(want, got, d);
          INFO("element " << i << ": native " << (i >= 0 ? show(want, d, i) : "") << ", "
                          << g.name() << " " << (i >= 0 ? show(got, d, i) : ""));
          CHECK(i == -1);
        }
      }
  }
}

TEST_CASE("array gpu: several outputs of one pass (evalm3) match the native bundle",
          "[array][gpu]") {
  const auto gpus = gpu_backends();
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  const int64_t n = 1000;
  const input x{PCY_DTYPE_F32, awkward(PCY_DTYPE_F32, n), {n}};
  const input y{PCY_DTYPE_F32, awkward(PCY_DTYPE_F32, n), {n}};
  // out0 (f32) = x + y; out1 (i32) = i32(x * y); out2 (bool) = x > y; y read reversed
  program_words p;
  p.shape = {n};
  p.views = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {n - 1, -1}};
  const int a = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 3);
  const int b = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 4);
  const int m = p.add(PCY_ARRAY_OP_MUL, PCY_DTYPE_F32, a, b);
  const int mi = p.add(PCY_ARRAY_OP_CAST, PCY_DTYPE_I32, m);
  p.add(PCY_ARRAY_OP_STORE, PCY_DTYPE_I32, 1, mi);
  const int gt = p.add(PCY_ARRAY_OP_GT, PCY_DTYPE_BOOL, a, b);
  p.add(PCY_ARRAY_OP_STORE, PCY_DTYPE_BOOL, 2, gt);
  p.add(PCY_ARRAY_OP_ADD, PCY_DTYPE_F32, a, b);
  const std::vector<int64_t> words = p.words();
  auto go = [&](const Backend& bk) {
    std::vector<std::vector<uint8_t>> outs;
    pa::Array o0(bk, {n}, PCY_DTYPE_F32), o1(bk, {n}, PCY_DTYPE_I32), o2(bk, {n}, PCY_DTYPE_BOOL);
    auto sx = upload(bk, x), sy = upload(bk, y);
    const OpArg args[] = {OpArg::integers(words),
                          OpArg::out(*o0.node()->storage),
                          OpArg::out(*o1.node()->storage),
                          OpArg::out(*o2.node()->storage),
                          OpArg::in(*sx),
                          OpArg::in(*sy)};
    bk.invoke(ext::op_key<pcy_array_evalm3_2_schema>(PCY_DTYPE_F32), args);
    for (const pa::Array* o : {&o0, &o1, &o2}) {
      const auto* r = static_cast<const uint8_t*>(o->node()->storage->host_read());
      outs.emplace_back(r, r + static_cast<size_t>(n) * dsize(o->type()));
    }
    return outs;
  };
  const auto want = go(native);
  for (const Backend& g : gpus) {
    INFO(g.name());
    const auto got = go(g);
    CHECK(first_difference(want[0], got[0], PCY_DTYPE_F32) == -1);
    CHECK(first_difference(want[1], got[1], PCY_DTYPE_I32) == -1);
    CHECK(first_difference(want[2], got[2], PCY_DTYPE_BOOL) == -1);
  }
}

TEST_CASE("array gpu: blocked scans of few long rows", "[array][gpu]") {
  const auto gpus = gpu_backends("scan_1");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  const int64_t rows = 2, len = 100000;
  for (int t : {PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_F32, PCY_DTYPE_F64}) {
    for (int kind : {PCY_ARRAY_SCAN_SUM, PCY_ARRAY_SCAN_PROD}) {
      const bool fl = t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64;
      input x{t, awkward(t, static_cast<size_t>(rows * len)), {rows * len}};
      if (fl) { // values whose running sums and products stay finite
        auto& g = rng();
        std::uniform_real_distribution<double> u(-1, 1);
        for (int64_t i = 0; i < rows * len; ++i) {
          const double v = kind == PCY_ARRAY_SCAN_PROD ? 1 + u(g) / 4096 : u(g);
          if (t == PCY_DTYPE_F32) {
            const float f = static_cast<float>(v);
            std::memcpy(x.bytes.data() + i * 4, &f, 4);
          } else {
            std::memcpy(x.bytes.data() + i * 8, &v, 8);
          }
        }
      }
      const program_words p = scan_rows(rows, len, t);
      const auto want = run(native, opkind::scan, p, t, rows * len, {x}, kind);
      for (const Backend& gb : gpus) {
        if (lean_on(gb) && t != PCY_DTYPE_F32 && t != PCY_DTYPE_I32) continue;
        INFO(gb.name() << ": scan " << kind << " on " << dname(t));
        const auto got = run(gb, opkind::scan, p, t, rows * len, {x}, kind);
        if (!fl) {
          CHECK(first_difference(want, got, t) == -1);
          continue;
        }
        // the blocks associate differently: a sequential sum's bound
        const double tol = (t == PCY_DTYPE_F32 ? 1.2e-7 : 2.3e-16) * static_cast<double>(len);
        int bad = 0;
        for (int64_t i = 0; i < rows * len; ++i) {
          const double w = value_at(want, t, static_cast<size_t>(i)),
                       v = value_at(got, t, static_cast<size_t>(i));
          bad += std::fabs(v - w) <= tol * (1 + std::fabs(w)) ? 0 : 1;
        }
        CHECK(bad == 0);
      }
    }
  }
  { // 33 rows of 70000: one invocation per row on every bundle's plan, but lavapipe ends an
    // invocation's loops after 65535 iterations (the rest silently dropped: this case failed so
    // on vulkan), so array_vulkan blocks them
    const int64_t n_rows = 33, n_len = 70000;
    const input x{PCY_DTYPE_I32,
                  awkward(PCY_DTYPE_I32, static_cast<size_t>(n_rows * n_len)),
                  {n_rows * n_len}};
    const program_words p = scan_rows(n_rows, n_len, PCY_DTYPE_I32);
    const auto want =
        run(native, opkind::scan, p, PCY_DTYPE_I32, n_rows * n_len, {x}, PCY_ARRAY_SCAN_SUM);
    for (const Backend& gb : gpus) {
      INFO(gb.name());
      const auto got =
          run(gb, opkind::scan, p, PCY_DTYPE_I32, n_rows * n_len, {x}, PCY_ARRAY_SCAN_SUM);
      const int64_t i = first_difference(want, got, PCY_DTYPE_I32);
      INFO("element " << i);
      CHECK(i == -1);
    }
  }
}

// Sorting is exact: the GPU bundles' bitonic network gives the native bundle's stable order, bit
// for bit (values and positions), for awkward row lengths (padding), NaN of both signs, +-0,
// +-inf and many duplicates, every axis (the axis moved innermost by the program) and both
// directions.
template <class T> std::vector<T> sort_input(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::uniform_int_distribution<int> d(-6, 6);
  std::vector<T> v(n);
  for (T& x : v) {
    const int k = d(g);
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(k) / 2;
      if (k == -6) x = std::numeric_limits<T>::quiet_NaN();
      if (k == 6) x = -std::numeric_limits<T>::quiet_NaN();
      if (k == 5) x = std::numeric_limits<T>::infinity();
      if (k == -5) x = -std::numeric_limits<T>::infinity();
      if (k == 0 && (g() & 1)) x = T(-0.0);
    } else if constexpr (std::is_unsigned_v<T>) {
      x = static_cast<T>(k + 6);
    } else {
      x = static_cast<T>(k * 1000);
    }
  }
  return v;
}
template <class T> std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <class T>
void sort_against_native(const Backend& native, const Backend& gb, const pa::Shape& s,
                         uint64_t seed) {
  size_t n = 1;
  for (int64_t e : s)
    n *= static_cast<size_t>(e);
  const std::vector<T> v = sort_input<T>(n, seed);
  const pa::Array xn = pa::asarray(native, v, s), xg = pa::asarray(gb, v, s);
  for (size_t axis = 0; axis < s.size(); ++axis)
    for (bool desc : {false, true}) {
      INFO(gb.name() << ": " << sizeof(T) << "-byte elements, rank " << s.size() << ", axis "
                     << axis << ", extent " << s[axis] << ", descending " << desc);
      const auto ax = static_cast<int64_t>(axis);
      CHECK(pa::argsort(xg, ax, desc).to_vector<int64_t>() ==
            pa::argsort(xn, ax, desc).to_vector<int64_t>());
      CHECK(bytes_of(pa::sort(xg, ax, desc).to_vector<T>()) ==
            bytes_of(pa::sort(xn, ax, desc).to_vector<T>()));
    }
}

TEST_CASE("array gpu: sort and argsort give the native bundle's stable order, bit for bit",
          "[array][gpu][sort]") {
  const auto gpus = gpu_backends("sort_1");
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  const Backend native("native");
  for (const Backend& gb : gpus) {
    // On vulkan, trimmed (lean_on): f32 (NaN, -0, padding, every length), bool and the views
    // only (the shaders differ in the value type and the rank alone).
    const bool all = !lean_on(gb);
    uint64_t seed = 1;
    for (int64_t len : {1, 2, 3, 31, 1000, 4097}) {
      sort_against_native<float>(native, gb, {len}, seed++);
      if (all) sort_against_native<double>(native, gb, {3, len}, seed++);
    }
    if (all) sort_against_native<int32_t>(native, gb, {5, 33, 2}, seed++);
    if (all) sort_against_native<int8_t>(native, gb, {4, 17}, seed++);
    if (all) sort_against_native<int64_t>(native, gb, {2, 3, 9}, seed++);
    if (all) sort_against_native<uint8_t>(native, gb, {70}, seed++);
    if (exhaustive()) sort_against_native<int16_t>(native, gb, {6, 11}, seed++);
    // bool, a strided and reversed view, an expression
    const std::vector<uint8_t> bits = sort_input<uint8_t>(50, 99);
    auto bools = [&](const Backend& b) { return pa::asarray(b, bits, {5, 10}) > 6; };
    CHECK(pa::argsort(bools(gb), 1, true).to_vector<int64_t>() ==
          pa::argsort(bools(native), 1, true).to_vector<int64_t>());
    const std::vector<float> f = sort_input<float>(120, 7);
    auto view = [&](const Backend& b) {
      return pa::asarray(b, f, {12, 10}).slice(0, 11, pa::Array::npos, -3).permute_dims({1, 0});
    };
    CHECK(pa::argsort(view(gb), 0).to_vector<int64_t>() ==
          pa::argsort(view(native), 0).to_vector<int64_t>());
    // An expression: the same order; the values the same bits except NaNs' payloads (NVIDIA's
    // GPUs return their canonical NaN from NaN * 2, the CPU keeps the operand's).
    CHECK(pa::argsort(view(gb) * 2.0f, 1, true).to_vector<int64_t>() ==
          pa::argsort(view(native) * 2.0f, 1, true).to_vector<int64_t>());
    const auto sg = pa::sort(view(gb) * 2.0f, 1, true).to_vector<float>();
    const auto sn = pa::sort(view(native) * 2.0f, 1, true).to_vector<float>();
    REQUIRE(sg.size() == sn.size());
    for (size_t i = 0; i < sg.size(); ++i) {
      INFO("element " << i << ": " << sg[i] << " and native " << sn[i]);
      CHECK(((std::isnan(sg[i]) && std::isnan(sn[i])) ||
             std::memcmp(&sg[i], &sn[i], sizeof(float)) == 0));
    }
  }
}

TEST_CASE("array gpu: a repeated launch (the context's memo of its last one) sees new data, "
          "constants, views and tensors",
          "[array][gpu]") {
  const auto gpus = gpu_backends();
  if (gpus.empty()) {
    WARN("skipped: no array bundle (with the op) on opencl, cuda or vulkan with a device here");
    return;
  }
  for (const Backend& b : gpus) {
    INFO(b.name());
    const int64_t n = 1001;
    pa::Array x = pa::random::uniform(b, {n}, 11, 0, -4, 4);
    pa::Array y = pa::full(b, {n}, 7.0);
    auto check = [&](float mul, float add, int64_t from, int64_t to) {
      const auto xv = x.to_vector<float>(), yv = y.to_vector<float>();
      for (int64_t i = from; i < to; ++i)
        REQUIRE(yv[static_cast<size_t>(i)] == xv[static_cast<size_t>(i - from)] * mul + add);
    };
    for (int rep = 0; rep < 3; ++rep) { // the same program on the same tensors
      y.assign(x * 2.0f + 1.0f);
      check(2, 1, 0, n);
      x.assign(x + 0.5f); // new data in the same tensor: the launch reads it again
    }
    y.assign(x * 3.0f + 1.0f); // another constant: other program words
    check(3, 1, 0, n);
    // a view at another offset: the same expression, another byte offset or view
    pa::Array yv = y.slice(0, 1, n);
    pa::Array xs = x.slice(0, 0, n - 1);
    yv.assign(xs * 3.0f + 1.0f);
    yv.assign(xs * 3.0f + 1.0f);
    check(3, 1, 1, n);
    // other tensors of the same shape: the same words, other memory
    pa::Array x2 = pa::random::uniform(b, {n}, 12, 0, -1, 1), y2 = pa::zeros(b, {n});
    y2.assign(x2 * 3.0f + 1.0f);
    const auto a2 = x2.to_vector<float>(), b2 = y2.to_vector<float>();
    for (size_t i = 0; i < a2.size(); ++i)
      REQUIRE(b2[i] == a2[i] * 3.0f + 1.0f);
    // a shorter tensor after the long one: a new launch of its own size
    pa::Array x3 = pa::ones(b, {5}), y3 = pa::zeros(b, {5});
    y3.assign(x3 * 3.0f + 1.0f);
    CHECK(y3.to_vector<float>() == std::vector<float>(5, 4.0f));
  }
}

TEST_CASE("array gpu: vulkan's f32 transcendental functions are within 1 ulp of the exact value",
          "[array][gpu]") {
  // array_vulkan computes them through f64 and rounds once (GLSL's built-ins are far off on
  // lavapipe); the reference is the host's binary64 libm rounded to f32.
  std::vector<Backend> vk;
  for (const Backend& b : gpu_backends("eval_1"))
    if (b.framework().name() == "vulkan") vk.push_back(b);
  if (vk.empty()) {
    WARN("skipped: no array bundle on vulkan with a device here");
    return;
  }
  const int64_t n = 4096;
  std::vector<float> xs(static_cast<size_t>(n));
  std::mt19937 g(7);
  std::uniform_real_distribution<float> u(-10.f, 10.f);
  for (auto& x : xs)
    x = u(g);
  const float specials[] = {NAN,        INFINITY, -INFINITY, 0.f,      -0.f,   1e-30f,
                            -1e-7f,     88.f,     88.72283f, 88.7229f, -87.4f, -103.5f,
                            -0.999999f, 1e-45f,   3.4e38f,   -1e-40f,  -1.f,   0.5f};
  std::copy(std::begin(specials), std::end(specials), xs.begin());
  for (size_t i = 100; i < 1500; ++i)
    xs[i] = std::ldexp(u(g) / 10.f, -static_cast<int>(i % 60)); // near 0, to subnormal
  for (size_t i = 1500; i < 2500; ++i)
    xs[i] = std::ldexp(std::abs(u(g)), static_cast<int>(i % 250) - 125); // positive, any scale
  std::vector<uint8_t> raw(xs.size() * 4);
  std::memcpy(raw.data(), xs.data(), raw.size());
  const int ops[] = {PCY_ARRAY_OP_EXP,   PCY_ARRAY_OP_EXPM1, PCY_ARRAY_OP_LOG,   PCY_ARRAY_OP_LOG1P,
                     PCY_ARRAY_OP_LOG2,  PCY_ARRAY_OP_LOG10, PCY_ARRAY_OP_SINH,  PCY_ARRAY_OP_COSH,
                     PCY_ARRAY_OP_TANH,  PCY_ARRAY_OP_ASIN,  PCY_ARRAY_OP_ACOS,  PCY_ARRAY_OP_ATAN,
                     PCY_ARRAY_OP_ASINH, PCY_ARRAY_OP_ACOSH, PCY_ARRAY_OP_ATANH, PCY_ARRAY_OP_ERF,
                     PCY_ARRAY_OP_SIN,   PCY_ARRAY_OP_COS,   PCY_ARRAY_OP_TAN};
  for (int op : ops) {
    auto exact = [op](double d) {
      switch (op) {
      case PCY_ARRAY_OP_EXP: return std::exp(d);
      case PCY_ARRAY_OP_EXPM1: return std::expm1(d);
      case PCY_ARRAY_OP_LOG: return std::log(d);
      case PCY_ARRAY_OP_LOG1P: return std::log1p(d);
      case PCY_ARRAY_OP_LOG2: return std::log2(d);
      case PCY_ARRAY_OP_LOG10: return std::log10(d);
      case PCY_ARRAY_OP_SINH: return std::sinh(d);
      case PCY_ARRAY_OP_COSH: return std::cosh(d);
      case PCY_ARRAY_OP_ASIN: return std::asin(d);
      case PCY_ARRAY_OP_ACOS: return std::acos(d);
      case PCY_ARRAY_OP_ATAN: return std::atan(d);
      case PCY_ARRAY_OP_ASINH: return std::asinh(d);
      case PCY_ARRAY_OP_ACOSH: return std::acosh(d);
      case PCY_ARRAY_OP_ATANH: return std::atanh(d);
      case PCY_ARRAY_OP_ERF: return std::erf(d);
      case PCY_ARRAY_OP_SIN: return std::sin(d);
      case PCY_ARRAY_OP_COS: return std::cos(d);
      case PCY_ARRAY_OP_TAN: return std::tan(d);
      default: return std::tanh(d);
      }
    };
    program_words p;
    p.rank = 1;
    p.shape = {n};
    p.views = {{0, 1}, {0, 1}};
    const int a = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 1);
    p.add(op, PCY_DTYPE_F32, a, 0);
    for (const Backend& b : vk) {
      std::vector<uint8_t> got;
      try { // run_on: a refusal is a skip here, never the native bundle's bits
        got = run_on(b, opkind::eval, p, PCY_DTYPE_F32, n, {{PCY_DTYPE_F32, raw, {n}}}, 0, 0);
      } catch (const error& e) {
        if (e.code() != errc::unsupported) throw;
        WARN("skipped on vulkan: " << e.what());
        return;
      }
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        float v;
        std::memcpy(&v, &got[static_cast<size_t>(i) * 4], 4);
        const float r = static_cast<float>(exact(static_cast<double>(xs[static_cast<size_t>(i)])));
        if (std::isnan(r) || std::isnan(v)) {
          if (std::isnan(r) != std::isnan(v)) bad = i;
        } else if (std::isinf(r) || std::isinf(v) || r == 0 || v == 0) {
          if (r != v || std::signbit(r) != std::signbit(v)) bad = i;
        } else {
          const double ulp = std::ldexp(1.0, std::max(std::ilogb(r), -126) - 23);
          if (std::abs(static_cast<double>(v) - static_cast<double>(r)) > ulp) bad = i;
        }
      }
      INFO(b.name() << ": op " << op
                    << " at x = " << (bad >= 0 ? xs[static_cast<size_t>(bad)] : 0));
      CHECK(bad == -1);
    }
  }
  // the binary ones, over pairs from the same inputs (y shifted against x)
  const int ops2[] = {PCY_ARRAY_OP_ATAN2, PCY_ARRAY_OP_HYPOT, PCY_ARRAY_OP_LOGADDEXP,
                      PCY_ARRAY_OP_POW};
  std::vector<float> ys(xs.size());
  for (size_t i = 0; i < ys.size(); ++i)
    ys[i] = i % 5 == 0 ? std::round(xs[(i * 7 + 3) % xs.size()]) : xs[(i * 7 + 3) % xs.size()];
  std::vector<uint8_t> raw_y(ys.size() * 4);
  std::memcpy(raw_y.data(), ys.data(), raw_y.size());
  for (int op : ops2) {
    auto exact = [op](double a, double b) {
      if (op == PCY_ARRAY_OP_ATAN2) return std::atan2(a, b);
      if (op == PCY_ARRAY_OP_HYPOT) return std::hypot(a, b);
      if (op == PCY_ARRAY_OP_POW) return std::pow(a, b);
      if (a == b) return a + 0.69314718055994531; // npy_logaddexp's cases
      if (std::isinf(a) || std::isinf(b)) return a - b > 0 ? a : b;
      return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
    };
    program_words p;
    p.rank = 1;
    p.shape = {n};
    p.views = {{0, 1}, {0, 1}, {0, 1}};
    const int a = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 1);
    const int b = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 2);
    p.add(op, PCY_DTYPE_F32, a, b);
    for (const Backend& bk : vk) {
      std::vector<uint8_t> got;
      try {
        got = run_on(bk, opkind::eval, p, PCY_DTYPE_F32, n,
                     {{PCY_DTYPE_F32, raw, {n}}, {PCY_DTYPE_F32, raw_y, {n}}}, 0, 0);
      } catch (const error& e) {
        if (e.code() != errc::unsupported) throw;
        WARN("skipped on vulkan: " << e.what());
        return;
      }
      int64_t bad = -1;
      for (int64_t i = 0; i < n && bad < 0; ++i) {
        float v;
        std::memcpy(&v, &got[static_cast<size_t>(i) * 4], 4);
        const size_t k = static_cast<size_t>(i);
        const float r = static_cast<float>(exact(xs[k], ys[k]));
        if (std::isnan(r) || std::isnan(v)) {
          if (std::isnan(r) != std::isnan(v)) bad = i;
        } else if (std::isinf(r) || std::isinf(v) || r == 0 || v == 0) {
          if (r != v || std::signbit(r) != std::signbit(v)) bad = i;
        } else {
          const double ulp = std::ldexp(1.0, std::max(std::ilogb(r), -126) - 23);
          if (std::abs(static_cast<double>(v) - static_cast<double>(r)) > ulp) bad = i;
        }
      }
      INFO(bk.name() << ": op " << op << " at x = " << (bad >= 0 ? xs[static_cast<size_t>(bad)] : 0)
                     << ", y = " << (bad >= 0 ? ys[static_cast<size_t>(bad)] : 0));
      CHECK(bad == -1);
    }
  }
}

TEST_CASE("array gpu: vulkan's f64 transcendental functions are within their ulp bounds of libm",
          "[array][gpu]") {
  // array_vulkan's own binary64 routines (helpers.glsl's PCY_MATH_F64: GLSL has none in f64)
  // against the host's libm in binary64, on seeded inputs of every scale (subnormal to 1e308,
  // near 1 and -1, huge arguments of sin and cos) and special values (NaN, +-inf, +-0, the
  // overflow and underflow thresholds): NaN for NaN, infinities and zeros with their signs, and
  // finite values within the bound (OpenCL 1.2's for double, section 7.4; docs/array.md) in
  // units of the reference's last place. A device without shaderFloat64 or shaderInt64 is
  // skipped (f64 ops are unavailable there, or these refused); any other refusal fails.
  std::vector<Backend> vk;
  auto flag = [](const Backend& b, const char* key) {
    for (const auto& [k, v] : b.device().properties)
      if (k == key && std::holds_alternative<bool>(v)) return std::get<bool>(v);
    return false;
  };
  for (const Backend& b : gpu_backends("eval_1"))
    if (b.framework().name() == "vulkan") {
      if (flag(b, "fp64") && flag(b, "int64"))
        vk.push_back(b);
      else // the f64 ops are unavailable there and run on another framework
        WARN("skipped on " << b.name() << ": no shaderFloat64 or shaderInt64");
    }
  if (vk.empty()) {
    WARN("skipped: no array bundle on vulkan with a device with f64 and i64 here");
    return;
  }
  const int64_t n = 4099; // not a multiple of the work-group size
  std::vector<double> xs(static_cast<size_t>(n));
  std::mt19937_64 g(20261207);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::uniform_int_distribution<int> ex(-1074, 1023), small(-60, 5), near(1, 52);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = u(g);
    switch (i % 6) {
    case 0: xs[i] = 10 * v; break;
    case 1: xs[i] = v; break;
    case 2: xs[i] = std::ldexp(v, ex(g)); break; // any scale, subnormal to huge
    case 3: xs[i] = std::copysign(1.0 + std::ldexp(u(g), -near(g)), v); break; // near +-1
    case 4: xs[i] = 750 * v; break; // exp's and sinh's whole range
    default: xs[i] = std::ldexp(v, small(g)); break;
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {NAN,
                             inf,
                             -inf,
                             0.0,
                             -0.0,
                             1.0,
                             -1.0,
                             0.5,
                             -0.5,
                             2.0,
                             std::numeric_limits<double>::denorm_min(),
                             -std::numeric_limits<double>::denorm_min(),
                             std::numeric_limits<double>::min(),
                             std::numeric_limits<double>::max(),
                             -std::numeric_limits<double>::max(),
                             709.782712893384,
                             709.79,
                             710.4,
                             -708.5,
                             -740.0,
                             -745.1,
                             -746.0,
                             -40.5,
                             22.5,
                             5.999,
                             6.0,
                             1e22, // sin and cos need 2/pi's bits here
                             std::ldexp(1.0, 1023),
                             1.5707963267948966,
                             3.141592653589793,
                             6381956970095103.0 * 0x1p797, // near a multiple of pi/2
                             1e-300,
                             0.99999999999999989,
                             -0.99999999999999989,
                             1.0000000000000002,
                             3.7e-9};
  std::copy(std::begin(specials), std::end(specials), xs.begin());
  std::vector<uint8_t> raw(xs.size() * 8);
  std::memcpy(raw.data(), xs.data(), raw.size());
  struct bound {
    int op;
    double ulp;
    const char* name;
  };
  // OpenCL 1.2's bounds for double (erf and pow 16 there; ours are far below: see docs)
  const bound ops[] = {{PCY_ARRAY_OP_EXP, 3, "exp"},     {PCY_ARRAY_OP_EXPM1, 3, "expm1"},
                       {PCY_ARRAY_OP_LOG, 3, "log"},     {PCY_ARRAY_OP_LOG1P, 2, "log1p"},
                       {PCY_ARRAY_OP_LOG2, 3, "log2"},   {PCY_ARRAY_OP_LOG10, 3, "log10"},
                       {PCY_ARRAY_OP_SINH, 4, "sinh"},   {PCY_ARRAY_OP_COSH, 4, "cosh"},
                       {PCY_ARRAY_OP_TANH, 5, "tanh"},   {PCY_ARRAY_OP_ASIN, 4, "asin"},
                       {PCY_ARRAY_OP_ACOS, 4, "acos"},   {PCY_ARRAY_OP_ATAN, 5, "atan"},
                       {PCY_ARRAY_OP_ASINH, 4, "asinh"}, {PCY_ARRAY_OP_ACOSH, 4, "acosh"},
                       {PCY_ARRAY_OP_ATANH, 5, "atanh"}, {PCY_ARRAY_OP_ERF, 4, "erf"},
                       {PCY_ARRAY_OP_SIN, 4, "sin"},     {PCY_ARRAY_OP_COS, 4, "cos"},
                       {PCY_ARRAY_OP_TAN, 5, "tan"}};
  // ulps of v from r (0 where both are the same NaN, infinity or zero; infinite where they
  // differ in kind or sign)
  auto ulps = [](double v, double r) {
    if (std::isnan(r) || std::isnan(v)) return std::isnan(r) == std::isnan(v) ? 0.0 : HUGE_VAL;
    if (std::isinf(r) || std::isinf(v) || r == 0 || v == 0)
      return r == v && std::signbit(r) == std::signbit(v) ? 0.0 : HUGE_VAL;
    return std::abs(v - r) / std::ldexp(1.0, std::max(std::ilogb(r), -1022) - 52);
  };
  // A refusal is a skip only where the device lacks what the functions need.
  auto refused = [](const error& e) {
    if (e.code() != errc::unsupported) throw;
    const std::string why = e.what();
    INFO(why);
    REQUIRE((why.find("shaderFloat64") != std::string::npos ||
             why.find("shaderInt64") != std::string::npos));
    WARN("skipped on vulkan: " << why);
  };
  for (const bound& bd : ops) {
    const int op = bd.op;
    // in long double, rounded once more (glibc's double cos is 8 ulp off at x =
    // 0x1.6ac5b262ca1ffp+849)
    auto exact = [op](double x) {
      const long double d = x;
      return static_cast<double>([&] {
        switch (op) {
        case PCY_ARRAY_OP_EXP: return std::exp(d);
        case PCY_ARRAY_OP_EXPM1: return std::expm1(d);
        case PCY_ARRAY_OP_LOG: return std::log(d);
        case PCY_ARRAY_OP_LOG1P: return std::log1p(d);
        case PCY_ARRAY_OP_LOG2: return std::log2(d);
        case PCY_ARRAY_OP_LOG10: return std::log10(d);
        case PCY_ARRAY_OP_SINH: return std::sinh(d);
        case PCY_ARRAY_OP_COSH: return std::cosh(d);
        case PCY_ARRAY_OP_ASIN: return std::asin(d);
        case PCY_ARRAY_OP_ACOS: return std::acos(d);
        case PCY_ARRAY_OP_ATAN: return std::atan(d);
        case PCY_ARRAY_OP_ASINH: return std::asinh(d);
        case PCY_ARRAY_OP_ACOSH: return std::acosh(d);
        case PCY_ARRAY_OP_ATANH: return std::atanh(d);
        case PCY_ARRAY_OP_ERF: return std::erf(d);
        case PCY_ARRAY_OP_SIN: return std::sin(d);
        case PCY_ARRAY_OP_COS: return std::cos(d);
        case PCY_ARRAY_OP_TAN: return std::tan(d);
        default: return std::tanh(d);
        }
      }());
    };
    program_words p;
    p.rank = 1;
    p.shape = {n};
    p.views = {{0, 1}, {0, 1}};
    const int a = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F64, 1);
    p.add(op, PCY_DTYPE_F64, a, 0);
    for (const Backend& b : vk) {
      std::vector<uint8_t> got;
      try {
        got = run_on(b, opkind::eval, p, PCY_DTYPE_F64, n, {{PCY_DTYPE_F64, raw, {n}}}, 0, 0);
      } catch (const error& e) {
        refused(e);
        return;
      }
      double worst = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, &got[static_cast<size_t>(i) * 8], 8);
        const double e = ulps(v, exact(xs[static_cast<size_t>(i)]));
        if (e > worst) worst = e, at = i;
      }
      INFO(b.name() << ": op " << bd.name << ", worst " << worst << " ulp at x = " << std::hexfloat
                    << xs[static_cast<size_t>(at)]);
      CHECK(worst <= bd.ulp);
      if (std::getenv("PARENCHYMA_TEST_ULP_REPORT"))
        std::printf("f64 %-6s max %.3f ulp\n", bd.name, worst);
    }
  }
  // the binary ones, over pairs (y from the same inputs, shifted, every 5th an integer, and
  // pow's bases and exponents of every sign)
  std::vector<double> ys(xs.size());
  for (size_t i = 0; i < ys.size(); ++i) {
    const double y = xs[(i * 7 + 3) % xs.size()];
    ys[i] = i % 5 == 0 ? std::round(std::fmod(y, 60.0)) : i % 5 == 1 ? 30 * u(g) : y;
  }
  std::vector<uint8_t> raw_y(ys.size() * 8);
  std::memcpy(raw_y.data(), ys.data(), raw_y.size());
  const bound ops2[] = {{PCY_ARRAY_OP_ATAN2, 6, "atan2"},
                        {PCY_ARRAY_OP_HYPOT, 4, "hypot"},
                        {PCY_ARRAY_OP_LOGADDEXP, 4, "logaddexp"},
                        {PCY_ARRAY_OP_POW, 4, "pow"}};
  for (const bound& bd : ops2) {
    const int op = bd.op;
    auto exact = [op](double a, double b) {
      const long double la = a, lb = b;
      if (op == PCY_ARRAY_OP_ATAN2) return static_cast<double>(std::atan2(la, lb));
      if (op == PCY_ARRAY_OP_HYPOT) return static_cast<double>(std::hypot(la, lb));
      if (op == PCY_ARRAY_OP_POW) return static_cast<double>(std::pow(la, lb));
      if (a == b) return a + 0.69314718055994531; // npy_logaddexp's cases
      if (std::isinf(a) || std::isinf(b)) return a - b > 0 ? a : b;
      // in long double: the sum cancels where a and b differ in sign
      const long double t = static_cast<long double>(a) - static_cast<long double>(b);
      return static_cast<double>(static_cast<long double>(std::max(a, b)) +
                                 std::log1p(std::exp(-std::abs(t))));
    };
    program_words p;
    p.rank = 1;
    p.shape = {n};
    p.views = {{0, 1}, {0, 1}, {0, 1}};
    const int a = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F64, 1);
    const int b = p.add(PCY_ARRAY_OP_LOAD, PCY_DTYPE_F64, 2);
    p.add(op, PCY_DTYPE_F64, a, b);
    for (const Backend& bk : vk) {
      std::vector<uint8_t> got;
      try {
        got = run_on(bk, opkind::eval, p, PCY_DTYPE_F64, n,
                     {{PCY_DTYPE_F64, raw, {n}}, {PCY_DTYPE_F64, raw_y, {n}}}, 0, 0);
      } catch (const error& e) {
        refused(e);
        return;
      }
      double worst = 0;
      int64_t at = 0;
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, &got[static_cast<size_t>(i) * 8], 8);
        const size_t k = static_cast<size_t>(i);
        const double e = ulps(v, exact(xs[k], ys[k]));
        if (e > worst) worst = e, at = i;
      }
      INFO(bk.name() << ": op " << bd.name << ", worst " << worst << " ulp at x = " << std::hexfloat
                     << xs[static_cast<size_t>(at)] << ", y = " << ys[static_cast<size_t>(at)]);
      CHECK(worst <= bd.ulp);
      if (std::getenv("PARENCHYMA_TEST_ULP_REPORT"))
        std::printf("f64 %-9s max %.3f ulp\n", bd.name, worst);
    }
  }
  // a reduction of a program with them (the reduce kernels write the same instructions)
  const int64_t rows = 37, cols = 131;
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (double& e : v)
    e = 6 * u(g);
  for (const Backend& b : vk) {
    const pa::Array x = pa::asarray(b, v, {rows, cols});
    const std::vector<double> got =
        pa::sum(pa::exp(x) * pa::sin(x) + pa::log1p(pa::abs(x)), {1}).to_vector<double>();
    REQUIRE(got.size() == static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      long double want = 0, mag = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const long double e = v[static_cast<size_t>(r * cols + c)];
        const long double t = std::exp(e) * std::sin(e) + std::log1p(std::abs(e));
        want += t;
        mag += std::abs(t);
      }
      INFO(b.name() << ": row " << r);
      CHECK(std::abs(static_cast<long double>(got[static_cast<size_t>(r)]) - want) <= 1e-14L * mag);
    }
  }
}
