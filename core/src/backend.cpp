// parenchyma core: Backend (context + queue on one device), op resolution with per-op fallback,
// op invocation, and user kernels.
#include "internal.hpp"
#include "progress.hpp"
#include "tensor_impl.hpp"

#include <parenchyma/sdk/common.hpp>
#include <parenchyma/sdk/launch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

namespace parenchyma {
inline namespace v1 {

namespace {
std::atomic<int32_t> g_next_op_slot{0};
} // namespace

int32_t OpKey::index() const {
  int32_t s = slot.load(std::memory_order_acquire);
  if (s >= 0) return s;
  int32_t fresh = g_next_op_slot.fetch_add(1);
  int32_t expected = -1;
  if (slot.compare_exchange_strong(expected, fresh)) return fresh;
  return expected; // another thread assigned it first
}

namespace detail {

std::optional<std::vector<ArgRule>> rules_of(const pcy_op_schema& schema) {
  if (schema.arg_count > max_op_args || (schema.arg_count > 0 && schema.args == nullptr))
    return std::nullopt;
  std::vector<ArgRule> out;
  for (uint32_t i = 0; i < schema.arg_count; ++i) {
    const pcy_arg_schema& a = schema.args[i];
    ArgRule r{a.kind, a.intent, a.dtype, a.rank, a.name};
    if (a.name == nullptr || a.kind < PCY_SCHEMA_INT || a.kind > PCY_SCHEMA_INT_ARRAY)
      return std::nullopt;
    if (a.kind == PCY_SCHEMA_TENSOR &&
        (a.intent < PCY_INTENT_IN || a.intent > PCY_SCHEMA_INTENT_OVERWRITE))
      return std::nullopt;
    out.push_back(r);
  }
  return out;
}

std::optional<std::vector<ArgRule>> rules_of(std::string_view s) {
  std::vector<ArgRule> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ') {
      ++i;
      continue;
    }
    if (out.size() >= max_op_args) return std::nullopt;
    ArgRule r;
    if (c == 'i')
      r.kind = PCY_SCHEMA_INT;
    else if (c == 'f')
      r.kind = PCY_SCHEMA_FLOAT;
    else if (c == 's')
      r.kind = PCY_SCHEMA_SCALAR;
    else if (c == 'a')
      r.kind = PCY_SCHEMA_INT_ARRAY;
    else if (c == 't' && i + 1 < s.size()) {
      r.kind = PCY_SCHEMA_TENSOR;
      const char m = s[++i];
      if (m == '<')
        r.intent = PCY_INTENT_IN;
      else if (m == '>')
        r.intent = PCY_INTENT_OUT;
      else if (m == '=')
        r.intent = PCY_INTENT_INOUT;
      else
        return std::nullopt;
    } else {
      return std::nullopt;
    }
    out.push_back(r);
    ++i;
  }
  return out;
}

bool compatible(const std::vector<ArgRule>& bundle, const std::vector<ArgRule>& key) noexcept {
  if (bundle.size() != key.size()) return false;
  for (size_t i = 0; i < key.size(); ++i) {
    const ArgRule &b = bundle[i], &k = key[i];
    if (b.kind != k.kind) return false;
    if (k.kind != PCY_SCHEMA_TENSOR) continue;
    // An overwritten output is "t=" to a 1.0 signature (or "t>" for copy's y, as 1.0 had it).
    const bool k_over = k.intent == PCY_SCHEMA_INTENT_OVERWRITE;
    const bool b_over = b.intent == PCY_SCHEMA_INTENT_OVERWRITE;
    if (k_over != b_over && !(k_over && b.name == nullptr && b.intent != PCY_INTENT_IN) &&
        !(b_over && k.name == nullptr && k.intent != PCY_INTENT_IN))
      return false;
    if (!k_over && !b_over && b.intent != k.intent) return false;
    // dtype and rank rules: only compared when both sides state them (a 1.0 signature does not).
    if (b.name != nullptr && k.name != nullptr && (b.dtype != k.dtype || b.rank != k.rank))
      return false;
  }
  return true;
}

} // namespace detail

namespace {
std::string op_label(const OpKey& key) {
  return std::string(key.extension) + "." + key.name + " (" + sdk::dtype_name(key.dtype) + ")";
}

// Slow work this thread waits for (a bundle's set-up, an op's first call), on a progress line
// (a terminal, after a second: detail::progress_line). The plugins' progress steps (host service
// 1.4, e.g. each program they compile) show on it with their count.
class WaitProgress {
public:
  explicit WaitProgress(std::string what) : line_(what), what_(std::move(what)), outer_(current_) {
    if (line_.active()) current_ = this;
  }
  ~WaitProgress() {
    if (current_ == this) current_ = outer_;
  }
  WaitProgress(const WaitProgress&) = delete;
  WaitProgress& operator=(const WaitProgress&) = delete;
  static void step(const char* text) noexcept {
    WaitProgress* p = current_;
    if (p == nullptr || text == nullptr) return;
    try {
      ++p->steps_;
      p->line_.update(p->what_ + ": " + detail::quote_prefix(text, 120) + " (step " +
                      std::to_string(p->steps_) + ")");
    } catch (...) {
      // a progress line that cannot be updated keeps its text
    }
  }

private:
  detail::progress_line line_;
  std::string what_;
  int steps_ = 0;
  WaitProgress* outer_;
  static thread_local WaitProgress* current_;
};
thread_local WaitProgress* WaitProgress::current_ = nullptr;
} // namespace

void detail::plugin_progress(void*, const char* step) noexcept { WaitProgress::step(step); }

// ---------------------------------------------------------------------------------------------
DeviceContext::DeviceContext(std::shared_ptr<RegistryImpl> reg, const Framework& fw, uint32_t pos)
    : registry(std::move(reg)), framework(&fw), api(&fw.api()), position(pos),
      plugin_device(fw.devices().at(pos).plugin_index),
      name(fw.name() + ":" + std::to_string(pos)) {
  const Device& d = fw.devices()[pos];
  shares_host = d.kind == device_kind::cpu;
  for (const auto& [key, value] : d.properties)
    if (key == PCY_PROP_HOST_UNIFIED)
      if (const bool* unified = std::get_if<bool>(&value)) shares_host = shares_host || *unified;
  std::lock_guard<std::mutex> lock(detail::plugin_lifecycle_mutex());
  throw_if(api->context_create(fw.plugin(), &plugin_device, 1, &context),
           ("creating a context on " + name).c_str());
  if (context == nullptr)
    throw error(errc::plugin, fw.name(),
                "context_create reported success but returned no context: the plugin is broken");
}

DeviceContext::~DeviceContext() {
  if (detail::inherited(*registry)) return; // fork.cpp: the parent's context, not ours
  if (transfer_queue_ != nullptr) api->queue_destroy(transfer_queue_);
  std::lock_guard<std::mutex> lock(detail::plugin_lifecycle_mutex());
  api->context_destroy(context);
}

void DeviceContext::make_transfer_queue() {
  throw_if(api->queue_create(context, 0, &transfer_queue_),
           ("creating a transfer queue on " + name).c_str());
  if (transfer_queue_ == nullptr)
    throw error(errc::plugin, framework->name(),
                "queue_create reported success but returned no queue: the plugin is broken");
}

BackendImpl::BackendImpl(std::shared_ptr<DeviceContext> device_context, Selection sel,
                         std::vector<std::string> deny)
    : dev(std::move(device_context)), registry(dev->registry), framework(dev->framework),
      api(dev->api), device(dev->position), name(dev->name), selection(std::move(sel)),
      denied(std::move(deny)), context(dev->context) {
  throw_if(api->queue_create(context, 0, &queue), ("creating a queue on " + name).c_str());
  if (queue == nullptr)
    throw error(errc::plugin, framework->name(),
                "queue_create reported success but returned no queue: the plugin is broken");
}

BackendImpl::~BackendImpl() {
  if (detail::inherited(*registry)) return; // fork.cpp: the parent's queue, not ours
  if (pcy_error* e = api->queue_finish(queue)) e->destroy(e);
  host_synchronised();
  for (auto& [bundle, ctx] : bundle_contexts_)
    if (ctx != nullptr) bundle->api().context_teardown(ctx);
  fallbacks_.clear();
  workspace_.reset(); // freed here unless a graph still holds it
  api->queue_destroy(queue);
}

void BackendImpl::finish() {
  throw_if(api->queue_finish(queue), "waiting for the queue");
  host_synchronised();
}

namespace {
[[noreturn]] [[gnu::noinline]] void refuse_while_recording(const BackendImpl& b, const char* what) {
  throw error(errc::invalid_argument, b.name,
              std::string(what) +
                  " while the backend records a graph: a graph holds only ops (the recorded ops "
                  "have not run yet); do it before recording or after it");
}
} // namespace

pcy_bundle_context BackendImpl::bundle_context(const BundleInfo& bundle) {
  // Called with mutex_ held (resolution).
  for (auto& [b, ctx] : bundle_contexts_)
    if (b == &bundle) return ctx;
  pcy_bundle_context_args a{};
  a.struct_size = sizeof a;
  a.plugin = bundle.plugin();
  a.framework = api;
  a.framework_plugin = framework->plugin();
  a.context = context;
  a.device = 0;
  a.plugin_device = dev->plugin_device;
  a.queue = queue;
  {
    // A first use may compile the bundle's kernels (cached afterwards): say so on a terminal
    // when it takes more than a second.
    WaitProgress progress("setting up " + bundle.name() + " on " + name +
                          " (a first use compiles its kernels; they are cached)");
    throw_if(bundle.api().context_init(&a),
             ("setting up bundle " + bundle.name() + " on " + name).c_str());
  }
  bundle_contexts_.emplace_back(&bundle, a.bundle);
  return a.bundle;
}

BackendImpl& BackendImpl::fallback_for(const Framework& fw, uint32_t position,
                                       const std::string& why) {
  // Called with mutex_ held. Each backend borrows through backends of its own, so two threads'
  // backends never share a queue or a bundle context through their fallbacks either.
  std::shared_ptr<DeviceContext> ctx = registry->context_for(fw, position);
  for (auto& [c, b] : fallbacks_)
    if (c == ctx.get()) return *b;
  auto b = std::make_shared<BackendImpl>(ctx, Selection{fw.name(), position, why, denied}, denied);
  b->self = b;
  fallbacks_.emplace_back(ctx.get(), b);
  return *b;
}

detail::BoundOp& BackendImpl::resolve_slow(const OpKey& key, uint32_t idx) {
  if (idx >= op_chunk * op_chunks)
    throw error(errc::unsupported, "core",
                "more than " + std::to_string(op_chunk * op_chunks) +
                    " distinct op keys in one process: OpKeys must be static objects");
  std::lock_guard<std::mutex> lock(mutex_);
  std::atomic<detail::BoundOp*>* chunk = chunks_[idx / op_chunk].load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunk_storage_.push_back(std::make_unique<std::atomic<detail::BoundOp*>[]>(op_chunk));
    chunk = chunk_storage_.back().get();
    for (uint32_t i = 0; i < op_chunk; ++i)
      chunk[i].store(nullptr, std::memory_order_relaxed);
    chunks_[idx / op_chunk].store(chunk, std::memory_order_release);
  }
  if (detail::BoundOp* bound = chunk[idx % op_chunk].load(std::memory_order_relaxed))
    return *bound; // another thread resolved it while we waited for the lock
  auto op = std::make_unique<detail::BoundOp>();
  resolve(*op, key);
  detail::BoundOp* published = op.get();
  bound_storage_.push_back(std::move(op));
  chunk[idx % op_chunk].store(published, std::memory_order_release);
  return *published;
}

void BackendImpl::resolve(detail::BoundOp& op, const OpKey& key) {
  const std::string opname = op_label(key);
  auto key_rules = key.schema != nullptr      ? detail::rules_of(*key.schema)
                   : key.signature != nullptr ? detail::rules_of(key.signature)
                                              : std::nullopt;
  if (!key_rules) {
    op.failure = opname + ": the front-end's schema or signature is malformed (a bug in the "
                          "extension's front-end)";
    op.failure_code = errc::internal;
    return;
  }
  op.arg_count = static_cast<uint32_t>(key_rules->size());
  for (size_t i = 0; i < key_rules->size(); ++i) {
    detail::ArgRule& r = op.rules[i];
    r = (*key_rules)[i];
    op.needs_ext = op.needs_ext || r.kind == PCY_SCHEMA_INT_ARRAY;
    op.defer_sync =
        op.defer_sync || (r.kind == PCY_SCHEMA_TENSOR &&
                          (r.intent == PCY_INTENT_OUT || r.intent == PCY_SCHEMA_INTENT_OVERWRITE));
    using detail::arg_pair;
    switch (r.kind) {
    case PCY_SCHEMA_INT: r.accept_a = arg_pair(PCY_OP_ARG_INT, PCY_INTENT_IN); break;
    case PCY_SCHEMA_FLOAT: r.accept_a = arg_pair(PCY_OP_ARG_FLOAT, PCY_INTENT_IN); break;
    case PCY_SCHEMA_INT_ARRAY: r.accept_a = arg_pair(PCY_OP_ARG_INT_ARRAY, PCY_INTENT_IN); break;
    case PCY_SCHEMA_SCALAR:
      r.accept_a = arg_pair(PCY_OP_ARG_FLOAT, PCY_INTENT_IN);
      r.accept_b = arg_pair(PCY_OP_ARG_TENSOR, PCY_INTENT_IN);
      break;
    case PCY_SCHEMA_TENSOR:
      if (r.intent == PCY_SCHEMA_INTENT_OVERWRITE) {
        r.accept_a = arg_pair(PCY_OP_ARG_TENSOR, PCY_INTENT_OUT);
        r.accept_b = arg_pair(PCY_OP_ARG_TENSOR, PCY_INTENT_INOUT);
      } else {
        r.accept_a = arg_pair(PCY_OP_ARG_TENSOR, r.intent);
      }
      break;
    }
    r.extra = static_cast<uint8_t>((r.kind == PCY_SCHEMA_TENSOR && r.rank >= 0 ? 1 : 0) |
                                   (r.kind == PCY_SCHEMA_SCALAR ? 2 : 0));
    r.want_dtype = static_cast<uint8_t>(
        r.dtype == PCY_SCHEMA_DTYPE_OP || r.kind == PCY_SCHEMA_SCALAR ? static_cast<int>(key.dtype)
                                                                      : static_cast<int>(r.dtype));
  }
  const std::string key_sig =
      key.signature != nullptr ? std::string(key.signature) : std::string("(schema)");

  // The bundles serving the op with arguments compatible with the front-end's, on `fw`: the
  // config's bundle_priority first, then load order. Bundles whose op descriptors failed the
  // load checks never got those ops, so one broken bundle cannot break an op elsewhere.
  std::string notes;
  const auto& prio = registry->config.bundle_priority;
  auto candidates = [&](const Framework& fw) {
    std::vector<std::pair<const BundleInfo*, const OpEntry*>> found;
    for (size_t i = 0; i < registry->bundles.size(); ++i) {
      const BundleInfo& b = *registry->bundles[i];
      if (b.extension() != key.extension || b.framework() != fw.name()) continue;
      const OpEntry* entry = nullptr;
      for (const OpEntry& e : registry->bundle_ops[i])
        if (e.desc->dtype == key.dtype && std::strcmp(e.desc->name, key.name) == 0) entry = &e;
      if (entry == nullptr) {
        notes +=
            "; " + b.name() + " lacks it" + (b.reason().empty() ? "" : " (" + b.reason() + ")");
        continue;
      }
      if (!detail::compatible(entry->rules, *key_rules)) {
        // The plugin's string, bounded and quoted (a 1.1 descriptor may carry none).
        notes +=
            "; " + b.name() + " declares other arguments (signature " +
            (entry->desc->signature != nullptr ? detail::quote_prefix(entry->desc->signature, 200)
                                               : std::string("none, its schema differs")) +
            ", the front-end's " + key_sig + ")";
        continue;
      }
      found.emplace_back(&b, entry);
    }
    auto rank = [&](const BundleInfo* b) {
      const auto p = std::find(prio.begin(), prio.end(), b->name());
      return std::make_pair(static_cast<size_t>(p - prio.begin()), b->order());
    };
    std::stable_sort(found.begin(), found.end(),
                     [&](const auto& x, const auto& y) { return rank(x.first) < rank(y.first); });
    return found;
  };

  // Binds the first candidate whose bundle sets up on `target` and says the op is available on
  // its device (1.1: a device without fp64 refuses f64 ops, so they fall back).
  auto bind_first = [&](BackendImpl& target, const Framework& fw, bool fallback) {
    for (const auto& [b, d] : candidates(fw)) {
      pcy_bundle_context ctx = nullptr;
      try {
        // A fallback target is owned by this backend and only ever resolved through it, under
        // this backend's mutex: its bundle contexts need no lock of their own.
        ctx = target.bundle_context(*b);
      } catch (const error& e) {
        notes += "; " + b->name() + " cannot set up on " + target.name + " (" + e.what() + ")";
        continue;
      }
      if (b->api().op_available != nullptr) {
        const char* why = nullptr;
        if (!b->api().op_available(ctx, d->desc, &why)) {
          notes += "; " + b->name() + " reports it unavailable on " + target.name +
                   (why != nullptr ? " (" + detail::quote_prefix(why, 300) + ")" : "");
          continue;
        }
      }
      op.fn = d->desc->fn;
      op.bundle = ctx;
      op.target = &target;
      op.route = {target.framework->name(), b->name(),
                  d->desc->implementation ? detail::quote_prefix(d->desc->implementation, 200) : "",
                  fallback};
      op.st = detail::BoundOp::state::ready;
      return true;
    }
    return false;
  };

  if (bind_first(*this, *framework, false)) return;
  const std::string here = notes.empty() ? "; no " + std::string(key.extension) + " bundle for " +
                                               framework->name() + " is loaded"
                                         : notes;
  const fallback_policy policy = registry->config.fallback;
  if (policy == fallback_policy::deny) {
    op.failure = opname + " is not offered on " + name + here +
                 "; the fallback policy is \"deny\": set \"fallback\": \"warn\" or \"allow\" in "
                 "the config, or choose a backend that offers it";
    return;
  }
  for (const RankedDevice& r : registry->device_ranking(denied)) {
    if (r.framework == framework) continue;
    if (candidates(*r.framework).empty()) continue;
    BackendImpl* target = nullptr;
    try {
      target = &fallback_for(*r.framework, r.device, "fallback for " + opname);
    } catch (const error& e) {
      notes += std::string("; ") + r.framework->name() + " cannot be used (" + e.what() + ")";
      continue;
    }
    if (!bind_first(*target, *r.framework, true)) continue;
    if (policy == fallback_policy::warn) {
      std::unique_lock<std::mutex> once(registry->warned_mutex);
      if (registry->warned.insert(opname + " " + name + " -> " + target->name).second)
        detail::log(PCY_LOG_WARN, "core",
                    opname + " is not offered on " + name + here + "; it runs on " + target->name +
                        " instead (data moves automatically)");
    }
    return;
  }
  op.failure = "no framework offers " + opname + notes + ": install a " + key.extension +
               " bundle plugin (see parenchyma-info --ops)";
  if (!denied.empty()) {
    op.failure += "; denied frameworks are never used:";
    for (const auto& d : denied)
      op.failure += " " + d;
  }
}

// The per-backend op workspace: one buffer, grown (after the queue drained: queued ops may
// still use the old one) when an op asks for more; later ops on the queue reuse it.
pcy_error* BackendImpl::workspace(const pcy_op_call* call, uint64_t bytes, pcy_memory* memory,
                                  void** native) noexcept {
  auto* self = static_cast<BackendImpl*>(call->workspace_user);
  try {
    const uint64_t have = self->workspace_ ? self->workspace_->bytes : 0;
    if (bytes > have) [[unlikely]] {
      if (self->recorder != nullptr && self->recorder->capturing)
        return sdk::make_error(
            PCY_ERR_UNSUPPORTED,
            ("the op asks for " + std::to_string(bytes) + " bytes of workspace, more than " +
             self->name + " holds (" + std::to_string(have) +
             "), and a graph capture cannot allocate: run the op once on the backend before "
             "recording (the workspace grows then and stays)")
                .c_str(),
            "core");
      const uint64_t want = std::max<uint64_t>(bytes, have * 2);
      if (self->workspace_) {
        // A graph that captured the old buffer keeps it; otherwise it goes once the queue is done.
        if (self->workspace_.use_count() == 1) self->finish();
        self->workspace_.reset();
      }
      auto buf = std::make_shared<WorkspaceBuffer>();
      buf->api = self->api;
      pcy_memory_alloc_args a{};
      a.struct_size = sizeof a;
      a.context = self->context;
      a.device = 0;
      a.bytes = want;
      if (pcy_error* e = self->api->memory_alloc(&a)) return e;
      if (a.memory == nullptr)
        throw error(errc::plugin, self->framework->name(),
                    "memory_alloc reported success but returned no memory");
      buf->memory = a.memory;
      buf->bytes = want;
      if (self->api->native_handle != nullptr) {
        pcy_native_handle_args h{};
        h.struct_size = sizeof h;
        h.object = PCY_NATIVE_MEMORY;
        h.context = self->context;
        h.memory = a.memory;
        if (pcy_error* e = self->api->native_handle(&h))
          e->destroy(e);
        else
          buf->native = h.handle;
      }
      self->workspace_ = std::move(buf);
    }
    if (self->recorder != nullptr && self->recorder->capturing) [[unlikely]] {
      // The captured op bakes the buffer in: the graph keeps it.
      auto& held = self->recorder->workspaces;
      if (std::find(held.begin(), held.end(), self->workspace_) == held.end())
        held.push_back(self->workspace_);
    }
    *memory = self->workspace_->memory;
    if (native != nullptr) *native = self->workspace_->native;
    return nullptr;
  } catch (const std::exception& e) {
    return sdk::make_error(PCY_ERR_OUT_OF_MEMORY, e.what(), "core");
  }
}

// ---------------------------------------------------------------------------------------------
Backend::Backend() : Backend(Registry::global(), {}) {}
Backend::Backend(std::string_view request) : Backend(Registry::global(), request) {}
Backend::Backend(Registry& registry, std::string_view request) {
  RegistryImpl& r = registry.impl();
  detail::check_fork(r, "creating a Backend");
  Selection s = r.select(request);
  const Framework* fw = registry.find_framework(s.framework);
  auto ctx = r.context_for(*fw, s.device);
  std::vector<std::string> denied = s.denied;
  impl_ = std::make_shared<BackendImpl>(std::move(ctx), std::move(s), std::move(denied));
  impl_->self = impl_;
}

const std::string& Backend::name() const noexcept { return impl_->name; }
const Framework& Backend::framework() const noexcept { return *impl_->framework; }
const Device& Backend::device() const noexcept {
  return impl_->framework->devices()[impl_->device];
}
const Selection& Backend::selection() const noexcept { return impl_->selection; }
pcy_context Backend::context() const noexcept { return impl_->context; }
pcy_queue Backend::queue() const noexcept { return impl_->queue; }
void Backend::synchronize() const {
  detail::check_fork(*impl_->registry, "Backend::synchronize()");
  if (impl_->recorder != nullptr) [[unlikely]]
    refuse_while_recording(*impl_, "synchronize()");
  impl_->finish();
}
uint64_t Backend::fallback_count() const noexcept { return impl_->fallbacks.load(); }

Registry& Backend::registry() const noexcept { return *impl_->registry->owner; }

void* Backend::native(pcy_native_object object) const {
  if (impl_->api->native_handle == nullptr)
    throw error(errc::unsupported, impl_->framework->name(), "the plugin offers no native handles");
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = object;
  a.context = impl_->context;
  a.device = 0;
  a.queue = impl_->queue;
  throw_if(impl_->api->native_handle(&a), "native handle");
  return a.handle;
}

void* Backend::native_memory(const TensorStorage& t) const {
  // The slot resolved its native handle when it was made; ask again only to report why not.
  void* cached = nullptr;
  pcy_memory m = const_cast<TensorStorage&>(t).impl().device(*impl_, access::read, &cached);
  if (cached != nullptr) return cached;
  if (impl_->api->native_handle == nullptr)
    throw error(errc::unsupported, impl_->framework->name(), "the plugin offers no native handles");
  pcy_native_handle_args a{};
  a.struct_size = sizeof a;
  a.object = PCY_NATIVE_MEMORY;
  a.context = impl_->context;
  a.memory = m;
  throw_if(impl_->api->native_handle(&a), "native memory handle");
  return a.handle;
}

OpRoute Backend::route(const OpKey& key) const {
  detail::BoundOp& op = impl_->op(key);
  if (op.st != detail::BoundOp::state::ready)
    throw error(op.failure_code, std::string(key.extension) + "." + key.name, op.failure);
  return op.route;
}

namespace {
const char* kind_word(uint8_t k) {
  switch (k) {
  case PCY_SCHEMA_INT: return "an int";
  case PCY_SCHEMA_FLOAT: return "a float";
  case PCY_SCHEMA_SCALAR: return "a scalar (a float or a one-element tensor in)";
  case PCY_SCHEMA_TENSOR: return "a tensor";
  case PCY_SCHEMA_INT_ARRAY: return "an int array";
  }
  return "?";
}
const char* intent_word(uint8_t i) {
  switch (i) {
  case PCY_INTENT_IN: return "in";
  case PCY_INTENT_OUT: return "out";
  case PCY_INTENT_INOUT: return "inout";
  case PCY_SCHEMA_INTENT_OVERWRITE: return "out or inout (overwritten)";
  }
  return "?";
}
const char* passed_word(const OpArg& a) {
  switch (a.kind) {
  case PCY_OP_ARG_INT: return "an int";
  case PCY_OP_ARG_FLOAT: return "a float";
  case PCY_OP_ARG_INT_ARRAY: return "an int array";
  case PCY_OP_ARG_TENSOR:
    return a.intent == PCY_INTENT_IN    ? "a tensor in"
           : a.intent == PCY_INTENT_OUT ? "a tensor out"
                                        : "a tensor inout";
  }
  return "something unknown";
}

// A call that does not match the op's schema: a bug in the front-end. Cold.
[[noreturn]] [[gnu::noinline]] void bad_call(const OpKey& key, const detail::BoundOp& op, size_t i,
                                             const OpArg& a, const std::string& what) {
  const detail::ArgRule& r = op.rules[i];
  const std::string arg = r.name != nullptr ? std::string(r.name) : "#" + std::to_string(i);
  throw error(errc::invalid_argument, std::string(key.extension) + "." + key.name,
              "argument " + arg + " (#" + std::to_string(i) + "): " + what + " (passed " +
                  passed_word(a) + ", the schema wants " + kind_word(r.kind) +
                  (r.kind == PCY_SCHEMA_TENSOR ? std::string(" ") + intent_word(r.intent) : "") +
                  "); the extension's front-end does not match its schema");
}
} // namespace

namespace {

// The access an op's tensor argument takes, by its (checked) intent: IN, OUT, INOUT.
constexpr access access_of[4] = {access::read, access::read, access::write_only, access::write};

// The call record of one packed op on `target`'s queue (invoke and a recording build the same).
[[gnu::always_inline]] inline pcy_op_call op_call(const detail::BoundOp& op, BackendImpl& target,
                                                  pcy_op_arg* cargs, size_t count,
                                                  pcy_op_arg_ext* exts) noexcept {
  pcy_op_call call;
  call.struct_size = sizeof call;
  call.ext = nullptr;
  call.context = op.bundle;
  call.queue = target.queue;
  call.args = cargs;
  call.arg_count = static_cast<uint32_t>(count);
  call.arg_ext = exts;
  call.workspace = &BackendImpl::workspace;
  call.workspace_user = &target;
  return call;
}

// Checks and packs the arguments of one call. The per-call check against the schema is decided
// at resolution: the (kind, intent) pair against the rule's, then (tensors) dtype and rank
// compares. Defer (an op with a tensor that may be passed OUT): tensors are synced onto the
// target, and outputs marked written, only after every argument passed, so a refused call
// changes no tensor; otherwise each syncs as it is checked (IN and INOUT syncs lose nothing).
template <bool Ext, bool Defer>
[[gnu::always_inline]] inline void
pack(const OpKey& key, const detail::BoundOp& op, BackendImpl& target, std::span<const OpArg> args,
     pcy_tensor* tensors, pcy_op_arg* cargs, pcy_op_arg_ext* exts) {
  std::array<uint8_t, detail::max_op_args> tensor_at;
  size_t tensor_count = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const OpArg& a = args[i];
    const detail::ArgRule& r = op.rules[i];
    uint64_t pair;
    static_assert(offsetof(OpArg, intent) == sizeof(pcy_op_arg_kind) &&
                  sizeof(pcy_op_arg_kind) == 4 && sizeof(pcy_arg_intent) == 4);
    std::memcpy(&pair, &a, sizeof pair);
    if (pair != r.accept_a && pair != r.accept_b) [[unlikely]]
      bad_call(key, op, i, a, "wrong kind or intent");
    // OpArg begins with pcy_op_arg's layout: one copy, then the tensor pointer replaced.
    pcy_op_arg& c = cargs[i];
    static_assert(offsetof(OpArg, tensor) == offsetof(pcy_op_arg, tensor) &&
                  offsetof(OpArg, i) == offsetof(pcy_op_arg, i) &&
                  offsetof(OpArg, f) == offsetof(pcy_op_arg, f) &&
                  sizeof(pcy_op_arg) <= sizeof(OpArg));
    std::memcpy(static_cast<void*>(&c), &a, sizeof(pcy_op_arg));
    if constexpr (Ext) {
      if (a.kind == PCY_OP_ARG_INT_ARRAY && (a.i < 0 || (a.i > 0 && a.ints == nullptr)))
        bad_call(key, op, i, a, "an int array with a negative count or no values");
      exts[i] = pcy_op_arg_ext{sizeof(pcy_op_arg_ext), nullptr, a.ints,
                               a.kind == PCY_OP_ARG_INT_ARRAY ? static_cast<uint64_t>(a.i) : 0};
    }
    if (a.kind == PCY_OP_ARG_TENSOR) {
      if (a.tensor == nullptr) [[unlikely]]
        bad_call(key, op, i, a, "a tensor argument without a tensor");
      TensorStorage::Impl& ti = a.tensor->impl();
      if (ti.dtype != static_cast<pcy_dtype>(r.want_dtype) &&
          r.want_dtype != PCY_SCHEMA_DTYPE_ANY) [[unlikely]]
        bad_call(key, op, i, a,
                 std::string("dtype ") + sdk::dtype_name(ti.dtype) + ", expected " +
                     sdk::dtype_name(static_cast<pcy_dtype>(r.want_dtype)));
      if (r.extra != 0) [[unlikely]] {
        if ((r.extra & 1) && ti.shape.size() != static_cast<size_t>(r.rank))
          bad_call(key, op, i, a,
                   std::to_string(ti.shape.size()) + " dimensions, expected " +
                       std::to_string(r.rank));
        if ((r.extra & 2) && ti.count != 1)
          bad_call(key, op, i, a, "a scalar tensor must have one element");
      }
      pcy_tensor& d = tensors[i];
      d.struct_size = sizeof d;
      d.ext = nullptr;
      d.dtype = ti.dtype;
      d.ndim = static_cast<int32_t>(ti.shape.size());
      d.shape = ti.shape.data();
      d.strides = nullptr;
      d.byte_offset = 0;
      c.tensor = &d;
      // The check admitted only IN, OUT or INOUT for a tensor.
      if constexpr (Defer)
        tensor_at[tensor_count++] = static_cast<uint8_t>(i);
      else
        d.memory = ti.device_for_op(target, access_of[static_cast<unsigned>(a.intent) & 3u],
                                    &d.data, target.writebacks);
    }
  }
  // Every argument passed: now sync.
  for (size_t k = 0; Defer && k < tensor_count; ++k) {
    const OpArg& a = args[tensor_at[k]];
    pcy_tensor& d = tensors[tensor_at[k]];
    d.memory = a.tensor->impl().device_for_op(
        target, access_of[static_cast<unsigned>(a.intent) & 3u], &d.data, target.writebacks);
  }
}

} // namespace

namespace {
void run_op(const OpKey& key, detail::BoundOp& op, BackendImpl& target,
            std::span<const OpArg> args);
} // namespace

void Backend::invoke(const OpKey& key, std::span<const OpArg> args) const {
  detail::check_fork(*impl_->registry, "running an op");
  detail::BoundOp& op = impl_->op(key);
  if (op.st != detail::BoundOp::state::ready) [[unlikely]]
    throw error(op.failure_code, std::string(key.extension) + "." + key.name, op.failure);
  if (args.size() != op.arg_count) [[unlikely]]
    throw error(errc::invalid_argument, std::string(key.extension) + "." + key.name,
                "called with " + std::to_string(args.size()) + " arguments, its schema has " +
                    std::to_string(op.arg_count));
  if (impl_->recorder != nullptr) [[unlikely]]
    return detail::record_op(*impl_, key, op, args);
  BackendImpl& target = *op.target;
  if (&target != impl_.get()) impl_->fallbacks.fetch_add(1, std::memory_order_relaxed);
  if (!op.warm.load(std::memory_order_relaxed)) [[unlikely]] {
    // A library may compile its kernels at an op's first call (CLBlast: seconds on PoCL).
    WaitProgress progress("running " + op_label(key) + " on " + target.name +
                          " for the first time (a library may compile kernels; they are cached)");
    run_op(key, op, target, args);
    op.warm.store(true, std::memory_order_relaxed);
    return;
  }
  run_op(key, op, target, args);
}

namespace {
void run_op(const OpKey& key, detail::BoundOp& op, BackendImpl& target,
            std::span<const OpArg> args) {
  // Imported host arrays the op writes apart from the array get the result after it (or the
  // list is emptied when the op is refused or fails).
  const writeback_scope writebacks{target};

  std::array<pcy_tensor, detail::max_op_args> tensors;
  std::array<pcy_op_arg, detail::max_op_args> cargs;
  std::array<pcy_op_arg_ext, detail::max_op_args> exts;
  const bool needs_ext = op.needs_ext;
  if (needs_ext) [[unlikely]]
    pack<true, true>(key, op, target, args, tensors.data(), cargs.data(), exts.data());
  else if (op.defer_sync)
    pack<false, true>(key, op, target, args, tensors.data(), cargs.data(), nullptr);
  else
    pack<false, false>(key, op, target, args, tensors.data(), cargs.data(), nullptr);
  pcy_op_call call =
      op_call(op, target, cargs.data(), args.size(), needs_ext ? exts.data() : nullptr);
  if (pcy_error* e = op.fn(&call)) [[unlikely]]
    throw_if(e, (std::string(key.extension) + "." + key.name).c_str());
  if (!target.writebacks.empty()) [[unlikely]]
    target.write_back();
}
} // namespace

// ---- recording (graph.cpp holds the rest) --------------------------------------------------
void detail::record_op(BackendImpl& b, const OpKey& key, BoundOp& op, std::span<const OpArg> args) {
  Recorder& rec = *b.recorder;
  const std::string label = op_label(key);
  const std::string origin = std::string(key.extension) + "." + key.name;
  if (!rec.failure.empty())
    throw error(errc::invalid_argument, origin,
                "the graph being recorded on " + b.name + " already failed (" + rec.failure +
                    "): nothing more is recorded");
  if (op.target != &b)
    throw error(errc::unsupported, origin,
                label + " cannot be recorded on " + b.name + ": it falls back to " +
                    op.target->name + ", and a graph runs on one queue; record only ops that " +
                    b.name + " serves itself (parenchyma-info --ops lists them)");
  // The coherence of each tensor before this call touches it (restored after recording).
  std::array<uint64_t, max_op_args> valid_before{};
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind == PCY_OP_ARG_TENSOR && args[i].tensor != nullptr)
      valid_before[i] = args[i].tensor->impl().valid;

  std::array<pcy_tensor, max_op_args> tensors;
  std::array<pcy_op_arg, max_op_args> cargs;
  std::array<pcy_op_arg_ext, max_op_args> exts;
  // Always deferred: a refused call changes no tensor. Nothing runs now, so nothing is written
  // back now: a replay writes back what its ops write (Graph::replay).
  {
    const writeback_scope none{b};
    if (op.needs_ext)
      pack<true, true>(key, op, b, args, tensors.data(), cargs.data(), exts.data());
    else
      pack<false, true>(key, op, b, args, tensors.data(), cargs.data(), nullptr);
  }

  // Every tensor the call touches: captured once, with the slot it has now.
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind != PCY_OP_ARG_TENSOR) continue;
    TensorStorage::Impl& ti = args[i].tensor->impl();
    const pcy_tensor& d = tensors[i];
    const access acc = access_of[static_cast<unsigned>(args[i].intent) & 3u];
    GraphTensor* t = nullptr;
    for (GraphTensor& g : rec.tensors)
      if (g.impl.get() == &ti) t = &g;
    const std::string arg =
        op.rules[i].name != nullptr ? std::string(op.rules[i].name) : "#" + std::to_string(i);
    if (t == nullptr) {
      GraphTensor g;
      g.impl = args[i].tensor->shared_impl();
      g.generation = ti.generation;
      g.memory = d.memory;
      g.native = d.data;
      g.first = acc;
      g.valid_before = valid_before[i];
      g.op = label;
      g.arg = arg;
      rec.tensors.push_back(std::move(g));
      t = &rec.tensors.back();
    } else if (t->generation != ti.generation || t->memory != d.memory || t->native != d.data) {
      throw error(errc::invalid_argument, origin,
                  "argument " + arg + " of " + label +
                      ": the tensor was resized or moved to another slot after an earlier op of "
                      "this recording captured it");
    }
    t->written = t->written || acc != access::read;
  }

  pcy_op_call call =
      op_call(op, b, cargs.data(), args.size(), op.needs_ext ? exts.data() : nullptr);

  if (rec.graph != nullptr) {
    // Captured: the op enqueues as usual, and its work becomes part of the graph.
    throw_if(b.api->queue_capture_begin(b.queue, rec.graph),
             ("beginning a graph capture on " + b.name + " for " + label).c_str());
    rec.capturing = true;
    pcy_error* e = op.fn(&call);
    rec.capturing = false;
    pcy_error* end = b.api->queue_capture_end(b.queue, rec.graph);
    if (e != nullptr || end != nullptr) {
      std::string why = e != nullptr ? std::string(e->message) : std::string(end->message);
      errc code = from_status((e != nullptr ? e : end)->code);
      if (e != nullptr) e->destroy(e);
      if (end != nullptr) end->destroy(end);
      rec.failure = label + " cannot be recorded: " + why;
      throw error(code == errc::invalid_argument ? errc::invalid_argument : errc::unsupported,
                  origin,
                  label + " cannot be recorded in a graph on " + b.name +
                      " (it may wait for the device or the host, allocate, or copy host memory, "
                      "none of which a capture can hold): " +
                      why);
    }
  } else {
    RecordedOp r;
    r.label = label;
    r.fn = op.fn;
    r.args.assign(cargs.begin(), cargs.begin() + static_cast<std::ptrdiff_t>(args.size()));
    r.tensors.assign(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(args.size()));
    r.shapes.resize(args.size());
    if (op.needs_ext) {
      r.exts.assign(exts.begin(), exts.begin() + static_cast<std::ptrdiff_t>(args.size()));
      r.ints.resize(args.size());
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].kind == PCY_OP_ARG_TENSOR) {
        const pcy_tensor& d = tensors[i];
        r.shapes[i].assign(d.shape, d.shape + d.ndim);
        r.tensors[i].shape = r.shapes[i].data();
        r.args[i].tensor = &r.tensors[i];
      }
      if (op.needs_ext && r.exts[i].count > 0) {
        r.ints[i].assign(r.exts[i].ints, r.exts[i].ints + r.exts[i].count);
        r.exts[i].ints = r.ints[i].data();
      }
    }
    r.call = call;
    r.call.args = r.args.data();
    r.call.arg_ext = op.needs_ext ? r.exts.data() : nullptr;
    rec.ops.push_back(std::move(r));
  }
  rec.labels.push_back(label);
}

// ---- user kernels ---------------------------------------------------------------------------
struct ProgramImpl {
  std::shared_ptr<BackendImpl> backend;
  pcy_program program = nullptr;
  bool cache_hit = false;
  ~ProgramImpl() {
    if (program != nullptr) backend->api->program_destroy(program);
  }
};

struct KernelImpl {
  std::shared_ptr<ProgramImpl> program;
  pcy_kernel kernel = nullptr;
  std::string name;
  ~KernelImpl() {
    if (kernel != nullptr) program->backend->api->kernel_destroy(kernel);
  }
};

pcy_kernel Kernel::handle() const noexcept { return impl_ ? impl_->kernel : nullptr; }
const std::string& Kernel::name() const noexcept {
  static const std::string none;
  return impl_ ? impl_->name : none;
}
bool Program::cache_hit() const noexcept { return impl_ && impl_->cache_hit; }
pcy_program Program::handle() const noexcept { return impl_ ? impl_->program : nullptr; }

Kernel Program::kernel(std::string_view name) const {
  if (!impl_) throw error(errc::invalid_argument, "core", "kernel() on an empty Program");
  const pcy_framework_api& api = *impl_->backend->api;
  pcy_kernel_create_args a{};
  a.struct_size = sizeof a;
  a.program = impl_->program;
  const std::string n(name);
  a.name = n.c_str();
  throw_if(api.kernel_create(&a), ("kernel '" + n + "'").c_str());
  Kernel k;
  k.impl_ = std::make_shared<KernelImpl>();
  k.impl_->program = impl_;
  k.impl_->kernel = a.kernel;
  k.impl_->name = n;
  return k;
}

Program Backend::build_program(std::string_view source, std::string_view options) const {
  const pcy_framework_api& api = *impl_->api;
  if (api.program_build == nullptr || api.kernel_create == nullptr || api.kernel_launch == nullptr)
    throw error(errc::unsupported, impl_->framework->name(),
                "this framework plugin cannot build programs: use an OpenCL or CUDA backend for "
                "user kernels");
  pcy_program_build_args a{};
  a.struct_size = sizeof a;
  a.context = impl_->context;
  a.source = source.data();
  a.source_size = source.size();
  const std::string opts(options);
  a.options = opts.empty() ? nullptr : opts.c_str();
  {
    WaitProgress progress("building a program on " + impl_->name);
    throw_if(api.program_build(&a), "building a program");
  }
  Program p;
  p.impl_ = std::make_shared<ProgramImpl>();
  p.impl_->backend = impl_;
  p.impl_->program = a.program;
  p.impl_->cache_hit = a.cache_hit;
  return p;
}

void Backend::launch(const Kernel& kernel, const LaunchDims& dims,
                     std::initializer_list<KernelArg> args) const {
  launch(kernel, dims, std::span<const KernelArg>(args.begin(), args.size()));
}

void Backend::launch(const Kernel& kernel, const LaunchDims& dims,
                     std::span<const KernelArg> args) const {
  if (impl_->recorder != nullptr) [[unlikely]]
    refuse_while_recording(*impl_, "launching a user kernel");
  if (!kernel.impl_ || kernel.impl_->program->backend != impl_)
    throw error(errc::invalid_argument, impl_->name,
                "the kernel was not built on this backend: build the program on it first");
  constexpr size_t max_args = 64;
  if (args.size() > max_args)
    throw error(errc::invalid_argument, impl_->name, "more than 64 kernel arguments");
  std::array<pcy_kernel_arg, max_args> cargs; // each used entry is written whole below
  const writeback_scope writebacks{*impl_};
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg& a = args[i];
    pcy_kernel_arg& c = cargs[i];
    switch (a.type) {
    case KernelArg::kind::tensor: {
      const access acc = a.intent == PCY_INTENT_IN    ? access::read
                         : a.intent == PCY_INTENT_OUT ? access::write_only
                                                      : access::write;
      c = pcy_kernel_arg{PCY_ARG_MEMORY,
                         a.tensor->impl().device_for_op(*impl_, acc, nullptr, impl_->writebacks),
                         nullptr, 0};
      break;
    }
    case KernelArg::kind::scalar:
      c = pcy_kernel_arg{PCY_ARG_SCALAR, nullptr, a.value, a.size};
      break;
    case KernelArg::kind::local: c = pcy_kernel_arg{PCY_ARG_LOCAL, nullptr, nullptr, a.size}; break;
    }
  }
  const pcy_kernel_launch_args l =
      sdk::launch_args(impl_->queue, kernel.impl_->kernel, dims.dims,
                       {dims.global[0], dims.global[1], dims.global[2]},
                       {dims.local[0], dims.local[1], dims.local[2]}, cargs.data(),
                       static_cast<uint32_t>(args.size()));
  throw_if(impl_->api->kernel_launch(&l),
           ("launching kernel '" + kernel.impl_->name + "'").c_str());
  if (!impl_->writebacks.empty()) [[unlikely]]
    impl_->write_back();
}

} // namespace v1
} // namespace parenchyma
