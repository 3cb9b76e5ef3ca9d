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
#include <cstdlib>
#include <thread>

namespace parenchyma::python {

namespace {

// Threads between "I will take the GIL" and "I have it" (or "I gave up").
std::atomic<int> taking{0};
// Threads running runtime code with the GIL released (without_gil's f).
std::atomic<int> inside{0};
std::atomic<bool> exiting{false};
// The thread that ran the atexit hook (the one that finalises): it keeps taking the GIL.
std::thread::id exit_thread;

// The C library's exit handlers run after finalisation, when no thread can start a call (the
// GIL is gone); one registered here runs before the global registry's destructor (registered
// when it was made, earlier). A daemon thread still inside a call then (on_exit's wait timed
// out) uses its plugins: the registry is left loaded rather than shut down under it.
void at_process_exit() {
  if (inside.load(std::memory_order_seq_cst) > 0) Registry::keep_global_at_exit();
}

void on_exit() {
  exit_thread = std::this_thread::get_id();
  std::atexit(&at_process_exit);
  exiting.store(true, std::memory_order_seq_cst);
  // Threads that saw no exit are waiting for the GIL: let them have it, then take it back
  // (finalisation has not begun, so this cannot end the thread). Threads inside a runtime call
  // finish it first: the exit handlers that follow destroy libraries' statics (CLBlast's
  // kernel database: a crash in about one exit in 240 with a daemon thread in an op on PoCL).
  // Each such thread then parks when it comes back for the GIL, so the loop ends; bounded: a
  // thread stuck elsewhere must not hold up the exit.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto busy = [] {
    return taking.load(std::memory_order_seq_cst) > 0 || inside.load(std::memory_order_seq_cst) > 0;
  };
  while (busy() && std::chrono::steady_clock::now() < deadline) {
    PyThreadState* const state = PyEval_SaveThread();
    while (busy() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    PyEval_RestoreThread(state);
  }
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

void runtime_call_begin() noexcept { inside.fetch_add(1, std::memory_order_seq_cst); }
void runtime_call_end() noexcept { inside.fetch_sub(1, std::memory_order_seq_cst); }

void reacquire_gil(PyThreadState* state) {
  if (!gil_take_begin()) park();
  PyEval_RestoreThread(state);
  gil_take_end();
}

void install_exit_guard() {
  py::module_::import("atexit").attr("register")(py::cpp_function(&on_exit));
}

} // namespace parenchyma::python
