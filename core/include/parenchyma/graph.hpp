// parenchyma: replayable graphs. A sequence of ops is recorded on one backend once and replayed
// with one call: a CUDA graph on cuda (the framework's own graph), a recorded command list on
// frameworks without graphs (native, OpenCL).
//
//   pa::Graph g = pa::Graph::record(backend, [&] {
//     pa::blas::axpy(backend, 2.0f, x, y);
//     pa::blas::scal(backend, 0.5f, y);
//   });
//   g.replay();  // runs both ops; replay again as often as wanted
//
// Recording runs none of the ops (as CUDA stream capture): the first replay does. The ops'
// checks, resolution and argument packing happen once, at recording; a replay only makes the
// captured tensors current on the device (host writes between replays are picked up, as by an op)
// and launches. Every op of a graph must run on the recording backend: an op that would fall back
// to another framework is refused while recording, naming it.
//
// Tensors: a graph holds every tensor it captured (its device memory stays allocated while the
// graph exists). Replaying after one of them was resized, reshaped or destroyed by its owner is
// an error (errc::invalid_argument, naming the op and argument), and runs nothing.
//
// Threads: a Graph is used like its Backend: by one thread at a time, and not while that backend
// records or runs ops on another thread (docs/threads.md).
#pragma once

#include <parenchyma/backend.hpp>
#include <parenchyma/export.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>

namespace parenchyma {
inline namespace v1 {

class GraphImpl;

enum class graph_kind {
  command_list,    // the core calls the recorded ops in order (native, OpenCL)
  framework_graph, // the framework's own graph, launched with one call (a CUDA graph on cuda)
};

class PARENCHYMA_API Graph {
public:
  Graph() = default; // empty: replay() throws

  // Records the ops `ops` issues on `backend` (on this thread). Throws what an op or the
  // recording throws; then nothing was recorded and the backend works as before. `kind`: the
  // best the framework offers when not given; command_list forces one (any framework);
  // framework_graph throws errc::unsupported where the framework has no graphs.
  static Graph record(const Backend& backend, const std::function<void()>& ops,
                      std::optional<graph_kind> kind = std::nullopt);

  // Runs the recorded ops on the backend's queue (asynchronously, like an op).
  void replay() const;

  size_t op_count() const noexcept;
  graph_kind kind() const noexcept;
  explicit operator bool() const noexcept { return impl_ != nullptr; }

private:
  std::shared_ptr<GraphImpl> impl_;
};

} // namespace v1
} // namespace parenchyma
