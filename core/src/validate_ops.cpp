// parenchyma core: the validation layer's check of bundle ops, and the `in` tensor rule
// (validate_layer.hpp).
#include "validate_layer.hpp"

#include <algorithm>

namespace parenchyma {
inline namespace v1 {
namespace validate {
namespace layer {
// ---- ops: the `in` tensor check ---------------------------------------------------------------

namespace {
// [begin, end) bytes of a tensor in its memory; nullopt when its shape cannot be read.
std::optional<std::pair<uint64_t, uint64_t>> extent(const pcy_tensor& t) {
  const size_t es = sdk::dtype_size(static_cast<pcy_dtype>(raw(t.dtype)));
  if (es == 0 || t.ndim < 0 || t.ndim > 64 || (t.ndim > 0 && t.shape == nullptr))
    return std::nullopt;
  int64_t lo = 0, hi = 0; // element offsets of the lowest and highest element
  for (int32_t k = 0; k < t.ndim; ++k) {
    if (t.shape[k] < 0) return std::nullopt;
    if (t.shape[k] == 0) return std::make_pair(t.byte_offset, t.byte_offset);
  }
  int64_t dense = 1;
  for (int32_t k = t.ndim; k-- > 0;) {
    const int64_t stride = t.strides != nullptr ? t.strides[k] : dense;
    int64_t span = 0;
    if (__builtin_mul_overflow(t.shape[k] - 1, stride, &span)) return std::nullopt;
    if (__builtin_add_overflow(span >= 0 ? hi : lo, span, span >= 0 ? &hi : &lo))
      return std::nullopt;
    if (__builtin_mul_overflow(dense, t.shape[k], &dense)) return std::nullopt;
  }
  int64_t lo_b = 0, hi_b = 0;
  if (__builtin_mul_overflow(lo, static_cast<int64_t>(es), &lo_b) ||
      __builtin_mul_overflow(hi + 1, static_cast<int64_t>(es), &hi_b))
    return std::nullopt;
  const auto off = static_cast<int64_t>(t.byte_offset);
  if (off < 0 || off + lo_b < 0) return std::nullopt;
  return std::make_pair(static_cast<uint64_t>(off + lo_b), static_cast<uint64_t>(off + hi_b));
}

uint64_t hash_bytes(const std::byte* p, uint64_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 29;
  }
  for (; i < n; ++i)
    h = (h ^ static_cast<uint64_t>(p[i])) * 0x100000001b3ull;
  return h;
}

std::string arg_name(const pcy_op_desc* copy, uint32_t i) {
  std::string n = str("#", i);
  if (copy != nullptr && copy->schema != nullptr && i < copy->schema->arg_count &&
      copy->schema->args != nullptr && copy->schema->args[i].name != nullptr)
    n = detail::quote_prefix(copy->schema->args[i].name, 32) + " (" + n + ")";
  return n;
}

struct watched {
  uint32_t arg;
  const void* memory;
  const std::byte* bytes = nullptr; // host view of the extent; nullptr: not checked
  uint64_t size = 0;
  uint64_t hash = 0;
};

void finish(const pcy_framework_api* fw, pcy_queue q) {
  if (fw == nullptr || fw->queue_finish == nullptr) return;
  if (pcy_error* e = fw->queue_finish(q)) e->destroy(e);
}

} // namespace

pcy_error* run_op(int k, const pcy_op_call* call) {
  return guarded([&]() -> pcy_error* {
    state& s = st();
    pcy_op_fn fn = nullptr;
    std::string label;
    const pcy_op_desc* copy = nullptr;
    const void* instance = nullptr;
    int slot = -1;
    {
      std::unique_lock lock(s.m);
      const op_slot& os = s.ops[static_cast<size_t>(k)];
      if (!os.used) {
        finding f;
        f.set(rule_live, "an op of a bundle that was shut down was called");
        std::string bad = count(s, "?", "op", f);
        lock.unlock();
        return report(bad);
      }
      fn = os.fn;
      label = os.label;
      copy = os.copy;
      instance = os.instance;
      slot = os.bundle;
    }
    scope c(slot, true, "op");
    c.who = label;
    finding& f = c.f;
    const pcy_framework_api* fw = nullptr; // the framework's own table (for finish, export)
    std::vector<watched> ins;
    std::vector<std::pair<const void*, std::pair<uint64_t, uint64_t>>> writes;
    // Memories (of `in` and of written arguments) whose host view is not known yet: an `in`
    // tensor whose bytes are written through another memory over the same host bytes (two
    // imports of one buffer) is the caller's aliasing, not a bundle that wrote its input.
    std::vector<const void*> ask;
    // The call's queue is capturing a graph: the op is recorded, not run, and draining the queue
    // would break the capture, so its `in` tensors are not watched.
    bool capturing = false;
    if (c.ok() && PARENCHYMA_VALIDATE_SIZED(f, call, "pcy_op_call", PCY_OP_CALL_SIZE_1_0)) {
      record* bc = expect(s, f, slot, call->context, kind::bundle_context, "bundle context");
      if (bc != nullptr && bc->plugin != instance)
        f.set(rule_owner, str("bundle context ", hex(call->context),
                              " was set up by another instance of the bundle"));
      int fs = -1;
      const void* ctx = nullptr;
      if (bc != nullptr) {
        fs = bc->fw_slot;
        ctx = bc->context;
        fw = fs >= 0 ? &s.fw[static_cast<size_t>(fs)].orig : bc->fw_table;
      }
      if (fs >= 0 && !s.fw[static_cast<size_t>(fs)].used) fs = -1;
      record* q = nullptr;
      if (fs >= 0) {
        q = expect(s, f, fs, call->queue, kind::queue, "the call's queue");
        capturing = q != nullptr && q->capturing;
        if (q != nullptr && q->context != ctx)
          f.set(rule_context,
                str("queue ", hex(call->queue), " belongs to context ", hex(q->context),
                    ", the bundle context was set up in ", hex(ctx)));
      }
      if (call->arg_count > 0 && call->args == nullptr)
        f.set(rule_call, str("args is NULL with arg_count ", call->arg_count));
      const bool has_ext = PCY_HAS_FIELD(call, pcy_op_call, arg_ext) && call->arg_ext != nullptr;
      for (uint32_t i = 0; f.rule == nullptr && call->args != nullptr && i < call->arg_count; ++i) {
        const pcy_op_arg& a = call->args[i];
        if (has_ext)
          PARENCHYMA_VALIDATE_SIZED(f, &call->arg_ext[i], "pcy_op_arg_ext",
                                    PCY_SIZE_THROUGH(pcy_op_arg_ext, count));
        if (raw(a.kind) != PCY_OP_ARG_TENSOR) continue;
        const std::string name = "argument " + arg_name(copy, i);
        if (!PARENCHYMA_VALIDATE_SIZED(f, a.tensor, "pcy_tensor", PCY_TENSOR_SIZE_1_0)) {
          f.problem = name + ": " + f.problem;
          break;
        }
        const auto range = extent(*a.tensor);
        if (fs < 0) continue; // memory of a framework the layer does not know
        const std::string role = name + "'s memory";
        record* m = expect(s, f, fs, a.tensor->memory, kind::memory, role.c_str());
        if (m == nullptr) break;
        if (m->context != ctx)
          f.set(rule_context,
                str(role, " ", hex(a.tensor->memory), " lives in context ", hex(m->context),
                    ", the bundle context was set up in ", hex(ctx)));
        if (!range || (m->bytes > 0 && range->second > m->bytes))
          f.set(rule_extent, range
                                 ? str(name, " reaches byte ", range->second,
                                       " of its memory, which has ", m->bytes)
                                 : str(name, " has a shape (or strides) that cannot be laid out"));
        if (f.rule != nullptr) break;
        if (m->host < 0 && std::find(ask.begin(), ask.end(), a.tensor->memory) == ask.end())
          ask.push_back(a.tensor->memory);
        if (raw(a.intent) != PCY_INTENT_IN) {
          writes.emplace_back(a.tensor->memory, *range);
          continue;
        }
        if (range->first == range->second) continue;
        ins.push_back(watched{i, a.tensor->memory});
      }
      c.busy(call->context, bc, "bundle context");
      c.busy(call->queue, q, "queue");
    }
    if (std::string bad = c.verdict(); !bad.empty()) return report(bad);

    // Host views of the arguments' memory, asked of the framework once per memory.
    for (const void* memory : ask) {
      if (fw == nullptr || fw->memory_export == nullptr) break;
      pcy_memory_handle h{};
      h.struct_size = sizeof h;
      pcy_memory_export_args x{};
      x.struct_size = sizeof x;
      x.memory = static_cast<pcy_memory>(const_cast<void*>(memory));
      x.kind = PCY_HANDLE_HOST_POINTER;
      x.handle = &h;
      pcy_error* e = fw->memory_export(&x);
      const bool visible =
          e == nullptr && raw(h.kind) == PCY_HANDLE_HOST_POINTER && h.host_pointer != nullptr;
      if (e != nullptr) e->destroy(e);
      std::lock_guard relock(s.m);
      if (auto it = s.live.find(memory); it != s.live.end() && it->second.host < 0) {
        it->second.host = visible ? 1 : 0;
        it->second.host_ptr = visible ? static_cast<const std::byte*>(h.host_pointer) : nullptr;
        it->second.host_bytes = visible ? h.bytes : 0;
      }
    }
    bool any = false;
    {
      std::lock_guard relock(s.m);
      for (watched& w : ins) {
        auto it = s.live.find(w.memory);
        if (it == s.live.end() || it->second.host != 1) continue;
        const auto range = *extent(*call->args[w.arg].tensor);
        if (range.second > it->second.host_bytes) continue;
        // An `in` argument whose bytes are also written through another argument may change.
        bool overlap = false;
        for (const auto& [mem, r] : writes) {
          if (mem == w.memory) {
            overlap = overlap || (r.first < range.second && range.first < r.second);
            continue;
          }
          auto wi = s.live.find(mem);
          overlap =
              overlap || (wi != s.live.end() && wi->second.host == 1 &&
                          wi->second.host_ptr + r.first < it->second.host_ptr + range.second &&
                          it->second.host_ptr + range.first < wi->second.host_ptr + r.second);
        }
        if (overlap) continue;
        w.bytes = it->second.host_ptr + range.first;
        w.size = range.second - range.first;
        any = true;
      }
    }
    // The op's queue is drained before (a pending write may still be filling an `in` tensor)
    // and after (the op may run asynchronously): validation mode is slow on purpose.
    if (capturing) any = false;
    if (any) {
      finish(fw, call->queue);
      for (watched& w : ins)
        if (w.bytes != nullptr) w.hash = hash_bytes(w.bytes, w.size);
    }
    pcy_error* e = fn(call);
    if (!any) return e;
    finish(fw, call->queue);
    for (const watched& w : ins) {
      if (w.bytes == nullptr || hash_bytes(w.bytes, w.size) == w.hash) continue;
      f.set(rule_in,
            str("argument ", arg_name(copy, w.arg), " is an `in` tensor (memory ", hex(w.memory),
                ", ", w.size, " bytes), and its bytes changed during the op: the bundle wrote it"));
      break;
    }
    if (f.rule == nullptr) return e;
    c.lock.lock();
    std::string bad = c.verdict();
    if (e != nullptr) {
      report_void(bad);
      return e;
    }
    return report(bad);
  });
}

// ---- the entry point of each op pool slot -----------------------------------------------------

namespace {
template <int K> pcy_error* op_entry(const pcy_op_call* call) noexcept { return run_op(K, call); }
template <int... I>
constexpr std::array<pcy_op_fn, sizeof...(I)> op_entry_list(std::integer_sequence<int, I...>) {
  return {&op_entry<I>...};
}
} // namespace

const std::array<pcy_op_fn, op_pool> op_entries =
    op_entry_list(std::make_integer_sequence<int, op_pool>{});

} // namespace layer
} // namespace validate
} // namespace v1
} // namespace parenchyma
