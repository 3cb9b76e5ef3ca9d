// Array bundles, shared part: the host side of the GPU bundles (array_opencl, array_cuda). An op
// decodes and checks its program (array_program.hpp), collapses it, looks its kernel up in the
// context's map by codegen::spec::key() — building it through the framework's program build on
// first use (array_codegen.hpp writes the source; the framework caches binaries on disk) — and
// enqueues it on the call's queue with the shapes, strides and offsets as the pcy_meta argument.
// Nothing waits. The two bundles differ only in the dialect, the build options and how a
// tensor reaches a kernel (an OpenCL buffer; a CUDA device address by value).
#pragma once

#include "array_codegen.hpp"
#include "array_program.hpp"

#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace parenchyma::array_bundle::gpu {

using codegen::dialect;
using codegen::job;

struct built_kernels {
  pcy_kernel k0 = nullptr; // eval, scan, random, sort (keys in); reduce: the column kernel
  pcy_kernel k1 = nullptr; // reduce: the tiled kernel
  pcy_kernel k2 = nullptr; // reduce (one-pass kinds): the split reduction's parts
  pcy_kernel k3 = nullptr; // ... and its final combination
};

// The last eval launch of a context, to repeat it without decoding: a steady loop sends the same
// program over tensors of the same views call after call (the same tensors, or new results).
// Its key is every input the decoding read (call_key: the op, the program's words, each operand's
// dtype, byte offset and shape, and which operands share memory), compared byte for byte; equal
// inputs passed every check before, so the same launch (kernel, meta words, grid) is right again
// with the call's own buffers bound. One per context: the host serialises a context's ops.
struct eval_memo {
  call_key key;
  const built_kernels* kernels = nullptr; // node-stable in the context's map
  std::vector<int64_t> meta;
  uint64_t elements = 0;

  bool matches(const pcy_op_schema& s, const sdk::op_args& a, uint32_t prog, uint32_t first,
               int n) const noexcept {
    return key.matches(s, a, prog, first, n);
  }
  void store(const pcy_op_schema& s, const sdk::op_args& a, uint32_t prog, uint32_t first, int n,
             const built_kernels* built, const std::vector<int64_t>& m, uint64_t elems) {
    key.op = nullptr;
    kernels = built;
    meta.assign(m.begin(), m.end());
    elements = elems;
    key.store(s, a, prog, first, n);
  }
};

struct gpu_context : sdk::device_context {
  explicit gpu_context(const pcy_bundle_context_args& a) : device_context(a) {}
  dialect dl = dialect::opencl;
  const char* bundle = "";
  const char* random_header = "";
  bool fp64 = true;
  bool cpu = false; // a CPU device (OpenCL on the host)
  // Slices per output of the tiled reduce kernel when the reduced dimensions are outermost; 0:
  // the column kernel. Default 8 on GPUs, 0 on CPU devices; PARENCHYMA_ARRAY_OUTER_SLICES (0, 1,
  // 2, 4, ... up to the work-group) sets it (the tests run both kernels on any device).
  int outer_slices = 8;
  // F32 transcendental functions through F64 (nearly always correctly rounded: the host libm's
  // bits) on CPU devices with fp64 (PoCL: cheap there); on GPUs in F32 with the device's own
  // bounds (F64 math made a fused chain with a sin compute-bound on the H100: 0.82 of a copy).
  // PARENCHYMA_ARRAY_F32_VIA_F64=1 or 0 sets it.
  bool f32_via_f64 = true;
  std::string device_name;
  uint32_t wg = 256;            // work-group size of every kernel (a power of two)
  uint64_t max_groups = 4096;   // cap on the groups of a grid-stride launch
  std::string options;          // build options
  std::string fallback_options; // OpenCL: without -cl-fp32-correctly-rounded-divide-sqrt
  bool tried_fallback = false;
  const sdk::logger* log = nullptr;
  std::unordered_map<std::string, built_kernels> kernels;
  eval_memo memo; // the last eval launch (PARENCHYMA_ARRAY_MEMO=0: none)
  bool use_memo = true;

  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !fp64) {
      *reason = no_fp64_reason.c_str();
      return false;
    }
    return true;
  }
  std::string no_fp64_reason;

  // The kernels of s, built on first use.
  const built_kernels& get(const codegen::spec& s) {
    thread_local std::string key; // reused: a warm call allocates nothing
    s.key_into(key);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
    if (!fp64 && s.uses_f64()) sdk::fail(PCY_ERR_UNSUPPORTED, no_fp64_reason);
    const std::string src = codegen::source(s, dl, random_header, static_cast<int>(wg));
    build_failure failed;
    bool hit = false;
    pcy_program prog = build(src.c_str(), options.c_str(), &failed, &hit);
    if (prog == nullptr && !fallback_options.empty() && !tried_fallback) {
      // The device refused the correctly rounded divide/sqrt option: OpenCL 1.2's bounds then
      // (2.5 ulp divide, 3 ulp sqrt in f32; f64 is always correctly rounded).
      tried_fallback = true;
      build_failure again;
      prog = build(src.c_str(), fallback_options.c_str(), &again, &hit);
      if (prog != nullptr) {
        log->info(bundle, ": ", device_name,
                  " has no correctly rounded f32 divide/sqrt; f32 division within 2.5 ulp and "
                  "sqrt within 3 ulp (",
                  failed.message.substr(0, 200), ")");
        options = fallback_options;
      } else {
        failed = again;
      }
    }
    if (prog == nullptr)
      sdk::fail(
          failed.code == PCY_OK ? PCY_ERR_DEVICE : failed.code,
          sdk::str(bundle, ": building a kernel for ", device_name, " failed: ", failed.message));
    log->debug("built an array kernel", hit ? " (from the cache)" : "");
    built_kernels b;
    switch (s.what) {
    case job::eval: b.k0 = kernel(prog, "pcy_eval"); break;
    case job::scan:
      b.k0 = kernel(prog, "pcy_scan");
      b.k1 = kernel(prog, "pcy_scan_part");
      b.k2 = kernel(prog, "pcy_scan_carry");
      b.k3 = kernel(prog, "pcy_scan_fin");
      break;
    case job::random: b.k0 = kernel(prog, "pcy_random"); break;
    case job::sort:
      b.k0 = kernel(prog, "pcy_sort_init");
      b.k1 = kernel(prog, "pcy_sort_step");
      b.k2 = kernel(prog, "pcy_sort_out");
      break;
    case job::reduce:
      b.k0 = kernel(prog, "pcy_reduce_col");
      b.k1 = kernel(prog, "pcy_reduce_row");
      if (s.kind != PCY_ARRAY_REDUCE_LOGSUMEXP) {
        b.k2 = kernel(prog, "pcy_reduce_part");
        b.k3 = kernel(prog, "pcy_reduce_fin");
      }
      break;
    }
    return kernels.emplace(key, b).first->second;
  }

  // Reads PARENCHYMA_ARRAY_OUTER_SLICES and PARENCHYMA_ARRAY_F32_VIA_F64 (see outer_slices,
  // f32_via_f64) after wg, cpu and fp64 are set.
  void configure(const sdk::settings& st) {
    outer_slices = cpu ? 0 : static_cast<int>(std::min<uint32_t>(8, wg));
    f32_via_f64 = fp64 && cpu;
    if (const char* v = st.find("PARENCHYMA_ARRAY_MEMO"); v != nullptr) use_memo = v[0] != '0';
    if (const char* v = st.find("PARENCHYMA_ARRAY_F32_VIA_F64"); v != nullptr)
      f32_via_f64 = fp64 && v[0] == '1';
    if (const char* v = st.find("PARENCHYMA_ARRAY_OUTER_SLICES")) {
      const long n = std::strtol(v, nullptr, 10);
      int cs = 0;
      if (n > 0) {
        cs = 1;
        while (cs * 2 <= n && static_cast<uint32_t>(cs * 2) <= wg)
          cs *= 2;
      }
      outer_slices = cs;
    }
  }

  uint64_t groups_for(uint64_t items) const {
    return std::clamp<uint64_t>((items + wg - 1) / wg, 1, max_groups);
  }
};

// One launch's arguments: the operands, the meta words, one or two trailing scalars.
struct launch_args {
  std::array<uint64_t, max_operands> ptr{}; // CUDA device addresses
  // The meta words: this thread's buffer, reused (one launch is built at a time per thread).
  std::vector<int64_t>& meta = []() -> std::vector<int64_t>& {
    thread_local std::vector<int64_t> w;
    return w;
  }();
  std::array<pcy_kernel_arg, max_operands + 5> args{};
  uint32_t count = 0;

  void operands(const gpu_context& cx, const std::array<const pcy_tensor*, max_operands>& t,
                int n) {
    for (int o = 0; o < n; ++o) {
      const pcy_tensor& x = *t[static_cast<size_t>(o)];
      if (cx.dl == dialect::cuda) {
        ptr[static_cast<size_t>(o)] = reinterpret_cast<uint64_t>(sdk::native_of(*cx.fw, x));
        args[count++] = sdk::val(ptr[static_cast<size_t>(o)]);
      } else {
        args[count++] = sdk::mem(x.memory);
      }
    }
  }
  // The split reduction's workspace, twice (wa and wi): a buffer, or a device address.
  void workspace(const gpu_context& cx, pcy_memory m, void* native, int times = 2) {
    for (int r = 0; r < times; ++r) {
      if (cx.dl == dialect::cuda) {
        ws_ptr = reinterpret_cast<uint64_t>(native);
        args[count++] = {PCY_ARG_SCALAR, nullptr, &ws_ptr, sizeof ws_ptr};
      } else {
        args[count++] = sdk::mem(m);
      }
    }
  }
  uint64_t ws_ptr = 0;
  void add_meta() {
    args[count++] = {PCY_ARG_SCALAR, nullptr, meta.data(), meta.size() * sizeof(int64_t)};
  }
  // A trailing scalar, kept here until the launch (the framework copies it then).
  template <class V> void add(V v) {
    static_assert(sizeof(V) <= sizeof(uint64_t));
    uint64_t& slot = scalars[nscalars++];
    std::memcpy(&slot, &v, sizeof v);
    args[count++] = {PCY_ARG_SCALAR, nullptr, &slot, sizeof(V)};
  }
  std::array<uint64_t, 2> scalars{};
  int nscalars = 0;
};

inline void run(const gpu_context& cx, pcy_queue q, pcy_kernel k, uint64_t groups,
                const launch_args& a) {
  const pcy_kernel_launch_args l =
      sdk::launch_args(q, k, 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1}, a.args.data(), a.count);
  sdk::check(cx.fw->kernel_launch(&l));
}

// A tensor's byte offset in whole elements (kernels address elements).
inline int64_t elem_offset(const pcy_op_schema& s, const pcy_tensor& t, const char* bundle) {
  const uint64_t es = sdk::dtype_size(t.dtype);
  if (t.byte_offset % es != 0)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(s.extension, ".", s.name, ": a tensor starts at byte offset ", t.byte_offset,
                       ", not a multiple of its ", es, "-byte elements; ", bundle,
                       " addresses whole elements"));
  return static_cast<int64_t>(t.byte_offset / es);
}

inline void offsets_of(const pcy_op_schema& s, const program& p, const char* bundle,
                       std::array<int64_t, max_operands>& off,
                       std::array<const pcy_tensor*, max_operands>& t) {
  for (int o = 0; o < p.operands; ++o) {
    t[static_cast<size_t>(o)] = p.ops[static_cast<size_t>(o)].tensor;
    off[static_cast<size_t>(o)] = elem_offset(s, *t[static_cast<size_t>(o)], bundle);
  }
}

// ---- the ops ---------------------------------------------------------------------------------
template <const pcy_op_schema& S> consteval uint32_t at(const char* name) {
  return sdk::arg_index(S, name);
}

// eval_<N> (O = 1) and evalm<O>_<N>: the outputs are operands 0..O-1, the inputs follow.
template <const pcy_op_schema& S, int N, int O = 1>
void op_eval(gpu_context& cx, const sdk::op_args& a) {
  constexpr uint32_t prog_k = sdk::arg_index(S, "program"), out_k = sdk::arg_index(S, "out");
  if (cx.use_memo && cx.memo.matches(S, a, prog_k, out_k, N + O)) { // the last launch again
    const eval_memo& m = cx.memo;
    std::array<const pcy_tensor*, max_operands> t{};
    for (int o = 0; o < N + O; ++o)
      t[static_cast<size_t>(o)] = &a.t(out_k + static_cast<uint32_t>(o));
    launch_args la;
    la.meta.assign(m.meta.begin(), m.meta.end());
    la.operands(cx, t, N + O);
    la.add_meta();
    run(cx, a.queue(), m.kernels->k0, cx.groups_for(m.elements), la);
    return;
  }
  program p;
  decode_eval<S, N, O>(a, p);
  if (p.elements == 0) return;
  const collapsed c = collapse(p);
  codegen::spec s = codegen::make_spec(p, c, job::eval, 0);
  s.f32_via_f64 = cx.f32_via_f64;
  const built_kernels& k = cx.get(s);
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
  offsets_of(S, p, cx.bundle, off, t);
  launch_args la;
  codegen::meta_words_into(la.meta, s, c, off);
  la.meta[static_cast<size_t>(codegen::layout_of(s).extra(0))] = static_cast<int64_t>(p.elements);
  la.operands(cx, t, p.operands);
  la.add_meta();
  run(cx, a.queue(), k.k0, cx.groups_for(p.elements), la);
  if (cx.use_memo) cx.memo.store(S, a, prog_k, out_k, N + O, &k, la.meta, p.elements);
}

template <class T> void add_dof(launch_args& la, double dof) { la.add(static_cast<T>(dof)); }

template <const pcy_op_schema& S, int N> void op_reduce(gpu_context& cx, const sdk::op_args& a) {
  program p;
  const reduce_args ra = decode_reduce<S, N>(a, p);
  const int kd = ra.kind;
  const double corr = ra.correction;
  if (p.kept_elements == 0) return;
  const collapsed c = collapse(p);
  codegen::spec s = codegen::make_spec(p, c, job::reduce, kd);
  s.f32_via_f64 = cx.f32_via_f64;
  const built_kernels& k = cx.get(s);
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
  offsets_of(S, p, cx.bundle, off, t);
  const codegen::reduce_plan rp = codegen::plan_reduce(c, p.kept_elements, k.k2 != nullptr, cx.wg,
                                                       cx.max_groups, cx.outer_slices);
  const uint64_t n_red = rp.n_red;
  const codegen::layout l = codegen::layout_of(s);
  launch_args la;
  codegen::meta_words_into(la.meta, s, c, off);
  const int cs = rp.cs;
  const double dof = static_cast<double>(n_red) - corr;
  codegen::reduce_extras(la.meta, l, rp, dof);
  la.operands(cx, t, p.operands);
  la.add_meta();
  switch (p.result_dtype()) {
  case PCY_DTYPE_F32: add_dof<float>(la, dof); break;
  case PCY_DTYPE_F64: add_dof<double>(la, dof); break;
  case PCY_DTYPE_I8: add_dof<int8_t>(la, 0); break;
  case PCY_DTYPE_I16: add_dof<int16_t>(la, 0); break;
  case PCY_DTYPE_I32: add_dof<int32_t>(la, 0); break;
  case PCY_DTYPE_I64: add_dof<int64_t>(la, 0); break;
  case PCY_DTYPE_U8:
  case PCY_DTYPE_BOOL: add_dof<uint8_t>(la, 0); break;
  default: sdk::fail(PCY_ERR_INTERNAL, sdk::str(cx.bundle, ": reduce of an unchecked dtype"));
  }
  const uint64_t n_out = p.kept_elements, chunks = rp.chunks;
  if (chunks >= 2) {
    const uint64_t parts = n_out * chunks;
    const uint64_t es = sdk::dtype_size(static_cast<pcy_dtype>(p.result_dtype()));
    // VAR/STD keep two values per part in wa (mean, deviations)
    const uint64_t per_part = kd == PCY_ARRAY_REDUCE_VAR || kd == PCY_ARRAY_REDUCE_STD ? 2 : 1;
    const uint64_t wi_at = (per_part * parts * es + 7) / 8; // wi's first element, in i64
    la.meta[static_cast<size_t>(l.extra(6))] = static_cast<int64_t>(wi_at);
    void* native = nullptr;
    const pcy_memory ws = a.workspace((wi_at + parts) * 8, &native);
    la.workspace(cx, ws, native);
    run(cx, a.queue(), k.k2, std::min<uint64_t>(parts, 65535), la);
    run(cx, a.queue(), k.k3, cx.groups_for(n_out), la);
    return;
  }
  if (cs == 0) {
    run(cx, a.queue(), k.k0, cx.groups_for(n_out), la);
  } else {
    const uint64_t per_group = cx.wg / static_cast<uint32_t>(cs);
    run(cx, a.queue(), k.k1, std::min<uint64_t>((n_out + per_group - 1) / per_group, 65535), la);
  }
}

template <const pcy_op_schema& S, int N> void op_scan(gpu_context& cx, const sdk::op_args& a) {
  program p;
  const int64_t kd = decode_scan<S, N>(a, p);
  if (p.elements == 0) return;
  const collapsed c = collapse(p);
  codegen::spec s = codegen::make_spec(p, c, job::scan, static_cast<int>(kd));
  s.f32_via_f64 = cx.f32_via_f64;
  const built_kernels& k = cx.get(s);
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
  offsets_of(S, p, cx.bundle, off, t);
  const codegen::scan_plan sp = codegen::plan_scan(c, cx.wg, cx.max_groups);
  const uint64_t rows = sp.rows, blocks = sp.blocks, blen = sp.blen;
  launch_args la;
  const codegen::layout l = codegen::layout_of(s);
  codegen::meta_words_into(la.meta, s, c, off);
  la.meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(rows);
  la.operands(cx, t, p.operands);
  la.add_meta();
  if (!sp.blocked()) {
    run(cx, a.queue(), k.k0, cx.groups_for(rows), la);
    return;
  }
  la.meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(blocks);
  la.meta[static_cast<size_t>(l.extra(2))] = static_cast<int64_t>(blen);
  void* native = nullptr;
  const pcy_memory ws = a.workspace(rows * blocks * 8, &native);
  la.workspace(cx, ws, native, 1);
  run(cx, a.queue(), k.k1, cx.groups_for(rows * blocks), la);
  run(cx, a.queue(), k.k2, cx.groups_for(rows), la);
  run(cx, a.queue(), k.k3, cx.groups_for(rows * blocks), la);
}

// sort_1: a bitonic network over each row's (key, position) pairs padded to a power of two, one
// launch per compare-exchange pass (array_codegen.hpp); ties broken by position: stable, and the
// same result as the native bundle's stable sort, bit for bit.
inline void op_sort(gpu_context& cx, const sdk::op_args& a) {
  const pcy_op_schema& S = pcy_array_sort_1_schema;
  program p;
  const sort_args sa = decode_sort<pcy_array_sort_1_schema>(a, p);
  if (p.elements == 0) return;
  const collapsed c = collapse(p);
  codegen::spec s = codegen::make_spec(p, c, job::sort, sa.kind + (sa.descending ? 2 : 0));
  s.f32_via_f64 = cx.f32_via_f64;
  const built_kernels& k = cx.get(s);
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
  offsets_of(S, p, cx.bundle, off, t);
  uint64_t rows = 1;
  for (int d = 0; d < c.rank - c.reduced; ++d)
    rows *= static_cast<uint64_t>(c.shape[static_cast<size_t>(d)]);
  const uint64_t len =
      c.reduced > 0 ? static_cast<uint64_t>(c.shape[static_cast<size_t>(c.rank - 1)]) : 1;
  uint64_t P = 1;
  while (P < len)
    P *= 2;
  const uint64_t n = rows * P;
  const uint64_t es = sdk::dtype_size(static_cast<pcy_dtype>(p.result_dtype()));
  const uint64_t wi_at = (n * es + 7) / 8; // wi's first element, in i64
  const codegen::layout l = codegen::layout_of(s);
  launch_args la;
  codegen::meta_words_into(la.meta, s, c, off);
  la.meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(rows);
  la.meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(P);
  la.meta[static_cast<size_t>(l.extra(2))] = static_cast<int64_t>(wi_at);
  la.operands(cx, t, p.operands);
  la.add_meta();
  void* native = nullptr;
  const pcy_memory ws = a.workspace((wi_at + n) * 8, &native);
  la.workspace(cx, ws, native);
  la.add(int64_t{0});
  la.add(int64_t{0});
  run(cx, a.queue(), k.k0, cx.groups_for(n), la);
  for (uint64_t kk = 2; kk <= P; kk *= 2)
    for (uint64_t j = kk / 2; j > 0; j /= 2) {
      la.scalars[0] = kk; // the framework copies the scalars at each launch
      la.scalars[1] = j;
      run(cx, a.queue(), k.k1, cx.groups_for(n), la);
    }
  run(cx, a.queue(), k.k2, cx.groups_for(rows * len), la);
}

// random: the view and distribution checked by decode_random (array_program.hpp); the draw's
// parameters as pcy_array.h says (the affine steps in the output's precision, F32 for the half
// types).
inline void op_random(gpu_context& cx, const sdk::op_args& a) {
  const pcy_op_schema& S = pcy_array_random_schema;
  const random_call rc = decode_random(a); // view, distribution, parameters checked
  if (rc.elements == 0) return;
  const pcy_tensor& out = a.t(at<pcy_array_random_schema>("out"));
  const int dt = rc.dtype;
  const int64_t dist = rc.distribution;
  const double pa = rc.a, pb = rc.b;
  launch_args la;
  const codegen::random_kernel rk = codegen::random_kernel_of(rc, la.meta);
  const built_kernels& k = cx.get(rk.s);
  const codegen::layout l = codegen::layout_of(rk.s);
  la.meta[static_cast<size_t>(l.offset(0))] += elem_offset(S, out, cx.bundle);
  const uint64_t items = rk.items;
  la.operands(cx, {&out}, 1);
  la.add_meta();
  if (dt == PCY_DTYPE_F64) {
    // uniform: lo = a, span = b - a; normal: lo = mean, span = std
    const double lo_ = pa, span_ = dist == PCY_ARRAY_RANDOM_UNIFORM ? pb - pa : pb;
    la.add(lo_);
    la.add(span_);
    run(cx, a.queue(), k.k0, cx.groups_for(items), la);
  } else {
    const float fa = static_cast<float>(pa), fb = static_cast<float>(pb);
    const float lo_ = fa, span_ = dist == PCY_ARRAY_RANDOM_UNIFORM ? fb - fa : fb;
    la.add(lo_);
    la.add(span_);
    run(cx, a.queue(), k.k0, cx.groups_for(items), la);
  }
}

// The ops and dtypes of the native bundle (and random for every dtype).
template <class Table, class Ctx> void register_ops(Table& table, const std::string& impl) {
  constexpr pcy_dtype all[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I32,  PCY_DTYPE_I64,
                               PCY_DTYPE_U8,  PCY_DTYPE_F16, PCY_DTYPE_BF16, PCY_DTYPE_I8,
                               PCY_DTYPE_I16, PCY_DTYPE_BOOL};
  // clang-format off
  for (pcy_dtype d : all) {
#define PCY_ADD_EVAL(n)                                                                            \
    table.template add<op_eval<pcy_array_eval_##n##_schema, n>>(pcy_array_eval_##n##_schema, d,  \
                                                                impl);
    PCY_ADD_EVAL(0) PCY_ADD_EVAL(1) PCY_ADD_EVAL(2) PCY_ADD_EVAL(3) PCY_ADD_EVAL(4)
    PCY_ADD_EVAL(5) PCY_ADD_EVAL(6) PCY_ADD_EVAL(7) PCY_ADD_EVAL(8)
#undef PCY_ADD_EVAL
#define PCY_ADD_EVALM(m, n)                                                                        \
    table.template add<op_eval<pcy_array_evalm##m##_##n##_schema, n, m>>(                         \
        pcy_array_evalm##m##_##n##_schema, d, impl);
    PCY_ADD_EVALM(2, 0) PCY_ADD_EVALM(2, 1) PCY_ADD_EVALM(2, 2) PCY_ADD_EVALM(2, 3)
    PCY_ADD_EVALM(2, 4) PCY_ADD_EVALM(2, 5) PCY_ADD_EVALM(2, 6)
    PCY_ADD_EVALM(3, 0) PCY_ADD_EVALM(3, 1) PCY_ADD_EVALM(3, 2) PCY_ADD_EVALM(3, 3)
    PCY_ADD_EVALM(3, 4) PCY_ADD_EVALM(3, 5) PCY_ADD_EVALM(3, 6)
#undef PCY_ADD_EVALM
    table.template add<op_random>(pcy_array_random_schema, d, impl);
    if (d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16) continue;
    table.template add<op_sort>(pcy_array_sort_1_schema, d, impl);
#define PCY_ADD_REDUCE(n)                                                                          \
    table.template add<op_reduce<pcy_array_reduce_##n##_schema, n>>(                              \
        pcy_array_reduce_##n##_schema, d, impl);
    PCY_ADD_REDUCE(1) PCY_ADD_REDUCE(2) PCY_ADD_REDUCE(3) PCY_ADD_REDUCE(4)
#undef PCY_ADD_REDUCE
    if (d == PCY_DTYPE_BOOL) continue;
    table.template add<op_scan<pcy_array_scan_1_schema, 1>>(pcy_array_scan_1_schema, d, impl);
    table.template add<op_scan<pcy_array_scan_2_schema, 2>>(pcy_array_scan_2_schema, d, impl);
  }
  // clang-format on
}

} // namespace parenchyma::array_bundle::gpu
