// CUDA graphs behind pcy_framework_api's graph slots. The core captures one op at a time
// (queue_capture_begin .. end around the op), so its own transfers and allocations between ops
// happen outside every capture. Where the driver has cuStreamBeginCaptureToGraph (12.3), each
// segment is captured straight into the one graph, depending on the leaves of the segments before,
// so the graph is flat: kernel nodes only, no child graphs, which replay with less launch work per
// node. On older drivers each segment becomes a child graph node after the one before. The whole
// graph is instantiated once and launched with cuGraphLaunch.
// Capture is thread-local: an unsafe call on this thread (a synchronisation, an allocation, a
// transfer from pageable memory) fails and invalidates the capture, which capture_end reports.
#include "plugin.hpp"

namespace parenchyma::cuda {

namespace {
bool graphs_available(const driver_api& a) noexcept {
  return a.cuStreamBeginCapture != nullptr && a.cuStreamEndCapture != nullptr &&
         a.cuGraphCreate != nullptr && a.cuGraphDestroy != nullptr &&
         a.cuGraphGetNodes != nullptr && a.cuGraphAddChildGraphNode != nullptr &&
         a.cuGraphInstantiateWithFlags != nullptr && a.cuGraphLaunch != nullptr &&
         a.cuGraphExecDestroy != nullptr;
}
bool flat_capture(const driver_api& a) noexcept {
#if CUDA_VERSION >= 13000
  return a.cuStreamBeginCaptureToGraph != nullptr && a.cuStreamGetCaptureInfo != nullptr;
#else
  (void)a;
  return false;
#endif
}
} // namespace

graph::~graph() {
  if (tl_current != ctx_ && d_.api().cuCtxSetCurrent(ctx_) == CUDA_SUCCESS) tl_current = ctx_;
  if (capturing_) { // never left open, but a stream must not stay in capture mode
    CUgraph g = nullptr;
    if (d_.api().cuStreamEndCapture(stream_, &g) == CUDA_SUCCESS && g != nullptr)
      d_.api().cuGraphDestroy(g);
  }
  // An exec still running is freed by the driver once it completes.
  if (exec_ != nullptr) d_.api().cuGraphExecDestroy(exec_);
  d_.api().cuGraphDestroy(g_);
}

void graph::instantiate() {
  if (broken_) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "instantiating a graph whose capture failed");
  if (exec_ != nullptr) sdk::fail(PCY_ERR_INVALID_ARGUMENT, "the graph is already instantiated");
  make_current(d_, ctx_);
  check(d_, d_.api().cuGraphInstantiateWithFlags(&exec_, g_, 0), "cuGraphInstantiateWithFlags");
}

graph* queue::create_graph() {
  if (!graphs_available(d_.api()))
    sdk::fail(PCY_ERR_UNSUPPORTED, "the CUDA driver lacks the graph entry points");
  make_current(d_, cu_ctx_);
  CUgraph g = nullptr;
  check(d_, d_.api().cuGraphCreate(&g, 0), "cuGraphCreate");
  try {
    return new graph(d_, cu_ctx_, stream_, g);
  } catch (...) {
    d_.api().cuGraphDestroy(g);
    throw;
  }
}

void queue::capture_begin(graph& g) {
  if (g.stream_ != stream_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "capturing into a graph made on another queue");
  if (g.exec_ != nullptr || g.broken_ || g.capturing_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "capturing into a graph that is instantiated, broken or already capturing");
  make_current(d_, cu_ctx_);
#if CUDA_VERSION >= 13000
  if (flat_capture(d_.api())) {
    check(d_,
          d_.api().cuStreamBeginCaptureToGraph(stream_, g.g_, g.last_.data(), nullptr,
                                               g.last_.size(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "cuStreamBeginCaptureToGraph");
    g.capturing_ = true;
    return;
  }
#endif
  check(d_, d_.api().cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture");
  g.capturing_ = true;
}

void queue::capture_end(graph& g) {
  if (!g.capturing_ || g.stream_ != stream_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "capture_end without capture_begin on this queue");
  make_current(d_, cu_ctx_);
#if CUDA_VERSION >= 13000
  if (flat_capture(d_.api())) {
    // The capture's dependency set is what work after this segment would wait for: the new
    // leaves (unchanged when the op captured nothing). Read it before the capture ends.
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUgraphNode* deps = nullptr;
    size_t count = 0;
    const CUresult info =
        d_.api().cuStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, &deps, nullptr, &count);
    std::vector<CUgraphNode> leaves;
    if (info == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_ACTIVE && deps != nullptr)
      leaves.assign(deps, deps + count);
    CUgraph same = nullptr;
    const CUresult r = d_.api().cuStreamEndCapture(stream_, &same);
    g.capturing_ = false;
    if (r != CUDA_SUCCESS || info != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_ACTIVE) {
      g.broken_ = true; // the graph may hold part of the segment: it never launches
      sdk::fail(status_of(r != CUDA_SUCCESS ? r : info),
                sdk::str("cuStreamEndCapture: ", d_.describe(r != CUDA_SUCCESS ? r : info),
                         " (something in the captured work waited for the device or the host, "
                         "allocated, or copied pageable host memory)"));
    }
    g.last_ = std::move(leaves);
    return;
  }
#endif
  CUgraph segment = nullptr;
  const CUresult r = d_.api().cuStreamEndCapture(stream_, &segment);
  g.capturing_ = false;
  if (r != CUDA_SUCCESS) {
    if (segment != nullptr) d_.api().cuGraphDestroy(segment);
    g.broken_ = true;
    sdk::fail(status_of(r),
              sdk::str("cuStreamEndCapture: ", d_.describe(r),
                       " (something in the captured work waited for the device or the host, "
                       "allocated, or copied pageable host memory)"));
  }
  size_t nodes = 0;
  CUresult q = d_.api().cuGraphGetNodes(segment, nullptr, &nodes);
  CUgraphNode node = nullptr;
  if (q == CUDA_SUCCESS && nodes > 0)
    q = d_.api().cuGraphAddChildGraphNode(&node, g.g_, g.last_.data(), g.last_.size(), segment);
  d_.api().cuGraphDestroy(segment); // the child node holds a copy
  if (q != CUDA_SUCCESS) {
    g.broken_ = true;
    check(d_, q, "adding a captured segment to the graph (cuGraphAddChildGraphNode)");
  }
  if (node != nullptr) g.last_.assign(1, node);
}

void queue::launch_graph(graph& g) {
  if (g.exec_ == nullptr || g.stream_ != stream_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "launching a graph that is not instantiated or was made on another queue");
  check(d_, call(d_, cu_ctx_, [&] { return d_.api().cuGraphLaunch(g.exec_, stream_); }),
        "cuGraphLaunch");
}

} // namespace parenchyma::cuda
