// parenchyma SDK, the bundle side of the extension kit: what every bundle of every extension
// needs around an op schema (pcy_bundle.h) — argument indices by name, resolved at compile time;
// a decoder that re-checks values (counts, increments, extents) with overflow-checked
// arithmetic and names the argument in every error; the 1.0 signature string derived from the
// schema; and the op-table builder that makes a bundle's pcy_op_desc array.
//
//   constexpr uint32_t C = sdk::arg_index(pcy_blas_gemm_schema, "C");   // a typo: no compile
//   sdk::decoder<pcy_blas_gemm_schema> dc(args, dtype);
//   const pcy_tensor& c = dc.matrix(C, m, n, LDC);   // LDC: the index of argument "ldc"
//
//   sdk::op_table<my_bundle> table;
//   table.add<op_gemm<float>, op_gemm<double>>(pcy_blas_gemm_schema, "cblas_sgemm", "cblas_dgemm");
//   std::span<const pcy_op_desc> ops() const { return table.ops(); }
#pragma once

#include <parenchyma/abi/pcy_bundle.h>
#include <parenchyma/sdk/bundle.hpp>
#include <parenchyma/sdk/extent.hpp>

#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace parenchyma::sdk {

// The index of the argument called `name`, always evaluated at compile time (consteval): a name
// the schema lacks does not compile, and no call pays for a name lookup.
consteval uint32_t arg_index(const pcy_op_schema& s, std::string_view name) {
  for (uint32_t i = 0; i < s.arg_count; ++i)
    if (std::string_view(s.args[i].name) == name) return i;
  throw "the op's schema has no argument of this name"; // not constant: a compile error
}

// The 1.0 signature string of a schema ("i s t< i t= i"), for 1.0 hosts.
inline std::string signature_of(const pcy_op_schema& s) {
  std::string sig;
  for (uint32_t i = 0; i < s.arg_count; ++i) {
    if (i) sig += ' ';
    switch (s.args[i].kind) {
    case PCY_SCHEMA_INT: sig += 'i'; break;
    case PCY_SCHEMA_FLOAT: sig += 'f'; break;
    case PCY_SCHEMA_SCALAR: sig += 's'; break;
    case PCY_SCHEMA_INT_ARRAY: sig += 'a'; break;
    case PCY_SCHEMA_TENSOR:
      sig += s.args[i].intent == PCY_INTENT_IN    ? "t<"
             : s.args[i].intent == PCY_INTENT_OUT ? "t>"
                                                  : "t=";
      break;
    default: sig += '?';
    }
  }
  return sig;
}

// A scalar slot: a host value, or a one-element tensor (then `tensor` is set).
struct scalar_arg {
  double value = 0;
  const pcy_tensor* tensor = nullptr;
  bool is_zero() const noexcept { return tensor == nullptr && value == 0; }
  bool is_one() const noexcept { return tensor == nullptr && value == 1; }
};

// A strided vector inside a tensor.
struct vec_arg {
  const pcy_tensor* t = nullptr;
  int64_t inc = 1;
};

// Re-checks an op call's values against what the op needs, naming the argument (from the
// schema) in each error: a bundle called by any host never reads or writes outside a tensor.
// A template on the schema, so that with the compile-time indices of arg_index every rule it
// reads (a fixed dtype, a name) is a constant.
template <const pcy_op_schema& S> class decoder {
public:
  decoder(const op_args& a, pcy_dtype dtype) noexcept : a_(a), dtype_(dtype) {}
  static constexpr const pcy_op_schema& s_ = S;

  const char* name(uint32_t k) const noexcept { return s_.args[k].name; }
  [[noreturn]] [[gnu::noinline]] [[gnu::cold]] void bad(pcy_status code, uint32_t k,
                                                        const std::string& what) const {
    fail(code, str(s_.extension, ".", s_.name, ": argument ", name(k), ": ", what));
  }

  PCY_SDK_HOT int64_t count(uint32_t k) const {
    const int64_t v = a_.i(k);
    if (v < 0) bad(PCY_ERR_INVALID_ARGUMENT, k, str(v, " < 0"));
    return v;
  }
  PCY_SDK_HOT bool flag(uint32_t k) const {
    const int64_t v = a_.i(k);
    if (v != 0 && v != 1) bad(PCY_ERR_INVALID_ARGUMENT, k, str(v, ", expected 0 or 1"));
    return v == 1;
  }
  // The element count of a tensor; a negative extent or a count beyond 2^64 is refused.
  PCY_SDK_HOT uint64_t elements(const pcy_tensor& t, uint32_t k) const {
    uint64_t n = 1;
    for (int32_t i = 0; i < t.ndim; ++i)
      if (t.shape[i] < 0 || !mul_ok(n, static_cast<uint64_t>(t.shape[i]), n))
        bad(PCY_ERR_INVALID_ARGUMENT, k,
            str("extent ", t.shape[i], " in dimension ", i,
                " is negative or overflows the element count"));
    return n;
  }
  // A dense tensor of the dtype the schema says (the op's, or a fixed one).
  PCY_SDK_HOT const pcy_tensor& tensor(uint32_t k) const {
    const pcy_tensor& t = a_.t(k);
    const pcy_dtype want =
        s_.args[k].dtype == PCY_SCHEMA_DTYPE_OP ? dtype_ : static_cast<pcy_dtype>(s_.args[k].dtype);
    if (t.dtype != want && s_.args[k].dtype != PCY_SCHEMA_DTYPE_ANY)
      bad(PCY_ERR_INVALID_ARGUMENT, k,
          str("dtype ", dtype_name(t.dtype), ", expected ", dtype_name(want)));
    if (t.strides != nullptr)
      bad(PCY_ERR_UNSUPPORTED, k, "strided; this bundle takes dense row-major tensors");
    return t;
  }
  PCY_SDK_HOT scalar_arg scalar(uint32_t k) const {
    scalar_arg s;
    if (a_.is_tensor(k)) {
      s.tensor = &tensor(k);
      if (elements(*s.tensor, k) != 1)
        bad(PCY_ERR_INVALID_ARGUMENT, k, "a scalar tensor must have one element");
    } else {
      s.value = a_.f(k);
    }
    return s;
  }
  // n elements of tensor `tk` with the increment in argument `ik`: 1 + (n - 1) * inc elements,
  // computed without wrapping.
  PCY_SDK_HOT vec_arg vector(uint32_t tk, uint32_t ik, int64_t n) const {
    vec_arg v{&tensor(tk), a_.i(ik)};
    if (v.inc < 1) bad(PCY_ERR_INVALID_ARGUMENT, ik, str(v.inc, ", expected >= 1"));
    if (n == 0) return v;
    const uint64_t have = elements(*v.t, tk);
    uint64_t need = 0;
    if (!vector_extent(n, v.inc, need) || need > have)
      bad(PCY_ERR_INVALID_ARGUMENT, tk,
          str(n, " elements with ", name(ik), " = ", v.inc, " do not fit in its ", have,
              " elements"));
    return v;
  }
  // A one-element tensor.
  PCY_SDK_HOT const pcy_tensor& result(uint32_t k) const {
    const pcy_tensor& t = tensor(k);
    if (elements(t, k) != 1) bad(PCY_ERR_INVALID_ARGUMENT, k, "must be a one-element tensor");
    return t;
  }
  // A rows x cols row-major matrix with leading dimension `ld` (argument `ldk`) inside tensor
  // `tk`: (rows - 1) * ld + cols elements, computed without wrapping.
  PCY_SDK_HOT const pcy_tensor& matrix(uint32_t tk, int64_t rows, int64_t cols,
                                       uint32_t ldk) const {
    const pcy_tensor& t = tensor(tk);
    const int64_t ld = a_.i(ldk);
    if (ld < (cols > 1 ? cols : 1))
      bad(PCY_ERR_INVALID_ARGUMENT, ldk,
          str(ld, " is smaller than the ", cols, " columns ", name(tk), " has as stored"));
    if (rows == 0 || cols == 0) return t;
    const uint64_t have = elements(t, tk);
    uint64_t need = 0;
    if (!matrix_extent(rows, cols, ld, need) || need > have)
      bad(PCY_ERR_INVALID_ARGUMENT, tk,
          str(rows, " x ", cols, " with ", name(ldk), " = ", ld, " does not fit in its ", have,
              " elements"));
    return t;
  }
  // `count` matrices of rows x cols with leading dimension `ld` (argument `ldk`) inside tensor
  // `tk` (any rank: its elements in row-major order), the i-th starting at element i * stride
  // (argument `sk`, >= 0): (count - 1) * stride + (rows - 1) * ld + cols elements, computed
  // without wrapping. `disjoint` (an output): matrices of count > 1 must not overlap, so the
  // stride is at least one matrix's extent.
  PCY_SDK_HOT const pcy_tensor& matrices(uint32_t tk, int64_t rows, int64_t cols, uint32_t ldk,
                                         uint32_t sk, int64_t count, bool disjoint) const {
    const pcy_tensor& t = tensor(tk);
    const int64_t ld = a_.i(ldk), stride = a_.i(sk);
    if (ld < (cols > 1 ? cols : 1))
      bad(PCY_ERR_INVALID_ARGUMENT, ldk,
          str(ld, " is smaller than the ", cols, " columns ", name(tk), " has as stored"));
    if (stride < 0) bad(PCY_ERR_INVALID_ARGUMENT, sk, str(stride, " < 0"));
    if (rows == 0 || cols == 0 || count == 0) return t;
    uint64_t one = 0, need = 0;
    if (!matrix_extent(rows, cols, ld, one) || !strided_extent(count, stride, one, need) ||
        need > elements(t, tk))
      bad(PCY_ERR_INVALID_ARGUMENT, tk,
          str(count, " matrices of ", rows, " x ", cols, " with ", name(ldk), " = ", ld, " and ",
              name(sk), " = ", stride, " do not fit in its ", elements(t, tk), " elements"));
    if (disjoint && count > 1 && static_cast<uint64_t>(stride) < one)
      bad(PCY_ERR_INVALID_ARGUMENT, sk,
          str(stride, " is smaller than the ", one, " elements one ", rows, " x ", cols,
              " matrix of ", name(tk), " spans: the outputs would overlap"));
    return t;
  }
  // An int array of exactly `count` values (count < 0: any).
  std::span<const int64_t> ints(uint32_t k, int64_t count = -1) const {
    const auto v = a_.ints(k);
    if (v.data() == nullptr && a_.i(k) != 0)
      bad(PCY_ERR_INVALID_ARGUMENT, k, "an int array without values (an ABI 1.0 host?)");
    if (count >= 0 && v.size() != static_cast<size_t>(count))
      bad(PCY_ERR_INVALID_ARGUMENT, k, str(v.size(), " values, expected ", count));
    return v;
  }

private:
  const op_args& a_;
  pcy_dtype dtype_;
};

// Vendor APIs index with 32-bit ints: refuse what does not fit instead of wrapping. `what`
// names the value in the error, which begins "<extension>.<op>: ".
PCY_SDK_HOT inline int to_int(int64_t v, const char* extension, const char* op, const char* what) {
  if (v > std::numeric_limits<int>::max() || v < std::numeric_limits<int>::min())
    fail(PCY_ERR_UNSUPPORTED, str(extension, ".", op, ": ", what, " = ", v,
                                  " exceeds the 32-bit range of this implementation; split the "
                                  "operation into smaller parts"));
  return static_cast<int>(v);
}
PCY_SDK_HOT inline int to_int(int64_t v, const pcy_op_schema& s, const char* what) {
  return to_int(v, s.extension, s.name, what);
}

// A bundle's op table: one pcy_op_desc per op and dtype, each carrying the extension's schema
// (1.1) and the signature derived from it (1.0), with stable storage for their strings.
template <class B> class op_table {
public:
  using fn = void (*)(typename B::context_type&, const op_args&);

  // signature_1_0: the extension's 1.0 signature where it differs from the one derived from the
  // schema (an OVERWRITE argument the 1.0 header passed as out: "t>"); it must name the same
  // argument kinds, and differs only in such arguments' intent.
  template <fn F>
  void add(const pcy_op_schema& schema, pcy_dtype dtype, std::string implementation,
           const char* signature_1_0 = nullptr) {
    strings_.push_back(signature_of(schema));
    if (signature_1_0 != nullptr) {
      const std::string derived = strings_.back();
      const std::string given = signature_1_0;
      bool same_shape = derived.size() == given.size();
      for (size_t i = 0, arg = 0; same_shape && i < given.size(); ++i) {
        if (given[i] == ' ') {
          ++arg;
          continue;
        }
        same_shape = given[i] == derived[i] ||
                     (given[i] == '>' && derived[i] == '=' && arg < schema.arg_count &&
                      schema.args[arg].intent == PCY_SCHEMA_INTENT_OVERWRITE);
      }
      if (!same_shape)
        throw std::logic_error(str("op_table: the 1.0 signature '", given, "' of ",
                                   schema.extension, ".", schema.name,
                                   " does not match its schema ('", derived, "')"));
      strings_.back() = given;
    }
    const char* sig = strings_.back().c_str();
    strings_.push_back(std::move(implementation));
    ops_.push_back(
        make_op(schema.name, dtype, sig, &op_entry<B, F>, strings_.back().c_str(), &schema));
  }
  // The usual pair: an f32 and an f64 implementation of one op.
  template <fn F32, fn F64>
  void add(const pcy_op_schema& schema, std::string impl_f32, std::string impl_f64,
           const char* signature_1_0 = nullptr) {
    add<F32>(schema, PCY_DTYPE_F32, std::move(impl_f32), signature_1_0);
    add<F64>(schema, PCY_DTYPE_F64, std::move(impl_f64), signature_1_0);
  }
  std::span<const pcy_op_desc> ops() const noexcept { return ops_; }

private:
  std::deque<std::string> strings_; // stable addresses for the descriptors' strings
  std::vector<pcy_op_desc> ops_;
};

} // namespace parenchyma::sdk
