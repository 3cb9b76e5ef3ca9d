// parenchyma array front-end: n-d arrays on any backend — elementwise arithmetic with NumPy
// broadcasting and type promotion, reductions, scans, views (reshape, transpose, slicing,
// broadcast, flip), creation and random numbers (header-only over the core; the programs run in
// the "array" bundle of the framework that serves them: docs/array.md).
//
//   namespace pa = parenchyma::array;
//   parenchyma::Backend b;
//   pa::Array x = pa::random::normal(b, {4096, 512}, /*seed=*/7);
//   pa::Array w = pa::ones(b, {512}, PCY_DTYPE_F32);
//   pa::Array y = pa::exp(x * w - 1.0) + pa::sin(x);   // recorded, not run
//   pa::Array s = pa::sum(y * y, {1});                  // one kernel: the chain and the sum
//   std::vector<float> host = s.to_vector<float>();
//
// Elementwise operations are lazy: each returns an Array holding an expression; the expression
// runs as ONE program (one kernel on a GPU) when its value is needed — read, reduced (the chain
// becomes the reduction's prologue), viewed, passed to another op, or when it grows past the
// fusion limits (64 operations, 8 distinct inputs). eval() runs it now. Reductions, scans,
// creation and random numbers run when called.
//
// Arrays are handles: copies share the value. Views (reshape of a dense array, permute_dims,
// slices, broadcast_to, flip, expand_dims, squeeze) share memory with their base, as NumPy's.
// Writing through a view (assign, the *_ functions) first runs every pending expression of this
// thread that reads the memory written, so lazy results never see later writes. Writes made
// outside this front-end (a SharedTensor's write(), a BLAS op) are not tracked: eval() the
// expressions that read a tensor before writing it another way.
//
// Errors: parenchyma::error with origin "array.<function>" naming the argument (a shape that
// does not broadcast, an axis out of range, a dtype an operation does not take).
#pragma once

#include <parenchyma/abi/ext/pcy_array.h>
#include <parenchyma/backend.hpp>
#include <parenchyma/blas.hpp>
#include <parenchyma/error.hpp>
#include <parenchyma/extension.hpp>
#include <parenchyma/shared_tensor.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace parenchyma::array {

using Shape = std::vector<int64_t>;
using dtype = pcy_dtype;

// ---- dtypes ------------------------------------------------------------------------------------
namespace dt {
constexpr dtype f16 = PCY_DTYPE_F16, bf16 = PCY_DTYPE_BF16, f32 = PCY_DTYPE_F32,
                f64 = PCY_DTYPE_F64, i8 = PCY_DTYPE_I8, i16 = PCY_DTYPE_I16, i32 = PCY_DTYPE_I32,
                i64 = PCY_DTYPE_I64, u8 = PCY_DTYPE_U8, boolean = PCY_DTYPE_BOOL;
} // namespace dt

constexpr bool is_floating(dtype t) noexcept {
  return t == dt::f16 || t == dt::bf16 || t == dt::f32 || t == dt::f64;
}
constexpr bool is_integer(dtype t) noexcept {
  return t == dt::i8 || t == dt::i16 || t == dt::i32 || t == dt::i64 || t == dt::u8;
}
constexpr bool is_signed_integer(dtype t) noexcept { return is_integer(t) && t != dt::u8; }
constexpr bool is_bool(dtype t) noexcept { return t == dt::boolean; }
constexpr bool is_half(dtype t) noexcept { return t == dt::f16 || t == dt::bf16; }
inline const char* name_of(dtype t) noexcept { return sdk::dtype_name(t); }

namespace detail {
constexpr int int_bits(dtype t) noexcept {
  switch (t) {
  case PCY_DTYPE_I8: return 8;
  case PCY_DTYPE_U8: return 8;
  case PCY_DTYPE_I16: return 16;
  case PCY_DTYPE_I32: return 32;
  case PCY_DTYPE_I64: return 64;
  default: return 0;
  }
}
constexpr dtype signed_of_bits(int bits) noexcept {
  return bits <= 8 ? dt::i8 : bits <= 16 ? dt::i16 : bits <= 32 ? dt::i32 : dt::i64;
}
constexpr int float_rank(dtype t) noexcept { // f16, bf16 < f32 < f64
  return t == dt::f64 ? 3 : t == dt::f32 ? 2 : 1;
}
} // namespace detail

// The dtype of a binary operation on arrays of dtypes a and b (NumPy 2's promotion, which the
// Array API standard's table is a part of): bool < integers < floating; u8 with a signed type
// widens to the next signed size (u8 + i8 = i16); an integer with a floating type gives the
// floating type, widened to f64 for i32/i64 with f16/bf16/f32 (as NumPy); f16 with bf16 gives f32.
constexpr dtype promote(dtype a, dtype b) noexcept {
  if (a == b) return a;
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  if (is_integer(a) && is_integer(b)) {
    const bool ua = a == dt::u8, ub = b == dt::u8;
    const int ba = detail::int_bits(a), bb = detail::int_bits(b);
    if (ua == ub) return ba >= bb ? a : b;
    const int ubits = ua ? ba : bb, sbits = ua ? bb : ba;
    return detail::signed_of_bits(sbits > ubits ? sbits : ubits * 2);
  }
  if (is_floating(a) && is_floating(b)) {
    if (is_half(a) && is_half(b)) return dt::f32;
    return detail::float_rank(a) >= detail::float_rank(b) ? a : b;
  }
  const dtype f = is_floating(a) ? a : b, i = is_floating(a) ? b : a;
  const int bits = detail::int_bits(i);
  if (f == dt::f64) return f;
  if (bits >= 32) return dt::f64;
  if (bits == 16 && is_half(f)) return dt::f32;
  return f;
}

// ---- the expression graph ----------------------------------------------------------------------
namespace detail {

struct Node {
  enum class kind : uint8_t { leaf, scalar, op };
  kind k = kind::leaf;
  dtype type = dt::f32;
  bool weak = false; // a Python-style scalar: its kind counts, not its size
  Shape shape;
  // leaf: a view of a tensor
  std::shared_ptr<TensorStorage> storage;
  int64_t offset = 0;
  Shape strides; // elements
  // scalar: the CONST word (pcy_array.h)
  int64_t word = 0;
  // op: an instruction over up to three children
  int op = 0;
  std::shared_ptr<Node> a, b, c;
  uint32_t size = 1; // operations in the tree (the fusion limit)
  // A pending expression whose input was overwritten by a fused in-place write it was part of,
  // while something else still held it: running it now would read the new values.
  bool stale = false;
};
using NodePtr = std::shared_ptr<Node>;

// Nodes are recycled per thread: a released node (its children released, its shape and strides
// cleared, their capacity kept) goes to this thread's free list, and its shared_ptr control
// block to a list of blocks of that size, so building and running an expression allocates
// nothing once a thread has warmed up (the host cost of a small op: docs/array.md). A node
// released on another thread than the one that made it joins that thread's lists. Under
// AddressSanitizer nodes are plain allocations (use after free stays visible).
#if defined(__SANITIZE_ADDRESS__)
#define PCY_ARRAY_NODE_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PCY_ARRAY_NODE_POOL 0
#endif
#endif
#ifndef PCY_ARRAY_NODE_POOL
#define PCY_ARRAY_NODE_POOL 1
#endif
struct node_pool {
  static constexpr size_t keep = 4096; // nodes and blocks kept per thread at most
  static constexpr size_t block_bytes = 64;
  struct free_block {
    free_block* next;
  };
  std::vector<Node*> nodes;
  free_block* blocks = nullptr;
  size_t block_count = 0;
};
// The lists, valid until the thread's destructors run (then nullptr: plain delete).
struct node_pool_slot {
  node_pool* pool = nullptr;
  bool dead = false;
};
inline node_pool_slot& node_pool_here() noexcept {
  thread_local node_pool_slot slot; // trivially destructible: usable during thread exit
  return slot;
}
inline node_pool* node_pool_get() {
  node_pool_slot& s = node_pool_here();
  if (s.pool == nullptr && !s.dead) {
    struct owner {
      node_pool pool;
      ~owner() {
        node_pool_slot& sl = node_pool_here();
        sl.pool = nullptr;
        sl.dead = true;
        for (Node* n : pool.nodes)
          delete n;
        while (pool.blocks != nullptr) {
          node_pool::free_block* b = pool.blocks;
          pool.blocks = b->next;
          ::operator delete(b);
        }
      }
    };
    thread_local owner o;
    s.pool = &o.pool;
    s.pool->nodes.reserve(64);
  }
  return s.pool;
}
// The control blocks' allocator: blocks of block_bytes from the thread's list.
template <class T> struct node_block_alloc {
  using value_type = T;
  node_block_alloc() = default;
  template <class U> node_block_alloc(const node_block_alloc<U>&) noexcept {} // NOLINT
  T* allocate(size_t n) {
    if (n * sizeof(T) <= node_pool::block_bytes) {
      if (node_pool* p = node_pool_get(); p != nullptr && p->blocks != nullptr) {
        node_pool::free_block* b = p->blocks;
        p->blocks = b->next;
        --p->block_count;
        return reinterpret_cast<T*>(b);
      }
      return static_cast<T*>(::operator new(node_pool::block_bytes));
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* q, size_t n) noexcept {
    if (n * sizeof(T) <= node_pool::block_bytes) {
      node_pool_slot& s = node_pool_here();
      if (s.pool != nullptr && s.pool->block_count < node_pool::keep) {
        auto* b = reinterpret_cast<node_pool::free_block*>(q);
        b->next = s.pool->blocks;
        s.pool->blocks = b;
        ++s.pool->block_count;
        return;
      }
    }
    ::operator delete(q);
  }
  template <class U> bool operator==(const node_block_alloc<U>&) const noexcept { return true; }
};
struct node_recycler {
  void operator()(Node* n) const noexcept {
    // Children first (they may recycle in turn), then this node, reset to a default leaf.
    n->a.reset();
    n->b.reset();
    n->c.reset();
    n->storage.reset();
    node_pool_slot& s = node_pool_here();
    if (s.pool == nullptr || s.pool->nodes.size() >= node_pool::keep) {
      delete n;
      return;
    }
    n->k = Node::kind::leaf;
    n->type = PCY_DTYPE_F32;
    n->weak = false;
    n->shape.clear();
    n->offset = 0;
    n->strides.clear();
    n->word = 0;
    n->op = 0;
    n->size = 1;
    n->stale = false;
    try {
      s.pool->nodes.push_back(n);
    } catch (...) {
      delete n;
    }
  }
};
// A new default node (kind leaf, no shape).
inline NodePtr new_node() {
#if PCY_ARRAY_NODE_POOL
  node_pool* p = node_pool_get();
  Node* n = nullptr;
  if (p != nullptr && !p->nodes.empty()) {
    n = p->nodes.back();
    p->nodes.pop_back();
  } else {
    n = new Node();
  }
  try {
    return NodePtr(n, node_recycler{}, node_block_alloc<Node>{});
  } catch (...) {
    delete n;
    throw;
  }
#else
  return std::make_shared<Node>();
#endif
}

inline Shape dense_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return st;
}
// Whether `strides` are the dense row-major strides of `s` (dense_strides(s)), not allocating.
inline bool is_dense(const Shape& s, const Shape& strides) {
  if (strides.size() != s.size()) return false;
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (strides[i] != acc) return false;
    acc *= s[i] > 0 ? s[i] : 1;
  }
  return true;
}
inline uint64_t count_of(const Shape& s) {
  uint64_t n = 1;
  for (int64_t e : s)
    n *= static_cast<uint64_t>(e);
  return n;
}
inline std::string shape_str(const Shape& v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}
template <class... A> [[noreturn]] void fail(const char* fn, errc code, const A&... parts) {
  std::ostringstream os;
  (os << ... << ext::message_part(parts));
  throw error(code, std::string("array.") + fn, os.str());
}

// Expressions not yet run that read a tensor directly (an operand that is a view of it), of
// this thread (weak: a dropped expression is never run). Running such an expression turns it
// into a view of its result, so its parents no longer read the tensor: a write into a tensor
// needs to run only the entries naming it.
struct pending_entry {
  std::weak_ptr<Node> node;
  const TensorStorage* reads;
};
struct pending_list {
  std::vector<pending_entry> entries;
  size_t compact_at = 64;
  // One bit per tensor some entry reads (a hash of its address; a superset, recomputed when the
  // list is compacted): a write into a tensor whose bit is clear has no reader to run and skips
  // the scan, which is the common case of a loop writing its own targets.
  uint64_t may_read = 0;
};
// The tensor's bit in pending_list::may_read.
inline uint64_t storage_bit(const TensorStorage* t) noexcept {
  const uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(t) >> 4) *
                     0x9E3779B97F4A7C15ull; // Fibonacci hashing: the top 6 bits pick the bit
  return uint64_t{1} << (h >> 58);
}
inline pending_list& pending() {
  thread_local pending_list list;
  return list;
}

} // namespace detail

class Array;
Array wrap(const Backend& backend, TensorStorage& tensor);

// An n-d array on a backend: a view of a tensor, or a pending expression (see above).
class Array {
public:
  Array() = default;
  // A view of the whole tensor (borrowed: the tensor must outlive the Array and every Array
  // made from it). Prefer wrap(); this form takes the backend from the other operands.
  template <class T> Array(SharedTensor<T>& t) : Array(borrow(t.storage())) {} // NOLINT

  // A new uninitialised array (its own tensor) on `backend`.
  Array(const Backend& backend, Shape shape, dtype type) : backend_(backend) {
    auto st = std::make_shared<TensorStorage>(type, shape);
    node_ = leaf(std::move(st), 0, detail::dense_strides(shape), shape);
  }

  bool valid() const noexcept { return node_ != nullptr; }
  dtype type() const { return n().type; }
  const Shape& shape() const { return n().shape; }
  size_t ndim() const { return n().shape.size(); }
  uint64_t size() const { return detail::count_of(n().shape); }
  const std::optional<Backend>& backend() const noexcept { return backend_; }
  bool is_pending() const { return n().k == detail::Node::kind::op; }
  bool is_view() const { return n().k == detail::Node::kind::leaf; }

  // Runs the pending expression (no-op for a view) and returns *this.
  Array& eval();
  Array& eval(const Backend& backend) {
    if (!backend_) backend_ = backend;
    return eval();
  }
  // The tensor and the view: valid after eval() (a scalar becomes a one-element tensor).
  TensorStorage& storage() {
    eval();
    return *n().storage;
  }
  int64_t offset() const { return n().offset; }
  const Shape& strides() const { return n().strides; }
  // Whether the view is the whole of its tensor, dense and in order.
  bool is_dense_whole() const;

  // The values, row-major, on the host (runs what is pending; one device-to-host read).
  template <class T> std::vector<T> to_vector() const;
  // A one-element array's value.
  template <class T> T item() const {
    if (size() != 1)
      detail::fail("item", errc::invalid_argument, "the array has ", size(),
                   " elements; item() needs exactly one");
    return to_vector<T>()[0];
  }

  // ---- views ----
  Array reshape(Shape shape) const;
  Array permute_dims(std::vector<int64_t> axes) const;
  Array T() const; // 2-d transpose (matrix); mT for the last two axes
  Array mT() const;
  Array expand_dims(int64_t axis) const;
  Array squeeze(std::vector<int64_t> axes) const;
  Array broadcast_to(Shape shape) const;
  Array flip(std::vector<int64_t> axes = {}) const;
  // x.slice(axis, start, stop, step): Python's slice semantics (negative values count from the
  // end, out-of-range values clamp); stop = npos: to the end.
  static constexpr int64_t npos = std::numeric_limits<int64_t>::max();
  Array slice(int64_t axis, int64_t start, int64_t stop = npos, int64_t step = 1) const;
  // x.at(i): index i along axis 0, removing that axis.
  Array at(int64_t index, int64_t axis = 0) const;
  // x[{2, pa::slice(1, pa::end, 2), pa::newaxis, pa::ellipsis}]: NumPy's basic indexing (integers
  // remove their axis, slices keep it — pa::slice() is `:` —, newaxis inserts one, one ellipsis
  // stands for the axes not named); a view.
  struct index_item;
  Array operator[](std::initializer_list<index_item> items) const;
  // A dense copy (always a new tensor).
  Array copy() const;
  Array astype(dtype type) const;

  // ---- writes into this view ----
  // this[...] = value (broadcast to this view's shape, cast to its dtype).
  void assign(const Array& value);
  void assign(double value);

  // internals for the free functions
  explicit Array(detail::NodePtr n, std::optional<Backend> b = std::nullopt)
      : node_(std::move(n)), backend_(std::move(b)) {}
  const detail::NodePtr& node() const noexcept { return node_; }
  static detail::NodePtr leaf(std::shared_ptr<TensorStorage> st, int64_t offset, Shape strides,
                              Shape shape) {
    auto l = detail::new_node();
    l->k = detail::Node::kind::leaf;
    l->type = st->dtype();
    l->shape = std::move(shape);
    l->strides = std::move(strides);
    l->offset = offset;
    l->storage = std::move(st);
    return l;
  }
  const Backend& need_backend(const char* fn) const {
    if (!backend_)
      detail::fail(fn, errc::invalid_argument,
                   "the array has no backend (made from a SharedTensor alone); use "
                   "pa::wrap(backend, tensor) or eval(backend)");
    return *backend_;
  }

private:
  friend Array wrap(const Backend& backend, TensorStorage& tensor);
  static Array borrow(TensorStorage& t) {
    std::shared_ptr<TensorStorage> st(std::shared_ptr<TensorStorage>(), &t); // non-owning
    return Array(leaf(std::move(st), 0, detail::dense_strides(t.shape()), t.shape()));
  }
  const detail::Node& n() const {
    if (!node_) detail::fail("Array", errc::invalid_argument, "an empty Array (default-made)");
    return *node_;
  }
  detail::NodePtr node_;
  std::optional<Backend> backend_;
};

// A view of the whole tensor on `backend` (borrowed: the tensor outlives the Array).
inline Array wrap(const Backend& backend, TensorStorage& tensor) {
  Array a = Array::borrow(tensor);
  a.backend_ = backend;
  return a;
}
template <class T> Array wrap(const Backend& backend, SharedTensor<T>& t) {
  return wrap(backend, t.storage());
}

// ---- the program compiler
// ------------------------------------------------------------------------
namespace detail {

inline constexpr uint32_t max_fused_ops = 64;

inline std::optional<Backend> pick_backend(const std::optional<Backend>& x,
                                           const std::optional<Backend>& y, const char* fn) {
  if (x && y && !(*x == *y))
    fail(fn, errc::invalid_argument, "the operands live on different backends (", x->name(),
         " and ", y->name(), "); move one with pa::to(backend, x)");
  return x ? x : y;
}

// 0, 1, 2, ...: the identity permutation of up to 64 dimensions, as a span.
inline constexpr auto iota_dims = [] {
  std::array<int64_t, 64> v{};
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<int64_t>(i);
  return v;
}();
inline std::span<const int64_t> identity(size_t r) {
  if (r > iota_dims.size())
    fail("eval", errc::invalid_argument, "an array of rank ", r, "; the limit is ",
         iota_dims.size());
  return {iota_dims.data(), r};
}

struct emitter_input {
  const Node* leaf;
  std::shared_ptr<TensorStorage> storage;
  int64_t offset;
  size_t strides; // where its strides over the index space start in the strides buffer
};
// An emitter's buffers, reused: a thread keeps those of finished emitters (their capacity), so
// emitting and running a program allocates nothing after warm-up.
struct emitter_buffers {
  std::vector<int64_t> perm, code, strides, words, over_root;
  std::vector<emitter_input> inputs;
  std::vector<std::pair<const Node*, int>> seen;
  void clear() noexcept {
    perm.clear();
    code.clear();
    strides.clear();
    // words: kept at its size; program() overwrites all of it (a resize to the same size is
    // free, a resize from empty fills zeros first)
    over_root.clear();
    inputs.clear();
    seen.clear();
  }
};
inline std::vector<std::unique_ptr<emitter_buffers>>& spare_emitter_buffers() {
  thread_local std::vector<std::unique_ptr<emitter_buffers>> spare;
  return spare;
}

// A program over an index space of `shape`: leaves map into it by right-aligned broadcasting
// and then `perm` (index-space dimension j is the broadcast root's dimension perm[j]).
class emitter {
public:
  // `outputs`: operands 0..outputs-1 are outputs (multi-output evals); inputs follow.
  emitter(const Shape& root, std::span<const int64_t> perm, int outputs = 1)
      : root_(root), outputs_(outputs) {
    auto& spare = spare_emitter_buffers();
    if (spare.empty()) {
      buf_ = std::make_unique<emitter_buffers>();
    } else {
      buf_ = std::move(spare.back());
      spare.pop_back();
    }
    buf_->perm.assign(perm.begin(), perm.end());
  }
  emitter(const emitter&) = delete;
  emitter& operator=(const emitter&) = delete;
  ~emitter() {
    buf_->clear();
    auto& spare = spare_emitter_buffers();
    if (spare.size() < 8) {
      try {
        spare.push_back(std::move(buf_));
      } catch (...) { // buf_ is freed
      }
    }
  }

  using input = emitter_input;

  // Registers the tree; returns its register, or -1 when it needs more than 8 inputs.
  int emit(const Node& x) {
    for (const auto& [node, r] : buf_->seen)
      if (node == &x) return r;
    int r = -1;
    switch (x.k) {
    case Node::kind::leaf: {
      const int o = operand(x);
      if (o < 0) return -1;
      r = push(PCY_ARRAY_OP_LOAD, x.type, o, 0, 0);
      break;
    }
    case Node::kind::scalar: r = push(PCY_ARRAY_OP_CONST, x.type, x.word, 0, 0); break;
    case Node::kind::op: {
      if (x.stale)
        fail("eval", errc::invalid_argument,
             "this expression was part of a value written into one of its own inputs (assign) "
             "and now reads the written values; eval() it before that write to keep its value");
      int ra = -1, rb = 0, rc = 0;
      if ((ra = emit(*x.a)) < 0) return -1;
      if (x.b && (rb = emit(*x.b)) < 0) return -1;
      if (x.c && (rc = emit(*x.c)) < 0) return -1;
      r = push(x.op, x.type, ra, rb, rc);
      break;
    }
    }
    buf_->seen.emplace_back(&x, r);
    return r;
  }
  int cast_to(int reg, dtype from, dtype to) {
    return from == to ? reg : push(PCY_ARRAY_OP_CAST, to, reg, 0, 0);
  }
  int push(int op, dtype t, int64_t a, int64_t b, int64_t c) {
    push_word(PCY_ARRAY_WORD(op, t), a, b, c);
    return static_cast<int>(buf_->code.size() / 4 - 1);
  }
  void push_word(int64_t w0, int64_t a, int64_t b, int64_t c) {
    std::vector<int64_t>& code = buf_->code; // (an initializer-list insert is the slow path)
    code.push_back(w0);
    code.push_back(a);
    code.push_back(b);
    code.push_back(c);
  }
  // The operand number of a leaf whose strides are already over the index space.
  int operand_of(const Node& leaf) { return add_input(leaf, leaf.strides); }
  const std::vector<input>& inputs() const noexcept { return buf_->inputs; }
  size_t instructions() const noexcept { return buf_->code.size() / 4; }

  // The whole program with the output operand's view (offset, strides over the index space);
  // valid until the emitter is destroyed or program() is called again.
  const std::vector<int64_t>& program(int reduced, int64_t out_offset,
                                      std::span<const int64_t> out_strides) const {
    const std::pair<int64_t, std::span<const int64_t>> out[] = {{out_offset, out_strides}};
    return program(reduced, out);
  }
  // With the views of every output (offset, strides over the index space).
  const std::vector<int64_t>&
  program(int reduced, std::span<const std::pair<int64_t, std::span<const int64_t>>> outs) const {
    const std::vector<int64_t>& perm = buf_->perm;
    const size_t r = perm.size();
    const size_t operands = buf_->inputs.size() + outs.size();
    std::vector<int64_t>& w = buf_->words;
    size_t total = PCY_ARRAY_HEADER_WORDS + r + buf_->inputs.size() * (r + 1) + buf_->code.size();
    for (const auto& o : outs)
      total += 1 + o.second.size();
    w.resize(total); // sized once, then written in place
    int64_t* p = w.data();
    *p++ = PCY_ARRAY_PROGRAM_VERSION;
    *p++ = static_cast<int64_t>(r);
    *p++ = reduced;
    *p++ = static_cast<int64_t>(operands);
    *p++ = static_cast<int64_t>(buf_->code.size() / 4);
    for (size_t j = 0; j < r; ++j)
      *p++ = root_[static_cast<size_t>(perm[j])];
    for (const auto& [offset, strides] : outs) {
      *p++ = offset;
      p = std::copy(strides.begin(), strides.end(), p);
    }
    for (const input& in : buf_->inputs) {
      *p++ = in.offset;
      const int64_t* st = buf_->strides.data() + in.strides;
      p = std::copy(st, st + r, p);
    }
    std::copy(buf_->code.begin(), buf_->code.end(), p);
    return w;
  }

private:
  // The input (leaf's tensor, offset, strides over the index space), added unless present;
  // -1 past the op's input limit.
  int add_input(const Node& x, std::span<const int64_t> st) {
    std::vector<input>& ins = buf_->inputs;
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i].storage.get() == x.storage.get() && ins[i].offset == x.offset &&
          std::equal(st.begin(), st.end(),
                     buf_->strides.begin() + static_cast<ptrdiff_t>(ins[i].strides)))
        return static_cast<int>(i) + outputs_;
    if (ins.size() >= (outputs_ == 1 ? size_t{PCY_ARRAY_MAX_INPUTS} : size_t{6})) return -1;
    const size_t at = buf_->strides.size();
    buf_->strides.insert(buf_->strides.end(), st.begin(), st.end());
    ins.push_back({&x, x.storage, x.offset, at});
    return static_cast<int>(ins.size()) - 1 + outputs_;
  }
  int operand(const Node& x) {
    // The leaf's strides over the root's dimensions (right-aligned, 0 where broadcast), then
    // permuted into the index space.
    const size_t R = root_.size(), L = x.shape.size();
    std::vector<int64_t>& over_root = buf_->over_root;
    over_root.assign(R + buf_->perm.size(), 0);
    for (size_t d = 0; d < L; ++d) {
      const size_t rd = R - L + d;
      over_root[rd] = x.shape[d] == 1 && root_[rd] != 1 ? 0 : x.strides[d];
    }
    int64_t* st = over_root.data() + R;
    for (size_t j = 0; j < buf_->perm.size(); ++j)
      st[j] = over_root[static_cast<size_t>(buf_->perm[j])];
    return add_input(x, std::span<const int64_t>(st, buf_->perm.size()));
  }
  const Shape& root_;
  int outputs_ = 1;
  std::unique_ptr<emitter_buffers> buf_;
};

inline std::vector<int64_t> identity_perm(size_t r) {
  std::vector<int64_t> p(r);
  for (size_t i = 0; i < r; ++i)
    p[i] = static_cast<int64_t>(i);
  return p;
}

// The op keys of an op's variants by input count: one static key per (variant, dtype), so a
// call resolves with an index after its first use, never a name.
using key_fn = const OpKey& (*)(pcy_dtype) noexcept;
inline constexpr key_fn eval_keys[] = {
    &ext::op_key<pcy_array_eval_0_schema>, &ext::op_key<pcy_array_eval_1_schema>,
    &ext::op_key<pcy_array_eval_2_schema>, &ext::op_key<pcy_array_eval_3_schema>,
    &ext::op_key<pcy_array_eval_4_schema>, &ext::op_key<pcy_array_eval_5_schema>,
    &ext::op_key<pcy_array_eval_6_schema>, &ext::op_key<pcy_array_eval_7_schema>,
    &ext::op_key<pcy_array_eval_8_schema>};
inline constexpr key_fn reduce_keys[] = {
    &ext::op_key<pcy_array_reduce_1_schema>, &ext::op_key<pcy_array_reduce_2_schema>,
    &ext::op_key<pcy_array_reduce_3_schema>, &ext::op_key<pcy_array_reduce_4_schema>};
inline constexpr key_fn evalm2_keys[] = {
    &ext::op_key<pcy_array_evalm2_0_schema>, &ext::op_key<pcy_array_evalm2_1_schema>,
    &ext::op_key<pcy_array_evalm2_2_schema>, &ext::op_key<pcy_array_evalm2_3_schema>,
    &ext::op_key<pcy_array_evalm2_4_schema>, &ext::op_key<pcy_array_evalm2_5_schema>,
    &ext::op_key<pcy_array_evalm2_6_schema>};
inline constexpr key_fn evalm3_keys[] = {
    &ext::op_key<pcy_array_evalm3_0_schema>, &ext::op_key<pcy_array_evalm3_1_schema>,
    &ext::op_key<pcy_array_evalm3_2_schema>, &ext::op_key<pcy_array_evalm3_3_schema>,
    &ext::op_key<pcy_array_evalm3_4_schema>, &ext::op_key<pcy_array_evalm3_5_schema>,
    &ext::op_key<pcy_array_evalm3_6_schema>};
inline constexpr key_fn scan_keys[] = {&ext::op_key<pcy_array_scan_1_schema>,
                                       &ext::op_key<pcy_array_scan_2_schema>};
inline constexpr key_fn sort_keys[] = {&ext::op_key<pcy_array_sort_1_schema>};

// Programs this thread has run (each one op call: one kernel on a GPU); tests count fusion by it.
inline uint64_t& programs_run() noexcept {
  thread_local uint64_t n = 0;
  return n;
}

// Runs the variant of `keys` for the emitter's input count (keys[0] takes `first` inputs) with
// the program, the output, the op's other arguments (`extra`, after the output) and the inputs.
inline void run_program(const Backend& b, std::span<const key_fn> keys, size_t first,
                        dtype op_dtype, std::span<const int64_t> words, TensorStorage& out,
                        bool out_whole, std::span<TensorStorage* const> inputs,
                        std::span<const OpArg> extra) {
  const size_t n = inputs.size();
  if (n < first || n - first >= keys.size())
    fail("eval", errc::internal, "no variant of the op takes ", n, " inputs");
  if (2 + extra.size() + n > 24) fail("eval", errc::internal, "too many arguments");
  // Room for the arguments, constructed one by one (not 24 value-initialised ones per call).
  union slots {
    OpArg a[24];
    slots() noexcept {}
  } args;
  size_t k = 0;
  std::construct_at(&args.a[k++], OpArg::integers(words));
  // An output nobody wrote yet is OUT even where the view covers part of it (the rest stays
  // undefined, as empty()'s).
  std::construct_at(&args.a[k++],
                    out_whole || !out.initialized() ? OpArg::out(out) : OpArg::inout(out));
  for (const OpArg& x : extra)
    std::construct_at(&args.a[k++], x);
  for (TensorStorage* in : inputs)
    std::construct_at(&args.a[k++], OpArg::in(*in));
  b.invoke(keys[n - first](op_dtype), std::span<const OpArg>(args.a, k));
  ++programs_run();
}
inline void run_program(const Backend& b, std::span<const key_fn> keys, size_t first,
                        dtype op_dtype, const std::vector<int64_t>& words, TensorStorage& out,
                        bool out_whole, const emitter& e, std::span<const OpArg> extra) {
  std::array<TensorStorage*, 24> in;
  size_t n = 0;
  for (const auto& x : e.inputs())
    in[n < in.size() ? n++ : n] = x.storage.get();
  if (n != e.inputs().size()) fail("eval", errc::internal, "too many arguments");
  run_program(b, keys, first, op_dtype, words, out, out_whole,
              std::span<TensorStorage* const>(in.data(), n), extra);
}

} // namespace detail

// ---- building expressions
// ------------------------------------------------------------------------
namespace detail {

// The broadcast shape of x and y into `out` (out.size() >= max rank); its rank.
[[noreturn]] [[gnu::cold]] [[gnu::noinline]] inline void
broadcast_failed(std::span<const int64_t> x, std::span<const int64_t> y, size_t limit, size_t i,
                 int64_t a, int64_t b, const char* fn) {
  const size_t r = std::max(x.size(), y.size());
  if (r > limit) fail(fn, errc::invalid_argument, "an array of rank ", r, "; the limit is ", limit);
  fail(fn, errc::invalid_argument, "shapes ", shape_str(Shape(x.begin(), x.end())), " and ",
       shape_str(Shape(y.begin(), y.end())), " do not broadcast (dimension ", i, ": ", a, " and ",
       b, "); each pair of trailing dimensions must be equal or 1");
}
inline size_t broadcast_into(std::span<int64_t> out, std::span<const int64_t> x,
                             std::span<const int64_t> y, const char* fn) {
  const size_t r = std::max(x.size(), y.size());
  if (r > out.size()) [[unlikely]]
    broadcast_failed(x, y, out.size(), 0, 0, 0, fn);
  // The common cases: a scalar beside an array, or equal shapes.
  if (y.empty() || (x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin()))) {
    std::copy(x.begin(), x.end(), out.begin());
    return r;
  }
  if (x.empty()) {
    std::copy(y.begin(), y.end(), out.begin());
    return r;
  }
  for (size_t i = 0; i < r; ++i) {
    const int64_t a = i < r - x.size() ? 1 : x[i - (r - x.size())];
    const int64_t b = i < r - y.size() ? 1 : y[i - (r - y.size())];
    if (a != b && a != 1 && b != 1) [[unlikely]]
      broadcast_failed(x, y, out.size(), i, a, b, fn);
    out[i] = a == 1 ? b : a;
  }
  return r;
}
// Room for a broadcast shape on the stack (ranks up to 64, as identity()).
using shape_buffer = std::array<int64_t, 64>;
inline Shape broadcast_shapes(const Shape& x, const Shape& y, const char* fn) {
  shape_buffer buf;
  const size_t r = broadcast_into(buf, x, y, fn);
  return Shape(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(r));
}

// The CONST word of value v in dtype t (pcy_array.h).
inline int64_t const_word(double v, dtype t) {
  if (is_floating(t)) {
    const double r = t == dt::f64 ? v : static_cast<double>(static_cast<float>(v));
    int64_t w;
    std::memcpy(&w, &r, sizeof w);
    return w;
  }
  if (is_bool(t)) return v != 0 || std::isnan(v) ? 1 : 0;
  if (std::isnan(v)) return 0;
  if (v >= 9223372036854775807.0) return std::numeric_limits<int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

inline NodePtr scalar_node(double v, dtype t, bool weak) {
  auto n = new_node();
  n->k = Node::kind::scalar;
  n->type = t;
  n->weak = weak;
  n->word = const_word(v, t);
  n->size = 0;
  return n;
}
inline NodePtr int_scalar_node(int64_t v, dtype t, bool weak) {
  auto n = new_node();
  n->k = Node::kind::scalar;
  n->type = t;
  n->weak = weak;
  n->word = v;
  n->size = 0;
  return n;
}
// A weak scalar's value as double (for re-typing).
inline double scalar_value(const Node& s) {
  if (is_floating(s.type)) {
    double d;
    std::memcpy(&d, &s.word, sizeof d);
    return d;
  }
  return static_cast<double>(s.word);
}

void materialise(Node& x, const Backend& b);

inline void note_pending(const NodePtr& n) {
  pending_list& p = pending();
  for (const Node* c : {n->a.get(), n->b.get(), n->c.get()})
    if (c != nullptr && c->k == Node::kind::leaf) {
      p.entries.push_back({n, c->storage.get()});
      p.may_read |= storage_bit(c->storage.get());
    }
  if (p.entries.size() >= p.compact_at) { // drop the entries whose expression ran or died
    std::erase_if(p.entries, [](const pending_entry& e) {
      if (e.node.expired()) return true; // (no lock for the common case of a dropped one)
      auto s = e.node.lock();
      return !s || s->k != Node::kind::op;
    });
    p.compact_at = std::max<size_t>(64, 2 * p.entries.size());
    p.may_read = 0;
    for (const pending_entry& e : p.entries)
      p.may_read |= storage_bit(e.reads);
  }
}

// The dtype computations run in: half types compute in f32.
constexpr dtype compute_type(dtype t) noexcept { return is_half(t) ? dt::f32 : t; }

// x as dtype t: a CAST node (or a re-typed constant), nothing when it is already t.
inline NodePtr as_type(const NodePtr& x, dtype t) {
  if (x->type == t) return x;
  if (x->k == Node::kind::scalar) {
    if (is_half(t)) { // constants are never half: an f32 constant, cast
      auto n = new_node();
      n->k = Node::kind::op;
      n->op = PCY_ARRAY_OP_CAST;
      n->type = t;
      n->a = scalar_node(scalar_value(*x), dt::f32, x->weak);
      n->size = 1;
      return n;
    }
    if (is_floating(x->type) || is_floating(t)) return scalar_node(scalar_value(*x), t, x->weak);
    // integer/bool to integer/bool: wrap as the cast does
    const uint64_t bits = static_cast<uint64_t>(x->word);
    int64_t v = static_cast<int64_t>(bits);
    switch (t) {
    case PCY_DTYPE_I8: v = static_cast<int8_t>(bits); break;
    case PCY_DTYPE_I16: v = static_cast<int16_t>(bits); break;
    case PCY_DTYPE_I32: v = static_cast<int32_t>(bits); break;
    case PCY_DTYPE_U8: v = static_cast<uint8_t>(bits); break;
    case PCY_DTYPE_BOOL: v = bits != 0; break;
    default: break;
    }
    return int_scalar_node(v, t, x->weak);
  }
  auto n = new_node();
  n->k = Node::kind::op;
  n->op = PCY_ARRAY_OP_CAST;
  n->type = t;
  n->shape = x->shape;
  n->a = x;
  n->size = x->size + 1;
  return n;
}

// The dtype of a binary operation with Python-style weak scalars (NumPy 2, NEP 50): a weak
// float with an integer or bool array gives f64; a weak int with a bool array gives i64;
// otherwise the array's dtype wins.
inline dtype result_type(const Node& x, const Node& y) {
  if (x.weak == y.weak) return promote(x.type, y.type);
  const Node& w = x.weak ? x : y;
  const Node& s = x.weak ? y : x;
  if (is_floating(w.type)) return is_floating(s.type) ? s.type : dt::f64;
  if (is_integer(w.type)) return is_bool(s.type) ? dt::i64 : s.type;
  return s.type;
}

// The floating dtype a float function takes an integer input to (NumPy's): bool, i8, u8 -> f16;
// i16 -> f32; i32, i64 -> f64.
constexpr dtype float_of(dtype t) noexcept {
  if (is_floating(t)) return t;
  if (t == dt::i16) return dt::f32;
  if (t == dt::i32 || t == dt::i64) return dt::f64;
  return dt::f16;
}

inline NodePtr make_op(int op, dtype t, std::span<const int64_t> shape, NodePtr a, NodePtr b = {},
                       NodePtr c = {}) {
  auto n = new_node();
  n->k = Node::kind::op;
  n->op = op;
  n->type = t;
  n->shape.assign(shape.begin(), shape.end()); // a recycled node's capacity
  n->size = 1 + a->size + (b ? b->size : 0) + (c ? c->size : 0);
  n->a = std::move(a);
  n->b = std::move(b);
  n->c = std::move(c);
  n->weak = false;
  return n;
}

// An operation computed in dtype `t` (half types: in f32, rounded back to t after it, NumPy's
// per-operation rounding), with result dtype `result` (t, or bool for predicates).
inline NodePtr compute(int op, dtype t, dtype result, std::span<const int64_t> shape,
                       const NodePtr& a, const NodePtr& b = {}, const NodePtr& c = {}) {
  const dtype ct = compute_type(t);
  const dtype cr = result == t ? ct : result;
  NodePtr n = make_op(op, cr, shape, as_type(a, ct), b ? as_type(b, ct) : NodePtr{},
                      c ? as_type(c, ct) : NodePtr{});
  if (cr != result) n = as_type(n, result);
  return n;
}

} // namespace detail

// ---- elementwise functions (lazy) ---------------------------------------------------------------
namespace detail {
inline Array finish(NodePtr n, std::optional<Backend> b) {
  if (n->size > max_fused_ops && b) {
    // Past the fusion limit: run the larger operand now; the rest stays lazy.
    Node* big = n->a.get();
    if (n->b && n->b->size > big->size) big = n->b.get();
    if (n->c && n->c->size > big->size) big = n->c.get();
    if (big->k == Node::kind::op) {
      const uint32_t before = big->size;
      materialise(*big, *b);
      n->size -= before;
    }
  }
  if (n->k == Node::kind::op) note_pending(n);
  return Array(std::move(n), std::move(b));
}
inline const Node& node_of(const Array& x, const char* fn) {
  if (!x.valid()) fail(fn, errc::invalid_argument, "an empty Array (default-made)");
  return *x.node();
}
inline Array unary(const char* fn, int op, const Array& x) {
  const Node& n = node_of(x, fn);
  dtype t = n.type, r = n.type;
  const bool float_fn = (op >= PCY_ARRAY_OP_EXP && op <= PCY_ARRAY_OP_ERF);
  const bool rounding = op >= PCY_ARRAY_OP_FLOOR && op <= PCY_ARRAY_OP_TRUNC;
  if (rounding && !is_floating(t)) return x; // integers are already integral
  if (float_fn) t = r = float_of(t);
  if (op == PCY_ARRAY_OP_ISNAN || op == PCY_ARRAY_OP_ISINF || op == PCY_ARRAY_OP_ISFINITE) {
    r = dt::boolean;
    if (!is_floating(t)) t = dt::f64;
  }
  if ((op == PCY_ARRAY_OP_NEG || op == PCY_ARRAY_OP_SIGN || op == PCY_ARRAY_OP_SQUARE) &&
      is_bool(t))
    fail(fn, errc::invalid_argument, "argument x: not defined for bool (use logical_not)");
  if (op == PCY_ARRAY_OP_ABS && is_bool(t)) return x;
  if (op == PCY_ARRAY_OP_NOT) {
    if (is_floating(t))
      fail(fn, errc::invalid_argument, "argument x: dtype ", name_of(t),
           "; bitwise_invert takes integers or bool");
  }
  return finish(compute(op, t, r, n.shape, x.node()), x.backend());
}
inline Array binary(const char* fn, int op, const Array& x, const Array& y) {
  const Node& a = node_of(x, fn);
  const Node& b = node_of(y, fn);
  auto backend = pick_backend(x.backend(), y.backend(), fn);
  shape_buffer sbuf;
  const std::span<const int64_t> shape(sbuf.data(), broadcast_into(sbuf, a.shape, b.shape, fn));
  dtype t = result_type(a, b), r = t;
  switch (op) {
  case PCY_ARRAY_OP_DIV: // true division: integers and bool give f64 (NumPy's, the default float)
    t = r = is_floating(t) ? t : dt::f64;
    break;
  case PCY_ARRAY_OP_ATAN2:
  case PCY_ARRAY_OP_COPYSIGN:
  case PCY_ARRAY_OP_NEXTAFTER:
  case PCY_ARRAY_OP_HYPOT:
  case PCY_ARRAY_OP_LOGADDEXP: t = r = float_of(t); break;
  case PCY_ARRAY_OP_EQ:
  case PCY_ARRAY_OP_NE:
  case PCY_ARRAY_OP_LT:
  case PCY_ARRAY_OP_LE:
  case PCY_ARRAY_OP_GT:
  case PCY_ARRAY_OP_GE: r = dt::boolean; break;
  case PCY_ARRAY_OP_AND:
  case PCY_ARRAY_OP_OR:
  case PCY_ARRAY_OP_XOR:
  case PCY_ARRAY_OP_SHL:
  case PCY_ARRAY_OP_SHR:
    if (is_floating(t) || ((op == PCY_ARRAY_OP_SHL || op == PCY_ARRAY_OP_SHR) && is_bool(t)))
      fail(fn, errc::invalid_argument, "operands of dtypes ", name_of(a.type), " and ",
           name_of(b.type), "; ", fn, " takes integers",
           op == PCY_ARRAY_OP_SHL || op == PCY_ARRAY_OP_SHR ? "" : " or bool");
    break;
  default:
    if (is_bool(t))
      fail(fn, errc::invalid_argument, "operands of dtype bool; ", fn,
           " takes numbers (cast with astype first)");
    break;
  }
  return finish(compute(op, t, r, shape, x.node(), y.node()), std::move(backend));
}
} // namespace detail

// A scalar as an Array (weak: it takes the other operand's dtype where NumPy would).
inline Array scalar(double v) { return Array(detail::scalar_node(v, dt::f64, true)); }
inline Array scalar_int(int64_t v) { return Array(detail::int_scalar_node(v, dt::i64, true)); }
inline Array scalar_bool(bool v) { return Array(detail::int_scalar_node(v, dt::boolean, true)); }
// A scalar of a given dtype (strong: it promotes like an array).
inline Array full_scalar(double v, dtype t) { return Array(detail::scalar_node(v, t, false)); }

#define PCY_ARRAY_UNARY(fn, OP)                                                                    \
  inline Array fn(const Array& x) { return detail::unary(#fn, PCY_ARRAY_OP_##OP, x); }
PCY_ARRAY_UNARY(negative, NEG)
PCY_ARRAY_UNARY(abs, ABS)
PCY_ARRAY_UNARY(sign, SIGN)
PCY_ARRAY_UNARY(square, SQUARE)
PCY_ARRAY_UNARY(exp, EXP)
PCY_ARRAY_UNARY(expm1, EXPM1)
PCY_ARRAY_UNARY(log, LOG)
PCY_ARRAY_UNARY(log1p, LOG1P)
PCY_ARRAY_UNARY(log2, LOG2)
PCY_ARRAY_UNARY(log10, LOG10)
PCY_ARRAY_UNARY(sqrt, SQRT)
PCY_ARRAY_UNARY(rsqrt, RSQRT)
PCY_ARRAY_UNARY(sin, SIN)
PCY_ARRAY_UNARY(cos, COS)
PCY_ARRAY_UNARY(tan, TAN)
PCY_ARRAY_UNARY(asin, ASIN)
PCY_ARRAY_UNARY(acos, ACOS)
PCY_ARRAY_UNARY(atan, ATAN)
PCY_ARRAY_UNARY(sinh, SINH)
PCY_ARRAY_UNARY(cosh, COSH)
PCY_ARRAY_UNARY(tanh, TANH)
PCY_ARRAY_UNARY(asinh, ASINH)
PCY_ARRAY_UNARY(acosh, ACOSH)
PCY_ARRAY_UNARY(atanh, ATANH)
PCY_ARRAY_UNARY(erf, ERF)
PCY_ARRAY_UNARY(floor, FLOOR)
PCY_ARRAY_UNARY(ceil, CEIL)
PCY_ARRAY_UNARY(round, ROUND)
PCY_ARRAY_UNARY(trunc, TRUNC)
PCY_ARRAY_UNARY(isnan, ISNAN)
PCY_ARRAY_UNARY(isinf, ISINF)
PCY_ARRAY_UNARY(isfinite, ISFINITE)
PCY_ARRAY_UNARY(bitwise_invert, NOT)
#undef PCY_ARRAY_UNARY

#define PCY_ARRAY_BINARY(fn, OP)                                                                   \
  inline Array fn(const Array& x, const Array& y) {                                                \
    return detail::binary(#fn, PCY_ARRAY_OP_##OP, x, y);                                           \
  }
PCY_ARRAY_BINARY(add, ADD)
PCY_ARRAY_BINARY(subtract, SUB)
PCY_ARRAY_BINARY(multiply, MUL)
PCY_ARRAY_BINARY(divide, DIV)
PCY_ARRAY_BINARY(floor_divide, FLOORDIV)
PCY_ARRAY_BINARY(remainder, REM)
PCY_ARRAY_BINARY(pow, POW)
PCY_ARRAY_BINARY(minimum, MINIMUM)
PCY_ARRAY_BINARY(maximum, MAXIMUM)
PCY_ARRAY_BINARY(atan2, ATAN2)
PCY_ARRAY_BINARY(copysign, COPYSIGN)
PCY_ARRAY_BINARY(nextafter, NEXTAFTER)
PCY_ARRAY_BINARY(hypot, HYPOT)
PCY_ARRAY_BINARY(logaddexp, LOGADDEXP)
PCY_ARRAY_BINARY(bitwise_and, AND)
PCY_ARRAY_BINARY(bitwise_or, OR)
PCY_ARRAY_BINARY(bitwise_xor, XOR)
PCY_ARRAY_BINARY(bitwise_left_shift, SHL)
PCY_ARRAY_BINARY(bitwise_right_shift, SHR)
PCY_ARRAY_BINARY(equal, EQ)
PCY_ARRAY_BINARY(not_equal, NE)
PCY_ARRAY_BINARY(less, LT)
PCY_ARRAY_BINARY(less_equal, LE)
PCY_ARRAY_BINARY(greater, GT)
PCY_ARRAY_BINARY(greater_equal, GE)
#undef PCY_ARRAY_BINARY

inline Array astype(const Array& x, dtype t) {
  const detail::Node& n = detail::node_of(x, "astype");
  if (n.type == t) return x;
  return detail::finish(detail::as_type(x.node(), t), x.backend());
}
inline Array Array::astype(dtype t) const { return array::astype(*this, t); }

inline Array logical_not(const Array& x) {
  return detail::unary("logical_not", PCY_ARRAY_OP_NOT, astype(x, dt::boolean));
}
#define PCY_ARRAY_LOGICAL(fn, OP)                                                                  \
  inline Array fn(const Array& x, const Array& y) {                                                \
    return detail::binary(#fn, PCY_ARRAY_OP_##OP, astype(x, dt::boolean), astype(y, dt::boolean)); \
  }
PCY_ARRAY_LOGICAL(logical_and, AND)
PCY_ARRAY_LOGICAL(logical_or, OR)
PCY_ARRAY_LOGICAL(logical_xor, XOR)
#undef PCY_ARRAY_LOGICAL

inline Array positive(const Array& x) { return x; }
inline Array reciprocal(const Array& x) { return divide(scalar(1.0), x); }

// where(cond, x, y): x where cond else y (cond as bool; x and y promoted; broadcast).
inline Array where(const Array& cond, const Array& x, const Array& y) {
  using namespace detail;
  const Node& c = node_of(cond, "where");
  const Node& a = node_of(x, "where");
  const Node& b = node_of(y, "where");
  auto backend =
      pick_backend(pick_backend(cond.backend(), x.backend(), "where"), y.backend(), "where");
  shape_buffer ca, cab;
  const size_t rca = broadcast_into(ca, c.shape, a.shape, "where");
  const std::span<const int64_t> shape(
      cab.data(), broadcast_into(cab, std::span<const int64_t>(ca.data(), rca), b.shape, "where"));
  const dtype t = result_type(a, b);
  NodePtr n = make_op(PCY_ARRAY_OP_WHERE, t, shape, as_type(cond.node(), dt::boolean),
                      as_type(x.node(), t), as_type(y.node(), t));
  return finish(std::move(n), std::move(backend));
}

inline Array where(const Array& cond, const Array& x, double y) {
  return where(cond, x, scalar(y));
}
inline Array where(const Array& cond, double x, const Array& y) {
  return where(cond, scalar(x), y);
}
// Both values host scalars: the result is f64 unless a dtype is given.
inline Array where(const Array& cond, double x, double y, dtype t = dt::f64) {
  return where(cond, full_scalar(x, t), full_scalar(y, t));
}

// clip(x, lo, hi): min(max(x, lo), hi) in x's dtype (NaN propagates).
inline Array clip(const Array& x, const Array& lo, const Array& hi) {
  const dtype t = detail::node_of(x, "clip").type;
  return astype(minimum(maximum(x, lo), hi), t);
}

// ---- operators ---------------------------------------------------------------------------------
inline Array operator+(const Array& x, const Array& y) { return add(x, y); }
inline Array operator-(const Array& x, const Array& y) { return subtract(x, y); }
inline Array operator*(const Array& x, const Array& y) { return multiply(x, y); }
inline Array operator/(const Array& x, const Array& y) { return divide(x, y); }
inline Array operator%(const Array& x, const Array& y) { return remainder(x, y); }
inline Array operator-(const Array& x) { return negative(x); }
inline Array operator+(const Array& x) { return x; }
inline Array operator~(const Array& x) { return bitwise_invert(x); }
inline Array operator!(const Array& x) { return logical_not(x); }
inline Array operator&(const Array& x, const Array& y) { return bitwise_and(x, y); }
inline Array operator|(const Array& x, const Array& y) { return bitwise_or(x, y); }
inline Array operator^(const Array& x, const Array& y) { return bitwise_xor(x, y); }
inline Array operator<<(const Array& x, const Array& y) { return bitwise_left_shift(x, y); }
inline Array operator>>(const Array& x, const Array& y) { return bitwise_right_shift(x, y); }
inline Array operator==(const Array& x, const Array& y) { return equal(x, y); }
inline Array operator!=(const Array& x, const Array& y) { return not_equal(x, y); }
inline Array operator<(const Array& x, const Array& y) { return less(x, y); }
inline Array operator<=(const Array& x, const Array& y) { return less_equal(x, y); }
inline Array operator>(const Array& x, const Array& y) { return greater(x, y); }
inline Array operator>=(const Array& x, const Array& y) { return greater_equal(x, y); }
// With host scalars (weak, as Python's): a * 2.0, 1 - a, ...
namespace detail {
// A weak scalar beside x: made in x's dtype where it takes it (f32 and f64 arrays), which is the
// constant as_type would make of scalar(v) (one node, not two); elsewhere scalar(v).
inline Array weak_scalar_beside(const Array& x, double v) {
  if (x.valid() && (x.node()->type == dt::f32 || x.node()->type == dt::f64))
    return Array(scalar_node(v, x.node()->type, true));
  return scalar(v);
}
inline Array weak_scalar_beside(const Array& x, int v) {
  if (x.valid() && (x.node()->type == dt::f32 || x.node()->type == dt::f64))
    return Array(scalar_node(static_cast<double>(v), x.node()->type, true));
  return scalar_int(v);
}
// `x OP v` (`v OP x` when `left`) for a host scalar v beside a non-weak f32/f64 array x: the
// node binary() makes of x and weak_scalar_beside(x, v) (v in x's dtype, no casts, x's shape and
// backend; bool for a comparison), built without the scalar's Array, the broadcasting and the
// promotion rules, which have nothing to decide here (the host cost of a small op:
// docs/array.md). Other arrays take the general path.
inline bool scalar_op_direct(const Array& x) noexcept {
  if (!x.valid()) return false;
  const Node& n = *x.node();
  return !n.weak && (n.type == dt::f32 || n.type == dt::f64);
}
inline Array scalar_op(int op, const Array& x, double v, bool left) {
  const NodePtr& xn = x.node();
  const dtype r = op >= PCY_ARRAY_OP_EQ && op <= PCY_ARRAY_OP_GE ? dt::boolean : xn->type;
  NodePtr s = scalar_node(v, xn->type, true);
  NodePtr n = left ? make_op(op, r, xn->shape, std::move(s), xn)
                   : make_op(op, r, xn->shape, xn, std::move(s));
  return finish(std::move(n), x.backend());
}
} // namespace detail
#define PCY_ARRAY_SCALAR_OPS(OP, CODE)                                                             \
  inline Array operator OP(const Array& x, double v) {                                             \
    if (detail::scalar_op_direct(x)) return detail::scalar_op(PCY_ARRAY_OP_##CODE, x, v, false);   \
    return x OP detail::weak_scalar_beside(x, v);                                                  \
  }                                                                                                \
  inline Array operator OP(double v, const Array& x) {                                             \
    if (detail::scalar_op_direct(x)) return detail::scalar_op(PCY_ARRAY_OP_##CODE, x, v, true);    \
    return detail::weak_scalar_beside(x, v) OP x;                                                  \
  }                                                                                                \
  inline Array operator OP(const Array& x, int v) {                                                \
    if (detail::scalar_op_direct(x))                                                               \
      return detail::scalar_op(PCY_ARRAY_OP_##CODE, x, static_cast<double>(v), false);             \
    return x OP detail::weak_scalar_beside(x, v);                                                  \
  }                                                                                                \
  inline Array operator OP(int v, const Array& x) {                                                \
    if (detail::scalar_op_direct(x))                                                               \
      return detail::scalar_op(PCY_ARRAY_OP_##CODE, x, static_cast<double>(v), true);              \
    return detail::weak_scalar_beside(x, v) OP x;                                                  \
  }
PCY_ARRAY_SCALAR_OPS(+, ADD)
PCY_ARRAY_SCALAR_OPS(-, SUB)
PCY_ARRAY_SCALAR_OPS(*, MUL)
PCY_ARRAY_SCALAR_OPS(/, DIV)
PCY_ARRAY_SCALAR_OPS(%, REM)
PCY_ARRAY_SCALAR_OPS(==, EQ)
PCY_ARRAY_SCALAR_OPS(!=, NE)
PCY_ARRAY_SCALAR_OPS(<, LT)
PCY_ARRAY_SCALAR_OPS(<=, LE)
PCY_ARRAY_SCALAR_OPS(>, GT)
PCY_ARRAY_SCALAR_OPS(>=, GE)
#undef PCY_ARRAY_SCALAR_OPS
inline Array pow(const Array& x, double v) { return pow(x, scalar(v)); }
inline Array maximum(const Array& x, double v) { return maximum(x, scalar(v)); }
inline Array minimum(const Array& x, double v) { return minimum(x, scalar(v)); }
inline Array clip(const Array& x, double lo, double hi) { return clip(x, scalar(lo), scalar(hi)); }

// The number of programs (op calls) this thread has run through this front-end.
inline uint64_t programs_run() noexcept { return detail::programs_run(); }

// ---- running expressions
// ---------------------------------------------------------------------------
namespace detail {

// A vector that keeps its first N elements in place (a tree walk's stack without allocating).
template <class T, size_t N> class small_vector {
public:
  void push_back(const T& v) {
    if (n_ < N)
      in_[n_] = v;
    else
      more_.push_back(v);
    ++n_;
  }
  void pop_back() noexcept {
    --n_;
    if (n_ >= N) more_.pop_back();
  }
  T& back() noexcept { return (*this)[n_ - 1]; }
  T& operator[](size_t i) noexcept { return i < N ? in_[i] : more_[i - N]; }
  bool empty() const noexcept { return n_ == 0; }
  size_t size() const noexcept { return n_; }

private:
  std::array<T, N> in_; // not value-initialised: [0, n_) is written before it is read
  std::vector<T> more_;
  size_t n_ = 0;
};

// Emits `x` as the program's value, running subtrees first while it needs more than 8 inputs.
inline int emit_fitting(Node& x, const Backend& b, std::span<const int64_t> perm, const Shape& root,
                        std::optional<emitter>& out) {
  for (;;) {
    out.emplace(root, perm);
    const int r = out->emit(x);
    if (r >= 0) return r;
    // Too many inputs: run the operand subtree with the most operations.
    Node* big = nullptr;
    std::vector<Node*> stack{&x};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (n->k != Node::kind::op) continue;
      if (n != &x && (big == nullptr || n->size > big->size)) big = n;
      for (Node* c : {n->a.get(), n->b.get(), n->c.get()})
        if (c) stack.push_back(c);
    }
    if (big == nullptr) fail("eval", errc::internal, "an expression without inputs failed to fit");
    materialise(*big, b);
  }
}

// The last programs this thread emitted for an eval or an assignment, by a key that spells out
// everything emission reads: the tree (each node's kind, op, dtype and CONST word; each leaf's
// tensor, offset, shape and strides; which nodes are shared), the output's view and the index
// space. A tree whose key equals an entry's byte for byte emits the same words over the same
// inputs, so a loop repeating `y.assign(x * 2 + 1)` skips emission. An entry's tensors are
// compared by address only while the tree being run holds them (its leaves have those
// addresses). Trees too large for the key, or with a stale node, are emitted every time.
struct program_memo {
  static constexpr size_t slots = 4;       // entries, replaced round-robin
  static constexpr size_t max_key = 192;   // words
  static constexpr size_t max_shared = 32; // distinct nodes of a keyed tree
  struct entry {
    std::vector<int64_t> key, words;
    std::array<TensorStorage*, PCY_ARRAY_MAX_INPUTS> inputs{};
    size_t input_count = 0;
    bool whole = false;
  };
  std::array<entry, slots> e;
  size_t next = 0;
  std::array<int64_t, max_key> key;
  size_t key_size = 0;
  std::array<const Node*, max_shared> seen;
  size_t seen_count = 0;

  // Builds the key of the tree `x` written over `root` into `out` (offset, strides) of tensor
  // `st`; false when it cannot be keyed.
  bool key_of(const Node& x, const Shape& root, int64_t out_offset, const Shape& out_strides,
              const TensorStorage* st) noexcept {
    key_size = 0;
    seen_count = 0;
    const size_t r = root.size();
    if (3 + 2 * r + 2 > max_key || out_strides.size() != r) return false;
    key[key_size++] = static_cast<int64_t>(r);
    for (size_t d = 0; d < r; ++d)
      key[key_size++] = root[d];
    key[key_size++] = out_offset;
    for (size_t d = 0; d < r; ++d)
      key[key_size++] = out_strides[d];
    key[key_size++] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(st));
    key[key_size++] = st != nullptr ? static_cast<int64_t>(st->size()) : -1;
    return put(x);
  }
  // The entry whose key equals the last key_of's, or nullptr.
  const entry* find() const noexcept {
    for (const entry& m : e)
      if (m.key.size() == key_size &&
          std::memcmp(m.key.data(), key.data(), key_size * sizeof(int64_t)) == 0)
        return &m;
    return nullptr;
  }
  void store(std::span<const int64_t> words, std::span<TensorStorage* const> inputs, bool whole) {
    if (inputs.size() > PCY_ARRAY_MAX_INPUTS) return;
    entry& m = e[next];
    next = (next + 1) % slots;
    m.key.clear(); // empty while half-written (an allocation may throw)
    m.words.assign(words.begin(), words.end());
    std::copy(inputs.begin(), inputs.end(), m.inputs.begin());
    m.input_count = inputs.size();
    m.whole = whole;
    m.key.assign(key.begin(), key.begin() + static_cast<ptrdiff_t>(key_size));
  }

private:
  // Tag words: kind (0 leaf, 1 scalar, 2 op, 3 a node seen before) | children present | dtype
  // | op | the seen node's index.
  // `shared`: x may be reached twice (a node that only its parent holds is reached once, as
  // often as its parent, and needs no entry in `seen`).
  bool put(const Node& x, bool shared = true) noexcept {
    if (shared) {
      for (size_t i = 0; i < seen_count; ++i)
        if (seen[i] == &x) return word(3 | static_cast<int64_t>(i) << 8);
      if (seen_count == max_shared) return false;
      seen[seen_count++] = &x;
    }
    const int64_t type = static_cast<int64_t>(x.type) << 8;
    switch (x.k) {
    case Node::kind::leaf: {
      const size_t r = x.shape.size();
      if (x.strides.size() != r || key_size + 4 + 2 * r > max_key) return false;
      key[key_size++] = 0 | type;
      key[key_size++] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x.storage.get()));
      key[key_size++] = x.offset;
      key[key_size++] = static_cast<int64_t>(r);
      for (size_t d = 0; d < r; ++d)
        key[key_size++] = x.shape[d];
      for (size_t d = 0; d < r; ++d)
        key[key_size++] = x.strides[d];
      return true;
    }
    case Node::kind::scalar: return word(1 | type) && word(x.word);
    case Node::kind::op:
      if (x.stale || !x.a) return false;
      return word(2 | (x.b ? 4 : 0) | (x.c ? 8 : 0) | type | static_cast<int64_t>(x.op) << 16) &&
             put(*x.a, x.a.use_count() > 1) && (!x.b || put(*x.b, x.b.use_count() > 1)) &&
             (!x.c || put(*x.c, x.c.use_count() > 1));
    }
    return false;
  }
  bool word(int64_t w) noexcept {
    if (key_size == max_key) return false;
    key[key_size++] = w;
    return true;
  }
};
inline program_memo& program_memo_here() {
  thread_local program_memo m;
  return m;
}

inline void store_program(program_memo& pm, std::span<const int64_t> words, const emitter& e,
                          bool whole) {
  std::array<TensorStorage*, PCY_ARRAY_MAX_INPUTS> in;
  if (e.inputs().size() > in.size()) return;
  for (size_t i = 0; i < e.inputs().size(); ++i)
    in[i] = e.inputs()[i].storage.get();
  try {
    pm.store(words, std::span<TensorStorage* const>(in.data(), e.inputs().size()), whole);
  } catch (const std::bad_alloc&) { // the entry stays empty
  }
}

// Runs x's expression into a new dense tensor; x becomes a view of it.
inline void materialise(Node& x, const Backend& b) {
  if (x.k == Node::kind::leaf) return;
  auto st = std::make_shared<TensorStorage>(x.type, x.shape);
  const Shape strides = dense_strides(x.shape);
  const uint64_t n = count_of(x.shape);
  if (n > 0) {
    program_memo& pm = program_memo_here();
    const bool keyed = pm.key_of(x, x.shape, 0, strides, nullptr);
    if (const program_memo::entry* m = keyed ? pm.find() : nullptr) {
      run_program(b, eval_keys, 0, x.type, m->words, *st, true,
                  std::span<TensorStorage* const>(m->inputs.data(), m->input_count), {});
    } else {
      std::optional<emitter> e;
      const uint64_t ran = programs_run();
      emit_fitting(x, b, identity(x.shape.size()), x.shape, e);
      const std::vector<int64_t>& words = e->program(0, 0, strides);
      run_program(b, eval_keys, 0, x.type, words, *st, true, *e, {});
      // A tree that emission changed (subtrees run to fit) is not the keyed one.
      if (keyed && programs_run() == ran + 1) store_program(pm, words, *e, true);
    }
  }
  x.k = Node::kind::leaf;
  x.storage = std::move(st);
  x.offset = 0;
  x.strides = strides;
  x.a.reset();
  x.b.reset();
  x.c.reset();
  x.size = 1;
  x.weak = false;
}

// Whether the tree reads `st`.
inline bool reads(const Node& x, const TensorStorage* st) {
  if (x.k == Node::kind::leaf) return x.storage.get() == st;
  if (x.k == Node::kind::scalar) return false;
  return (x.a && reads(*x.a, st)) || (x.b && reads(*x.b, st)) || (x.c && reads(*x.c, st));
}
inline bool contains(const Node& root, const Node* n) {
  if (&root == n) return true;
  if (root.k != Node::kind::op) return false;
  return (root.a && contains(*root.a, n)) || (root.b && contains(*root.b, n)) ||
         (root.c && contains(*root.c, n));
}

// Before a write into `st`: runs every pending expression of this thread that reads it, except
// `keep` (the value being written) and its operands that nothing else holds.
inline void flush_readers(const TensorStorage* st, std::span<const Node* const> keep,
                          const Backend& b) {
  pending_list& p = pending();
  if ((p.may_read & storage_bit(st)) == 0) return; // no entry reads st
  auto& list = p.entries;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].reads != st) continue;
    NodePtr n = list[i].node.lock();
    if (!n || n->k != Node::kind::op) continue;
    bool written_with_value = false;
    for (const Node* k : keep)
      written_with_value = written_with_value || contains(*k, n.get());
    if (!written_with_value) materialise(*n, b);
  }
}
inline void flush_readers(const TensorStorage* st, const Node* keep, const Backend& b) {
  const Node* const one[] = {keep};
  flush_readers(st, std::span<const Node* const>(one, keep != nullptr ? 1 : 0), b);
}

} // namespace detail

inline Array& Array::eval() {
  detail::Node& x = const_cast<detail::Node&>(n());
  if (x.k == detail::Node::kind::leaf) return *this;
  const Backend& b = need_backend("eval");
  if (x.k == detail::Node::kind::scalar) { // a rank-0 tensor holding the value
    // A scalar program: CONST, stored.
    auto st = std::make_shared<TensorStorage>(x.type, Shape{});
    detail::emitter e(x.shape, {});
    e.push(PCY_ARRAY_OP_CONST, x.type, x.word, 0, 0);
    const std::vector<int64_t>& words = e.program(0, 0, {});
    detail::run_program(b, detail::eval_keys, 0, x.type, words, *st, true, e, {});
    x.k = detail::Node::kind::leaf;
    x.storage = std::move(st);
    x.offset = 0;
    x.strides = {};
    x.weak = false;
    return *this;
  }
  detail::materialise(x, b);
  return *this;
}

inline bool Array::is_dense_whole() const {
  const detail::Node& x = n();
  if (x.k != detail::Node::kind::leaf) return false;
  return x.offset == 0 && detail::is_dense(x.shape, x.strides) &&
         detail::count_of(x.shape) == x.storage->size();
}

inline Array Array::copy() const {
  Array src = *this;
  if (src.is_pending()) src.eval();
  // A CAST-free copy: an op node that loads the view.
  auto node = detail::make_op(PCY_ARRAY_OP_CAST, src.type(), src.shape(), src.node());
  node->op = PCY_ARRAY_OP_CAST;
  // CAST to the same dtype is a copy; the emitter emits it as an instruction.
  Array out(node, src.backend());
  out.eval();
  return out;
}

template <class T> std::vector<T> Array::to_vector() const {
  const dtype want = dtype_of<T>::value;
  if (type() != want && !(type() == dt::boolean && sizeof(T) == 1 && std::is_integral_v<T>))
    detail::fail("to_vector", errc::invalid_argument, "the array's dtype is ", name_of(type()),
                 ", not ", name_of(want), "; convert with astype() first");
  Array x = *this;
  x.eval();
  if (!x.is_dense_whole()) x = x.copy();
  const T* p = static_cast<const T*>(x.node()->storage->host_read());
  return std::vector<T>(p, p + x.size());
}

inline void Array::assign(const Array& value) {
  detail::Node& self = const_cast<detail::Node&>(n());
  if (self.k != detail::Node::kind::leaf) eval();
  const std::optional<Backend> picked = detail::pick_backend(backend_, value.backend(), "assign");
  if (!picked)
    detail::fail("assign", errc::invalid_argument,
                 "neither the target nor the value has a backend");
  const Backend b = *picked;
  if (!backend_) backend_ = b;
  const detail::Node& v = detail::node_of(value, "assign");
  // (a value of the target's shape, the common case, fits it, up to broadcasting's rank limit)
  if (v.shape != self.shape || v.shape.size() > std::tuple_size_v<detail::shape_buffer>) {
    detail::shape_buffer bsb;
    const size_t bsr = detail::broadcast_into(bsb, v.shape, self.shape, "assign");
    if (!std::equal(bsb.begin(), bsb.begin() + static_cast<ptrdiff_t>(bsr), self.shape.begin(),
                    self.shape.end()))
      detail::fail("assign", errc::invalid_argument, "a value of shape ",
                   detail::shape_str(v.shape), " does not broadcast to the target's ",
                   detail::shape_str(self.shape));
  }
  if (self.storage->read_only())
    detail::fail("assign", errc::invalid_argument,
                 "the target is a read-only import; copy it first");
  TensorStorage* st = self.storage.get();
  detail::NodePtr val = value.node();
  // A value that is still held elsewhere is run first (it must keep its value after the write);
  // one that reads the target through another view too.
  bool run_first = val->k == detail::Node::kind::op && val.use_count() > 2;
  bool reads_target = detail::reads(*val, st);
  if (!run_first && reads_target) {
    detail::small_vector<const detail::Node*, 64> stack;
    stack.push_back(val.get());
    while (!stack.empty() && !run_first) {
      const detail::Node* x = stack.back();
      stack.pop_back();
      if (x->k == detail::Node::kind::leaf)
        run_first =
            x->storage.get() == st &&
            (x->offset != self.offset || x->strides != self.strides || x->shape != self.shape);
      else if (x->k == detail::Node::kind::op)
        for (const detail::Node* c : {x->a.get(), x->b.get(), x->c.get()})
          if (c) stack.push_back(c);
    }
  }
  if (run_first) {
    Array tmp = value;
    tmp.eval(b);
    if (detail::reads(*tmp.node(), st)) tmp = tmp.copy();
    val = tmp.node();
    reads_target = false; // a view of a tensor other than st
  }
  detail::flush_readers(st, val.get(), b);
  if (detail::count_of(self.shape) == 0) return;
  detail::NodePtr tree = val->type == self.type ? val : detail::as_type(val, self.type);
  // The program: the words this thread last emitted for an equal key, or emitted now.
  detail::program_memo& pm = detail::program_memo_here();
  const bool keyed = pm.key_of(*tree, self.shape, self.offset, self.strides, st);
  const detail::program_memo::entry* hit = keyed ? pm.find() : nullptr;
  std::optional<detail::emitter> e;
  std::span<const int64_t> words;
  bool whole = false;
  std::array<TensorStorage*, PCY_ARRAY_MAX_INPUTS> ins{};
  std::span<TensorStorage* const> inputs;
  if (hit != nullptr) {
    words = hit->words;
    whole = hit->whole;
    inputs = std::span<TensorStorage* const>(hit->inputs.data(), hit->input_count);
  } else {
    const uint64_t ran = detail::programs_run();
    detail::emit_fitting(*tree, b, detail::identity(self.shape.size()), self.shape, e);
    words = e->program(0, self.offset, self.strides);
    whole = is_dense_whole();
    if (e->inputs().size() > ins.size())
      detail::fail("assign", errc::internal, "a program with ", e->inputs().size(), " inputs");
    for (size_t i = 0; i < e->inputs().size(); ++i) {
      ins[i] = e->inputs()[i].storage.get();
      whole = whole && ins[i] != st;
    }
    inputs = std::span<TensorStorage* const>(ins.data(), e->inputs().size());
    // A tree that emission changed (subtrees run to fit) is not the keyed one.
    if (keyed && detail::programs_run() == ran) detail::store_program(pm, words, *e, whole);
  }
  // Operands of the value that read the target and are held outside the value's tree (a named
  // Array) would read the new values if run later: they refuse to run (Node::stale).
  struct node_refs {
    detail::Node* first; // a node
    long second;         // its references in the tree
  };
  detail::small_vector<node_refs, 64> inside;
  if (val->k == detail::Node::kind::op && reads_target) {
    detail::small_vector<detail::Node*, 64> stack;
    stack.push_back(val.get());
    while (!stack.empty()) {
      detail::Node* x = stack.back();
      stack.pop_back();
      if (x->k != detail::Node::kind::op) continue;
      for (const detail::NodePtr* c : {&x->a, &x->b, &x->c}) {
        if (!*c || (*c)->k != detail::Node::kind::op) continue;
        size_t at = 0;
        while (at < inside.size() && inside[at].first != c->get())
          ++at;
        if (at == inside.size()) {
          inside.push_back({c->get(), 1});
          stack.push_back(c->get());
        } else {
          ++inside[at].second;
        }
      }
    }
  }
  detail::small_vector<detail::Node*, 16> stale;
  for (size_t in = 0; in < inside.size(); ++in) {
    const auto [node, refs] = inside[in];
    // use_count through a parent's member: the tree's references plus outside holders.
    const detail::NodePtr* held = nullptr;
    detail::small_vector<detail::Node*, 64> stack;
    stack.push_back(val.get());
    while (!stack.empty() && held == nullptr) {
      detail::Node* x = stack.back();
      stack.pop_back();
      for (const detail::NodePtr* c : {&x->a, &x->b, &x->c})
        if (*c && c->get() == node)
          held = c;
        else if (*c && (*c)->k == detail::Node::kind::op)
          stack.push_back(c->get());
    }
    if (held != nullptr && held->use_count() > refs && detail::reads(*node, st))
      stale.push_back(node);
  }
  detail::run_program(b, detail::eval_keys, 0, self.type, words, *st, whole, inputs, {});
  for (size_t i = 0; i < stale.size(); ++i)
    stale[i]->stale = true;
}
inline void Array::assign(double value) { assign(scalar(value)); }

// assign_all({a, b, c}, {va, vb, vc}): several writes in ONE program (up to three targets of one
// shape; values broadcast and cast to each target's dtype, sharing their common operations):
// an optimiser's moments and parameter in one pass over memory. Each target may be an input
// of the values through its own view (an in-place update); targets are distinct tensors.
inline void assign_all(std::span<Array> targets, std::span<const Array> values) {
  using namespace detail;
  if (targets.empty() || targets.size() != values.size() || targets.size() > 3)
    fail("assign_all", errc::invalid_argument, targets.size(), " targets and ", values.size(),
         " values; give 1 to 3 of each");
  if (targets.size() == 1) {
    targets[0].assign(values[0]);
    return;
  }
  std::optional<Backend> b;
  for (size_t i = 0; i < targets.size(); ++i) {
    b = pick_backend(b, targets[i].backend(), "assign_all");
    b = pick_backend(b, values[i].backend(), "assign_all");
  }
  if (!b) fail("assign_all", errc::invalid_argument, "no backend (wrap the arrays first)");
  for (Array& t : targets) {
    if (!t.is_view()) t.eval(*b);
    if (t.node()->storage->read_only())
      fail("assign_all", errc::invalid_argument, "a target is a read-only import; copy it first");
  }
  const Shape& shape = targets[0].shape();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].shape() != shape)
      fail("assign_all", errc::invalid_argument, "targets of shapes ", shape_str(shape), " and ",
           shape_str(targets[i].shape()), "; they must have one shape");
    for (size_t j = 0; j < i; ++j)
      if (targets[j].node()->storage.get() == targets[i].node()->storage.get())
        fail("assign_all", errc::invalid_argument, "targets ", j, " and ", i,
             " are views of one tensor; write them with separate assign calls");
    if (broadcast_shapes(node_of(values[i], "assign_all").shape, shape, "assign_all") != shape)
      fail("assign_all", errc::invalid_argument, "value ", i, " of shape ",
           shape_str(values[i].shape()), " does not broadcast to ", shape_str(shape));
  }
  // Values that read a target through another view, or that something else still holds, run
  // first (as assign does); pending readers of the targets run before the write.
  std::vector<NodePtr> vals;
  for (size_t i = 0; i < values.size(); ++i)
    vals.push_back(as_type(values[i].node(), targets[i].type()));
  for (NodePtr& v : vals) {
    bool other_view = false;
    std::vector<const Node*> stack{v.get()};
    while (!stack.empty() && !other_view) {
      const Node* x = stack.back();
      stack.pop_back();
      if (x->k == Node::kind::leaf) {
        for (const Array& t : targets)
          other_view =
              other_view ||
              (x->storage.get() == t.node()->storage.get() &&
               (x->offset != t.offset() || x->strides != t.strides() || x->shape != t.shape()));
      } else if (x->k == Node::kind::op) {
        for (const Node* c : {x->a.get(), x->b.get(), x->c.get()})
          if (c) stack.push_back(c);
      }
    }
    if (other_view) {
      Array tmp(v, b);
      tmp.eval(*b);
      v = tmp.copy().node();
    }
  }
  std::vector<const Node*> keep;
  for (const NodePtr& v : vals)
    keep.push_back(v.get());
  for (const Array& t : targets)
    flush_readers(t.node()->storage.get(), keep, *b);
  if (count_of(shape) == 0) return;
  const int outputs = static_cast<int>(targets.size());
  std::optional<emitter> e;
  for (;;) {
    e.emplace(shape, identity(shape.size()), outputs);
    bool fits = true;
    std::array<int, 3> reg{};
    for (size_t i = 1; i < vals.size() && fits; ++i) {
      reg[i] = e->emit(*vals[i]);
      fits = reg[i] >= 0;
      if (fits) e->push(PCY_ARRAY_OP_STORE, targets[i].type(), static_cast<int64_t>(i), reg[i], 0);
    }
    if (fits) {
      reg[0] = e->emit(*vals[0]);
      fits = reg[0] >= 0;
      // The program's value is its last register: output 0's, copied when it came earlier.
      if (fits && static_cast<size_t>(reg[0]) + 1 != e->instructions())
        e->push(PCY_ARRAY_OP_CAST, targets[0].type(), reg[0], 0, 0);
    }
    if (fits) break;
    // Too many inputs: run the largest pending operand of the values first.
    Node* big = nullptr;
    for (const NodePtr& v : vals) {
      std::vector<Node*> stack{v.get()};
      while (!stack.empty()) {
        Node* n = stack.back();
        stack.pop_back();
        if (n->k != Node::kind::op) continue;
        if (big == nullptr || n->size > big->size) big = n;
        for (Node* c : {n->a.get(), n->b.get(), n->c.get()})
          if (c) stack.push_back(c);
      }
    }
    if (big == nullptr) fail("assign_all", errc::internal, "values without inputs failed to fit");
    materialise(*big, *b);
  }
  std::vector<std::pair<int64_t, std::span<const int64_t>>> outs;
  for (const Array& t : targets)
    outs.emplace_back(t.offset(), std::span<const int64_t>(t.strides()));
  const std::vector<int64_t>& words = e->program(0, outs);
  std::array<OpArg, 2> extra{};
  for (size_t i = 1; i < targets.size(); ++i) {
    TensorStorage& st = *targets[i].node()->storage;
    bool whole = targets[i].is_dense_whole() || !st.initialized();
    for (const auto& in : e->inputs())
      whole = whole && in.storage.get() != &st;
    extra[i - 1] = whole ? OpArg::out(st) : OpArg::inout(st);
  }
  TensorStorage& st0 = *targets[0].node()->storage;
  bool whole0 = targets[0].is_dense_whole();
  for (const auto& in : e->inputs())
    whole0 = whole0 && in.storage.get() != &st0;
  const std::span<const key_fn> keys =
      outputs == 2 ? std::span<const key_fn>(evalm2_keys) : std::span<const key_fn>(evalm3_keys);
  run_program(*b, keys, 0, targets[0].type(), words, st0, whole0, *e,
              std::span<const OpArg>(extra.data(), targets.size() - 1));
  // The values' expressions that read a target would read the new values if run again: any
  // still held (a named m_new) refuses to run (Node::stale).
  for (const NodePtr& v : vals) {
    std::vector<Node*> stack{v.get()};
    while (!stack.empty()) {
      Node* x = stack.back();
      stack.pop_back();
      if (x->k != Node::kind::op) continue;
      for (const Array& t : targets)
        if (reads(*x, t.node()->storage.get())) x->stale = true;
      for (Node* c : {x->a.get(), x->b.get(), x->c.get()})
        if (c) stack.push_back(c);
    }
  }
}
inline void assign_all(std::initializer_list<Array> targets, std::initializer_list<Array> values) {
  std::vector<Array> t(targets);
  assign_all(std::span<Array>(t), std::span<const Array>(values.begin(), values.size()));
}

// ---- views -------------------------------------------------------------------------------------
namespace detail {
inline Array view_base(const Array& x, const char* fn) {
  Array v = x;
  if (!v.valid()) fail(fn, errc::invalid_argument, "an empty Array (default-made)");
  if (!v.is_view()) v.eval(v.need_backend(fn));
  return v;
}
inline int64_t norm_axis(int64_t axis, size_t rank, const char* fn, const char* what = "axis") {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r)
    fail(fn, errc::invalid_argument, "argument ", what, ": ", axis,
         " is out of range for an array of ", rank, " dimensions");
  return axis < 0 ? axis + r : axis;
}
inline Array make_view(const Array& base, int64_t offset, Shape strides, Shape shape) {
  return Array(Array::leaf(base.node()->storage, offset, std::move(strides), std::move(shape)),
               base.backend());
}
} // namespace detail

inline Array Array::reshape(Shape shape) const {
  Array v = detail::view_base(*this, "reshape");
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        detail::fail("reshape", errc::invalid_argument, "argument shape: more than one -1");
      infer = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      detail::fail("reshape", errc::invalid_argument, "argument shape: extent ", shape[i], " < 0");
    } else {
      known *= shape[i];
    }
  }
  const int64_t total = static_cast<int64_t>(v.size());
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      detail::fail("reshape", errc::invalid_argument, "cannot reshape ", total, " elements into ",
                   detail::shape_str(shape));
    shape[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    detail::fail("reshape", errc::invalid_argument, "cannot reshape an array of shape ",
                 detail::shape_str(v.shape()), " (", total, " elements) into ",
                 detail::shape_str(shape));
  }
  // A view when the old view is dense in row-major order (no copy); otherwise a copy first.
  if (v.strides() != detail::dense_strides(v.shape()) && total > 1) v = v.copy();
  Shape strides = detail::dense_strides(shape);
  return detail::make_view(v, v.offset(), std::move(strides), std::move(shape));
}
inline Array Array::permute_dims(std::vector<int64_t> axes) const {
  Array v = detail::view_base(*this, "permute_dims");
  const size_t r = v.ndim();
  if (axes.size() != r)
    detail::fail("permute_dims", errc::invalid_argument, "argument axes: ", axes.size(),
                 " axes for an array of ", r, " dimensions");
  std::vector<bool> seen(r, false);
  Shape sh(r), st(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t a = detail::norm_axis(axes[i], r, "permute_dims");
    if (seen[static_cast<size_t>(a)])
      detail::fail("permute_dims", errc::invalid_argument, "argument axes: axis ", a, " repeated");
    seen[static_cast<size_t>(a)] = true;
    sh[i] = v.shape()[static_cast<size_t>(a)];
    st[i] = v.strides()[static_cast<size_t>(a)];
  }
  return detail::make_view(v, v.offset(), std::move(st), std::move(sh));
}
inline Array Array::T() const {
  if (ndim() != 2)
    detail::fail("T", errc::invalid_argument, "T is the transpose of a 2-d array; this one has ",
                 ndim(), " dimensions (use mT or permute_dims)");
  return permute_dims({1, 0});
}
inline Array Array::mT() const {
  if (ndim() < 2)
    detail::fail("mT", errc::invalid_argument, "mT needs at least 2 dimensions, got ", ndim());
  std::vector<int64_t> axes = detail::identity_perm(ndim());
  std::swap(axes[ndim() - 1], axes[ndim() - 2]);
  return permute_dims(std::move(axes));
}
inline Array Array::expand_dims(int64_t axis) const {
  Array v = detail::view_base(*this, "expand_dims");
  const int64_t a = detail::norm_axis(axis, v.ndim() + 1, "expand_dims");
  Shape sh = v.shape(), st = v.strides();
  sh.insert(sh.begin() + a, 1);
  st.insert(st.begin() + a, 0);
  return detail::make_view(v, v.offset(), std::move(st), std::move(sh));
}
inline Array Array::squeeze(std::vector<int64_t> axes) const {
  Array v = detail::view_base(*this, "squeeze");
  std::vector<bool> drop(v.ndim(), false);
  for (int64_t a : axes) {
    const int64_t d = detail::norm_axis(a, v.ndim(), "squeeze");
    if (v.shape()[static_cast<size_t>(d)] != 1)
      detail::fail("squeeze", errc::invalid_argument, "argument axes: dimension ", d,
                   " has extent ", v.shape()[static_cast<size_t>(d)], ", not 1");
    drop[static_cast<size_t>(d)] = true;
  }
  Shape sh, st;
  for (size_t i = 0; i < v.ndim(); ++i)
    if (!drop[i]) {
      sh.push_back(v.shape()[i]);
      st.push_back(v.strides()[i]);
    }
  return detail::make_view(v, v.offset(), std::move(st), std::move(sh));
}
inline Array Array::broadcast_to(Shape shape) const {
  Array v = detail::view_base(*this, "broadcast_to");
  const Shape bs = detail::broadcast_shapes(v.shape(), shape, "broadcast_to");
  if (bs != shape)
    detail::fail("broadcast_to", errc::invalid_argument, "shape ", detail::shape_str(v.shape()),
                 " does not broadcast to ", detail::shape_str(shape));
  const size_t r = shape.size(), l = v.ndim();
  Shape st(r, 0);
  for (size_t d = 0; d < l; ++d)
    st[r - l + d] = v.shape()[d] == 1 && shape[r - l + d] != 1 ? 0 : v.strides()[d];
  return detail::make_view(v, v.offset(), std::move(st), std::move(shape));
}
inline Array Array::flip(std::vector<int64_t> axes) const {
  Array v = detail::view_base(*this, "flip");
  if (axes.empty()) axes = detail::identity_perm(v.ndim());
  Shape st = v.strides();
  int64_t off = v.offset();
  for (int64_t a : axes) {
    const size_t d = static_cast<size_t>(detail::norm_axis(a, v.ndim(), "flip"));
    if (v.shape()[d] > 0) off += (v.shape()[d] - 1) * st[d];
    st[d] = -st[d];
  }
  return detail::make_view(v, off, std::move(st), v.shape());
}
inline Array Array::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  Array v = detail::view_base(*this, "slice");
  const size_t d = static_cast<size_t>(detail::norm_axis(axis, v.ndim(), "slice"));
  if (step == 0) detail::fail("slice", errc::invalid_argument, "argument step: 0");
  const int64_t n = v.shape()[d];
  auto clampi = [&](int64_t i, int64_t lo, int64_t hi) { return i < lo ? lo : i > hi ? hi : i; };
  int64_t b, e;
  if (step > 0) {
    b = start == npos ? 0 : start < 0 ? clampi(start + n, 0, n) : clampi(start, 0, n);
    e = stop == npos ? n : stop < 0 ? clampi(stop + n, 0, n) : clampi(stop, 0, n);
  } else {
    b = start == npos ? n - 1 : start < 0 ? clampi(start + n, -1, n - 1) : clampi(start, -1, n - 1);
    e = stop == npos ? -1 : stop < 0 ? clampi(stop + n, -1, n - 1) : clampi(stop, -1, n - 1);
  }
  const int64_t len = step > 0 ? (e > b ? (e - b + step - 1) / step : 0)
                               : (b > e ? (b - e + (-step) - 1) / (-step) : 0);
  Shape sh = v.shape(), st = v.strides();
  const int64_t off = v.offset() + (len > 0 ? b * st[d] : 0);
  sh[d] = len;
  st[d] *= step;
  return detail::make_view(v, off, std::move(st), std::move(sh));
}
inline Array Array::at(int64_t index, int64_t axis) const {
  Array v = detail::view_base(*this, "at");
  const size_t d = static_cast<size_t>(detail::norm_axis(axis, v.ndim(), "at"));
  const int64_t n = v.shape()[d];
  if (index < -n || index >= n)
    detail::fail("at", errc::invalid_argument, "index ", index, " is out of range for extent ", n);
  const int64_t i = index < 0 ? index + n : index;
  Shape sh = v.shape(), st = v.strides();
  const int64_t off = v.offset() + i * st[d];
  sh.erase(sh.begin() + static_cast<int64_t>(d));
  st.erase(st.begin() + static_cast<int64_t>(d));
  return detail::make_view(v, off, std::move(st), std::move(sh));
}

// ---- indexing
// --------------------------------------------------------------------------------------
inline constexpr int64_t end = Array::npos;
struct slice {
  int64_t start = Array::npos, stop = Array::npos, step = 1; // npos: the end the step walks from/to
  slice() = default;
  slice(int64_t start_, int64_t stop_ = Array::npos, int64_t step_ = 1)
      : start(start_), stop(stop_), step(step_) {}
};
struct newaxis_t {};
struct ellipsis_t {};
inline constexpr newaxis_t newaxis{};
inline constexpr ellipsis_t ellipsis{};
struct Array::index_item {
  enum class kind { integer, range, add_axis, rest } k;
  int64_t i = 0;
  ::parenchyma::array::slice s{};
  index_item(int64_t v) : k(kind::integer), i(v) {}                  // NOLINT: implicit
  index_item(int v) : k(kind::integer), i(v) {}                      // NOLINT
  index_item(::parenchyma::array::slice v) : k(kind::range), s(v) {} // NOLINT
  index_item(newaxis_t) : k(kind::add_axis) {}                       // NOLINT
  index_item(ellipsis_t) : k(kind::rest) {}                          // NOLINT
};
inline Array Array::operator[](std::initializer_list<index_item> items) const {
  Array v = detail::view_base(*this, "index");
  int named = 0, ellipses = 0;
  for (const index_item& it : items) {
    named += it.k == index_item::kind::integer || it.k == index_item::kind::range;
    ellipses += it.k == index_item::kind::rest;
  }
  if (ellipses > 1) detail::fail("index", errc::invalid_argument, "more than one ellipsis");
  if (named > static_cast<int>(v.ndim()))
    detail::fail("index", errc::invalid_argument, named, " indices for an array of ", v.ndim(),
                 " dimensions");
  int64_t axis = 0; // the axis of the result the next item applies to
  for (const index_item& it : items) {
    switch (it.k) {
    case index_item::kind::integer: v = v.at(it.i, axis); break;
    case index_item::kind::range:
      v = v.slice(axis, it.s.start, it.s.stop, it.s.step);
      ++axis;
      break;
    case index_item::kind::add_axis:
      v = v.expand_dims(axis);
      ++axis;
      break;
    case index_item::kind::rest:
      axis += static_cast<int64_t>(v.ndim()) - axis - [&] {
        int rest = 0; // integer and slice items after the ellipsis
        bool after = false;
        for (const index_item& x : items) {
          if (x.k == index_item::kind::rest)
            after = true;
          else if (after && (x.k == index_item::kind::integer || x.k == index_item::kind::range))
            ++rest;
        }
        return rest;
      }();
      break;
    }
  }
  return v;
}

// Free-function forms.
inline Array reshape(const Array& x, Shape shape) { return x.reshape(std::move(shape)); }
inline Array permute_dims(const Array& x, std::vector<int64_t> axes) {
  return x.permute_dims(std::move(axes));
}
inline Array expand_dims(const Array& x, int64_t axis) { return x.expand_dims(axis); }
inline Array squeeze(const Array& x, std::vector<int64_t> axes) {
  return x.squeeze(std::move(axes));
}
inline Array broadcast_to(const Array& x, Shape shape) { return x.broadcast_to(std::move(shape)); }
inline Array flip(const Array& x, std::vector<int64_t> axes = {}) {
  return x.flip(std::move(axes));
}

// ---- reductions (run when called; the operand's pending expression is their prologue)
// -------------
namespace detail {

// The axes as a sorted, unique list of dimensions of a rank-r array (empty: all).
inline std::vector<int64_t> axes_of(std::span<const int64_t> axes, size_t r, const char* fn) {
  std::vector<bool> on(r, axes.empty());
  for (int64_t a : axes) {
    const int64_t d = norm_axis(a, r, fn);
    if (on[static_cast<size_t>(d)])
      fail(fn, errc::invalid_argument, "argument axis: axis ", d, " repeated");
    on[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  for (size_t d = 0; d < r; ++d)
    if (on[d]) out.push_back(static_cast<int64_t>(d));
  return out;
}

// out = kind-reduction of `value` (x's tree cast to `value_type`) over `axes`, in `out_type`.
inline Array reduce(const char* fn, const Array& x, std::span<const int64_t> axes_in, bool keepdims,
                    int kind, dtype value_type, dtype out_type, double correction = 0) {
  const Node& xn = node_of(x, fn);
  const Backend& b = x.need_backend(fn);
  const size_t r = xn.shape.size();
  const std::vector<int64_t> red = axes_of(axes_in, r, fn);
  std::vector<int64_t> perm;
  Shape out_shape, keep_shape;
  std::vector<bool> is_red(r, false);
  for (int64_t d : red)
    is_red[static_cast<size_t>(d)] = true;
  for (size_t d = 0; d < r; ++d)
    if (!is_red[d]) {
      perm.push_back(static_cast<int64_t>(d));
      keep_shape.push_back(xn.shape[d]);
    }
  for (int64_t d : red)
    perm.push_back(d);
  for (size_t d = 0; d < r; ++d) {
    if (!is_red[d])
      out_shape.push_back(xn.shape[d]);
    else if (keepdims)
      out_shape.push_back(1);
  }
  const bool empty_red = [&] {
    for (int64_t d : red)
      if (xn.shape[static_cast<size_t>(d)] == 0) return true;
    return false;
  }();
  if (empty_red && count_of(keep_shape) > 0 &&
      (kind == PCY_ARRAY_REDUCE_MIN || kind == PCY_ARRAY_REDUCE_MAX ||
       kind == PCY_ARRAY_REDUCE_ARGMIN || kind == PCY_ARRAY_REDUCE_ARGMAX))
    fail(fn, errc::invalid_argument, "argument x: a reduction over an empty dimension has no ", fn,
         " (shape ", shape_str(xn.shape), ")");
  auto st = std::make_shared<TensorStorage>(out_type, out_shape);
  Shape out_strides = dense_strides(keep_shape);
  out_strides.resize(perm.size(), 0);
  if (count_of(keep_shape) > 0) {
    NodePtr tree = as_type(x.node(), value_type);
    std::optional<emitter> e;
    emit_fitting(*tree, b, perm, xn.shape, e);
    const std::vector<int64_t>& words = e->program(static_cast<int>(red.size()), 0, out_strides);
    const OpArg extra[] = {OpArg::integer(kind), OpArg::real(correction)};
    run_program(b, reduce_keys, 1, out_type, words, *st, true, *e, extra);
  }
  return Array(Array::leaf(std::move(st), 0, dense_strides(out_shape), out_shape), b);
}

// The accumulation dtype of sum/prod (Array API: integers and bool in the default integer i64;
// floating in their own dtype, half types accumulated in f32 and rounded at the end).
constexpr dtype sum_type(dtype t) noexcept { return is_floating(t) ? compute_type(t) : dt::i64; }
inline Array round_back(Array r, dtype t) { return is_half(t) ? astype(r, t) : r; }

} // namespace detail

using Axes = std::initializer_list<int64_t>;

// sum(x), sum(x, {0, 2}), sum(x, {1}, true): over the axes given (all when none), keepdims.
inline Array sum(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  const dtype t = detail::node_of(x, "sum").type, a = detail::sum_type(t);
  return detail::round_back(detail::reduce("sum", x, axes, keepdims, PCY_ARRAY_REDUCE_SUM, a, a),
                            t);
}
inline Array prod(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  const dtype t = detail::node_of(x, "prod").type, a = detail::sum_type(t);
  return detail::round_back(detail::reduce("prod", x, axes, keepdims, PCY_ARRAY_REDUCE_PROD, a, a),
                            t);
}
inline Array max(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  const dtype t = detail::node_of(x, "max").type;
  const dtype a = is_bool(t) ? dt::u8 : detail::compute_type(t);
  Array r = detail::reduce("max", x, axes, keepdims, PCY_ARRAY_REDUCE_MAX, a, a);
  return r.type() == t ? r : astype(r, t);
}
inline Array min(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  const dtype t = detail::node_of(x, "min").type;
  const dtype a = is_bool(t) ? dt::u8 : detail::compute_type(t);
  Array r = detail::reduce("min", x, axes, keepdims, PCY_ARRAY_REDUCE_MIN, a, a);
  return r.type() == t ? r : astype(r, t);
}
// argmax(x) (flattened), argmax(x, axis): the first maximum's index (i64); NaN counts as the
// maximum (the first NaN wins), as NumPy's.
inline Array argmax(const Array& x, std::optional<int64_t> axis = std::nullopt,
                    bool keepdims = false) {
  const dtype t = detail::node_of(x, "argmax").type;
  const dtype a = is_bool(t) ? dt::u8 : detail::compute_type(t);
  if (!axis) return detail::reduce("argmax", x, {}, keepdims, PCY_ARRAY_REDUCE_ARGMAX, a, dt::i64);
  const int64_t ax[] = {*axis};
  return detail::reduce("argmax", x, ax, keepdims, PCY_ARRAY_REDUCE_ARGMAX, a, dt::i64);
}
inline Array argmin(const Array& x, std::optional<int64_t> axis = std::nullopt,
                    bool keepdims = false) {
  const dtype t = detail::node_of(x, "argmin").type;
  const dtype a = is_bool(t) ? dt::u8 : detail::compute_type(t);
  if (!axis) return detail::reduce("argmin", x, {}, keepdims, PCY_ARRAY_REDUCE_ARGMIN, a, dt::i64);
  const int64_t ax[] = {*axis};
  return detail::reduce("argmin", x, ax, keepdims, PCY_ARRAY_REDUCE_ARGMIN, a, dt::i64);
}
inline Array all(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  return detail::reduce("all", x, axes, keepdims, PCY_ARRAY_REDUCE_ALL, dt::boolean, dt::boolean);
}
inline Array any(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  return detail::reduce("any", x, axes, keepdims, PCY_ARRAY_REDUCE_ANY, dt::boolean, dt::boolean);
}
namespace detail {
// mean/var/std/logsumexp/norm compute in the floating dtype of x (integers: f64, as NumPy).
inline dtype stat_type(dtype t) { return is_floating(t) ? compute_type(t) : dt::f64; }
inline Array stat(const char* fn, int kind, const Array& x, std::span<const int64_t> axes,
                  bool keepdims, double correction = 0) {
  const dtype t = node_of(x, fn).type, a = stat_type(t);
  Array r = reduce(fn, x, axes, keepdims, kind, a, a, correction);
  return is_half(t) ? astype(r, t) : r;
}
} // namespace detail
inline Array mean(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  return detail::stat("mean", PCY_ARRAY_REDUCE_MEAN, x, axes, keepdims);
}
inline Array var(const Array& x, std::span<const int64_t> axes = {}, double correction = 0,
                 bool keepdims = false) {
  return detail::stat("var", PCY_ARRAY_REDUCE_VAR, x, axes, keepdims, correction);
}
inline Array std(const Array& x, std::span<const int64_t> axes = {}, double correction = 0,
                 bool keepdims = false) {
  return detail::stat("std", PCY_ARRAY_REDUCE_STD, x, axes, keepdims, correction);
}
inline Array logsumexp(const Array& x, std::span<const int64_t> axes = {}, bool keepdims = false) {
  return detail::stat("logsumexp", PCY_ARRAY_REDUCE_LOGSUMEXP, x, axes, keepdims);
}
// vector_norm(x, axes, ord): ord 2 (the default), 1, inf, -inf, 0 (the count of nonzeros) or any
// other p (sum |x|^p)^(1/p), over the axes (all when none).
inline Array vector_norm(const Array& x, std::span<const int64_t> axes = {}, double ord = 2,
                         bool keepdims = false) {
  const dtype t = detail::node_of(x, "vector_norm").type, a = detail::stat_type(t);
  Array ax = abs(astype(x, a));
  Array r;
  if (ord == 2)
    r = detail::reduce("vector_norm", astype(x, a), axes, keepdims, PCY_ARRAY_REDUCE_NORM2, a, a);
  else if (ord == 1)
    r = detail::reduce("vector_norm", ax, axes, keepdims, PCY_ARRAY_REDUCE_SUM, a, a);
  else if (std::isinf(ord) && ord > 0)
    r = detail::reduce("vector_norm", ax, axes, keepdims, PCY_ARRAY_REDUCE_MAX, a, a);
  else if (std::isinf(ord))
    r = detail::reduce("vector_norm", ax, axes, keepdims, PCY_ARRAY_REDUCE_MIN, a, a);
  else if (ord == 0)
    r = detail::reduce("vector_norm", astype(ax != 0.0, a), axes, keepdims, PCY_ARRAY_REDUCE_SUM, a,
                       a);
  else
    r = pow(detail::reduce("vector_norm", pow(ax, ord), axes, keepdims, PCY_ARRAY_REDUCE_SUM, a, a),
            1.0 / ord);
  return is_half(t) ? astype(r, t) : r;
}
inline Array sum(const Array& x, Axes axes, bool keepdims = false) {
  return sum(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array prod(const Array& x, Axes axes, bool keepdims = false) {
  return prod(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array max(const Array& x, Axes axes, bool keepdims = false) {
  return max(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array min(const Array& x, Axes axes, bool keepdims = false) {
  return min(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array mean(const Array& x, Axes axes, bool keepdims = false) {
  return mean(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array all(const Array& x, Axes axes, bool keepdims = false) {
  return all(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array any(const Array& x, Axes axes, bool keepdims = false) {
  return any(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array logsumexp(const Array& x, Axes axes, bool keepdims = false) {
  return logsumexp(x, std::span<const int64_t>(axes.begin(), axes.size()), keepdims);
}
inline Array var(const Array& x, Axes axes, double correction = 0, bool keepdims = false) {
  return var(x, std::span<const int64_t>(axes.begin(), axes.size()), correction, keepdims);
}
inline Array std(const Array& x, Axes axes, double correction = 0, bool keepdims = false) {
  return std(x, std::span<const int64_t>(axes.begin(), axes.size()), correction, keepdims);
}

// cumulative_sum(x, axis): inclusive prefix sums along the axis (integers and bool in i64,
// floating in their dtype; half types accumulate in f32); include_initial adds a leading 0.
namespace detail {
inline Array scan(const char* fn, int kind, const Array& x, std::optional<int64_t> axis_in,
                  bool include_initial) {
  const Node& xn = node_of(x, fn);
  const Backend& b = x.need_backend(fn);
  if (!axis_in && xn.shape.size() != 1)
    fail(fn, errc::invalid_argument, "argument axis: required for arrays of ", xn.shape.size(),
         " dimensions");
  const int64_t axis = norm_axis(axis_in.value_or(0), xn.shape.size(), fn);
  const dtype t = xn.type, a = sum_type(t);
  Shape out_shape = xn.shape;
  if (include_initial) out_shape[static_cast<size_t>(axis)] += 1;
  Array out(b, out_shape, a);
  if (include_initial)
    out.slice(axis, 0, 1).assign(scalar(kind == PCY_ARRAY_SCAN_PROD ? 1.0 : 0.0));
  Array dst = include_initial ? out.slice(axis, 1) : out;
  if (count_of(xn.shape) > 0) {
    std::vector<int64_t> perm;
    for (size_t d = 0; d < xn.shape.size(); ++d)
      if (static_cast<int64_t>(d) != axis) perm.push_back(static_cast<int64_t>(d));
    perm.push_back(axis);
    Shape ost(perm.size());
    for (size_t j = 0; j < perm.size(); ++j)
      ost[j] = dst.strides()[static_cast<size_t>(perm[j])];
    NodePtr tree = as_type(x.node(), a);
    std::optional<emitter> e;
    emit_fitting(*tree, b, perm, xn.shape, e);
    const std::vector<int64_t>& words = e->program(1, dst.offset(), ost);
    const OpArg extra[] = {OpArg::integer(kind)};
    run_program(b, scan_keys, 1, a, words, *dst.node()->storage, !include_initial, *e, extra);
  }
  return is_half(t) ? astype(out, t) : out;
}
} // namespace detail
inline Array cumulative_sum(const Array& x, std::optional<int64_t> axis = std::nullopt,
                            bool include_initial = false) {
  return detail::scan("cumulative_sum", PCY_ARRAY_SCAN_SUM, x, axis, include_initial);
}
inline Array cumulative_prod(const Array& x, std::optional<int64_t> axis = std::nullopt,
                             bool include_initial = false) {
  return detail::scan("cumulative_prod", PCY_ARRAY_SCAN_PROD, x, axis, include_initial);
}

// sort(x, axis, descending): the values along the axis in order; argsort: their positions (i64).
// Stable (equal values keep their order, descending too, as the Array API asks); NaN sorts last
// ascending and first descending; -0 and +0 are equal. Half types sort as f32 (exact). `stable`
// is accepted for the Array API: every sort is stable.
namespace detail {
inline Array sort(const char* fn, int kind, const Array& x, int64_t axis_in, bool descending) {
  const Node& xn = node_of(x, fn);
  const Backend& b = x.need_backend(fn);
  if (xn.shape.empty())
    fail(fn, errc::invalid_argument, "argument x: 0-d arrays have no axis to sort along");
  const int64_t axis = norm_axis(axis_in, xn.shape.size(), fn);
  const dtype t = xn.type, a = is_half(t) ? dt::f32 : t;
  const dtype ot = kind == PCY_ARRAY_SORT_ARGSORT ? dt::i64 : a;
  Array out(b, xn.shape, ot);
  if (count_of(xn.shape) == 0) (void)out.node()->storage->host(access::write_only); // written
  if (count_of(xn.shape) > 0) {
    std::vector<int64_t> perm;
    for (size_t d = 0; d < xn.shape.size(); ++d)
      if (static_cast<int64_t>(d) != axis) perm.push_back(static_cast<int64_t>(d));
    perm.push_back(axis);
    Shape ost(perm.size());
    for (size_t j = 0; j < perm.size(); ++j)
      ost[j] = out.strides()[static_cast<size_t>(perm[j])];
    // sort_1 takes one input: a pending expression runs first.
    Array xe = x;
    xe.eval();
    NodePtr tree = as_type(xe.node(), a);
    std::optional<emitter> e;
    emit_fitting(*tree, b, perm, xn.shape, e);
    const std::vector<int64_t>& words = e->program(1, out.offset(), ost);
    const OpArg extra[] = {OpArg::integer(kind), OpArg::integer(descending ? 1 : 0)};
    run_program(b, sort_keys, 1, ot, words, *out.node()->storage, true, *e, extra);
  }
  return kind == PCY_ARRAY_SORT_SORT && is_half(t) ? astype(out, t) : out;
}
} // namespace detail
inline Array sort(const Array& x, int64_t axis = -1, bool descending = false, bool stable = true) {
  (void)stable;
  return detail::sort("sort", PCY_ARRAY_SORT_SORT, x, axis, descending);
}
inline Array argsort(const Array& x, int64_t axis = -1, bool descending = false,
                     bool stable = true) {
  (void)stable;
  return detail::sort("argsort", PCY_ARRAY_SORT_ARGSORT, x, axis, descending);
}

// ---- creation (run when called) -----------------------------------------------------------------
inline Array empty(const Backend& b, Shape shape, dtype t = dt::f32) {
  for (int64_t e : shape)
    if (e < 0) detail::fail("empty", errc::invalid_argument, "argument shape: extent ", e, " < 0");
  return Array(b, std::move(shape), t);
}
inline Array full(const Backend& b, Shape shape, double value, dtype t = dt::f32) {
  Array a = empty(b, std::move(shape), t);
  if (a.size() == 0) { // nothing to write, but written: a reduction over it is well defined
    (void)a.node()->storage->host(access::write_only);
    return a;
  }
  a.assign(is_half(t) ? full_scalar(value, dt::f32) : full_scalar(value, t));
  return a;
}
inline Array zeros(const Backend& b, Shape shape, dtype t = dt::f32) {
  return full(b, std::move(shape), 0, t);
}
inline Array ones(const Backend& b, Shape shape, dtype t = dt::f32) {
  return full(b, std::move(shape), 1, t);
}
inline Array empty_like(const Array& x) {
  return empty(x.need_backend("empty_like"), x.shape(), x.type());
}
inline Array zeros_like(const Array& x) {
  return zeros(x.need_backend("zeros_like"), x.shape(), x.type());
}
inline Array ones_like(const Array& x) {
  return ones(x.need_backend("ones_like"), x.shape(), x.type());
}
inline Array full_like(const Array& x, double v) {
  return full(x.need_backend("full_like"), x.shape(), v, x.type());
}

namespace detail {
// An array whose element i (along its only axis, or (i, j) for 2-d) comes from INDEX
// instructions: `body` gets the emitter and returns the value's register (of dtype t).
template <class F>
Array from_index(const char* fn, const Backend& b, Shape shape, dtype t, F&& body) {
  Array out(b, shape, t);
  if (count_of(shape) == 0) return out;
  emitter e(out.shape(), identity(shape.size()));
  const int r = body(e);
  (void)r;
  const std::vector<int64_t>& words = e.program(0, 0, dense_strides(shape));
  run_program(b, eval_keys, 0, t, words, *out.node()->storage, true, e, {});
  (void)fn;
  return out;
}
inline int64_t f64_word(double v) {
  int64_t w;
  std::memcpy(&w, &v, sizeof w);
  return w;
}
} // namespace detail

// arange(start, stop, step): ceil((stop - start) / step) values start + i step (computed in
// f64, then cast; integer dtypes exact below 2^53).
inline Array arange(const Backend& b, double start, double stop, double step = 1,
                    dtype t = dt::f64) {
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    detail::fail("arange", errc::invalid_argument,
                 "start, stop and step must be finite, step != 0");
  const double len = std::ceil((stop - start) / step);
  const int64_t n = len > 0 ? static_cast<int64_t>(len) : 0;
  return detail::from_index("arange", b, {n}, t, [&](detail::emitter& e) {
    const int i = e.push(PCY_ARRAY_OP_INDEX, dt::i64, 0, 0, 0);
    const int fi = e.push(PCY_ARRAY_OP_CAST, dt::f64, i, 0, 0);
    const int s = e.push(PCY_ARRAY_OP_CONST, dt::f64, detail::f64_word(step), 0, 0);
    const int m = e.push(PCY_ARRAY_OP_MUL, dt::f64, fi, s, 0);
    const int a = e.push(PCY_ARRAY_OP_CONST, dt::f64, detail::f64_word(start), 0, 0);
    const int v = e.push(PCY_ARRAY_OP_ADD, dt::f64, m, a, 0);
    return e.cast_to(v, dt::f64, t);
  });
}
// linspace(start, stop, num, endpoint): num values from start; the last is stop exactly when
// endpoint (as NumPy's).
inline Array linspace(const Backend& b, double start, double stop, int64_t num,
                      bool endpoint = true, dtype t = dt::f64) {
  if (num < 0) detail::fail("linspace", errc::invalid_argument, "argument num: ", num, " < 0");
  const double div = endpoint ? static_cast<double>(num - 1) : static_cast<double>(num);
  const double step = div > 0 ? (stop - start) / div : 0;
  return detail::from_index("linspace", b, {num}, t, [&](detail::emitter& e) {
    const int i = e.push(PCY_ARRAY_OP_INDEX, dt::i64, 0, 0, 0);
    const int fi = e.push(PCY_ARRAY_OP_CAST, dt::f64, i, 0, 0);
    const int s = e.push(PCY_ARRAY_OP_CONST, dt::f64, detail::f64_word(step), 0, 0);
    const int m = e.push(PCY_ARRAY_OP_MUL, dt::f64, fi, s, 0);
    const int a = e.push(PCY_ARRAY_OP_CONST, dt::f64, detail::f64_word(start), 0, 0);
    int v = e.push(PCY_ARRAY_OP_ADD, dt::f64, m, a, 0);
    if (endpoint && num > 1) {
      const int last = e.push(PCY_ARRAY_OP_CONST, dt::i64, num - 1, 0, 0);
      const int is_last = e.push(PCY_ARRAY_OP_EQ, dt::boolean, i, last, 0);
      const int stop_c = e.push(PCY_ARRAY_OP_CONST, dt::f64, detail::f64_word(stop), 0, 0);
      v = e.push(PCY_ARRAY_OP_WHERE, dt::f64, is_last, stop_c, v);
    }
    return e.cast_to(v, dt::f64, t);
  });
}
// eye(n, m, k): ones on the k-th diagonal (j - i == k).
inline Array eye(const Backend& b, int64_t n, std::optional<int64_t> m = std::nullopt,
                 int64_t k = 0, dtype t = dt::f32) {
  const int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0) detail::fail("eye", errc::invalid_argument, "negative extent");
  return detail::from_index("eye", b, {n, cols}, t, [&](detail::emitter& e) {
    const int i = e.push(PCY_ARRAY_OP_INDEX, dt::i64, 0, 0, 0);
    const int j = e.push(PCY_ARRAY_OP_INDEX, dt::i64, 1, 0, 0);
    const int d = e.push(PCY_ARRAY_OP_SUB, dt::i64, j, i, 0);
    const int kc = e.push(PCY_ARRAY_OP_CONST, dt::i64, k, 0, 0);
    const int on = e.push(PCY_ARRAY_OP_EQ, dt::boolean, d, kc, 0);
    return e.cast_to(on, dt::boolean, t);
  });
}

// An array with the host values given (row-major), on `b`.
template <class T> Array asarray(const Backend& b, std::span<const T> values, Shape shape) {
  if (detail::count_of(shape) != values.size())
    detail::fail("asarray", errc::invalid_argument, values.size(), " values for shape ",
                 detail::shape_str(shape));
  Array a(b, shape, dtype_of<T>::value);
  TensorStorage& st = *a.node()->storage;
  if (!values.empty())
    std::memcpy(st.host(access::write_only), values.data(), values.size() * sizeof(T));
  else
    (void)st.host(access::write_only);
  return a;
}
template <class T> Array asarray(const Backend& b, const std::vector<T>& values, Shape shape) {
  return asarray(b, std::span<const T>(values), std::move(shape));
}
template <class T> Array asarray(const Backend& b, const std::vector<T>& values) {
  return asarray(b, std::span<const T>(values), Shape{static_cast<int64_t>(values.size())});
}

// The array on another backend (a copy through the tensor's coherence: the data moves when the
// new backend reads it).
inline Array to(const Backend& b, const Array& x) {
  Array v = x;
  v.eval(x.need_backend("to"));
  Array c = v.copy();
  return Array(c.node(), b);
}

// ---- indexing, joining, products
// ------------------------------------------------------------------ take(x, indices, axis): x's
// elements at `indices` (integers; negative ones count from the end) along `axis`: the result's
// shape is x's with that axis replaced by indices' shape. Indices outside [-n, n) are clipped to
// the nearest end (NumPy's mode="clip"; the device never reads outside x). An embedding lookup:
// take(table, ids, 0).
inline Array take(const Array& x, const Array& indices, int64_t axis = 0) {
  using namespace detail;
  const Node& xn = node_of(x, "take");
  const Node& in = node_of(indices, "take");
  if (!is_integer(in.type))
    fail("take", errc::invalid_argument, "argument indices: dtype ", name_of(in.type),
         "; indices are integers");
  auto backend = pick_backend(x.backend(), indices.backend(), "take");
  if (!backend) fail("take", errc::invalid_argument, "no backend (wrap the arrays first)");
  const size_t r = xn.shape.size();
  const int64_t ax = norm_axis(axis, r, "take");
  const int64_t n = xn.shape[static_cast<size_t>(ax)];
  if (n == 0 && count_of(in.shape) > 0)
    fail("take", errc::invalid_argument, "argument x: axis ", ax, " is empty; nothing to take");
  Array src = view_base(x, "take");
  Array idx = indices.ndim() == 0 ? indices.reshape({1}) : indices;
  const size_t k = idx.ndim();
  Shape out_shape(xn.shape.begin(), xn.shape.begin() + ax);
  out_shape.insert(out_shape.end(), idx.shape().begin(), idx.shape().end());
  out_shape.insert(out_shape.end(), xn.shape.begin() + ax + 1, xn.shape.end());
  Array out(*backend, out_shape, xn.type);
  if (count_of(out_shape) > 0) {
    // Index space = out's shape; x is addressed over it with stride 0 on the index dimensions but
    // the first, which carries x's axis stride (GATHER replaces that coordinate).
    Shape xs(out_shape.size(), 0);
    for (int64_t d = 0; d < ax; ++d)
      xs[static_cast<size_t>(d)] = src.strides()[static_cast<size_t>(d)];
    xs[static_cast<size_t>(ax)] = src.strides()[static_cast<size_t>(ax)];
    for (size_t d = static_cast<size_t>(ax) + 1; d < r; ++d)
      xs[d + k - 1] = src.strides()[d];
    Shape is(out_shape.size(), 0);
    Array iv = view_base(idx, "take");
    for (size_t d = 0; d < k; ++d)
      is[static_cast<size_t>(ax) + d] = iv.strides()[d];
    emitter e(out_shape, identity(out_shape.size()));
    // Operands are registered through leaves with their strides already over the index space.
    auto lx = Array::leaf(src.node()->storage, src.offset(), xs, out_shape);
    auto li = Array::leaf(iv.node()->storage, iv.offset(), is, out_shape);
    const int ri = e.emit(*li);
    const int ri64 = e.cast_to(ri, iv.type(), dt::i64);
    const int zero = e.push(PCY_ARRAY_OP_CONST, dt::i64, 0, 0, 0);
    const int neg = e.push(PCY_ARRAY_OP_LT, dt::boolean, ri64, zero, 0);
    const int nn = e.push(PCY_ARRAY_OP_CONST, dt::i64, n, 0, 0);
    const int wrapped = e.push(PCY_ARRAY_OP_ADD, dt::i64, ri64, nn, 0);
    const int j = e.push(PCY_ARRAY_OP_WHERE, dt::i64, neg, wrapped, ri64);
    const int ox = e.operand_of(*lx);
    e.push_word(PCY_ARRAY_WORD(PCY_ARRAY_OP_GATHER, xn.type) | (n << 16), ox, j, ax);
    const std::vector<int64_t>& words = e.program(0, 0, dense_strides(out_shape));
    run_program(*backend, eval_keys, 0, xn.type, words, *out.node()->storage, true, e, {});
  } else {
    (void)out.node()->storage->host(access::write_only);
  }
  return indices.ndim() == 0 ? out.squeeze({ax}) : out;
}

// concat(arrays, axis): joined along an existing axis (dtypes promoted); each part is written
// into its slice of the result (one program per part).
inline Array concat(std::span<const Array> xs, int64_t axis = 0) {
  using namespace detail;
  if (xs.empty()) fail("concat", errc::invalid_argument, "argument arrays: none given");
  const Node& first = node_of(xs[0], "concat");
  const size_t r = first.shape.size();
  if (r == 0) fail("concat", errc::invalid_argument, "arrays of rank 0 cannot be concatenated");
  const int64_t ax = norm_axis(axis, r, "concat");
  std::optional<Backend> b;
  dtype t = first.type;
  Shape shape = first.shape;
  shape[static_cast<size_t>(ax)] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Node& n = node_of(xs[i], "concat");
    b = pick_backend(b, xs[i].backend(), "concat");
    if (n.shape.size() != r)
      fail("concat", errc::invalid_argument, "argument arrays: array ", i, " has ", n.shape.size(),
           " dimensions, the first ", r);
    for (size_t d = 0; d < r; ++d)
      if (static_cast<int64_t>(d) != ax && n.shape[d] != first.shape[d])
        fail("concat", errc::invalid_argument, "argument arrays: array ", i, " has shape ",
             shape_str(n.shape), ", which differs from ", shape_str(first.shape), " outside axis ",
             ax);
    shape[static_cast<size_t>(ax)] += n.shape[static_cast<size_t>(ax)];
    if (i > 0) t = promote(t, n.type);
  }
  if (!b) fail("concat", errc::invalid_argument, "no backend (wrap the arrays first)");
  Array out(*b, shape, t);
  int64_t at = 0;
  for (const Array& x : xs) {
    const int64_t len = x.shape()[static_cast<size_t>(ax)];
    if (len > 0) out.slice(ax, at, at + len).assign(x);
    at += len;
  }
  if (count_of(shape) == 0) (void)out.node()->storage->host(access::write_only);
  return out;
}
inline Array concat(std::initializer_list<Array> xs, int64_t axis = 0) {
  return concat(std::span<const Array>(xs.begin(), xs.size()), axis);
}
// stack(arrays, axis): joined along a new axis (same shapes).
inline Array stack(std::span<const Array> xs, int64_t axis = 0) {
  if (xs.empty()) detail::fail("stack", errc::invalid_argument, "argument arrays: none given");
  const int64_t ax = detail::norm_axis(axis, xs[0].ndim() + 1, "stack");
  std::vector<Array> ex;
  ex.reserve(xs.size());
  for (const Array& x : xs) {
    if (x.shape() != xs[0].shape())
      detail::fail("stack", errc::invalid_argument, "argument arrays: shapes ",
                   detail::shape_str(x.shape()), " and ", detail::shape_str(xs[0].shape()),
                   " differ");
    ex.push_back(x.expand_dims(ax));
  }
  return concat(std::span<const Array>(ex), ax);
}
inline Array stack(std::initializer_list<Array> xs, int64_t axis = 0) {
  return stack(std::span<const Array>(xs.begin(), xs.size()), axis);
}

namespace detail {
// A 2-d operand as gemm takes it: a whole dense tensor, or the transpose of one (trans).
inline bool gemm_operand(const Array& x, blas::transpose& t) {
  const Node& n = *x.node();
  if (n.k != Node::kind::leaf || n.offset != 0 || count_of(n.shape) != n.storage->size() ||
      n.storage->shape().size() != 2)
    return false;
  const Shape& s = n.storage->shape();
  if (n.shape == s && n.strides == Shape{s[1], 1}) {
    t = blas::no_trans;
    return true;
  }
  if (n.shape == Shape{s[1], s[0]} && n.strides == Shape{1, s[1]}) {
    t = blas::trans;
    return true;
  }
  return false;
}
// A batched operand as gemm_batched takes it: a whole dense tensor [..., r, c] seen as is, or
// the matrix transpose (mT) of one (trans).
inline bool batched_operand(const Array& x, blas::transpose& t) {
  const Node& n = *x.node();
  if (n.k != Node::kind::leaf || n.offset != 0 || count_of(n.shape) != n.storage->size())
    return false;
  const Shape& s = n.storage->shape();
  const size_t r = s.size();
  if (r < 2 || n.shape.size() != r) return false;
  if (n.shape == s && is_dense(n.shape, n.strides)) {
    t = blas::no_trans;
    return true;
  }
  Shape sw = s, st = dense_strides(s);
  std::swap(sw[r - 1], sw[r - 2]);
  std::swap(st[r - 1], st[r - 2]);
  if (n.shape == sw && n.strides == st) {
    t = blas::trans;
    return true;
  }
  return false;
}
// Whether the backend serves a BLAS op of dtype t (resolution is cached: an index after the
// first call).
template <const pcy_op_schema& S> bool has_blas(const Backend& b, dtype t) {
  try {
    (void)b.route(ext::op_key<S>(t));
    return true;
  } catch (const error&) {
    return false;
  }
}
} // namespace detail

// matmul(x, y): the Array API's (NumPy's) matrix product with batch broadcasting; a 1-d operand
// is a vector (a dimension added, then removed). Floating products run on the BLAS extension
// where the backend has it: 2-d ones on gemm, batches on gemm_batched (one strided-batched call:
// cuBLAS, CLBlast or our OpenCL kernels, OpenBLAS per matrix), an operand whose batch is one
// matrix broadcast with stride 0, a partial broadcast ([2, 1, m, k] @ [3, k, n]) materialised
// first; others (integers, bool, a backend without BLAS) as an elementwise product reduced over
// k, in one program.
inline Array matmul(const Array& x, const Array& y) {
  using namespace detail;
  const Node& xn = node_of(x, "matmul");
  const Node& yn = node_of(y, "matmul");
  if (xn.shape.empty() || yn.shape.empty())
    fail("matmul", errc::invalid_argument, "operands of rank 0; use multiply");
  auto backend = pick_backend(x.backend(), y.backend(), "matmul");
  if (!backend) fail("matmul", errc::invalid_argument, "no backend (wrap the arrays first)");
  Array a = xn.shape.size() == 1 ? x.expand_dims(0) : x;
  Array c = yn.shape.size() == 1 ? y.expand_dims(1) : y;
  const int64_t k = a.shape().back();
  if (c.shape()[c.ndim() - 2] != k)
    fail("matmul", errc::invalid_argument, "shapes ", shape_str(xn.shape), " and ",
         shape_str(yn.shape), ": the contracted extents differ (", k, " and ",
         c.shape()[c.ndim() - 2], ")");
  const dtype t = promote(xn.type, yn.type);
  Array out;
  const bool batched = a.ndim() > 2 || c.ndim() > 2;
  if (batched && is_floating(t) && k > 0 && has_blas<pcy_blas_gemm_batched_schema>(*backend, t)) {
    const Shape as(a.shape().begin(), a.shape().end() - 2),
        cs(c.shape().begin(), c.shape().end() - 2);
    const Shape bs = broadcast_shapes(as, cs, "matmul");
    const int64_t m = a.shape()[a.ndim() - 2], n = c.shape().back();
    Shape os = bs;
    os.insert(os.end(), {m, n});
    if (count_of(os) > 0) {
      // One operand: its own batch (every matrix), or one matrix for all; else materialised.
      auto prepare = [&](Array v, const Shape& vb, int64_t r, int64_t cc, blas::transpose& tr) {
        v = v.astype(t);
        const uint64_t nb = count_of(vb);
        if (nb != 1 && nb != count_of(bs)) {
          Shape full = bs;
          full.insert(full.end(), {r, cc});
          v = v.broadcast_to(full);
        }
        v.eval(*backend);
        if (!batched_operand(v, tr)) {
          v = v.copy();
          tr = blas::no_trans;
        }
        return v;
      };
      blas::transpose ta{}, tc{};
      Array aa = prepare(a, as, m, k, ta), cc = prepare(c, cs, k, n, tc);
      out = Array(*backend, os, t);
      blas::gemm_batched(*backend, ta, tc, 1.0, *aa.node()->storage, *cc.node()->storage, 0.0,
                         *out.node()->storage);
    }
  }
  if (!out.valid() && a.ndim() == 2 && c.ndim() == 2 && is_floating(t) && k > 0) {
    if (has_blas<pcy_blas_gemm_schema>(*backend, t)) {
      Array aa = a.astype(t), cc = c.astype(t);
      aa.eval(*backend);
      cc.eval(*backend);
      blas::transpose ta{}, tc{};
      if (!gemm_operand(aa, ta)) {
        aa = aa.copy();
        ta = blas::no_trans;
      }
      if (!gemm_operand(cc, tc)) {
        cc = cc.copy();
        tc = blas::no_trans;
      }
      out = Array(*backend, {a.shape()[0], c.shape()[1]}, t);
      blas::gemm(*backend, ta, tc, 1.0, *aa.node()->storage, *cc.node()->storage, 0.0,
                 *out.node()->storage);
    }
  }
  if (!out.valid()) {
    // [..., m, k, 1] * [..., 1, k, n] summed over k.
    // (bool: logical_and, reduced by any(); multiply refuses bool)
    const Array lhs = a.astype(t).expand_dims(-1), rhs = c.astype(t).expand_dims(-3);
    Array p = is_bool(t) ? logical_and(lhs, rhs) : lhs * rhs;
    const int64_t ax[] = {-2};
    const int64_t ka = static_cast<int64_t>(p.ndim()) - 2;
    const int64_t axk[] = {ka};
    (void)ax;
    out = is_bool(t) ? any(p, axk) : astype(sum(p, axk), t);
  }
  if (xn.shape.size() == 1) out = out.squeeze({-2});
  if (yn.shape.size() == 1) out = out.squeeze({-1});
  return out;
}
// vecdot(x, y, axis): sum(x * y) along axis (real dtypes), broadcast.
inline Array vecdot(const Array& x, const Array& y, int64_t axis = -1) {
  Array p = x * y;
  const int64_t ax[] = {axis};
  return astype(sum(p, ax), p.type()); // the promoted dtype (sum alone gives i64 for integers)
}
// tensordot(x, y, n): contracts x's last n axes with y's first n.
inline Array tensordot(const Array& x, const Array& y, int64_t n = 2) {
  using namespace detail;
  const size_t rx = x.ndim(), ry = y.ndim();
  if (n < 0 || static_cast<size_t>(n) > rx || static_cast<size_t>(n) > ry)
    fail("tensordot", errc::invalid_argument, "argument axes: ", n, " for ranks ", rx, " and ", ry);
  int64_t kk = 1;
  Shape lead(x.shape().begin(), x.shape().end() - n), trail(y.shape().begin() + n, y.shape().end());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ex = x.shape()[rx - static_cast<size_t>(n) + static_cast<size_t>(i)];
    if (ex != y.shape()[static_cast<size_t>(i)])
      fail("tensordot", errc::invalid_argument, "contracted extents differ: ", shape_str(x.shape()),
           " and ", shape_str(y.shape()));
    kk *= ex;
  }
  const int64_t m = static_cast<int64_t>(count_of(lead)),
                nn = static_cast<int64_t>(count_of(trail));
  Array r = matmul(x.reshape({m, kk}), y.reshape({kk, nn}));
  Shape out = lead;
  out.insert(out.end(), trail.begin(), trail.end());
  return r.reshape(out);
}
inline Array matrix_transpose(const Array& x) { return x.mT(); }

// ---- random numbers (counter-based Philox-4x32-10: the same bits on every device) ---------------
namespace random {
namespace detail {
// The same draw into an existing view (no new tensor): `out` must be a view, not a pending
// expression; expressions not yet run that read its tensor run first.
inline void draw_into(const char* fn, Array& out, int dist, uint64_t seed, uint64_t offset,
                      double a, double c) {
  const Backend& b = out.need_backend(fn);
  if (out.is_pending())
    array::detail::fail(fn, errc::invalid_argument,
                        "argument out: a pending expression; eval() it first or draw into a view "
                        "of a tensor");
  array::detail::Node& x = *out.node();
  if (x.storage->read_only())
    array::detail::fail(fn, errc::invalid_argument,
                        "argument out: a read-only import; copy it first");
  if (out.size() == 0) return;
  array::detail::flush_readers(x.storage.get(), nullptr, b);
  const size_t r = out.ndim();
  thread_local std::vector<int64_t> view;
  view.clear();
  view.push_back(static_cast<int64_t>(r));
  view.insert(view.end(), x.shape.begin(), x.shape.end());
  view.push_back(x.offset);
  view.insert(view.end(), x.strides.begin(), x.strides.end());
  const bool whole = out.is_dense_whole() || !x.storage->initialized();
  const OpArg args[] = {whole ? OpArg::out(*x.storage) : OpArg::inout(*x.storage),
                        OpArg::integers(view),
                        OpArg::integer(dist),
                        OpArg::integer(static_cast<int64_t>(seed)),
                        OpArg::integer(static_cast<int64_t>(offset)),
                        OpArg::real(a),
                        OpArg::real(c)};
  b.invoke(ext::op_key<pcy_array_random_schema>(x.type), args);
  ++array::detail::programs_run();
}
// A draw into a new array.
inline Array draw(const char* fn, const Backend& b, Shape shape, dtype t, int dist, uint64_t seed,
                  uint64_t offset, double a, double c) {
  Array out = array::empty(b, std::move(shape), t);
  if (out.size() == 0) {
    (void)out.node()->storage->host(access::write_only); // an empty result, written
    return out;
  }
  draw_into(fn, out, dist, seed, offset, a, c);
  return out;
}
} // namespace detail

// fill_uniform, fill_normal: the draws below into an existing view (out's dtype, floating), as
// PyTorch's in-place x.uniform_() and x.normal_(): no new tensor. The view's elements in row-major
// order are the draw's elements, as in a new array of its shape.
inline void fill_uniform(Array& out, uint64_t seed, uint64_t offset = 0, double low = 0,
                         double high = 1) {
  if (!out.valid() || !is_floating(out.type()))
    array::detail::fail("random.fill_uniform", errc::invalid_argument,
                        "argument out: needs a floating array");
  detail::draw_into("random.fill_uniform", out, PCY_ARRAY_RANDOM_UNIFORM, seed, offset, low, high);
}
inline void fill_normal(Array& out, uint64_t seed, uint64_t offset = 0, double mean = 0,
                        double std = 1) {
  if (!out.valid() || !is_floating(out.type()))
    array::detail::fail("random.fill_normal", errc::invalid_argument,
                        "argument out: needs a floating array");
  detail::draw_into("random.fill_normal", out, PCY_ARRAY_RANDOM_NORMAL, seed, offset, mean, std);
}

// uniform: [low, high) (floating dtypes).
inline Array uniform(const Backend& b, Shape shape, uint64_t seed, uint64_t offset = 0,
                     double low = 0, double high = 1, dtype t = dt::f32) {
  if (!is_floating(t))
    array::detail::fail("random.uniform", errc::invalid_argument, "argument dtype: ", name_of(t),
                        "; uniform draws floating values");
  return detail::draw("random.uniform", b, std::move(shape), t, PCY_ARRAY_RANDOM_UNIFORM, seed,
                      offset, low, high);
}
// normal: mean + std z, z standard normal (Box-Muller on Philox words).
inline Array normal(const Backend& b, Shape shape, uint64_t seed, uint64_t offset = 0,
                    double mean = 0, double std = 1, dtype t = dt::f32) {
  if (!is_floating(t))
    array::detail::fail("random.normal", errc::invalid_argument, "argument dtype: ", name_of(t),
                        "; normal draws floating values");
  return detail::draw("random.normal", b, std::move(shape), t, PCY_ARRAY_RANDOM_NORMAL, seed,
                      offset, mean, std);
}
// bernoulli: 1 with probability p (bool by default).
inline Array bernoulli(const Backend& b, Shape shape, double p, uint64_t seed, uint64_t offset = 0,
                       dtype t = dt::boolean) {
  if (!(p >= 0 && p <= 1))
    array::detail::fail("random.bernoulli", errc::invalid_argument, "argument p: ", p,
                        " outside [0, 1]");
  return detail::draw("random.bernoulli", b, std::move(shape), t, PCY_ARRAY_RANDOM_BERNOULLI, seed,
                      offset, p, 0);
}
// randint: integers in [low, high).
inline Array randint(const Backend& b, Shape shape, int64_t low, int64_t high, uint64_t seed,
                     uint64_t offset = 0, dtype t = dt::i64) {
  if (!is_integer(t) || high <= low)
    array::detail::fail("random.randint", errc::invalid_argument,
                        "needs an integer dtype and low < high (got ", low, ", ", high, ")");
  return detail::draw("random.randint", b, std::move(shape), t, PCY_ARRAY_RANDOM_RANDINT, seed,
                      offset, static_cast<double>(low), static_cast<double>(high));
}

// permutation: a random permutation of 0 .. n-1 (i64 by default), the same on every device; no
// sort (a Feistel network with Philox rounds, pcy_array_random.h). permutation(x) of an array:
// take(x, permutation(n), axis 0).
inline Array permutation(const Backend& b, int64_t n, uint64_t seed, uint64_t offset = 0,
                         dtype t = dt::i64) {
  if (n < 0 || (t != dt::i64 && t != dt::i32) || (t == dt::i32 && n > (int64_t{1} << 31)))
    array::detail::fail("random.permutation", errc::invalid_argument,
                        "needs n >= 0 and dtype i64 (or i32 for n <= 2^31); got n = ", n);
  return detail::draw("random.permutation", b, {n}, t, PCY_ARRAY_RANDOM_PERMUTATION, seed, offset,
                      0, 0);
}
inline Array permutation(const Array& x, uint64_t seed, uint64_t offset = 0) {
  if (x.ndim() == 0)
    array::detail::fail("random.permutation", errc::invalid_argument, "argument x: rank 0");
  return take(x, permutation(x.need_backend("random.permutation"), x.shape()[0], seed, offset), 0);
}

// A stream: each draw takes the next counters of (seed, offset) (4 elements per counter, 2 for
// two-word draws: pcy_array.h), so successive draws never overlap and a program replays exactly
// from its seed.
class Generator {
public:
  explicit Generator(uint64_t seed, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const noexcept { return seed_; }
  uint64_t offset() const noexcept { return offset_; }
  Array uniform(const Backend& b, Shape s, double low = 0, double high = 1, dtype t = dt::f32) {
    const uint64_t o = take(s, PCY_ARRAY_RANDOM_UNIFORM, t);
    return random::uniform(b, std::move(s), seed_, o, low, high, t);
  }
  Array normal(const Backend& b, Shape s, double mean = 0, double std = 1, dtype t = dt::f32) {
    const uint64_t o = take(s, PCY_ARRAY_RANDOM_NORMAL, t);
    return random::normal(b, std::move(s), seed_, o, mean, std, t);
  }
  Array bernoulli(const Backend& b, Shape s, double p, dtype t = dt::boolean) {
    const uint64_t o = take(s, PCY_ARRAY_RANDOM_BERNOULLI, t);
    return random::bernoulli(b, std::move(s), p, seed_, o, t);
  }
  Array randint(const Backend& b, Shape s, int64_t low, int64_t high, dtype t = dt::i64) {
    const uint64_t o = take(s, PCY_ARRAY_RANDOM_RANDINT, t);
    return random::randint(b, std::move(s), low, high, seed_, o, t);
  }
  void fill_uniform(Array& out, double low = 0, double high = 1) {
    const uint64_t o = take(out.shape(), PCY_ARRAY_RANDOM_UNIFORM, out.type());
    random::fill_uniform(out, seed_, o, low, high);
  }
  void fill_normal(Array& out, double mean = 0, double std = 1) {
    const uint64_t o = take(out.shape(), PCY_ARRAY_RANDOM_NORMAL, out.type());
    random::fill_normal(out, seed_, o, mean, std);
  }
  // A permutation takes one offset (its network is keyed by it).
  Array permutation(const Backend& b, int64_t n, dtype t = dt::i64) {
    return random::permutation(b, n, seed_, offset_++, t);
  }

private:
  // The counters a draw of s takes: ceil(elements / P), P elements per counter (pcy_array.h).
  uint64_t take(const Shape& s, int distribution, dtype t) {
    const uint64_t o = offset_;
    const auto per =
        static_cast<uint64_t>(pcy_array_random_per_counter(distribution, static_cast<int>(t)));
    const uint64_t n = array::detail::count_of(s);
    offset_ += n / per + (n % per != 0 ? 1 : 0);
    return o;
  }
  uint64_t seed_, offset_;
};

} // namespace random

} // namespace parenchyma::array
