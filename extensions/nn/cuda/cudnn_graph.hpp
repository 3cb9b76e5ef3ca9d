// cuDNN's graph (backend) API for one convolution direction: the descriptors of a problem, the
// engine configurations cuDNN's heuristics propose for it, filtered by the math the caller
// allows, finalized into execution plans, and a plan's execution with a variant pack. Used by
// nn_cuda.cpp (convolution algorithms 1000 + k) and by tools/bench/nn/bench_nn_cuda.cpp (the
// same plans executed directly as the peer), so it depends on cudnn.h and the standard library
// only. The functions come from a dlopen handle of libcudnn.so.9 (api::load); every status is
// returned with the call that produced it; no size cuDNN reports is used unchecked.
#pragma once

#include <cudnn.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace parenchyma::nn_cuda::graph {

// clang-format off
#define PARENCHYMA_CUDNN_BACKEND_FUNCTIONS(X) \
  X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor) X(cudnnBackendSetAttribute) \
  X(cudnnBackendGetAttribute) X(cudnnBackendFinalize) X(cudnnBackendExecute)
// clang-format on

struct api {
#define PARENCHYMA_GRAPH_DECLARE(f) decltype(&::f) f = nullptr;
  PARENCHYMA_CUDNN_BACKEND_FUNCTIONS(PARENCHYMA_GRAPH_DECLARE)
#undef PARENCHYMA_GRAPH_DECLARE

  // Resolves every function from `lib`; returns the name of the first one missing (then none
  // is set), or null.
  const char* load(void* lib) {
    api a;
#define PARENCHYMA_GRAPH_RESOLVE(f)                                                                \
  a.f = reinterpret_cast<decltype(a.f)>(dlsym(lib, #f));                                           \
  if (a.f == nullptr) return #f;
    PARENCHYMA_CUDNN_BACKEND_FUNCTIONS(PARENCHYMA_GRAPH_RESOLVE)
#undef PARENCHYMA_GRAPH_RESOLVE
    *this = a;
    return nullptr;
  }
  bool loaded() const { return cudnnBackendExecute != nullptr; }
};

// A cuDNN status and the call that returned it.
struct status {
  cudnnStatus_t code = CUDNN_STATUS_SUCCESS;
  const char* what = nullptr;
  bool ok() const { return code == CUDNN_STATUS_SUCCESS; }
};

// An owned backend descriptor.
class desc {
public:
  desc() = default;
  desc(const desc&) = delete;
  desc& operator=(const desc&) = delete;
  desc(desc&& o) noexcept : api_(o.api_), d_(std::exchange(o.d_, nullptr)) {}
  desc& operator=(desc&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_;
      d_ = std::exchange(o.d_, nullptr);
    }
    return *this;
  }
  ~desc() { reset(); }
  void reset() {
    if (d_ != nullptr) api_->cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  cudnnStatus_t create(const api& a, cudnnBackendDescriptorType_t type) {
    reset();
    api_ = &a;
    cudnnBackendDescriptor_t d = nullptr;
    const cudnnStatus_t s = a.cudnnBackendCreateDescriptor(type, &d);
    if (s == CUDNN_STATUS_SUCCESS) d_ = d;
    return s;
  }
  cudnnBackendDescriptor_t get() const { return d_; }

private:
  const api* api_ = nullptr;
  cudnnBackendDescriptor_t d_ = nullptr;
};

// One convolution direction as the graph API describes it: NCHW tensors, packed; w is
// K x C/groups x R x S (cuDNN infers the groups from the channel counts).
struct problem {
  int direction = 0; // 0 forward (x, w -> y), 1 backward data (w, dy -> dx), 2 filter (x, dy -> dw)
  cudnnDataType_t data = CUDNN_DATA_FLOAT;    // x, w, y
  cudnnDataType_t compute = CUDNN_DATA_FLOAT; // f32 for f32 and the half types, f64 for f64
  bool tf32 = false; // f32 only: engines on tensor cores (TF32 inner products) allowed
  int64_t N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, P = 0, Q = 0, groups = 1;
  std::array<int64_t, 2> stride{1, 1}, pad{0, 0}, dil{1, 1};
  auto operator<=>(const problem&) const = default;
};

// The unique ids of the tensors in the variant pack (x or dx, w or dw, y or dy).
constexpr int64_t uid_x = 1, uid_w = 2, uid_y = 3;
// Plans kept per problem, the workspace a plan may ask for, and how many of the plans may come
// from engines that compile at finalization (NVRTC, up to seconds each).
constexpr int64_t max_plans = 32;
constexpr int64_t max_workspace = int64_t{1} << 30;
constexpr int max_runtime_compiled = 4;

// A plan bound to device pointers: the variant pack, remade only when a pointer changes.
struct binding {
  desc pack;
  std::array<void*, 4> ptrs{}; // x, w, y, workspace
};

struct plan {
  desc config, engine, exec; // the configuration and its engine stay alive with the plan
  int64_t workspace = 0;     // bytes, in [0, max_workspace]
  int64_t engine_index = -1; // cuDNN's global engine index
  uint32_t notes = 0;        // bit n: numerical note n
  binding bind;              // the variant pack of the plan's last execution (its user's own)
};

struct plan_set {
  // The descriptors the plans were made from, alive as long as the plans.
  desc x, w, y, conv, op, graph;
  std::vector<std::unique_ptr<plan>> plans; // heuristic order; stable addresses
  int64_t proposed = 0;                     // engine configurations the heuristics listed
  status error;   // a failure of a call other than a finalization (then no plans)
  status refusal; // the last heuristics mode that refused the graph, if any
};

// Whether an engine with numerical notes `notes` computes what the problem asks for: never
// inputs converted to a narrower type nor reductions narrower than the compute type (the
// contract: f16/bf16 accumulate in f32); f32 on tensor cores (TF32) only where allowed.
// Nondeterministic engines are accepted, as the legacy path accepts its atomics-based
// algorithms.
inline bool allowed(const problem& p, uint32_t notes) {
  auto has = [&](cudnnBackendNumericalNote_t n) { return ((notes >> n) & 1u) != 0; };
  if (has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)) return false;
  if (has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION)) return false;
  if (p.data == CUDNN_DATA_FLOAT && !p.tf32 && has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)) return false;
  return true;
}

namespace detail {

// Chains calls, keeping the first failure.
struct chain {
  const api& a;
  status st;
  void set(const desc& d, cudnnBackendAttributeName_t n, cudnnBackendAttributeType_t t,
           int64_t count, const void* v, const char* what) {
    if (!st.ok()) return;
    const cudnnStatus_t s = a.cudnnBackendSetAttribute(d.get(), n, t, count, v);
    if (s != CUDNN_STATUS_SUCCESS) st = {s, what};
  }
  void set_desc(const desc& d, cudnnBackendAttributeName_t n, const desc& v, const char* what) {
    cudnnBackendDescriptor_t raw = v.get();
    set(d, n, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
  }
  void make(desc& d, cudnnBackendDescriptorType_t t, const char* what) {
    if (!st.ok()) return;
    const cudnnStatus_t s = d.create(a, t);
    if (s != CUDNN_STATUS_SUCCESS) st = {s, what};
  }
  void finalize(const desc& d, const char* what) {
    if (!st.ok()) return;
    const cudnnStatus_t s = a.cudnnBackendFinalize(d.get());
    if (s != CUDNN_STATUS_SUCCESS) st = {s, what};
  }
};

#define PARENCHYMA_SET(c, d, attr, type, count, value)                                             \
  (c).set(d, attr, type, count, value, "cudnnBackendSetAttribute(" #attr ")")
#define PARENCHYMA_SET_DESC(c, d, attr, value)                                                     \
  (c).set_desc(d, attr, value, "cudnnBackendSetAttribute(" #attr ")")

inline void tensor(chain& c, desc& d, const problem& p, int64_t uid,
                   const std::array<int64_t, 4>& dims) {
  const std::array<int64_t, 4> strides{dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
  const int64_t alignment = 16;
  c.make(d, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "cudnnBackendCreateDescriptor(TENSOR)");
  PARENCHYMA_SET(c, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &p.data);
  PARENCHYMA_SET(c, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  PARENCHYMA_SET(c, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  PARENCHYMA_SET(c, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  PARENCHYMA_SET(c, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  c.finalize(d, "cudnnBackendFinalize(TENSOR)");
}

// The operation graph of p (tensors, convolution, operation, graph) into s.
inline status operation_graph(const api& a, cudnnHandle_t h, const problem& p, plan_set& s) {
  chain c{a, {}};
  tensor(c, s.x, p, uid_x, {p.N, p.C, p.H, p.W});
  tensor(c, s.w, p, uid_w, {p.K, p.C / p.groups, p.R, p.S});
  tensor(c, s.y, p, uid_y, {p.N, p.K, p.P, p.Q});

  const int64_t spatial = 2;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  c.make(s.conv, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, "cudnnBackendCreateDescriptor(CONVOLUTION)");
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &p.compute);
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
                 &mode);
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, p.pad.data());
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
                 p.pad.data());
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, p.dil.data());
  PARENCHYMA_SET(c, s.conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
                 p.stride.data());
  c.finalize(s.conv, "cudnnBackendFinalize(CONVOLUTION)");

  // y = 1 * conv + 0 * y, the scalars in the compute type.
  const double one_d = 1, zero_d = 0;
  const float one_f = 1, zero_f = 0;
  const bool dbl = p.compute == CUDNN_DATA_DOUBLE;
  const cudnnBackendAttributeType_t st = dbl ? CUDNN_TYPE_DOUBLE : CUDNN_TYPE_FLOAT;
  const void* one = dbl ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* zero = dbl ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  if (p.direction == 0) {
    c.make(s.op, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
           "cudnnBackendCreateDescriptor(OPERATION_CONVOLUTION_FORWARD)");
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, st, 1, one);
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, st, 1, zero);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, s.conv);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, s.x);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, s.w);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, s.y);
  } else if (p.direction == 1) {
    c.make(s.op, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
           "cudnnBackendCreateDescriptor(OPERATION_CONVOLUTION_BACKWARD_DATA)");
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, st, 1, one);
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, st, 1, zero);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, s.conv);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, s.x);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, s.w);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, s.y);
  } else {
    c.make(s.op, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
           "cudnnBackendCreateDescriptor(OPERATION_CONVOLUTION_BACKWARD_FILTER)");
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, st, 1, one);
    PARENCHYMA_SET(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, st, 1, zero);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, s.conv);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, s.x);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, s.w);
    PARENCHYMA_SET_DESC(c, s.op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, s.y);
  }
  c.finalize(s.op, "cudnnBackendFinalize(OPERATION_CONVOLUTION)");

  c.make(s.graph, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR,
         "cudnnBackendCreateDescriptor(OPERATIONGRAPH)");
  PARENCHYMA_SET(c, s.graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  PARENCHYMA_SET_DESC(c, s.graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, s.op);
  c.finalize(s.graph, "cudnnBackendFinalize(OPERATIONGRAPH)");
  return c.st;
}

// The engine configurations the heuristics of `mode` propose for the graph, in their order;
// none, with `refused` set, where the heuristics descriptor does not finalize for it.
inline status heuristics(const api& a, const plan_set& s, cudnnBackendHeurMode_t mode,
                         std::vector<desc>& out, status& refused) {
  constexpr int64_t most = 256; // far more than cuDNN lists for one convolution
  chain c{a, {}};
  desc heur;
  c.make(heur, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "cudnnBackendCreateDescriptor(ENGINEHEUR)");
  PARENCHYMA_SET_DESC(c, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, s.graph);
  PARENCHYMA_SET(c, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (!c.st.ok()) return c.st;
  if (const cudnnStatus_t f = a.cudnnBackendFinalize(heur.get()); f != CUDNN_STATUS_SUCCESS) {
    refused = {f, "cudnnBackendFinalize(ENGINEHEUR)"};
    return {};
  }
  int64_t count = -1;
  cudnnStatus_t r = a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr);
  if (r != CUDNN_STATUS_SUCCESS)
    return {r, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS) (count)"};
  if (count <= 0) return {};
  if (count > most) count = most;
  std::vector<desc> cfgs(static_cast<size_t>(count));
  std::vector<cudnnBackendDescriptor_t> raw(static_cast<size_t>(count));
  for (size_t i = 0; i < cfgs.size(); ++i) {
    c.make(cfgs[i], CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "cudnnBackendCreateDescriptor(ENGINECFG)");
    raw[i] = cfgs[i].get();
  }
  if (!c.st.ok()) return c.st;
  int64_t got = -1;
  r = a.cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw.data());
  if (r != CUDNN_STATUS_SUCCESS)
    return {r, "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS)"};
  if (got < 0 || got > count)
    return {
        CUDNN_STATUS_INTERNAL_ERROR,
        "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINEHEUR_RESULTS) returned a count out of range"};
  cfgs.resize(static_cast<size_t>(got));
  out = std::move(cfgs);
  return {};
}

// Bits of the notes of `attr` (numerical or behaviour) of an engine.
inline status notes_of(const api& a, const desc& engine, cudnnBackendAttributeName_t attr,
                       cudnnBackendAttributeType_t type, uint32_t& bits, const char* what) {
  std::array<int32_t, 32> v{}; // both note types are C enums (int-sized)
  static_assert(sizeof(cudnnBackendNumericalNote_t) == sizeof(int32_t) &&
                sizeof(cudnnBackendBehaviorNote_t) == sizeof(int32_t));
  int64_t n = -1;
  const cudnnStatus_t r = a.cudnnBackendGetAttribute(engine.get(), attr, type,
                                                     static_cast<int64_t>(v.size()), &n, v.data());
  if (r != CUDNN_STATUS_SUCCESS) return {r, what};
  if (n < 0 || n > static_cast<int64_t>(v.size())) return {CUDNN_STATUS_INTERNAL_ERROR, what};
  bits = 0;
  for (int64_t i = 0; i < n; ++i)
    if (v[static_cast<size_t>(i)] >= 0 && v[static_cast<size_t>(i)] < 32)
      bits |= 1u << v[static_cast<size_t>(i)];
  return {};
}

} // namespace detail

// Builds the plans of p on handle h into s, in heuristic order: mode A's configurations, then
// those of the fallback list whose engine none of the kept plans uses; a configuration is kept
// when its engine's numerical notes are allowed(), its plan finalizes (a refusal just skips it)
// and its workspace is within max_workspace; at most max_plans (and max_runtime_compiled of
// engines that compile). The returned status (also in s.error) is a failure of another call;
// a failed finalization of the operation graph means cuDNN refuses these shapes.
inline status build(const api& a, cudnnHandle_t h, const problem& p, plan_set& s) {
  status st = detail::operation_graph(a, h, p, s);
  int rtc = 0;
  std::vector<int64_t> kept_engines;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (!st.ok() || static_cast<int64_t>(s.plans.size()) >= max_plans) break;
    std::vector<desc> cfgs;
    const status hs = detail::heuristics(a, s, mode, cfgs, s.refusal);
    if (!hs.ok()) {
      st = hs;
      break;
    }
    s.proposed += static_cast<int64_t>(cfgs.size());
    const std::vector<int64_t> before = kept_engines;
    for (desc& cfg : cfgs) {
      if (static_cast<int64_t>(s.plans.size()) >= max_plans) break;
      auto pl = std::make_unique<plan>();
      detail::chain c{a, {}};
      c.make(pl->engine, CUDNN_BACKEND_ENGINE_DESCRIPTOR, "cudnnBackendCreateDescriptor(ENGINE)");
      if (!c.st.ok()) {
        st = c.st;
        break;
      }
      cudnnBackendDescriptor_t eng = pl->engine.get();
      int64_t n = -1;
      cudnnStatus_t r = a.cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                                   CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng);
      if (r != CUDNN_STATUS_SUCCESS || n != 1) {
        st = {r != CUDNN_STATUS_SUCCESS ? r : CUDNN_STATUS_INTERNAL_ERROR,
              "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINECFG_ENGINE)"};
        break;
      }
      r = a.cudnnBackendGetAttribute(pl->engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                     CUDNN_TYPE_INT64, 1, &n, &pl->engine_index);
      if (r != CUDNN_STATUS_SUCCESS || n != 1) {
        st = {r != CUDNN_STATUS_SUCCESS ? r : CUDNN_STATUS_INTERNAL_ERROR,
              "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_GLOBAL_INDEX)"};
        break;
      }
      if (mode == CUDNN_HEUR_MODE_FALLBACK &&
          std::find(before.begin(), before.end(), pl->engine_index) != before.end())
        continue; // already offered from mode A's list
      uint32_t behaviour = 0;
      st = detail::notes_of(a, pl->engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                            CUDNN_TYPE_NUMERICAL_NOTE, pl->notes,
                            "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE)");
      if (st.ok())
        st = detail::notes_of(a, pl->engine, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE,
                              CUDNN_TYPE_BEHAVIOR_NOTE, behaviour,
                              "cudnnBackendGetAttribute(CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE)");
      if (!st.ok()) break;
      if (!allowed(p, pl->notes)) continue;
      const bool compiles = ((behaviour >> CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) & 1u) != 0;
      if (compiles && rtc >= max_runtime_compiled) continue;
      c.make(pl->exec, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
             "cudnnBackendCreateDescriptor(EXECUTION_PLAN)");
      PARENCHYMA_SET(c, pl->exec, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      PARENCHYMA_SET_DESC(c, pl->exec, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg);
      if (!c.st.ok()) {
        st = c.st;
        break;
      }
      if (a.cudnnBackendFinalize(pl->exec.get()) != CUDNN_STATUS_SUCCESS)
        continue; // this configuration cannot run these shapes
      r = a.cudnnBackendGetAttribute(pl->exec.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                     CUDNN_TYPE_INT64, 1, &n, &pl->workspace);
      if (r != CUDNN_STATUS_SUCCESS || n != 1) {
        st = {r != CUDNN_STATUS_SUCCESS ? r : CUDNN_STATUS_INTERNAL_ERROR,
              "cudnnBackendGetAttribute(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)"};
        break;
      }
      if (pl->workspace < 0 || pl->workspace > max_workspace) continue;
      if (compiles) ++rtc;
      pl->config = std::move(cfg);
      kept_engines.push_back(pl->engine_index);
      s.plans.push_back(std::move(pl));
    }
  }
  if (!st.ok()) s.plans.clear(); // a failed call: offer nothing rather than a partial list
  s.error = st;
  return st;
}

// Executes plan pl on handle h (whose stream the work goes to) with x, w, y (dx/dy or dw as the
// direction has them) and a workspace of at least pl.workspace bytes (null when 0).
inline status execute(const api& a, cudnnHandle_t h, const plan& pl, binding& b, void* x, void* w,
                      void* y, void* workspace) {
  const std::array<void*, 4> want{x, w, y, workspace};
  if (b.pack.get() == nullptr || b.ptrs != want) {
    b.ptrs = {};
    const std::array<int64_t, 3> uids{uid_x, uid_w, uid_y};
    const std::array<void*, 3> data{x, w, y};
    detail::chain c{a, {}};
    c.make(b.pack, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR,
           "cudnnBackendCreateDescriptor(VARIANT_PACK)");
    PARENCHYMA_SET(c, b.pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids.data());
    PARENCHYMA_SET(c, b.pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3,
                   data.data());
    PARENCHYMA_SET(c, b.pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                   &workspace);
    c.finalize(b.pack, "cudnnBackendFinalize(VARIANT_PACK)");
    if (!c.st.ok()) {
      b.pack.reset();
      return c.st;
    }
    b.ptrs = want;
  }
  const cudnnStatus_t r = a.cudnnBackendExecute(h, pl.exec.get(), b.pack.get());
  if (r != CUDNN_STATUS_SUCCESS) return {r, "cudnnBackendExecute"};
  return {};
}

#undef PARENCHYMA_SET
#undef PARENCHYMA_SET_DESC

} // namespace parenchyma::nn_cuda::graph
