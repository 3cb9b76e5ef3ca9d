// Array bundle for the Vulkan framework: fused elementwise programs (eval_<N>, evalm<O>_<N>) and
// random draws as GLSL compute shaders written per program by array_glsl.hpp (random: with
// random.glsl, pcy_array_random.h in GLSL) and built on first use through the framework's
// program build; the context maps each program's key (codegen::spec::key) to its kernel, so a
// new shape with the same instructions builds nothing. The shapes, strides, offsets and
// constants go to the shader as meta words in the op's workspace (written on the queue before
// the launch; push constants are too small for them). Reductions, scans and sorts are not
// registered: the host runs them on another framework. A program this dialect cannot write
// (array_glsl.hpp: f64 transcendental functions, a dtype the device lacks) is refused
// with PCY_ERR_UNSUPPORTED naming the reason.
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
  uint32_t wg = 64;
  uint64_t max_groups = 1024;
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

  pcy_kernel get(const codegen::spec& s) {
    thread_local std::string key;
    s.key_into(key);
    if (auto it = kernels.find(key); it != kernels.end()) return it->second;
    if (std::string why = glsl::unsupported(s, f); !why.empty())
      sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(bundle_name, ": ", why, " (on ", device_name,
                                              "): run this program on another framework"));
    const std::string src =
        s.what == codegen::job::random
            ? glsl::random_source(s, static_cast<int>(wg), random_library, helpers_library)
            : glsl::eval_source(s, static_cast<int>(wg), helpers_library);
    build_failure failed;
    pcy_program prog = build(src.c_str(), nullptr, &failed);
    if (prog == nullptr)
      sdk::fail(failed.code == PCY_OK ? PCY_ERR_DEVICE : failed.code,
                sdk::str(bundle_name, ": building a shader for ", device_name,
                         " failed: ", failed.message));
    return kernels.emplace(key, kernel(prog, "main")).first->second;
  }
};

// Writes the meta words into the op's workspace on the queue (the plugin takes the bytes now)
// and launches k over `groups` work-groups with the buffers, then the meta words, bound in order.
void launch(const vk_array_context& cx, const sdk::op_args& a, pcy_kernel k,
            const std::vector<int64_t>& meta, std::span<const pcy_memory> buffers,
            uint64_t groups) {
  const uint64_t bytes = meta.size() * sizeof(int64_t);
  const pcy_memory ws = a.workspace(bytes);
  pcy_memory_transfer_args w{};
  w.struct_size = sizeof w;
  w.queue = a.queue();
  w.memory = ws;
  w.host_pointer = const_cast<int64_t*>(meta.data());
  w.bytes = bytes;
  w.blocking = false;
  sdk::check(cx.fw->memory_write(&w));
  std::array<pcy_kernel_arg, max_operands + 1> args{};
  uint32_t count = 0;
  for (pcy_memory m : buffers)
    args[count++] = sdk::mem(m);
  args[count++] = sdk::mem(ws);
  const pcy_kernel_launch_args la =
      sdk::launch_args(a.queue(), k, 1, {groups * cx.wg, 1, 1}, {cx.wg, 1, 1}, args.data(), count);
  sdk::check(cx.fw->kernel_launch(&la));
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
  const codegen::layout l = codegen::layout_of(s);
  const uint64_t groups = std::clamp<uint64_t>((p.elements + cx.wg - 1) / cx.wg, 1, cx.max_groups);
  if (p.elements + groups * cx.wg > static_cast<uint64_t>(max_index))
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str(S.extension, ".", S.name, ": ", p.elements, " elements; ", bundle_name,
                       " indexes below 2^31 (32-bit indices)"));
  thread_local std::vector<int64_t> meta;
  codegen::meta_words_into(meta, s, c, off);
  meta[static_cast<size_t>(l.extra(0))] = static_cast<int64_t>(p.elements);
  for (int k = 0; k < l.extra(1); ++k)
    if (meta[static_cast<size_t>(k)] > max_index || meta[static_cast<size_t>(k)] < -max_index)
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(S.extension, ".", S.name, ": a shape, stride or offset of ",
                         meta[static_cast<size_t>(k)], "; ", bundle_name,
                         " indexes below 2^31 (32-bit indices)"));
  const pcy_kernel k = cx.get(s);
  std::array<pcy_memory, max_operands> mem{};
  size_t count = 0;
  const std::array<bool, max_operands> used = glsl::bound(s);
  for (int o = 0; o < p.operands; ++o)
    if (used[static_cast<size_t>(o)]) mem[count++] = t[static_cast<size_t>(o)]->memory;
  launch(cx, a, k, meta, std::span<const pcy_memory>(mem.data(), count), groups);
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
    "array expressions (eval) as GLSL compute shaders generated per program"};

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
    cx->wg = static_cast<uint32_t>(std::min<int64_t>(max_wg, dev.cpu ? 64 : 256));
    cx->max_groups = dev.cpu ? 64 : 4096;
    return cx.release();
  }

private:
  sdk::op_table<array_vulkan_bundle> table_;
};

} // namespace

PCY_BUNDLE_PLUGIN(array_vulkan_bundle)
