// Array bundles, shared part: the code generator of the GPU bundles. It turns a decoded program
// (array_program.hpp, after collapse()) into the source of a kernel, in OpenCL C 1.2 or CUDA C++
// (NVRTC), with the semantics of array_scalar.hpp spelled out bit by bit.
//
// Shapes, strides and offsets are NOT baked in: every kernel takes them in one struct argument,
// `pcy_meta` (int64 words, layout below), so one compiled kernel serves every shape with the same
// instruction words, operand dtypes, rank and reduced count. That tuple (with the op's kind) is
// spec::key(), the key of each bundle's per-context kernel map; the framework's program build
// caches the binaries on disk besides.
//
// Kernels (all grid-stride loops over 64-bit linear indices):
//   pcy_eval        one work-item per output element; the index unravelled from the linear id
//                   with the (collapsed) shape
//   pcy_reduce_row  the tiled kernel: a work-group is cw outputs x cs slices (cs a power of two
//                   chosen per launch from the layout: an argument, not baked in); slice k folds
//                   the reduced positions k, k + cs, ... in order, then a tree over the slices in
//                   local/shared memory in a fixed order (the same bits run to run). cs = the
//                   work-group size (one group per output) when the reduced dimensions are
//                   innermost; a small cs (many neighbouring outputs per group: coalesced, and
//                   cs times the parallelism of one work-item per output) when outermost
//   pcy_reduce_col  one work-item per output looping over the reduced index in order (CPU
//                   devices with the reduced dimensions outermost, and tiny reductions)
//                   LOGSUMEXP in two passes as the native bundle (the maximum, then the
//                   centred sum of exponentials) in the same kernel; VAR and STD in one pass
//                   (one read of the input): each work-item sums blocks of 16 of its values
//                   shifted by the block's first (after the output's first value is taken
//                   off every value), merges each block into its count/mean/deviations by
//                   Chan's formula, and the trees and split chunks merge those the same way,
//                   in a fixed order.
//   pcy_scan        one work-item per row, sequential along the last dimension (the native
//                   bundle's order: the same bits); for few long rows, blocked: pcy_scan_part
//                   (block totals), pcy_scan_carry (each row's carries, in order),
//                   pcy_scan_fin (each block from its carry) - deterministic
//   pcy_random      one work-item per element of the view: pcy_array_random.h's words and
//                   transforms
//   pcy_sort_init   sort: each row's keys into the workspace (wk) with their positions (wi),
//                   padded to P = the next power of two with position -1 (after every key);
//   pcy_sort_step   one compare-exchange pass (k, j) of a bitonic network over each row's P
//                   pairs: the order is the key's (pcy_array.h) with ties broken by position, a
//                   strict total order, so the network gives exactly the stable order;
//                   log2(P)(log2(P) + 1)/2 launches
//   pcy_sort_out    the sorted values or positions into the output
// Arguments: the P operands' buffers (OpenCL: __global T*; CUDA: T*) in operand order, then
// pcy_meta by value, then, for reduce, `dof` (the value dtype: N - correction for VAR/STD), for
// random, `lo` and `span` (float, or double for F64 draws); for sort the workspace (wk, then
// wi from i64 element m.w[extra 2]) and the pass's k and j (i64).
//
// pcy_meta words (R the collapsed rank, P the operands):
//   [0, R)                    shape
//   [R, R + P)                each operand's element offset (the tensor's byte offset folded in)
//   [R + P, R + P + P R)      operand p's strides at R + P + p R + d
//   then extras: eval: n (elements); reduce: n_out, n_red, dof_ok, cs (the tiled kernel's
//   slices per output), G, chunk, wi's offset (split reductions); scan: n_rows, B, blen;
//   sort: n_rows, P, wi's offset;
//   random: n, seed, offset, threshold (bernoulli), lo (randint), range (randint).
#pragma once

#include "array_program.hpp"

#include <parenchyma/abi/ext/pcy_array.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::array_bundle::codegen {

enum class dialect { opencl, cuda };
enum class job { eval, reduce, scan, random, sort };

// What a kernel is made from: everything but the shapes, strides and offsets.
struct spec {
  job what = job::eval;
  int kind = 0; // reduce kind, scan kind, random distribution; sort: kind + 2 * descending
  int rank = 0, reduced = 0, operands = 0;
  int outputs = 1; // evalm2/evalm3: operands 0..outputs-1 are written (STORE for 1..)
  std::array<int, max_operands> dtypes{};         // operand p's storage dtype
  int count = 0;                                  // instructions (not for random)
  std::array<instruction, max_instructions> code; // [0, count) set (never zeroed: per op call)
  // F32 transcendental functions (exp, log, sin, pow, ...) evaluated in F64 and rounded once:
  // nearly always the correctly rounded result, as the host's libm gives (devices with fp64).
  bool f32_via_f64 = false;
  // random: the output is one run of memory (rank 1, stride 1). Each work-item's PER elements
  // are then neighbours and go out in one vector store where they are aligned (16 bytes at
  // most), instead of PER scalar stores a vector's width apart across the work-group.
  bool dense = false;

  int value_dtype() const noexcept {
    return what == job::random ? dtypes[0] : code[static_cast<size_t>(count - 1)].dtype;
  }
  bool uses_f64() const noexcept {
    for (int o = 0; o < operands; ++o)
      if (dtypes[static_cast<size_t>(o)] == PCY_DTYPE_F64) return true;
    for (int k = 0; k < count; ++k) {
      const instruction& in = code[static_cast<size_t>(k)];
      if (in.dtype == PCY_DTYPE_F64) return true;
      if (f32_via_f64 && in.dtype == PCY_DTYPE_F32 &&
          (is_float_unary(in.op) || is_float_binary(in.op) || in.op == PCY_ARRAY_OP_POW))
        return true;
    }
    return false;
  }
  // The kernel cache key: job, kind, rank, reduced, operand dtypes, instruction words.
  std::string key() const {
    std::string k;
    key_into(k);
    return k;
  }
  // key() into k (cleared first; its capacity reused: no allocation per call once warm).
  void key_into(std::string& k) const {
    k.clear();
    auto put = [&](int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(static_cast<int64_t>(what));
    put(kind);
    put(rank);
    put(reduced);
    put(operands);
    put(outputs);
    put((f32_via_f64 ? 1 : 0) | (dense ? 2 : 0));
    for (int o = 0; o < operands; ++o)
      put(dtypes[static_cast<size_t>(o)]);
    // Constants' values and GATHER's extent are kernel arguments (meta words): a new scalar
    // (a learning rate, a step count) or another table size reuses the kernel.
    for (int i = 0; i < count; ++i) {
      const instruction& in = code[static_cast<size_t>(i)];
      put(in.op | in.dtype << 8);
      put(in.op == PCY_ARRAY_OP_CONST ? 0 : in.a);
      put(in.b);
      put(in.c);
    }
  }
  // The meta word index, after the layout's own, of instruction k's runtime immediate (CONST's
  // value, GATHER's extent); -1 for other instructions.
  int immediate_slot(int k) const noexcept {
    int slot = 0;
    for (int i = 0; i < k; ++i)
      slot += has_immediate(code[static_cast<size_t>(i)].op);
    return has_immediate(code[static_cast<size_t>(k)].op) ? slot : -1;
  }
  int immediates() const noexcept {
    int n = 0;
    for (int i = 0; i < count; ++i)
      n += has_immediate(code[static_cast<size_t>(i)].op);
    return n;
  }
  static constexpr bool has_immediate(int op) noexcept {
    return op == PCY_ARRAY_OP_CONST || op == PCY_ARRAY_OP_GATHER;
  }
};

// Extra meta words per job (see the layout above); the word after them says "fewer than 2^32
// elements" (32-bit index arithmetic).
inline int extras_of(job j) {
  return j == job::random ? 6 : j == job::reduce ? 7 : j == job::scan || j == job::sort ? 3 : 1;
}

// The meta words' layout of a spec.
struct layout {
  int rank, operands;
  int shape(int d) const { return d; }
  int offset(int p) const { return rank + p; }
  int stride(int p, int d) const { return rank + operands + p * rank + d; }
  int extra(int i) const { return rank + operands + operands * rank + i; }
  int small(job j) const { return extra(extras_of(j)); }
  int words(job j) const { return extra(extras_of(j) + 1); }
};
inline layout layout_of(const spec& s) { return layout{s.rank, s.operands}; }

inline spec make_spec(const program& p, const collapsed& c, job what, int kind) {
  spec s;
  s.what = what;
  s.kind = kind;
  s.rank = c.rank;
  s.reduced = c.reduced;
  s.operands = p.operands;
  s.outputs = p.outputs;
  for (int o = 0; o < p.operands; ++o)
    s.dtypes[static_cast<size_t>(o)] = p.ops[static_cast<size_t>(o)].dtype;
  s.count = p.count;
  std::copy(p.code.begin(), p.code.begin() + p.count, s.code.begin());
  return s;
}

// How a reduction runs (the GPU bundles' host side, shared): the kernel and its grid-independent
// parameters, from the collapsed shape and the device. They depend on the shape and the device
// only, so a reduction gives the same bits run to run.
struct reduce_plan {
  uint64_t n_out = 0, n_red = 0;
  int cs = 0;                     // the tiled kernel's slices per output; 0: the column kernel
  uint64_t chunks = 0, chunk = 0; // split: `chunks` (>= 2) chunks of `chunk` positions an output
  bool split() const { return chunks >= 2; }
};

// The tiled reduce kernel's slices per output (a power of two dividing the work-group), or 0
// for the column kernel (one work-item per output, no shared memory). Reduced dimensions
// outermost (the first input runs along the innermost kept dimension, not along the innermost
// reduced one): neighbouring work-items take neighbouring outputs — on a GPU 8 slices each, for
// parallelism; on a CPU device the column kernel. Otherwise one slice per reduced element up to
// the work-group (one group per output for long reductions).
inline int slices_for(const collapsed& c, uint64_t n_red, uint32_t wg, int outer_slices) {
  const int kept = c.rank - c.reduced;
  if (c.reduced == 0 || n_red <= 4) return 0;
  const bool outer = kept > 0 && std::abs(c.strides[1][static_cast<size_t>(kept - 1)]) == 1 &&
                     std::abs(c.strides[1][static_cast<size_t>(c.rank - 1)]) != 1;
  if (outer) return outer_slices;
  uint32_t cs = 1;
  while (cs < wg && cs < n_red)
    cs *= 2;
  return static_cast<int>(cs);
}

// Few outputs and long reductions of a one-pass kind (all but LOGSUMEXP): each output's reduced
// positions split into chunks of at least 16 per work-item (parts, then their combination in
// order); otherwise the tiled or the column kernel (slices_for).
inline reduce_plan plan_reduce(const collapsed& c, uint64_t n_out, bool one_pass, uint32_t wg,
                               uint64_t max_groups, int outer_slices) {
  reduce_plan p;
  p.n_out = n_out;
  p.n_red = 1;
  for (int d = c.rank - c.reduced; d < c.rank; ++d)
    p.n_red *= static_cast<uint64_t>(c.shape[static_cast<size_t>(d)]);
  p.cs = slices_for(c, p.n_red, wg, outer_slices);
  if (one_pass && n_out * 4 < max_groups) {
    const uint64_t per = uint64_t{16} * wg;
    uint64_t chunks = std::min<uint64_t>({p.n_red / per, 1024, (max_groups * 4) / n_out});
    if (chunks >= 2) {
      p.chunk = (p.n_red + chunks - 1) / chunks;
      p.chunks = (p.n_red + p.chunk - 1) / p.chunk; // no empty chunk
    }
  }
  return p;
}

// A reduction's extras (layout): n_out, n_red, dof_ok (N - correction > 0), cs, G, chunk.
inline void reduce_extras(std::vector<int64_t>& meta, const layout& l, const reduce_plan& p,
                          double dof) {
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(p.n_out);
  meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(p.n_red);
  meta[static_cast<size_t>(l.extra(2))] = dof > 0 ? 1 : 0;
  meta[static_cast<size_t>(l.extra(3))] = p.cs;
  meta[static_cast<size_t>(l.extra(4))] = static_cast<int64_t>(p.chunks);
  meta[static_cast<size_t>(l.extra(5))] = static_cast<int64_t>(p.chunk);
}

// How a scan runs (the GPU bundles' host side, shared): one work-item per row, in order (the
// native bundle's bits), or for few long rows `blocks` (>= 2) blocks of `blen` of at least 256
// elements, enough for the device (part, carry, fin; fixed by the shape and the device).
struct scan_plan {
  uint64_t rows = 1, len = 1;
  uint64_t blocks = 0, blen = 0;
  bool blocked() const { return blocks >= 2; }
};
inline scan_plan plan_scan(const collapsed& c, uint32_t wg, uint64_t max_groups) {
  scan_plan p;
  for (int d = 0; d < c.rank - c.reduced; ++d)
    p.rows *= static_cast<uint64_t>(c.shape[static_cast<size_t>(d)]);
  if (c.reduced > 0) p.len = static_cast<uint64_t>(c.shape[static_cast<size_t>(c.rank - 1)]);
  if (p.rows * wg < max_groups * wg / 2 && p.len >= 4096) {
    const uint64_t blocks =
        std::min<uint64_t>(p.len / 256, std::max<uint64_t>(1, (max_groups * wg) / p.rows));
    if (blocks >= 2) {
      p.blen = (p.len + blocks - 1) / blocks;
      p.blocks = (p.len + p.blen - 1) / p.blen;
    }
  }
  return p;
}

// A random draw's kernel: its spec (the view with neighbouring dimensions merged where they are
// one run of memory, row-major order kept: a dense output is rank 1, no division per element, and
// takes the vector stores) and its meta words but the output's offset (the bundle's to add: its
// tensors' byte offsets differ) and the trailing scalars. Shared by the GPU bundles.
struct random_kernel {
  spec s;
  int per = 0;        // elements per Philox counter (pcy_array.h; 0: one per work-item)
  uint64_t items = 0; // work-items: counters, or elements for a permutation
};
inline random_kernel random_kernel_of(const random_call& rc, std::vector<int64_t>& meta,
                                      int extra_words = 0) {
  std::array<int64_t, max_rank> shape{}, strides{};
  int R = 0;
  for (int d = 0; d < rc.rank; ++d) {
    const int64_t ext = rc.shape[static_cast<size_t>(d)], st = rc.strides[static_cast<size_t>(d)];
    if (ext == 1) continue;
    if (R > 0 && strides[static_cast<size_t>(R - 1)] == ext * st) {
      shape[static_cast<size_t>(R - 1)] *= ext;
      strides[static_cast<size_t>(R - 1)] = st;
      continue;
    }
    shape[static_cast<size_t>(R)] = ext;
    strides[static_cast<size_t>(R)] = st;
    ++R;
  }
  if (R == 0) { // one element
    shape[0] = 1;
    strides[0] = 1;
    R = 1;
  }
  random_kernel k;
  k.s.what = job::random;
  k.s.kind = static_cast<int>(rc.distribution);
  k.s.rank = R;
  k.s.operands = 1;
  k.s.dtypes[0] = rc.dtype;
  k.s.dense = R == 1 && strides[0] == 1 && rc.distribution != PCY_ARRAY_RANDOM_PERMUTATION;
  const uint64_t n = rc.elements;
  k.per = pcy_array_random_per_counter(static_cast<int>(rc.distribution), rc.dtype);
  k.items = k.per > 0 ? (n + static_cast<uint64_t>(k.per) - 1) / static_cast<uint64_t>(k.per) : n;
  const layout l = layout_of(k.s);
  meta.assign(static_cast<size_t>(l.words(job::random) + extra_words), 0);
  meta[static_cast<size_t>(l.small(job::random))] = n < (uint64_t{1} << 32) ? 1 : 0;
  for (int d = 0; d < R; ++d) {
    meta[static_cast<size_t>(l.shape(d))] = shape[static_cast<size_t>(d)];
    meta[static_cast<size_t>(l.stride(0, d))] = strides[static_cast<size_t>(d)];
  }
  meta[static_cast<size_t>(l.offset(0))] = rc.offset;
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(n);
  meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(rc.seed);
  meta[static_cast<size_t>(l.extra(2))] = static_cast<int64_t>(rc.stream_offset);
  // bernoulli: floor(p 2^32) clipped to [0, 2^32]; NaN gives 0
  uint64_t thr = 0;
  if (rc.a > 0.0)
    thr = rc.a >= 1.0 ? (uint64_t{1} << 32) : static_cast<uint64_t>(rc.a * 4294967296.0);
  meta[static_cast<size_t>(l.extra(3))] = static_cast<int64_t>(thr);
  // randint: lo and the range b - a mod 2^64
  if (rc.distribution == PCY_ARRAY_RANDOM_RANDINT) {
    const int64_t ilo = static_cast<int64_t>(rc.a), ihi = static_cast<int64_t>(rc.b);
    meta[static_cast<size_t>(l.extra(4))] = ilo;
    meta[static_cast<size_t>(l.extra(5))] =
        static_cast<int64_t>(static_cast<uint64_t>(ihi) - static_cast<uint64_t>(ilo));
  }
  return k;
}

// The meta words of a program for its collapsed form; `elem_off[p]` is operand p's tensor byte
// offset in elements.
// Into w (replaced; its capacity reused: no allocation per call once warm).
inline void meta_words_into(std::vector<int64_t>& w, const spec& s, const collapsed& c,
                            const std::array<int64_t, max_operands>& elem_off) {
  const layout l = layout_of(s);
  w.assign(static_cast<size_t>(l.words(s.what)), 0);
  for (int d = 0; d < s.rank; ++d)
    w[static_cast<size_t>(l.shape(d))] = c.shape[static_cast<size_t>(d)];
  for (int p = 0; p < s.operands; ++p) {
    w[static_cast<size_t>(l.offset(p))] =
        c.offset[static_cast<size_t>(p)] + elem_off[static_cast<size_t>(p)];
    for (int d = 0; d < s.rank; ++d)
      w[static_cast<size_t>(l.stride(p, d))] =
          c.strides[static_cast<size_t>(p)][static_cast<size_t>(d)];
  }
  // fewer than 2^32 elements: every extent and linear index fits 32 bits
  uint64_t n = 1;
  for (int d = 0; d < s.rank; ++d)
    n *= static_cast<uint64_t>(c.shape[static_cast<size_t>(d)]);
  w[static_cast<size_t>(l.small(s.what))] = n < (uint64_t{1} << 32) ? 1 : 0;
  // The runtime immediates: CONST values as the kernel reads them (F32: its bits in the low
  // word, rounded from the program's binary64 as the native bundle rounds; F64: its bits;
  // integers and bool: the value), GATHER extents.
  for (int k = 0; k < s.count; ++k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    if (!spec::has_immediate(in.op)) continue;
    int64_t v = in.op == PCY_ARRAY_OP_GATHER ? in.extent : in.a;
    if (in.op == PCY_ARRAY_OP_CONST && in.dtype == PCY_DTYPE_F32) {
      double f;
      std::memcpy(&f, &in.a, sizeof f);
      const float g = static_cast<float>(f);
      uint32_t u;
      std::memcpy(&u, &g, sizeof u);
      v = static_cast<int64_t>(u);
    } else if (in.op == PCY_ARRAY_OP_CONST && in.dtype == PCY_DTYPE_BOOL) {
      v = in.a != 0 ? 1 : 0;
    }
    w.push_back(v);
  }
}

namespace detail {

inline std::string fmt(const char* f, auto... v) {
  const int n = std::snprintf(nullptr, 0, f, v...);
  std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(out.data(), out.size() + 1, f, v...);
  return out;
}

// Register / storage C types (the prelude's typedefs).
inline const char* ctype(int d) {
  switch (d) {
  case PCY_DTYPE_F32: return "float";
  case PCY_DTYPE_F64: return "double";
  case PCY_DTYPE_I8: return "i8";
  case PCY_DTYPE_I16: return "i16";
  case PCY_DTYPE_I32: return "i32";
  case PCY_DTYPE_I64: return "i64";
  case PCY_DTYPE_U8: return "u8";
  case PCY_DTYPE_BOOL: return "u8";
  case PCY_DTYPE_F16: return "u16";
  case PCY_DTYPE_BF16: return "u16";
  default: return "void";
  }
}
// OpenCL C's scalar type of a dtype's storage, the stem of its vector types (float4, ushort4).
inline const char* vtype(int d) {
  switch (d) {
  case PCY_DTYPE_F32: return "float";
  case PCY_DTYPE_F64: return "double";
  case PCY_DTYPE_I8: return "char";
  case PCY_DTYPE_I16: return "short";
  case PCY_DTYPE_I32: return "int";
  case PCY_DTYPE_I64: return "long";
  case PCY_DTYPE_U8:
  case PCY_DTYPE_BOOL: return "uchar";
  default: return "ushort"; // F16, BF16
  }
}
// Bytes of a dtype's storage.
inline int dtype_bytes(int d) {
  switch (d) {
  case PCY_DTYPE_F64:
  case PCY_DTYPE_I64: return 8;
  case PCY_DTYPE_F32:
  case PCY_DTYPE_I32: return 4;
  case PCY_DTYPE_I16:
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: return 2;
  default: return 1;
  }
}
// Short names of the helpers' instances.
inline const char* tname(int d) {
  switch (d) {
  case PCY_DTYPE_F32: return "f32";
  case PCY_DTYPE_F64: return "f64";
  case PCY_DTYPE_I8: return "i8";
  case PCY_DTYPE_I16: return "i16";
  case PCY_DTYPE_I32: return "i32";
  case PCY_DTYPE_I64: return "i64";
  case PCY_DTYPE_U8: return "u8";
  case PCY_DTYPE_BOOL: return "b8";
  case PCY_DTYPE_F16: return "f16";
  case PCY_DTYPE_BF16: return "bf16";
  default: return "x";
  }
}
inline int bits_of(int d) {
  switch (d) {
  case PCY_DTYPE_I8:
  case PCY_DTYPE_U8:
  case PCY_DTYPE_BOOL: return 8;
  case PCY_DTYPE_I16:
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: return 16;
  case PCY_DTYPE_I32:
  case PCY_DTYPE_F32: return 32;
  default: return 64;
  }
}
inline bool is_signed_int(int d) {
  return d == PCY_DTYPE_I8 || d == PCY_DTYPE_I16 || d == PCY_DTYPE_I32 || d == PCY_DTYPE_I64;
}
inline const char* int_min(int d) {
  switch (d) {
  case PCY_DTYPE_I8: return "(-128)";
  case PCY_DTYPE_I16: return "(-32768)";
  case PCY_DTYPE_I32: return "(-2147483647 - 1)";
  case PCY_DTYPE_I64: return "((i64)PCY_U64(0x8000000000000000))";
  default: return "0";
  }
}
inline const char* int_max(int d) {
  switch (d) {
  case PCY_DTYPE_I8: return "127";
  case PCY_DTYPE_I16: return "32767";
  case PCY_DTYPE_I32: return "2147483647";
  case PCY_DTYPE_I64: return "((i64)PCY_U64(0x7fffffffffffffff))";
  case PCY_DTYPE_U8: return "255";
  case PCY_DTYPE_BOOL: return "1";
  default: return "0";
  }
}

// A math function's name for a float dtype: OpenCL overloads; CUDA's C names take an f for
// float.
inline std::string mf(dialect dl, const char* name, int d) {
  return dl == dialect::cuda && d == PCY_DTYPE_F32 ? std::string(name) + "f" : std::string(name);
}

// ---- the prelude ---------------------------------------------------------------------------
inline std::string prelude(dialect dl, bool f64, int wg) {
  std::string s;
  if (dl == dialect::opencl) {
    s += "#define PCY_OPENCL 1\n";
    if (f64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define PCY_RNG_F64 1\n";
    s += R"(typedef char i8; typedef short i16; typedef int i32; typedef long i64;
typedef uchar u8; typedef ushort u16; typedef uint u32; typedef ulong u64;
#define PCY_U64(x) x##UL
#define KERNEL __kernel
#define GLOBAL __global
#define SHARED __local
#define FN static inline
#define GID ((i64)get_global_id(0))
#define GSIZE ((i64)get_global_size(0))
#define LID ((int)get_local_id(0))
#define GRP ((i64)get_group_id(0))
#define NGRP ((i64)get_num_groups(0))
#define BARRIER barrier(CLK_LOCAL_MEM_FENCE)
#define F2U(x) as_uint(x)
#define U2F(x) as_float(x)
#define D2U(x) as_ulong(x)
#define U2D(x) as_double(x)
)";
  } else {
    s += R"(#define PCY_CUDA 1
typedef signed char i8; typedef short i16; typedef int i32; typedef long long i64;
typedef unsigned char u8; typedef unsigned short u16; typedef unsigned int u32;
typedef unsigned long long u64;
#define PCY_U64(x) x##ULL
#define KERNEL extern "C" __global__
#define GLOBAL
#define SHARED __shared__
#define FN static __device__ __forceinline__
#define GID ((i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x)
#define GSIZE ((i64)gridDim.x * (i64)blockDim.x)
#define LID ((int)threadIdx.x)
#define GRP ((i64)blockIdx.x)
#define NGRP ((i64)gridDim.x)
#define BARRIER __syncthreads()
#define F2U(x) __float_as_uint(x)
#define U2F(x) __uint_as_float(x)
#define D2U(x) ((u64)__double_as_longlong(x))
#define U2D(x) __longlong_as_double((i64)(x))
#define PCY_RNG_FN static __device__ inline
)";
  }
  s += fmt("#define PCY_WG %d\n", wg);
  return s;
}

// Helpers after the random header (whose last pragma resets FP_CONTRACT): contraction off.
inline std::string helpers(dialect dl, bool f64) {
  std::string s;
  if (dl == dialect::opencl) s += "#pragma OPENCL FP_CONTRACT OFF\n";
  s += R"(
#define U(x) ((u64)(i64)(x))
/* ---- half types: one rounding, to nearest even, from an exact value ------------------------- */
/* The value sig 2^(e - 63) (sig >= 2^63) to a binary format with `mant` fraction bits, exponent
   bias `bias` and `ebits` exponent bits; `sign` is the sign bit in place. */
FN u16 pcy_pack_half(u32 sign, int e, u64 sig, int mant, int bias, int ebits) {
  const int emin = 1 - bias;
  int shift, biased;
  u64 q, rem, halfway;
  if (e >= emin) { shift = 63 - mant; biased = e + bias; }
  else { shift = 63 - mant + (emin - e); biased = 0; }
  if (shift > 64) return (u16)sign;
  if (shift == 64) { q = 0; rem = sig; }
  else { q = sig >> shift; rem = sig & ((PCY_U64(1) << shift) - 1); }
  halfway = PCY_U64(1) << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) q += 1;
  if (biased == 0) return (u16)(sign | (u32)q); /* q == 2^mant: the smallest normal */
  if (q >> (mant + 1)) { q >>= 1; biased += 1; }
  if (biased >= (1 << ebits) - 1) return (u16)(sign | (((1u << ebits) - 1u) << mant));
  return (u16)(sign | ((u32)biased << mant) | ((u32)q & ((1u << mant) - 1u)));
}
/* x != 0: shifts x left until bit 63 is set; returns the shift. */
FN int pcy_norm64(u64* x) {
  int n = 0;
  if (!(*x >> 32)) { *x <<= 32; n += 32; }
  if (!(*x >> 48)) { *x <<= 16; n += 16; }
  if (!(*x >> 56)) { *x <<= 8; n += 8; }
  if (!(*x >> 60)) { *x <<= 4; n += 4; }
  if (!(*x >> 62)) { *x <<= 2; n += 2; }
  if (!(*x >> 63)) { *x <<= 1; n += 1; }
  return n;
}
FN u16 pcy_half_nan(u32 sign, int mant, int ebits) {
  return (u16)(sign | (((1u << ebits) - 1u) << mant) | (1u << (mant - 1)));
}
FN u16 pcy_half_from_f32(float x, int mant, int bias, int ebits) {
  const u32 b = F2U(x);
  const u32 sign = (b >> 16) & 0x8000u;
  const u32 E = (b >> 23) & 0xFFu, F = b & 0x7FFFFFu;
  u64 sig;
  int e;
  if (E == 0xFFu) return F ? pcy_half_nan(sign, mant, ebits) : (u16)(sign | (((1u << ebits) - 1u) << mant));
  if (E == 0u) {
    if (F == 0u) return (u16)sign;
    sig = (u64)F;
    e = -149 + 63 - pcy_norm64(&sig);
  } else {
    sig = (u64)(F | 0x800000u) << 40;
    e = (int)E - 127;
  }
  return pcy_pack_half(sign, e, sig, mant, bias, ebits);
}
/* An integer's magnitude m (and sign) as the native bundle converts it: to the nearest double
   first (m >= 2^53 rounds), then to the half type. */
FN u16 pcy_half_from_int(u64 m, int neg, int mant, int bias, int ebits) {
  const u32 sign = neg ? 0x8000u : 0u;
  u64 sig = m, q, rem;
  int e;
  if (m == 0) return (u16)sign;
  e = 63 - pcy_norm64(&sig);
  q = sig >> 11;
  rem = sig & 0x7FFu;
  if (rem > 0x400u || (rem == 0x400u && (q & 1))) q += 1;
  if (q >> 53) { q >>= 1; e += 1; }
  return pcy_pack_half(sign, e, q << 11, mant, bias, ebits);
}
/* Half bits to float (exact). */
FN float pcy_f32_from_f16(u16 h) {
  const u32 sign = ((u32)h & 0x8000u) << 16, E = ((u32)h >> 10) & 0x1Fu, F = (u32)h & 0x3FFu;
  if (E == 0x1Fu) return U2F(sign | (F ? 0x7FC00000u : 0x7F800000u));
  if (E == 0u) {
    const float v = (float)F * U2F(0x33800000u); /* 2^-24 */
    return sign ? -v : v;
  }
  return U2F(sign | ((E + 112u) << 23) | (F << 13));
}
FN float pcy_f32_from_bf16(u16 h) {
  const u32 b = (u32)h << 16;
  if ((b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu)) return U2F((b & 0x80000000u) | 0x7FC00000u);
  return U2F(b);
}
#define PCY_F16_FROM_F32(x) pcy_half_from_f32((x), 10, 15, 5)
#define PCY_BF16_FROM_F32(x) pcy_half_from_f32((x), 7, 127, 8)
#define PCY_F16_FROM_INT(m, n) pcy_half_from_int((m), (n), 10, 15, 5)
#define PCY_BF16_FROM_INT(m, n) pcy_half_from_int((m), (n), 7, 127, 8)
FN u64 pcy_upow(u64 base, u64 e) {
  u64 r = 1;
  while (e != 0) {
    if (e & 1u) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}
)";
  if (f64)
    s += R"(
FN u16 pcy_half_from_f64(double x, int mant, int bias, int ebits) {
  const u64 b = D2U(x);
  const u32 sign = (u32)(b >> 48) & 0x8000u;
  const u32 E = (u32)(b >> 52) & 0x7FFu;
  const u64 F = b & PCY_U64(0xFFFFFFFFFFFFF);
  u64 sig;
  int e;
  if (E == 0x7FFu) return F ? pcy_half_nan(sign, mant, ebits) : (u16)(sign | (((1u << ebits) - 1u) << mant));
  if (E == 0u) {
    if (F == 0u) return (u16)sign;
    sig = F;
    e = -1074 + 63 - pcy_norm64(&sig);
  } else {
    sig = (F | PCY_U64(0x10000000000000)) << 11;
    e = (int)E - 1023;
  }
  return pcy_pack_half(sign, e, sig, mant, bias, ebits);
}
)";
  // Integer floor division and remainder (Python's; x // 0 = 0, x % 0 = 0, MIN // -1 = MIN).
  for (int d : {PCY_DTYPE_I8, PCY_DTYPE_I16, PCY_DTYPE_I32, PCY_DTYPE_I64, PCY_DTYPE_U8}) {
    const char* T = ctype(d);
    const char* n = tname(d);
    if (is_signed_int(d)) {
      s += fmt("FN %s pcy_fdiv_%s(%s a, %s b) {\n", T, n, T, T);
      s += fmt("  %s q;\n  if (b == 0) return 0;\n  if (a == %s && b == -1) return a;\n", T,
               int_min(d));
      s += fmt(
          "  q = (%s)(a / b);\n  if ((%s)(a %% b) != 0 && ((a < 0) != (b < 0))) q = (%s)(q - 1);\n"
          "  return q;\n}\n",
          T, T, T);
      s += fmt("FN %s pcy_rem_%s(%s a, %s b) {\n", T, n, T, T);
      s += fmt("  %s r;\n  if (b == 0) return 0;\n  if (a == %s && b == -1) return 0;\n", T,
               int_min(d));
      s += fmt("  r = (%s)(a %% b);\n  if (r != 0 && ((r < 0) != (b < 0))) r = (%s)(r + b);\n"
               "  return r;\n}\n",
               T, T);
    } else {
      s += fmt("FN %s pcy_fdiv_%s(%s a, %s b) { return b == 0 ? (%s)0 : (%s)(a / b); }\n", T, n, T,
               T, T, T);
      s += fmt("FN %s pcy_rem_%s(%s a, %s b) { return b == 0 ? (%s)0 : (%s)(a %% b); }\n", T, n, T,
               T, T, T);
    }
  }
  // Floating: NumPy's npy_divmod, logaddexp, sign.
  for (int d : {PCY_DTYPE_F32, PCY_DTYPE_F64}) {
    if (d == PCY_DTYPE_F64 && !f64) continue;
    const std::string T = ctype(d), n = tname(d);
    const std::string fmod_ = mf(dl, "fmod", d), floor_ = mf(dl, "floor", d),
                      copysign_ = mf(dl, "copysign", d), log1p_ = mf(dl, "log1p", d),
                      exp_ = mf(dl, "exp", d);
    std::string t = R"(
FN void pcy_divmod_$n($T a, $T b, $T* fdiv, $T* mod) {
  $T m, dv, fd;
  if (b == ($T)0) {
    *mod = $fmod(a, b);
    *fdiv = a / b;
    return;
  }
  m = $fmod(a, b);
  dv = (a - m) / b;
  if (m != ($T)0) {
    if ((b < ($T)0) != (m < ($T)0)) {
      m = m + b;
      dv = dv - ($T)1;
    }
  } else {
    m = $copysign(($T)0, b);
  }
  if (dv != ($T)0) {
    fd = $floor(dv);
    if (dv - fd > ($T)0.5) fd = fd + ($T)1;
  } else {
    fd = $copysign(($T)0, a / b);
  }
  *fdiv = fd;
  *mod = m;
}
FN $T pcy_floordiv_$n($T a, $T b) { $T q, m; pcy_divmod_$n(a, b, &q, &m); return q; }
FN $T pcy_fmodpy_$n($T a, $T b) { $T q, m; pcy_divmod_$n(a, b, &q, &m); return m; }
FN $T pcy_logaddexp_$n($T x, $T y) {
  $T t;
  if (x == y) return x + ($T)$LN2;
  t = x - y;
  if (t > ($T)0) return x + $log1p($exp(-t));
  if (t <= ($T)0) return y + $log1p($exp(t));
  return t;
}
FN $T pcy_sign_$n($T x) { return x > ($T)0 ? ($T)1 : x < ($T)0 ? ($T)-1 : x == ($T)0 ? ($T)0 : x; }
)";
    auto rep = [&](const std::string& from, const std::string& to) {
      for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size()))
        t.replace(at, from.size(), to);
    };
    // npy_logaddexp: x + ln 2 with ln 2 as T (the literal rounded to T, as the C++ cast does).
    rep("$LN2", d == PCY_DTYPE_F32 ? "U2F(0x3F317218u)" : "U2D(PCY_U64(0x3FE62E42FEFA39EF))");
    rep("$fmod", fmod_);
    rep("$floor", floor_);
    rep("$copysign", copysign_);
    rep("$log1p", log1p_);
    rep("$exp", exp_);
    rep("$T", T);
    rep("$n", n);
    s += t;
  }
  return s;
}

// ---- instructions --------------------------------------------------------------------------
inline std::string reg(int64_t k) { return fmt("r%lld", static_cast<long long>(k)); }

inline std::string f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return fmt("U2F(0x%08Xu)", u);
}
inline std::string f64_bits(double f) {
  uint64_t u;
  std::memcpy(&u, &f, sizeof u);
  return fmt("U2D(PCY_U64(0x%016llX))", static_cast<unsigned long long>(u));
}
inline std::string inf_of(int d, bool neg) {
  if (d == PCY_DTYPE_F32) return neg ? "U2F(0xFF800000u)" : "U2F(0x7F800000u)";
  return neg ? "U2D(PCY_U64(0xFFF0000000000000))" : "U2D(PCY_U64(0x7FF0000000000000))";
}
inline std::string nan_of(int d) {
  return d == PCY_DTYPE_F32 ? "U2F(0x7FC00000u)" : "U2D(PCY_U64(0x7FF8000000000000))";
}

// A cast of expression x (dtype from) to dtype to.
inline std::string cast_expr(dialect dl, const std::string& x, int from, int to) {
  (void)dl;
  const char* T = ctype(to);
  if (from == to) return x;
  if (to == PCY_DTYPE_BOOL) {
    if (is_half(from)) return fmt("(u8)(((%s) & 0x7FFFu) != 0)", x.c_str());
    return fmt("(u8)((%s) != 0)", x.c_str());
  }
  // From half types: through float (exact).
  if (is_half(from)) {
    const std::string f =
        (from == PCY_DTYPE_F16 ? "pcy_f32_from_f16(" : "pcy_f32_from_bf16(") + x + ")";
    if (is_half(to))
      return (to == PCY_DTYPE_F16 ? "PCY_F16_FROM_F32(" : "PCY_BF16_FROM_F32(") + f + ")";
    return cast_expr(dl, f, PCY_DTYPE_F32, to);
  }
  if (is_half(to)) {
    const char* fromf = to == PCY_DTYPE_F16 ? "PCY_F16_FROM_F32(" : "PCY_BF16_FROM_F32(";
    const char* fromi = to == PCY_DTYPE_F16 ? "PCY_F16_FROM_INT(" : "PCY_BF16_FROM_INT(";
    if (from == PCY_DTYPE_F32) return fromf + x + ")";
    if (from == PCY_DTYPE_F64)
      return fmt(to == PCY_DTYPE_F16 ? "pcy_half_from_f64(%s, 10, 15, 5)"
                                     : "pcy_half_from_f64(%s, 7, 127, 8)",
                 x.c_str());
    if (from == PCY_DTYPE_BOOL || from == PCY_DTYPE_U8)
      return fromi + fmt("(u64)(%s), 0)", x.c_str());
    // signed: magnitude as u64 (MIN's magnitude wraps to 2^(bits-1), right as unsigned)
    return fromi + fmt("(%s) < 0 ? (u64)0 - U(%s) : U(%s), (%s) < 0)", x.c_str(), x.c_str(),
                       x.c_str(), x.c_str());
  }
  if (from == PCY_DTYPE_BOOL) return fmt("(%s)(%s)", T, x.c_str()); // 0 or 1
  if (is_float(to)) return fmt("(%s)(%s)", T, x.c_str()); // nearest even (int and float sources)
  // integer target
  if (is_int(from)) return fmt("(%s)U(%s)", T, x.c_str()); // wraps
  // float -> integer: truncated, saturated, NaN -> 0 (bounds are exact in both float types)
  const char* F = ctype(from);
  std::string lo, hi;
  switch (to) {
  case PCY_DTYPE_I8:
    lo = "-128";
    hi = "128";
    break;
  case PCY_DTYPE_I16:
    lo = "-32768";
    hi = "32768";
    break;
  case PCY_DTYPE_I32:
    lo = "-2147483648.0";
    hi = "2147483648.0";
    break;
  case PCY_DTYPE_I64:
    lo = "-9223372036854775808.0";
    hi = "9223372036854775808.0";
    break;
  default:
    lo = "0";
    hi = "256";
    break; // U8
  }
  return fmt(
      "((%s) != (%s) ? (%s)0 : (%s) <= (%s)%s ? (%s)%s : (%s) >= (%s)%s ? (%s)%s : (%s)(%s))",
      x.c_str(), x.c_str(), T, x.c_str(), F, lo.c_str(), T, int_min(to), x.c_str(), F, hi.c_str(),
      T, int_max(to), T, x.c_str());
}

// The statement defining register k (the operand offsets q<p> and idx<d> in scope).
inline std::string instruction_code(dialect dl, const spec& s, int k) {
  const instruction& in = s.code[static_cast<size_t>(k)];
  const int d = in.dtype;
  const char* T = ctype(d);
  const std::string r = reg(k);
  const int t = op_operands(in.op) > 0 ? s.code[static_cast<size_t>(in.a)].dtype : d;
  const std::string a = op_operands(in.op) > 0 ? reg(in.a) : "";
  const std::string b = op_operands(in.op) > 1 ? reg(in.b) : "";
  const std::string c = op_operands(in.op) > 2 ? reg(in.c) : "";
  auto def = [&](const std::string& e) { return fmt("const %s ", T) + r + " = " + e + ";\n"; };
  const bool fl = is_float(t), in_ = is_int(t), bo = is_bool(t);
  const char* n = tname(t);
  // Transcendental F32 functions through F64 where the spec asks (one rounding at the end).
  const bool wide = s.f32_via_f64 && t == PCY_DTYPE_F32;
  auto f1 = [&](const char* name) {
    if (wide) return def(std::string("(float)") + name + "((double)" + a + ")");
    return def(mf(dl, name, t) + "(" + a + ")");
  };
  auto f2 = [&](const char* name) {
    if (wide) return def(std::string("(float)") + name + "((double)" + a + ", (double)" + b + ")");
    return def(mf(dl, name, t) + "(" + a + ", " + b + ")");
  };
  // Exact functions stay in their dtype.
  auto x1 = [&](const char* name) { return def(mf(dl, name, t) + "(" + a + ")"); };
  auto x2 = [&](const char* name) { return def(mf(dl, name, t) + "(" + a + ", " + b + ")"); };
  switch (in.op) {
  case PCY_ARRAY_OP_LOAD: {
    const std::string e =
        fmt("o%lld[q%lld]", static_cast<long long>(in.a), static_cast<long long>(in.a));
    return def(d == PCY_DTYPE_BOOL ? "(u8)(" + e + " != 0)" : e);
  }
  case PCY_ARRAY_OP_GATHER: {
    const long long p = in.a, dim = in.c;
    const std::string gi = reg(in.b); // the index register (GATHER's words are immediates)
    const int ext = layout_of(s).words(s.what) + s.immediate_slot(k); // the extent's meta word
    const std::string at = fmt("q%lld + (%s < 0 ? (i64)0 : %s > m.w[%d] - 1 ? m.w[%d] - 1 : %s) * "
                               "m.w[%d] - idx%lld * m.w[%d]",
                               p, gi.c_str(), gi.c_str(), ext, ext, gi.c_str(),
                               layout_of(s).stride(static_cast<int>(p), static_cast<int>(dim)), dim,
                               layout_of(s).stride(static_cast<int>(p), static_cast<int>(dim)));
    const std::string e = fmt("o%lld[", p) + at + "]";
    return def(d == PCY_DTYPE_BOOL ? "(u8)(" + e + " != 0)" : e);
  }
  case PCY_ARRAY_OP_CONST: { // the value is a meta word (spec::immediate_slot)
    const std::string w = fmt("m.w[%d]", layout_of(s).words(s.what) + s.immediate_slot(k));
    if (d == PCY_DTYPE_F32) return def("U2F((u32)" + w + ")");
    if (d == PCY_DTYPE_F64) return def("U2D(" + w + ")");
    if (d == PCY_DTYPE_BOOL) return def("(u8)(" + w + " != 0)");
    return def(fmt("(%s)", T) + w);
  }
  case PCY_ARRAY_OP_INDEX: return def(fmt("idx%lld", static_cast<long long>(in.a)));
  case PCY_ARRAY_OP_STORE: return def(reg(in.b)); // written after the body (eval)
  case PCY_ARRAY_OP_CAST: return def(cast_expr(dl, a, t, d));
  case PCY_ARRAY_OP_WHERE: return def("(" + a + " ? " + b + " : " + c + ")");
  case PCY_ARRAY_OP_NEG: return def(fl ? "-" + a : fmt("(%s)((u64)0 - U(%s))", T, a.c_str()));
  case PCY_ARRAY_OP_ABS:
    if (fl) return x1("fabs");
    if (t == PCY_DTYPE_U8) return def(a);
    return def(fmt("(%s < 0 ? (%s)((u64)0 - U(%s)) : %s)", a.c_str(), T, a.c_str(), a.c_str()));
  case PCY_ARRAY_OP_SIGN:
    if (fl) return def(fmt("pcy_sign_%s(%s)", n, a.c_str()));
    return def(fmt("(%s)((%s > 0) - (%s < 0))", T, a.c_str(), a.c_str()));
  case PCY_ARRAY_OP_SQUARE:
    if (fl) return def(a + " * " + a);
    return def(fmt("(%s)(U(%s) * U(%s))", T, a.c_str(), a.c_str()));
  case PCY_ARRAY_OP_EXP: return f1("exp");
  case PCY_ARRAY_OP_EXPM1: return f1("expm1");
  case PCY_ARRAY_OP_LOG: return f1("log");
  case PCY_ARRAY_OP_LOG1P: return f1("log1p");
  case PCY_ARRAY_OP_LOG2: return f1("log2");
  case PCY_ARRAY_OP_LOG10: return f1("log10");
  case PCY_ARRAY_OP_SQRT: return x1("sqrt");
  case PCY_ARRAY_OP_RSQRT: return def(fmt("(%s)1 / ", T) + mf(dl, "sqrt", t) + "(" + a + ")");
  case PCY_ARRAY_OP_SIN: return f1("sin");
  case PCY_ARRAY_OP_COS: return f1("cos");
  case PCY_ARRAY_OP_TAN: return f1("tan");
  case PCY_ARRAY_OP_ASIN: return f1("asin");
  case PCY_ARRAY_OP_ACOS: return f1("acos");
  case PCY_ARRAY_OP_ATAN: return f1("atan");
  case PCY_ARRAY_OP_SINH: return f1("sinh");
  case PCY_ARRAY_OP_COSH: return f1("cosh");
  case PCY_ARRAY_OP_TANH: return f1("tanh");
  case PCY_ARRAY_OP_ASINH: return f1("asinh");
  case PCY_ARRAY_OP_ACOSH: return f1("acosh");
  case PCY_ARRAY_OP_ATANH: return f1("atanh");
  case PCY_ARRAY_OP_ERF: return f1("erf");
  case PCY_ARRAY_OP_FLOOR: return x1("floor");
  case PCY_ARRAY_OP_CEIL: return x1("ceil");
  case PCY_ARRAY_OP_ROUND: return x1("rint");
  case PCY_ARRAY_OP_TRUNC: return x1("trunc");
  case PCY_ARRAY_OP_NOT:
    if (bo) return def("(u8)(" + a + " == 0)");
    return def(fmt("(%s)~%s", T, a.c_str()));
  case PCY_ARRAY_OP_ISNAN: return def("(u8)(" + a + " != " + a + ")");
  case PCY_ARRAY_OP_ISINF:
    return def("(u8)(" + a + " == " + inf_of(t, false) + " || " + a + " == " + inf_of(t, true) +
               ")");
  case PCY_ARRAY_OP_ISFINITE:
    return def("(u8)(" + a + " == " + a + " && " + a + " != " + inf_of(t, false) + " && " + a +
               " != " + inf_of(t, true) + ")");
  case PCY_ARRAY_OP_ADD:
    return def(fl ? a + " + " + b : fmt("(%s)(U(%s) + U(%s))", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_SUB:
    return def(fl ? a + " - " + b : fmt("(%s)(U(%s) - U(%s))", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_MUL:
    return def(fl ? a + " * " + b : fmt("(%s)(U(%s) * U(%s))", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_DIV: return def(a + " / " + b);
  case PCY_ARRAY_OP_FLOORDIV:
    return def(
        fmt(fl ? "pcy_floordiv_%s(%s, %s)" : "pcy_fdiv_%s(%s, %s)", n, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_REM:
    return def(fmt(fl ? "pcy_fmodpy_%s(%s, %s)" : "pcy_rem_%s(%s, %s)", n, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_POW:
    if (fl) return f2("pow");
    if (is_signed_int(t))
      return def(fmt("(%s < 0 ? (%s == 1 ? (%s)1 : %s == -1 ? ((%s & 1) ? (%s)-1 : (%s)1) : (%s)0) "
                     ": (%s)pcy_upow(U(%s), (u64)%s))",
                     b.c_str(), a.c_str(), T, a.c_str(), b.c_str(), T, T, T, T, a.c_str(),
                     b.c_str()));
    return def(fmt("(%s)pcy_upow(U(%s), (u64)%s)", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_MINIMUM:
    if (fl)
      return def(fmt("((%s <= %s || %s != %s) ? %s : %s)", a.c_str(), b.c_str(), a.c_str(),
                     a.c_str(), a.c_str(), b.c_str()));
    return def(fmt("(%s <= %s ? %s : %s)", a.c_str(), b.c_str(), a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_MAXIMUM:
    if (fl)
      return def(fmt("((%s >= %s || %s != %s) ? %s : %s)", a.c_str(), b.c_str(), a.c_str(),
                     a.c_str(), a.c_str(), b.c_str()));
    return def(fmt("(%s >= %s ? %s : %s)", a.c_str(), b.c_str(), a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_ATAN2: return f2("atan2");
  case PCY_ARRAY_OP_AND: return def(fmt("(%s)(%s & %s)", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_OR: return def(fmt("(%s)(%s | %s)", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_XOR: return def(fmt("(%s)(%s ^ %s)", T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_SHL:
    return def(fmt("((i64)%s < 0 || (i64)%s >= %d ? (%s)0 : (%s)(U(%s) << (int)%s))", b.c_str(),
                   b.c_str(), bits_of(t), T, T, a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_SHR:
    if (is_signed_int(t))
      return def(
          fmt("((i64)%s < 0 || (i64)%s >= %d ? (%s < 0 ? (%s)-1 : (%s)0) : (%s)(%s >> (int)%s))",
              b.c_str(), b.c_str(), bits_of(t), a.c_str(), T, T, T, a.c_str(), b.c_str()));
    return def(fmt("((i64)%s >= %d ? (%s)0 : (%s)(%s >> (int)%s))", b.c_str(), bits_of(t), T, T,
                   a.c_str(), b.c_str()));
  case PCY_ARRAY_OP_EQ: return def("(u8)(" + a + " == " + b + ")");
  case PCY_ARRAY_OP_NE: return def("(u8)(" + a + " != " + b + ")");
  case PCY_ARRAY_OP_LT: return def("(u8)(" + a + " < " + b + ")");
  case PCY_ARRAY_OP_LE: return def("(u8)(" + a + " <= " + b + ")");
  case PCY_ARRAY_OP_GT: return def("(u8)(" + a + " > " + b + ")");
  case PCY_ARRAY_OP_GE: return def("(u8)(" + a + " >= " + b + ")");
  case PCY_ARRAY_OP_COPYSIGN: return x2("copysign");
  case PCY_ARRAY_OP_NEXTAFTER: return x2("nextafter");
  case PCY_ARRAY_OP_HYPOT: return f2("hypot");
  case PCY_ARRAY_OP_LOGADDEXP: return def(fmt("pcy_logaddexp_%s(%s, %s)", n, a.c_str(), b.c_str()));
  default: break;
  }
  (void)in_;
  return "#error unknown instruction\n";
}

// Which operands the program reads (their offsets are computed), besides the output.
inline std::array<bool, max_operands> read_operands(const spec& s) {
  std::array<bool, max_operands> r{};
  for (int k = 0; k < s.count; ++k) {
    const instruction& in = s.code[static_cast<size_t>(k)];
    if (in.op == PCY_ARRAY_OP_LOAD || in.op == PCY_ARRAY_OP_GATHER)
      r[static_cast<size_t>(in.a)] = true;
  }
  return r;
}

// Offsets q<p> of operand p at index idx0..idx<R-1>, for `which` operands.
inline std::string offsets(const spec& s, const std::array<bool, max_operands>& which) {
  const layout l = layout_of(s);
  std::string o;
  for (int p = 0; p < s.operands; ++p) {
    if (!which[static_cast<size_t>(p)]) continue;
    o += fmt("const i64 q%d = m.w[%d]", p, l.offset(p));
    for (int d = 0; d < s.rank; ++d)
      o += fmt(" + idx%d * m.w[%d]", d, l.stride(p, d));
    o += ";\n";
  }
  return o;
}

// The program's value at the index in scope: a block defining r0..r<M-1>.
inline std::string body(dialect dl, const spec& s) {
  std::string b = offsets(s, read_operands(s));
  for (int k = 0; k < s.count; ++k)
    b += instruction_code(dl, s, k);
  return b;
}

// idx<from>..idx<to-1> from linear `lin` (row-major over those dimensions).
// With `small` (the meta word that says the index space has fewer than 2^32 elements, so every
// extent and linear index fits 32 bits) the divisions are 32-bit ones where it is set.
inline std::string unravel(int from, int to, const char* lin, int small = -1) {
  if (to - from < 2) small = -1; // no division
  std::string u;
  if (small >= 0) {
    u += fmt("if (m.w[%d]) { u32 rem_ = (u32)(%s);\n", small, lin);
    for (int d = to - 1; d >= from; --d) {
      if (d > from)
        u += fmt("idx%d = (i64)(rem_ %% (u32)m.w[%d]); rem_ /= (u32)m.w[%d];\n", d, d, d);
      else
        u += fmt("idx%d = (i64)rem_;\n", d);
    }
    u += "} else ";
  }
  u += fmt("{ i64 rem_ = %s;\n", lin);
  for (int d = to - 1; d >= from; --d) {
    if (d > from)
      u += fmt("idx%d = rem_ %% m.w[%d]; rem_ /= m.w[%d];\n", d, d, d);
    else
      u += fmt("idx%d = rem_;\n", d);
  }
  u += "}\n";
  return u;
}

inline std::string params(const spec& s) {
  std::string p;
  for (int o = 0; o < s.operands; ++o) {
    p += fmt("GLOBAL %s%s* o%d, ", o < s.outputs ? "" : "const ",
             ctype(s.dtypes[static_cast<size_t>(o)]), o);
  }
  p += "const pcy_meta m";
  return p;
}

inline std::string idx_decl(int rank) {
  std::string d;
  for (int i = 0; i < rank; ++i)
    d += fmt("i64 idx%d = 0; ", i);
  return d.empty() ? "" : d + "\n";
}

// ---- reduce kinds -----------------------------------------------------------------------------
// GLSL's names of a dtype's register and storage type (array_glsl.hpp; halves are their bits).
inline const char* gl_type(int d) {
  switch (d) {
  case PCY_DTYPE_F32: return "float";
  case PCY_DTYPE_F64: return "double";
  case PCY_DTYPE_I8: return "int8_t";
  case PCY_DTYPE_I16: return "int16_t";
  case PCY_DTYPE_I32: return "int";
  case PCY_DTYPE_I64: return "int64_t";
  case PCY_DTYPE_U8:
  case PCY_DTYPE_BOOL: return "uint8_t";
  case PCY_DTYPE_F16:
  case PCY_DTYPE_BF16: return "uint16_t";
  default: return "void";
  }
}

// The accumulator (a, b, i) of value dtype t; code snippets per kind, in C (OpenCL, CUDA) or,
// with `glsl`, in array_glsl.hpp's GLSL: the same statements in the same order, so the same
// bits, with GLSL's spelling (T(x) casts, `precise` floats, 32-bit positions and counts, NaN and
// infinity read from the bits, no void casts).
struct reducer {
  dialect dl;
  int kind;
  int t;
  bool glsl = false;
  bool two_pass() const { return kind == PCY_ARRAY_REDUCE_LOGSUMEXP; }
  // VAR and STD in one pass: each work-item's running (count cn, mean a, sum of squared
  // deviations b) by Welford's update, merged by Chan's formula in the trees and across chunks.
  bool welford() const { return kind == PCY_ARRAY_REDUCE_VAR || kind == PCY_ARRAY_REDUCE_STD; }
  // ---- the dialect's spelling
  std::string cv(const std::string& ty, const std::string& x) const {
    return glsl ? ty + "(" + x + ")" : "(" + ty + ")" + x;
  }
  // A local of the value type, set once ("const " in C; `precise` floats in GLSL).
  std::string let() const {
    if (!glsl) return "const " + T() + " ";
    return (is_float(t) ? "precise " : "") + T() + " ";
  }
  std::string var() const { return (glsl && is_float(t) ? "precise " : "") + T() + " "; }
  std::string I() const { return glsl ? "int" : "i64"; } // positions and counts
  std::string is_nan(const std::string& x) const {
    if (!glsl) return x + " != " + x;
    return is_float(t) ? fmt("pcy_isnan_%s(%s)", tname(t), x.c_str()) : "false";
  }
  std::string not_nan(const std::string& x) const {
    return glsl ? "!" + is_nan(x) : x + " == " + x;
  }
  std::string is_inf(const std::string& x, bool neg) const {
    if (!glsl) return x + " == " + inf_of(t, neg);
    return fmt("(pcy_isinf_%s(%s) && %spcy_neg_%s(%s))", tname(t), x.c_str(), neg ? "" : "!",
               tname(t), x.c_str());
  }
  std::string inf(bool neg) const {
    if (!glsl) return inf_of(t, neg);
    if (t == PCY_DTYPE_F32)
      return neg ? "uintBitsToFloat(0xFF800000u)" : "uintBitsToFloat(0x7F800000u)";
    return neg ? "packDouble2x32(uvec2(0u, 0xFFF00000u))"
               : "packDouble2x32(uvec2(0u, 0x7FF00000u))";
  }
  std::string nan() const {
    if (!glsl) return nan_of(t);
    return t == PCY_DTYPE_F32 ? "uintBitsToFloat(0x7FC00000u)"
                              : "packDouble2x32(uvec2(0u, 0x7FF80000u))";
  }
  std::string fn(const char* name) const { // sqrt, exp, log of T
    if (!glsl) return mf(dl, name, t);
    return std::string(name) == "sqrt" ? "sqrt" : fmt("pcy_%s_%s", name, tname(t));
  }
  // a = a op v on integers: wraps (two's complement; GLSL's integer arithmetic wraps)
  std::string wrap(const char* op, const std::string& v) const {
    if (glsl) return "a = " + T() + "(a " + op + " " + v + ");\n";
    return "a = (" + T() + ")(U(a) " + op + " U(" + v + "));\n";
  }
  // ---- the kinds
  // VAR/STD: the open block (bn values, shift Kb, sums s1 and s2) merged into (cn, a, b).
  std::string flush_block() const {
    const std::string Ts = T();
    return "{ " + let() + "m_ = Kb + s1 / " + cv(Ts, "bn") + "; " + let() +
           "q0_ = s2 - s1 * (s1 / " + cv(Ts, "bn") + "); " + let() + "q_ = q0_ < " + cv(Ts, "0") +
           " ? " + cv(Ts, "0") + " : q0_; const " + I() + " n_ = bn; " +
           merge_welford("n_", "m_", "q_") + " bn = 0; s1 = " + cv(Ts, "0") +
           "; s2 = " + cv(Ts, "0") + "; }";
  }
  // After a work-item's loop: its last, partial block merged.
  std::string after_loop() const {
    return welford() ? "if (bn > 0) " + flush_block() + "\n" : std::string();
  }
  // Merges a part (count n2, mean a2, deviations b2) into (cn, a, b); an empty side takes the
  // other whole (no inf * 0).
  std::string merge_welford(const std::string& n2, const std::string& a2,
                            const std::string& b2) const {
    const std::string Ts = T();
    return "if (" + n2 + " > 0) { if (cn == 0) { a = " + a2 + "; b = " + b2 + "; cn = " + n2 +
           "; } else { const " + I() + " nn_ = cn + " + n2 + "; " + let() + "d_ = " + a2 +
           " - a; " + let() + "f_ = " + cv(Ts, n2) + " / " + cv(Ts, "nn_") +
           "; a = a + d_ * f_; b = b + " + b2 + " + d_ * d_ * " + cv(Ts, "cn") +
           " * f_; cn = nn_; } }\n";
  }
  // VAR/STD's loop over a work-item's positions pos = first, first + step, ... < end: blocks of
  // 16 positions, each an inner loop of a fixed count whose loads are independent (the compiler
  // unrolls it), then the block's flush. The same values in the same order as add0 one by one:
  // the same bits. `value` computes v at pos. (Computing a block's 16 values into an array
  // before folding any, so that the loads would be in flight together, measured slower on the
  // H100: var 1.39 / 1.33 of a copy's time against 1.31 / 1.16, 2026-12-07 22:21 UTC.)
  std::string welford_loop(const std::string& first, const std::string& end,
                           const std::string& step, const std::string& value,
                           const std::string& v) const {
    return "for (" + I() + " pos0_ = " + first + "; pos0_ < " + end + "; pos0_ += 16 * (" + step +
           ")) {\n  for (int u_ = 0; u_ < 16; ++u_) {\n    const " + I() + " pos = pos0_ + u_ * (" +
           step + ");\n    if (pos < " + end + ") {\n" + value + "{ " + let() + "x_ = " + v +
           " - K; if (u_ == 0) Kb = x_; " + let() +
           "y_ = x_ - Kb; s1 = s1 + y_; s2 = s2 + y_ * y_; bn = bn + 1; }\n    }\n  }\n  " +
           after_loop() + "}\n";
  }
  // The other one-pass kinds' loop (pass 0) over pos = first, first + step, ... < end, each
  // value folded by add0 beside its load. (Blocks of 8 values computed into an array first made
  // sum, max and argmax 1.3-1.9x a copy's time on the H100 against 0.93-1.07, 2026-12-07 22:21
  // UTC: the array did not stay in registers.)
  std::string batched_loop(const std::string& first, const std::string& end,
                           const std::string& step, const std::string& value,
                           const std::string& v) const {
    return "for (" + I() + " pos = " + first + "; pos < " + end + "; pos += " + step + ") {\n" +
           value + add0(v) + "}\n" + after_loop();
  }
  bool arg() const { return kind == PCY_ARRAY_REDUCE_ARGMIN || kind == PCY_ARRAY_REDUCE_ARGMAX; }
  std::string T() const { return glsl ? gl_type(t) : ctype(t); }
  std::string limit(bool max) const { // the integer type's extreme
    if (!glsl) return "(" + T() + ")" + (max ? int_max(t) : int_min(t));
    if (t == PCY_DTYPE_I64)
      return max ? "int64_t(0x7FFFFFFFFFFFFFFFul)" : "int64_t(0x8000000000000000ul)";
    return cv(T(), max ? int_max(t) : int_min(t));
  }
  std::string init_a() const {
    switch (kind) {
    case PCY_ARRAY_REDUCE_PROD:
    case PCY_ARRAY_REDUCE_ALL: return cv(T(), "1");
    case PCY_ARRAY_REDUCE_LOGSUMEXP: return inf(true);
    case PCY_ARRAY_REDUCE_MIN: return is_float(t) ? inf(false) : limit(true);
    case PCY_ARRAY_REDUCE_MAX: return is_float(t) ? inf(true) : limit(false);
    default: return cv(T(), "0");
    }
  }
  // Folds v at position pos into (a, i) (pass 0) or b (pass 1; c the centre).
  std::string add0(const std::string& v) const {
    const std::string Ts = T();
    switch (kind) {
    case PCY_ARRAY_REDUCE_VAR:
    case PCY_ARRAY_REDUCE_STD:
      // x = v - K, K the output's first value; blocks of 16 of a work-item's values summed
      // shifted by the block's first (s1 = sum y, s2 = sum y^2, y = x - Kb: the block's
      // deviations lose at most 17 ulp to cancellation, as Kb is one of its values), each
      // block merged into (cn, a, b) by Chan's formula: two divisions per 16 values
      return "{ " + let() + "x_ = " + v + " - K; if (bn == 0) Kb = x_; " + let() +
             "y_ = x_ - Kb; s1 = s1 + y_; s2 = s2 + y_ * y_; bn = bn + 1; if (bn == 16) " +
             flush_block() + " }\n";
    case PCY_ARRAY_REDUCE_SUM:
    case PCY_ARRAY_REDUCE_MEAN: return is_float(t) ? "a = a + " + v + ";\n" : wrap("+", v);
    case PCY_ARRAY_REDUCE_NORM2: return "a = a + " + v + " * " + v + ";\n";
    case PCY_ARRAY_REDUCE_PROD: return is_float(t) ? "a = a * " + v + ";\n" : wrap("*", v);
    case PCY_ARRAY_REDUCE_MIN:
      return is_float(t) ? "a = (a <= " + v + " || " + is_nan("a") + ") ? a : " + v + ";\n"
                         : "a = a <= " + v + " ? a : " + v + ";\n";
    case PCY_ARRAY_REDUCE_MAX:
      return is_float(t) ? "a = (a >= " + v + " || " + is_nan("a") + ") ? a : " + v + ";\n"
                         : "a = a >= " + v + " ? a : " + v + ";\n";
    case PCY_ARRAY_REDUCE_ARGMIN:
    case PCY_ARRAY_REDUCE_ARGMAX: {
      const char* cmp = kind == PCY_ARRAY_REDUCE_ARGMIN ? " < " : " > ";
      return "if (i < 0 || (" + not_nan("a") + " && (" + v + cmp + "a || " + is_nan(v) +
             "))) { a = " + v + "; i = pos; }\n";
    }
    case PCY_ARRAY_REDUCE_ALL:
      return "a = " + cv(glsl ? "uint8_t" : "u8", "(a & " + v + ")") + ";\n";
    case PCY_ARRAY_REDUCE_ANY:
      return "a = " + cv(glsl ? "uint8_t" : "u8", "(a | " + v + ")") + ";\n";
    case PCY_ARRAY_REDUCE_LOGSUMEXP:
      return "if (" + is_nan(v) + " || " + v + " > a) a = " + v + ";\n";
    default: return "";
    }
  }
  std::string add1(const std::string& v) const {
    if (kind == PCY_ARRAY_REDUCE_LOGSUMEXP) return "b = b + " + fn("exp") + "(" + v + " - c);\n";
    return "{ " + let() + "d_ = " + v + " - c; b = b + d_ * d_; }\n";
  }
  // Combines (a2, i2) into (a, i) (pass 0) — the tree's step.
  std::string combine0() const {
    switch (kind) {
    case PCY_ARRAY_REDUCE_ARGMIN:
    case PCY_ARRAY_REDUCE_ARGMAX: {
      const char* cmp = kind == PCY_ARRAY_REDUCE_ARGMIN ? "<" : ">";
      return fmt("if (i2 >= 0 && (i < 0 || (%s ? (%s || i2 < i) : (%s && (a2 %s a || "
                 "(a2 == a && i2 < i)))))) { a = a2; i = i2; }\n",
                 is_nan("a2").c_str(), not_nan("a").c_str(), not_nan("a").c_str(), cmp);
    }
    case PCY_ARRAY_REDUCE_NORM2: return "a = a + a2;\n"; // partial sums of squares
    default: return add0("a2");
    }
  }
  // The accumulators' declarations (a work-item's, per output).
  std::string declare() const {
    const std::string Ts = T(), z = cv(Ts, "0");
    return var() + "a = " + init_a() + ", b = " + z + ", c = " + z + ", K = " + z + ";\n" + I() +
           " i = -1, cn = 0;\nint flag = -1;\n" +
           (welford() ? var() + "Kb = " + z + ", s1 = " + z + ", s2 = " + z + ";\nint bn = 0;\n"
                      : std::string());
  }
  // LOGSUMEXP between its passes: the centre c (and flag: -2 NaN, -3 +inf, -4 -inf) from a.
  std::string between() const {
    if (kind != PCY_ARRAY_REDUCE_LOGSUMEXP) return "";
    return "flag = " + is_nan("a") + " ? -2 : " + is_inf("a", false) +
           " ? -3 : " + is_inf("a", true) + " ? -4 : -1;\nc = flag == -1 ? a : " + cv(T(), "0") +
           ";\n";
  }
  // The output's value from (a, b, i, c, flag); n_red the reduced count, dof_ok whether
  // N - correction > 0 (VAR, STD: then b / dof).
  std::string result(const std::string& n_red, const std::string& dof_ok) const {
    switch (kind) {
    case PCY_ARRAY_REDUCE_ARGMIN:
    case PCY_ARRAY_REDUCE_ARGMAX: return glsl ? "int64_t(i)" : "i";
    case PCY_ARRAY_REDUCE_MEAN: return n_red + " > 0 ? a / " + cv(T(), n_red) + " : " + nan();
    case PCY_ARRAY_REDUCE_VAR: return dof_ok + " ? b / dof : " + nan();
    case PCY_ARRAY_REDUCE_STD: return dof_ok + " ? " + fn("sqrt") + "(b / dof) : " + nan();
    case PCY_ARRAY_REDUCE_LOGSUMEXP:
      return "flag == -2 ? " + nan() + " : flag == -3 ? " + inf(false) + " : (flag == -4 || " +
             n_red + " == 0) ? " + inf(true) + " : c + " + fn("log") + "(b)";
    case PCY_ARRAY_REDUCE_NORM2: return fn("sqrt") + "(a)";
    default: return "a";
    }
  }
  // The tree over a work-group's cs slices of cw lanes (t = lane + slice cw): var (a or b, with
  // i where with_index; VAR/STD: (cn, a, b)) of slice 0 of each lane after it, in a fixed order.
  // Shared arrays sa, si, sb; `barrier` the dialect's work-group barrier statement.
  std::string tree(const char* v, bool with_index, const std::string& barrier) const {
    if (welford()) { // (cn, a, b) in (si, sa, sb)
      return "sa[t] = a; sb[t] = b; si[t] = cn;\n" + barrier +
             "\nfor (int h = cs / 2; h > 0; h >>= 1) {\n  if (slice < h) {\n    " +
             merge_welford("si[t + h * cw]", "sa[t + h * cw]", "sb[t + h * cw]") +
             "    sa[t] = a; sb[t] = b; si[t] = cn;\n  }\n  " + barrier +
             "\n}\na = sa[lane]; b = sb[lane]; cn = si[lane];\n" + barrier + "\n";
    }
    std::string x = fmt("sa[t] = %s;\n", v);
    if (with_index) x += "si[t] = i;\n";
    x += barrier + "\nfor (int h = cs / 2; h > 0; h >>= 1) {\n  if (slice < h) {\n";
    if (with_index)
      x += "    " + let() + "a2 = sa[t + h * cw]; const " + I() + " i2 = si[t + h * cw];\n    " +
           combine0() + "    sa[t] = a; si[t] = i;\n";
    else if (std::string(v) == "a")
      x += "    " + let() + "a2 = sa[t + h * cw];\n    " + combine0() + "    sa[t] = a;\n";
    else
      x += "    b = b + sa[t + h * cw];\n    sa[t] = b;\n";
    x += "  }\n  " + barrier + "\n}\n";
    x += fmt("%s = sa[lane];\n", v);
    if (with_index) x += "i = si[lane];\n";
    x += barrier + "\n";
    return x;
  }
};
// A scan's running value (sum or product of value dtype t): its declaration and fold, in C or
// (with `glsl`) in array_glsl.hpp's GLSL, the same operations.
struct scanner {
  int t;
  bool prod;
  bool glsl = false;
  std::string T() const { return glsl ? gl_type(t) : ctype(t); }
  // `name` declared at the identity
  std::string start(const char* name) const {
    if (glsl)
      return fmt("%s%s %s = %s(%d);\n", is_float(t) ? "precise " : "", T().c_str(), name,
                 T().c_str(), prod ? 1 : 0);
    return fmt("%s %s = (%s)%d;\n", T().c_str(), name, T().c_str(), prod ? 1 : 0);
  }
  // acc = acc + x (or * x); integers wrap
  std::string fold(const char* acc, const std::string& x) const {
    const char* op = prod ? "*" : "+";
    if (is_float(t)) return fmt("%s = %s %s %s;\n", acc, acc, op, x.c_str());
    if (glsl) return fmt("%s = %s(%s %s %s);\n", acc, T().c_str(), acc, op, x.c_str());
    return fmt("%s = (%s)(U(%s) %s U(%s));\n", acc, T().c_str(), acc, op, x.c_str());
  }
};

// A sort's order and its bitonic compare-exchange (pcy_sort_step's body), in C or (with `glsl`)
// in array_glsl.hpp's GLSL, the same comparisons. `wk` and `wi` prefix the workspace's key and
// position indices (their offsets).
struct sorter {
  int t;
  bool desc;
  bool glsl = false;
  std::string is_nan(const std::string& x) const {
    return glsl ? fmt("pcy_isnan_%s(%s)", tname(t), x.c_str()) : x + " != " + x;
  }
  // x before y in the key order: NaN after every number, equal to NaN; -0 == +0
  std::string before(const std::string& x, const std::string& y) const {
    if (is_float(t))
      return glsl ? "(" + is_nan(y) + " ? !" + is_nan(x) + " : " + x + " < " + y + ")"
                  : "(" + y + " != " + y + " ? " + x + " == " + x + " : " + x + " < " + y + ")";
    return "(" + x + " < " + y + ")";
  }
  std::string key_before(const std::string& x, const std::string& y) const {
    return desc ? before(y, x) : before(x, y);
  }
  // Pair (a, b), b = a's partner (i ^ sj) in the row: swapped where the pass's direction
  // (ascending where (i & sk) == 0) disagrees; ties broken by position, padding (-1) last.
  std::string exchange(const std::string& wk, const std::string& wi) const {
    const std::string T = glsl ? gl_type(t) : ctype(t), I = glsl ? "int" : "i64";
    const std::string K = glsl && is_float(t) ? "precise " + T + " " : "const " + T + " ";
    std::string x = "  const " + I + " ia = wi[" + wi + "a], ib = wi[" + wi + "b];\n";
    x += "  " + K + "ka = wk[" + wk + "a], kb = wk[" + wk + "b];\n";
    x += "  int lt; /* b before a */\n";
    x += glsl ? "  if (ia < 0 || ib < 0) lt = int(ia < 0 && ib >= 0);\n"
              : "  if (ia < 0 || ib < 0) lt = ia < 0 && ib >= 0;\n";
    x += "  else if " + key_before("kb", "ka") + " lt = 1;\n";
    x += "  else if " + key_before("ka", "kb") + " lt = 0;\n";
    x += glsl ? "  else lt = int(ib < ia);\n" : "  else lt = ib < ia;\n";
    x += "  if (((i & sk) == 0) == (lt != 0)) { wk[" + wk + "a] = kb; wk[" + wk + "b] = ka; wi[" +
         wi + "a] = ib; wi[" + wi + "b] = ia; }\n";
    return x;
  }
};

} // namespace detail

// The whole source of the kernels for `s` in dialect `dl`. `random_header`: the text of
// pcy_array_random.h (random only); `wg`: the work-group size of the row reductions (a power of
// two).
inline std::string source(const spec& s, dialect dl, std::string_view random_header, int wg) {
  using namespace detail;
  const bool f64 = s.uses_f64();
  std::string src = prelude(dl, f64, wg);
  if (s.what == job::random) {
    src += "\n/* ---- pcy_array_random.h ---- */\n";
    src += random_header;
    src += "\n";
  }
  src += helpers(dl, f64);
  const layout l = layout_of(s);
  const int words = l.words(s.what) + s.immediates(), sm = l.small(s.what);
  src += fmt("typedef struct { i64 w[%d]; } pcy_meta;\n", words);
  const int R = s.rank;

  if (s.what == job::eval) {
    src += "KERNEL void pcy_eval(" + params(s) + ") {\n";
    src += fmt("  for (i64 lin = GID; lin < m.w[%d]; lin += GSIZE) {\n", l.extra(0));
    src += idx_decl(R) + unravel(0, R, "lin", sm) + body(dl, s);
    std::array<bool, max_operands> out{};
    for (int o = 0; o < s.outputs; ++o)
      out[static_cast<size_t>(o)] = true;
    const std::array<bool, max_operands> read = read_operands(s);
    for (int o = 0; o < s.outputs; ++o)
      out[static_cast<size_t>(o)] = !read[static_cast<size_t>(o)];
    src += offsets(s, out); // the outputs' offsets the body did not define
    // Every value is in a register before the first store (outputs may be inputs in place).
    for (int k = 0; k < s.count; ++k)
      if (s.code[static_cast<size_t>(k)].op == PCY_ARRAY_OP_STORE)
        src += fmt("o%lld[q%lld] = ", static_cast<long long>(s.code[static_cast<size_t>(k)].a),
                   static_cast<long long>(s.code[static_cast<size_t>(k)].a)) +
               reg(k) + ";\n";
    src += "o0[q0] = " + reg(s.count - 1) + ";\n  }\n}\n";
    return src;
  }

  if (s.what == job::scan) {
    const int t = s.value_dtype();
    const char* T = ctype(t);
    const bool prod = s.kind == PCY_ARRAY_SCAN_PROD;
    const int kept = R - s.reduced;
    const std::string v = reg(s.count - 1);
    const scanner sc{t, prod};
    auto fold = [&](const char* acc, const std::string& x) { return sc.fold(acc, x); };
    std::array<bool, max_operands> out{};
    out[0] = true;
    const std::string len = s.reduced > 0 ? fmt("m.w[%d]", R - 1) : std::string("1");
    const std::string set_j = s.reduced > 0 ? fmt("idx%d = j;\n", R - 1) : std::string();
    // One work-item per row, in order (the native bundle's bits).
    src += "KERNEL void pcy_scan(" + params(s) + ") {\n";
    src += "  const i64 len = " + len + ";\n";
    src += fmt("  for (i64 row = GID; row < m.w[%d]; row += GSIZE) {\n", l.extra(0));
    src += idx_decl(R) + unravel(0, kept, "row", sm);
    src += sc.start("run");
    src += "for (i64 j = 0; j < len; ++j) {\n" + set_j + body(dl, s) + fold("run", v);
    src += offsets(s, out) + "o0[q0] = run;\n}\n  }\n}\n";
    // Blocked (few long rows): B blocks of blen per row (extras 1, 2), one work-item each:
    // pcy_scan_part folds each block into wa; pcy_scan_carry turns a row's block totals into
    // the carries before each block, in order; pcy_scan_fin rescans each block from its carry.
    // Fixed blocks: the same bits run to run (floating sums associate differently from native).
    const std::string B = fmt("m.w[%d]", l.extra(1)), blen = fmt("m.w[%d]", l.extra(2)),
                      rows = fmt("m.w[%d]", l.extra(0));
    const std::string ws = ", GLOBAL " + std::string(T) + "* wa";
    const std::string head = "  const i64 len = " + len + ";\n  for (i64 item = GID; item < " +
                             rows + " * " + B + "; item += GSIZE) {\n  const i64 row = item / " +
                             B + ", blk = item % " + B + ";\n  const i64 j0 = blk * " + blen +
                             ";\n  i64 j1 = j0 + " + blen + ";\n  if (j1 > len) j1 = len;\n";
    src += "KERNEL void pcy_scan_part(" + params(s) + ws + ") {\n" + head;
    src += idx_decl(R) + unravel(0, kept, "row", sm);
    src += sc.start("run");
    src += "for (i64 j = j0; j < j1; ++j) {\n" + set_j + body(dl, s) + fold("run", v) + "}\n";
    src += "(void)o0;\nwa[item] = run;\n  }\n}\n";
    src += "KERNEL void pcy_scan_carry(" + params(s) + ws + ") {\n";
    src += "  for (i64 row = GID; row < " + rows + "; row += GSIZE) {\n";
    src += "  " + sc.start("run");
    src += "  for (i64 blk = 0; blk < " + B + "; ++blk) {\n    const " + T + " x = wa[row * " + B +
           " + blk];\n    wa[row * " + B + " + blk] = run;\n    " + fold("run", "x") + "  }\n";
    src += "  (void)o0;\n  }\n}\n";
    src += "KERNEL void pcy_scan_fin(" + params(s) + ws + ") {\n" + head;
    src += idx_decl(R) + unravel(0, kept, "row", sm);
    src += std::string(T) + " run = wa[item];\n";
    src += "for (i64 j = j0; j < j1; ++j) {\n" + set_j + body(dl, s) + fold("run", v);
    src += offsets(s, out) + "o0[q0] = run;\n}\n  }\n}\n";
    return src;
  }

  if (s.what == job::sort) {
    const int t = s.value_dtype();
    const std::string T = ctype(t);
    const bool argsort = (s.kind & 1) == PCY_ARRAY_SORT_ARGSORT, desc = (s.kind & 2) != 0;
    const int kept = R - s.reduced;
    const std::string v = reg(s.count - 1);
    std::array<bool, max_operands> out{};
    out[0] = true;
    const std::string len = s.reduced > 0 ? fmt("m.w[%d]", R - 1) : std::string("1");
    const std::string set_j = s.reduced > 0 ? fmt("idx%d = j;\n", R - 1) : std::string();
    const std::string rows = fmt("m.w[%d]", l.extra(0)), P = fmt("m.w[%d]", l.extra(1)),
                      W = fmt("m.w[%d]", l.extra(2));
    const std::string ws = ", GLOBAL " + T + "* wk, GLOBAL i64* wi, const i64 sk, const i64 sj";
    const sorter so{t, desc};
    src += "KERNEL void pcy_sort_init(" + params(s) + ws + ") {\n";
    src += "  const i64 len = " + len + ";\n";
    src += "  for (i64 item = GID; item < " + rows + " * " + P + "; item += GSIZE) {\n";
    src += "  const i64 row = item / " + P + ", j = item % " + P + ";\n";
    src += "  if (j >= len) { wi[" + W + " + item] = -1; wk[item] = (" + T + ")0; continue; }\n";
    src += idx_decl(R) + unravel(0, kept, "row", sm) + set_j + body(dl, s);
    src +=
        "(void)o0; (void)sk; (void)sj;\nwk[item] = " + v + ";\nwi[" + W + " + item] = j;\n  }\n}\n";
    // One pass: pairs (i, i ^ sj) of each row, ascending where (i & sk) == 0.
    src += "KERNEL void pcy_sort_step(" + params(s) + ws + ") {\n";
    src += "  for (i64 item = GID; item < " + rows + " * " + P + "; item += GSIZE) {\n";
    src += "  const i64 i = item % " + P + ", l = i ^ sj;\n  if (l <= i) continue;\n";
    src += "  const i64 a = item, b = item - i + l;\n";
    src += so.exchange("", W + " + ");
    src += "  (void)o0;\n  }\n}\n";
    src += "KERNEL void pcy_sort_out(" + params(s) + ws + ") {\n";
    src += "  const i64 len = " + len + ";\n";
    src += "  for (i64 item = GID; item < " + rows + " * len; item += GSIZE) {\n";
    src += "  const i64 row = item / len, j = item % len;\n";
    src += idx_decl(R) + unravel(0, kept, "row", sm) + set_j;
    src += "(void)sk; (void)sj;\n" + offsets(s, out);
    src += argsort ? "o0[q0] = wi[" + W + " + row * " + P + " + j];\n"
                   : "o0[q0] = wk[row * " + P + " + j];\n";
    src += "  }\n}\n";
    return src;
  }

  if (s.what == job::random) {
    const int d = s.dtypes[0];
    const char* T = ctype(d);
    const char* P = d == PCY_DTYPE_F64 ? "double" : "float";
    std::array<bool, max_operands> out{};
    out[0] = true;
    auto from_f32 = [&](const std::string& x) {
      if (d == PCY_DTYPE_F32) return x;
      return cast_expr(dl, x, PCY_DTYPE_F32, d);
    };
    src += fmt(
        "KERNEL void pcy_random(GLOBAL %s* o0, const pcy_meta m, const %s lo, const %s span) {\n",
        T, P, P);
    if (s.kind == PCY_ARRAY_RANDOM_PERMUTATION) { // one element per work-item, its own network
      src += fmt("  for (i64 e = GID; e < m.w[%d]; e += GSIZE) {\n", l.extra(0));
      src += idx_decl(R) + unravel(0, R, "e", sm) + offsets(s, out);
      src += fmt("const i64 y_ = (i64)pcy_rng_permute((u64)m.w[%d], (u64)m.w[%d], (u64)m.w[%d], "
                 "(u64)e);\n",
                 l.extra(1), l.extra(2), l.extra(0));
      src += "o0[q0] = " + cast_expr(dl, "y_", PCY_DTYPE_I64, d) + ";\n  }\n}\n";
      return src;
    }
    // One counter per work-item: its four words give PER consecutive elements (pcy_array.h).
    const int per = pcy_array_random_per_counter(s.kind, d);
    src += fmt("  const i64 n_ = m.w[%d];\n", l.extra(0));
    src += fmt("  for (i64 c = GID; c < (n_ + %d) / %d; c += GSIZE) {\n", per - 1, per);
    src += fmt("u32 w[4];\npcy_rng_words((u64)m.w[%d], (u64)m.w[%d], (u64)c, w);\n", l.extra(1),
               l.extra(2));
    std::array<std::string, 4> val; // each lane's value in the output dtype
    switch (s.kind) {
    case PCY_ARRAY_RANDOM_UNIFORM:
    case PCY_ARRAY_RANDOM_NORMAL: {
      const bool normal = s.kind == PCY_ARRAY_RANDOM_NORMAL;
      if (d == PCY_DTYPE_F64) {
        if (normal)
          src += "const double r_ = pcy_rng_radius_f64(w[0], w[1]);\n"
                 "double c_, s_;\n"
                 "pcy_rng_sincos2pi_f64((u64)(w[2] >> 11) << 32 | (u64)w[3], &c_, &s_);\n"
                 "const double y0_ = lo + span * (r_ * c_);\n"
                 "const double y1_ = lo + span * (r_ * s_);\n";
        else
          src += "const double y0_ = lo + span * pcy_rng_uniform_f64(w[0], w[1]);\n"
                 "const double y1_ = lo + span * pcy_rng_uniform_f64(w[2], w[3]);\n";
        val[0] = "y0_";
        val[1] = "y1_";
      } else {
        if (normal)
          src += "const float ra_ = pcy_rng_radius_f32(w[0]), rb_ = pcy_rng_radius_f32(w[2]);\n"
                 "float ca_, sa_, cb_, sb_;\n"
                 "pcy_rng_sincos2pi_f32(w[1] >> 8, &ca_, &sa_);\n"
                 "pcy_rng_sincos2pi_f32(w[3] >> 8, &cb_, &sb_);\n"
                 "const float y0_ = lo + span * (ra_ * ca_);\n"
                 "const float y1_ = lo + span * (ra_ * sa_);\n"
                 "const float y2_ = lo + span * (rb_ * cb_);\n"
                 "const float y3_ = lo + span * (rb_ * sb_);\n";
        else
          for (int k = 0; k < 4; ++k)
            src += fmt("const float y%d_ = lo + span * pcy_rng_uniform_f32(w[%d]);\n", k, k);
        for (int k = 0; k < 4; ++k)
          val[static_cast<size_t>(k)] = from_f32(fmt("y%d_", k));
      }
      break;
    }
    case PCY_ARRAY_RANDOM_BERNOULLI:
      for (int k = 0; k < 4; ++k) {
        src +=
            fmt("const u8 y%d_ = (u8)pcy_rng_bernoulli(w[%d], (u64)m.w[%d]);\n", k, k, l.extra(3));
        val[static_cast<size_t>(k)] = cast_expr(dl, fmt("y%d_", k), PCY_DTYPE_BOOL, d);
      }
      break;
    case PCY_ARRAY_RANDOM_RANDINT:
      for (int k = 0; k < 2; ++k) {
        src += fmt("const i64 y%d_ = (i64)pcy_rng_randint(w[%d], w[%d], m.w[%d], (u64)m.w[%d]);\n",
                   k, 2 * k, 2 * k + 1, l.extra(4), l.extra(5));
        val[static_cast<size_t>(k)] = cast_expr(dl, fmt("y%d_", k), PCY_DTYPE_I64, d);
      }
      break;
    default: // BITS
      for (int k = 0; k < 2; ++k) {
        src += fmt("const i64 y%d_ = (i64)((u64)w[%d] << 32 | (u64)w[%d]);\n", k, 2 * k + 1, 2 * k);
        val[static_cast<size_t>(k)] = cast_expr(dl, fmt("y%d_", k), PCY_DTYPE_I64, d);
      }
      break;
    }
    if (s.dense) { // neighbours: one vector store where aligned (pcy_meta's offset 0 here)
      const int bytes = per * dtype_bytes(d);
      src += fmt("{ const i64 e0 = c * %d;\nGLOBAL %s* p_ = o0 + m.w[%d] + e0;\n", per, T,
                 l.offset(0));
      if (dl == dialect::opencl) {
        src += fmt("if (e0 + %d <= n_) { %s%d v_ = (%s%d)(", per, vtype(d), per, vtype(d), per);
        for (int k = 0; k < per; ++k)
          src += (k ? ", " : "") + val[static_cast<size_t>(k)];
        src += fmt("); vstore%d(v_, 0, (GLOBAL %s*)p_); }\n", per, vtype(d));
      } else {
        src += fmt("struct __align__(%d) v_t { %s v[%d]; };\n", bytes, T, per);
        src += fmt("if (e0 + %d <= n_ && (((u64)p_) & %dULL) == 0) { v_t v_;\n", per, bytes - 1);
        for (int k = 0; k < per; ++k)
          src += fmt("v_.v[%d] = ", k) + val[static_cast<size_t>(k)] + ";\n";
        src += "*(v_t*)p_ = v_; }\n";
      }
      src += "else {\n";
      for (int k = 0; k < per; ++k)
        src += fmt("if (e0 + %d < n_) p_[%d] = ", k, k) + val[static_cast<size_t>(k)] + ";\n";
      src += "} }\n  }\n}\n";
      return src;
    }
    for (int k = 0; k < per; ++k) {
      src += fmt("{ const i64 e = c * %d + %d;\n", per, k);
      if (k > 0) src += "if (e < n_) {\n";
      src += idx_decl(R) + unravel(0, R, "e", sm) + offsets(s, out);
      src += "o0[q0] = " + val[static_cast<size_t>(k)] + ";\n";
      src += k > 0 ? "} }\n" : "}\n";
    }
    src += "  }\n}\n";
    return src;
  }

  // reduce
  const int t = s.value_dtype();
  const reducer rd{dl, s.kind, t};
  const std::string T = ctype(t);
  const int kept = R - s.reduced;
  const std::string v = reg(s.count - 1);
  const std::string n_out = fmt("m.w[%d]", l.extra(0)), n_red = fmt("m.w[%d]", l.extra(1)),
                    dof_ok = fmt("m.w[%d]", l.extra(2));
  std::array<bool, max_operands> out{};
  out[0] = true;
  const std::string fin = "o0[q0] = " + rd.result(n_red, dof_ok) + ";\n";
  const std::string between = rd.between(), decl = rd.declare();
  // VAR/STD: K, the value at the output's reduced position 0 (every work-item of an output the
  // same), the shift of the Welford updates.
  const std::string shift =
      rd.welford() ? "if (" + n_red + " > 0) {\n" +
                         (s.reduced > 0 ? unravel(kept, R, "(i64)0", sm) : std::string()) +
                         body(dl, s) + "K = " + v + ";\n}\n"
                   : std::string();
  const std::string dof_param = ", const " + T + " dof";

  // Column kernel: one work-item per output, the reduced index in order.
  src += "KERNEL void pcy_reduce_col(" + params(s) + dof_param + ") {\n";
  src += "  for (i64 o = GID; o < " + n_out + "; o += GSIZE) {\n";
  src += idx_decl(R) + unravel(0, kept, "o", sm) + decl + shift;
  for (int pass = 0; pass < (rd.two_pass() ? 2 : 1); ++pass) {
    if (pass == 1) src += between + "if (flag == -1) ";
    if (pass == 0 && rd.welford()) {
      src += rd.welford_loop("0", n_red, "1",
                             (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v);
      continue;
    }
    if (pass == 0) {
      src += rd.batched_loop("0", n_red, "1",
                             (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v);
      continue;
    }
    src += "for (i64 pos = 0; pos < " + n_red + "; ++pos) {\n";
    if (s.reduced > 0) src += unravel(kept, R, "pos", sm);
    src += body(dl, s) + rd.add1(v) + "}\n";
  }
  src += "(void)dof; (void)flag; (void)c; (void)i; (void)b; (void)cn; (void)K;\n";
  if (s.reduced > 0)
    for (int d = kept; d < R; ++d)
      src += fmt("idx%d = 0;\n", d);
  src += offsets(s, out) + fin + "  }\n}\n";

  // Tiled kernel: a work-group of PCY_WG work-items = cw outputs (lanes) x cs slices, cs =
  // m.w[extra 3] (a power of two dividing PCY_WG): slice k folds the reduced positions k, k + cs,
  // ... in order, then a tree over the slices in shared memory in a fixed order (the same bits run
  // to run). cs = PCY_WG: one work-group per output (reduced dimensions innermost); a small cs:
  // cw neighbouring outputs per group (reduced dimensions outermost: coalesced).
  src += "KERNEL void pcy_reduce_row(" + params(s) + dof_param + ") {\n";
  src += "  SHARED " + T + " sa[PCY_WG];\n";
  if (rd.arg() || rd.welford()) src += "  SHARED i64 si[PCY_WG];\n";
  if (rd.welford()) src += "  SHARED " + T + " sb[PCY_WG];\n";
  src += "  const int t = LID;\n";
  src += fmt("  const int cs = (int)m.w[%d], cw = PCY_WG / cs;\n", l.extra(3));
  src += "  const int lane = t % cw, slice = t / cw;\n";
  src += "  for (i64 base = GRP * cw; base < " + n_out + "; base += NGRP * cw) {\n";
  src += "  const i64 o = base + lane;\n  const int live = o < " + n_out + ";\n";
  src += idx_decl(R) + "if (live) " + unravel(0, kept, "o", sm) + decl;
  if (rd.welford()) src += "if (live) {\n" + shift + "}\n";
  auto tree = [&](const char* var, bool with_index) {
    return rd.tree(var, with_index, "BARRIER;");
  };
  for (int pass = 0; pass < (rd.two_pass() ? 2 : 1); ++pass) {
    // every work-item reaches every barrier: the loops are guarded, the trees are not
    if (pass == 1) src += between;
    if (pass == 0 && rd.welford()) {
      src += "if (live) {\n" +
             rd.welford_loop("slice", n_red, "cs",
                             (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v) +
             "}\n";
    } else if (pass == 0) {
      src += "if (live) {\n" +
             rd.batched_loop("slice", n_red, "cs",
                             (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v) +
             "}\n";
    } else {
      src += "if (live && flag == -1) for (i64 pos = slice; pos < " + n_red + "; pos += cs) {\n";
      if (s.reduced > 0) src += unravel(kept, R, "pos", sm);
      src += body(dl, s) + rd.add1(v) + "}\n";
    }
    src += tree(pass == 0 ? "a" : "b", pass == 0 && rd.arg());
  }
  src += "(void)dof; (void)flag; (void)c; (void)i; (void)b; (void)cn; (void)K;\n";
  if (s.reduced > 0)
    for (int d = kept; d < R; ++d)
      src += fmt("idx%d = 0;\n", d);
  src += "if (live && slice == 0) {\n" + offsets(s, out) + fin + "}\n  }\n}\n";
  if (rd.two_pass()) return src;

  // Split reductions (one-pass kinds; few outputs, long reductions): pcy_reduce_part gives each
  // of G fixed chunks of an output's reduced positions a work-group (the tree above), writing a
  // partial (a, i) to the workspace (wa; wi from element m.w[extra 6]); pcy_reduce_fin then
  // combines each output's G partials in chunk order. G and the chunk (extras 4, 5) depend on
  // the shape and the device only: the same bits run to run.
  const std::string ws_param = ", GLOBAL " + T + "* wa, GLOBAL i64* wi";
  const std::string G = fmt("m.w[%d]", l.extra(4)), chunk = fmt("m.w[%d]", l.extra(5)),
                    wi_at = fmt("m.w[%d]", l.extra(6));
  src += "KERNEL void pcy_reduce_part(" + params(s) + dof_param + ws_param + ") {\n";
  src += "  SHARED " + T + " sa[PCY_WG];\n";
  if (rd.arg() || rd.welford()) src += "  SHARED i64 si[PCY_WG];\n";
  if (rd.welford()) src += "  SHARED " + T + " sb[PCY_WG];\n";
  src += "  const int t = LID, cs = PCY_WG, cw = 1, lane = 0, slice = t;\n";
  src += "  for (i64 grp = GRP; grp < " + n_out + " * " + G + "; grp += NGRP) {\n";
  src += "  const i64 o = grp / " + G + ", g = grp % " + G + ";\n";
  src += "  const i64 start = g * " + chunk + ";\n  i64 end = start + " + chunk +
         ";\n  if (end > " + n_red + ") end = " + n_red + ";\n";
  src += idx_decl(R) + unravel(0, kept, "o", sm) + decl + shift;
  if (rd.welford()) {
    src += rd.welford_loop("start + t", "end", "PCY_WG",
                           (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v);
  } else {
    src += rd.batched_loop("start + t", "end", "PCY_WG",
                           (s.reduced > 0 ? unravel(kept, R, "pos", sm) : "") + body(dl, s), v);
  }
  src += tree("a", rd.arg());
  src += "(void)dof; (void)flag; (void)c; (void)i; (void)b; (void)cw; (void)lane; (void)wi; "
         "(void)cn; (void)K;\n";
  // VAR/STD: the part's mean in wa[grp], its deviations in wa[parts + grp] (its count is the
  // chunk's length)
  src +=
      "if (t == 0) { wa[grp] = a;" + std::string(rd.arg() ? " wi[" + wi_at + " + grp] = i;" : "") +
      std::string(rd.welford() ? " wa[" + n_out + " * " + G + " + grp] = b;" : "") + " }\n  }\n}\n";
  src += "KERNEL void pcy_reduce_fin(" + params(s) + dof_param + ws_param + ") {\n";
  src += "  for (i64 o = GID; o < " + n_out + "; o += GSIZE) {\n";
  src += idx_decl(R) + unravel(0, kept, "o", sm) + decl;
  src += "for (i64 g = 0; g < " + G + "; ++g) {\n  const " + T + " a2 = wa[o * " + G + " + g];\n";
  if (rd.arg()) src += "  const i64 i2 = wi[" + wi_at + " + o * " + G + " + g];\n";
  if (rd.welford()) {
    src += "  i64 n2 = " + n_red + " - g * " + chunk + ";\n  if (n2 > " + chunk +
           ") n2 = " + chunk + ";\n";
    src += "  " +
           rd.merge_welford("n2", "a2", "wa[" + n_out + " * " + G + " + o * " + G + " + g]") +
           "}\n";
  } else {
    src += "  " + rd.combine0() + "}\n";
  }
  src += "(void)dof; (void)flag; (void)c; (void)i; (void)b; (void)wi; (void)cn; (void)K;\n";
  if (s.reduced > 0)
    for (int d = kept; d < R; ++d)
      src += fmt("idx%d = 0;\n", d);
  src += offsets(s, out) + fin + "  }\n}\n";
  return src;
}

} // namespace parenchyma::array_bundle::codegen
