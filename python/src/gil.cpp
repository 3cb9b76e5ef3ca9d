// parenchyma Python bindings: releasing the GIL around work, and taking it back safely while
// the interpreter exits.
//
// CPython ends a daemon thread that asks for the GIL after finalisation began by calling
// pthread_exit inside PyEval_RestoreThread / PyGILState_Ensure. That unwinds the thread's stack
// with a forced-unwind exception; from a destructor (pybind11's gil_scoped_release, our own
// RAII guards, all noexcept) it calls std::terminate: SIGABRT at exit. So no guard of ours takes
// the GIL back in a destructor, and no thread of ours asks for it once the interpreter exits:
// an atexit hook (it runs before finalisation begins, holding the GIL) marks the exit and waits,
// with the GIL released, for every thread that is already taking it back; a thread that comes
// to take it later parks for good instead (the process is exiting; it holds no lock of ours).
#include "bindings.hpp"

#include <atomic>
#include <chrono>
#include <thread>

namespace parenchyma::python {

namespace {

// Threads between "I will take the GIL" and "I have it" (or "I gave up").
std::atomic<int> taking{0};
std::atomic<bool> exiting{false};
// The thread that ran the atexit hook (the one that finalises): it keeps taking the GIL.
std::thread::id exit_thread;

void on_exit() {
  exit_thread = std::this_thread::get_id();
  exiting.store(true, std::memory_order_seq_cst);
  if (taking.load(std::memory_order_seq_cst) == 0) return;
  // Threads that saw no exit are waiting for the GIL: let them have it, then take it back
  // (finalisation has not begun, so this cannot end the thread). Bounded: a thread stuck
  // elsewhere must not hold up the exit.
  PyThreadState* const state = PyEval_SaveThread();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (taking.load(std::memory_order_seq_cst) > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  PyEval_RestoreThread(state);
}

[[noreturn]] void park() {
  for (;;)
    std::this_thread::sleep_for(std::chrono::hours(24));
}

} // namespace

bool gil_take_begin() noexcept {
  taking.fetch_add(1, std::memory_order_seq_cst);
  if (exiting.load(std::memory_order_seq_cst) && std::this_thread::get_id() != exit_thread) {
    taking.fetch_sub(1, std::memory_order_seq_cst);
    return false;
  }
  return true;
}

void gil_take_end() noexcept { taking.fetch_sub(1, std::memory_order_seq_cst); }

void reacquire_gil(PyThreadState* state) {
  if (!gil_take_begin()) park();
  PyEval_RestoreThread(state);
  gil_take_end();
}

void install_exit_guard() {
  py::module_::import("atexit").attr("register")(py::cpp_function(&on_exit));
}

} // namespace parenchyma::python
