// Array bundle for the Vulkan framework: every op of the array extension — fused elementwise
// programs (eval_<N>, evalm<O>_<N>), random draws, reductions (reduce_<N>), scans (scan_<N>) and
// sort_1 — as GLSL compute shaders written per program by array_glsl.hpp (random: with
// random.glsl, pcy_array_random.h in GLSL; reduce, scan and sort: array_codegen.hpp's kernels and
// plans, one shader per kernel) and built on first use through the framework's program build;
// the context maps each program's key (codegen::spec::key, with the kernel) to its kernel, so a
// new shape with the same instructions builds nothing. The shapes, strides, offsets and
// constants go to the shader as meta words in the op's workspace (written on the queue before
// the launch; push constants are too small for them); a reduction's, scan's or sort's scratch
// follows them there. A program this dialect cannot write (array_glsl.hpp: a dtype the device
// lacks, f64 transcendental functions without shaderInt64, the half types' ones), or one no
// launch can keep below lavapipe's loop limit, is refused with PCY_ERR_UNSUPPORTED naming the
// reason.
#include "array_glsl.hpp"
#include "array_helpers_glsl.hpp" // generated: helpers.glsl's text
#include "array_program.hpp"
#include "array_random_glsl.hpp" // generated: random.glsl's text

#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

using namespace parenchyma;
using namespace parenchyma::array_bundle;
namespace glsl = parenchyma::array_bundle::glsl;

constexpr const char* bundle_name = "array_vulkan";
using parenchyma::array_vulkan::helpers_library;
using parenchyma::array_vulkan::random_library;

// Indices are 32-bit ints in the shaders: every index word and element count below 2^31, and
// the grid-strided linear index never passes it.
constexpr int64_t max_index = (int64_t{1} << 31) - 1;

struct vk_array_context : sdk::device_context {
  explicit vk_array_context(const pcy_bundle_context_args& a) : device_context(a) {}
  glsl::features f;
  std::string device_name;
  uint32_t wg = 64;           // every kernel's work-group size (a power of two)
  uint64_t max_groups = 1024; // cap on the groups of a grid-stride launch
  // The tiled reduce kernel's slices per output when the reduced dimensions are outermost (0:
  // the column kernel): array_gpu.hpp's outer_slices, PARENCHYMA_ARRAY_OUTER_SLICES too.
  int outer_slices = 0;
  std::unordered_map<std::string, pcy_kernel> kernels;
  std::string no_fp64_reason, no_int64_reason, no_int8_reason, no_int16_reason, no_half_reason;

  bool op_available(const pcy_op_desc& op, const char** reason) const {
    const std::string* why = nullptr;
    if (!f.int8)
      why = &no_int8_reason; // every shader keeps bools as uint8_t
    else if (op.dtype == PCY_DTYPE_F64 && !f.fp64)
      why = &no_fp64_reason;
    else if (op.dtype == PCY_DTYPE_I64 && !f.int64)
      why = &no_int64_reason;
    else if (op.dtype == PCY_DTYPE_I16 && !f.int16)
      why = &no_int16_reason;
    else if (is_half(op.dtype) && (!f.int16 || !f.int64))
      why = &no_half_reason;
    if (why == nullptr) return true;
    *reason = why->c_str();
    return false;
  }

  // Refuses s (PCY_ERR_UNSUPPORTED, with the reason) where this dialect cannot write it here.
  void check(const codegen::spec& s) const {
    if (std::string why = glsl::unsupported(s, f); !why.empty())
      sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(bundle_name, ": ", why, " (on ", device_name,
                                              "): run this program on another framework"));
  }

  // The kernel of s (of a reduction, a scan or a sort: its kernel `sub`, a glsl::reduce_kernel,
  // scan_kernel or sort_kernel, each a shader of its own), built on first use.
  pcy_kernel get(const codegen::spec& s, int sub = 0) {
    thread_local std::string key;
    s.key_into(key);
    if (s.what == codegen::job::reduce || s.what == codegen::job::scan ||
        s.what == codegen::job::sort)
      key += static_cast<char>(sub);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
    check(s);
    const int w = static_cast<int>(wg);
    std::string src =
        s.what == codegen::job::random ? glsl::random_source(s, w, random_library, helpers_library)
        : s.what == codegen::job::reduce
            ? glsl::reduce_source(s, w, static_cast<glsl::reduce_kernel>(sub), helpers_library)
        : s.what == codegen::job::scan
            ? glsl::scan_source(s, w, static_cast<glsl::scan_kernel>(sub), helpers_library)
        : s.what == codegen::job::sort
            ? glsl::sort_source(s, w, static_cast<glsl::sort_kernel>(sub), helpers_library)
            : glsl::eval_source(s, w, helpers_library);
    // helpers.glsl's f32 division and square root go through f64 where the device has it
    if (f.fp64) src.insert(src.find('\n') + 1, "#define PCY_DEVICE_F64 1\n");
    build_failure failed;
    pcy_program prog = build(src.c_str(), nullptr, &failed);
    if (prog == nullptr)
      sdk::fail(failed.code == PCY_OK ? PCY_ERR_DEVICE : failed.code,
                sdk::str(bundle_name, ": building a shader for ", device_name,
                         " failed: ", failed.message));
    return kernels.emplace(key, kernel(prog, "main")).first->second;
  }
};

// The op's workspace of `bytes` (at least the meta words'), the meta words written at its start
// on the queue (the plugin takes the bytes now).
pcy_memory write_meta(const vk_array_context& cx, const sdk::op_args& a,
                      const std::vector<int64_t>& meta, uint64_t bytes = 0) {
  const uint64_t mb = meta.size() * sizeof(int64_t);
  const pcy_memory ws = a.workspace(std::max(bytes, mb));
  pcy_memory_transfer_args w{};
  w.struct_size = sizeof w;
  w.queue = a.queue();
  w.memory = ws;
  w.host_pointer = const_cast<int64_t*>(meta.data());
  w.bytes = mb;
  w.blocking = false;
  sdk::check(cx.fw->memory_write(&w));
  return ws;
}

// Launches k over `groups` work-groups with the buffers bound in order, then the push
// constants' int members.
void dispatch(const vk_array_context& cx, const sdk::op_args& a, pcy_kernel k,
              std::span<const pcy_memory> buffers, uint64_t groups,
              std::span<const int32_t> scalars = {}) {
  std::array<pcy_kernel_arg, max_operands + 6> args{};
  uint32_t count = 0;
  for (pcy_memory m : buffers)
    args[count++] = sdk::mem(m);
  for (const int32_t& v : scalars)
    args[count++] = {PCY_ARG_SCALAR, nullptr, &v, sizeof v};
  const pcy_kernel_launch_args la =
      sdk::launch_args(a.queue(), k, 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1}, args.data(), count);
  sdk::check(cx.fw->kernel_launch(&la));
}

// The meta words into the workspace, then k with the buffers and the meta words bound in order.
void launch(const vk_array_context& cx, const sdk::op_args& a, pcy_kernel k,
            const std::vector<int64_t>& meta, std::span<const pcy_memory> buffers,
            uint64_t groups) {
  const pcy_memory ws = write_meta(cx, a, meta);
  std::array<pcy_memory, max_operands + 1> mem{};
  std::copy(buffers.begin(), buffers.end(), mem.begin());
  mem[buffers.size()] = ws;
  dispatch(cx, a, k, std::span<const pcy_memory>(mem.data(), buffers.size() + 1), groups);
}

// Operand o's element offset (the tensor's byte offset in whole elements) and tensor.
template <const pcy_op_schema& S>
void element_offsets(const program& p, std::array<int64_t, max_operands>& off,
                     std::array<const pcy_tensor*, max_operands>& t) {
  for (int o = 0; o < p.operands; ++o) {
    const pcy_tensor& x = *p.ops[static_cast<size_t>(o)].tensor;
    t[static_cast<size_t>(o)] = &x;
    const uint64_t es = sdk::dtype_size(x.dtype);
    if (x.byte_offset % es != 0)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(S.extension, ".", S.name, ": a tensor starts at byte offset ",
                         x.byte_offset, ", not a multiple of its ", es, "-byte elements; ",
                         bundle_name, " addresses whole elements"));
    off[static_cast<size_t>(o)] = static_cast<int64_t>(x.byte_offset / es);
  }
}

// A decoded reduce, scan or sort program made ready: collapsed, its spec (refused here where
// this dialect cannot write it), its operands' element offsets and tensors.
struct prepared {
  collapsed c;
  codegen::spec s;
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
};
template <const pcy_op_schema& S>
void prepare(const vk_array_context& cx, const program& p, codegen::job j, int kind, prepared& r) {
  r.c = collapse(p);
  r.s = codegen::make_spec(p, r.c, j, kind);
  cx.check(r.s);
  element_offsets<S>(p, r.off, r.t);
}

// Refuses meta words [0, end) that do not fit a shader's 32-bit ints.
template <const pcy_op_schema& S>
void check_index_words(const std::vector<int64_t>& meta, int end) {
  for (int k = 0; k < end; ++k)
    if (meta[static_cast<size_t>(k)] > max_index || meta[static_cast<size_t>(k)] < -max_index)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(S.extension, ".", S.name, ": a shape, stride or offset of ",
                         meta[static_cast<size_t>(k)], "; ", bundle_name,
                         " indexes below 2^31 (32-bit indices)"));
}

template <const pcy_op_schema& S, int N, int O = 1>
void op_eval(vk_array_context& cx, const sdk::op_args& a) {
  program p;
  decode_eval<S, N, O>(a, p);
  if (p.elements == 0) return;
  const collapsed c = collapse(p);
  const codegen::spec s = codegen::make_spec(p, c, codegen::job::eval, 0);
  std::array<int64_t, max_operands> off{};
  std::array<const pcy_tensor*, max_operands> t{};
  element_offsets<S>(p, off, t);
  const codegen::layout l = codegen::layout_of(s);
  const uint64_t groups = std::clamp<uint64_t>((p.elements + cx.wg - 1) / cx.wg, 1, cx.max_groups);
  if (p.elements + groups * cx.wg > static_cast<uint64_t>(max_index))
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": ", p.elements, " elements; ", bundle_name,
                       " indexes below 2^31 (32-bit indices)"));
  thread_local std::vector<int64_t> meta;
  codegen::meta_words_into(meta, s, c, off);
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(p.elements);
  check_index_words<S>(meta, l.extra(1));
  const pcy_kernel k = cx.get(s);
  std::array<pcy_memory, max_operands> mem{};
  size_t count = 0;
  const std::array<bool, max_operands> used = glsl::bound(s);
  for (int o = 0; o < p.operands; ++o)
    if (used[static_cast<size_t>(o)]) mem[count++] = t[static_cast<size_t>(o)]->memory;
  launch(cx, a, k, meta, std::span<const pcy_memory>(mem.data(), count), groups);
}

// lavapipe ends an invocation's loops after 65535 iterations in all, silently (docs/vulkan.md):
// a reduction's launch keeps every invocation's loop iterations below this budget (3/4 of that),
// counting each position's (the blocked loops: an outer and two inner iterations per block of 8,
// or of 16 for VAR/STD; LOGSUMEXP's second pass one more) and each output's besides (its tree,
// its grid-stride step).
constexpr uint64_t loop_budget = 49152;
struct reduce_launch {
  codegen::reduce_plan plan;
  uint64_t groups = 0, fin_groups = 0; // work-groups of the kernel (part) and of fin
};
// Iterations of an invocation that takes `outputs` outputs of `positions` positions each.
inline uint64_t iterations(uint64_t outputs, uint64_t positions, int kind) {
  const uint64_t eighths = kind == PCY_ARRAY_REDUCE_LOGSUMEXP ? 25 : 17; // per position
  return outputs * ((positions * eighths + 7) / 8 + 32);
}
inline uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
// The launch of plan rp within the budget (groups grown up to Vulkan's 65535 where needed);
// false where it cannot be.
inline bool fit(const vk_array_context& cx, reduce_launch& r, int kind) {
  const codegen::reduce_plan& p = r.plan;
  const uint64_t wg = cx.wg, most = 65535;
  if (p.split()) {
    const uint64_t parts = p.n_out * p.chunks;
    r.groups = std::min(parts, most);
    r.fin_groups = std::clamp<uint64_t>(ceil_div(p.n_out, wg), 1, cx.max_groups);
    return iterations(ceil_div(parts, r.groups), ceil_div(p.chunk, wg), kind) <= loop_budget &&
           iterations(ceil_div(p.n_out, r.fin_groups * wg), p.chunks, kind) <= loop_budget;
  }
  const uint64_t cs = p.cs == 0 ? 1 : static_cast<uint64_t>(p.cs);
  const uint64_t per_group = p.cs == 0 ? wg : wg / cs; // outputs a work-group takes at once
  const uint64_t one = iterations(1, ceil_div(p.n_red, cs), kind);
  if (one > loop_budget) return false;
  const uint64_t rounds = loop_budget / one; // outputs an invocation may take in turn
  const uint64_t wanted = p.cs == 0 ? cx.max_groups : most;
  r.groups = std::clamp<uint64_t>(ceil_div(p.n_out, per_group), 1, wanted);
  r.groups = std::max(r.groups, std::min(ceil_div(p.n_out, per_group * rounds), most));
  return ceil_div(p.n_out, r.groups * per_group) <= rounds;
}

// Refuses an op whose work (`what`) no launch can keep within the loop budget.
[[noreturn]] void refuse_loops(const pcy_op_schema& S, const std::string& what) {
  sdk::fail(PCY_ERR_UNSUPPORTED,
            sdk::str(S.extension, ".", S.name, ": ", what, "; ", bundle_name,
                     " keeps each invocation's loops short (lavapipe ends them after 65535 "
                     "iterations) and cannot split this work so: run it on another framework"));
}

template <const pcy_op_schema& S, int N>
void op_reduce(vk_array_context& cx, const sdk::op_args& a) {
  program p;
  const reduce_args ra = decode_reduce<S, N>(a, p);
  const int kd = ra.kind;
  if (p.kept_elements == 0) return;
  prepared pr;
  prepare<S>(cx, p, codegen::job::reduce, kd, pr);
  const auto& [c, s, off, t] = pr;
  // The GPU bundles' plan; where an invocation would loop too long, one work-group per output,
  // then (one-pass kinds) more and shorter chunks.
  const bool one_pass = kd != PCY_ARRAY_REDUCE_LOGSUMEXP;
  reduce_launch r;
  r.plan =
      codegen::plan_reduce(c, p.kept_elements, one_pass, cx.wg, cx.max_groups, cx.outer_slices);
  codegen::reduce_plan& rp = r.plan;
  if (!fit(cx, r, kd) && rp.n_red > 4) {
    const bool was_split = rp.split();
    rp.cs = static_cast<int>(cx.wg);
    rp.chunks = rp.chunk = 0;
    if ((was_split || !fit(cx, r, kd)) && one_pass) {
      const uint64_t most = (loop_budget / 3 - 32) * cx.wg; // positions a chunk
      rp.chunks = ceil_div(rp.n_red, most);
      rp.chunk = ceil_div(rp.n_red, rp.chunks);
      rp.chunks = ceil_div(rp.n_red, rp.chunk);
      if (rp.chunks < 2) rp.chunks = rp.chunk = 0;
    }
  }
  if (!fit(cx, r, kd)) refuse_loops(S, sdk::str(rp.n_out, " outputs of ", rp.n_red, " positions"));
  const codegen::layout l = codegen::layout_of(s);
  thread_local std::vector<int64_t> meta;
  codegen::meta_words_into(meta, s, c, off);
  const double dof = static_cast<double>(rp.n_red) - ra.correction;
  codegen::reduce_extras(meta, l, rp, dof);
  check_index_words<S>(meta, l.extra(6));
  const int t_ = p.result_dtype();
  const uint64_t es = sdk::dtype_size(static_cast<pcy_dtype>(t_));
  const uint64_t parts = rp.split() ? rp.n_out * rp.chunks : 0;
  const bool welford = kd == PCY_ARRAY_REDUCE_VAR || kd == PCY_ARRAY_REDUCE_STD;
  // The workspace: the meta words, then wa (VAR/STD: each part's mean, then its deviations),
  // then wi (ARGMIN/ARGMAX: each part's position), each at a multiple of 8 bytes.
  const uint64_t meta_bytes = (static_cast<uint64_t>(glsl::own_words(s)) + 3) * 8;
  const uint64_t wa_bytes = ceil_div(parts * (welford ? 2 : 1) * es, 8) * 8;
  const uint64_t total = meta_bytes + wa_bytes + parts * 4;
  // every index and grid-strided counter (with its last step) below 2^31
  const uint64_t reach = std::max({rp.n_out, rp.n_red, parts * 2, total}) + (r.groups + 16) * cx.wg;
  if (reach > static_cast<uint64_t>(max_index))
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": ", rp.n_out, " outputs of ", rp.n_red,
                       " positions; ", bundle_name, " indexes below 2^31 (32-bit indices)"));
  meta.resize(static_cast<size_t>(glsl::own_words(s)) + 3, 0);
  const size_t W = static_cast<size_t>(glsl::own_words(s));
  meta[W] = static_cast<int64_t>(meta_bytes / es);
  meta[W + 1] = static_cast<int64_t>((meta_bytes + wa_bytes) / 4);
  if (t_ == PCY_DTYPE_F64) {
    std::memcpy(&meta[W + 2], &dof, sizeof dof);
  } else {
    const float fd = static_cast<float>(dof);
    std::memcpy(&meta[W + 2], &fd, sizeof fd);
  }
  using rk = glsl::reduce_kernel;
  const rk main_kernel = rp.split() ? rk::part : rp.cs == 0 ? rk::col : rk::row;
  const pcy_kernel k = cx.get(s, static_cast<int>(main_kernel));
  const pcy_kernel kf = rp.split() ? cx.get(s, static_cast<int>(rk::fin)) : nullptr;
  const pcy_memory ws = write_meta(cx, a, meta, total);
  const std::array<bool, max_operands> used = glsl::bound(s);
  std::array<pcy_memory, max_operands + 3> mem{};
  size_t count = 0;
  if (main_kernel != rk::part) mem[count++] = t[0]->memory;
  for (int o = 1; o < p.operands; ++o)
    if (used[static_cast<size_t>(o)]) mem[count++] = t[static_cast<size_t>(o)]->memory;
  if (main_kernel == rk::part) {
    mem[count++] = ws;                                                                     // wa
    if (kd == PCY_ARRAY_REDUCE_ARGMIN || kd == PCY_ARRAY_REDUCE_ARGMAX) mem[count++] = ws; // wi
  }
  mem[count++] = ws; // the meta words
  dispatch(cx, a, k, std::span<const pcy_memory>(mem.data(), count), r.groups);
  if (kf == nullptr) return;
  count = 0;
  mem[count++] = t[0]->memory;
  mem[count++] = ws;
  if (kd == PCY_ARRAY_REDUCE_ARGMIN || kd == PCY_ARRAY_REDUCE_ARGMAX) mem[count++] = ws;
  mem[count++] = ws;
  dispatch(cx, a, kf, std::span<const pcy_memory>(mem.data(), count), r.fin_groups);
}

// The work-groups of a grid-strided launch over `items` of `each` loop iterations, within the
// loop budget (more groups where needed, up to Vulkan's 65535); 0 where none is.
inline uint64_t grid_within(const vk_array_context& cx, uint64_t items, uint64_t each) {
  if (each + 32 > loop_budget) return 0;
  const uint64_t rounds = loop_budget / (each + 32); // items an invocation may take in turn
  uint64_t g = std::clamp<uint64_t>(ceil_div(items, cx.wg), 1, cx.max_groups);
  g = std::max(g, ceil_div(items, cx.wg * rounds));
  return g <= 65535 ? g : 0;
}

// scan_1, scan_2: the GPU bundles' plan (array_codegen.hpp's plan_scan), blocked where one
// invocation per row would loop too long on lavapipe.
template <const pcy_op_schema& S, int N> void op_scan(vk_array_context& cx, const sdk::op_args& a) {
  program p;
  const int kd = decode_scan<S, N>(a, p);
  if (p.elements == 0) return;
  prepared pr;
  prepare<S>(cx, p, codegen::job::scan, kd, pr);
  const auto& [c, s, off, t] = pr;
  codegen::scan_plan sp = codegen::plan_scan(c, cx.wg, cx.max_groups);
  uint64_t g0 = sp.blocked() ? 0 : grid_within(cx, sp.rows, sp.len), g1 = 0, g2 = 0;
  if (!sp.blocked() && g0 == 0) { // rows too long for one invocation: blocks of 4096
    sp.blocks = ceil_div(sp.len, 4096);
    sp.blen = ceil_div(sp.len, sp.blocks);
    sp.blocks = ceil_div(sp.len, sp.blen);
  }
  if (sp.blocked()) {
    g1 = grid_within(cx, sp.rows * sp.blocks, sp.blen); // part and fin
    g2 = grid_within(cx, sp.rows, sp.blocks);           // carry
  }
  if (sp.blocked() ? g1 == 0 || g2 == 0 : g0 == 0)
    refuse_loops(S, sdk::str(sp.rows, " rows of ", sp.len));
  const codegen::layout l = codegen::layout_of(s);
  thread_local std::vector<int64_t> meta;
  codegen::meta_words_into(meta, s, c, off);
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(sp.rows);
  meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(sp.blocks);
  meta[static_cast<size_t>(l.extra(2))] = static_cast<int64_t>(sp.blen);
  check_index_words<S>(meta, l.extra(3));
  const size_t W = static_cast<size_t>(glsl::own_words(s));
  meta.resize(W + 1, 0);
  const uint64_t es = sdk::dtype_size(static_cast<pcy_dtype>(p.result_dtype()));
  const uint64_t meta_bytes = (W + 1) * 8, items = sp.rows * std::max<uint64_t>(sp.blocks, 1);
  const uint64_t total = meta_bytes + (sp.blocked() ? items * es : 0);
  const uint64_t reach = std::max({p.elements, items, total}) + (std::max(g0, g1) + 1) * cx.wg;
  if (reach > static_cast<uint64_t>(max_index))
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": ", p.elements, " elements; ", bundle_name,
                       " indexes below 2^31 (32-bit indices)"));
  meta[W] = static_cast<int64_t>(meta_bytes / es);
  using sk = glsl::scan_kernel;
  const std::array<bool, max_operands> used = glsl::bound(s);
  std::array<pcy_memory, max_operands + 2> ins{};
  size_t n_in = 0;
  for (int o = 1; o < p.operands; ++o)
    if (used[static_cast<size_t>(o)]) ins[n_in++] = t[static_cast<size_t>(o)]->memory;
  if (!sp.blocked()) {
    const pcy_kernel k = cx.get(s, static_cast<int>(sk::scan));
    const pcy_memory ws = write_meta(cx, a, meta);
    std::array<pcy_memory, max_operands + 2> mem{};
    mem[0] = t[0]->memory;
    std::copy(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(n_in), mem.begin() + 1);
    mem[n_in + 1] = ws;
    dispatch(cx, a, k, std::span<const pcy_memory>(mem.data(), n_in + 2), g0);
    return;
  }
  const pcy_kernel kp = cx.get(s, static_cast<int>(sk::part)),
                   kc = cx.get(s, static_cast<int>(sk::carry)),
                   kf = cx.get(s, static_cast<int>(sk::fin));
  const pcy_memory ws = write_meta(cx, a, meta, total);
  std::array<pcy_memory, max_operands + 3> mem{};
  std::copy(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(n_in), mem.begin());
  mem[n_in] = ws; // wa
  mem[n_in + 1] = ws;
  dispatch(cx, a, kp, std::span<const pcy_memory>(mem.data(), n_in + 2), g1);
  const pcy_memory carry[] = {ws, ws};
  dispatch(cx, a, kc, carry, g2);
  mem[0] = t[0]->memory;
  std::copy(ins.begin(), ins.begin() + static_cast<std::ptrdiff_t>(n_in), mem.begin() + 1);
  mem[n_in + 1] = ws;
  mem[n_in + 2] = ws;
  dispatch(cx, a, kf, std::span<const pcy_memory>(mem.data(), n_in + 3), g1);
}

// sort_1: array_gpu.hpp's bitonic network (the same order: stable, the native bundle's to the
// bit), one launch per compare-exchange pass, each grid-strided within the loop budget.
void op_sort(vk_array_context& cx, const sdk::op_args& a) {
  const pcy_op_schema& S = pcy_array_sort_1_schema;
  program p;
  const sort_args sa = decode_sort<pcy_array_sort_1_schema>(a, p);
  if (p.elements == 0) return;
  prepared pr;
  prepare<pcy_array_sort_1_schema>(cx, p, codegen::job::sort, sa.kind + (sa.descending ? 2 : 0),
                                   pr);
  const auto& [c, s, off, t] = pr;
  const codegen::scan_plan rows_len = codegen::plan_scan(c, cx.wg, 0); // rows and len only
  const uint64_t rows = rows_len.rows, len = rows_len.len;
  uint64_t P = 1;
  while (P < len)
    P *= 2;
  const uint64_t n = rows * P;
  const uint64_t es = sdk::dtype_size(static_cast<pcy_dtype>(p.result_dtype()));
  const codegen::layout l = codegen::layout_of(s);
  thread_local std::vector<int64_t> meta;
  codegen::meta_words_into(meta, s, c, off);
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(rows);
  meta[static_cast<size_t>(l.extra(1))] = static_cast<int64_t>(P);
  check_index_words<pcy_array_sort_1_schema>(meta, l.extra(2));
  const size_t W = static_cast<size_t>(glsl::own_words(s));
  meta.resize(W + 2, 0);
  const uint64_t meta_bytes = (W + 2) * 8, wk_bytes = ceil_div(n * es, 8) * 8;
  const uint64_t total = meta_bytes + wk_bytes + n * 4;
  const uint64_t g = grid_within(cx, n, 1), go = grid_within(cx, rows * len, 1);
  if (g == 0 || go == 0 || total + (g + 1) * cx.wg > static_cast<uint64_t>(max_index))
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": ", rows, " rows of ", len, " (padded to ", P,
                       "); ", bundle_name, " indexes below 2^31 (32-bit indices)"));
  meta[W] = static_cast<int64_t>(meta_bytes / es);
  meta[W + 1] = static_cast<int64_t>((meta_bytes + wk_bytes) / 4);
  using so = glsl::sort_kernel;
  const pcy_kernel ki = cx.get(s, static_cast<int>(so::init)),
                   ks = cx.get(s, static_cast<int>(so::step)),
                   ko = cx.get(s, static_cast<int>(so::out));
  const pcy_memory ws = write_meta(cx, a, meta, total);
  const std::array<bool, max_operands> used = glsl::bound(s);
  std::array<pcy_memory, max_operands + 3> mem{};
  size_t count = 0;
  for (int o = 1; o < p.operands; ++o)
    if (used[static_cast<size_t>(o)]) mem[count++] = t[static_cast<size_t>(o)]->memory;
  for (int r = 0; r < 3; ++r) // wk, wi, the meta words
    mem[count++] = ws;
  dispatch(cx, a, ki, std::span<const pcy_memory>(mem.data(), count), g);
  const pcy_memory step_mem[] = {ws, ws, ws};
  for (uint64_t kk = 2; kk <= P; kk *= 2)
    for (uint64_t j = kk / 2; j > 0; j /= 2) {
      const int32_t pass[] = {static_cast<int32_t>(kk), static_cast<int32_t>(j)};
      dispatch(cx, a, ks, step_mem, g, pass);
    }
  const pcy_memory out_mem[] = {t[0]->memory, ws, ws};
  dispatch(cx, a, ko, out_mem, go);
}

// random: the view merged where it is one run of memory (array_gpu.hpp's op_random), one
// invocation per Philox counter; the meta words carry the draw's parameters (the layout's
// extras, then lo and span as the output's float type's bits).
void op_random(vk_array_context& cx, const sdk::op_args& a) {
  const pcy_op_schema& S = pcy_array_random_schema;
  const random_call rc = decode_random(a);
  if (rc.elements == 0) return;
  const pcy_tensor& out = a.t(sdk::arg_index(pcy_array_random_schema, "out"));
  const int dt = rc.dtype;
  const int64_t dist = rc.distribution;
  const uint64_t n = rc.elements;
  const double pa = rc.a, pb = rc.b;
  thread_local std::vector<int64_t> meta;
  const codegen::random_kernel rk = codegen::random_kernel_of(rc, meta, 2);
  const codegen::spec& s = rk.s;
  const codegen::layout l = codegen::layout_of(s);
  const int R = s.rank;
  const uint64_t items = rk.items;
  const uint64_t groups = std::clamp<uint64_t>((items + cx.wg - 1) / cx.wg, 1, cx.max_groups);
  const uint64_t es = sdk::dtype_size(out.dtype);
  if (out.byte_offset % es != 0)
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": a tensor starts at byte offset ",
                       out.byte_offset, ", not a multiple of its ", es, "-byte elements; ",
                       bundle_name, " addresses whole elements"));
  const int64_t off = rc.offset + static_cast<int64_t>(out.byte_offset / es);
  bool fits = n + groups * cx.wg * 4 < static_cast<uint64_t>(max_index) && off <= max_index;
  for (int d = 0; d < R; ++d)
    fits = fits && meta[static_cast<size_t>(l.shape(d))] <= max_index &&
           std::abs(meta[static_cast<size_t>(l.stride(0, d))]) <= max_index;
  if (!fits)
    sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(S.extension, ".", S.name, ": ", n, " elements; ",
                                            bundle_name, " indexes below 2^31 (32-bit indices)"));
  const pcy_kernel k = cx.get(s);
  meta[static_cast<size_t>(l.offset(0))] = off;
  // uniform: lo = a, span = b - a; normal: lo = mean, span = std (in the output's precision,
  // F32 for the half types)
  const size_t at = static_cast<size_t>(l.words(codegen::job::random));
  if (dt == PCY_DTYPE_F64) {
    const double lo_ = pa, span_ = dist == PCY_ARRAY_RANDOM_UNIFORM ? pb - pa : pb;
    std::memcpy(&meta[at], &lo_, sizeof lo_);
    std::memcpy(&meta[at + 1], &span_, sizeof span_);
  } else {
    const float fa = static_cast<float>(pa), fb = static_cast<float>(pb);
    const float lo_ = fa, span_ = dist == PCY_ARRAY_RANDOM_UNIFORM ? fb - fa : fb;
    std::memcpy(&meta[at], &lo_, sizeof lo_);
    std::memcpy(&meta[at + 1], &span_, sizeof span_);
  }
  const pcy_memory buf[] = {out.memory};
  launch(cx, a, k, meta, buf, groups);
}

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_ARRAY_EXTENSION, "vulkan",
    "array expressions (eval), random draws, reductions, scans and sorts as GLSL compute shaders "
    "generated per program"};

class array_vulkan_bundle : public sdk::bundle_base<identity, vk_array_context> {
public:
  explicit array_vulkan_bundle(const pcy_host_services& host) : bundle_base(host) {
    constexpr pcy_dtype all[] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_I32,  PCY_DTYPE_I64,
                                 PCY_DTYPE_U8,  PCY_DTYPE_F16, PCY_DTYPE_BF16, PCY_DTYPE_I8,
                                 PCY_DTYPE_I16, PCY_DTYPE_BOOL};
    const std::string impl = "parenchyma GLSL compute shaders generated per program";
    // clang-format off
    for (pcy_dtype d : all) {
#define PCY_ADD_EVAL(n)                                                                            \
      table_.add<op_eval<pcy_array_eval_##n##_schema, n>>(pcy_array_eval_##n##_schema, d, impl);
      PCY_ADD_EVAL(0) PCY_ADD_EVAL(1) PCY_ADD_EVAL(2) PCY_ADD_EVAL(3) PCY_ADD_EVAL(4)
      PCY_ADD_EVAL(5) PCY_ADD_EVAL(6) PCY_ADD_EVAL(7) PCY_ADD_EVAL(8)
#undef PCY_ADD_EVAL
#define PCY_ADD_EVALM(m, n)                                                                        \
      table_.add<op_eval<pcy_array_evalm##m##_##n##_schema, n, m>>(                              \
          pcy_array_evalm##m##_##n##_schema, d, impl);
      PCY_ADD_EVALM(2, 0) PCY_ADD_EVALM(2, 1) PCY_ADD_EVALM(2, 2) PCY_ADD_EVALM(2, 3)
      PCY_ADD_EVALM(2, 4) PCY_ADD_EVALM(2, 5) PCY_ADD_EVALM(2, 6)
      PCY_ADD_EVALM(3, 0) PCY_ADD_EVALM(3, 1) PCY_ADD_EVALM(3, 2) PCY_ADD_EVALM(3, 3)
      PCY_ADD_EVALM(3, 4) PCY_ADD_EVALM(3, 5) PCY_ADD_EVALM(3, 6)
#undef PCY_ADD_EVALM
      table_.add<op_random>(pcy_array_random_schema, d, impl);
      if (d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16) continue;
      table_.add<op_sort>(pcy_array_sort_1_schema, d, impl);
#define PCY_ADD_REDUCE(n)                                                                          \
      table_.add<op_reduce<pcy_array_reduce_##n##_schema, n>>(pcy_array_reduce_##n##_schema, d,  \
                                                              impl);
      PCY_ADD_REDUCE(1) PCY_ADD_REDUCE(2) PCY_ADD_REDUCE(3) PCY_ADD_REDUCE(4)
#undef PCY_ADD_REDUCE
      if (d == PCY_DTYPE_BOOL) continue;
      table_.add<op_scan<pcy_array_scan_1_schema, 1>>(pcy_array_scan_1_schema, d, impl);
      table_.add<op_scan<pcy_array_scan_2_schema, 2>>(pcy_array_scan_2_schema, d, impl);
    }
    // clang-format on
  }

  std::span<const pcy_op_desc> ops() const { return table_.ops(); }

  context_type* create_context(const pcy_bundle_context_args& a) {
    sdk::require_slots(*a.framework, bundle_name,
                       {PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                        PCY_FRAMEWORK_SLOT_kernel_launch, PCY_FRAMEWORK_SLOT_memory_write});
    auto cx = std::make_unique<vk_array_context>(a);
    const sdk::device_facts dev = sdk::device_facts_of(a);
    cx->device_name = dev.name.empty() ? std::string("the Vulkan device") : dev.name;
    cx->f.fp64 = dev.fp64;
    cx->f.int64 = sdk::device_number(a, "int64", 0) != 0;
    cx->f.int8 = sdk::device_number(a, "int8", 0) != 0;
    cx->f.int16 = sdk::device_number(a, "int16", 0) != 0;
    auto lacks = [&](const char* what, const char* types) {
      return sdk::str(bundle_name, ": ", cx->device_name, " has no ", what, ": ", types,
                      " programs cannot run on it");
    };
    cx->no_fp64_reason = lacks("shaderFloat64", "f64");
    cx->no_int64_reason = lacks("shaderInt64", "i64");
    cx->no_int8_reason =
        lacks("shaderInt8 with 8-bit storage buffers", "array (bool registers are 8-bit)");
    cx->no_int16_reason = lacks("shaderInt16 with 16-bit storage buffers", "i16");
    cx->no_half_reason = lacks("shaderInt16 with 16-bit storage buffers and shaderInt64",
                               "f16 and bf16 (converted on the bits)");
    const int64_t max_wg = dev.max_work_group > 0 ? dev.max_work_group : 256;
    uint32_t wg = 1; // a power of two: the reduce trees halve it
    while (wg * 2 <= std::min<int64_t>(max_wg, dev.cpu ? 64 : 256))
      wg *= 2;
    cx->wg = wg;
    cx->max_groups = dev.cpu ? 64 : 4096;
    cx->outer_slices = dev.cpu ? 0 : static_cast<int>(std::min<uint32_t>(8, wg));
    if (const char* v = settings_.find("PARENCHYMA_ARRAY_OUTER_SLICES")) {
      const long n = std::strtol(v, nullptr, 10);
      int cs = 0;
      if (n > 0)
        for (cs = 1; cs * 2 <= n && static_cast<uint32_t>(cs * 2) <= wg;)
          cs *= 2;
      cx->outer_slices = cs;
    }
    return cx.release();
  }

private:
  sdk::op_table<array_vulkan_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(array_vulkan_bundle)
