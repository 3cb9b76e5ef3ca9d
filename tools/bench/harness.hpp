// parenchyma benchmark harness: interleaved A/B ratios in one process (docs/performance.md).
//
//   bench::suite s("c1_native_dispatch");           // name of the JSON file / table
//   s.meta("openblas", "0.3.21");                     // versions, threads, nproc...
//   s.compare("axpy n=1", peer_fn, ours_fn, {.reps = 31, .inner = 1000});
//   s.write();                                        // prints a table, writes JSON
//
// compare() warms both up, then alternates peer, ours, peer, ours ... `reps` times; each sample
// times `inner` back-to-back calls. It reports per-call medians, the median ratio ours/peer with
// p10/p90, and the difference in ns per call. JSON goes to $PARENCHYMA_BENCH_OUT (a directory)
// or the current directory, as <suite>.json.
#pragma once

#include "progress.hpp" // the core's (core/src)

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench {

struct options {
  int reps = 21;    // interleaved samples of each side (>= 15)
  long inner = 1;   // calls per sample
  int warmup = 3;   // untimed samples of each side first
  double bytes = 0; // bytes moved per call: adds GB/s columns
  double flops = 0; // floating-point operations per call: adds GFLOP/s columns
};

struct result {
  std::string name;
  double peer_ns = 0, ours_ns = 0;    // median per call
  double ratio = 0, p10 = 0, p90 = 0; // ours/peer time
  double delta_ns = 0;                // ours - peer per call (median of differences)
  double bytes = 0, flops = 0;
  std::string peer_label, ours_label;
};

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

class suite {
public:
  explicit suite(std::string name)
      : name_(std::move(name)), progress_(name_ + ": starting", std::chrono::milliseconds(500)) {
    meta("nproc", std::to_string(std::thread::hardware_concurrency()));
  }
  void meta(const std::string& key, const std::string& value) { meta_.emplace_back(key, value); }

  // Times one call of f per inner iteration; returns ns per call.
  template <class F> static double time_ns(F& f, long inner) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < inner; ++i)
      f();
    const auto t1 = std::chrono::steady_clock::now();
    return std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(inner);
  }

  // A custom sampler returns ns per call itself (device events, say).
  result compare_sampled(const std::string& name, const std::function<double()>& peer,
                         const std::function<double()>& ours, options o = {},
                         std::string peer_label = "peer", std::string ours_label = "parenchyma") {
    // On a terminal, one line on stderr says where a long run is (the core's progress_line).
    const std::string where = name_ + " #" + std::to_string(results_.size() + 1) + " " + name;
    progress_.update(where + ": warm-up");
    for (int i = 0; i < o.warmup; ++i) {
      peer();
      ours();
    }
    std::vector<double> p, q, ratio, delta;
    for (int i = 0; i < o.reps; ++i) {
      if (progress_.active())
        progress_.update(where + ": sample " + std::to_string(i + 1) + "/" +
                         std::to_string(o.reps));
      const double a = peer();
      const double b = ours();
      p.push_back(a);
      q.push_back(b);
      ratio.push_back(b / a);
      delta.push_back(b - a);
    }
    result r;
    r.name = name;
    r.peer_ns = percentile(p, 0.5);
    r.ours_ns = percentile(q, 0.5);
    r.ratio = percentile(ratio, 0.5);
    r.p10 = percentile(ratio, 0.1);
    r.p90 = percentile(ratio, 0.9);
    r.delta_ns = percentile(delta, 0.5);
    r.bytes = o.bytes;
    r.flops = o.flops;
    r.peer_label = std::move(peer_label);
    r.ours_label = std::move(ours_label);
    results_.push_back(r);
    progress_.erase();
    print(r);
    return r;
  }

  template <class P, class Q>
  result compare(const std::string& name, P peer, Q ours, options o = {},
                 std::string peer_label = "peer", std::string ours_label = "parenchyma") {
    return compare_sampled(
        name, [&] { return time_ns(peer, o.inner); }, [&] { return time_ns(ours, o.inner); }, o,
        std::move(peer_label), std::move(ours_label));
  }

  void print(const result& r) const {
    std::printf("%-44s %-10s %12.1f ns  %-10s %12.1f ns  ratio %.3f [p10 %.3f p90 %.3f]  %+.1f ns",
                r.name.c_str(), r.peer_label.c_str(), r.peer_ns, r.ours_label.c_str(), r.ours_ns,
                r.ratio, r.p10, r.p90, r.delta_ns);
    if (r.bytes > 0) std::printf("  %.2f/%.2f GB/s", r.bytes / r.peer_ns, r.bytes / r.ours_ns);
    if (r.flops > 0) std::printf("  %.1f/%.1f GFLOP/s", r.flops / r.peer_ns, r.flops / r.ours_ns);
    std::printf("\n");
    std::fflush(stdout);
  }

  // Writes <dir>/<suite>.json; returns the path.
  std::string write() const {
    const char* dir = std::getenv("PARENCHYMA_BENCH_OUT");
    std::string path = std::string(dir && *dir ? dir : ".") + "/" + name_ + ".json";
    std::ofstream os(path);
    os << "{\n  \"suite\": \"" << name_ << "\",\n  \"meta\": {";
    for (size_t i = 0; i < meta_.size(); ++i)
      os << (i ? ", " : "") << "\"" << meta_[i].first << "\": \"" << escape(meta_[i].second)
         << "\"";
    os << "},\n  \"results\": [\n";
    for (size_t i = 0; i < results_.size(); ++i) {
      const result& r = results_[i];
      os << "    {\"name\": \"" << escape(r.name) << "\", \"peer\": \"" << r.peer_label
         << "\", \"ours\": \"" << r.ours_label << "\", \"peer_ns\": " << r.peer_ns
         << ", \"ours_ns\": " << r.ours_ns << ", \"ratio\": " << r.ratio
         << ", \"ratio_p10\": " << r.p10 << ", \"ratio_p90\": " << r.p90
         << ", \"delta_ns\": " << r.delta_ns << ", \"bytes\": " << r.bytes
         << ", \"flops\": " << r.flops << "}" << (i + 1 < results_.size() ? "," : "") << "\n";
    }
    os << "  ]\n}\n";
    std::printf("wrote %s\n", path.c_str());
    return path;
  }
  const std::vector<result>& results() const { return results_; }

private:
  static std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o;
  }
  std::string name_;
  std::vector<std::pair<std::string, std::string>> meta_;
  std::vector<result> results_;
  parenchyma::detail::progress_line progress_;
};

} // namespace bench
