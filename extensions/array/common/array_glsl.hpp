// Array bundles, shared part: the GLSL compute dialect of the code generator (array_vulkan). It
// writes the eval, random, reduce, scan and sort kernels of a spec (array_codegen.hpp) as GLSL
// 4.50 compute shaders with the semantics of array_scalar.hpp, bit for bit where pcy_array.h
// says exact. It is a generator of its own rather than a third branch through
// array_codegen.hpp's C text: GLSL has no pointers, typedefs, C casts or out-parameters, and the
// OpenCL and CUDA output stays untouched; the reductions', scans' and sorts' statements come
// from array_codegen.hpp's reducer, scanner and sorter in GLSL's spelling (the same statements
// in the same order: the OpenCL and CUDA bundles' order and bits).
//
// The shader's interface (the Vulkan plugin's convention: buffers fill set 0's bindings in
// order):
//   bindings 0..    the elements (T o<p>[]) of each operand bound(s) lists, outputs first,
//                   inputs read-only (an input no instruction reads is not bound);
//   the next one    the meta words (array_codegen.hpp's layout, immediates after it) as the
//                   int64 words' raw bytes: `uint w[]`, word k at w[2k] (low) and w[2k + 1]
//                   (high). The host guarantees every shape, stride, offset and element count
//                   fits 31 bits (indices are 32-bit ints here) and passes the rest to no shader.
// No push constants: the meta words outgrow lavapipe's 128 bytes.
//
// Floating arithmetic is `precise` (no contraction, and Mesa's NIR keeps NaN and infinity:
// without it lavapipe treats float maths as free of them), and every classification (NaN, inf,
// sign, zero) reads the bits. The helper functions are GLSL source, vulkan/helpers.glsl (the
// bundle passes its text; this code defines the sections a program needs before it): among
// them the f32 transcendental functions, computed in f64 and rounded once (within 1 ulp;
// GLSL's built-ins are far off on lavapipe), and the f64 ones, our own binary64 routines
// (GLSL has none in f64). What is not written (the half types' transcendentals, a dtype or an
// integer width the device lacks) is refused with PCY_ERR_UNSUPPORTED naming it:
// `unsupported()` says which before anything is built.
#pragma once

#include "array_codegen.hpp"

#include <string>
#include <string_view>

namespace parenchyma::array_bundle::glsl {

using codegen::spec;
using codegen::detail::fmt;
using codegen::detail::is_signed_int;

// What a device offers the shaders (the Vulkan plugin's device properties).
struct features {
  bool fp64 = false, int64 = false, int8 = false, int16 = false;
};

namespace detail {

inline const char* gtype(int d) { return codegen::detail::gl_type(d); }
inline const char* tn(int d) { return codegen::detail::tname(d); }
inline int bits(int d) { return codegen::detail::bits_of(d); }
inline std::string reg(int k) { return fmt("r%d", k); }

// The exact instructions (and the structural ones) this dialect writes.
inline bool writes(int op, int t) {
  switch (op) {
  case PCY_ARRAY_OP_LOAD:
  case PCY_ARRAY_OP_CONST:
  case PCY_ARRAY_OP_INDEX:
  case PCY_ARRAY_OP_GATHER:
  case PCY_ARRAY_OP_STORE:
  case PCY_ARRAY_OP_CAST:
  case PCY_ARRAY_OP_WHERE:
  case PCY_ARRAY_OP_NEG:
  case PCY_ARRAY_OP_ABS:
  case PCY_ARRAY_OP_SIGN:
  case PCY_ARRAY_OP_SQUARE:
  case PCY_ARRAY_OP_SQRT:
  case PCY_ARRAY_OP_RSQRT:
  case PCY_ARRAY_OP_FLOOR:
  case PCY_ARRAY_OP_CEIL:
  case PCY_ARRAY_OP_ROUND:
  case PCY_ARRAY_OP_TRUNC:
  case PCY_ARRAY_OP_NOT:
  case PCY_ARRAY_OP_ISNAN:
  case PCY_ARRAY_OP_ISINF:
  case PCY_ARRAY_OP_ISFINITE:
  case PCY_ARRAY_OP_ADD:
  case PCY_ARRAY_OP_SUB:
  case PCY_ARRAY_OP_MUL:
  case PCY_ARRAY_OP_DIV:
  case PCY_ARRAY_OP_MINIMUM:
  case PCY_ARRAY_OP_MAXIMUM:
  case PCY_ARRAY_OP_AND:
  case PCY_ARRAY_OP_OR:
  case PCY_ARRAY_OP_XOR:
  case PCY_ARRAY_OP_SHL:
  case PCY_ARRAY_OP_SHR:
  case PCY_ARRAY_OP_EQ:
  case PCY_ARRAY_OP_NE:
  case PCY_ARRAY_OP_LT:
  case PCY_ARRAY_OP_LE:
  case PCY_ARRAY_OP_GT:
  case PCY_ARRAY_OP_GE:
  case PCY_ARRAY_OP_COPYSIGN:
  case PCY_ARRAY_OP_NEXTAFTER: return true;
  case PCY_ARRAY_OP_FLOORDIV:
  case PCY_ARRAY_OP_REM: return true;
  case PCY_ARRAY_OP_EXP:
  case PCY_ARRAY_OP_EXPM1:
  case PCY_ARRAY_OP_LOG:
  case PCY_ARRAY_OP_LOG1P:
  case PCY_ARRAY_OP_LOG2:
  case PCY_ARRAY_OP_LOG10:
  case PCY_ARRAY_OP_SINH:
  case PCY_ARRAY_OP_COSH:
  case PCY_ARRAY_OP_TANH:
  case PCY_ARRAY_OP_ASIN:
  case PCY_ARRAY_OP_ACOS:
  case PCY_ARRAY_OP_ATAN:
  case PCY_ARRAY_OP_ASINH:
  case PCY_ARRAY_OP_ACOSH:
  case PCY_ARRAY_OP_ATANH:
  case PCY_ARRAY_OP_ERF:
  case PCY_ARRAY_OP_SIN:
  case PCY_ARRAY_OP_COS:
  case PCY_ARRAY_OP_TAN:
  case PCY_ARRAY_OP_ATAN2:
  case PCY_ARRAY_OP_HYPOT:
  case PCY_ARRAY_OP_LOGADDEXP: return t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64;
  case PCY_ARRAY_OP_POW: return !is_half(t);
  default: return false;
  }
}

// The transcendental instructions (helpers.glsl's own functions, none GLSL's built-ins).
inline bool transcendental(int op) {
  return (op >= PCY_ARRAY_OP_EXP && op <= PCY_ARRAY_OP_LOG10) ||
         (op >= PCY_ARRAY_OP_SIN && op <= PCY_ARRAY_OP_ERF) || op == PCY_ARRAY_OP_ATAN2 ||
         op == PCY_ARRAY_OP_HYPOT || op == PCY_ARRAY_OP_LOGADDEXP || op == PCY_ARRAY_OP_POW;
}
// The f32 instructions computed through f64 (helpers.glsl's PCY_VIA_F64 section).
inline bool via_f64(int op, int t) { return t == PCY_DTYPE_F32 && transcendental(op); }
// The f64 ones (helpers.glsl's PCY_MATH_F64 section).
inline bool math_f64(int op, int t) { return t == PCY_DTYPE_F64 && transcendental(op); }

// A cast of expression x (dtype from) to dtype to.
inline std::string cast(const std::string& x, int from, int to) {
  const char* T = gtype(to);
  if (from == to) return x;
  const char* X = x.c_str();
  auto fmt_ = [](int d) { return d == PCY_DTYPE_F16 ? "10, 15, 5" : "7, 127, 8"; };
  if (to == PCY_DTYPE_BOOL && is_half(from)) return fmt("uint8_t((uint(%s) & 0x7FFFu) != 0u)", X);
  if (is_half(from)) { // through float (exact)
    const std::string f =
        (from == PCY_DTYPE_F16 ? "pcy_f32_from_f16(" : "pcy_f32_from_bf16(") + x + ")";
    if (is_half(to)) return fmt("pcy_half_from_f32(%s, %s)", f.c_str(), fmt_(to));
    return cast(f, PCY_DTYPE_F32, to);
  }
  if (is_half(to)) {
    if (from == PCY_DTYPE_F32) return fmt("pcy_half_from_f32(%s, %s)", X, fmt_(to));
    if (from == PCY_DTYPE_F64) return fmt("pcy_half_from_f64(%s, %s)", X, fmt_(to));
    if (from == PCY_DTYPE_BOOL || from == PCY_DTYPE_U8)
      return fmt("pcy_half_from_int(uint64_t(%s), false, %s)", X, fmt_(to));
    // signed: the magnitude as uint64_t (MIN's wraps to 2^(bits-1), right as unsigned)
    return fmt(
        "pcy_half_from_int(%s < %s(0) ? 0ul - uint64_t(int64_t(%s)) : uint64_t(int64_t(%s)), "
        "%s < %s(0), %s)",
        X, gtype(from), X, X, X, gtype(from), fmt_(to));
  }
  if (to == PCY_DTYPE_BOOL) {
    if (is_float(from)) return fmt("uint8_t(!pcy_iszero_%s(%s))", tn(from), x.c_str());
    return fmt("uint8_t((%s) != %s(0))", x.c_str(), gtype(from));
  }
  if (is_float(to) || from == PCY_DTYPE_BOOL || (is_int(from) && is_int(to)))
    return fmt("%s(%s)", T, x.c_str()); // rounds to nearest even / wraps / 0 or 1
  // float -> integer: truncated, saturated, NaN -> 0 (bounds exact in both float types)
  const char* F = gtype(from);
  const char *lo = "0.0", *hi = "256.0", *mn = "0", *mx = "255";
  switch (to) {
  case PCY_DTYPE_I8: lo = "-128.0", hi = "128.0", mn = "-128", mx = "127"; break;
  case PCY_DTYPE_I16: lo = "-32768.0", hi = "32768.0", mn = "-32768", mx = "32767"; break;
  case PCY_DTYPE_I32:
    lo = "-2147483648.0", hi = "2147483648.0", mn = "(-2147483647 - 1)";
    mx = "2147483647";
    break;
  case PCY_DTYPE_I64:
    lo = "-9223372036854775808.0", hi = "9223372036854775808.0",
    mn = "int64_t(0x8000000000000000ul)", mx = "int64_t(0x7FFFFFFFFFFFFFFFl)";
    break;
  default: break;
  }
  return fmt("(pcy_isnan_%s(%s) ? %s(0) : (%s) <= %s(%s) ? %s(%s) : (%s) >= %s(%s) ? %s(%s) : "
             "%s(%s))",
             tn(from), x.c_str(), T, x.c_str(), F, lo, T, mn, x.c_str(), F, hi, T, mx, T,
             x.c_str());
}

// The meta word k as a 32-bit int (the host checked it fits).
inline std::string word(int k) { return fmt("int(w[%d])", 2 * k); }

inline std::string instruction_code(const spec& s, int k) {
  const instruction& in = s.code[static_cast<size_t>(k)];
  const int d = in.dtype;
  const char* T = gtype(d);
  const std::string r = reg(k);
  const int t = op_operands(in.op) > 0 ? s.code[static_cast<size_t>(in.a)].dtype : d;
  const std::string a = op_operands(in.op) > 0 ? reg(static_cast<int>(in.a)) : "";
  const std::string b = op_operands(in.op) > 1 ? reg(static_cast<int>(in.b)) : "";
  const std::string c = op_operands(in.op) > 2 ? reg(static_cast<int>(in.c)) : "";
  const bool fl = is_float(t);
  const char* n = tn(t);
  const codegen::layout l = codegen::layout_of(s);
  auto def = [&](const std::string& e) {
    return std::string(is_float(d) ? "precise " : "") + T + " " + r + " = " + e + ";\n";
  };
  const char* A = a.c_str();
  const char* B = b.c_str();
  switch (in.op) {
  case PCY_ARRAY_OP_LOAD: {
    const std::string e =
        fmt("o%lld[q%lld]", static_cast<long long>(in.a), static_cast<long long>(in.a));
    return def(d == PCY_DTYPE_BOOL ? "uint8_t(" + e + " != uint8_t(0))" : e);
  }
  case PCY_ARRAY_OP_GATHER: {
    const int p = static_cast<int>(in.a), dim = static_cast<int>(in.c);
    const std::string gi = reg(static_cast<int>(in.b));
    const std::string ext = word(l.words(s.what) + s.immediate_slot(k));
    const std::string st = word(l.stride(p, dim));
    // the index clipped to [0, extent - 1] in its own dtype, then 32-bit (extent < 2^31)
    const std::string ci =
        fmt("(%s < %s(0) ? 0 : %s > %s(%s - 1) ? %s - 1 : int(%s))", gi.c_str(),
            gtype(s.code[static_cast<size_t>(in.b)].dtype), gi.c_str(),
            gtype(s.code[static_cast<size_t>(in.b)].dtype), ext.c_str(), ext.c_str(), gi.c_str());
    const std::string e =
        fmt("o%d[q%d + %s * %s - idx%d * %s]", p, p, ci.c_str(), st.c_str(), dim, st.c_str());
    return def(d == PCY_DTYPE_BOOL ? "uint8_t(" + e + " != uint8_t(0))" : e);
  }
  case PCY_ARRAY_OP_CONST: {
    const int wk = l.words(s.what) + s.immediate_slot(k);
    if (d == PCY_DTYPE_F32) return def(fmt("uintBitsToFloat(w[%d])", 2 * wk));
    if (d == PCY_DTYPE_F64)
      return def(fmt("packDouble2x32(uvec2(w[%d], w[%d]))", 2 * wk, 2 * wk + 1));
    if (d == PCY_DTYPE_I64)
      return def(fmt("int64_t(packUint2x32(uvec2(w[%d], w[%d])))", 2 * wk, 2 * wk + 1));
    if (d == PCY_DTYPE_BOOL) return def(fmt("uint8_t(w[%d] != 0u)", 2 * wk));
    return def(fmt("%s(int(w[%d]))", T, 2 * wk));
  }
  case PCY_ARRAY_OP_INDEX: return def(fmt("%s(idx%lld)", T, static_cast<long long>(in.a)));
  case PCY_ARRAY_OP_STORE: return def(reg(static_cast<int>(in.b)));
  case PCY_ARRAY_OP_CAST: return def(cast(a, t, d));
  case PCY_ARRAY_OP_WHERE: return def("(" + a + " != uint8_t(0) ? " + b + " : " + c + ")");
  case PCY_ARRAY_OP_NEG: return def(fl ? fmt("pcy_flip_%s(%s)", n, A) : fmt("%s(-%s)", T, A));
  case PCY_ARRAY_OP_ABS:
    if (fl) return def(fmt("pcy_abs_%s(%s)", n, A));
    if (t == PCY_DTYPE_U8) return def(a);
    return def(fmt("(%s < %s(0) ? %s(-%s) : %s)", A, T, T, A, A));
  case PCY_ARRAY_OP_SIGN:
    // the zero test a float compare like the sign test, so that a device that flushes
    // subnormals (NVIDIA's, f32) treats a subnormal as the zero it compares equal to in both
    if (fl)
      return def(fmt("(pcy_isnan_%s(%s) ? %s : %s == %s(0) ? %s(0) : %s < %s(0) ? %s(-1) : %s(1))",
                     n, A, A, A, T, T, A, T, T, T));
    return def(fmt("%s(int(%s > %s(0)) - int(%s < %s(0)))", T, A, T, A, T));
  case PCY_ARRAY_OP_SQUARE: return def(fmt("%s(%s * %s)", T, A, A));
  case PCY_ARRAY_OP_ISNAN:
  case PCY_ARRAY_OP_ISINF:
    if (!fl) return def("uint8_t(0)");
    return def(
        fmt("uint8_t(pcy_%s_%s(%s))", in.op == PCY_ARRAY_OP_ISNAN ? "isnan" : "isinf", n, A));
  case PCY_ARRAY_OP_ISFINITE:
    if (!fl) return def("uint8_t(1)");
    return def(fmt("uint8_t(!pcy_isnan_%s(%s) && !pcy_isinf_%s(%s))", n, A, n, A));
  case PCY_ARRAY_OP_FLOOR:
  case PCY_ARRAY_OP_CEIL:
  case PCY_ARRAY_OP_ROUND:
  case PCY_ARRAY_OP_TRUNC:
    if (!fl) return def(a);
    return def(std::string(in.op == PCY_ARRAY_OP_FLOOR   ? "floor("
                           : in.op == PCY_ARRAY_OP_CEIL  ? "ceil("
                           : in.op == PCY_ARRAY_OP_ROUND ? "roundEven("
                                                         : "trunc(") +
               a + ")");
  case PCY_ARRAY_OP_EXP: return def(fmt("pcy_exp_%s(%s)", n, A));
  case PCY_ARRAY_OP_EXPM1: return def(fmt("pcy_expm1_%s(%s)", n, A));
  case PCY_ARRAY_OP_LOG: return def(fmt("pcy_log_%s(%s)", n, A));
  case PCY_ARRAY_OP_LOG1P: return def(fmt("pcy_log1p_%s(%s)", n, A));
  case PCY_ARRAY_OP_LOG2: return def(fmt("pcy_log2_%s(%s)", n, A));
  case PCY_ARRAY_OP_LOG10: return def(fmt("pcy_log10_%s(%s)", n, A));
  case PCY_ARRAY_OP_SINH: return def(fmt("pcy_sinh_%s(%s)", n, A));
  case PCY_ARRAY_OP_COSH: return def(fmt("pcy_cosh_%s(%s)", n, A));
  case PCY_ARRAY_OP_TANH: return def(fmt("pcy_tanh_%s(%s)", n, A));
  case PCY_ARRAY_OP_ASIN: return def(fmt("pcy_asin_%s(%s)", n, A));
  case PCY_ARRAY_OP_ACOS: return def(fmt("pcy_acos_%s(%s)", n, A));
  case PCY_ARRAY_OP_ATAN: return def(fmt("pcy_atan_%s(%s)", n, A));
  case PCY_ARRAY_OP_ASINH: return def(fmt("pcy_asinh_%s(%s)", n, A));
  case PCY_ARRAY_OP_ACOSH: return def(fmt("pcy_acosh_%s(%s)", n, A));
  case PCY_ARRAY_OP_ATANH: return def(fmt("pcy_atanh_%s(%s)", n, A));
  case PCY_ARRAY_OP_ERF: return def(fmt("pcy_erf_%s(%s)", n, A));
  case PCY_ARRAY_OP_SIN: return def(fmt("pcy_sin_%s(%s)", n, A));
  case PCY_ARRAY_OP_COS: return def(fmt("pcy_cos_%s(%s)", n, A));
  case PCY_ARRAY_OP_TAN: return def(fmt("pcy_tan_%s(%s)", n, A));
  case PCY_ARRAY_OP_ATAN2: return def(fmt("pcy_atan2_%s(%s, %s)", n, A, B));
  case PCY_ARRAY_OP_HYPOT: return def(fmt("pcy_hypot_%s(%s, %s)", n, A, B));
  case PCY_ARRAY_OP_LOGADDEXP: return def(fmt("pcy_logaddexp_%s(%s, %s)", n, A, B));
  // f32 `/` and sqrt through helpers.glsl's pcy_div_f32 / pcy_sqrt_f32: correctly rounded
  // through f64 where the device has it (GLSL allows 2.5 and 3 ulp; NVIDIA's driver is 1 ulp
  // off at times), the GLSL operators elsewhere.
  case PCY_ARRAY_OP_SQRT:
    return def(t == PCY_DTYPE_F32 ? "pcy_sqrt_f32(" + a + ")" : "sqrt(" + a + ")");
  case PCY_ARRAY_OP_RSQRT:
    if (t == PCY_DTYPE_F32) return def(fmt("pcy_div_f32(1.0, pcy_sqrt_f32(%s))", A));
    return def(fmt("%s(1) / sqrt(%s)", T, A));
  case PCY_ARRAY_OP_NOT:
    if (is_bool(t)) return def("uint8_t(" + a + " == uint8_t(0))");
    return def(fmt("%s(~%s)", T, A));
  case PCY_ARRAY_OP_ADD: return def(fmt("%s(%s + %s)", T, A, B));
  case PCY_ARRAY_OP_SUB: return def(fmt("%s(%s - %s)", T, A, B));
  case PCY_ARRAY_OP_MUL: return def(fmt("%s(%s * %s)", T, A, B));
  case PCY_ARRAY_OP_DIV:
    return def(t == PCY_DTYPE_F32 ? fmt("pcy_div_f32(%s, %s)", A, B) : a + " / " + b);
  case PCY_ARRAY_OP_FLOORDIV:
    return def(fmt(fl ? "pcy_floordiv_%s(%s, %s)" : "pcy_fdiv_%s(%s, %s)", n, A, B));
  case PCY_ARRAY_OP_REM:
    return def(fmt(fl ? "pcy_fmodpy_%s(%s, %s)" : "pcy_rem_%s(%s, %s)", n, A, B));
  case PCY_ARRAY_OP_POW: {
    if (fl) return def(fmt("pcy_pow_%s(%s, %s)", n, A, B));
    const std::string up = t == PCY_DTYPE_I64
                               ? fmt("int64_t(pcy_upow64(uint64_t(%s), uint64_t(%s)))", A, B)
                               : fmt("%s(pcy_upow(uint(int(%s)), uint(int(%s))))", T, A, B);
    if (is_signed_int(t))
      return def(fmt("(%s < %s(0) ? (%s == %s(1) ? %s(1) : %s == %s(-1) ? ((%s & %s(1)) != %s(0) "
                     "? %s(-1) : %s(1)) : %s(0)) : %s)",
                     B, T, A, T, T, A, T, B, T, T, T, T, T, up.c_str()));
    return def(up);
  }
  case PCY_ARRAY_OP_MINIMUM:
    if (fl) return def(fmt("((%s <= %s || pcy_isnan_%s(%s)) ? %s : %s)", A, B, n, A, A, B));
    return def(fmt("(%s <= %s ? %s : %s)", A, B, A, B));
  case PCY_ARRAY_OP_MAXIMUM:
    if (fl) return def(fmt("((%s >= %s || pcy_isnan_%s(%s)) ? %s : %s)", A, B, n, A, A, B));
    return def(fmt("(%s >= %s ? %s : %s)", A, B, A, B));
  case PCY_ARRAY_OP_AND: return def(fmt("%s(%s & %s)", T, A, B));
  case PCY_ARRAY_OP_OR: return def(fmt("%s(%s | %s)", T, A, B));
  case PCY_ARRAY_OP_XOR: return def(fmt("%s(%s ^ %s)", T, A, B));
  case PCY_ARRAY_OP_SHL:
    if (t == PCY_DTYPE_I64)
      return def(fmt("(%s < 0l || %s >= 64l ? 0l : %s << int(%s))", B, B, A, B));
    return def(fmt("(int(%s) < 0 || int(%s) >= %d ? %s(0) : %s(int(%s) << int(%s)))", B, B, bits(t),
                   T, T, A, B));
  case PCY_ARRAY_OP_SHR:
    if (t == PCY_DTYPE_I64)
      return def(
          fmt("(%s < 0l || %s >= 64l ? (%s < 0l ? -1l : 0l) : %s >> int(%s))", B, B, A, A, B));
    if (is_signed_int(t))
      return def(fmt("(int(%s) < 0 || int(%s) >= %d ? (%s < %s(0) ? %s(-1) : %s(0)) : %s(int(%s) "
                     ">> int(%s)))",
                     B, B, bits(t), A, T, T, T, T, A, B));
    return def(fmt("(int(%s) >= %d ? %s(0) : %s(int(%s) >> int(%s)))", B, bits(t), T, T, A, B));
  case PCY_ARRAY_OP_EQ: return def(fmt("uint8_t(%s == %s)", A, B));
  case PCY_ARRAY_OP_NE: return def(fmt("uint8_t(!(%s == %s))", A, B));
  case PCY_ARRAY_OP_LT: return def(fmt("uint8_t(%s < %s)", A, B));
  case PCY_ARRAY_OP_LE: return def(fmt("uint8_t(%s <= %s)", A, B));
  case PCY_ARRAY_OP_GT: return def(fmt("uint8_t(%s > %s)", A, B));
  case PCY_ARRAY_OP_GE: return def(fmt("uint8_t(%s >= %s)", A, B));
  case PCY_ARRAY_OP_COPYSIGN: return def(fmt("pcy_copysign_%s(%s, %s)", n, A, B));
  case PCY_ARRAY_OP_NEXTAFTER: return def(fmt("pcy_nextafter_%s(%s, %s)", n, A, B));
  default: break;
  }
  return "#error unknown instruction\n";
}

// Python's integer floor division and remainder (x // 0 = 0, x % 0 = 0, MIN // -1 = MIN).
// Signed operands are divided as magnitudes in unsigned arithmetic, the signs applied after:
// GLSL leaves `/` and `%` of negative integers to the implementation (glslang emits OpSDiv and
// OpSMod), and NVIDIA's Vulkan driver gave a nonzero remainder for some exact divisions of
// negative 8-, 16- and 32-bit values (so floor division one too low; docs/vulkan.md, 2026-12-07
// 19:18 and 22:20). 8- and 16-bit operands are divided as 32-bit integers (the quotient and
// remainder fit, and wrap back as the native bundle's do).
inline std::string int_helpers(int d) {
  const char* T = gtype(d);
  const char* n = tn(d);
  const bool narrow = d == PCY_DTYPE_U8 || d == PCY_DTYPE_I8 || d == PCY_DTYPE_I16;
  // W: the signed type the division runs in; U: its unsigned twin
  const char* W = !narrow ? T : d == PCY_DTYPE_U8 ? "uint" : "int";
  if (d == PCY_DTYPE_U8)
    return fmt("%s pcy_fdiv_%s(%s a, %s b) { return b == %s(0) ? %s(0) : %s(%s(a) / %s(b)); }\n"
               "%s pcy_rem_%s(%s a, %s b) { return b == %s(0) ? %s(0) : %s(%s(a) %% %s(b)); }\n",
               T, n, T, T, T, T, T, W, W, T, n, T, T, T, T, T, W, W);
  const char* U = d == PCY_DTYPE_I64 ? "uint64_t" : "uint";
  const std::string mn = d == PCY_DTYPE_I64 ? "int64_t(0x8000000000000000ul)"
                                            : fmt("%s(%s)", T, codegen::detail::int_min(d));
  // x, y in W; ux, uy their magnitudes; uq, ur the magnitudes' quotient and remainder
  const std::string split =
      fmt("  %s x = %s(a), y = %s(b);\n"
          "  %s ux = x < %s(0) ? %s(0) - %s(x) : %s(x), uy = y < %s(0) ? %s(0) - %s(y) : %s(y);\n"
          "  %s uq = ux / uy, ur = ux - uq * uy;\n",
          W, W, W, U, W, U, U, U, W, U, U, U, U);
  std::string s;
  s += fmt("%s pcy_fdiv_%s(%s a, %s b) {\n  if (b == %s(0)) return %s(0);\n", T, n, T, T, T, T);
  s += fmt("  if (a == %s && b == %s(-1)) return a;\n", mn.c_str(), T);
  s += split;
  s += fmt("  %s q = %s(uq);\n  if ((x < %s(0)) != (y < %s(0))) { q = -q; if (ur != %s(0)) q = q - "
           "%s(1); }\n  return %s(q);\n}\n",
           W, W, W, W, U, W, T);
  s += fmt("%s pcy_rem_%s(%s a, %s b) {\n  if (b == %s(0)) return %s(0);\n", T, n, T, T, T, T);
  s += fmt("  if (a == %s && b == %s(-1)) return %s(0);\n", mn.c_str(), T, T);
  s += split;
  s += fmt("  %s r = x < %s(0) ? -%s(ur) : %s(ur);\n"
           "  if (r != %s(0) && ((r < %s(0)) != (y < %s(0)))) r = r + y;\n  return %s(r);\n}\n",
           W, W, W, W, W, W, W, T);
  return s;
}

} // namespace detail

// Why this dialect cannot write s on a device with f ("" when it can).
inline std::string unsupported(const spec& s, const features& f) {
  if (s.what == codegen::job::random) {
    const int d = s.dtypes[0];
    if (!f.int64 || !f.int8)
      return "random draws need shaderInt64 and shaderInt8 with 8-bit storage buffers";
    if (d == PCY_DTYPE_F64 && !f.fp64) return "the device has no shaderFloat64";
    if ((d == PCY_DTYPE_I16 || is_half(d)) && !f.int16)
      return "the device has no shaderInt16 with 16-bit storage buffers";
    return "";
  }
  if (s.what == codegen::job::reduce) {
    const int t = s.value_dtype();
    if (is_half(t)) return "reductions of f16 and bf16 values are not written in GLSL";
    if (s.kind == PCY_ARRAY_REDUCE_LOGSUMEXP && (!f.fp64 || !f.int64))
      return "LOGSUMEXP computes exp and log in f64 here (helpers.glsl), and the device lacks "
             "shaderFloat64 or shaderInt64";
    if ((s.kind == PCY_ARRAY_REDUCE_ARGMIN || s.kind == PCY_ARRAY_REDUCE_ARGMAX) && !f.int64)
      return "the device has no shaderInt64 (ARGMIN and ARGMAX give i64 positions)";
  } else if (s.what == codegen::job::sort) {
    if (is_half(s.value_dtype())) return "sorts of f16 and bf16 values are not written in GLSL";
    if ((s.kind & 1) == PCY_ARRAY_SORT_ARGSORT && !f.int64)
      return "the device has no shaderInt64 (ARGSORT gives i64 positions)";
  } else if (s.what != codegen::job::eval && s.what != codegen::job::scan) {
    return "only eval, reduce, scan, sort and random programs are written in GLSL";
  }
  // bool registers (comparisons, WHERE's condition) are uint8_t in every shader
  if (!f.int8) return "the device has no shaderInt8 with 8-bit storage buffers";
  auto dtype_ok = [&](int d) -> std::string {
    if (is_half(d) && (!f.int16 || !f.int64))
      return "the device lacks shaderInt16 with 16-bit storage or shaderInt64 (f16 and bf16 "
             "values)";
    if (d == PCY_DTYPE_F64 && !f.fp64) return "the device has no shaderFloat64";
    if (d == PCY_DTYPE_I64 && !f.int64) return "the device has no shaderInt64";
    if ((d == PCY_DTYPE_I8 || d == PCY_DTYPE_U8 || d == PCY_DTYPE_BOOL) && !f.int8)
      return "the device has no shaderInt8 with 8-bit storage buffers";
    if (d == PCY_DTYPE_I16 && !f.int16)
      return "the device has no shaderInt16 with 16-bit storage buffers";
    return "";
  };
  for (int o = 0; o < s.operands; ++o)
    if (std::string why = dtype_ok(s.dtypes[static_cast<size_t>(o)]); !why.empty()) return why;
  for (int k = 0; k < s.count; ++k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    if (std::string why = dtype_ok(in.dtype); !why.empty()) return why;
    const int t = op_operands(in.op) > 0 ? s.code[static_cast<size_t>(in.a)].dtype : in.dtype;
    if ((in.op == PCY_ARRAY_OP_INDEX || t == PCY_DTYPE_I64) && !f.int64)
      return "the device has no shaderInt64 (INDEX and i64 values)";
    if ((in.op == PCY_ARRAY_OP_FLOORDIV || in.op == PCY_ARRAY_OP_REM) && t == PCY_DTYPE_F64 &&
        !f.int64)
      return "the device has no shaderInt64 (f64 FLOORDIV and REM work on the bits)";
    if (detail::math_f64(in.op, t) && !f.int64)
      return fmt("instruction %s on f64 works on the bits of doubles here (argument reduction), "
                 "and the device lacks shaderInt64",
                 op_name(in.op));
    if (detail::via_f64(in.op, t) && (!f.fp64 || !f.int64))
      return fmt("instruction %s on f32 is computed in f64 here, and the device lacks "
                 "shaderFloat64 or shaderInt64",
                 op_name(in.op));
    if (!detail::writes(in.op, t))
      return fmt("instruction %s on %s has no exact GLSL form here yet", op_name(in.op),
                 detail::tn(t));
  }
  return "";
}

// The operands the shader binds, in binding order (the outputs and the inputs it reads: the
// compiler drops a buffer no instruction touches, and the plugin counts what is left); the meta
// words' buffer follows them.
// The instructions the outputs depend on (the result, the STOREs and what they read): only
// those are written, so no dead load leaves a buffer the compiler drops.
inline std::array<bool, max_instructions> live(const spec& s) {
  std::array<bool, max_instructions> on{};
  for (int k = s.count - 1; k >= 0; --k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    if (k == s.count - 1 || in.op == PCY_ARRAY_OP_STORE) on[static_cast<size_t>(k)] = true;
    if (!on[static_cast<size_t>(k)]) continue;
    const int n = op_operands(in.op);
    if (n > 0) on[static_cast<size_t>(in.a)] = true;
    if (n > 1) on[static_cast<size_t>(in.b)] = true;
    if (n > 2) on[static_cast<size_t>(in.c)] = true;
    if (in.op == PCY_ARRAY_OP_GATHER || in.op == PCY_ARRAY_OP_STORE)
      on[static_cast<size_t>(in.b)] = true;
  }
  return on;
}
inline std::array<bool, max_operands> bound(const spec& s) {
  std::array<bool, max_operands> used{};
  const std::array<bool, max_instructions> on = live(s);
  for (int k = 0; k < s.count; ++k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    if (on[static_cast<size_t>(k)] && (in.op == PCY_ARRAY_OP_LOAD || in.op == PCY_ARRAY_OP_GATHER))
      used[static_cast<size_t>(in.a)] = true;
  }
  for (int o = 0; o < s.outputs; ++o)
    used[static_cast<size_t>(o)] = true;
  return used;
}

namespace detail {

// One storage buffer of set 0 (`T name[]`, block B<name>).
inline std::string buffer(int& binding, const char* type, const std::string& name, bool readonly) {
  return fmt("layout(std430, set = 0, binding = %d) %sbuffer B%s { %s %s[]; };\n", binding++,
             readonly ? "readonly " : "", name.c_str(), type, name.c_str());
}

// The shader's head: version, extensions, work-group size, the buffers (`bindings`, then the
// meta words' at the next binding), then helpers.glsl's sections the program needs (besides
// `via_f64`: the reduction's own f32 exp and log) and the library.
inline std::string head(const spec& s, int wg, std::string_view helpers,
                        const std::string& bindings, int binding, bool via_f64_too = false) {
  bool f32 = false, f64 = false, i16 = false, i64 = false;
  std::array<bool, 16> ints{}; // integer dtypes needing floordiv/rem helpers
  bool upow = false, upow64 = false, half = false, explog = via_f64_too, math64 = false;
  auto see = [&](int d) {
    half = half || is_half(d);
    f32 = f32 || d == PCY_DTYPE_F32;
    f64 = f64 || d == PCY_DTYPE_F64;
    i16 = i16 || d == PCY_DTYPE_I16;
    i64 = i64 || d == PCY_DTYPE_I64;
  };
  for (int o = 0; o < s.operands; ++o)
    see(s.dtypes[static_cast<size_t>(o)]);
  for (int k = 0; k < s.count; ++k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    see(in.dtype);
    if (in.op == PCY_ARRAY_OP_INDEX) i64 = true;
    const int t = op_operands(in.op) > 0 ? s.code[static_cast<size_t>(in.a)].dtype : in.dtype;
    if (in.op == PCY_ARRAY_OP_FLOORDIV || in.op == PCY_ARRAY_OP_REM) {
      ints[static_cast<size_t>(t)] = true;
      i64 = i64 || t == PCY_DTYPE_F64;
    }
    if (in.op == PCY_ARRAY_OP_POW && !is_float(t)) (t == PCY_DTYPE_I64 ? upow64 : upow) = true;
    explog = explog || via_f64(in.op, t);
    math64 = math64 || math_f64(in.op, t);
    if (in.op == PCY_ARRAY_OP_CONST && in.dtype == PCY_DTYPE_I64) i64 = true;
  }
  i16 = i16 || half;
  math64 = math64 || (explog && f64);    // LOGSUMEXP of f64: PCY_MATH_F64's exp and log
  i64 = i64 || half || explog || math64; // uint64BitsToDouble, the bits of doubles
  // comparisons and WHERE conditions are uint8_t registers
  std::string src = "#version 450\n";
  src += "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n";
  src += "#extension GL_EXT_shader_8bit_storage : require\n";
  if (i16)
    src += "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n"
           "#extension GL_EXT_shader_16bit_storage : require\n";
  if (i64) src += "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  src += fmt("layout(local_size_x = %d) in;\n", wg);
  src += bindings;
  src +=
      fmt("layout(std430, set = 0, binding = %d) readonly buffer Meta { uint w[]; };\n", binding);
  if (f32 || half || explog) src += "#define PCY_F32 1\n"; // PCY_VIA_F64's f32 functions
  if (f64) src += "#define PCY_F64 1\n";
  if (half) src += "#define PCY_HALF 1\n";
  if (explog) src += "#define PCY_VIA_F64 1\n";
  if (math64) src += "#define PCY_MATH_F64 1\n";
  if (ints[static_cast<size_t>(PCY_DTYPE_F32)]) src += "#define PCY_DIVMOD_F32 1\n";
  if (ints[static_cast<size_t>(PCY_DTYPE_F64)]) src += "#define PCY_DIVMOD_F64 1\n";
  if (upow) src += "#define PCY_UPOW 1\n";
  if (upow64) src += "#define PCY_UPOW64 1\n";
  src += helpers;
  for (int d = 0; d < 16; ++d)
    if (ints[static_cast<size_t>(d)] && !is_float(d)) src += int_helpers(d);
  return src;
}

// idx<from>..idx<to-1> (declared before) from the linear index `lin`, row-major.
inline std::string unravel(const codegen::layout& l, int from, int to, const std::string& lin) {
  if (to <= from) return "";
  std::string u = "{ int rem_ = " + lin + ";\n";
  for (int d = to - 1; d >= from; --d)
    if (d > from)
      u += fmt("  idx%d = rem_ %% %s; rem_ /= %s;\n", d, word(l.shape(d)).c_str(),
               word(l.shape(d)).c_str());
    else
      u += fmt("  idx%d = rem_;\n", d);
  return u + "}\n";
}
inline std::string idx_decl(int rank) {
  std::string d;
  for (int i = 0; i < rank; ++i)
    d += fmt("int idx%d = 0; ", i);
  return d.empty() ? d : d + "\n";
}
// The offsets q<p> of operand p at idx0..idx<R-1>, for `which` operands.
inline std::string offsets(const spec& s, const std::array<bool, max_operands>& which) {
  const codegen::layout l = codegen::layout_of(s);
  std::string o;
  for (int p = 0; p < s.operands; ++p) {
    if (!which[static_cast<size_t>(p)]) continue;
    o += fmt("    int q%d = %s", p, word(l.offset(p)).c_str());
    for (int d = 0; d < s.rank; ++d)
      o += fmt(" + idx%d * %s", d, word(l.stride(p, d)).c_str());
    o += ";\n";
  }
  return o;
}
// The program's value at idx: the inputs' offsets, then the live instructions (r<k>).
inline std::string body(const spec& s) {
  std::array<bool, max_operands> in = bound(s);
  for (int o = 0; o < s.outputs; ++o)
    in[static_cast<size_t>(o)] = false;
  std::string b = offsets(s, in);
  const std::array<bool, max_instructions> on = live(s);
  for (int k = 0; k < s.count; ++k)
    if (on[static_cast<size_t>(k)]) b += "    " + instruction_code(s, k);
  return b;
}

} // namespace detail

// The compute shader of an eval spec (unsupported(s) empty); `wg`: the work-group size.
inline std::string eval_source(const spec& s, int wg, std::string_view helpers) {
  using namespace detail;
  const codegen::layout l = codegen::layout_of(s);
  const std::array<bool, max_operands> used = bound(s);
  std::string bindings;
  int binding = 0;
  for (int o = 0; o < s.operands; ++o)
    if (used[static_cast<size_t>(o)])
      bindings +=
          buffer(binding, gtype(s.dtypes[static_cast<size_t>(o)]), fmt("o%d", o), o >= s.outputs);
  std::string src = head(s, wg, helpers, bindings, binding);
  const int R = s.rank;
  src += "void main() {\n";
  src += fmt("  int n = %s;\n", word(l.extra(0)).c_str());
  src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  src += "  for (int lin = int(gl_GlobalInvocationID.x); lin < n; lin += step) {\n";
  src += idx_decl(R) + unravel(l, 0, R, "lin");
  const std::array<bool, max_instructions> on = live(s);
  src += offsets(s, used);
  for (int k = 0; k < s.count; ++k)
    if (on[static_cast<size_t>(k)]) src += "    " + instruction_code(s, k);
  // Every value is in a register before the first store (outputs may be inputs in place).
  for (int k = 0; k < s.count; ++k)
    if (s.code[static_cast<size_t>(k)].op == PCY_ARRAY_OP_STORE) {
      const int o = static_cast<int>(s.code[static_cast<size_t>(k)].a);
      src += fmt("    o%d[q%d] = %s;\n", o, o, reg(k).c_str());
    }
  src += "    o0[q0] = " + reg(s.count - 1) + ";\n  }\n}\n";
  return src;
}

// The kernels of a reduction (array_codegen.hpp's, one shader each: GLSL has one entry point).
enum class reduce_kernel { col, row, part, fin };

// The first meta word after the layout's and the immediates: where a reduction's, scan's or
// sort's own words start (their workspace offsets; a reduction's dof).
inline int own_words(const spec& s) { return codegen::layout_of(s).words(s.what) + s.immediates(); }

// The compute shader of kernel k of a reduce spec (unsupported(s) empty): array_codegen.hpp's
// kernels with the same reducer (the same statements in the same order: the same bits), one
// invocation per work-item. Bindings: col and row: the output, the inputs read, the meta words;
// part: the inputs read, wa, wi (ARGMIN/ARGMAX), the meta words; fin: the output, wa, wi, the
// meta words (wa, wi and the meta words: the op's workspace, bound once each). Own words: wa's
// offset (in values), wi's (in ints), dof (the value type's bits; VAR, STD).
inline std::string reduce_source(const spec& s, int wg, reduce_kernel k, std::string_view helpers) {
  using namespace detail;
  const codegen::layout l = codegen::layout_of(s);
  const int t = s.value_dtype(), R = s.rank, kept = R - s.reduced;
  const codegen::detail::reducer rd{codegen::dialect::opencl, s.kind, t, true};
  const std::string T = gtype(t), v = reg(s.count - 1);
  const int W = own_words(s);
  std::array<bool, max_operands> in = bound(s);
  in[0] = false;
  std::string bindings;
  int binding = 0;
  if (k != reduce_kernel::part) bindings += buffer(binding, gtype(s.dtypes[0]), "o0", false);
  if (k != reduce_kernel::fin)
    for (int o = 1; o < s.operands; ++o)
      if (in[static_cast<size_t>(o)])
        bindings += buffer(binding, gtype(s.dtypes[static_cast<size_t>(o)]), fmt("o%d", o), true);
  if (k == reduce_kernel::part || k == reduce_kernel::fin) {
    bindings += buffer(binding, T.c_str(), "wa", k == reduce_kernel::fin);
    if (rd.arg()) bindings += buffer(binding, "int", "wi", k == reduce_kernel::fin);
  }
  const bool tiled = k == reduce_kernel::row || k == reduce_kernel::part;
  if (tiled) {
    bindings += fmt("shared %s sa[%d];\n", T.c_str(), wg);
    if (rd.arg() || rd.welford()) bindings += fmt("shared int si[%d];\n", wg);
    if (rd.welford()) bindings += fmt("shared %s sb[%d];\n", T.c_str(), wg);
  }
  std::string src = head(s, wg, helpers, bindings, binding, rd.two_pass());
  const std::string n_out = "n_out", n_red = "n_red";
  src += "void main() {\n";
  src += fmt("  int n_out = %s, n_red = %s;\n  bool dof_ok = %s != 0;\n", word(l.extra(0)).c_str(),
             word(l.extra(1)).c_str(), word(l.extra(2)).c_str());
  src += fmt("  int G = %s, chunk = %s, wa_at = %s, wi_at = %s;\n", word(l.extra(4)).c_str(),
             word(l.extra(5)).c_str(), word(W).c_str(), word(W + 1).c_str());
  if (t == PCY_DTYPE_F32)
    src += fmt("  precise float dof = uintBitsToFloat(w[%d]);\n", 2 * (W + 2));
  else if (t == PCY_DTYPE_F64)
    src += fmt("  precise double dof = packDouble2x32(uvec2(w[%d], w[%d]));\n", 2 * (W + 2),
               2 * (W + 2) + 1);
  std::array<bool, max_operands> out{};
  out[0] = true;
  const std::string value = unravel(l, kept, R, "pos") + body(s);
  // VAR/STD: K, the value at the output's reduced position 0, the Welford updates' shift
  const std::string shift = rd.welford() ? "if (n_red > 0) {\n" + unravel(l, kept, R, "0") +
                                               body(s) + "K = " + v + ";\n}\n"
                                         : std::string();
  const std::string barrier = "memoryBarrierShared(); barrier();";
  auto loop0 = [&](const std::string& first, const std::string& end, const std::string& step) {
    return rd.welford() ? rd.welford_loop(first, end, step, value, v)
                        : rd.batched_loop(first, end, step, value, v);
  };
  auto store = [&] {
    std::string x;
    for (int d = kept; d < R; ++d)
      x += fmt("idx%d = 0; ", d);
    return x + "\n" + offsets(s, out) + "o0[q0] = " + rd.result(n_red, "dof_ok") + ";\n";
  };
  switch (k) {
  case reduce_kernel::col: // one invocation per output, the reduced positions in order
    src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
    src += "  for (int o = int(gl_GlobalInvocationID.x); o < n_out; o += step) {\n";
    src += idx_decl(R) + unravel(l, 0, kept, "o") + rd.declare() + shift;
    src += loop0("0", n_red, "1");
    if (rd.two_pass())
      src += rd.between() + "if (flag == -1) for (int pos = 0; pos < n_red; ++pos) {\n" + value +
             rd.add1(v) + "}\n";
    src += store() + "  }\n}\n";
    return src;
  case reduce_kernel::row: // cw outputs x cs slices a work-group, then the tree
    src += fmt("  const int t = int(gl_LocalInvocationID.x);\n  const int cs = %s, cw = %d / cs;\n",
               word(l.extra(3)).c_str(), wg);
    src += "  const int lane = t % cw, slice = t / cw;\n";
    src += "  for (int base = int(gl_WorkGroupID.x) * cw; base < n_out; base += "
           "int(gl_NumWorkGroups.x) * cw) {\n";
    src += "  const int o = base + lane;\n  const bool live = o < n_out;\n";
    src += idx_decl(R) + "if (live) {\n" + unravel(l, 0, kept, "o") + "}\n" + rd.declare();
    if (rd.welford()) src += "if (live) {\n" + shift + "}\n";
    // every invocation reaches every barrier: the loops are guarded, the trees are not
    src += "if (live) {\n" + loop0("slice", n_red, "cs") + "}\n";
    src += rd.tree("a", rd.arg(), barrier);
    if (rd.two_pass())
      src += rd.between() +
             "if (live && flag == -1) for (int pos = slice; pos < n_red; pos += cs) {\n" + value +
             rd.add1(v) + "}\n" + rd.tree("b", false, barrier);
    src += "if (live && slice == 0) {\n" + store() + "}\n  }\n}\n";
    return src;
  case reduce_kernel::part: // chunk g of output o: a work-group, its tree; the partial to wa
    src += fmt("  const int t = int(gl_LocalInvocationID.x), cs = %d, cw = 1, lane = 0, slice "
               "= t;\n",
               wg);
    src += "  for (int grp = int(gl_WorkGroupID.x); grp < n_out * G; grp += "
           "int(gl_NumWorkGroups.x)) {\n";
    src += "  const int o = grp / G, g = grp % G;\n  const int start = g * chunk;\n"
           "  const int end = min(start + chunk, n_red);\n";
    src += idx_decl(R) + unravel(l, 0, kept, "o") + rd.declare() + shift;
    src += loop0("start + t", "end", fmt("%d", wg));
    src += rd.tree("a", rd.arg(), barrier);
    src += "if (t == 0) { wa[wa_at + grp] = a;" +
           std::string(rd.arg() ? " wi[wi_at + grp] = i;" : "") +
           std::string(rd.welford() ? " wa[wa_at + n_out * G + grp] = b;" : "") + " }\n  }\n}\n";
    return src;
  case reduce_kernel::fin: // each output's G partials combined in chunk order
    src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
    src += "  for (int o = int(gl_GlobalInvocationID.x); o < n_out; o += step) {\n";
    src += idx_decl(R) + unravel(l, 0, kept, "o") + rd.declare();
    src += "for (int g = 0; g < G; ++g) {\n  " + rd.let() + "a2 = wa[wa_at + o * G + g];\n";
    if (rd.arg()) src += "  const int i2 = wi[wi_at + o * G + g];\n";
    if (rd.welford())
      src += "  const int n2 = min(n_red - g * chunk, chunk);\n  " +
             rd.merge_welford("n2", "a2", "wa[wa_at + n_out * G + o * G + g]") + "}\n";
    else
      src += "  " + rd.combine0() + "}\n";
    src += store() + "  }\n}\n";
    return src;
  }
  return src;
}

// The kernels of a scan (array_codegen.hpp's, one shader each).
enum class scan_kernel { scan, part, carry, fin };

// The compute shader of kernel k of a scan spec (unsupported(s) empty): array_codegen.hpp's
// kernels, the running value folded as there (scanner). scan: one invocation per row, in order
// (the native bundle's bits); blocked (few long rows): part folds each block into wa, carry
// turns a row's block totals into the carries before each block, fin rescans each block from its
// carry. Bindings: scan: the output, the inputs read, the meta words; part: the inputs, wa;
// carry: wa; fin: the output, the inputs, wa; then the meta words (wa and the meta words: the
// op's workspace). Own word: wa's offset (in values).
inline std::string scan_source(const spec& s, int wg, scan_kernel k, std::string_view helpers) {
  using namespace detail;
  const codegen::layout l = codegen::layout_of(s);
  const int t = s.value_dtype(), R = s.rank, kept = R - s.reduced;
  const codegen::detail::scanner sc{t, s.kind == PCY_ARRAY_SCAN_PROD, true};
  const std::string T = gtype(t), v = reg(s.count - 1);
  std::array<bool, max_operands> in = bound(s);
  in[0] = false;
  std::string bindings;
  int binding = 0;
  if (k == scan_kernel::scan || k == scan_kernel::fin)
    bindings += buffer(binding, gtype(s.dtypes[0]), "o0", false);
  if (k != scan_kernel::carry)
    for (int o = 1; o < s.operands; ++o)
      if (in[static_cast<size_t>(o)])
        bindings += buffer(binding, gtype(s.dtypes[static_cast<size_t>(o)]), fmt("o%d", o), true);
  if (k != scan_kernel::scan) bindings += buffer(binding, T.c_str(), "wa", k == scan_kernel::fin);
  std::string src = head(s, wg, helpers, bindings, binding);
  std::array<bool, max_operands> out{};
  out[0] = true;
  const std::string value =
      (s.reduced > 0 ? fmt("idx%d = j;\n", R - 1) : std::string()) + body(s) + sc.fold("run", v);
  const std::string store = offsets(s, out) + "o0[q0] = run;\n";
  src += "void main() {\n";
  src += fmt("  int rows = %s, B = %s, blen = %s, wa_at = %s;\n", word(l.extra(0)).c_str(),
             word(l.extra(1)).c_str(), word(l.extra(2)).c_str(), word(own_words(s)).c_str());
  src += fmt("  int len = %s;\n", s.reduced > 0 ? word(l.shape(R - 1)).c_str() : "1");
  src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  const std::string blocks = "  for (int item = int(gl_GlobalInvocationID.x); item < rows * B; "
                             "item += step) {\n  const int row = item / B, blk = item % B;\n"
                             "  const int j0 = blk * blen, j1 = min(j0 + blen, len);\n";
  switch (k) {
  case scan_kernel::scan:
    src += "  for (int row = int(gl_GlobalInvocationID.x); row < rows; row += step) {\n";
    src += idx_decl(R) + unravel(l, 0, kept, "row") + sc.start("run");
    src += "for (int j = 0; j < len; ++j) {\n" + value + store + "}\n  }\n}\n";
    return src;
  case scan_kernel::part:
    src += blocks + idx_decl(R) + unravel(l, 0, kept, "row") + sc.start("run");
    src += "for (int j = j0; j < j1; ++j) {\n" + value + "}\nwa[wa_at + item] = run;\n  }\n}\n";
    return src;
  case scan_kernel::carry:
    src += "  for (int row = int(gl_GlobalInvocationID.x); row < rows; row += step) {\n  " +
           sc.start("run");
    src += "  for (int blk = 0; blk < B; ++blk) {\n    " +
           std::string(is_float(t) ? "precise " : "") + T +
           " x = wa[wa_at + row * B + blk];\n    wa[wa_at + row * B + blk] = run;\n    " +
           sc.fold("run", "x") + "  }\n  }\n}\n";
    return src;
  case scan_kernel::fin:
    src += blocks + idx_decl(R) + unravel(l, 0, kept, "row");
    src += std::string(is_float(t) ? "precise " : "") + T + " run = wa[wa_at + item];\n";
    src += "for (int j = j0; j < j1; ++j) {\n" + value + store + "}\n  }\n}\n";
    return src;
  }
  return src;
}

// The kernels of a sort (array_codegen.hpp's bitonic network, one shader each).
enum class sort_kernel { init, step, out };

// The compute shader of kernel k of a sort spec (unsupported(s) empty): init writes each row's
// keys (wk) and positions (wi), padded to P with position -1; step is one compare-exchange pass
// (k, j: the push constants sk, sj) of the bitonic network with array_codegen.hpp's sorter; out
// writes the values or positions. Bindings: init: the inputs read, wk, wi; step: wk, wi; out:
// the output, wk (sort) or wi (argsort); then the meta words (wk, wi and the meta words: the
// op's workspace). Own words: wk's offset (in values), wi's (in ints).
inline std::string sort_source(const spec& s, int wg, sort_kernel k, std::string_view helpers) {
  using namespace detail;
  const codegen::layout l = codegen::layout_of(s);
  const int t = s.value_dtype(), R = s.rank, kept = R - s.reduced;
  const bool argsort = (s.kind & 1) == PCY_ARRAY_SORT_ARGSORT;
  const codegen::detail::sorter so{t, (s.kind & 2) != 0, true};
  const std::string T = gtype(t), v = reg(s.count - 1);
  std::array<bool, max_operands> in = bound(s);
  in[0] = false;
  std::string bindings;
  int binding = 0;
  if (k == sort_kernel::out) bindings += buffer(binding, gtype(s.dtypes[0]), "o0", false);
  if (k == sort_kernel::init)
    for (int o = 1; o < s.operands; ++o)
      if (in[static_cast<size_t>(o)])
        bindings += buffer(binding, gtype(s.dtypes[static_cast<size_t>(o)]), fmt("o%d", o), true);
  if (k != sort_kernel::out || !argsort)
    bindings += buffer(binding, T.c_str(), "wk", k == sort_kernel::out);
  if (k != sort_kernel::out || argsort)
    bindings += buffer(binding, "int", "wi", k == sort_kernel::out);
  if (k == sort_kernel::step)
    bindings += "layout(push_constant) uniform Pass { int sk; int sj; };\n";
  std::string src = head(s, wg, helpers, bindings, binding);
  src += "void main() {\n";
  src += fmt("  int rows = %s, P = %s, wk_at = %s, wi_at = %s;\n", word(l.extra(0)).c_str(),
             word(l.extra(1)).c_str(), word(own_words(s)).c_str(), word(own_words(s) + 1).c_str());
  src += fmt("  int len = %s;\n", s.reduced > 0 ? word(l.shape(R - 1)).c_str() : "1");
  src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  const std::string set_j = s.reduced > 0 ? fmt("idx%d = j;\n", R - 1) : std::string();
  switch (k) {
  case sort_kernel::init:
    src += "  for (int item = int(gl_GlobalInvocationID.x); item < rows * P; item += step) {\n";
    src += "  const int row = item / P, j = item % P;\n";
    src +=
        "  if (j >= len) { wi[wi_at + item] = -1; wk[wk_at + item] = " + T + "(0); continue; }\n";
    src += idx_decl(R) + unravel(l, 0, kept, "row") + set_j + body(s);
    src += "wk[wk_at + item] = " + v + ";\nwi[wi_at + item] = j;\n  }\n}\n";
    return src;
  case sort_kernel::step:
    src += "  for (int item = int(gl_GlobalInvocationID.x); item < rows * P; item += step) {\n";
    src += "  const int i = item % P, l = i ^ sj;\n  if (l <= i) continue;\n";
    src += "  const int a = item, b = item - i + l;\n";
    src += so.exchange("wk_at + ", "wi_at + ") + "  }\n}\n";
    return src;
  case sort_kernel::out: {
    std::array<bool, max_operands> out{};
    out[0] = true;
    src += "  for (int item = int(gl_GlobalInvocationID.x); item < rows * len; item += step) {\n";
    src += "  const int row = item / len, j = item % len;\n";
    src += idx_decl(R) + unravel(l, 0, kept, "row") + set_j + offsets(s, out);
    src += argsort ? "o0[q0] = int64_t(wi[wi_at + row * P + j]);\n"
                   : "o0[q0] = wk[wk_at + row * P + j];\n";
    src += "  }\n}\n";
    return src;
  }
  }
  return src;
}

// The compute shader of a random spec (array_gpu.hpp's op_random sets its meta words: the layout's
// extras n, seed, offset, threshold, lo, range, then the draw's lo and span as the output's
// float type's bits). `library`: random.glsl, pcy_array_random.h in GLSL. One invocation per
// Philox counter (its PER elements, pcy_array.h), or per element for a permutation; indices
// 32-bit (the host checks).
inline std::string random_source(const spec& s, int wg, std::string_view library,
                                 std::string_view helpers) {
  using namespace detail;
  const codegen::layout l = codegen::layout_of(s);
  const codegen::job J = codegen::job::random;
  const int d = s.dtypes[0], R = s.rank;
  const bool f64 = d == PCY_DTYPE_F64, half = is_half(d);
  std::string src = "#version 450\n";
  src += "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
         "#extension GL_EXT_shader_8bit_storage : require\n"
         "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  if (half || d == PCY_DTYPE_I16)
    src += "#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require\n"
           "#extension GL_EXT_shader_16bit_storage : require\n";
  if (f64) src += "#define PCY_RNG_F64 1\n";
  src += fmt("layout(local_size_x = %d) in;\n", wg);
  src += fmt("layout(std430, set = 0, binding = 0) buffer O0 { %s o0[]; };\n", gtype(d));
  src += "layout(std430, set = 0, binding = 1) readonly buffer Meta { uint w[]; };\n";
  src += "#define PCY_F32 1\n";
  if (half) src += "#define PCY_HALF 1\n";
  src += helpers;
  src += library;
  auto w64 = [](int k) { return fmt("packUint2x32(uvec2(w[%d], w[%d]))", 2 * k, 2 * k + 1); };
  const int extra_lo = l.words(J), extra_span = extra_lo + 1;
  const char* P = f64 ? "double" : "float";
  auto flt = [&](int k) {
    return f64 ? "uint64BitsToDouble(" + w64(k) + ")" : fmt("uintBitsToFloat(w[%d])", 2 * k);
  };
  src += "void main() {\n";
  src += fmt("  int n = %s;\n", word(l.extra(0)).c_str());
  src +=
      fmt("  uint64_t seed = %s, offset = %s;\n", w64(l.extra(1)).c_str(), w64(l.extra(2)).c_str());
  src +=
      fmt("  precise %s lo = %s, span = %s;\n", P, flt(extra_lo).c_str(), flt(extra_span).c_str());
  src += "  int step = int(gl_NumWorkGroups.x * gl_WorkGroupSize.x);\n";
  auto store = [&](const std::string& e, const std::string& v) {
    std::string o = "{\n";
    for (int dd = 0; dd < R; ++dd)
      o += fmt("    int idx%d = 0;\n", dd);
    o += "    int rem_ = " + e + ";\n";
    for (int dd = R - 1; dd >= 0; --dd)
      if (dd > 0)
        o += fmt("    idx%d = rem_ %% %s; rem_ /= %s;\n", dd, word(l.shape(dd)).c_str(),
                 word(l.shape(dd)).c_str());
      else
        o += fmt("    idx%d = rem_;\n", dd);
    o += fmt("    int q0 = %s", word(l.offset(0)).c_str());
    for (int dd = 0; dd < R; ++dd)
      o += fmt(" + idx%d * %s", dd, word(l.stride(0, dd)).c_str());
    o += ";\n    o0[q0] = " + v + ";\n  }\n";
    return o;
  };
  if (s.kind == PCY_ARRAY_RANDOM_PERMUTATION) {
    src += "  for (int e = int(gl_GlobalInvocationID.x); e < n; e += step) {\n";
    src += "    int64_t y_ = int64_t(pcy_rng_permute(seed, offset, uint64_t(n), uint64_t(e)));\n";
    src += "    " + store("e", cast("y_", PCY_DTYPE_I64, d)) + "  }\n}\n";
    return src;
  }
  const int per = pcy_array_random_per_counter(s.kind, d);
  src += fmt("  for (int c = int(gl_GlobalInvocationID.x); c < (n + %d) / %d; c += step) {\n",
             per - 1, per);
  src += "    uint wv[4];\n    pcy_rng_words(seed, offset, uint64_t(c), wv);\n";
  std::array<std::string, 4> val;
  switch (s.kind) {
  case PCY_ARRAY_RANDOM_UNIFORM:
  case PCY_ARRAY_RANDOM_NORMAL: {
    const bool normal = s.kind == PCY_ARRAY_RANDOM_NORMAL;
    if (f64) {
      if (normal)
        src += "    precise double r_ = pcy_rng_radius_f64(wv[0], wv[1]);\n"
               "    double c_, s_;\n"
               "    pcy_rng_sincos2pi_f64((uint64_t(wv[2] >> 11) << 32) | uint64_t(wv[3]), c_, "
               "s_);\n"
               "    precise double y0_ = lo + span * (r_ * c_);\n"
               "    precise double y1_ = lo + span * (r_ * s_);\n";
      else
        src += "    precise double y0_ = lo + span * pcy_rng_uniform_f64(wv[0], wv[1]);\n"
               "    precise double y1_ = lo + span * pcy_rng_uniform_f64(wv[2], wv[3]);\n";
      val[0] = "y0_";
      val[1] = "y1_";
    } else {
      if (normal)
        src +=
            "    precise float ra_ = pcy_rng_radius_f32(wv[0]), rb_ = pcy_rng_radius_f32(wv[2]);\n"
            "    float ca_, sa_, cb_, sb_;\n"
            "    pcy_rng_sincos2pi_f32(wv[1] >> 8, ca_, sa_);\n"
            "    pcy_rng_sincos2pi_f32(wv[3] >> 8, cb_, sb_);\n"
            "    precise float y0_ = lo + span * (ra_ * ca_);\n"
            "    precise float y1_ = lo + span * (ra_ * sa_);\n"
            "    precise float y2_ = lo + span * (rb_ * cb_);\n"
            "    precise float y3_ = lo + span * (rb_ * sb_);\n";
      else
        for (int k = 0; k < 4; ++k)
          src += fmt("    precise float y%d_ = lo + span * pcy_rng_uniform_f32(wv[%d]);\n", k, k);
      for (int k = 0; k < 4; ++k)
        val[static_cast<size_t>(k)] = cast(fmt("y%d_", k), PCY_DTYPE_F32, d);
    }
    break;
  }
  case PCY_ARRAY_RANDOM_BERNOULLI:
    for (int k = 0; k < 4; ++k) {
      src += fmt("    uint8_t y%d_ = uint8_t(pcy_rng_bernoulli(wv[%d], %s));\n", k, k,
                 w64(l.extra(3)).c_str());
      val[static_cast<size_t>(k)] = cast(fmt("y%d_", k), PCY_DTYPE_BOOL, d);
    }
    break;
  case PCY_ARRAY_RANDOM_RANDINT:
    for (int k = 0; k < 2; ++k) {
      src += fmt("    int64_t y%d_ = pcy_rng_randint(wv[%d], wv[%d], int64_t(%s), %s);\n", k, 2 * k,
                 2 * k + 1, w64(l.extra(4)).c_str(), w64(l.extra(5)).c_str());
      val[static_cast<size_t>(k)] = cast(fmt("y%d_", k), PCY_DTYPE_I64, d);
    }
    break;
  default: // BITS
    for (int k = 0; k < 2; ++k) {
      src += fmt("    int64_t y%d_ = int64_t((uint64_t(wv[%d]) << 32) | uint64_t(wv[%d]));\n", k,
                 2 * k + 1, 2 * k);
      val[static_cast<size_t>(k)] = cast(fmt("y%d_", k), PCY_DTYPE_I64, d);
    }
    break;
  }
  for (int k = 0; k < per; ++k) {
    src += fmt("    if (c * %d + %d < n) ", per, k);
    src += store(fmt("c * %d + %d", per, k), val[static_cast<size_t>(k)]);
  }
  src += "  }\n}\n";
  return src;
}

} // namespace parenchyma::array_bundle::glsl
