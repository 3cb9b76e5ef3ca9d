// parenchyma core: replayable graphs (docs/graphs.md). Graph::record puts a Recorder on the
// backend; Backend::invoke hands each call to detail::record_op (backend.cpp), which packs it as
// invoke does and either captures the op's work into the framework's graph (one capture per op,
// so the core's own transfers and allocations between ops stay outside every capture) or keeps a
// deep copy of the packed call. Replay checks every captured tensor, syncs each by its use in
// the graph, and launches the graph or calls the recorded ops in order.
#include "internal.hpp"
#include "tensor_impl.hpp"

#include <parenchyma/graph.hpp>

namespace parenchyma {
inline namespace v1 {

class GraphImpl {
public:
  std::shared_ptr<BackendImpl> backend;
  pcy_graph graph = nullptr; // framework graph; null: a command list
  std::vector<detail::GraphTensor> tensors;
  std::vector<detail::RecordedOp> ops;
  std::vector<std::string> labels;
  std::vector<std::shared_ptr<WorkspaceBuffer>> workspaces;
  bool launched = false;

  GraphImpl() = default;
  GraphImpl(const GraphImpl&) = delete;
  GraphImpl& operator=(const GraphImpl&) = delete;
  ~GraphImpl() {
    // A launch may still run: its memory (tensors, workspace) goes only after it.
    if (launched)
      if (pcy_error* e = backend->api->queue_finish(backend->queue)) e->destroy(e);
    if (graph != nullptr) backend->api->graph_destroy(graph);
  }
};

namespace {

bool has_graphs(const pcy_framework_api& api) noexcept {
  return api.graph_create != nullptr && api.queue_capture_begin != nullptr &&
         api.queue_capture_end != nullptr && api.graph_instantiate != nullptr &&
         api.graph_launch != nullptr && api.graph_destroy != nullptr;
}

// Takes the recorder off the backend and gives every captured tensor back the coherence it had
// before recording (nothing ran), whatever way the recording ends.
struct RecordingScope {
  BackendImpl& b;
  detail::Recorder& rec;
  bool keep_graph = false;
  ~RecordingScope() {
    b.recorder = nullptr;
    for (detail::GraphTensor& t : rec.tensors)
      if (t.impl->generation == t.generation) t.impl->valid = t.valid_before;
    if (!keep_graph && rec.graph != nullptr) {
      b.api->graph_destroy(rec.graph);
      rec.graph = nullptr;
    }
  }
};

[[noreturn]] [[gnu::noinline]] void refuse_tensor(const detail::GraphTensor& t, const char* what) {
  throw error(errc::invalid_argument, "Graph",
              "cannot replay: argument " + t.arg + " of " + t.op + ": the tensor " + what +
                  " after the graph captured it (a graph holds the slots it saw); record the "
                  "graph again");
}

} // namespace

Graph Graph::record(const Backend& backend, const std::function<void()>& ops,
                    std::optional<graph_kind> want) {
  BackendImpl& b = backend.impl();
  if (b.recorder != nullptr)
    throw error(errc::invalid_argument, b.name,
                "Graph::record while the backend already records a graph: graphs do not nest");
  if (!ops) throw error(errc::invalid_argument, "Graph", "record() without a function");
  const bool framework = has_graphs(*b.api);
  if (want == graph_kind::framework_graph && !framework)
    throw error(errc::unsupported, b.framework->name(),
                "the framework offers no graphs of its own (" + b.name +
                    " replays a command list: record without asking for a framework graph)");
  detail::Recorder rec;
  rec.backend = &b;
  if (framework && want != graph_kind::command_list) {
    pcy_error* e = b.api->graph_create(b.queue, &rec.graph);
    if (e != nullptr && e->code == PCY_ERR_UNSUPPORTED && want != graph_kind::framework_graph) {
      e->destroy(e); // e.g. a driver without graphs: a command list does the same
      rec.graph = nullptr;
    } else {
      throw_if(e, ("creating a graph on " + b.name).c_str());
    }
    if (rec.graph == nullptr && want == graph_kind::framework_graph)
      throw error(errc::plugin, b.framework->name(),
                  "graph_create reported success but returned no graph: the plugin is broken");
  }
  auto g = std::make_shared<GraphImpl>();
  g->backend = b.self.lock();
  {
    RecordingScope scope{b, rec};
    b.recorder = &rec;
    ops();
    if (!rec.failure.empty())
      throw error(errc::unsupported, b.name, "recording the graph failed: " + rec.failure);
    if (rec.graph != nullptr)
      throw_if(b.api->graph_instantiate(rec.graph),
               ("instantiating the graph recorded on " + b.name).c_str());
    scope.keep_graph = true;
    g->graph = rec.graph;
    g->tensors = rec.tensors; // the scope restores the coherence through rec's copies
    g->ops = std::move(rec.ops);
    g->labels = std::move(rec.labels);
    g->workspaces = std::move(rec.workspaces);
  }
  Graph out;
  out.impl_ = std::move(g);
  return out;
}

void Graph::replay() const {
  if (!impl_) throw error(errc::invalid_argument, "Graph", "replay() on an empty Graph");
  GraphImpl& g = *impl_;
  BackendImpl& b = *g.backend;
  if (b.recorder != nullptr) [[unlikely]]
    throw error(errc::invalid_argument, b.name,
                "replaying a graph while the backend records one: graphs do not nest");
  // Every check before any tensor changes: a refused replay runs and changes nothing.
  for (const detail::GraphTensor& t : g.tensors) {
    if (t.impl->orphaned) [[unlikely]]
      refuse_tensor(t, "was destroyed");
    if (t.impl->generation != t.generation) [[unlikely]]
      refuse_tensor(t, "was resized or reshaped");
  }
  const writeback_scope writebacks{b};
  // Each tensor made current on the device as its first use in the graph needs, and marked
  // written there when any op of the graph writes it (transfers happen here, before the graph).
  for (const detail::GraphTensor& t : g.tensors) {
    const access acc = t.first == access::write_only ? access::write_only
                       : t.written                   ? access::write
                                                     : access::read;
    void* native = nullptr;
    const pcy_memory m = t.impl->device_for_op(b, acc, &native, b.writebacks);
    if (m != t.memory || native != t.native) [[unlikely]]
      throw error(errc::internal, "Graph",
                  "argument " + t.arg + " of " + t.op + ": the tensor's slot on " + b.name +
                      " changed without a resize");
  }
  g.launched = true;
  if (g.graph != nullptr) {
    if (pcy_error* e = b.api->graph_launch(b.queue, g.graph)) [[unlikely]]
      throw_if(e, ("replaying a graph on " + b.name).c_str());
  } else {
    for (const detail::RecordedOp& op : g.ops)
      if (pcy_error* e = op.fn(&op.call)) [[unlikely]]
        throw_if(e, ("replaying " + op.label + " of a graph on " + b.name).c_str());
  }
  // Imported host arrays the graph wrote apart from the array get the results after it.
  if (!b.writebacks.empty()) [[unlikely]]
    b.write_back();
}

size_t Graph::op_count() const noexcept { return impl_ ? impl_->labels.size() : 0; }

graph_kind Graph::kind() const noexcept {
  return impl_ && impl_->graph != nullptr ? graph_kind::framework_graph : graph_kind::command_list;
}

} // namespace v1
} // namespace parenchyma
