// The core's one-line progress indicator for slow steps (a bundle's first use, which compiles
// its kernels), also used by the benchmarks (tools/bench); not an installed header: plugins never
// print (they log through the host), and applications see the line only through the core.
//
//   detail::progress_line p("setting up nn_cuda on cuda:0 (first use compiles its kernels)");
//   ... slow work ...; p.update("another text");   // the line is erased when p goes
//
// On a terminal (stderr) it stays silent for `delay` (steps that end sooner show nothing), then
// writes "\r[parenchyma] <text> 3 s" about every 250 ms, and erases the line when destroyed.
// Quiet when stderr is not a terminal. PARENCHYMA_PROGRESS=0 turns it off, =1 forces it on (also
// when not a terminal: for tests and logs); ignored in set-uid processes (sdk::settings).
// The helper thread lives only as long as the object: it is joined in the destructor.
// Threads: one progress_line is used by the thread that made it; any number may exist.
#pragma once

#include <parenchyma/sdk/common.hpp>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace parenchyma {
inline namespace v1 {
namespace detail {

class progress_line {
public:
  explicit progress_line(std::string text,
                         std::chrono::milliseconds delay = std::chrono::milliseconds(1000),
                         int fd = 2)
      : text_(std::move(text)), fd_(fd), delay_(delay) {
    if (!enabled(fd)) return;
    start_ = std::chrono::steady_clock::now();
    thread_ = std::thread([this] { run(); });
  }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  ~progress_line() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Replaces the text (shown from the next refresh).
  void update(std::string text) {
    if (!thread_.joinable()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    text_ = std::move(text);
  }
  // Erases the line now (before printing something else on the terminal); the next refresh
  // draws it again.
  void erase() {
    if (!thread_.joinable()) return;
    std::lock_guard<std::mutex> lock(mutex_);
    erase_locked();
  }
  bool active() const noexcept { return thread_.joinable(); }

  // Whether a line would be shown on `fd`: PARENCHYMA_PROGRESS, else whether fd is a terminal.
  static bool enabled(int fd) {
    const std::string v =
        sdk::settings().get("PARENCHYMA_PROGRESS"); // the environment, set-uid safe
    if (!v.empty()) return v != "0";
    return isatty(fd) == 1;
  }

private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (cv_.wait_for(lock, delay_, [this] { return stop_; })) return; // done before the delay
    do {
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::steady_clock::now() - start_)
                            .count();
      std::string line = "\r[parenchyma] " + text_ + " " + std::to_string(secs) + " s";
      const size_t len = line.size() - 1;
      if (len < shown_) line.append(shown_ - len, ' '); // cover a longer earlier text
      shown_ = len;
      write_all(line);
    } while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stop_; }));
    erase_locked();
  }
  void erase_locked() {
    if (shown_ == 0) return;
    write_all("\r" + std::string(shown_, ' ') + "\r");
    shown_ = 0;
  }
  void write_all(const std::string& s) const {
    const char* p = s.data();
    size_t left = s.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n <= 0) return; // a closed or full terminal: give up quietly
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  std::string text_;
  const int fd_;
  const std::chrono::milliseconds delay_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  size_t shown_ = 0; // characters of the line on the terminal now
  std::thread thread_;
};

} // namespace detail
} // namespace v1
} // namespace parenchyma
