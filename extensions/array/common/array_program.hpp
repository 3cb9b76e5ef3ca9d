// Array bundles, shared part: decodes and checks an array op's program (pcy_array.h) against
// the call's tensors, so a bundle called by any host never reads or writes outside a tensor and
// never meets an instruction whose operand dtypes it does not implement. Errors name the op, the
// argument and the word. Also the facts every bundle's code generator reads (register dtypes,
// which dtypes the program computes in, a key for the kernel cache).
#pragma once

#include <parenchyma/abi/ext/pcy_array.h>
#include <parenchyma/sdk/dtype.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::array_bundle {

__extension__ typedef __int128 int128; // bounds arithmetic that cannot overflow

using sdk::fail;
using sdk::str;

constexpr int max_rank = PCY_ARRAY_MAX_RANK;
constexpr int max_operands = PCY_ARRAY_MAX_INPUTS + 1;
constexpr int max_instructions = PCY_ARRAY_MAX_INSTRUCTIONS;

// ---- dtype classes ----------------------------------------------------------------------------
constexpr bool is_float(int d) noexcept { return d == PCY_DTYPE_F32 || d == PCY_DTYPE_F64; }
constexpr bool is_half(int d) noexcept { return d == PCY_DTYPE_F16 || d == PCY_DTYPE_BF16; }
constexpr bool is_int(int d) noexcept {
  return d == PCY_DTYPE_I8 || d == PCY_DTYPE_I16 || d == PCY_DTYPE_I32 || d == PCY_DTYPE_I64 ||
         d == PCY_DTYPE_U8;
}
constexpr bool is_bool(int d) noexcept { return d == PCY_DTYPE_BOOL; }
constexpr bool is_number(int d) noexcept { return is_float(d) || is_int(d); }
// A dtype registers compute in (everything but the half types).
constexpr bool is_arith(int d) noexcept { return is_number(d) || is_bool(d); }
constexpr bool is_dtype(int d) noexcept { return sdk::dtype_name_or_null(d) != nullptr; }

constexpr const char* op_name(int op) noexcept {
  switch (op) {
#define PCY_ARRAY_OP_NAME(name, code, operands)                                                    \
  case code: return #name;
    PCY_ARRAY_OPS(PCY_ARRAY_OP_NAME)
#undef PCY_ARRAY_OP_NAME
  }
  return nullptr;
}
constexpr int op_operands(int op) noexcept {
  switch (op) {
#define PCY_ARRAY_OP_ARITY(name, code, operands)                                                   \
  case code: return operands;
    PCY_ARRAY_OPS(PCY_ARRAY_OP_ARITY)
#undef PCY_ARRAY_OP_ARITY
  }
  return -1;
}
constexpr bool is_float_unary(int op) noexcept {
  return op >= PCY_ARRAY_OP_EXP && op <= PCY_ARRAY_OP_TRUNC;
}
constexpr bool is_compare(int op) noexcept {
  return op >= PCY_ARRAY_OP_EQ && op <= PCY_ARRAY_OP_GE;
}
constexpr bool is_float_binary(int op) noexcept {
  return op == PCY_ARRAY_OP_DIV || op == PCY_ARRAY_OP_ATAN2 ||
         (op >= PCY_ARRAY_OP_COPYSIGN && op <= PCY_ARRAY_OP_LOGADDEXP);
}

// The type rules of the computing instructions (not the sources, CAST, WHERE or STORE): whether
// `op` takes operands of dtype t, and the dtype of its result. The decoder checks programs
// against them; tests build programs from them.
constexpr bool takes(int op, int t) noexcept {
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
  case PCY_ARRAY_OP_POW:
  case PCY_ARRAY_OP_MINIMUM:
  case PCY_ARRAY_OP_MAXIMUM: return is_number(t);
  case PCY_ARRAY_OP_NOT:
  case PCY_ARRAY_OP_AND:
  case PCY_ARRAY_OP_OR:
  case PCY_ARRAY_OP_XOR: return is_int(t) || is_bool(t);
  case PCY_ARRAY_OP_SHL:
  case PCY_ARRAY_OP_SHR: return is_int(t);
  case PCY_ARRAY_OP_ISNAN:
  case PCY_ARRAY_OP_ISINF:
  case PCY_ARRAY_OP_ISFINITE: return is_float(t);
  default:
    if (is_float_unary(op) || is_float_binary(op)) return is_float(t);
    if (is_compare(op)) return is_arith(t);
    return false;
  }
}
constexpr int result_of(int op, int t) noexcept {
  if (is_compare(op) || op == PCY_ARRAY_OP_ISNAN || op == PCY_ARRAY_OP_ISINF ||
      op == PCY_ARRAY_OP_ISFINITE)
    return PCY_DTYPE_BOOL;
  return t;
}

// Plain data without initialisers: a program's 256 slots are written up to its count, never
// zeroed (the decoder runs on every call).
struct instruction {
  int op;
  int dtype;
  int64_t a, b, c;
  int64_t extent; // GATHER
};

struct operand {
  int64_t offset = 0;
  std::array<int64_t, max_rank> strides{};
  const pcy_tensor* tensor = nullptr;
  int dtype = 0;
};

enum class kind { eval, reduce, scan, sort };

// A decoded program. Register k is instruction k; `dtype_mask` has bit d set for every dtype a
// register holds (bundles refuse F64 on devices without fp64 from it).
struct program {
  kind what = kind::eval;
  int rank = 0, reduced = 0, operands = 0, count = 0, outputs = 1;
  std::array<int64_t, max_rank> shape{};
  std::array<operand, max_operands> ops{};
  std::array<instruction, max_instructions> code; // [0, count) set by the decoder
  uint32_t dtype_mask = 0;
  uint64_t elements = 0;          // of the whole index space
  uint64_t kept_elements = 0;     // of the kept (first rank - reduced) dimensions
  std::span<const int64_t> words; // the program as sent (a key for kernel caches with dtypes)
  int result_dtype() const noexcept { return code[static_cast<size_t>(count - 1)].dtype; }
  bool uses(int dtype) const noexcept { return (dtype_mask >> dtype) & 1u; }
};

// What the decoder read of one call: the op, the program's words, each operand tensor's dtype,
// byte offset and shape, and which operands share memory (the aliasing checks' only input from
// the tensors' memory). Two calls with equal keys pass the same checks and get the same plan, so
// a bundle may repeat its last decoded program (or launch) for a call whose key equals the last
// one's, binding the call's memory: a new tensor of the same view, wherever its memory lies,
// repeats it. Compared byte for byte; a call whose bytes differ is decoded afresh.
struct call_key {
  struct tensor_key {
    int32_t dtype = -1, ndim = -1;
    uint64_t byte_offset = 0;
    std::array<int64_t, max_rank> shape{};
    bool operator==(const tensor_key&) const = default;
  };
  const pcy_op_schema* op = nullptr; // nullptr: empty
  std::vector<int64_t> words;
  std::array<tensor_key, max_operands> t{};
  // Operand o's memory is operand alias[o]'s, the first with the same memory and native handle
  // (o itself where none before has it): the pattern check_aliasing judges.
  std::array<int8_t, max_operands> alias{};
  int operands = 0;

  static bool key_of(const pcy_tensor& x, tensor_key& k) noexcept {
    if (x.ndim < 0 || x.ndim > max_rank || x.strides != nullptr) return false;
    k.dtype = static_cast<int32_t>(x.dtype);
    k.ndim = x.ndim;
    k.byte_offset = x.byte_offset;
    k.shape = {};
    for (int32_t i = 0; i < x.ndim; ++i)
      k.shape[static_cast<size_t>(i)] = x.shape[i];
    return true;
  }
  // The first operand before o (argument first + j) on o's memory, or o.
  static int alias_of(const sdk::op_args& a, uint32_t first, int o) noexcept {
    const pcy_tensor& x = a.t(first + static_cast<uint32_t>(o));
    for (int j = 0; j < o; ++j) {
      const pcy_tensor& y = a.t(first + static_cast<uint32_t>(j));
      if (y.memory == x.memory && y.data == x.data) return j;
    }
    return o;
  }
  // Operand o is argument first + o (eval's out, out1.., in0..).
  bool matches(const pcy_op_schema& s, const sdk::op_args& a, uint32_t prog, uint32_t first,
               int n) const noexcept {
    if (op != &s || n != operands) return false;
    const std::span<const int64_t> w = a.ints(prog);
    if (w.size() != words.size()) return false;
    for (int o = 0; o < n; ++o)
      if (!same(a.t(first + static_cast<uint32_t>(o)), t[static_cast<size_t>(o)]) ||
          alias_of(a, first, o) != alias[static_cast<size_t>(o)])
        return false;
    return w.empty() || std::memcmp(w.data(), words.data(), w.size() * sizeof(int64_t)) == 0;
  }
  // Whether x's key is k (a key made by key_of), compared in place.
  static bool same(const pcy_tensor& x, const tensor_key& k) noexcept {
    if (static_cast<int32_t>(x.dtype) != k.dtype || x.ndim != k.ndim ||
        x.byte_offset != k.byte_offset || x.strides != nullptr)
      return false;
    for (int32_t i = 0; i < x.ndim; ++i)
      if (x.shape[i] != k.shape[static_cast<size_t>(i)]) return false;
    return true;
  }
  // Keeps the call's key (false, and empty, where a tensor cannot be keyed).
  bool store(const pcy_op_schema& s, const sdk::op_args& a, uint32_t prog, uint32_t first, int n) {
    op = nullptr;
    for (int o = 0; o < n; ++o) {
      if (!key_of(a.t(first + static_cast<uint32_t>(o)), t[static_cast<size_t>(o)])) return false;
      alias[static_cast<size_t>(o)] = static_cast<int8_t>(alias_of(a, first, o));
    }
    const std::span<const int64_t> w = a.ints(prog);
    words.assign(w.begin(), w.end());
    operands = n;
    op = &s;
    return true;
  }
};

// The checks. `prog_k`: the program argument's index; `out_k`: the output's; inputs follow the
// output's arguments at `in_k`, `inputs` of them.
class decoder {
public:
  decoder(const pcy_op_schema& s, const sdk::op_args& a) : s_(s), a_(a) {}

  [[noreturn]] [[gnu::cold]] [[gnu::noinline]] void bad(uint32_t k, const std::string& what) const {
    fail(PCY_ERR_INVALID_ARGUMENT,
         str(s_.extension, ".", s_.name, ": argument ", s_.args[k].name, ": ", what));
  }

  // `outputs` (evalm2/evalm3: 2 or 3): operands 0..outputs-1 are the arguments from out_k on.
  void decode(program& p, kind what, uint32_t prog_k, uint32_t out_k, uint32_t in_k, int inputs,
              int outputs = 1) const {
    const std::span<const int64_t> w = a_.ints(prog_k);
    p.what = what;
    p.words = w;
    auto need = [&](size_t n, const char* what_) {
      if (w.size() < n)
        bad(prog_k,
            str("the program ends early (", w.size(), " words; ", what_, " needs ", n, ")"));
    };
    need(PCY_ARRAY_HEADER_WORDS, "the header");
    if (w[0] != PCY_ARRAY_PROGRAM_VERSION)
      bad(prog_k, str("word 0: version ", w[0], ", expected ", PCY_ARRAY_PROGRAM_VERSION));
    if (w[1] < 0 || w[1] > max_rank)
      bad(prog_k, str("word 1: rank ", w[1], " outside [0, ", max_rank, "]"));
    p.rank = static_cast<int>(w[1]);
    const bool one_axis = what == kind::scan || what == kind::sort;
    const int64_t k_lo = one_axis ? 1 : 0;
    const int64_t k_hi = what == kind::eval ? 0 : one_axis ? 1 : p.rank;
    if (w[2] < k_lo || w[2] > k_hi || w[2] > p.rank)
      bad(prog_k, str("word 2: ", w[2], " reduced dimensions; this op takes ", k_lo, "..",
                      k_hi > p.rank ? p.rank : k_hi));
    p.reduced = static_cast<int>(w[2]);
    if (w[3] != inputs + outputs)
      bad(prog_k, str("word 3: ", w[3], " operands; ", s_.name, " has ", inputs + outputs, " (",
                      outputs, outputs == 1 ? " output" : " outputs", " and ", inputs, " inputs)"));
    p.operands = inputs + outputs;
    p.outputs = outputs;
    if (w[4] < 1 || w[4] > max_instructions)
      bad(prog_k, str("word 4: ", w[4], " instructions, outside [1, ", max_instructions, "]"));
    p.count = static_cast<int>(w[4]);
    const size_t r = static_cast<size_t>(p.rank);
    const size_t body = PCY_ARRAY_HEADER_WORDS + r + static_cast<size_t>(p.operands) * (1 + r);
    const size_t total = body + static_cast<size_t>(p.count) * PCY_ARRAY_INSTRUCTION_WORDS;
    need(total, "its header");
    if (w.size() != total)
      bad(prog_k, str(w.size(), " words, expected ", total, " for this header"));

    size_t at = PCY_ARRAY_HEADER_WORDS;
    p.elements = 1;
    p.kept_elements = 1;
    for (size_t d = 0; d < r; ++d, ++at) {
      if (w[at] < 0) bad(prog_k, str("word ", at, ": extent ", w[at], " < 0"));
      p.shape[d] = w[at];
      if (!sdk::mul_ok(p.elements, static_cast<uint64_t>(w[at]), p.elements) ||
          p.elements > (uint64_t{1} << 62))
        bad(prog_k, str("word ", at, ": the index space's element count overflows"));
      if (d < r - static_cast<size_t>(p.reduced)) p.kept_elements *= static_cast<uint64_t>(w[at]);
    }
    for (int o = 0; o < p.operands; ++o) {
      operand& op = p.ops[static_cast<size_t>(o)];
      const uint32_t tk = o < outputs ? out_k + static_cast<uint32_t>(o)
                                      : in_k + static_cast<uint32_t>(o - outputs);
      op.tensor = &a_.t(tk);
      op.dtype = static_cast<int>(op.tensor->dtype);
      if (!is_dtype(op.dtype)) bad(tk, str("dtype ", op.dtype, " is unknown"));
      if (op.tensor->strides != nullptr)
        bad(tk, "strided tensors are described by the program, not by pcy_tensor::strides");
      op.offset = w[at++];
      for (size_t d = 0; d < r; ++d)
        op.strides[d] = w[at++];
      if (o == 0 && what == kind::reduce)
        for (size_t d = r - static_cast<size_t>(p.reduced); d < r; ++d)
          if (op.strides[d] != 0)
            bad(prog_k, str("the output's stride for reduced dimension ", d, " is ", op.strides[d],
                            ", expected 0"));
    }

    for (int k = 0; k < p.count; ++k, at += PCY_ARRAY_INSTRUCTION_WORDS) {
      instruction& in = p.code[static_cast<size_t>(k)];
      in.op = PCY_ARRAY_WORD_OP(w[at]);
      in.dtype = PCY_ARRAY_WORD_DTYPE(w[at]);
      in.a = w[at + 1];
      in.b = w[at + 2];
      in.c = w[at + 3];
      in.extent = 0;
      if (in.op == PCY_ARRAY_OP_GATHER)
        in.extent = PCY_ARRAY_GATHER_EXTENT(w[at]);
      else if ((w[at] >> 16) != 0)
        bad(prog_k, str("instruction ", k, ": unused bits set in word ", at));
      check_instruction(p, k, prog_k);
      p.dtype_mask |= 1u << in.dtype;
    }
    // Every element the output and the LOADs address lies inside its tensor (a GATHERed operand
    // is checked by its instruction, over the gathered axis' extent).
    if (p.elements > 0) {
      std::array<bool, max_operands> loaded{};
      for (int o = 0; o < outputs; ++o)
        loaded[static_cast<size_t>(o)] = true;
      for (int k = 0; k < p.count; ++k)
        if (p.code[static_cast<size_t>(k)].op == PCY_ARRAY_OP_LOAD)
          loaded[static_cast<size_t>(p.code[static_cast<size_t>(k)].a)] = true;
      for (int o = 0; o < p.operands; ++o)
        if (loaded[static_cast<size_t>(o)]) check_bounds(p, o, prog_k, -1, 0);
    }
    // The value's dtype against the output's.
    const int v = p.result_dtype(), out = p.ops[0].dtype;
    if (what != kind::reduce && what != kind::sort && v != out)
      bad(prog_k, str("the program's value is ", dn(v), " but the output is ", dn(out),
                      " (end the program with a CAST)"));
    // Each further output is written by exactly one STORE.
    for (int o = 1; o < outputs; ++o) {
      int stores = 0;
      for (int k = 0; k < p.count; ++k)
        stores += p.code[static_cast<size_t>(k)].op == PCY_ARRAY_OP_STORE &&
                  p.code[static_cast<size_t>(k)].a == o;
      if (stores != 1)
        bad(prog_k,
            str("output ", o, " is written by ", stores, " STORE instructions, expected 1"));
    }
  }

  // The reduce kind's rules for the value's and the output's dtypes.
  int reduce_kind(const program& p, uint32_t kind_k) const {
    const int64_t kd = a_.i(kind_k);
    const int v = p.result_dtype(), out = p.ops[0].dtype;
    switch (kd) {
    case PCY_ARRAY_REDUCE_SUM:
    case PCY_ARRAY_REDUCE_PROD:
    case PCY_ARRAY_REDUCE_MIN:
    case PCY_ARRAY_REDUCE_MAX:
      if (!is_number(v) || v != out)
        bad(kind_k, str("kind ", kd, " needs a numeric value of the output's dtype (value ", dn(v),
                        ", output ", dn(out), ")"));
      if ((kd == PCY_ARRAY_REDUCE_MIN || kd == PCY_ARRAY_REDUCE_MAX) && empty_reduction(p))
        bad(kind_k, "min and max of an empty reduction are undefined");
      break;
    case PCY_ARRAY_REDUCE_ARGMIN:
    case PCY_ARRAY_REDUCE_ARGMAX:
      if (!(is_number(v) || is_bool(v)) || out != PCY_DTYPE_I64)
        bad(kind_k, str("argmin/argmax need a numeric value and an i64 output (value ", dn(v),
                        ", output ", dn(out), ")"));
      if (empty_reduction(p)) bad(kind_k, "argmin and argmax of an empty reduction are undefined");
      break;
    case PCY_ARRAY_REDUCE_ALL:
    case PCY_ARRAY_REDUCE_ANY:
      if (!is_bool(v) || !is_bool(out))
        bad(kind_k,
            str("all/any need a bool value and output (value ", dn(v), ", output ", dn(out), ")"));
      break;
    case PCY_ARRAY_REDUCE_MEAN:
    case PCY_ARRAY_REDUCE_VAR:
    case PCY_ARRAY_REDUCE_STD:
    case PCY_ARRAY_REDUCE_LOGSUMEXP:
    case PCY_ARRAY_REDUCE_NORM2:
      if (!is_float(v) || v != out)
        bad(kind_k, str("kind ", kd, " needs a floating value of the output's dtype (value ", dn(v),
                        ", output ", dn(out), ")"));
      break;
    default: bad(kind_k, str("unknown reduce kind ", kd));
    }
    return static_cast<int>(kd);
  }

  // Output and inputs: the output may be an input only through the same view (eval, scan on
  // the same offset and strides); a reduce output shares memory with no input.
  void check_aliasing(const program& p, uint32_t out_k, uint32_t in_k) const {
    if (p.elements == 0) return;
    for (int oi = 0; oi < p.outputs; ++oi) {
      const operand& o = p.ops[static_cast<size_t>(oi)];
      for (int i = 0; i < p.operands; ++i) {
        if (i == oi) continue;
        const operand& x = p.ops[static_cast<size_t>(i)];
        if (x.tensor->memory != o.tensor->memory || x.tensor->data != o.tensor->data) continue;
        const bool is_output = i < p.outputs;
        const bool same_view = !is_output && p.what != kind::reduce && p.what != kind::sort &&
                               x.offset == o.offset && x.strides == o.strides &&
                               x.dtype == o.dtype && x.tensor->byte_offset == o.tensor->byte_offset;
        if (same_view) continue;
        const uint32_t k = is_output ? out_k + static_cast<uint32_t>(i)
                                     : in_k + static_cast<uint32_t>(i - p.outputs);
        bad(k, str("shares memory with ", is_output ? "another output" : "the output",
                   " (argument ", s_.args[out_k + static_cast<uint32_t>(oi)].name,
                   is_output ? "); outputs must be distinct tensors"
                             : ") through another view; write to a new tensor, or update in "
                               "place through the same view"));
      }
    }
  }

  static const char* dn(int d) noexcept {
    const char* n = sdk::dtype_name_or_null(d);
    return n != nullptr ? n : "?";
  }

private:
  static bool empty_reduction(const program& p) noexcept {
    if (p.kept_elements == 0) return false; // nothing is written
    for (int d = p.rank - p.reduced; d < p.rank; ++d)
      if (p.shape[static_cast<size_t>(d)] == 0) return true;
    return false;
  }

  // Operand o's addressed elements lie in [0, its tensor's elements). `gather_axis` >= 0: that
  // dimension's extent is `gather_extent` instead of the shape's.
  void check_bounds(const program& p, int o, uint32_t prog_k, int gather_axis,
                    int64_t gather_extent) const {
    const operand& op = p.ops[static_cast<size_t>(o)];
    uint64_t have = 1;
    for (int32_t i = 0; i < op.tensor->ndim; ++i)
      if (op.tensor->shape[i] < 0 ||
          !sdk::mul_ok(have, static_cast<uint64_t>(op.tensor->shape[i]), have))
        bad(prog_k, str("operand ", o, ": its tensor's shape is invalid"));
    // lo/hi in 128-bit-safe steps: |stride| and extents are bounded so each product fits.
    int128 lo = op.offset, hi = op.offset;
    for (int d = 0; d < p.rank; ++d) {
      const int64_t ext = d == gather_axis ? gather_extent : p.shape[static_cast<size_t>(d)];
      if (ext <= 0) continue;
      const int128 span = static_cast<int128>(ext - 1) * op.strides[static_cast<size_t>(d)];
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= static_cast<int128>(have))
      bad(prog_k, str("operand ", o, " (", o == 0 ? "the output" : "an input",
                      "): its view addresses elements ", static_cast<int64_t>(lo), "..",
                      static_cast<int64_t>(hi), " of a tensor of ", have, " elements"));
  }

  void check_instruction(program& p, int k, uint32_t prog_k) const {
    const instruction& in = p.code[static_cast<size_t>(k)];
    auto no = [&](const std::string& why) {
      const char* n = op_name(in.op);
      bad(prog_k,
          str("instruction ", k, " (", n != nullptr ? n : "?", " ", dn(in.dtype), "): ", why));
    };
    if (op_name(in.op) == nullptr) no(str("unknown op code ", in.op));
    if (!is_dtype(in.dtype)) no(str("unknown dtype ", in.dtype));
    const int n = op_operands(in.op);
    const int64_t regs[3] = {in.a, in.b, in.c};
    // Words an instruction does not use must be 0 (sources use a; GATHER uses a, b and c).
    const int used = in.op == PCY_ARRAY_OP_GATHER  ? 3
                     : in.op == PCY_ARRAY_OP_STORE ? 2
                     : n == 0                      ? 1
                                                   : n;
    for (int i = used; i < 3; ++i)
      if (regs[i] != 0) no(str("its unused word ", i + 1, " is ", regs[i], ", expected 0"));
    int rd[3] = {0, 0, 0};
    for (int i = 0; i < n; ++i) {
      if (regs[i] < 0 || regs[i] >= k)
        no(str("operand ", i, " names register ", regs[i], ", not an earlier instruction"));
      rd[i] = p.code[static_cast<size_t>(regs[i])].dtype;
    }
    const int d = in.dtype;
    auto operand_ok = [&](int64_t o) { // the whole word: no truncation before the check
      if (o < p.outputs || o >= p.operands)
        no(str("operand ", o, " is not an input (", p.outputs, "..", p.operands - 1, ")"));
      const int t = p.ops[static_cast<size_t>(o)].dtype;
      if (t != d) no(str("input ", o, " has dtype ", dn(t)));
    };
    switch (in.op) {
    case PCY_ARRAY_OP_LOAD: operand_ok(in.a); return;
    case PCY_ARRAY_OP_CONST:
      if (!is_arith(d)) no("constants are numbers or bool");
      return;
    case PCY_ARRAY_OP_INDEX:
      if (d != PCY_DTYPE_I64) no("INDEX is i64");
      if (in.a < 0 || in.a >= p.rank) no(str("dimension ", in.a, " outside the rank ", p.rank));
      return;
    case PCY_ARRAY_OP_GATHER: {
      operand_ok(in.a);
      if (in.b < 0 || in.b >= k || p.code[static_cast<size_t>(in.b)].dtype != PCY_DTYPE_I64)
        no("the index register must be an earlier i64 register");
      if (in.c < 0 || in.c >= p.rank) no(str("dimension ", in.c, " outside the rank ", p.rank));
      if (in.extent < 1) no("the gathered axis' extent must be >= 1");
      if (p.elements > 0)
        check_bounds(p, static_cast<int>(in.a), prog_k, static_cast<int>(in.c), in.extent);
      return;
    }
    case PCY_ARRAY_OP_CAST: return; // any to any
    case PCY_ARRAY_OP_STORE: {
      if (in.a < 1 || in.a >= p.outputs)
        no(str("output ", in.a, " is not a further output (1..", p.outputs - 1, ")"));
      if (in.b < 0 || in.b >= k) no("the value must be an earlier register");
      const int t = p.ops[static_cast<size_t>(in.a)].dtype;
      if (d != t || p.code[static_cast<size_t>(in.b)].dtype != t)
        no(str("the value and the instruction must have output ", in.a, "'s dtype ", dn(t)));
      return;
    }
    case PCY_ARRAY_OP_WHERE:
      if (rd[0] != PCY_DTYPE_BOOL) no("the condition must be bool");
      if (rd[1] != d || rd[2] != d) no("both values must have the instruction's dtype");
      return;
    default: break;
    }
    if (!is_arith(d) && !is_compare(in.op))
      no("half types only load, cast and store: compute in f32");
    for (int i = 0; i < n; ++i)
      if (!is_arith(rd[i])) no("half types only load, cast and store: compute in f32");
    if (n == 2 && rd[0] != rd[1]) no(str("operands of dtypes ", dn(rd[0]), " and ", dn(rd[1])));
    const int t = rd[0];
    const bool ok = takes(in.op, t) && d == result_of(in.op, t);
    if (!ok) no(str("not defined for operands of dtype ", dn(t)));
  }

  const pcy_op_schema& s_;
  const sdk::op_args& a_;
};

// ---- each op's decoding, shared by the bundles --------------------------------------------------
// The program, the aliasing rules and the op's other arguments, checked; indices of the schema's
// arguments resolved at compile time (no name lookup per call).
template <const pcy_op_schema& S, int N, int O = 1>
inline void decode_eval(const sdk::op_args& a, program& p) {
  constexpr uint32_t prog = sdk::arg_index(S, "program"), out = sdk::arg_index(S, "out");
  const decoder dc(S, a);
  dc.decode(p, kind::eval, prog, out, out + O, N, O);
  dc.check_aliasing(p, out, out + O);
}
struct reduce_args {
  int kind;
  double correction;
};
template <const pcy_op_schema& S, int N>
inline reduce_args decode_reduce(const sdk::op_args& a, program& p) {
  constexpr uint32_t prog = sdk::arg_index(S, "program"), out = sdk::arg_index(S, "out"),
                     in0 = sdk::arg_index(S, "in0"), kind_k = sdk::arg_index(S, "kind"),
                     corr_k = sdk::arg_index(S, "correction");
  const decoder dc(S, a);
  dc.decode(p, kind::reduce, prog, out, in0, N);
  const int k = dc.reduce_kind(p, kind_k);
  dc.check_aliasing(p, out, in0);
  const double corr = a.f(corr_k);
  if (!std::isfinite(corr)) dc.bad(corr_k, "not finite");
  return {k, corr};
}
template <const pcy_op_schema& S, int N> inline int decode_scan(const sdk::op_args& a, program& p) {
  constexpr uint32_t prog = sdk::arg_index(S, "program"), out = sdk::arg_index(S, "out"),
                     in0 = sdk::arg_index(S, "in0"), kind_k = sdk::arg_index(S, "kind");
  const decoder dc(S, a);
  dc.decode(p, kind::scan, prog, out, in0, N);
  const int64_t k = a.i(kind_k);
  if (k != PCY_ARRAY_SCAN_SUM && k != PCY_ARRAY_SCAN_PROD)
    dc.bad(kind_k, str("unknown scan kind ", k));
  if (!is_number(p.result_dtype())) dc.bad(kind_k, "scans need a numeric value");
  dc.check_aliasing(p, out, in0);
  return static_cast<int>(k);
}

struct sort_args {
  int kind;
  bool descending;
};
template <const pcy_op_schema& S> inline sort_args decode_sort(const sdk::op_args& a, program& p) {
  constexpr uint32_t prog = sdk::arg_index(S, "program"), out = sdk::arg_index(S, "out"),
                     in0 = sdk::arg_index(S, "in0"), kind_k = sdk::arg_index(S, "kind"),
                     desc_k = sdk::arg_index(S, "descending");
  const decoder dc(S, a);
  dc.decode(p, kind::sort, prog, out, in0, 1);
  const int64_t k = a.i(kind_k), desc = a.i(desc_k);
  const int v = p.result_dtype(), o = p.ops[0].dtype;
  if (k != PCY_ARRAY_SORT_SORT && k != PCY_ARRAY_SORT_ARGSORT)
    dc.bad(kind_k, str("unknown sort kind ", k));
  if (!is_number(v) && !is_bool(v))
    dc.bad(kind_k, str("sorts need a bool or numeric value (value ", decoder::dn(v), ")"));
  if (k == PCY_ARRAY_SORT_SORT && v != o)
    dc.bad(kind_k, str("sort writes the value's dtype (value ", decoder::dn(v), ", output ",
                       decoder::dn(o), ")"));
  if (k == PCY_ARRAY_SORT_ARGSORT && o != PCY_DTYPE_I64)
    dc.bad(kind_k, str("argsort writes i64 (output ", decoder::dn(o), ")"));
  if (desc != 0 && desc != 1) dc.bad(desc_k, str("descending is ", desc, ", expected 0 or 1"));
  dc.check_aliasing(p, out, in0);
  return {static_cast<int>(k), desc != 0};
}

// The random op's output view ({R, shape[R], offset, strides[R]}) and distribution, checked
// against the output tensor: every bundle's op_random starts here.
struct random_call {
  int rank = 0;
  std::array<int64_t, max_rank> shape{}, strides{};
  int64_t offset = 0;
  uint64_t elements = 1;
  int64_t distribution = 0;
  int dtype = 0;
  uint64_t seed = 0, stream_offset = 0;
  double a = 0, b = 0;
};

inline random_call decode_random(const sdk::op_args& args) {
  const pcy_op_schema& S = pcy_array_random_schema;
  const uint32_t OUT = sdk::arg_index(S, "out"), VIEW = sdk::arg_index(S, "view"),
                 DIST = sdk::arg_index(S, "distribution");
  auto bad = [&](uint32_t k, const std::string& what) {
    fail(PCY_ERR_INVALID_ARGUMENT,
         str(S.extension, ".", S.name, ": argument ", S.args[k].name, ": ", what));
  };
  random_call v;
  const pcy_tensor& out = args.t(OUT);
  if (out.strides != nullptr) bad(OUT, "strided tensors are described by the view");
  const std::span<const int64_t> w = args.ints(VIEW);
  if (w.empty() || w[0] < 0 || w[0] > max_rank) bad(VIEW, "word 0: the rank is outside [0, 8]");
  v.rank = static_cast<int>(w[0]);
  if (w.size() != static_cast<size_t>(2 + 2 * v.rank))
    bad(VIEW, str(w.size(), " words, expected ", 2 + 2 * v.rank, " for rank ", v.rank));
  for (int d = 0; d < v.rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    v.shape[ud] = w[1 + ud];
    v.strides[ud] = w[2 + static_cast<size_t>(v.rank) + ud];
    if (v.shape[ud] < 0) bad(VIEW, str("word ", 1 + d, ": extent ", v.shape[ud], " < 0"));
    if (!sdk::mul_ok(v.elements, static_cast<uint64_t>(v.shape[ud]), v.elements) ||
        v.elements > (uint64_t{1} << 62))
      bad(VIEW, "the element count overflows");
  }
  v.offset = w[1 + static_cast<size_t>(v.rank)];
  uint64_t have = 1;
  for (int32_t i = 0; i < out.ndim; ++i)
    if (out.shape[i] < 0 || !sdk::mul_ok(have, static_cast<uint64_t>(out.shape[i]), have))
      bad(OUT, "its shape is invalid");
  if (v.elements > 0) {
    int128 lo = v.offset, hi = v.offset;
    for (int d = 0; d < v.rank; ++d) {
      const int128 span = static_cast<int128>(v.shape[static_cast<size_t>(d)] - 1) *
                          v.strides[static_cast<size_t>(d)];
      (span < 0 ? lo : hi) += span;
    }
    if (lo < 0 || hi >= static_cast<int128>(have))
      bad(VIEW, str("the view addresses elements ", static_cast<int64_t>(lo), "..",
                    static_cast<int64_t>(hi), " of a tensor of ", have, " elements"));
  }
  v.distribution = args.i(DIST);
  v.dtype = static_cast<int>(out.dtype);
  const int dt = v.dtype;
  const bool fl = is_float(dt) || is_half(dt);
  const bool ok =
      ((v.distribution == PCY_ARRAY_RANDOM_UNIFORM || v.distribution == PCY_ARRAY_RANDOM_NORMAL) &&
       fl) ||
      (v.distribution == PCY_ARRAY_RANDOM_BERNOULLI && is_dtype(dt)) ||
      (v.distribution == PCY_ARRAY_RANDOM_RANDINT && is_int(dt)) ||
      (v.distribution == PCY_ARRAY_RANDOM_BITS && dt == PCY_DTYPE_I64) ||
      (v.distribution == PCY_ARRAY_RANDOM_PERMUTATION &&
       (dt == PCY_DTYPE_I64 || (dt == PCY_DTYPE_I32 && v.elements <= (uint64_t{1} << 31))));
  if (!ok)
    bad(DIST, str("distribution ", v.distribution, " does not draw dtype ", decoder::dn(dt)));
  v.seed = static_cast<uint64_t>(args.i(sdk::arg_index(S, "seed")));
  v.stream_offset = static_cast<uint64_t>(args.i(sdk::arg_index(S, "offset")));
  v.a = args.f(sdk::arg_index(S, "a"));
  v.b = args.f(sdk::arg_index(S, "b"));
  if (v.distribution == PCY_ARRAY_RANDOM_RANDINT &&
      (!std::isfinite(v.a) || !std::isfinite(v.b) || !(v.b > v.a)))
    bad(sdk::arg_index(S, "b"), "randint needs finite a < b");
  return v;
}

// Dimensions merged where every operand addresses them as one (stride[d] == stride[d + 1] *
// shape[d + 1]), within the kept and within the reduced dimensions separately; size-1
// dimensions dropped. Bundles run fewer, longer loops; the result is the same.
struct collapsed {
  int rank = 0, reduced = 0;
  std::array<int64_t, max_rank> shape{};
  std::array<std::array<int64_t, max_rank>, max_operands> strides{};
  std::array<int64_t, max_operands> offset{};
};

// A program with INDEX or GATHER keeps its dimensions as they are (those name dimensions).
inline collapsed collapse(const program& p) {
  collapsed c;
  std::array<bool, max_rank> pinned{};
  bool keep = false;
  for (int k = 0; k < p.count; ++k) {
    const int op = p.code[static_cast<size_t>(k)].op;
    keep = keep || op == PCY_ARRAY_OP_INDEX || op == PCY_ARRAY_OP_GATHER;
  }
  if (keep) pinned.fill(true);
  for (int o = 0; o < p.operands; ++o)
    c.offset[static_cast<size_t>(o)] = p.ops[static_cast<size_t>(o)].offset;
  auto group = [&](int from, int to, int& out_count) {
    for (int d = from; d < to; ++d) {
      const int64_t ext = p.shape[static_cast<size_t>(d)];
      if (ext == 1 && !pinned[static_cast<size_t>(d)] && p.elements != 0) continue;
      const int prev = c.rank - 1;
      bool merge = out_count > 0 && !pinned[static_cast<size_t>(d)] && ext != 0;
      if (merge)
        for (int o = 0; o < p.operands && merge; ++o)
          merge = c.strides[static_cast<size_t>(o)][static_cast<size_t>(prev)] ==
                  p.ops[static_cast<size_t>(o)].strides[static_cast<size_t>(d)] * ext;
      if (merge && c.shape[static_cast<size_t>(prev)] != 0) {
        c.shape[static_cast<size_t>(prev)] *= ext;
        for (int o = 0; o < p.operands; ++o)
          c.strides[static_cast<size_t>(o)][static_cast<size_t>(prev)] =
              p.ops[static_cast<size_t>(o)].strides[static_cast<size_t>(d)];
      } else {
        c.shape[static_cast<size_t>(c.rank)] = ext;
        for (int o = 0; o < p.operands; ++o)
          c.strides[static_cast<size_t>(o)][static_cast<size_t>(c.rank)] =
              p.ops[static_cast<size_t>(o)].strides[static_cast<size_t>(d)];
        ++c.rank;
        ++out_count;
      }
    }
  };
  int kept = 0, red = 0;
  group(0, p.rank - p.reduced, kept);
  group(p.rank - p.reduced, p.rank, red);
  c.reduced = red;
  return c;
}

} // namespace parenchyma::array_bundle
