// N1-N4, N6 and the half-precision cells on a CUDA GPU: the CUDA NN bundle through the front-end
// (parenchyma/nn.hpp) on the backend's stream, timed with CUDA events on that stream, interleaved
// with a peer in the same process (tools/bench/harness.hpp):
//   - convolution forward / grad_data / grad_filter against cuDNN called directly (loaded at run
//     time, libcudnn.so.9) with the algorithm the Convolution chose, on the same stream and
//     buffers: strict fp32, TF32 (math_mode::tf32), f16 and bf16;
//   - the elementwise ops and their gradients, dropout, softmax, pooling and LRN against a device
//     copy (cuMemcpyDtoDAsync) moving the same bytes (the bandwidth ceiling);
//   - one training step of the demo network at batch 4096 on 8x8 inputs (absolute time; its
//     peer is PyTorch: tools/bench/nn/n_torch.py, joined by tools/bench/nn/compare.py).
// A cell the bundle does not serve on the device is printed "unavailable: reason" and skipped.
//   bench_nn_cuda [--quick]      (prints the table, writes $PARENCHYMA_BENCH_OUT/n_cuda_nn.json)
#include "demo_step.hpp"
#include "harness.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/nn.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cuda.h>
#if __has_include(<cudnn.h>)
#include <cudnn.h>
// The bundle's graph-API helpers: its algorithms 1000 + k are plans built by them, so the peer
// builds the same plan list on its own handle and executes plan k directly.
#include "../../../extensions/nn/cuda/cudnn_graph.hpp"
#define PCY_BENCH_CUDNN 1
#else
#define PCY_BENCH_CUDNN 0
#endif

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace parenchyma;
namespace nn = parenchyma::nn;

namespace {

void cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    cuGetErrorString(r, &s);
    throw std::runtime_error(std::string(what) + " failed: " + (s ? s : "?"));
  }
}

std::mt19937 rng{7};
template <class T> SharedTensor<T> tensor(std::vector<int64_t> shape, float scale = 1) {
  SharedTensor<T> t(std::move(shape));
  std::uniform_real_distribution<float> u(-scale, scale);
  for (T& v : t.write_only())
    v = static_cast<T>(u(rng));
  return t;
}
template <class T> SharedTensor<T> constant(std::vector<int64_t> shape, float value) {
  SharedTensor<T> t(std::move(shape));
  for (T& v : t.write_only())
    v = static_cast<T>(value);
  return t;
}
template <class T> const char* dname() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  if constexpr (std::is_same_v<T, f16>) return "f16";
  return "bf16";
}

// Throws (a reason to print) unless the op runs on the backend's own framework.
template <const pcy_op_schema& S> std::string served(const Backend& b, pcy_dtype t) {
  const OpRoute r = b.route(ext::op_key<S>(t));
  if (r.fallback || r.framework != b.framework().name())
    throw std::runtime_error(std::string("nn.") + S.name + " (" + ext::dtype_name(t) +
                             ") would run on " + r.framework + " (fallback), not on " + b.name());
  return r.implementation;
}

struct row {
  std::string name, peer = "none";
  double peer_ns = 0, ours_ns = 0, ratio = 0, p10 = 0, p90 = 0, delta = 0, bytes = 0, flops = 0;
};

struct gpu {
  const Backend& b;
  CUstream stream = nullptr;
  CUevent e0 = nullptr, e1 = nullptr;
  CUdeviceptr scratch_a = 0, scratch_b = 0;
  size_t scratch_bytes = 0;
  int reps = 21;
  bench::suite s{"n_cuda_nn"};
  std::vector<row> absolute;
  std::vector<std::pair<std::string, std::string>> unavailable;

  explicit gpu(const Backend& backend) : b(backend) {
    stream = static_cast<CUstream>(b.native(PCY_NATIVE_QUEUE));
    cu(cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
    cu(cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
    scratch_bytes = size_t(512) << 20;
    cu(cuMemAlloc(&scratch_a, scratch_bytes), "cuMemAlloc");
    cu(cuMemAlloc(&scratch_b, scratch_bytes), "cuMemAlloc");
    cu(cuMemsetD8Async(scratch_a, 1, scratch_bytes, stream), "cuMemsetD8Async");
  }
  ~gpu() {
    cuMemFree(scratch_a);
    cuMemFree(scratch_b);
    cuEventDestroy(e0);
    cuEventDestroy(e1);
  }
  // ns per call of `inner` calls of f, measured with events on the backend's stream.
  double time(const std::function<void()>& f, int inner) {
    cu(cuEventRecord(e0, stream), "cuEventRecord");
    for (int i = 0; i < inner; ++i)
      f();
    cu(cuEventRecord(e1, stream), "cuEventRecord");
    cu(cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    cu(cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    return double(ms) * 1e6 / inner;
  }
  // Calls per sample so that a sample lasts about 2 ms (after one untimed call).
  int inner_for(const std::function<void()>& f) {
    f();
    const double ns = time(f, 1);
    return std::clamp(static_cast<int>(2e6 / std::max(ns, 1.0)), 1, 200);
  }
  // The ceiling: a device copy moving `bytes` in all (bytes / 2 read, bytes / 2 written).
  std::function<void()> copy_of(double bytes) {
    const size_t n = std::min(static_cast<size_t>(bytes / 2), scratch_bytes);
    return [this, n] { cu(cuMemcpyDtoDAsync(scratch_b, scratch_a, n, stream), "copy"); };
  }
  void skip(const std::string& name, const std::string& why) {
    std::printf("%-44s unavailable: %s\n", name.c_str(), why.c_str());
    std::fflush(stdout);
    unavailable.emplace_back(name, why);
  }
  // A case with a peer; f and g are run once first, outside the timing.
  void pair(const std::string& name, const char* peer_label, const std::function<void()>& peer,
            const std::function<void()>& ours, double bytes = 0, double flops = 0) {
    try {
      peer();
      const int inner = inner_for(ours);
      bench::options o{.reps = reps, .inner = 1, .warmup = 2, .bytes = bytes, .flops = flops};
      s.compare_sampled(
          name, [&] { return time(peer, inner); }, [&] { return time(ours, inner); }, o,
          peer_label);
    } catch (const std::exception& e) {
      skip(name, e.what());
    }
  }
  void copy_pair(const std::string& name, double bytes, const std::function<void()>& ours) {
    pair(name, "memcpy", copy_of(bytes), ours, bytes);
  }
  // A case timed alone (medians of `reps` samples).
  void alone(const std::string& name, const std::function<void()>& ours, double flops = 0) {
    try {
      const int inner = inner_for(ours);
      time(ours, inner);
      std::vector<double> t;
      for (int i = 0; i < reps; ++i)
        t.push_back(time(ours, inner));
      row r;
      r.name = name;
      r.ours_ns = bench::percentile(t, 0.5);
      r.p10 = bench::percentile(t, 0.1);
      r.p90 = bench::percentile(t, 0.9);
      r.flops = flops;
      std::printf("%-44s parenchyma %12.1f ns  [p10 %.1f p90 %.1f]\n", name.c_str(), r.ours_ns,
                  r.p10, r.p90);
      std::fflush(stdout);
      absolute.push_back(r);
    } catch (const std::exception& e) {
      skip(name, e.what());
    }
  }
  CUdeviceptr ptr(const TensorStorage& t) const {
    return reinterpret_cast<CUdeviceptr>(b.native_memory(t));
  }

  void write() {
    const char* dir = std::getenv("PARENCHYMA_BENCH_OUT");
    const std::string path = std::string(dir && *dir ? dir : ".") + "/n_cuda_nn.json";
    std::vector<row> rows;
    for (const bench::result& r : s.results())
      rows.push_back({r.name, r.peer_label, r.peer_ns, r.ours_ns, r.ratio, r.p10, r.p90, r.delta_ns,
                      r.bytes, r.flops});
    rows.insert(rows.end(), absolute.begin(), absolute.end());
    std::ofstream os(path);
    os << "{\n  \"suite\": \"n_cuda_nn\",\n  \"meta\": {";
    for (size_t i = 0; i < meta.size(); ++i)
      os << (i ? ", " : "") << "\"" << esc(meta[i].first) << "\": \"" << esc(meta[i].second)
         << "\"";
    os << "},\n  \"results\": [\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      os << "    {\"name\": \"" << esc(r.name) << "\", \"peer\": \"" << esc(r.peer)
         << "\", \"ours\": \"parenchyma\", \"peer_ns\": " << r.peer_ns
         << ", \"ours_ns\": " << r.ours_ns << ", \"ratio\": " << r.ratio
         << ", \"ratio_p10\": " << (r.peer_ns > 0 ? r.p10 : 0)
         << ", \"ratio_p90\": " << (r.peer_ns > 0 ? r.p90 : 0) << ", \"delta_ns\": " << r.delta
         << ", \"bytes\": " << r.bytes << ", \"flops\": " << r.flops
         << (r.peer_ns > 0 ? ""
                           : ", \"ours_p10_ns\": " + std::to_string(r.p10) +
                                 ", \"ours_p90_ns\": " + std::to_string(r.p90))
         << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    os << "  ],\n  \"unavailable\": [";
    for (size_t i = 0; i < unavailable.size(); ++i)
      os << (i ? ", " : "") << "{\"name\": \"" << esc(unavailable[i].first) << "\", \"reason\": \""
         << esc(unavailable[i].second) << "\"}";
    os << "]\n}\n";
    std::printf("wrote %s\n", path.c_str());
  }
  std::vector<std::pair<std::string, std::string>> meta;
  static std::string esc(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      if (c == '\n') {
        o += "\\n";
        continue;
      }
      o += c;
    }
    return o;
  }
};

// ---- N1: elementwise and their gradients; dropout ------------------------------------------

template <class T> void elementwise(gpu& g) {
  const int64_t n = int64_t(64) << 20;
  const std::string sz = std::string(" 64M ") + dname<T>();
  const double B = double(n) * sizeof(T);
  auto x = tensor<T>({n}), dy = tensor<T>({n});
  SharedTensor<T> y({n}), dx({n});
  using act_fn = void (*)(const Backend&, const TensorStorage&, TensorStorage&);
  using grad_fn =
      void (*)(const Backend&, const TensorStorage&, const TensorStorage&, TensorStorage&);
  struct act {
    const char* name;
    act_fn f;
    grad_fn grad;
    std::string (*served)(const Backend&, pcy_dtype);
  };
  for (const act& a :
       {act{"relu", &nn::relu, &nn::relu_grad, &served<pcy_nn_relu_schema>},
        act{"sigmoid", &nn::sigmoid, &nn::sigmoid_grad, &served<pcy_nn_sigmoid_schema>},
        act{"tanh", &nn::tanh, &nn::tanh_grad, &served<pcy_nn_tanh_schema>}}) {
    try {
      a.served(g.b, SharedTensor<T>::dtype);
    } catch (const std::exception& e) {
      g.skip(a.name + sz, e.what());
      continue;
    }
    g.copy_pair(a.name + sz, 2 * B, [&] { a.f(g.b, x, y); });
    try {
      a.f(g.b, x, y); // the gradient's y
    } catch (const std::exception& e) {
      g.skip(std::string(a.name) + "_grad" + sz, e.what());
      continue;
    }
    g.copy_pair(std::string(a.name) + "_grad" + sz, 3 * B, [&] { a.grad(g.b, y, dy, dx); });
  }
}

void dropout(gpu& g) {
  const int64_t n = int64_t(64) << 20;
  auto x = tensor<float>({n}), dy = tensor<float>({n});
  SharedTensor<float> y({n}), dx({n});
  SharedTensor<uint8_t> mask({n});
  try {
    served<pcy_nn_dropout_schema>(g.b, PCY_DTYPE_F32);
  } catch (const std::exception& e) {
    g.skip("dropout 64M f32", e.what());
    return;
  }
  uint64_t seed = 1;
  g.copy_pair("dropout 64M f32", 9.0 * double(n),
              [&] { nn::dropout(g.b, x, y, mask, 0.5, seed++); });
  g.copy_pair("dropout_grad 64M f32", 9.0 * double(n),
              [&] { nn::dropout_grad(g.b, dy, mask, dx, 0.5); });
}

// ---- N2: softmax ------------------------------------------------------------------------------

template <class T> void softmax(gpu& g, int64_t rows, int64_t cols) {
  const std::string sz = " " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dname<T>();
  auto x = tensor<T>({rows, cols}, 4);
  SharedTensor<T> y({rows, cols});
  const double B = 2.0 * double(rows * cols) * sizeof(T);
  try {
    served<pcy_nn_softmax_schema>(g.b, SharedTensor<T>::dtype);
  } catch (const std::exception& e) {
    g.skip("softmax" + sz, e.what());
    return;
  }
  g.copy_pair("softmax" + sz, B, [&] { nn::softmax(g.b, x, y, 1); });
  g.copy_pair("log_softmax" + sz, B, [&] { nn::log_softmax(g.b, x, y, 1); });
}

// ---- N7: layer_norm, rms_norm -----------------------------------------------------------------

// Each op over rows of `cols` and its gradient. Bytes a pass must move: the forward reads x and
// writes y (weight, bias and the statistics are a row's worth: not counted); the gradient reads
// x and dy and writes dx.
template <class T> void norms(gpu& g, int64_t rows, int64_t cols) {
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const std::string sz = " " + std::to_string(rows) + "x" + std::to_string(cols) + " " + dname<T>();
  auto x = tensor<T>({rows, cols}, 3), w = tensor<T>({cols}, 5), b = tensor<T>({cols}, 6),
       dy = tensor<T>({rows, cols}, 7);
  SharedTensor<T> y({rows, cols}), dx({rows, cols}), dw({cols}), db({cols});
  SharedTensor<St> mean({rows}), rstd({rows});
  const double el = double(rows * cols) * sizeof(T);
  try {
    served<pcy_nn_layer_norm_schema>(g.b, SharedTensor<T>::dtype);
  } catch (const std::exception& e) {
    g.skip("layer_norm" + sz, e.what());
    return;
  }
  g.copy_pair("layer_norm" + sz, 2 * el, [&] { nn::layer_norm(g.b, x, w, b, y, mean, rstd); });
  g.copy_pair("layer_norm_grad" + sz, 3 * el,
              [&] { nn::layer_norm_grad(g.b, x, w, mean, rstd, dy, dx, dw, db); });
  g.copy_pair("rms_norm" + sz, 2 * el, [&] { nn::rms_norm(g.b, x, w, y, rstd); });
  g.copy_pair("rms_norm_grad" + sz, 3 * el,
              [&] { nn::rms_norm_grad(g.b, x, w, rstd, dy, dx, dw); });
}

// ---- N8: batch_norm (training) and embedding -----------------------------------------------

// batch_norm over N x C x H x W in training, and its gradient. Bytes a pass must move: the
// forward reads x and writes y; the gradient reads x and dy and writes dx (the per-channel
// tensors are C elements: not counted).
template <class T> void batch_norms(gpu& g, int64_t N, int64_t C, int64_t H, int64_t W) {
  using St = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const std::string sz = " " + std::to_string(N) + "x" + std::to_string(C) + "x" +
                         std::to_string(H) + "x" + std::to_string(W) + " " + dname<T>();
  auto x = tensor<T>({N, C, H, W}, 3), w = tensor<T>({C}, 5), b = tensor<T>({C}, 6),
       dy = tensor<T>({N, C, H, W}, 7);
  SharedTensor<T> y({N, C, H, W}), dx({N, C, H, W}), dw({C}), db({C});
  SharedTensor<St> rm({C}), rv({C}), sm({C}), sr({C});
  for (St& v : rm.write_only())
    v = 0;
  for (St& v : rv.write_only())
    v = 1;
  const double el = double(N * C * H * W) * sizeof(T);
  try {
    served<pcy_nn_batch_norm_schema>(g.b, SharedTensor<T>::dtype);
  } catch (const std::exception& e) {
    g.skip("batch_norm" + sz, e.what());
    return;
  }
  g.copy_pair("batch_norm" + sz, 2 * el,
              [&] { nn::batch_norm(g.b, x, w, b, rm, rv, y, sm, sr, true); });
  g.copy_pair("batch_norm_grad" + sz, 3 * el,
              [&] { nn::batch_norm_grad(g.b, x, w, sm, sr, dy, dx, dw, db, true); });
}

// embedding: n positions into a V x D table, and its gradient. Bytes: the forward reads n rows
// and writes n rows; the gradient reads the n dy rows and writes the V x D table.
template <class T> void embeddings(gpu& g, int64_t V, int64_t D, int64_t n) {
  const std::string sz = " V=" + std::to_string(V) + " D=" + std::to_string(D) +
                         " n=" + std::to_string(n) + " " + dname<T>();
  auto w = tensor<T>({V, D}, 3), dy = tensor<T>({n, D}, 7);
  SharedTensor<int32_t> idx({n});
  {
    std::mt19937 pick(11);
    std::uniform_int_distribution<int32_t> u(0, static_cast<int32_t>(V - 1));
    for (int32_t& v : idx.write_only())
      v = u(pick);
  }
  SharedTensor<T> y({n, D}), dw({V, D});
  try {
    served<pcy_nn_embedding_schema>(g.b, SharedTensor<T>::dtype);
  } catch (const std::exception& e) {
    g.skip("embedding" + sz, e.what());
    return;
  }
  const double row = double(D) * sizeof(T);
  g.copy_pair("embedding" + sz, 2 * double(n) * row, [&] { nn::embedding(g.b, w, idx, y); });
  g.copy_pair("embedding_grad" + sz, double(n + V) * row,
              [&] { nn::embedding_grad(g.b, idx, dy, dw); });
}

// ---- N3: pooling, LRN -------------------------------------------------------------------------

template <class T> void pooling(gpu& g) {
  const std::string dt = std::string(" ") + dname<T>();
  auto x = tensor<T>({32, 64, 112, 112});
  const nn::PoolingParams mp{.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}};
  const nn::PoolingParams ap{.window = {2, 2}};
  SharedTensor<T> ym(nn::pooling_output_shape(x.shape(), mp)),
      ya(nn::pooling_output_shape(x.shape(), ap));
  const double xb = double(x.size()) * sizeof(T);
  try {
    served<pcy_nn_pooling_max_schema>(g.b, SharedTensor<T>::dtype);
    g.copy_pair("max pool 3x3/2 32x64x112x112" + dt, xb + double(ym.size()) * sizeof(T),
                [&] { nn::pooling_max(g.b, x, ym, mp); });
  } catch (const std::exception& e) {
    g.skip("max pool 3x3/2 32x64x112x112" + dt, e.what());
  }
  try {
    served<pcy_nn_pooling_avg_schema>(g.b, SharedTensor<T>::dtype);
    g.copy_pair("avg pool 2x2 32x64x112x112" + dt, xb + double(ya.size()) * sizeof(T),
                [&] { nn::pooling_avg(g.b, x, ya, ap); });
  } catch (const std::exception& e) {
    g.skip("avg pool 2x2 32x64x112x112" + dt, e.what());
  }
}

void lrn(gpu& g) {
  auto x = tensor<float>({32, 64, 56, 56}), dy = tensor<float>({32, 64, 56, 56});
  SharedTensor<float> y(x.shape()), dx(x.shape());
  const double B = double(x.size()) * 4;
  try {
    served<pcy_nn_lrn_schema>(g.b, PCY_DTYPE_F32);
  } catch (const std::exception& e) {
    g.skip("lrn n=5 32x64x56x56 f32", e.what());
    return;
  }
  g.copy_pair("lrn n=5 32x64x56x56 f32", 2 * B, [&] { nn::lrn(g.b, x, y); });
  try {
    nn::lrn(g.b, x, y); // the gradient's y
  } catch (const std::exception& e) {
    g.skip("lrn_grad n=5 32x64x56x56 f32", e.what());
    return;
  }
  g.copy_pair("lrn_grad n=5 32x64x56x56 f32", 4 * B, [&] { nn::lrn_grad(g.b, x, y, dy, dx); });
}

// ---- N4: convolution against cuDNN ------------------------------------------------------------

#if PCY_BENCH_CUDNN
#define PCY_BENCH_CUDNN_FNS(X)                                                                     \
  X(cudnnCreate)                                                                                   \
  X(cudnnDestroy)                                                                                  \
  X(cudnnSetStream)                                                                                \
  X(cudnnGetVersion)                                                                               \
  X(cudnnGetErrorString)                                                                           \
  X(cudnnCreateTensorDescriptor)                                                                   \
  X(cudnnDestroyTensorDescriptor)                                                                  \
  X(cudnnSetTensor4dDescriptor)                                                                    \
  X(cudnnCreateFilterDescriptor)                                                                   \
  X(cudnnDestroyFilterDescriptor)                                                                  \
  X(cudnnSetFilter4dDescriptor)                                                                    \
  X(cudnnCreateConvolutionDescriptor)                                                              \
  X(cudnnDestroyConvolutionDescriptor)                                                             \
  X(cudnnSetConvolution2dDescriptor)                                                               \
  X(cudnnSetConvolutionGroupCount)                                                                 \
  X(cudnnSetConvolutionMathType)                                                                   \
  X(cudnnGetConvolutionForwardWorkspaceSize)                                                       \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)                                                  \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize)                                                \
  X(cudnnConvolutionForward)                                                                       \
  X(cudnnConvolutionBackwardData)                                                                  \
  X(cudnnConvolutionBackwardFilter)

namespace cg = parenchyma::nn_cuda::graph;

struct cudnn {
  void* lib = nullptr;
  cudnnHandle_t h = nullptr;
  std::string why; // empty when usable
  cg::api graph;   // not loaded(): graph_why says why
#define X(f) decltype(&::f) f = nullptr;
  PCY_BENCH_CUDNN_FNS(X)
#undef X

  explicit cudnn(CUstream stream) {
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"})
      if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (lib == nullptr) {
      why = std::string("cuDNN not loaded: ") + ::dlerror();
      return;
    }
#define X(f)                                                                                       \
  f = reinterpret_cast<decltype(f)>(::dlsym(lib, #f));                                             \
  if (f == nullptr) {                                                                              \
    why = "cuDNN lacks " #f;                                                                       \
    return;                                                                                        \
  }
    PCY_BENCH_CUDNN_FNS(X)
#undef X
    if (const char* missing = graph.load(lib)) graph_why = std::string("cuDNN lacks ") + missing;
    if (cudnnCreate(&h) != CUDNN_STATUS_SUCCESS) {
      why = "cudnnCreate failed";
      return;
    }
    check(cudnnSetStream(h, stream), "cudnnSetStream");
  }
  std::string graph_why;
  ~cudnn() {
    if (h != nullptr) cudnnDestroy(h);
  }
  void check(cudnnStatus_t st, const char* what) const {
    if (st != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("cuDNN ") + what + ": " + cudnnGetErrorString(st));
  }
};

// cuDNN configured as the bundle configures it for one convolution (same shapes, data type,
// compute type and math mode); the algorithm numbers are the bundle's, which are cuDNN's enum
// values where the bundle runs cuDNN.
struct cudnn_conv {
  cudnn& d;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t c = nullptr;
  cudnn_conv(cudnn& dn, const nn::Convolution& conv, bool tf32) : d(dn) {
    const auto& xs = conv.x_shape();
    const auto& ws = conv.w_shape();
    const auto& ys = conv.y_shape();
    const auto& p = conv.params();
    const cudnnDataType_t t = conv.dtype() == PCY_DTYPE_F16    ? CUDNN_DATA_HALF
                              : conv.dtype() == PCY_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                                               : CUDNN_DATA_FLOAT;
    d.check(d.cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    d.check(d.cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    d.check(d.cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    d.check(d.cudnnCreateConvolutionDescriptor(&c), "cudnnCreateConvolutionDescriptor");
    auto i = [](int64_t v) { return static_cast<int>(v); };
    d.check(d.cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, t, i(xs[0]), i(xs[1]), i(xs[2]),
                                         i(xs[3])),
            "cudnnSetTensor4dDescriptor");
    d.check(d.cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, t, i(ys[0]), i(ys[1]), i(ys[2]),
                                         i(ys[3])),
            "cudnnSetTensor4dDescriptor");
    d.check(d.cudnnSetFilter4dDescriptor(w, t, CUDNN_TENSOR_NCHW, i(ws[0]), i(ws[1]), i(ws[2]),
                                         i(ws[3])),
            "cudnnSetFilter4dDescriptor");
    d.check(d.cudnnSetConvolution2dDescriptor(c, i(p.padding[0]), i(p.padding[1]), i(p.stride[0]),
                                              i(p.stride[1]), i(p.dilation[0]), i(p.dilation[1]),
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolution2dDescriptor");
    d.check(d.cudnnSetConvolutionGroupCount(c, i(p.groups)), "cudnnSetConvolutionGroupCount");
    // As the bundle: half types on tensor cores, f32 strict without TF32, TF32 by default math.
    const cudnnMathType_t m = t != CUDNN_DATA_FLOAT ? CUDNN_TENSOR_OP_MATH
                              : tf32                ? CUDNN_DEFAULT_MATH
                                                    : CUDNN_FMA_MATH;
    d.check(d.cudnnSetConvolutionMathType(c, m), "cudnnSetConvolutionMathType");
  }
  ~cudnn_conv() {
    if (c) d.cudnnDestroyConvolutionDescriptor(c);
    if (w) d.cudnnDestroyFilterDescriptor(w);
    if (y) d.cudnnDestroyTensorDescriptor(y);
    if (x) d.cudnnDestroyTensorDescriptor(x);
  }
  cudnn_conv(const cudnn_conv&) = delete;
  cudnn_conv& operator=(const cudnn_conv&) = delete;
};
#endif

template <class T>
void convolution(gpu& g, void* dnn, const char* label, nn::Shape xs, nn::Shape ws, int64_t pad,
                 bool tf32) {
  const std::string mode = tf32 ? "tf32" : dname<T>();
  const std::string base = std::string("conv ") + label + " ";
  auto name = [&](const char* dir) { return base + dir + " " + mode; };
  std::unique_ptr<nn::Convolution> conv;
  try {
    served<pcy_nn_convolution_schema>(g.b, SharedTensor<T>::dtype);
    conv = std::make_unique<nn::Convolution>(
        g.b, xs, ws,
        nn::ConvolutionParams{.padding = {pad, pad},
                              .math = tf32 ? nn::math_mode::tf32 : nn::math_mode::strict},
        SharedTensor<T>::dtype);
  } catch (const std::exception& e) {
    for (const char* dir : {"fwd", "grad_data", "grad_filter"})
      g.skip(name(dir), e.what());
    return;
  }
  auto x = tensor<T>(xs), w = tensor<T>(ws, 0.1f), dy = tensor<T>(conv->y_shape());
  // Outputs hold data too, so every tensor has a device copy before its pointer is taken.
  auto y = tensor<T>(conv->y_shape()), dx = tensor<T>(xs), dw = tensor<T>(ws);
  const double flops = 2.0 * double(y.size()) * double(ws[1] * ws[2] * ws[3]);
  std::function<void()> ours[3] = {[&] { conv->forward(x, w, y); },
                                   [&] { conv->grad_data(w, dy, dx); },
                                   [&] { conv->grad_filter(x, dy, dw); }};
  const char* dirs[3] = {"fwd", "grad_data", "grad_filter"};
  bool ran[3] = {false, false, false};
  for (int k = 0; k < 3; ++k)
    try {
      ours[k]();
      ran[k] = true;
    } catch (const std::exception& e) {
      g.skip(name(dirs[k]), e.what());
    }
  std::string no_peer;
#if PCY_BENCH_CUDNN
  auto* d = static_cast<cudnn*>(dnn);
  if (!d->why.empty()) no_peer = d->why;
#else
  (void)dnn;
  no_peer = "built without cudnn.h";
#endif
  for (int k = 0; k < 3; ++k) {
    if (!ran[k]) continue;
    const int64_t algo = conv->algorithm(static_cast<nn::direction>(k));
    std::printf(
        "# %s: algorithm %lld, workspace %llu bytes\n", name(dirs[k]).c_str(),
        static_cast<long long>(algo),
        static_cast<unsigned long long>(conv->workspace_bytes(static_cast<nn::direction>(k))));
    std::string why = no_peer;
#if PCY_BENCH_CUDNN
    const int64_t count[3] = {CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT};
    if (why.empty() && algo >= 1000 && algo < 1000 + cg::max_plans) {
      // A graph-API plan: the peer is the same plan (plan k of the same list, built here on the
      // bench's handle on the same stream) run with cudnnBackendExecute.
      try {
        if (!d->graph.loaded()) throw std::runtime_error(d->graph_why);
        const auto& xsh = conv->x_shape();
        const auto& wsh = conv->w_shape();
        const auto& ysh = conv->y_shape();
        const auto& p = conv->params();
        cg::problem pr;
        pr.direction = k;
        pr.data = conv->dtype() == PCY_DTYPE_F16    ? CUDNN_DATA_HALF
                  : conv->dtype() == PCY_DTYPE_BF16 ? CUDNN_DATA_BFLOAT16
                                                    : CUDNN_DATA_FLOAT;
        pr.compute = CUDNN_DATA_FLOAT;
        pr.tf32 = tf32 && pr.data == CUDNN_DATA_FLOAT;
        pr.N = xsh[0], pr.C = xsh[1], pr.H = xsh[2], pr.W = xsh[3], pr.K = wsh[0], pr.R = wsh[2],
        pr.S = wsh[3], pr.P = ysh[2], pr.Q = ysh[3], pr.groups = p.groups;
        pr.stride = {p.stride[0], p.stride[1]};
        pr.pad = {p.padding[0], p.padding[1]};
        pr.dil = {p.dilation[0], p.dilation[1]};
        cg::plan_set set;
        const cg::status st = cg::build(d->graph, d->h, pr, set);
        if (!st.ok())
          throw std::runtime_error(std::string("cuDNN graph API: ") + st.what + ": " +
                                   d->cudnnGetErrorString(st.code));
        const auto i = static_cast<size_t>(algo - 1000);
        if (i >= set.plans.size())
          throw std::runtime_error("the graph API offers " + std::to_string(set.plans.size()) +
                                   " plans here, not plan " + std::to_string(i));
        const cg::plan& pl = *set.plans[i];
        std::printf("# %s: peer: graph plan %zu (engine %lld, workspace %lld bytes) through "
                    "cudnnBackendExecute\n",
                    name(dirs[k]).c_str(), i, static_cast<long long>(pl.engine_index),
                    static_cast<long long>(pl.workspace));
        CUdeviceptr wsp = 0;
        if (pl.workspace > 0)
          cu(cuMemAlloc(&wsp, static_cast<size_t>(pl.workspace)), "cuMemAlloc (cuDNN workspace)");
        void* wsv = reinterpret_cast<void*>(wsp);
        auto vp = [&](auto& t) { return reinterpret_cast<void*>(g.ptr(t)); };
        void* a0 = k == 1 ? vp(dx) : vp(x);
        void* a1 = k == 2 ? vp(dw) : vp(w);
        void* a2 = k == 0 ? vp(y) : vp(dy);
        cg::binding bind;
        auto peer = [&] {
          const cg::status es = cg::execute(d->graph, d->h, pl, bind, a0, a1, a2, wsv);
          if (!es.ok())
            throw std::runtime_error(std::string("cuDNN ") + es.what + ": " +
                                     d->cudnnGetErrorString(es.code));
        };
        g.pair(name(dirs[k]), "cudnn", peer, ours[k], 0, flops);
        cu(cuStreamSynchronize(g.stream), "cuStreamSynchronize");
        if (wsp) cuMemFree(wsp);
        continue;
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
    if (why.empty() && (algo < 0 || algo >= count[k]))
      why = "the bundle's algorithm " + std::to_string(algo) + " is not a cuDNN algorithm";
    if (why.empty()) {
      try {
        cudnn_conv cc(*d, *conv, tf32);
        size_t ws_bytes = 0;
        if (k == 0)
          d->check(d->cudnnGetConvolutionForwardWorkspaceSize(
                       d->h, cc.x, cc.w, cc.c, cc.y, static_cast<cudnnConvolutionFwdAlgo_t>(algo),
                       &ws_bytes),
                   "cudnnGetConvolutionForwardWorkspaceSize");
        else if (k == 1)
          d->check(d->cudnnGetConvolutionBackwardDataWorkspaceSize(
                       d->h, cc.w, cc.y, cc.c, cc.x,
                       static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &ws_bytes),
                   "cudnnGetConvolutionBackwardDataWorkspaceSize");
        else
          d->check(d->cudnnGetConvolutionBackwardFilterWorkspaceSize(
                       d->h, cc.x, cc.y, cc.c, cc.w,
                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &ws_bytes),
                   "cudnnGetConvolutionBackwardFilterWorkspaceSize");
        CUdeviceptr wsp = 0;
        if (ws_bytes > 0) cu(cuMemAlloc(&wsp, ws_bytes), "cuMemAlloc (cuDNN workspace)");
        void* wsv = reinterpret_cast<void*>(wsp);
        void *xp = reinterpret_cast<void*>(g.ptr(x)), *wp = reinterpret_cast<void*>(g.ptr(w)),
             *yp = reinterpret_cast<void*>(g.ptr(y)), *dyp = reinterpret_cast<void*>(g.ptr(dy)),
             *dxp = reinterpret_cast<void*>(g.ptr(dx)), *dwp = reinterpret_cast<void*>(g.ptr(dw));
        const float one = 1, zero = 0;
        std::function<void()> peer;
        if (k == 0)
          peer = [&] {
            d->check(d->cudnnConvolutionForward(d->h, &one, cc.x, xp, cc.w, wp, cc.c,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(algo), wsv,
                                                ws_bytes, &zero, cc.y, yp),
                     "cudnnConvolutionForward");
          };
        else if (k == 1)
          peer = [&] {
            d->check(
                d->cudnnConvolutionBackwardData(d->h, &one, cc.w, wp, cc.y, dyp, cc.c,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
                                                wsv, ws_bytes, &zero, cc.x, dxp),
                "cudnnConvolutionBackwardData");
          };
        else
          peer = [&] {
            d->check(d->cudnnConvolutionBackwardFilter(
                         d->h, &one, cc.x, xp, cc.y, dyp, cc.c,
                         static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), wsv, ws_bytes, &zero,
                         cc.w, dwp),
                     "cudnnConvolutionBackwardFilter");
          };
        g.pair(name(dirs[k]), "cudnn", peer, ours[k], 0, flops);
        cu(cuStreamSynchronize(g.stream), "cuStreamSynchronize");
        if (wsp) cuMemFree(wsp);
        continue;
      } catch (const std::exception& e) {
        why = e.what();
      }
    }
#endif
    std::printf("# %s: no cuDNN peer (%s); parenchyma alone\n", name(dirs[k]).c_str(), why.c_str());
    g.alone(name(dirs[k]), ours[k], flops);
  }
}

template <class T> void convolutions(gpu& g, void* dnn, bool tf32) {
  convolution<T>(g, dnn, "3x3 64->64 32x64x56x56", {32, 64, 56, 56}, {64, 64, 3, 3}, 1, tf32);
  convolution<T>(g, dnn, "3x3 128->128 32x128x28x28", {32, 128, 28, 28}, {128, 128, 3, 3}, 1, tf32);
  convolution<T>(g, dnn, "3x3 256->256 32x256x14x14", {32, 256, 14, 14}, {256, 256, 3, 3}, 1, tf32);
  convolution<T>(g, dnn, "1x1 64->256 32x64x56x56", {32, 64, 56, 56}, {256, 64, 1, 1}, 0, tf32);
}

// ---- N6: one training step of the demo network (demo_step.hpp) at batch 4096 -----------------

void train_step(gpu& g) {
  const std::string name = "train step demo b4096";
  try {
    std::uniform_real_distribution<float> u(-1, 1);
    bench_nn::demo_step net(g.b, 4096, [&](std::span<float> v, float scale) {
      for (float& e : v)
        e = scale * u(rng);
    });
    net.step();
    g.b.synchronize();
    g.alone(name, [&] { net.step(); });
  } catch (const std::exception& e) {
    g.skip(name, e.what());
  }
}

} // namespace

int main(int argc, char** argv) {
  // --quick: fewer samples; --only GROUPS: a comma-separated subset of elementwise, dropout,
  // softmax, pooling, lrn, norm, conv, train (default: all).
  bool quick = false;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0)
      quick = true;
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
      only = "," + std::string(argv[++i]) + ",";
    else {
      std::printf("usage: bench_nn_cuda [--quick] [--only elementwise,dropout,softmax,pooling,"
                  "lrn,norm,conv,train]\n");
      return 2;
    }
  }
  const auto run = [&](const char* group) {
    return only.empty() || only.find("," + std::string(group) + ",") != std::string::npos;
  };
  try {
    Backend b("cuda");
    gpu g(b);
    g.reps = quick ? 15 : 21;
    g.meta.emplace_back("nproc", std::to_string(std::thread::hardware_concurrency()));
    g.meta.emplace_back("backend", b.name());
    g.meta.emplace_back("device", b.device().name);
    std::printf("# N1-N4, N6 CUDA NN on %s (device events; peers: device copy, cuDNN)\n",
                b.device().name.c_str());
    try {
      g.meta.emplace_back("convolution_impl", served<pcy_nn_convolution_schema>(b, PCY_DTYPE_F32));
      g.meta.emplace_back("relu_impl", served<pcy_nn_relu_schema>(b, PCY_DTYPE_F32));
    } catch (const std::exception& e) {
      std::printf("# %s\n", e.what());
    }
    void* dnn = nullptr;
#if PCY_BENCH_CUDNN
    cudnn d(g.stream);
    dnn = &d;
    if (d.why.empty())
      g.meta.emplace_back("cudnn_version", std::to_string(d.cudnnGetVersion()));
    else
      std::printf("# no cuDNN peer: %s\n", d.why.c_str());
#endif
    if (run("elementwise")) {
      elementwise<float>(g);
      elementwise<f16>(g);
      elementwise<bf16>(g);
    }
    if (run("dropout")) dropout(g);
    if (run("softmax")) {
      softmax<float>(g, 4096, 16384);
      softmax<float>(g, 65536, 1000);
      softmax<f16>(g, 4096, 16384);
      softmax<bf16>(g, 4096, 16384);
    }
    if (run("pooling")) {
      pooling<float>(g);
      pooling<f16>(g);
      pooling<bf16>(g);
    }
    if (run("lrn")) lrn(g);
    if (run("norm")) {
      norms<float>(g, 4096, 4096);
      norms<float>(g, 65536, 768);
      norms<f16>(g, 4096, 4096);
      norms<bf16>(g, 4096, 4096);
      batch_norms<float>(g, 32, 64, 112, 112);
      batch_norms<f16>(g, 32, 64, 112, 112);
      batch_norms<bf16>(g, 32, 64, 112, 112);
      embeddings<float>(g, 50257, 768, 8192);
      embeddings<f16>(g, 50257, 768, 8192);
    }
    if (run("conv")) {
      convolutions<float>(g, dnn, false);
      convolutions<float>(g, dnn, true);
      convolutions<f16>(g, dnn, false);
      convolutions<bf16>(g, dnn, false);
    }
    if (run("train")) train_step(g);
    g.meta.emplace_back("unavailable_cells", std::to_string(g.unavailable.size()));
    g.write();
  } catch (const std::exception& e) {
    std::printf("bench_nn_cuda: %s\n", e.what());
    return 1;
  }
}
