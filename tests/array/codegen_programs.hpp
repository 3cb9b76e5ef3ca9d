// Array GPU bundle tests, shared part: representative programs for the code generator
// (array_codegen.hpp) — every instruction on every dtype it takes, every cast, every reduce kind,
// both scans, every random distribution — as codegen specs, without tensors.
#pragma once

#include "array_codegen.hpp"

#include <string>
#include <vector>

namespace array_codegen_test {

namespace ab = parenchyma::array_bundle;
namespace cg = parenchyma::array_bundle::codegen;

struct named_spec {
  std::string name;
  cg::spec s;
};

inline int push(cg::spec& s, int op, int dtype, int64_t a = 0, int64_t b = 0, int64_t c = 0,
                int64_t extent = 0) {
  ab::instruction& in = s.code[static_cast<size_t>(s.count)];
  in.op = op;
  in.dtype = dtype;
  in.a = a;
  in.b = b;
  in.c = c;
  in.extent = extent;
  return s.count++;
}

constexpr int arith_dtypes[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_I16,
                                PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_BOOL};
constexpr int all_dtypes[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I8, PCY_DTYPE_I16,
                              PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8, PCY_DTYPE_BOOL,
                              PCY_DTYPE_F16, PCY_DTYPE_BF16};

// Whether op (unary or binary) is defined on operands of dtype t, and its result's dtype: the
// decoder's rules (array_program.hpp).
inline bool defined_on(int op, int t) { return parenchyma::array_bundle::takes(op, t); }
inline int result_of(int op, int t) { return parenchyma::array_bundle::result_of(op, t); }

// An eval program over rank-2 operands (out, x, y of dtype t) with every op defined on t, their
// results folded into one value by WHERE chains so every register is live.
inline cg::spec all_ops(int t) {
  cg::spec s;
  s.what = cg::job::eval;
  s.rank = 2;
  s.operands = 3;
  s.dtypes = {t, t, t};
  const int x = push(s, PCY_ARRAY_OP_LOAD, t, 1);
  const int y = push(s, PCY_ARRAY_OP_LOAD, t, 2);
  const int cond = push(s, PCY_ARRAY_OP_CAST, PCY_DTYPE_BOOL, x);
  int acc = x;
  for (int op = PCY_ARRAY_OP_NEG; op < PCY_ARRAY_OP_WHERE; ++op) {
    if (!defined_on(op, t)) continue;
    const int n = parenchyma::array_bundle::op_operands(op);
    int r = push(s, op, result_of(op, t), x, n > 1 ? y : 0);
    if (result_of(op, t) != t) r = push(s, PCY_ARRAY_OP_CAST, t, r);
    acc = push(s, PCY_ARRAY_OP_WHERE, t, cond, r, acc);
  }
  // a constant, an index and a gather
  const int k = push(s, PCY_ARRAY_OP_CONST, t,
                     t == PCY_DTYPE_F32 || t == PCY_DTYPE_F64 ? 0x3FF8000000000000 : 3);
  acc = push(s, PCY_ARRAY_OP_WHERE, t, cond, k, acc);
  const int i = push(s, PCY_ARRAY_OP_INDEX, PCY_DTYPE_I64, 1);
  const int g = push(s, PCY_ARRAY_OP_GATHER, t, 2, i, 0, 5);
  push(s, PCY_ARRAY_OP_WHERE, t, cond, g, acc);
  return s;
}

// Every cast from `from` to each dtype and back, as one program (the round trips folded by
// WHERE so each stays live).
inline cg::spec cast_prog(int from) {
  cg::spec s;
  s.what = cg::job::eval;
  s.rank = 1;
  s.operands = 2;
  s.dtypes = {from, from};
  const int x = push(s, PCY_ARRAY_OP_LOAD, from, 1);
  const int cond = push(s, PCY_ARRAY_OP_CAST, PCY_DTYPE_BOOL, x);
  int acc = x;
  for (int to : all_dtypes) {
    if (to == from) continue;
    const int c = push(s, PCY_ARRAY_OP_CAST, to, x);
    const int back = push(s, PCY_ARRAY_OP_CAST, from, c);
    acc = push(s, PCY_ARRAY_OP_WHERE, from, cond, back, acc);
  }
  return s;
}

inline cg::spec reduce_prog(int kind, int value, int out, int rank, int reduced) {
  cg::spec s;
  s.what = cg::job::reduce;
  s.kind = kind;
  s.rank = rank;
  s.reduced = reduced;
  s.operands = 2;
  s.dtypes = {out, value};
  push(s, PCY_ARRAY_OP_LOAD, value, 1);
  return s;
}

inline cg::spec scan_prog(int kind, int t) {
  cg::spec s;
  s.what = cg::job::scan;
  s.kind = kind;
  s.rank = 2;
  s.reduced = 1;
  s.operands = 2;
  s.dtypes = {t, t};
  push(s, PCY_ARRAY_OP_LOAD, t, 1);
  return s;
}

// sort_1: kind + 2 * descending (array_codegen.hpp); the output is the value's dtype (SORT) or
// i64 (ARGSORT); a half input sorts through a CAST to f32.
inline cg::spec sort_prog(int kind, int t, int rank) {
  cg::spec s;
  s.what = cg::job::sort;
  s.kind = kind;
  s.rank = rank;
  s.reduced = 1;
  s.operands = 2;
  const int v = ab::is_half(t) ? PCY_DTYPE_F32 : t;
  s.dtypes = {(kind & 1) == PCY_ARRAY_SORT_ARGSORT ? PCY_DTYPE_I64 : v, t};
  const int x = push(s, PCY_ARRAY_OP_LOAD, t, 1);
  if (ab::is_half(t)) push(s, PCY_ARRAY_OP_CAST, v, x);
  return s;
}

inline cg::spec random_prog(int dist, int t, int rank) {
  cg::spec s;
  s.what = cg::job::random;
  s.kind = dist;
  s.rank = rank;
  s.operands = 1;
  s.dtypes[0] = t;
  return s;
}

// Three outputs (evalm3): f32 value, an i32 and a bool STOREd.
inline cg::spec multi_output() {
  cg::spec s;
  s.what = cg::job::eval;
  s.rank = 2;
  s.operands = 5;
  s.outputs = 3;
  s.dtypes = {PCY_DTYPE_F32, PCY_DTYPE_I32, PCY_DTYPE_BOOL, PCY_DTYPE_F32, PCY_DTYPE_F32};
  const int a = push(s, PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 3);
  const int b = push(s, PCY_ARRAY_OP_LOAD, PCY_DTYPE_F32, 4);
  const int m = push(s, PCY_ARRAY_OP_MUL, PCY_DTYPE_F32, a, b);
  push(s, PCY_ARRAY_OP_STORE, PCY_DTYPE_I32, 1, push(s, PCY_ARRAY_OP_CAST, PCY_DTYPE_I32, m));
  push(s, PCY_ARRAY_OP_STORE, PCY_DTYPE_BOOL, 2, push(s, PCY_ARRAY_OP_GT, PCY_DTYPE_BOOL, a, b));
  push(s, PCY_ARRAY_OP_ADD, PCY_DTYPE_F32, a, b);
  return s;
}

// The representative set.
inline std::vector<named_spec> representative() {
  using namespace parenchyma::array_bundle;
  std::vector<named_spec> v;
  const char* (*dn)(int) = [](int d) { return cg::detail::tname(d); };
  for (int t : arith_dtypes)
    v.push_back({std::string("all ops ") + dn(t), all_ops(t)});
  for (int from : all_dtypes)
    v.push_back({std::string("casts from ") + dn(from), cast_prog(from)});
  for (int kind = PCY_ARRAY_REDUCE_SUM; kind < PCY_ARRAY_REDUCE_END; ++kind) {
    for (int t : arith_dtypes) {
      const bool fl = is_float(t);
      int out = t;
      switch (kind) {
      case PCY_ARRAY_REDUCE_ARGMIN:
      case PCY_ARRAY_REDUCE_ARGMAX: out = PCY_DTYPE_I64; break;
      case PCY_ARRAY_REDUCE_ALL:
      case PCY_ARRAY_REDUCE_ANY:
        if (t != PCY_DTYPE_BOOL) continue;
        break;
      case PCY_ARRAY_REDUCE_MEAN:
      case PCY_ARRAY_REDUCE_VAR:
      case PCY_ARRAY_REDUCE_STD:
      case PCY_ARRAY_REDUCE_LOGSUMEXP:
      case PCY_ARRAY_REDUCE_NORM2:
        if (!fl) continue;
        break;
      default:
        if (t == PCY_DTYPE_BOOL) continue;
        break;
      }
      v.push_back(
          {"reduce kind " + std::to_string(kind) + " " + dn(t), reduce_prog(kind, t, out, 3, 2)});
    }
  }
  for (int t : arith_dtypes) {
    if (t == PCY_DTYPE_BOOL) continue;
    v.push_back({std::string("cumsum ") + dn(t), scan_prog(PCY_ARRAY_SCAN_SUM, t)});
    v.push_back({std::string("cumprod ") + dn(t), scan_prog(PCY_ARRAY_SCAN_PROD, t)});
  }
  for (int t : all_dtypes) {
    const bool fl = is_float(t) || is_half(t);
    if (fl) {
      v.push_back({std::string("uniform ") + dn(t), random_prog(PCY_ARRAY_RANDOM_UNIFORM, t, 2)});
      v.push_back({std::string("normal ") + dn(t), random_prog(PCY_ARRAY_RANDOM_NORMAL, t, 2)});
    }
    v.push_back({std::string("bernoulli ") + dn(t), random_prog(PCY_ARRAY_RANDOM_BERNOULLI, t, 1)});
    if (is_int(t))
      v.push_back({std::string("randint ") + dn(t), random_prog(PCY_ARRAY_RANDOM_RANDINT, t, 3)});
  }
  for (int t : all_dtypes)
    for (int kind = 0; kind < 4; ++kind)
      v.push_back(
          {"sort kind " + std::to_string(kind) + " " + dn(t), sort_prog(kind, t, 1 + kind % 3)});
  v.push_back({"bits i64", random_prog(PCY_ARRAY_RANDOM_BITS, PCY_DTYPE_I64, 0)});
  // The dense form (one vector store per work-item) of every distribution and dtype width.
  for (int t : all_dtypes) {
    const bool fl = is_float(t) || is_half(t);
    for (int dist : {PCY_ARRAY_RANDOM_UNIFORM, PCY_ARRAY_RANDOM_NORMAL, PCY_ARRAY_RANDOM_BERNOULLI,
                     PCY_ARRAY_RANDOM_RANDINT}) {
      if ((dist <= PCY_ARRAY_RANDOM_NORMAL && !fl) ||
          (dist == PCY_ARRAY_RANDOM_RANDINT && !is_int(t)))
        continue;
      cg::spec s = random_prog(dist, t, 1);
      s.dense = true;
      v.push_back({"dense random " + std::to_string(dist) + " " + dn(t), s});
    }
  }
  {
    cg::spec s = random_prog(PCY_ARRAY_RANDOM_BITS, PCY_DTYPE_I64, 1);
    s.dense = true;
    v.push_back({"dense bits i64", s});
  }
  v.push_back({"three outputs", multi_output()});
  return v;
}

} // namespace array_codegen_test
