// NN bundle for the CUDA framework: every op of pcy_nn.h in f32 and f64, and in f16 and bf16
// for the activations, softmax, pooling, convolution, layer_norm, rms_norm, cross_entropy,
// embedding and batch_norm (compute in f32). Our own CUDA C
// kernels (kernels_cu.hpp) serve everything but the convolutions proper, which run on cuDNN 9
// (loaded at run time: its legacy convolution API and its graph API, cudnn_graph.hpp) and,
// without cuDNN, on our direct kernels.
// Everything is enqueued on the backend's CUstream; no op synchronises it.
//
// Convolution algorithm numbers (convolution_algorithm's result, the ops' `algorithm`): the
// value of cuDNN's enum for the direction (cudnnConvolutionFwdAlgo_t 0..7,
// cudnnConvolutionBwdDataAlgo_t 0..5, cudnnConvolutionBwdFilterAlgo_t 0..6), and 100 for our
// own direct kernel, and 1000 + k for the k-th execution plan of cuDNN's graph API for the
// problem (engine configurations of heuristics mode A, then the fallback list, that finalize
// for these shapes and whose numerical notes the math mode allows; k < graph::max_plans).
// 0, the default, is cuDNN's algorithm 0 (IMPLICIT_GEMM / ALGO_0, which run every geometry),
// or our kernel where cuDNN refuses it or is not in use. -1 measures the legacy algorithms
// (cudnnFind*Ex), then times the winner and every graph plan with events on the stream and
// keeps the fastest; -2 takes the graph API's first plan (the legacy heuristic without one).
//
// Math: 1 strict (f32: CUDNN_FMA_MATH, no TF32), 2 TF32 allowed (CUDNN_DEFAULT_MATH), 0 the
// setting PARENCHYMA_NN_MATH ("strict", the default, or "tf32"). f16/bf16 always use
// CUDNN_TENSOR_OP_MATH with f32 accumulation; f64 CUDNN_DEFAULT_MATH.
#include "nn_call.hpp"

#include "cudnn_graph.hpp"
#include "kernels_cu.hpp"
#include <parenchyma/sdk/blob_cache.hpp>
#include <parenchyma/sdk/device_bundle.hpp>
#include <parenchyma/sdk/op_schema.hpp>

#include <cuda.h>
#include <cudnn.h>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace parenchyma;
namespace nb = parenchyma::nn_bundle;

constexpr const char* bundle_name = "nn_cuda";
constexpr uint32_t block = 256;     // NN_BLOCK in kernels_cu.hpp
constexpr uint32_t block_warps = 8; // NN_WARPS
constexpr uint64_t ew_unroll = 4;   // EW_U: items a thread takes per step in the streaming loops
constexpr int64_t own_algorithm = 100;
namespace ng = parenchyma::nn_cuda::graph;
constexpr int64_t graph_base = 1000; // 1000 + k: the k-th plan of cuDNN's graph API
constexpr bool is_graph(int64_t a) { return a >= graph_base && a < graph_base + ng::max_plans; }

// ---- dtypes -------------------------------------------------------------------------------

enum dt_index : int { F32 = 0, F64 = 1, F16 = 2, BF16 = 3 };
constexpr int index_of(pcy_dtype d) {
  return d == PCY_DTYPE_F32 ? F32 : d == PCY_DTYPE_F64 ? F64 : d == PCY_DTYPE_F16 ? F16 : BF16;
}
constexpr const char* suffix[4] = {"f32", "f64", "f16", "bf16"};
constexpr uint64_t dt_bytes[4] = {4, 8, 2, 2};

// Our kernels, by id; <name>_<suffix> in kernels_cu.hpp.
enum kid : int {
  K_SIGMOID_FWD,
  K_SIGMOID_BWD,
  K_RELU_FWD,
  K_RELU_BWD,
  K_TANH_FWD,
  K_TANH_BWD,
  K_ELU_FWD,
  K_ELU_BWD,
  K_SOFTMAX_ROWS,
  K_SOFTMAX_COLS,
  K_LOG_SOFTMAX_ROWS,
  K_LOG_SOFTMAX_COLS,
  K_SOFTMAX_GRAD_ROWS,
  K_SOFTMAX_GRAD_COLS,
  K_LOG_SOFTMAX_GRAD_ROWS,
  K_LOG_SOFTMAX_GRAD_COLS,
  K_POOL_MAX,
  K_POOL_MAX_GATHER,
  K_POOL_AVG,
  K_POOL_AVG_GRAD,
  K_POOL_SCATTER,
  K_FILL_ZERO,
  K_BIAS_ADD,
  K_BIAS_GRAD,
  K_CONV_FWD,
  K_CONV_BWD_DATA,
  K_CONV_BWD_FILTER,
  K_NORM_FWD,
  K_NORM_BWD_ROW,
  K_NORM_BWD_COLS,
  K_NORM_COLS_SUM,
  K_NORM_FWD_R1,
  K_NORM_FWD_R4,
  K_NORM_FWD_R16,
  K_NORM_BWD_R1,
  K_NORM_BWD_R4,
  K_NORM_BWD_R16,
  K_NORM_FWD_R4V,
  K_NORM_FWD_R16V,
  K_NORM_BWD_R4V,
  K_NORM_BWD_R16V,
  K_NORM_BWD_R16P,
  K_NORM_FWD_W1,
  K_NORM_FWD_W4,
  K_XENT_FWD,
  K_XENT_REDUCE,
  K_XENT_SCALE,
  K_XENT_BWD,
  K_EMB_FWD,
  K_EMB_KEYS,
  K_EMB_SORT_GLOBAL,
  K_EMB_SORT_LOCAL,
  K_EMB_ROWS,
  K_EMB_BOUNDS,
  K_BN_PART,
  K_BN_STATS,
  K_BN_APPLY,
  K_BN_DX,
  K_LRN_FWD, // f32 and f64 only from here
  K_LRN_BWD,
  K_DROPOUT_FWD,
  K_DROPOUT_BWD,
  K_FROM_FLOAT, // f16 and bf16 only
  K_COUNT
};
constexpr const char* kernel_names[K_COUNT] = {"sigmoid_fwd",
                                               "sigmoid_bwd",
                                               "relu_fwd",
                                               "relu_bwd",
                                               "tanh_fwd",
                                               "tanh_bwd",
                                               "elu_fwd",
                                               "elu_bwd",
                                               "softmax_rows",
                                               "softmax_cols",
                                               "log_softmax_rows",
                                               "log_softmax_cols",
                                               "softmax_grad_rows",
                                               "softmax_grad_cols",
                                               "log_softmax_grad_rows",
                                               "log_softmax_grad_cols",
                                               "pool_max",
                                               "pool_max_gather",
                                               "pool_avg",
                                               "pool_avg_grad",
                                               "pool_scatter",
                                               "fill_zero",
                                               "bias_add",
                                               "bias_grad",
                                               "conv_fwd",
                                               "conv_bwd_data",
                                               "conv_bwd_filter",
                                               "norm_fwd",
                                               "norm_bwd_row",
                                               "norm_bwd_cols",
                                               "norm_cols_sum",
                                               "norm_fwd_r1",
                                               "norm_fwd_r4",
                                               "norm_fwd_r16",
                                               "norm_bwd_r1",
                                               "norm_bwd_r4",
                                               "norm_bwd_r16",
                                               "norm_fwd_r4v",
                                               "norm_fwd_r16v",
                                               "norm_bwd_r4v",
                                               "norm_bwd_r16v",
                                               "norm_bwd_r16p",
                                               "norm_fwd_w1",
                                               "norm_fwd_w4",
                                               "xent_fwd",
                                               "xent_reduce",
                                               "xent_scale",
                                               "xent_bwd",
                                               "emb_fwd",
                                               "emb_keys",
                                               "emb_sort_global",
                                               "emb_sort_local",
                                               "emb_rows",
                                               "emb_bounds",
                                               "bn_part",
                                               "bn_stats",
                                               "bn_apply",
                                               "bn_dx",
                                               "lrn_fwd",
                                               "lrn_bwd",
                                               "dropout_fwd",
                                               "dropout_bwd",
                                               "from_float"};
// The softmax kernels that hold a row in registers (inner == 1): <mode>_r<v>_<suffix>, variant v
// runs blocks of `threads`, `rows` rows a block (one warp a row) or one row a block (rows 1), rows
// up to `cap` values. Table of kernels_cu.hpp's NN_SOFTMAX_REG lines; the gradients' last
// variant differs (1024 threads of 16 values instead of 512 of 32: y and dy are both held).
constexpr int softmax_variants = 6;
struct softmax_variant {
  uint32_t threads, rows;
  uint64_t cap;
};
constexpr softmax_variant softmax_table[2][softmax_variants] = {
    {{256, 8, 256}, {256, 8, 512}, {256, 8, 1024}, {512, 1, 4096}, {512, 1, 8192}, {512, 1, 16384}},
    {{256, 8, 256},
     {256, 8, 512},
     {256, 8, 1024},
     {512, 1, 4096},
     {512, 1, 8192},
     {1024, 1, 16384}}};
constexpr const char* softmax_mode[4] = {"softmax", "log_softmax", "softmax_grad",
                                         "log_softmax_grad"};
constexpr bool kernel_exists(int k, int d) {
  if (k >= K_LRN_FWD && k <= K_DROPOUT_BWD) return d == F32 || d == F64;
  if (k == K_FROM_FLOAT) return d == F16 || d == BF16;
  if (k == K_NORM_BWD_R16P) return d != F64;
  return true;
}

// The geometry argument of the direct convolution kernels (struct conv_geom there).
struct conv_geom {
  int N, C, H, W, K, R, S, P, Q, sh, sw, ph, pw, dh, dw, G;
};
static_assert(sizeof(conv_geom) == 64);

// ---- cuDNN, loaded at run time ---------------------------------------------------------------

// clang-format off
#define PARENCHYMA_CUDNN_FUNCTIONS(X) \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) \
  X(cudnnSetConvolutionGroupCount) X(cudnnSetConvolutionMathType) \
  X(cudnnDestroyConvolutionDescriptor) \
  X(cudnnGetConvolutionForwardWorkspaceSize) X(cudnnGetConvolutionBackwardDataWorkspaceSize) \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) \
  X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBackwardFilter) \
  X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnFindConvolutionBackwardDataAlgorithmEx) \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx) \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionBackwardDataAlgorithm_v7) \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)
// clang-format on

struct cudnn_api {
#define PARENCHYMA_DECLARE(f) decltype(&::f) f = nullptr;
  PARENCHYMA_CUDNN_FUNCTIONS(PARENCHYMA_DECLARE)
#undef PARENCHYMA_DECLARE
};

constexpr int algo_count[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                               CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
// The algorithm numbers of a direction, for messages (the list at the top of this file).
constexpr const char* algorithm_list[3] = {
    "0 the default, 0-7 cuDNN's cudnnConvolutionFwdAlgo_t, 100 parenchyma's direct kernel, "
    "1000-1031 the graph API's plans, -1 measured, -2 the first plan",
    "0 the default, 0-5 cuDNN's cudnnConvolutionBwdDataAlgo_t, 100 parenchyma's direct kernel, "
    "1000-1031 the graph API's plans, -1 measured, -2 the first plan",
    "0 the default, 0-6 cuDNN's cudnnConvolutionBwdFilterAlgo_t, 100 parenchyma's direct kernel, "
    "1000-1031 the graph API's plans, -1 measured, -2 the first plan"};
constexpr const char* direction_name[3] = {"convolution", "convolution_grad_data",
                                           "convolution_grad_filter"};

// PCY_NN_NUMERICS_TRANSFORM for cuDNN's FFT and Winograd algorithms (their rounding error is
// spread over a tile), PCY_NN_NUMERICS_DIRECT for the GEMM-like ones and our own kernel.
constexpr int64_t numerics_of(int dir, int64_t algorithm) noexcept {
  switch (dir) {
  case 0:
    return algorithm == CUDNN_CONVOLUTION_FWD_ALGO_FFT ||
                   algorithm == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
                   algorithm == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
                   algorithm == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED
               ? PCY_NN_NUMERICS_TRANSFORM
               : PCY_NN_NUMERICS_DIRECT;
  case 1:
    return algorithm == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
                   algorithm == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
                   algorithm == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
                   algorithm == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED
               ? PCY_NN_NUMERICS_TRANSFORM
               : PCY_NN_NUMERICS_DIRECT;
  default:
    return algorithm == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
                   algorithm == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
                   algorithm == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD ||
                   algorithm == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED
               ? PCY_NN_NUMERICS_TRANSFORM
               : PCY_NN_NUMERICS_DIRECT;
  }
}

// A convolution's geometry as cuDNN's descriptors hold it (with the dtype and math type).
struct conv_key {
  int dt = -1, N = 0, C = 0, H = 0, W = 0, K = 0, R = 0, S = 0, sh = 0, sw = 0, ph = 0, pw = 0,
      dh = 0, dw = 0, G = 0, math = 0;
  auto operator<=>(const conv_key&) const = default;
};
struct find_key {
  int direction = 0;
  conv_key g;
  std::string device; // the device's UUID
  auto operator<=>(const find_key&) const = default;
};
struct find_result {
  int64_t algorithm = 0, workspace = 0;
  int64_t numerics = -1; // PCY_NN_NUMERICS_*; -1: numerics_of(algorithm)
};

class nn_cuda_bundle;

// ---- per-context state --------------------------------------------------------------------

using sdk::val;

struct cuda_nn_context : sdk::cuda_device_context<CUcontext, CUresult, CUstream> {
  cuda_nn_context(const pcy_bundle_context_args& a, const nn_cuda_bundle& b,
                  const sdk::cuda_driver<CUcontext, CUresult>& driver)
      : cuda_device_context(a, driver, bundle_name), bundle(&b) {}
  const nn_cuda_bundle* bundle;
  uint64_t max_blocks = 1024;     // grid cap of the grid-stride kernels: 16 blocks per SM
  uint64_t stream_blocks = 16384; // grid cap of the streaming kernels: 256 blocks per SM
  bool fp64 = true;
  std::string uuid, device_name;
  pcy_kernel k[4][K_COUNT] = {};
  pcy_kernel softmax_reg[4][4][softmax_variants] = {}; // [dtype][mode][variant]
  // cuDNN (null without it; dnn_reason says why)
  cudnnHandle_t dnn = nullptr;
  cudnnTensorDescriptor_t xd = nullptr, yd = nullptr;
  cudnnFilterDescriptor_t wd = nullptr;
  cudnnConvolutionDescriptor_t cd = nullptr;
  std::string dnn_reason;
  conv_key last;                 // what the descriptors hold (dt -1: nothing valid)
  int ws_algo[3] = {-1, -1, -1}; // workspace size cache for `last`, per direction
  size_t ws_bytes[3] = {0, 0, 0};
  // cuDNN's graph API: the plans built per problem (never erased before the handle goes; each
  // keeps the variant pack of its last run), and per direction the plan the last op ran, so a
  // repeated op builds nothing.
  std::map<ng::problem, ng::plan_set> plan_sets;
  struct graph_last {
    ng::problem p;
    int64_t k = -1;
    ng::plan* plan = nullptr;
  } glast[3];

  ~cuda_nn_context();

  bool op_available(const pcy_op_desc& op, const char** reason) const {
    if (op.dtype == PCY_DTYPE_F64 && !fp64) {
      *reason = "nn_cuda: the device reports no fp64";
      return false;
    }
    return true;
  }

  const cudnn_api& api() const;

  using device_context::kernel;
  pcy_kernel kernel(int id, int d) const { return k[d][id]; }
  void launch(pcy_queue q, pcy_kernel kern, uint64_t blocks,
              std::initializer_list<pcy_kernel_arg> args) const {
    launch(q, kern, blocks, block, args);
  }
  void launch(pcy_queue q, pcy_kernel kern, uint64_t blocks, uint32_t threads,
              std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, kern, 1, {blocks * threads, 1, 1}, {threads, 1, 1}, args);
  }
  // A grid of bx x by blocks of `block` threads.
  void launch_2d(pcy_queue q, pcy_kernel kern, uint64_t bx, uint64_t by,
                 std::initializer_list<pcy_kernel_arg> args) const {
    device_context::launch(q, kern, 2, {bx * block, by, 1}, {block, 1, 1}, args);
  }
  // Blocks for a grid-stride kernel over `count` items of `per_block` each.
  uint64_t blocks_for(uint64_t count, uint64_t per_block = block) const {
    return std::clamp<uint64_t>((count + per_block - 1) / per_block, 1, max_blocks);
  }
  // Blocks for a streaming kernel over `count` items of `per_block` each: one step a block as
  // long as the grid stays below stream_blocks (the block scheduler balances the SMs; a grid of
  // a few waves would leave a partial last wave).
  uint64_t stream_for(uint64_t count, uint64_t per_block) const {
    return std::clamp<uint64_t>((count + per_block - 1) / per_block, 1, stream_blocks);
  }
  // An optional or empty tensor (absent, or 0 elements and never resolved): 0, nothing is read
  // through it.
  uint64_t ptr_or_null(const pcy_tensor* t) const {
    return t && (t->data != nullptr || t->memory != nullptr) ? ptr(*t) : uint64_t{0};
  }
  uint64_t ptr(const pcy_tensor& t) const {
    return reinterpret_cast<uint64_t>(sdk::native_of(*fw, t)) + t.byte_offset;
  }
  void zero(pcy_queue q, const pcy_tensor& t, uint64_t bytes) const {
    if (bytes == 0) return;
    const uint8_t z = 0;
    fill(q, t.memory, t.byte_offset, bytes, &z, 1);
  }
  void check(cudnnStatus_t s, const char* what) const {
    if (s != CUDNN_STATUS_SUCCESS)
      sdk::fail(s == CUDNN_STATUS_NOT_SUPPORTED  ? PCY_ERR_UNSUPPORTED
                : s == CUDNN_STATUS_ALLOC_FAILED ? PCY_ERR_OUT_OF_MEMORY
                                                 : PCY_ERR_DEVICE,
                sdk::str(what, " failed: ", api().cudnnGetErrorString(s)));
  }
  // Sets the descriptors to g unless they hold it already; a refused geometry leaves them
  // invalid and returns cuDNN's status.
  cudnnStatus_t set_geometry(const conv_key& g);
  // The graph API's plans for p, built on first use; null where the graph API is not in use.
  // A set whose building failed has no plans and says why (error, refusal).
  ng::plan_set* graph_plans(const ng::problem& p);
};

// ---- the bundle ---------------------------------------------------------------------------

constexpr sdk::bundle_identity identity{
    bundle_name, PCY_NN_EXTENSION, "cuda",
    "NN ops on CUDA: parenchyma CUDA C kernels, convolutions through cuDNN 9 (loaded at run time) "
    "or parenchyma's direct kernels without it"};

class nn_cuda_bundle : public sdk::bundle_base<identity, cuda_nn_context> {
public:
  explicit nn_cuda_bundle(const pcy_host_services& host);
  nn_cuda_bundle(const nn_cuda_bundle&) = delete;
  nn_cuda_bundle& operator=(const nn_cuda_bundle&) = delete;
  ~nn_cuda_bundle() {
    // cuDNN and libcuda stay loaded on purpose: they keep process-wide state of their own.
  }

  const char* reason() const { return reason_.empty() ? nullptr : reason_.c_str(); }
  std::span<const pcy_op_desc> ops() const { return table_.ops(); }
  context_type* create_context(const pcy_bundle_context_args& a);

  const cudnn_api& api() const { return dnn_; }
  bool has_cudnn() const { return dnn_lib_ != nullptr; }
  const ng::api& graph_api() const { return graph_; }
  bool has_graph() const { return has_cudnn() && graph_.loaded(); }
  const std::string& graph_reason() const { return graph_reason_; }
  template <class... A> void warn(const A&... a) const { log_.warn(a...); }
  template <class... A> void debug(const A&... a) const { log_.debug(a...); }
  bool tf32_default() const { return tf32_; }
  // The driver calls that put a context current for cuDNN.
  sdk::cuda_driver<CUcontext, CUresult> driver;
  // Events, to time the graph plans against the legacy algorithms (all null: no timing).
  decltype(&::cuEventCreate) ev_create = nullptr;
  decltype(&::cuEventDestroy) ev_destroy = nullptr;
  decltype(&::cuEventRecord) ev_record = nullptr;
  decltype(&::cuEventSynchronize) ev_sync = nullptr;
  decltype(&::cuEventElapsedTime) ev_elapsed = nullptr;
  bool has_events() const { return ev_elapsed != nullptr; }

  // The measured algorithms (requested -1), process-wide.
  mutable std::mutex find_mutex;
  mutable std::map<find_key, find_result> find_cache;
  // And on disk, beside the kernel cache (kind "cudnn-find"): one entry per direction, problem
  // and device, keyed also by cuDNN's and the driver's versions (find_fingerprint), so that an
  // upgrade of either measures again. Written by the cache's own thread, joined at unload.
  mutable sdk::blob_cache find_disk;
  std::string find_fingerprint;

private:
  bool load_driver();
  void load_cudnn();
  void build_kernels(cuda_nn_context& cx) const;
  void setup_cudnn(cuda_nn_context& cx) const;
  template <class Op> void add(const pcy_op_schema& s, bool halves, const std::string& impl) {
    const pcy_dtype all[4] = {PCY_DTYPE_F32, PCY_DTYPE_F64, PCY_DTYPE_F16, PCY_DTYPE_BF16};
    table_.add<&Op::template run<PCY_DTYPE_F32>>(s, all[0], sdk::str(impl, " (f32)"));
    table_.add<&Op::template run<PCY_DTYPE_F64>>(s, all[1], sdk::str(impl, " (f64)"));
    if (!halves) return;
    table_.add<&Op::template run<PCY_DTYPE_F16>>(s, all[2], sdk::str(impl, " (f16)"));
    table_.add<&Op::template run<PCY_DTYPE_BF16>>(s, all[3], sdk::str(impl, " (bf16)"));
  }
  void register_ops();

  cudnn_api dnn_;
  void* dnn_lib_ = nullptr;
  ng::api graph_;
  std::string graph_reason_; // why the graph API is not in use
  std::string dnn_soname_, dnn_version_;
  bool tf32_ = false;
  std::string reason_;
  sdk::op_table<nn_cuda_bundle> table_;
};

const cudnn_api& cuda_nn_context::api() const { return bundle->api(); }

cuda_nn_context::~cuda_nn_context() {
  if (dnn != nullptr) {
    try {
      current();
    } catch (...) { // tearing down: nothing to report to
    }
    for (graph_last& l : glast)
      l = graph_last{};
    plan_sets.clear(); // the plans hold the handle
    const cudnn_api& d = api();
    if (xd) d.cudnnDestroyTensorDescriptor(xd);
    if (yd) d.cudnnDestroyTensorDescriptor(yd);
    if (wd) d.cudnnDestroyFilterDescriptor(wd);
    if (cd) d.cudnnDestroyConvolutionDescriptor(cd);
    d.cudnnDestroy(dnn);
  }
  // The kernels, the program and the memory go with device_context.
}

cudnnDataType_t cudnn_dtype(int d) {
  return d == F32   ? CUDNN_DATA_FLOAT
         : d == F64 ? CUDNN_DATA_DOUBLE
         : d == F16 ? CUDNN_DATA_HALF
                    : CUDNN_DATA_BFLOAT16;
}

cudnnStatus_t cuda_nn_context::set_geometry(const conv_key& g) {
  if (g == last) return CUDNN_STATUS_SUCCESS;
  last = conv_key{};
  ws_algo[0] = ws_algo[1] = ws_algo[2] = -1;
  const cudnn_api& d = api();
  const cudnnDataType_t t = cudnn_dtype(g.dt);
  const int P = static_cast<int>(nb::out_extent(g.H, g.R, g.sh, g.ph, g.dh));
  const int Q = static_cast<int>(nb::out_extent(g.W, g.S, g.sw, g.pw, g.dw));
  cudnnStatus_t s = d.cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, t, g.N, g.C, g.H, g.W);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetFilter4dDescriptor(wd, t, CUDNN_TENSOR_NCHW, g.K, g.C / g.G, g.R, g.S);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, t, g.N, g.K, P, Q);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetConvolution2dDescriptor(cd, g.ph, g.pw, g.sh, g.sw, g.dh, g.dw,
                                          CUDNN_CROSS_CORRELATION,
                                          g.dt == F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT);
  if (s == CUDNN_STATUS_SUCCESS) s = d.cudnnSetConvolutionGroupCount(cd, g.G);
  if (s == CUDNN_STATUS_SUCCESS)
    s = d.cudnnSetConvolutionMathType(cd, static_cast<cudnnMathType_t>(g.math));
  if (s == CUDNN_STATUS_SUCCESS) last = g;
  return s;
}

// Direction `dir` of geometry g as the graph API describes it.
ng::problem graph_problem(int dir, const conv_key& g) {
  ng::problem p;
  p.direction = dir;
  p.data = cudnn_dtype(g.dt);
  p.compute = g.dt == F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  p.tf32 = g.dt == F32 && g.math == CUDNN_DEFAULT_MATH;
  p.N = g.N, p.C = g.C, p.H = g.H, p.W = g.W, p.K = g.K, p.R = g.R, p.S = g.S, p.groups = g.G;
  p.P = nb::out_extent(g.H, g.R, g.sh, g.ph, g.dh);
  p.Q = nb::out_extent(g.W, g.S, g.sw, g.pw, g.dw);
  p.stride = {g.sh, g.sw};
  p.pad = {g.ph, g.pw};
  p.dil = {g.dh, g.dw};
  return p;
}

ng::plan_set* cuda_nn_context::graph_plans(const ng::problem& p) {
  if (dnn == nullptr || !bundle->has_graph()) return nullptr;
  auto it = plan_sets.find(p);
  if (it == plan_sets.end()) {
    it = plan_sets.try_emplace(p).first;
    const ng::status s = ng::build(bundle->graph_api(), dnn, p, it->second);
    // A refusal of the shapes (the graph's finalization) is an answer; any other failure is
    // worth a line in the log: the legacy algorithms still serve.
    if (!s.ok() && std::strncmp(s.what, "cudnnBackendFinalize", 20) != 0)
      bundle->warn(direction_name[p.direction], " on ", device_name,
                   ": cuDNN's graph API: ", s.what, " failed (", api().cudnnGetErrorString(s.code),
                   "); its plans are not offered for these shapes");
  }
  return &it->second;
}

// ---- helpers shared by the ops -----------------------------------------------------------------

bool aligned16(uint64_t p) { return (p & 15u) == 0; }

template <pcy_dtype D> using compute_t = std::conditional_t<D == PCY_DTYPE_F64, double, float>;
template <pcy_dtype D> using wide_t = std::conditional_t<D == PCY_DTYPE_F64, double, float>;

int narrow(int64_t v, const pcy_op_schema& s, const char* what) { return nb::to_int(v, s, what); }

// Our kernels (and cuDNN) take the geometry as int, and the plane coordinates they compute reach
// the padded extents: refuse what does not fit instead of wrapping (the decoder allows values up
// to 2^31 each, so H + 2 pad may not fit).
void int_plane(int64_t H, int64_t W, const std::array<int64_t, 2>& pad, const pcy_op_schema& s) {
  (void)narrow(H + 2 * pad[0], s, "the padded height (H + 2 padding)");
  (void)narrow(W + 2 * pad[1], s, "the padded width (W + 2 padding)");
}
void int_conv_geometry(const nb::conv_call& c, const pcy_op_schema& s) {
  int_plane(c.H, c.W, c.pad, s);
  for (int i = 0; i < 2; ++i) {
    (void)narrow(c.stride[i], s, "stride");
    (void)narrow(c.dil[i], s, "dilation");
  }
}

// ---- activations --------------------------------------------------------------------------

// A: 0 sigmoid, 1 relu, 2 tanh, 3 elu; G: the gradient forms.
template <const pcy_op_schema& S, int A, bool G> struct act_op {
  static nb::eltwise_call decode(const sdk::op_args& a, pcy_dtype d) {
    if constexpr (G)
      return nb::decode_act_grad<S>(a, d);
    else
      return nb::decode_act<S>(a, d);
  }
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::eltwise_call c = decode(a, D);
    if (c.n == 0) return;
    const auto n = static_cast<long long>(c.n);
    const compute_t<D> alpha = static_cast<compute_t<D>>(c.alpha);
    const uint64_t per_word = 16 / dt_bytes[d];
    // Items: 16-byte words (vec) or elements; a block takes ew_unroll * block of them a step.
    auto blocks = [&](int vec) {
      return cx.stream_for(vec ? c.n / per_word : c.n, ew_unroll * block);
    };
    if constexpr (!G) {
      const uint64_t x = cx.ptr(*c.x), y = cx.ptr(*c.y);
      const int vec = aligned16(x) && aligned16(y) ? 1 : 0;
      cx.launch(a.queue(), cx.kernel(2 * A, d), blocks(vec),
                {val(n), val(alpha), val(x), val(y), val(vec)});
    } else {
      const uint64_t y = cx.ptr(*c.x), dy = cx.ptr(*c.dy), dx = cx.ptr(*c.y);
      const int vec = aligned16(y) && aligned16(dy) && aligned16(dx) ? 1 : 0;
      cx.launch(a.queue(), cx.kernel(2 * A + 1, d), blocks(vec),
                {val(n), val(alpha), val(y), val(dy), val(dx), val(vec)});
    }
  }
};

// ---- softmax ------------------------------------------------------------------------------

// M: 0 softmax, 1 log_softmax, 2 softmax_grad, 3 log_softmax_grad.
template <const pcy_op_schema& S, int M> struct softmax_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::softmax_call c = nb::decode_softmax<S>(a, D);
    if (c.outer == 0 || c.len == 0 || c.inner == 0) return;
    const uint64_t in = cx.ptr(*c.x), out = cx.ptr(*c.y), dy = c.dy ? cx.ptr(*c.dy) : 0;
    const auto outer = static_cast<long long>(c.outer), len = static_cast<long long>(c.len),
               inner = static_cast<long long>(c.inner);
    if (c.inner == 1) {
      // A row in registers where a variant holds it (f64 gradients: not the last one, it spills).
      for (int v = 0; v < softmax_variants; ++v) {
        const softmax_variant& sv = softmax_table[M < 2 ? 0 : 1][v];
        if (c.len > sv.cap || (D == PCY_DTYPE_F64 && M >= 2 && v == softmax_variants - 1)) continue;
        const int ilen = static_cast<int>(c.len);
        const int vec = aligned16(in) && aligned16(out) && (M < 2 || aligned16(dy)) &&
                                (c.len * dt_bytes[d]) % 16 == 0
                            ? 1
                            : 0;
        cx.launch(a.queue(), cx.softmax_reg[d][M][v], cx.stream_for(c.outer, sv.rows), sv.threads,
                  {val(outer), val(ilen), val(vec), val(in), val(dy), val(out)});
        return;
      }
      const int per_warp = c.len <= 1024 ? 1 : 0;
      const uint64_t blocks = per_warp ? cx.blocks_for(c.outer, block_warps)
                                       : std::min<uint64_t>(c.outer, cx.max_blocks);
      cx.launch(a.queue(), cx.kernel(K_SOFTMAX_ROWS + 2 * M, d), blocks,
                {val(outer), val(len), val(per_warp), val(in), val(dy), val(out)});
    } else {
      cx.launch(a.queue(), cx.kernel(K_SOFTMAX_COLS + 2 * M, d), cx.blocks_for(c.outer * c.inner),
                {val(outer), val(len), val(inner), val(in), val(dy), val(out)});
    }
  }
};

// ---- pooling ------------------------------------------------------------------------------

struct pool_geom {
  int H, W, P, Q, wh, ww, sh, sw, ph, pw;
};
template <const pcy_op_schema& S> pool_geom pool_ints(const nb::pool_call& c) {
  int_plane(c.H, c.W, c.pad, S);
  return {narrow(c.H, S, "H"),
          narrow(c.W, S, "W"),
          narrow(c.P, S, "P"),
          narrow(c.Q, S, "Q"),
          narrow(c.win[0], S, "window"),
          narrow(c.win[1], S, "window"),
          narrow(c.stride[0], S, "stride"),
          narrow(c.stride[1], S, "stride"),
          narrow(c.pad[0], S, "padding"),
          narrow(c.pad[1], S, "padding")};
}

// pooling_max (I false) and pooling_max_indexed (I true).
template <const pcy_op_schema& S, bool I> struct pool_max_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    const nb::pool_call c = nb::decode_pool<S>(a, D);
    const uint64_t total = static_cast<uint64_t>(c.N * c.C * c.P * c.Q);
    if (total == 0) return;
    const pool_geom g = pool_ints<S>(c);
    const uint64_t x = cx.ptr(*c.x), y = cx.ptr(*c.y), idx = I ? cx.ptr(*c.indices) : 0;
    const auto t = static_cast<long long>(total);
    cx.launch(a.queue(), cx.kernel(K_POOL_MAX, index_of(D)), cx.blocks_for(total),
              {val(t), val(g.H), val(g.W), val(g.P), val(g.Q), val(g.wh), val(g.ww), val(g.sh),
               val(g.sw), val(g.ph), val(g.pw), val(x), val(y), val(idx)});
  }
};

// pooling_max_grad(x, y, dy, dx): the first maxima into the workspace, then a gather per dx.
struct pool_max_grad_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr auto& S = pcy_nn_pooling_max_grad_schema;
    constexpr int d = index_of(D);
    const nb::pool_call c = nb::decode_pool<S>(a, D);
    const uint64_t nx = static_cast<uint64_t>(c.N * c.C * c.H * c.W);
    const uint64_t ny = static_cast<uint64_t>(c.N * c.C * c.P * c.Q);
    if (nx == 0) return;
    if (ny == 0) {
      cx.zero(a.queue(), *c.dx, nx * dt_bytes[d]);
      return;
    }
    const pool_geom g = pool_ints<S>(c);
    void* native = nullptr;
    a.workspace(ny * sizeof(int32_t), &native);
    const auto idx = reinterpret_cast<uint64_t>(native);
    const uint64_t x = cx.ptr(*c.x), dy = cx.ptr(*c.dy), dx = cx.ptr(*c.dx), none = 0;
    const auto ty = static_cast<long long>(ny), tx = static_cast<long long>(nx);
    cx.launch(a.queue(), cx.kernel(K_POOL_MAX, d), cx.blocks_for(ny),
              {val(ty), val(g.H), val(g.W), val(g.P), val(g.Q), val(g.wh), val(g.ww), val(g.sh),
               val(g.sw), val(g.ph), val(g.pw), val(x), val(none), val(idx)});
    cx.launch(a.queue(), cx.kernel(K_POOL_MAX_GATHER, d), cx.blocks_for(nx),
              {val(tx), val(g.H), val(g.W), val(g.P), val(g.Q), val(g.wh), val(g.ww), val(g.sh),
               val(g.sw), val(g.ph), val(g.pw), val(idx), val(dy), val(dx)});
  }
};

// pooling_max_grad_indexed(dy, indices, dx): no geometry to gather by, so dx is zeroed and dy
// added at each index by atomics (f16/bf16: into a float workspace, converted at the end).
struct pool_max_grad_indexed_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr auto& S = pcy_nn_pooling_max_grad_indexed_schema;
    constexpr int d = index_of(D);
    const nb::pool_call c = nb::decode_pool<S>(a, D);
    const uint64_t nx = static_cast<uint64_t>(c.N * c.C * c.H * c.W);
    const uint64_t ny = static_cast<uint64_t>(c.N * c.C * c.P * c.Q);
    if (nx == 0) return;
    const bool half = D == PCY_DTYPE_F16 || D == PCY_DTYPE_BF16;
    uint64_t acc = cx.ptr(*c.dx);
    if (half) {
      void* native = nullptr;
      a.workspace(nx * sizeof(float), &native);
      acc = reinterpret_cast<uint64_t>(native);
    }
    const auto tx = static_cast<long long>(nx), ty = static_cast<long long>(ny);
    cx.launch(a.queue(), cx.kernel(K_FILL_ZERO, half ? F32 : d), cx.blocks_for(nx),
              {val(tx), val(acc)});
    if (ny > 0) {
      const auto PQ = static_cast<long long>(c.P * c.Q), HW = static_cast<long long>(c.H * c.W);
      const uint64_t idx = cx.ptr(*c.indices), dy = cx.ptr(*c.dy);
      cx.launch(a.queue(), cx.kernel(K_POOL_SCATTER, d), cx.blocks_for(ny),
                {val(ty), val(PQ), val(HW), val(idx), val(dy), val(acc)});
    }
    if (half) {
      const uint64_t dx = cx.ptr(*c.dx);
      cx.launch(a.queue(), cx.kernel(K_FROM_FLOAT, d), cx.blocks_for(nx),
                {val(tx), val(acc), val(dx)});
    }
  }
};

// pooling_avg (G false) and pooling_avg_grad (G true, a gather per dx).
template <const pcy_op_schema& S, bool G> struct pool_avg_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::pool_call c = nb::decode_pool<S>(a, D);
    const uint64_t nx = static_cast<uint64_t>(c.N * c.C * c.H * c.W);
    const uint64_t ny = static_cast<uint64_t>(c.N * c.C * c.P * c.Q);
    const pool_geom g = pool_ints<S>(c);
    const int inc = c.include_padding ? 1 : 0;
    if constexpr (!G) {
      if (ny == 0) return;
      const uint64_t x = cx.ptr(*c.x), y = cx.ptr(*c.y);
      const auto t = static_cast<long long>(ny);
      cx.launch(a.queue(), cx.kernel(K_POOL_AVG, d), cx.blocks_for(ny),
                {val(t), val(g.H), val(g.W), val(g.P), val(g.Q), val(g.wh), val(g.ww), val(g.sh),
                 val(g.sw), val(g.ph), val(g.pw), val(inc), val(x), val(y)});
    } else {
      if (nx == 0) return;
      const uint64_t dy = cx.ptr(*c.dy), dx = cx.ptr(*c.dx);
      const auto t = static_cast<long long>(nx);
      cx.launch(a.queue(), cx.kernel(K_POOL_AVG_GRAD, d), cx.blocks_for(nx),
                {val(t), val(g.H), val(g.W), val(g.P), val(g.Q), val(g.wh), val(g.ww), val(g.sh),
                 val(g.sw), val(g.ph), val(g.pw), val(inc), val(dy), val(dx)});
    }
  }
};

// ---- LRN ----------------------------------------------------------------------------------

template <const pcy_op_schema& S, bool G> struct lrn_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::lrn_call c = nb::decode_lrn<S>(a, D);
    const uint64_t count = static_cast<uint64_t>(c.N * c.C * c.H * c.W);
    if (count == 0) return;
    const auto plane = static_cast<long long>(c.H * c.W), cnt = static_cast<long long>(count);
    const int C = narrow(c.C, S, "C"), n = narrow(c.n, S, "n");
    const double alpha = c.alpha, beta = c.beta, k = c.k;
    const uint64_t x = cx.ptr(*c.x), y = cx.ptr(*c.y);
    if constexpr (!G) {
      cx.launch(
          a.queue(), cx.kernel(K_LRN_FWD, d), cx.blocks_for(count),
          {val(cnt), val(C), val(plane), val(n), val(alpha), val(beta), val(k), val(x), val(y)});
    } else {
      uint64_t bytes = 0;
      if (!sdk::mul_ok(count, 2 * sizeof(double), bytes))
        sdk::fail(PCY_ERR_UNSUPPORTED, "nn.lrn_grad: the workspace size overflows");
      void* native = nullptr;
      a.workspace(bytes, &native);
      const auto ws = reinterpret_cast<uint64_t>(native);
      const uint64_t dy = cx.ptr(*c.dy), dx = cx.ptr(*c.dx);
      for (const int phase : {0, 1}) // the workspace, then dx from it
        cx.launch(a.queue(), cx.kernel(K_LRN_BWD, d), cx.blocks_for(count),
                  {val(cnt), val(C), val(plane), val(n), val(alpha), val(beta), val(k), val(x),
                   val(y), val(dy), val(dx), val(ws), val(phase)});
    }
  }
};

// ---- dropout ------------------------------------------------------------------------------

template <const pcy_op_schema& S, bool G> struct dropout_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::dropout_call c = nb::decode_dropout<S>(a, D);
    if (c.n == 0) return;
    const auto n = static_cast<long long>(c.n);
    const wide_t<D> scale = static_cast<wide_t<D>>(c.scale); // rounded to the op's dtype
    const uint64_t x = cx.ptr(*c.x), y = cx.ptr(*c.y), mask = cx.ptr(*c.mask);
    // Groups of 4 elements a thread: 16-byte data words, 4-byte mask words.
    const int vec = aligned16(x) && aligned16(y) && (mask & 3u) == 0 ? 1 : 0;
    const uint64_t blocks = cx.stream_for(vec ? c.n / 4 : c.n, block);
    if constexpr (!G) {
      const unsigned long long seed = c.seed;
      const unsigned int threshold = c.threshold;
      cx.launch(
          a.queue(), cx.kernel(K_DROPOUT_FWD, d), blocks,
          {val(n), val(seed), val(threshold), val(scale), val(x), val(y), val(mask), val(vec)});
    } else {
      cx.launch(a.queue(), cx.kernel(K_DROPOUT_BWD, d), blocks,
                {val(n), val(scale), val(x), val(mask), val(y), val(vec)});
    }
  }
};

// ---- normalisation -------------------------------------------------------------------------

// layer_norm / rms_norm (L) and their gradients: a block per row; the weight gradients a block
// per 32 columns. Statistics in wide_t<D> (pcy_nn.h's statistics dtype); 0 where not saved.
template <const pcy_op_schema& S, bool L> struct norm_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::norm_call c = nb::decode_norm<S>(a, D);
    const auto outer = static_cast<long long>(c.outer), n = static_cast<long long>(c.n);
    const int layer = L ? 1 : 0;
    auto p = [&](const pcy_tensor* t) { return t ? cx.ptr(*t) : uint64_t{0}; };
    // Rows of at most 4096 elements are held in registers (variants r1, r4, r16: 1, 4 or 16
    // values a thread), so each element is read once. r4 and r16 read and write words of 4
    // elements (variants r4v, r16v) where n % 4 == 0 and every row tensor is aligned to one.
    const int reg = c.n <= 256 ? 0 : c.n <= 1024 ? 1 : c.n <= 4096 ? 2 : -1;
    const uint64_t word = 4 * sdk::dtype_size(D);
    auto word_aligned = [&](std::initializer_list<const pcy_tensor*> ts) {
      if (c.n % 4 != 0) return false;
      for (const pcy_tensor* t : ts)
        if (t && p(t) % word != 0) return false;
      return true;
    };
    auto workspace = [&](uint64_t chunks) {
      uint64_t bytes = 0;
      if (!sdk::mul_ok(chunks * 2 * sizeof(wide_t<D>), c.n, bytes))
        sdk::fail(PCY_ERR_UNSUPPORTED,
                  sdk::str(S.extension, ".", S.name, ": the workspace size overflows"));
      void* native = nullptr;
      a.workspace(bytes, &native);
      return reinterpret_cast<uint64_t>(native);
    };
    auto sum_chunks = [&](uint64_t part, uint64_t chunks) {
      const auto ch = static_cast<long long>(chunks);
      // Blocks of 1024 threads, 32 columns each (kernels.cu's NS_THREADS).
      cx.launch(a.queue(), cx.kernel(K_NORM_COLS_SUM, d),
                std::min<uint64_t>((c.n + 31) / 32, 65535), 1024,
                {val(n), val(layer), val(ch), val(part), val(p(c.dweight)), val(p(c.dbias))});
    };
    if constexpr (!nb::detail::has<S>("dx")) {
      if (c.outer == 0) return;
      const wide_t<D> eps = static_cast<wide_t<D>>(c.epsilon);
      const bool v4 = word_aligned({c.x, c.weight, c.bias, c.y});
      // Rows of at most 1024 in words, or 256 elements: a warp per row (w4, w1), 8 a block.
      const bool warp = (v4 && c.n <= 1024) || c.n <= 256;
      const int kid = warp       ? (v4 ? K_NORM_FWD_W4 : K_NORM_FWD_W1)
                      : v4       ? K_NORM_FWD_R4V + (reg - 1)
                      : reg >= 0 ? K_NORM_FWD_R1 + reg
                                 : K_NORM_FWD;
      cx.launch(a.queue(), cx.kernel(kid, d),
                std::min<uint64_t>(warp ? (c.outer + 7) / 8 : c.outer, 65535),
                {val(outer), val(n), val(layer), val(eps), val(p(c.x)), val(p(c.weight)),
                 val(p(c.bias)), val(p(c.y)), val(p(c.mean)), val(p(c.rstd))});
    } else if (c.n == 0) {
      return;
    } else if (reg >= 0 && c.outer != 0) {
      // Fused: a block per chunk of rows (at most 1024 chunks of at least 8 rows: a function of
      // the shape only, so every device sums in the same order) writes dx and its columns'
      // partial sums; then the chunks' sums are added in order.
      const uint64_t want = std::clamp<uint64_t>(c.outer / 8, 1, 1024);
      const uint64_t rows_per = (c.outer + want - 1) / want;
      const uint64_t chunks = (c.outer + rows_per - 1) / rows_per;
      const uint64_t part = workspace(chunks);
      const auto rp = static_cast<long long>(rows_per);
      const bool v4 = reg >= 1 && word_aligned({c.x, c.weight, c.dy, c.y});
      // Rows of 1025-4096 in words, f32 and half: the prefetching kernel (norm_bwd_r16p).
      const int kid = !v4                              ? K_NORM_BWD_R1 + reg
                      : reg == 2 && D != PCY_DTYPE_F64 ? K_NORM_BWD_R16P
                                                       : K_NORM_BWD_R4V + (reg - 1);
      cx.launch(a.queue(), cx.kernel(kid, d), chunks,
                {val(outer), val(n), val(layer), val(rp), val(p(c.x)), val(p(c.weight)),
                 val(p(c.mean)), val(p(c.rstd)), val(p(c.dy)), val(p(c.y)), val(part)});
      sum_chunks(part, chunks);
    } else {
      if (c.outer != 0)
        cx.launch(a.queue(), cx.kernel(K_NORM_BWD_ROW, d), std::min<uint64_t>(c.outer, 65535),
                  {val(outer), val(n), val(layer), val(p(c.x)), val(p(c.weight)), val(p(c.mean)),
                   val(p(c.rstd)), val(p(c.dy)), val(p(c.y))});
      // The weight gradients: chunks of up to 256 rows (at most 256 chunks; a function of the
      // shape only), partial sums in the workspace, then added in chunk order.
      const uint64_t chunks = std::clamp<uint64_t>(c.outer / 256, 1, 256);
      const auto rows_per = static_cast<long long>((c.outer + chunks - 1) / chunks);
      const uint64_t part = workspace(chunks);
      cx.launch_2d(a.queue(), cx.kernel(K_NORM_BWD_COLS, d),
                   std::min<uint64_t>((c.n + 31) / 32, 65535), chunks,
                   {val(outer), val(n), val(layer), val(rows_per), val(p(c.x)), val(p(c.mean)),
                    val(p(c.rstd)), val(p(c.dy)), val(part)});
      sum_chunks(part, chunks);
    }
  }
};

// ---- cross entropy -------------------------------------------------------------------------

// A block per row. 'mean' / 'sum': the rows' losses (and counts) in the workspace, then one
// block adds them in a fixed order (no atomics: the same bits on every run). The gradient: one
// block computes the scale of 'mean' / 'sum' into the workspace, then a block per row.
template <const pcy_op_schema& S> struct xent_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    constexpr bool grad = nb::detail::has<S>("dlogits");
    const nb::xent_call c = nb::decode_xent<S>(a, D);
    const auto rows = static_cast<long long>(c.rows), C = static_cast<long long>(c.classes),
               ign = static_cast<long long>(c.ignore_index);
    const int red = c.reduction;
    const wide_t<D> eps = static_cast<wide_t<D>>(c.smoothing);
    auto p = [&](const pcy_tensor* t) { return cx.ptr_or_null(t); };
    const uint64_t blocks = std::min<uint64_t>(c.rows, 65535);
    if constexpr (!grad) {
      if (c.rows == 0 && red == 0) return;
      uint64_t part = 0;
      if (red != 0) {
        uint64_t bytes = 0;
        if (!sdk::mul_ok(2 * sizeof(wide_t<D>), std::max<uint64_t>(c.rows, 1), bytes))
          sdk::fail(PCY_ERR_UNSUPPORTED,
                    sdk::str(S.extension, ".", S.name, ": the workspace size overflows"));
        void* native = nullptr;
        a.workspace(bytes, &native);
        part = reinterpret_cast<uint64_t>(native);
      }
      if (c.rows != 0)
        cx.launch(a.queue(), cx.kernel(K_XENT_FWD, d), blocks,
                  {val(rows), val(C), val(ign), val(eps), val(red), val(p(c.logits)),
                   val(p(c.labels)), val(p(c.loss)), val(p(c.lse)), val(part)});
      if (red != 0)
        cx.launch(a.queue(), cx.kernel(K_XENT_REDUCE, d), 1,
                  {val(rows), val(red), val(part), val(p(c.loss))});
    } else {
      if (c.rows == 0 || c.classes == 0) return;
      uint64_t g0 = 0;
      if (red != 0) {
        void* native = nullptr;
        a.workspace(sizeof(wide_t<D>), &native);
        g0 = reinterpret_cast<uint64_t>(native);
        cx.launch(a.queue(), cx.kernel(K_XENT_SCALE, d), 1,
                  {val(rows), val(ign), val(red), val(p(c.labels)), val(p(c.dloss)), val(g0)});
      }
      cx.launch(a.queue(), cx.kernel(K_XENT_BWD, d), blocks,
                {val(rows), val(C), val(ign), val(eps), val(red), val(p(c.logits)),
                 val(p(c.labels)), val(p(c.lse)), val(p(c.dloss)), val(g0), val(p(c.dlogits))});
    }
  }
};

// ---- embedding -----------------------------------------------------------------------------

// The forward: a grid-stride gather over y's n x D elements. The gradient, deterministic and
// without atomics: P = max(2^ceil(log2 n), 2 block) 64-bit keys (index << 32 | position; ~0 for
// positions that add nothing) in the workspace, sorted by a bitonic network (the steps inside a
// chunk of 2 block keys in shared memory, the wider ones over the whole array), then a block
// per vocabulary row sums its segment's dy rows in position order in the compute type.
template <const pcy_op_schema& S> struct embedding_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    constexpr bool grad = nb::detail::has<S>("dweight");
    const nb::embedding_call c = nb::decode_embedding<S>(a, D);
    const auto n = static_cast<long long>(c.n), Dm = static_cast<long long>(c.D),
               V = static_cast<long long>(c.V), pad = static_cast<long long>(c.padding_idx);
    auto p = [&](const pcy_tensor* t) { return cx.ptr_or_null(t); };
    if constexpr (!grad) {
      if (c.n == 0 || c.D == 0) return;
      uint64_t total = 0;
      if (!sdk::mul_ok(c.n, c.D, total))
        sdk::fail(PCY_ERR_UNSUPPORTED, sdk::str(S.extension, ".", S.name, ": n x D overflows"));
      // A block per position; 16-byte words where every row is whole words and aligned.
      const uint64_t wp = c.V != 0 ? p(c.weight) : uint64_t{0}, yp = p(c.y);
      const int vec = (c.D * sdk::dtype_size(D)) % 16 == 0 && aligned16(wp) && aligned16(yp);
      cx.launch(a.queue(), cx.kernel(K_EMB_FWD, d), std::min<uint64_t>(c.n, 65535),
                {val(n), val(Dm), val(V), val(wp), val(p(c.indices)), val(yp), val(vec)});
    } else {
      if (c.V == 0 || c.D == 0) return;
      const uint64_t chunk = 2 * uint64_t{block};
      uint64_t P = chunk;
      while (P < c.n)
        P *= 2; // n < 2^31: no overflow
      const auto Pl = static_cast<long long>(P);
      // The keys, then each vocabulary row's segment (2 V i64).
      void* native = nullptr;
      a.workspace((P + 2 * c.V) * sizeof(uint64_t), &native);
      const uint64_t keys = reinterpret_cast<uint64_t>(native), seg = keys + P * sizeof(uint64_t);
      const bool any = c.n != 0;
      cx.launch(
          a.queue(), cx.kernel(K_EMB_KEYS, d), cx.blocks_for(P),
          {val(n), val(Pl), val(V), val(pad), val(any ? p(c.indices) : uint64_t{0}), val(keys)});
      if (any) {
        const uint64_t groups = std::min<uint64_t>(P / chunk, 65535);
        auto local = [&](long long k0, long long k1, long long j0) {
          cx.launch(a.queue(), cx.kernel(K_EMB_SORT_LOCAL, d), groups,
                    {val(Pl), val(k0), val(k1), val(j0), val(keys)});
        };
        const auto ch = static_cast<long long>(chunk);
        local(2, ch, 1);
        for (long long k = 2 * ch; k <= Pl; k *= 2) {
          for (long long j = k / 2; j >= ch; j /= 2)
            cx.launch(a.queue(), cx.kernel(K_EMB_SORT_GLOBAL, d), cx.blocks_for(P / 2),
                      {val(Pl), val(k), val(j), val(keys)});
          local(k, k, ch / 2);
        }
      }
      const auto V2 = static_cast<long long>(2 * c.V);
      cx.launch(a.queue(), cx.kernel(K_FILL_ZERO, index_of(PCY_DTYPE_F64)), cx.blocks_for(2 * c.V),
                {val(V2), val(seg)});
      if (any)
        cx.launch(a.queue(), cx.kernel(K_EMB_BOUNDS, d), cx.blocks_for(P),
                  {val(Pl), val(keys), val(seg)});
      cx.launch(a.queue(), cx.kernel(K_EMB_ROWS, d), std::min<uint64_t>(c.V, 65535),
                {val(V), val(Dm), val(Pl), val(keys), val(seg), val(any ? p(c.y) : uint64_t{0}),
                 val(p(c.weight))});
    }
  }
};

// ---- batch normalisation -------------------------------------------------------------------

// The per-channel sums over N x spatial in chunks (bn_part: a block per chunk and channel, into
// the workspace), added in chunk order per channel (bn_stats); then y or dx elementwise. The
// chunking is a function of the shape only (chunks of at least 4096 elements, at most 256 a
// channel), so every device sums in the same order. Workspace: 2 C chunks partial sums and 2 C
// statistics, in wide_t<D> (the statistics dtype).
template <const pcy_op_schema& S> struct bn_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    constexpr bool grad = nb::detail::has<S>("dx");
    using W = wide_t<D>;
    constexpr uint64_t V = 16 / sdk::dtype_size(D); // elements of a 16-byte word
    const nb::bn_call c = nb::decode_bn<S>(a, D);
    if (c.C == 0) return;
    auto p = [&](const pcy_tensor* t) { return cx.ptr_or_null(t); };
    const auto N = static_cast<long long>(c.N), C = static_cast<long long>(c.C),
               sp = static_cast<long long>(c.M != 0 ? c.spatial : 1), // the kernels divide by sp
        M = static_cast<long long>(c.M);
    const uint64_t total = c.M * c.C; // no overflow: x's element count
    const auto tot = static_cast<long long>(total);
    const uint64_t chunks = std::clamp<uint64_t>(c.M / 4096, 1, 256);
    const auto per = static_cast<long long>((c.M + chunks - 1) / chunks);
    const auto ch = static_cast<long long>(chunks);
    uint64_t bytes = 0;
    if (!sdk::mul_ok(2 * (chunks + 1) * sizeof(W), c.C, bytes))
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str(S.extension, ".", S.name, ": the workspace size overflows"));
    void* native = nullptr;
    a.workspace(bytes, &native);
    const auto part = reinterpret_cast<uint64_t>(native);
    const uint64_t st = part + 2 * chunks * c.C * sizeof(W); // 2 C statistics after the sums
    const uint64_t grid_c = std::min<uint64_t>(c.C, 65535);
    auto part_launch = [&](int mode, uint64_t mean, uint64_t rstd) {
      cx.launch_2d(a.queue(), cx.kernel(K_BN_PART, d), chunks, grid_c,
                   {val(N), val(C), val(sp), val(per), val(mode), val(p(c.x)), val(p(c.dy)),
                    val(mean), val(rstd), val(part)});
    };
    const W momentum = static_cast<W>(c.momentum), eps = static_cast<W>(c.epsilon);
    auto stats = [&](int phase, int flags) {
      cx.launch(a.queue(), cx.kernel(K_BN_STATS, d), cx.blocks_for(c.C),
                {val(C), val(M), val(ch), val(phase), val(flags), val(momentum), val(eps),
                 val(part), val(st), val(p(c.running_mean)), val(p(c.running_var)),
                 val(p(grad ? nullptr : c.mean)), val(p(grad ? nullptr : c.rstd)),
                 val(p(c.dweight)), val(p(c.dbias))});
    };
    if constexpr (!grad) {
      const int flags =
          (c.running_mean ? 2 : 0) | (c.running_var ? 4 : 0) | (c.mean ? 8 : 0) | (c.rstd ? 16 : 0);
      if (c.training) {
        part_launch(0, 0, 0);
        stats(0, flags);
        part_launch(1, st, 0);
        stats(1, flags);
      } else {
        stats(2, flags);
      }
      // Whole v16 words of one channel where x and y are 16-byte aligned and sp % V == 0.
      const int vec = aligned16(p(c.x)) && aligned16(p(c.y)) && c.spatial % V == 0 ? 1 : 0;
      if (total != 0)
        cx.launch(a.queue(), cx.kernel(K_BN_APPLY, d), cx.blocks_for(vec ? total / V : total),
                  {val(tot), val(C), val(sp), val(p(c.x)), val(p(c.weight)), val(p(c.bias)),
                   val(st), val(p(c.y)), val(vec)});
    } else {
      part_launch(2, p(c.mean), p(c.rstd));
      stats(3, 0);
      const int training = c.training ? 1 : 0;
      const int vec =
          aligned16(p(c.x)) && aligned16(p(c.dy)) && aligned16(p(c.y)) && c.spatial % V == 0 ? 1
                                                                                             : 0;
      if (total != 0)
        cx.launch(a.queue(), cx.kernel(K_BN_DX, d), cx.blocks_for(vec ? total / V : total),
                  {val(tot), val(C), val(sp), val(M), val(training), val(p(c.x)), val(p(c.weight)),
                   val(p(c.mean)), val(p(c.rstd)), val(st), val(p(c.dy)), val(p(c.y)), val(vec)});
    }
  }
};

// ---- convolution bias ---------------------------------------------------------------------

struct bias_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    const nb::conv_call c = nb::decode_bias<pcy_nn_convolution_bias_schema>(a, D);
    const uint64_t total = static_cast<uint64_t>(c.N * c.K * c.P * c.Q);
    if (total == 0) return;
    const auto t = static_cast<long long>(total), PQ = static_cast<long long>(c.P * c.Q);
    const int K = narrow(c.K, pcy_nn_convolution_bias_schema, "K");
    const uint64_t b = cx.ptr(*c.w), y = cx.ptr(*c.y);
    cx.launch(a.queue(), cx.kernel(K_BIAS_ADD, index_of(D)), cx.blocks_for(total),
              {val(t), val(PQ), val(K), val(b), val(y)});
  }
};
struct bias_grad_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr auto& S = pcy_nn_convolution_grad_bias_schema;
    constexpr int d = index_of(D);
    const nb::conv_call c = nb::decode_bias<S>(a, D);
    if (c.K == 0) return;
    if (c.N * c.P * c.Q == 0) { // the sum of nothing
      cx.zero(a.queue(), *c.w, static_cast<uint64_t>(c.K) * dt_bytes[d]);
      return;
    }
    const int N = narrow(c.N, S, "N"), K = narrow(c.K, S, "K");
    const auto PQ = static_cast<long long>(c.P * c.Q);
    const uint64_t dy = cx.ptr(*c.y), db = cx.ptr(*c.w);
    cx.launch(a.queue(), cx.kernel(K_BIAS_GRAD, d),
              std::min<uint64_t>(static_cast<uint64_t>(K), cx.max_blocks),
              {val(N), val(K), val(PQ), val(dy), val(db)});
  }
};

// ---- convolution --------------------------------------------------------------------------

cudnnMathType_t math_type(const cuda_nn_context& cx, int d, int64_t math) {
  if (d == F16 || d == BF16) return CUDNN_TENSOR_OP_MATH;
  if (d == F64) return CUDNN_DEFAULT_MATH;
  const bool tf32 = math == 2 || (math == 0 && cx.bundle->tf32_default());
  return tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
}

conv_key key_of(const cuda_nn_context& cx, int d, const nb::conv_call& c) {
  // Every value is below 2^31 (nn_call.hpp's checks).
  auto i = [](int64_t v) { return static_cast<int>(v); };
  conv_key g;
  g.dt = d;
  g.N = i(c.N), g.C = i(c.C), g.H = i(c.H), g.W = i(c.W), g.K = i(c.K), g.R = i(c.R), g.S = i(c.S);
  g.sh = i(c.stride[0]), g.sw = i(c.stride[1]), g.ph = i(c.pad[0]), g.pw = i(c.pad[1]);
  g.dh = i(c.dil[0]), g.dw = i(c.dil[1]), g.G = i(c.groups);
  g.math = static_cast<int>(math_type(cx, d, c.math));
  return g;
}

// The workspace cuDNN's algorithm `algo` needs for direction `dir` on the set geometry.
cudnnStatus_t workspace_size(cuda_nn_context& cx, int dir, int algo, size_t& bytes) {
  if (cx.ws_algo[dir] == algo) {
    bytes = cx.ws_bytes[dir];
    return CUDNN_STATUS_SUCCESS;
  }
  const cudnn_api& d = cx.api();
  cudnnStatus_t s;
  if (dir == 0)
    s = d.cudnnGetConvolutionForwardWorkspaceSize(
        cx.dnn, cx.xd, cx.wd, cx.cd, cx.yd, static_cast<cudnnConvolutionFwdAlgo_t>(algo), &bytes);
  else if (dir == 1)
    s = d.cudnnGetConvolutionBackwardDataWorkspaceSize(
        cx.dnn, cx.wd, cx.yd, cx.cd, cx.xd, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
        &bytes);
  else
    s = d.cudnnGetConvolutionBackwardFilterWorkspaceSize(
        cx.dnn, cx.xd, cx.yd, cx.cd, cx.wd, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
        &bytes);
  if (s == CUDNN_STATUS_SUCCESS) {
    cx.ws_algo[dir] = algo;
    cx.ws_bytes[dir] = bytes;
  }
  return s;
}

// One legacy call of direction dir with algorithm algo on the set geometry; x, w, y are x/w/y,
// or dx/w/dy, or x/dw/dy.
cudnnStatus_t legacy_exec(const cuda_nn_context& cx, int dir, int algo, void* x, void* w, void* y,
                          void* ws, size_t bytes) {
  const cudnn_api& api = cx.api();
  // alpha = 1, beta = 0 in the compute type: double for f64, float otherwise.
  static constexpr double one_d = 1, zero_d = 0;
  static constexpr float one_f = 1, zero_f = 0;
  const bool f64 = cx.last.dt == F64;
  const void* one = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  return dir == 0 ? api.cudnnConvolutionForward(cx.dnn, one, cx.xd, x, cx.wd, w, cx.cd,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws,
                                                bytes, zero, cx.yd, y)
         : dir == 1
             ? api.cudnnConvolutionBackwardData(cx.dnn, one, cx.wd, w, cx.yd, y, cx.cd,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                                ws, bytes, zero, cx.xd, x)
             : api.cudnnConvolutionBackwardFilter(
                   cx.dnn, one, cx.xd, x, cx.yd, y, cx.cd,
                   static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws, bytes, zero, cx.wd, w);
}

// Runs one direction through cuDNN: x, w, y are x/w/y, or dx/w/dy, or x/dw/dy. Returns false
// (nothing enqueued) where the default algorithm cannot run these shapes, so our kernel runs.
template <int DIR, pcy_dtype D>
bool cudnn_run(cuda_nn_context& cx, const sdk::op_args& a, const nb::conv_call& c) {
  constexpr int d = index_of(D);
  cx.current();
  const conv_key g = key_of(cx, d, c);
  cudnnStatus_t s = cx.set_geometry(g);
  if (s == CUDNN_STATUS_SUCCESS && c.algorithm >= algo_count[DIR]) s = CUDNN_STATUS_NOT_SUPPORTED;
  const int algo = static_cast<int>(c.algorithm);
  size_t bytes = 0;
  if (s == CUDNN_STATUS_SUCCESS) s = workspace_size(cx, DIR, algo, bytes);
  if (s != CUDNN_STATUS_SUCCESS) {
    if (c.algorithm == 0) return false;
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("nn.", direction_name[DIR], ": cuDNN algorithm ", c.algorithm,
                       " cannot run these shapes (", cx.api().cudnnGetErrorString(s),
                       "); pass an algorithm that convolution_algorithm returned (this "
                       "bundle's algorithms: ",
                       algorithm_list[DIR], ")"));
  }
  void* ws = nullptr;
  if (bytes > 0) a.workspace(bytes, &ws);
  s = legacy_exec(cx, DIR, algo, reinterpret_cast<void*>(cx.ptr(*c.x)),
                  reinterpret_cast<void*>(cx.ptr(*c.w)), reinterpret_cast<void*>(cx.ptr(*c.y)), ws,
                  bytes);
  constexpr const char* what[3] = {"nn.convolution: cudnnConvolutionForward",
                                   "nn.convolution_grad_data: cudnnConvolutionBackwardData",
                                   "nn.convolution_grad_filter: cudnnConvolutionBackwardFilter"};
  // The default refused at run time (nothing enqueued): our kernel runs instead.
  if (s == CUDNN_STATUS_NOT_SUPPORTED && c.algorithm == 0) return false;
  cx.check(s, what[DIR]);
  return true;
}

// Runs one direction with the graph API's plan c.algorithm - 1000. The plan of the last op of
// this direction is reused when the problem repeats, its variant pack when the pointers do.
// Pointers not 16-byte aligned (the plans are built for 16) run the legacy default instead.
template <int DIR, pcy_dtype D>
bool graph_run(cuda_nn_context& cx, const sdk::op_args& a, const nb::conv_call& c) {
  constexpr int d = index_of(D);
  if (!cx.bundle->has_graph())
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("nn.", direction_name[DIR], ": algorithm ", c.algorithm,
                       " is a plan of cuDNN's graph API, which is not in use here (",
                       cx.bundle->graph_reason(),
                       "); pass an algorithm that "
                       "convolution_algorithm returned"));
  cx.current();
  const ng::problem p = graph_problem(DIR, key_of(cx, d, c));
  const int64_t k = c.algorithm - graph_base;
  cuda_nn_context::graph_last& l = cx.glast[DIR];
  if (l.plan == nullptr || l.k != k || l.p != p) {
    ng::plan_set& set = *cx.graph_plans(p);
    if (k >= static_cast<int64_t>(set.plans.size()))
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("nn.", direction_name[DIR], ": cuDNN's graph API has ", set.plans.size(),
                         " plans for these shapes, not plan ", k, " (algorithm ", c.algorithm,
                         "); pass an algorithm that convolution_algorithm returned"));
    l = cuda_nn_context::graph_last{};
    l.p = p;
    l.k = k;
    l.plan = set.plans[static_cast<size_t>(k)].get();
  }
  const uint64_t x = cx.ptr(*c.x), w = cx.ptr(*c.w), y = cx.ptr(*c.y);
  nb::conv_call c0 = c;
  c0.algorithm = 0;
  if (!aligned16(x) || !aligned16(w) || !aligned16(y)) return cudnn_run<DIR, D>(cx, a, c0);
  void* ws = nullptr;
  if (l.plan->workspace > 0) a.workspace(static_cast<uint64_t>(l.plan->workspace), &ws);
  if (!aligned16(reinterpret_cast<uint64_t>(ws))) return cudnn_run<DIR, D>(cx, a, c0);
  const ng::status s =
      ng::execute(cx.bundle->graph_api(), cx.dnn, *l.plan, l.plan->bind, reinterpret_cast<void*>(x),
                  reinterpret_cast<void*>(w), reinterpret_cast<void*>(y), ws);
  if (!s.ok()) cx.check(s.code, sdk::str("nn.", direction_name[DIR], ": ", s.what).c_str());
  return true;
}

template <int DIR> struct conv_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::conv_call c = DIR == 0 ? nb::decode_conv<pcy_nn_convolution_schema>(a, D)
                            : DIR == 1
                                ? nb::decode_conv<pcy_nn_convolution_grad_data_schema>(a, D)
                                : nb::decode_conv<pcy_nn_convolution_grad_filter_schema>(a, D);
    const uint64_t nx = static_cast<uint64_t>(c.N * c.C * c.H * c.W);
    const uint64_t nw = static_cast<uint64_t>(c.K * (c.C / c.groups) * c.R * c.S);
    const uint64_t ny = static_cast<uint64_t>(c.N * c.K * c.P * c.Q);
    const uint64_t nout = DIR == 0 ? ny : DIR == 1 ? nx : nw;
    const pcy_tensor& out = DIR == 0 ? *c.y : DIR == 1 ? *c.x : *c.w;
    if (nout == 0) return;
    int_conv_geometry(c, DIR == 0   ? pcy_nn_convolution_schema
                         : DIR == 1 ? pcy_nn_convolution_grad_data_schema
                                    : pcy_nn_convolution_grad_filter_schema);
    if (nx == 0 || nw == 0 || ny == 0) { // sums over nothing (or over padding only)
      cx.zero(a.queue(), out, nout * dt_bytes[d]);
      return;
    }
    if (c.algorithm != own_algorithm) {
      if (cx.dnn != nullptr) {
        if (is_graph(c.algorithm) ? graph_run<DIR, D>(cx, a, c) : cudnn_run<DIR, D>(cx, a, c))
          return;
      } else if (c.algorithm != 0) {
        sdk::fail(PCY_ERR_UNSUPPORTED,
                  sdk::str("nn.", direction_name[DIR], ": algorithm ", c.algorithm,
                           " is cuDNN's, and cuDNN is not in use here (", cx.dnn_reason,
                           "); pass 0 or ", own_algorithm, " (parenchyma's direct kernel)"));
      }
    }
    const conv_geom g{
        static_cast<int>(c.N),         static_cast<int>(c.C),         static_cast<int>(c.H),
        static_cast<int>(c.W),         static_cast<int>(c.K),         static_cast<int>(c.R),
        static_cast<int>(c.S),         static_cast<int>(c.P),         static_cast<int>(c.Q),
        static_cast<int>(c.stride[0]), static_cast<int>(c.stride[1]), static_cast<int>(c.pad[0]),
        static_cast<int>(c.pad[1]),    static_cast<int>(c.dil[0]),    static_cast<int>(c.dil[1]),
        static_cast<int>(c.groups)};
    const uint64_t x = cx.ptr(*c.x), w = cx.ptr(*c.w), y = cx.ptr(*c.y);
    const auto total = static_cast<long long>(nout);
    if constexpr (DIR == 0)
      cx.launch(a.queue(), cx.kernel(K_CONV_FWD, d), cx.blocks_for(ny),
                {val(total), val(g), val(x), val(w), val(y)});
    else if constexpr (DIR == 1)
      cx.launch(a.queue(), cx.kernel(K_CONV_BWD_DATA, d), cx.blocks_for(nx),
                {val(total), val(g), val(w), val(y), val(x)});
    else
      cx.launch(a.queue(), cx.kernel(K_CONV_BWD_FILTER, d), cx.blocks_for(nw, block_warps),
                {val(total), val(g), val(x), val(y), val(w)});
  }
};

// Temporary device memory for measuring (convolution_algorithm only), freed on scope exit
// after the queue drained.
struct temp_buffers {
  const cuda_nn_context& cx;
  std::vector<pcy_memory> mems;
  explicit temp_buffers(const cuda_nn_context& c) : cx(c) {}
  temp_buffers(const temp_buffers&) = delete;
  temp_buffers& operator=(const temp_buffers&) = delete;
  ~temp_buffers() {
    if (mems.empty()) return;
    if (pcy_error* e = cx.fw->queue_finish(cx.queue)) e->destroy(e);
    for (pcy_memory m : mems)
      cx.fw->memory_free(m);
  }
  // A zeroed buffer, or null when the device has no room for it.
  void* get(uint64_t bytes) {
    pcy_memory_alloc_args m{};
    m.struct_size = sizeof m;
    m.context = cx.context;
    m.device = cx.device;
    m.bytes = std::max<uint64_t>(bytes, 256);
    if (pcy_error* e = cx.fw->memory_alloc(&m)) {
      e->destroy(e);
      return nullptr;
    }
    mems.push_back(m.memory);
    const uint8_t z = 0;
    cx.fill(cx.queue, m.memory, 0, m.bytes, &z, 1);
    return cx.native(m.memory);
  }
};

// The first result (cuDNN's order: fastest measured, or the heuristic's preference) that ran and
// that our descriptors accept, preferring those listed under the descriptors' math type (cuDNN
// may list an algorithm under another); its workspace is what the op will ask for with our
// descriptors. Our kernel when none.
template <class Perf> find_result first_ok(cuda_nn_context& cx, int dir, const Perf* p, int n) {
  const auto math = static_cast<cudnnMathType_t>(cx.last.math);
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < n; ++i) {
      if (p[i].status != CUDNN_STATUS_SUCCESS || (pass == 0 && p[i].mathType != math)) continue;
      size_t bytes = 0;
      if (workspace_size(cx, dir, static_cast<int>(p[i].algo), bytes) == CUDNN_STATUS_SUCCESS)
        return {static_cast<int64_t>(p[i].algo), static_cast<int64_t>(bytes)};
    }
  return {own_algorithm, 0};
}

// A search cuDNN refuses for these shapes (NOT_SUPPORTED) leaves our kernel; other failures are
// errors of convolution_algorithm.
bool searched(const cuda_nn_context& cx, cudnnStatus_t s, const char* what) {
  if (s == CUDNN_STATUS_NOT_SUPPORTED) return false;
  if (s != CUDNN_STATUS_SUCCESS) cx.check(s, sdk::str("nn.convolution_algorithm: ", what).c_str());
  return true;
}

find_result heuristic(cuda_nn_context& cx, int dir) {
  const cudnn_api& d = cx.api();
  int n = 0;
  if (dir == 0) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (!searched(cx,
                  d.cudnnGetConvolutionForwardAlgorithm_v7(cx.dnn, cx.xd, cx.wd, cx.cd, cx.yd,
                                                           algo_count[0], &n, p),
                  "cudnnGetConvolutionForwardAlgorithm_v7"))
      return {own_algorithm, 0};
    return first_ok(cx, dir, p, n);
  }
  if (dir == 1) {
    cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (!searched(cx,
                  d.cudnnGetConvolutionBackwardDataAlgorithm_v7(cx.dnn, cx.wd, cx.yd, cx.cd, cx.xd,
                                                                algo_count[1], &n, p),
                  "cudnnGetConvolutionBackwardDataAlgorithm_v7"))
      return {own_algorithm, 0};
    return first_ok(cx, dir, p, n);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (!searched(cx,
                d.cudnnGetConvolutionBackwardFilterAlgorithm_v7(cx.dnn, cx.xd, cx.yd, cx.cd, cx.wd,
                                                                algo_count[2], &n, p),
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7"))
    return {own_algorithm, 0};
  return first_ok(cx, dir, p, n);
}

// Measures every algorithm of direction `dir` on the set geometry (cudnnFind*Ex, on zeroed
// temporary buffers); the fastest that ran. Falls back to the heuristic where the buffers do
// not fit on the device.
// The bytes of x, w and y of geometry g in dtype d; false where a count overflows (the shapes
// are arguments, not tensors).
bool conv_bytes(const nb::conv_call& g, int d, uint64_t& nx, uint64_t& nw, uint64_t& ny) {
  auto bytes_of = [&](std::initializer_list<int64_t> extents, uint64_t& out) {
    out = dt_bytes[d];
    bool ok = true;
    for (int64_t e : extents)
      ok = ok && sdk::mul_ok(out, static_cast<uint64_t>(e), out);
    return ok;
  };
  return bytes_of({g.N, g.C, g.H, g.W}, nx) && bytes_of({g.K, g.C / g.groups, g.R, g.S}, nw) &&
         bytes_of({g.N, g.K, g.P, g.Q}, ny);
}

find_result measure(cuda_nn_context& cx, int dir, const nb::conv_call& g, int d) {
  uint64_t nx = 0, nw = 0, ny = 0;
  if (!conv_bytes(g, d, nx, nw, ny)) return heuristic(cx, dir);
  // The largest workspace any algorithm asks for, within 1 GiB.
  uint64_t ws_max = 0;
  for (int algo = 0; algo < algo_count[dir]; ++algo) {
    size_t b = 0;
    if (workspace_size(cx, dir, algo, b) == CUDNN_STATUS_SUCCESS && b <= (uint64_t{1} << 30))
      ws_max = std::max<uint64_t>(ws_max, b);
  }
  cx.ws_algo[dir] = -1; // the size cache now holds the last algorithm's
  temp_buffers t(cx);
  void* x = t.get(nx);
  void* w = x ? t.get(nw) : nullptr;
  void* y = w ? t.get(ny) : nullptr;
  void* ws = nullptr;
  if (y != nullptr && ws_max > 0) {
    ws = t.get(ws_max);
    if (ws == nullptr) ws_max = 0; // measure those that need no workspace
  }
  if (y == nullptr) return heuristic(cx, dir);
  const cudnn_api& api = cx.api();
  int n = 0;
  if (dir == 0) {
    cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (!searched(cx,
                  api.cudnnFindConvolutionForwardAlgorithmEx(cx.dnn, cx.xd, x, cx.wd, w, cx.cd,
                                                             cx.yd, y, algo_count[0], &n, p, ws,
                                                             ws_max),
                  "cudnnFindConvolutionForwardAlgorithmEx"))
      return {own_algorithm, 0};
    return first_ok(cx, dir, p, n);
  }
  if (dir == 1) {
    cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (!searched(cx,
                  api.cudnnFindConvolutionBackwardDataAlgorithmEx(cx.dnn, cx.wd, w, cx.yd, y, cx.cd,
                                                                  cx.xd, x, algo_count[1], &n, p,
                                                                  ws, ws_max),
                  "cudnnFindConvolutionBackwardDataAlgorithmEx"))
      return {own_algorithm, 0};
    return first_ok(cx, dir, p, n);
  }
  cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  if (!searched(cx,
                api.cudnnFindConvolutionBackwardFilterAlgorithmEx(
                    cx.dnn, cx.xd, x, cx.yd, y, cx.cd, cx.wd, w, algo_count[2], &n, p, ws, ws_max),
                "cudnnFindConvolutionBackwardFilterAlgorithmEx"))
    return {own_algorithm, 0};
  return first_ok(cx, dir, p, n);
}

// How a graph plan rounds: its engine's FFT and Winograd notes make it a transform.
int64_t graph_numerics(const ng::plan& pl) {
  constexpr uint32_t transform =
      1u << CUDNN_NUMERICAL_NOTE_FFT | 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD |
      1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 | 1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 |
      1u << CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13;
  return (pl.notes & transform) != 0 ? PCY_NN_NUMERICS_TRANSFORM : PCY_NN_NUMERICS_DIRECT;
}

// Plan k of the graph API for direction dir of key, as a result; algorithm -1 where there is
// no such plan.
find_result graph_plan(cuda_nn_context& cx, int dir, const conv_key& key, int64_t k) {
  const ng::plan_set* set = cx.graph_plans(graph_problem(dir, key));
  if (set == nullptr || k >= static_cast<int64_t>(set->plans.size())) return {-1, 0};
  const ng::plan& pl = *set->plans[static_cast<size_t>(k)];
  return {graph_base + k, pl.workspace, graph_numerics(pl)};
}

// An explicit graph algorithm number: its plan, or an error saying why there is none.
find_result graph_explicit(cuda_nn_context& cx, int dir, const conv_key& key, int64_t req) {
  if (!cx.bundle->has_graph())
    sdk::fail(PCY_ERR_UNSUPPORTED,
              sdk::str("nn.convolution_algorithm: algorithm ", req,
                       " is a plan of cuDNN's graph API, which is not in use here (",
                       cx.bundle->graph_reason(), ")"));
  const find_result r = graph_plan(cx, dir, key, req - graph_base);
  if (r.algorithm >= 0) return r;
  const ng::plan_set& set = *cx.graph_plans(graph_problem(dir, key));
  const ng::status why = !set.error.ok() ? set.error : set.refusal;
  sdk::fail(PCY_ERR_UNSUPPORTED,
            sdk::str("nn.convolution_algorithm: cuDNN's graph API has ", set.plans.size(),
                     " plans for these shapes of ", direction_name[dir], ", not plan ",
                     req - graph_base, " (algorithm ", req, ")",
                     why.ok()
                         ? std::string()
                         : sdk::str("; ", why.what, ": ", cx.api().cudnnGetErrorString(why.code))));
}

// Two events for timing on the context's stream (configuration time only).
struct event_pair {
  const nn_cuda_bundle& b;
  CUevent e0 = nullptr, e1 = nullptr;
  explicit event_pair(const nn_cuda_bundle& bundle) : b(bundle) {
    if (b.ev_create(&e0, CU_EVENT_DEFAULT) != CUDA_SUCCESS) e0 = nullptr;
    if (b.ev_create(&e1, CU_EVENT_DEFAULT) != CUDA_SUCCESS) e1 = nullptr;
  }
  event_pair(const event_pair&) = delete;
  event_pair& operator=(const event_pair&) = delete;
  ~event_pair() {
    if (e0) b.ev_destroy(e0);
    if (e1) b.ev_destroy(e1);
  }
  bool ok() const { return e0 != nullptr && e1 != nullptr; }
};

// The median over 5 runs (after 2 warm-up runs) of the device time of `run`, a cuDNN call
// enqueued on the stream, in ms; infinity where a call fails.
template <class F> float time_ms(const cuda_nn_context& cx, const event_pair& ev, F&& run) {
  constexpr float never = std::numeric_limits<float>::infinity();
  const nn_cuda_bundle& b = *cx.bundle;
  for (int i = 0; i < 2; ++i)
    if (run() != CUDNN_STATUS_SUCCESS) return never;
  std::array<float, 5> t{};
  for (float& ms : t) {
    if (b.ev_record(ev.e0, cx.stream) != CUDA_SUCCESS) return never;
    if (run() != CUDNN_STATUS_SUCCESS) return never;
    if (b.ev_record(ev.e1, cx.stream) != CUDA_SUCCESS || b.ev_sync(ev.e1) != CUDA_SUCCESS ||
        b.ev_elapsed(&ms, ev.e0, ev.e1) != CUDA_SUCCESS)
      return never;
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Times the legacy choice r (on the set geometry) and every graph plan for key with events on
// the stream, on zeroed temporary buffers; the fastest (r on a tie). r where nothing can be
// timed (no events, no plans, no room for the buffers).
find_result graph_measure(cuda_nn_context& cx, int dir, const nb::conv_call& g, int d,
                          const conv_key& key, const find_result& r) {
  if (!cx.bundle->has_events()) return r;
  const ng::plan_set* set = cx.graph_plans(graph_problem(dir, key));
  if (set == nullptr || set->plans.empty()) return r;
  uint64_t nx = 0, nw = 0, ny = 0;
  if (!conv_bytes(g, d, nx, nw, ny)) return r;
  const bool legacy = r.algorithm >= 0 && r.algorithm < algo_count[dir];
  uint64_t ws_max = legacy ? static_cast<uint64_t>(r.workspace) : 0;
  for (const auto& pl : set->plans)
    ws_max = std::max(ws_max, static_cast<uint64_t>(pl->workspace));
  temp_buffers t(cx);
  void* x = t.get(nx);
  void* w = x ? t.get(nw) : nullptr;
  void* y = w ? t.get(ny) : nullptr;
  if (y == nullptr) return r;
  void* ws = nullptr;
  if (ws_max > 0) {
    ws = t.get(ws_max);
    if (ws == nullptr) ws_max = 0; // time those that need no workspace
  }
  const event_pair ev(*cx.bundle);
  if (!ev.ok()) return r;
  float best = std::numeric_limits<float>::infinity();
  find_result out = r;
  if (legacy && static_cast<uint64_t>(r.workspace) <= ws_max)
    best = time_ms(cx, ev, [&] {
      return legacy_exec(cx, dir, static_cast<int>(r.algorithm), x, w, y, ws,
                         static_cast<size_t>(r.workspace));
    });
  const ng::api& api = cx.bundle->graph_api();
  for (size_t k = 0; k < set->plans.size(); ++k) {
    const ng::plan& pl = *set->plans[k];
    if (static_cast<uint64_t>(pl.workspace) > ws_max) continue;
    ng::binding bind;
    void* pws = pl.workspace > 0 ? ws : nullptr;
    const float ms =
        time_ms(cx, ev, [&] { return ng::execute(api, cx.dnn, pl, bind, x, w, y, pws).code; });
    if (ms < best) {
      best = ms;
      out = {graph_base + static_cast<int64_t>(k), pl.workspace, graph_numerics(pl)};
    }
  }
  return out;
}

// ---- the measured choices on disk ------------------------------------------------------------
// An entry's payload: six little-endian int64, {find_disk_format, direction, algorithm,
// workspace bytes, numerics (-1: numerics_of), the graph plan's cuDNN engine index (-1: not a
// plan)}. The key names the bundle, cuDNN's and the driver's versions, the device and the
// problem; a loaded entry is checked against this process's cuDNN before it is used (the plan
// number still names the same engine, the workspace is what cuDNN says it is), and refused
// entries are measured again and overwritten. docs/nn.md.
constexpr int64_t find_disk_format = 1;
constexpr size_t find_disk_fields = 6;

sdk::blob_cache::key_type find_disk_key(const cuda_nn_context& cx, int dir, const conv_key& k) {
  sdk::sha256 h;
  h.field("parenchyma-nn-cuda-find-v1")
      .field(cx.bundle->find_fingerprint)
      .field(cx.uuid)
      .field(cx.device_name)
      .field(sdk::str(dir, " ", k.dt, " ", k.N, " ", k.C, " ", k.H, " ", k.W, " ", k.K, " ", k.R,
                      " ", k.S, " ", k.sh, " ", k.sw, " ", k.ph, " ", k.pw, " ", k.dh, " ", k.dw,
                      " ", k.G, " ", k.math));
  return h.finish();
}

// Why a loaded choice cannot be used here (empty: it can); r gets its numerics.
std::string find_entry_problem(cuda_nn_context& cx, int dir, const conv_key& key,
                               const int64_t (&f)[find_disk_fields], find_result& r) {
  if (f[0] != find_disk_format) return sdk::str("format ", f[0], ", not ", find_disk_format);
  if (f[1] != dir) return sdk::str("made for direction ", f[1], ", not ", dir);
  r = {f[2], f[3], f[4]};
  if (r.numerics != -1 && r.numerics != PCY_NN_NUMERICS_DIRECT &&
      r.numerics != PCY_NN_NUMERICS_TRANSFORM)
    return sdk::str("numerics ", r.numerics);
  if (r.workspace < 0) return sdk::str("a workspace of ", r.workspace, " bytes");
  if (r.algorithm == own_algorithm) return r.workspace == 0 ? "" : "a workspace for our kernel";
  if (is_graph(r.algorithm)) {
    const find_result p = graph_plan(cx, dir, key, r.algorithm - graph_base);
    if (p.algorithm < 0)
      return sdk::str("graph plan ", r.algorithm - graph_base, " is not made here");
    const ng::plan_set& set = *cx.graph_plans(graph_problem(dir, key));
    const ng::plan& pl = *set.plans[static_cast<size_t>(r.algorithm - graph_base)];
    if (pl.engine_index != f[5])
      return sdk::str("graph plan ", r.algorithm - graph_base, " is engine ", pl.engine_index,
                      " here, not ", f[5]);
    if (p.workspace != r.workspace)
      return sdk::str("graph plan ", r.algorithm - graph_base, " needs ", p.workspace,
                      " bytes here, not ", r.workspace);
    r.numerics = p.numerics;
    return {};
  }
  if (r.algorithm < 0 || r.algorithm >= algo_count[dir])
    return sdk::str("algorithm ", r.algorithm, " is not one of cuDNN's");
  size_t bytes = 0;
  if (workspace_size(cx, dir, static_cast<int>(r.algorithm), bytes) != CUDNN_STATUS_SUCCESS)
    return sdk::str("cuDNN's algorithm ", r.algorithm, " does not run these shapes here");
  if (bytes != static_cast<uint64_t>(r.workspace))
    return sdk::str("cuDNN's algorithm ", r.algorithm, " needs ", bytes, " bytes here, not ",
                    r.workspace);
  return {};
}

// The choice saved by an earlier process, if there is one and it holds here.
std::optional<find_result> find_from_disk(cuda_nn_context& cx, int dir, const conv_key& key,
                                          const sdk::blob_cache::key_type& dk) {
  sdk::blob_cache& disk = cx.bundle->find_disk;
  if (!disk.enabled()) return std::nullopt;
  const std::optional<sdk::blob_cache::blob> data = disk.load(dk);
  if (!data) return std::nullopt;
  std::string why;
  find_result r;
  if (data->size() != find_disk_fields * 8) {
    why = sdk::str(data->size(), " bytes, not ", find_disk_fields * 8);
  } else {
    int64_t f[find_disk_fields];
    for (size_t i = 0; i < find_disk_fields; ++i)
      f[i] = static_cast<int64_t>(sdk::detail::get_le(data->data() + 8 * i, 8));
    why = find_entry_problem(cx, dir, key, f, r);
  }
  if (!why.empty()) {
    cx.bundle->debug("convolution algorithm: ", disk.path(dk), " ignored (", why,
                     "); measuring again");
    return std::nullopt;
  }
  cx.bundle->debug("convolution algorithm ", r.algorithm, " of ", direction_name[dir], " from ",
                   disk.path(dk));
  return r;
}

void find_to_disk(cuda_nn_context& cx, int dir, const conv_key& key,
                  const sdk::blob_cache::key_type& dk, const find_result& r) {
  sdk::blob_cache& disk = cx.bundle->find_disk;
  if (!disk.writable()) return;
  int64_t engine = -1;
  if (is_graph(r.algorithm)) {
    // the plan's engine, so that a later process can tell that plan k is still the same one
    const ng::plan_set* set = cx.graph_plans(graph_problem(dir, key));
    const size_t k = static_cast<size_t>(r.algorithm - graph_base);
    if (set == nullptr || k >= set->plans.size()) return;
    engine = set->plans[k]->engine_index;
  }
  const int64_t f[find_disk_fields] = {find_disk_format, dir,        r.algorithm,
                                       r.workspace,      r.numerics, engine};
  sdk::blob_cache::blob payload(find_disk_fields * 8);
  for (size_t i = 0; i < find_disk_fields; ++i)
    sdk::detail::put_le(payload.data() + 8 * i, static_cast<uint64_t>(f[i]), 8);
  disk.store_later(dk, std::move(payload));
}

struct conv_algorithm_op {
  template <pcy_dtype D> static void run(cuda_nn_context& cx, const sdk::op_args& a) {
    constexpr int d = index_of(D);
    const nb::conv_algorithm_call c = nb::decode_conv_algorithm(a, D);
    const int dir = static_cast<int>(c.direction);
    const int64_t req = c.requested;
    const nb::conv_call& g = c.g;
    const bool empty = g.N == 0 || g.C == 0 || g.H == 0 || g.W == 0 || g.K == 0;
    int_conv_geometry(g, pcy_nn_convolution_algorithm_schema);
    if (req >= algo_count[dir] && req != own_algorithm && !is_graph(req))
      sdk::fail(PCY_ERR_UNSUPPORTED,
                sdk::str("nn.convolution_algorithm: argument requested: no algorithm ", req,
                         " for ", direction_name[dir], " (cuDNN's are 0..", algo_count[dir] - 1,
                         ", its graph API's plans ", graph_base, "..",
                         graph_base + ng::max_plans - 1, ", parenchyma's direct kernel is ",
                         own_algorithm, ")"));
    find_result r{own_algorithm, 0};
    if (cx.dnn == nullptr) {
      if (req >= 0 && req != own_algorithm && req != 0)
        sdk::fail(PCY_ERR_UNSUPPORTED,
                  sdk::str("nn.convolution_algorithm: algorithm ", req,
                           " is cuDNN's, and cuDNN is not in use here (", cx.dnn_reason,
                           "); parenchyma's direct kernel is ", own_algorithm));
    } else if (req == own_algorithm) {
      // our kernel, no workspace
    } else if (empty) {
      // The ops write zeros without cuDNN for empty shapes: nothing to measure.
      r = {req >= 0 ? req : 0, 0};
    } else {
      cx.current();
      const conv_key key = key_of(cx, d, g);
      const cudnnStatus_t s = is_graph(req) ? CUDNN_STATUS_SUCCESS : cx.set_geometry(key);
      if (is_graph(req)) {
        r = graph_explicit(cx, dir, key, req);
      } else if (s != CUDNN_STATUS_SUCCESS) {
        if (req > 0)
          sdk::fail(PCY_ERR_UNSUPPORTED,
                    sdk::str("nn.convolution_algorithm: cuDNN refuses these shapes (",
                             cx.api().cudnnGetErrorString(s), "); algorithm ", req,
                             " cannot run them"));
        // -1, -2: the graph API's first plan, else (and 0) our kernel
        if (req < 0)
          if (const find_result f = graph_plan(cx, dir, key, 0); f.algorithm >= 0) r = f;
      } else if (req >= 0) {
        size_t bytes = 0;
        const cudnnStatus_t ws = req < algo_count[dir]
                                     ? workspace_size(cx, dir, static_cast<int>(req), bytes)
                                     : CUDNN_STATUS_NOT_SUPPORTED;
        if (ws != CUDNN_STATUS_SUCCESS) {
          if (req != 0)
            sdk::fail(PCY_ERR_UNSUPPORTED,
                      sdk::str("nn.convolution_algorithm: cuDNN algorithm ", req, " of ",
                               direction_name[dir], " cannot run these shapes (",
                               cx.api().cudnnGetErrorString(ws),
                               "; this bundle's algorithms: ", algorithm_list[dir], ")"));
          r = {own_algorithm, 0}; // the default falls back to our kernel
        } else {
          r = {req, static_cast<int64_t>(bytes)};
        }
      } else if (req == -2) {
        r = graph_plan(cx, dir, key, 0);
        if (r.algorithm < 0) r = heuristic(cx, dir);
      } else {
        const find_key fk{dir, key, cx.uuid};
        std::lock_guard lock(cx.bundle->find_mutex);
        const auto it = cx.bundle->find_cache.find(fk);
        if (it != cx.bundle->find_cache.end()) {
          r = it->second;
        } else {
          const sdk::blob_cache::key_type dk = find_disk_key(cx, dir, key);
          if (const std::optional<find_result> f = find_from_disk(cx, dir, key, dk)) {
            r = *f;
          } else {
            r = graph_measure(cx, dir, g, d, key, measure(cx, dir, g, d));
            find_to_disk(cx, dir, key, dk, r);
          }
          cx.bundle->find_cache.emplace(fk, r);
        }
      }
    }
    // The result is device memory: a blocking write (configuration time).
    int64_t out[3] = {r.algorithm, r.workspace,
                      r.numerics >= 0 ? r.numerics : numerics_of(dir, r.algorithm)};
    pcy_memory_transfer_args w{};
    w.struct_size = sizeof w;
    w.queue = a.queue();
    w.memory = c.result->memory;
    w.offset = c.result->byte_offset;
    w.host_pointer = out;
    w.bytes = c.result_count * sizeof out[0];
    w.blocking = true;
    sdk::check(cx.fw->memory_write(&w));
  }
};

// ---- the bundle's setup -------------------------------------------------------------------

nn_cuda_bundle::nn_cuda_bundle(const pcy_host_services& host)
    : bundle_base(host), find_disk(host.cache_dir, "cudnn-find", log_) {
  if (const char* m = settings_.find("PARENCHYMA_NN_MATH")) {
    const std::string v = m;
    if (v == "tf32")
      tf32_ = true;
    else if (v != "strict")
      log_.warn("PARENCHYMA_NN_MATH=", v, " is not 'strict' or 'tf32'; using strict");
  }
  if (!load_driver()) {
    log_.info(reason_);
    return; // loads, serves no op, says why
  }
  load_cudnn();
  register_ops();
}

bool nn_cuda_bundle::load_driver() {
  reason_ = driver.load();
  if (!reason_.empty()) return false;
    // Optional: the timing of the graph plans. The names as cuda.h maps them (cuEventDestroy is
    // cuEventDestroy_v2, ...), so each symbol matches its declared type.
#define PARENCHYMA_NAME(f) #f
#define PARENCHYMA_CU_NAME(f) PARENCHYMA_NAME(f)
  ev_create = driver.symbol<decltype(ev_create)>(PARENCHYMA_CU_NAME(cuEventCreate));
  ev_destroy = driver.symbol<decltype(ev_destroy)>(PARENCHYMA_CU_NAME(cuEventDestroy));
  ev_record = driver.symbol<decltype(ev_record)>(PARENCHYMA_CU_NAME(cuEventRecord));
  ev_sync = driver.symbol<decltype(ev_sync)>(PARENCHYMA_CU_NAME(cuEventSynchronize));
  ev_elapsed = driver.symbol<decltype(ev_elapsed)>(PARENCHYMA_CU_NAME(cuEventElapsedTime));
#undef PARENCHYMA_CU_NAME
#undef PARENCHYMA_NAME
  if (!ev_create || !ev_destroy || !ev_record || !ev_sync || !ev_elapsed)
    ev_create = nullptr, ev_destroy = nullptr, ev_record = nullptr, ev_sync = nullptr,
    ev_elapsed = nullptr;
  return true;
}

void nn_cuda_bundle::load_cudnn() {
  const sdk::cuda_library lib =
      sdk::open_cuda_library(settings_, {"libcudnn.so.9", "libcudnn.so"}, {"libcudnn.so.9"});
  dnn_lib_ = lib.handle;
  dnn_soname_ = lib.soname;
  const std::string& first_error = lib.first_error;
  std::string why;
  if (dnn_lib_ == nullptr) {
    why = sdk::str("libcudnn.so.9 not found (", first_error, ")");
  } else {
#define PARENCHYMA_RESOLVE(f)                                                                      \
  if (why.empty()) {                                                                               \
    dnn_.f = reinterpret_cast<decltype(dnn_.f)>(dlsym(dnn_lib_, #f));                              \
    if (dnn_.f == nullptr) why = sdk::str(dnn_soname_, " lacks ", #f);                             \
  }
    PARENCHYMA_CUDNN_FUNCTIONS(PARENCHYMA_RESOLVE)
#undef PARENCHYMA_RESOLVE
    if (why.empty()) {
      const size_t v = dnn_.cudnnGetVersion();
      dnn_version_ = sdk::str(v / 10000, ".", (v % 10000) / 100, ".", v % 100);
      if (v < 90000 || v >= 100000)
        why = sdk::str(dnn_soname_, " is cuDNN ", dnn_version_, ", not 9");
      int driver_version = 0;
      using get_version = CUresult (*)(int*);
      if (auto f = driver.symbol<get_version>("cuDriverGetVersion")) f(&driver_version);
      find_fingerprint = sdk::str("cudnn ", v, " driver ", driver_version);
    }
    if (!why.empty()) dnn_lib_ = nullptr; // left loaded: unloading cuDNN early is not safe
  }
  if (why.empty()) {
    // The graph API (the backend functions of the same library) is optional: without it the
    // legacy algorithms serve alone.
    if (const char* missing = graph_.load(dnn_lib_))
      graph_reason_ = sdk::str(dnn_soname_, " lacks ", missing, " (cuDNN's graph API)");
  } else {
    graph_reason_ = "cuDNN is not in use";
  }
  if (!graph_reason_.empty() && why.empty())
    log_.info("cuDNN's graph API is not used: ", graph_reason_,
              "; convolutions use the legacy algorithms only");
  if (!why.empty()) {
    reason_ = sdk::str("cuDNN is not used: ", why,
                       "; convolutions run on parenchyma's direct CUDA kernels (slower); install "
                       "cuDNN 9 or add its directory to LD_LIBRARY_PATH");
    log_.info(reason_);
  } else {
    log_.debug("cuDNN ", dnn_version_, " from ", dnn_soname_);
  }
}

void nn_cuda_bundle::register_ops() {
  const std::string own = "parenchyma CUDA C kernel";
  const std::string conv =
      has_cudnn() ? sdk::str("cuDNN ", dnn_version_, " (", dnn_soname_, ") legacy convolution API",
                             has_graph() ? " and graph API plans (algorithms 1000+)" : "",
                             "; parenchyma direct kernel as algorithm 100")
                  : sdk::str("parenchyma CUDA C direct convolution (", reason_, ")");
  add<act_op<pcy_nn_sigmoid_schema, 0, false>>(pcy_nn_sigmoid_schema, true, own + " sigmoid_fwd");
  add<act_op<pcy_nn_sigmoid_pointwise_schema, 0, false>>(pcy_nn_sigmoid_pointwise_schema, true,
                                                         own + " sigmoid_fwd");
  add<act_op<pcy_nn_sigmoid_grad_schema, 0, true>>(pcy_nn_sigmoid_grad_schema, true,
                                                   own + " sigmoid_bwd");
  add<act_op<pcy_nn_sigmoid_pointwise_grad_schema, 0, true>>(pcy_nn_sigmoid_pointwise_grad_schema,
                                                             true, own + " sigmoid_bwd");
  add<act_op<pcy_nn_relu_schema, 1, false>>(pcy_nn_relu_schema, true, own + " relu_fwd");
  add<act_op<pcy_nn_relu_pointwise_schema, 1, false>>(pcy_nn_relu_pointwise_schema, true,
                                                      own + " relu_fwd");
  add<act_op<pcy_nn_relu_grad_schema, 1, true>>(pcy_nn_relu_grad_schema, true, own + " relu_bwd");
  add<act_op<pcy_nn_relu_pointwise_grad_schema, 1, true>>(pcy_nn_relu_pointwise_grad_schema, true,
                                                          own + " relu_bwd");
  add<act_op<pcy_nn_tanh_schema, 2, false>>(pcy_nn_tanh_schema, true, own + " tanh_fwd");
  add<act_op<pcy_nn_tanh_pointwise_schema, 2, false>>(pcy_nn_tanh_pointwise_schema, true,
                                                      own + " tanh_fwd");
  add<act_op<pcy_nn_tanh_grad_schema, 2, true>>(pcy_nn_tanh_grad_schema, true, own + " tanh_bwd");
  add<act_op<pcy_nn_tanh_pointwise_grad_schema, 2, true>>(pcy_nn_tanh_pointwise_grad_schema, true,
                                                          own + " tanh_bwd");
  add<act_op<pcy_nn_elu_schema, 3, false>>(pcy_nn_elu_schema, true, own + " elu_fwd");
  add<act_op<pcy_nn_elu_pointwise_schema, 3, false>>(pcy_nn_elu_pointwise_schema, true,
                                                     own + " elu_fwd");
  add<act_op<pcy_nn_elu_grad_schema, 3, true>>(pcy_nn_elu_grad_schema, true, own + " elu_bwd");
  add<act_op<pcy_nn_elu_pointwise_grad_schema, 3, true>>(pcy_nn_elu_pointwise_grad_schema, true,
                                                         own + " elu_bwd");
  add<softmax_op<pcy_nn_softmax_schema, 0>>(pcy_nn_softmax_schema, true, own + " softmax");
  add<softmax_op<pcy_nn_log_softmax_schema, 1>>(pcy_nn_log_softmax_schema, true,
                                                own + " log_softmax");
  add<softmax_op<pcy_nn_softmax_grad_schema, 2>>(pcy_nn_softmax_grad_schema, true,
                                                 own + " softmax_grad");
  add<softmax_op<pcy_nn_log_softmax_grad_schema, 3>>(pcy_nn_log_softmax_grad_schema, true,
                                                     own + " log_softmax_grad");
  add<conv_op<0>>(pcy_nn_convolution_schema, true, conv + " forward");
  add<conv_op<1>>(pcy_nn_convolution_grad_data_schema, true, conv + " backward data");
  add<conv_op<2>>(pcy_nn_convolution_grad_filter_schema, true, conv + " backward filter");
  add<bias_op>(pcy_nn_convolution_bias_schema, true, own + " bias_add");
  add<bias_grad_op>(pcy_nn_convolution_grad_bias_schema, true, own + " bias_grad");
  add<conv_algorithm_op>(pcy_nn_convolution_algorithm_schema, true,
                         has_cudnn()
                             ? (has_graph() ? "cudnnFind*AlgorithmEx / cudnnGet*Algorithm_v7 "
                                              "+ graph API heuristics, plans timed, the choices "
                                              "kept on disk"
                                            : "cudnnFind*AlgorithmEx / cudnnGet*Algorithm_v7, "
                                              "the choices kept on disk")
                             : "parenchyma direct kernel only (no cuDNN)");
  add<pool_max_op<pcy_nn_pooling_max_schema, false>>(pcy_nn_pooling_max_schema, true,
                                                     own + " pool_max");
  add<pool_max_op<pcy_nn_pooling_max_indexed_schema, true>>(pcy_nn_pooling_max_indexed_schema, true,
                                                            own + " pool_max");
  add<pool_max_grad_op>(pcy_nn_pooling_max_grad_schema, true, own + " pool_max + gather");
  add<pool_max_grad_indexed_op>(pcy_nn_pooling_max_grad_indexed_schema, true,
                                own + " pool_scatter (atomics)");
  add<pool_avg_op<pcy_nn_pooling_avg_schema, false>>(pcy_nn_pooling_avg_schema, true,
                                                     own + " pool_avg");
  add<pool_avg_op<pcy_nn_pooling_avg_grad_schema, true>>(pcy_nn_pooling_avg_grad_schema, true,
                                                         own + " pool_avg_grad");
  add<lrn_op<pcy_nn_lrn_schema, false>>(pcy_nn_lrn_schema, false, own + " lrn_fwd");
  add<lrn_op<pcy_nn_lrn_grad_schema, true>>(pcy_nn_lrn_grad_schema, false, own + " lrn_bwd");
  add<dropout_op<pcy_nn_dropout_schema, false>>(pcy_nn_dropout_schema, false,
                                                own + " dropout_fwd (splitmix64)");
  add<dropout_op<pcy_nn_dropout_grad_schema, true>>(pcy_nn_dropout_grad_schema, false,
                                                    own + " dropout_bwd");
  add<norm_op<pcy_nn_layer_norm_schema, true>>(pcy_nn_layer_norm_schema, true,
                                               own + " norm_fwd (a block per row)");
  add<norm_op<pcy_nn_layer_norm_grad_schema, true>>(pcy_nn_layer_norm_grad_schema, true,
                                                    own + " norm_bwd_row + norm_bwd_cols");
  add<norm_op<pcy_nn_rms_norm_schema, false>>(pcy_nn_rms_norm_schema, true,
                                              own + " norm_fwd (a block per row)");
  add<norm_op<pcy_nn_rms_norm_grad_schema, false>>(pcy_nn_rms_norm_grad_schema, true,
                                                   own + " norm_bwd_row + norm_bwd_cols");
  add<xent_op<pcy_nn_cross_entropy_schema>>(pcy_nn_cross_entropy_schema, true,
                                            own + " xent_fwd (a block per row) + xent_reduce");
  add<xent_op<pcy_nn_cross_entropy_grad_schema>>(pcy_nn_cross_entropy_grad_schema, true,
                                                 own + " xent_scale + xent_bwd (a block per row)");
  add<bn_op<pcy_nn_batch_norm_schema>>(pcy_nn_batch_norm_schema, true,
                                       own + " bn_part + bn_stats (chunked sums) + bn_apply");
  add<bn_op<pcy_nn_batch_norm_grad_schema>>(pcy_nn_batch_norm_grad_schema, true,
                                            own + " bn_part + bn_stats (chunked sums) + bn_dx");
  add<embedding_op<pcy_nn_embedding_schema>>(pcy_nn_embedding_schema, true,
                                             own + " emb_fwd (a gather)");
  add<embedding_op<pcy_nn_embedding_grad_schema>>(
      pcy_nn_embedding_grad_schema, true,
      own + " emb_keys + bitonic emb_sort_local / emb_sort_global + emb_rows (no atomics)");
}

cuda_nn_context* nn_cuda_bundle::create_context(const pcy_bundle_context_args& a) {
  if (!driver.loaded()) sdk::fail(PCY_ERR_UNAVAILABLE, reason_);
  sdk::require_slots(*a.framework, bundle_name,
                     {PCY_FRAMEWORK_SLOT_native_handle, PCY_FRAMEWORK_SLOT_memory_alloc,
                      PCY_FRAMEWORK_SLOT_memory_free, PCY_FRAMEWORK_SLOT_memory_fill,
                      PCY_FRAMEWORK_SLOT_memory_write, PCY_FRAMEWORK_SLOT_queue_finish,
                      PCY_FRAMEWORK_SLOT_program_build, PCY_FRAMEWORK_SLOT_kernel_create,
                      PCY_FRAMEWORK_SLOT_kernel_launch});
  auto cx = std::make_unique<cuda_nn_context>(a, *this, driver);
  // No properties: fp64, 1024 blocks, no UUID (the cache then keys on the index).
  const sdk::device_facts dev = sdk::device_facts_of(a);
  cx->fp64 = dev.fp64;
  if (dev.compute_units > 0) {
    cx->max_blocks = static_cast<uint64_t>(dev.compute_units) * 16;
    cx->stream_blocks = static_cast<uint64_t>(dev.compute_units) * 256;
  }
  cx->uuid = dev.uuid.empty() ? sdk::str("device#", a.plugin_device) : dev.uuid;
  cx->device_name = dev.name;
  build_kernels(*cx);
  setup_cudnn(*cx);
  return cx.release();
}

// Our kernels, once per context (the framework caches the cubin on disk). Without them the
// context serves nothing: it fails, so the host routes the ops elsewhere with this reason.
void nn_cuda_bundle::build_kernels(cuda_nn_context& cx) const {
  sdk::device_context::build_failure failed;
  bool cache_hit = false;
  const pcy_program program = cx.build(nn_cuda::kernel_source(), nullptr, &failed, &cache_hit);
  if (program == nullptr)
    sdk::fail(failed.code, sdk::str("nn_cuda: building our CUDA kernels failed: ", failed.message));
  log_.debug("built the NN CUDA kernels", cache_hit ? " (from the cache)" : "");
  for (int d = 0; d < 4; ++d)
    for (int id = 0; id < K_COUNT; ++id)
      if (kernel_exists(id, d))
        cx.k[d][id] = cx.kernel(program, sdk::str(kernel_names[id], "_", suffix[d]).c_str());
  for (int d = 0; d < 4; ++d)
    for (int m = 0; m < 4; ++m)
      for (int v = 0; v < softmax_variants; ++v)
        cx.softmax_reg[d][m][v] =
            cx.kernel(program, sdk::str(softmax_mode[m], "_r", v, "_", suffix[d]).c_str());
}

// cuDNN's handle and descriptors, once per context; without them the convolutions run on our
// kernels and the context says why.
void nn_cuda_bundle::setup_cudnn(cuda_nn_context& cx) const {
  if (!has_cudnn()) {
    cx.dnn_reason = reason_;
    return;
  }
  cx.current();
  cudnnHandle_t h = nullptr;
  cudnnStatus_t s = dnn_.cudnnCreate(&h);
  if (s != CUDNN_STATUS_SUCCESS) {
    cx.dnn_reason = sdk::str("cudnnCreate failed: ", dnn_.cudnnGetErrorString(s));
    log_.warn(cx.dnn_reason, "; convolutions on ", cx.device_name,
              " run on parenchyma's direct kernels");
    return;
  }
  cx.dnn = h;
  const char* what = "cudnnSetStream";
  s = dnn_.cudnnSetStream(h, cx.stream);
  if (s == CUDNN_STATUS_SUCCESS) {
    what = "cudnnCreateTensorDescriptor";
    s = dnn_.cudnnCreateTensorDescriptor(&cx.xd);
  }
  if (s == CUDNN_STATUS_SUCCESS) s = dnn_.cudnnCreateTensorDescriptor(&cx.yd);
  if (s == CUDNN_STATUS_SUCCESS) {
    what = "cudnnCreateFilterDescriptor";
    s = dnn_.cudnnCreateFilterDescriptor(&cx.wd);
  }
  if (s == CUDNN_STATUS_SUCCESS) {
    what = "cudnnCreateConvolutionDescriptor";
    s = dnn_.cudnnCreateConvolutionDescriptor(&cx.cd);
  }
  if (s != CUDNN_STATUS_SUCCESS) {
    cx.dnn_reason = sdk::str(what, " failed: ", dnn_.cudnnGetErrorString(s));
    log_.warn(cx.dnn_reason, "; convolutions run on parenchyma's direct kernels");
    if (cx.xd) dnn_.cudnnDestroyTensorDescriptor(cx.xd);
    if (cx.yd) dnn_.cudnnDestroyTensorDescriptor(cx.yd);
    if (cx.wd) dnn_.cudnnDestroyFilterDescriptor(cx.wd);
    cx.xd = cx.yd = nullptr;
    cx.wd = nullptr;
    dnn_.cudnnDestroy(h);
    cx.dnn = nullptr;
  }
}

} // namespace

PCY_BUNDLE_PLUGIN(nn_cuda_bundle)
