// CUDA graphs behind pcy_framework_api's graph slots. The core captures one op at a time
// (queue_capture_begin .. end around the op), so its own transfers and allocations between ops
// happen outside every capture; each captured segment becomes a child graph node that depends on
// the segment before, and the whole graph is instantiated once and launched with cuGraphLaunch.
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
  check(d_, d_.api().cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture");
  g.capturing_ = true;
}

void queue::capture_end(graph& g) {
  if (!g.capturing_ || g.stream_ != stream_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT, "capture_end without capture_begin on this queue");
  make_current(d_, cu_ctx_);
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
    q = d_.api().cuGraphAddChildGraphNode(&node, g.g_, g.last_ != nullptr ? &g.last_ : nullptr,
                                          g.last_ != nullptr ? 1 : 0, segment);
  d_.api().cuGraphDestroy(segment); // the child node holds a copy
  if (q != CUDA_SUCCESS) {
    g.broken_ = true;
    check(d_, q, "adding a captured segment to the graph (cuGraphAddChildGraphNode)");
  }
  if (node != nullptr) g.last_ = node;
}

void queue::launch_graph(graph& g) {
  if (g.exec_ == nullptr || g.stream_ != stream_)
    sdk::fail(PCY_ERR_INVALID_ARGUMENT,
              "launching a graph that is not instantiated or was made on another queue");
  check(d_, call(d_, cu_ctx_, [&] { return d_.api().cuGraphLaunch(g.exec_, stream_); }),
        "cuGraphLaunch");
}

} // namespace parenchyma::cuda
