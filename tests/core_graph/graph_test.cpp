// Replayable graphs on one framework's backend (--backend native|opencl|cuda|vulkan): a replay
// gives what the same ops give one by one (checked against a double-precision loop), replays again,
// picks up host writes made between replays, refuses a tensor resized, reshaped or destroyed
// after recording (running nothing), refuses an op that would fall back to another framework
// and anything that waits while recording, and leaves the backend working after a failed
// recording. Exit 77 (skipped) where the framework has no device here.
#include "support/catch.hpp"
#include "support/catch_run.hpp"
#include "support/sandbox.hpp"

#include <parenchyma/blas.hpp>
#include <parenchyma/graph.hpp>
#include <parenchyma/parenchyma.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

using namespace parenchyma;
namespace blas = parenchyma::blas;

namespace {

std::string g_framework = "native";

Backend& backend() {
  static Backend b(g_framework);
  return b;
}

std::mt19937 rng{12345};

std::vector<double> random_values(size_t n) {
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v)
    x = u(rng);
  return v;
}
void put(SharedTensor<float>& t, const std::vector<double>& v) {
  auto w = t.write_only();
  for (size_t i = 0; i < v.size(); ++i)
    w[i] = static_cast<float>(v[i]);
}
void expect_close(const SharedTensor<float>& t, const std::vector<double>& want) {
  auto r = t.read();
  REQUIRE(r.size() == want.size());
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::fabs(r[i] - want[i]) <= 1e-4 * (1 + std::fabs(want[i])))) ++bad;
  CHECK(bad == 0);
}
std::vector<float> snapshot(const SharedTensor<float>& t) {
  auto s = t.read();
  return {s.begin(), s.end()};
}

// Runs f, which must throw errc `code` with every piece of `needles` in its message.
void expect_error(const std::function<void()>& f, errc code, std::vector<std::string> needles) {
  try {
    f();
    FAIL("no error thrown");
  } catch (const parenchyma::error& e) {
    INFO(e.what());
    CHECK(e.code() == code);
    for (const auto& n : needles)
      CHECK(std::string(e.what()).find(n) != std::string::npos);
  }
}

// The chain: z = x; y += 2 z; y *= 0.5; z = 0.25 y + (-1.5) z; y += z (as doubles).
void chain_ref(const std::vector<double>& x, std::vector<double>& y, std::vector<double>& z) {
  for (size_t i = 0; i < x.size(); ++i) {
    z[i] = x[i];
    y[i] += 2 * z[i];
    y[i] *= 0.5;
    z[i] = 0.25 * y[i] - 1.5 * z[i];
    y[i] += z[i];
  }
}
void chain_ops(const Backend& b, SharedTensor<float>& x, SharedTensor<float>& y,
               SharedTensor<float>& z) {
  blas::copy(b, x, z);
  blas::axpy(b, 2.0f, z, y);
  blas::scal(b, 0.5f, y);
  blas::axpby(b, 0.25f, y, -1.5f, z);
  blas::axpy(b, 1.0f, z, y);
}

graph_kind expected_kind() {
  // Framework graphs: CUDA graphs, Vulkan command buffers replayed with one submit.
  return g_framework == "cuda" || g_framework == "vulkan" ? graph_kind::framework_graph
                                                          : graph_kind::command_list;
}

} // namespace

TEST_CASE("a replay equals the ops one by one, twice, and recording runs nothing", "[graph]") {
  for (size_t n : {size_t{1}, size_t{37}, size_t{1000}, size_t{4099}}) {
    INFO("n = " << n);
    const Backend& b = backend();
    SharedTensor<float> x({static_cast<int64_t>(n)}), y({static_cast<int64_t>(n)}),
        z({static_cast<int64_t>(n)});
    auto xv = random_values(n), yv = random_values(n), zv = random_values(n);
    put(x, xv);
    put(y, yv);
    put(z, zv);
    const auto y0 = snapshot(y);
    Graph g = Graph::record(b, [&] { chain_ops(b, x, y, z); });
    CHECK(g.op_count() == 5);
    CHECK(g.kind() == expected_kind());
    CHECK(snapshot(y) == y0); // nothing ran
    g.replay();
    chain_ref(xv, yv, zv);
    expect_close(y, yv);
    expect_close(z, zv);
    g.replay(); // again, on what the first replay left
    chain_ref(xv, yv, zv);
    expect_close(y, yv);
    expect_close(z, zv);
    // The same ops one by one agree with the graph.
    chain_ops(b, x, y, z);
    chain_ref(xv, yv, zv);
    expect_close(y, yv);
  }
}

TEST_CASE("axpy then scal, replayed ten times, against a double loop", "[graph]") {
  const Backend& b = backend();
  const size_t n = 3001;
  SharedTensor<float> x({static_cast<int64_t>(n)}), y({static_cast<int64_t>(n)});
  auto xv = random_values(n), yv = random_values(n);
  put(x, xv);
  put(y, yv);
  Graph g = Graph::record(b, [&] {
    blas::axpy(b, 0.75f, x, y);
    blas::scal(b, 0.5f, y);
  });
  CHECK(g.op_count() == 2);
  CHECK(g.kind() == expected_kind());
  for (int round = 0; round < 10; ++round) {
    g.replay();
    for (size_t i = 0; i < n; ++i)
      yv[i] = 0.5 * (yv[i] + 0.75 * xv[i]);
  }
  expect_close(y, yv);
  expect_close(x, xv);
}

TEST_CASE("host writes between replays are picked up", "[graph]") {
  const Backend& b = backend();
  SharedTensor<float> x({777}), y({777}), z({777});
  auto xv = random_values(777), yv = random_values(777), zv = random_values(777);
  put(x, xv);
  put(y, yv);
  put(z, zv);
  Graph g = Graph::record(b, [&] { chain_ops(b, x, y, z); });
  for (int round = 0; round < 3; ++round) {
    xv = random_values(777);
    yv = random_values(777);
    put(x, xv);
    put(y, yv);
    g.replay();
    chain_ref(xv, yv, zv);
    expect_close(y, yv);
    expect_close(z, zv);
  }
}

TEST_CASE("a command list can be asked for on any backend", "[graph]") {
  const Backend& b = backend();
  SharedTensor<float> x({129}), y({129}), z({129});
  auto xv = random_values(129), yv = random_values(129), zv = random_values(129);
  put(x, xv);
  put(y, yv);
  put(z, zv);
  Graph g = Graph::record(
      b, [&] { chain_ops(b, x, y, z); }, graph_kind::command_list);
  CHECK(g.kind() == graph_kind::command_list);
  g.replay();
  chain_ref(xv, yv, zv);
  expect_close(y, yv);
  if (expected_kind() == graph_kind::command_list)
    expect_error(
        [&] {
          (void)Graph::record(
              b, [] {}, graph_kind::framework_graph);
        },
        errc::unsupported, {"no graphs"});
}

TEST_CASE("a tensor resized, reshaped or destroyed after recording: replay refuses, runs nothing",
          "[graph]") {
  const Backend& b = backend();
  SharedTensor<float> x({64}), y({64});
  put(x, random_values(64));
  put(y, random_values(64));
  Graph g = Graph::record(b, [&] {
    blas::axpy(b, 3.0f, x, y);
    blas::scal(b, 2.0f, x);
  });
  g.replay();
  const auto x1 = snapshot(x);
  y.resize({65});
  put(y, random_values(65));
  const auto y1 = snapshot(y);
  expect_error([&] { g.replay(); }, errc::invalid_argument, {"blas.axpy", "y", "resized"});
  CHECK(snapshot(x) == x1); // scal did not run either
  CHECK(snapshot(y) == y1);

  SharedTensor<float> a({16});
  put(a, random_values(16));
  Graph g2 = Graph::record(b, [&] { blas::scal(b, 2.0f, a); });
  a.reshape({4, 4});
  expect_error([&] { g2.replay(); }, errc::invalid_argument, {"blas.scal", "x", "reshaped"});

  Graph g3;
  SharedTensor<float> keep({16});
  put(keep, random_values(16));
  const auto k0 = snapshot(keep);
  {
    SharedTensor<float> gone({16});
    put(gone, random_values(16));
    g3 = Graph::record(b, [&] {
      blas::scal(b, 2.0f, keep);
      blas::axpy(b, 1.0f, keep, gone);
    });
  }
  expect_error([&] { g3.replay(); }, errc::invalid_argument, {"blas.axpy", "destroyed"});
  CHECK(snapshot(keep) == k0);
  expect_error([&] { Graph().replay(); }, errc::invalid_argument, {"empty"});
}

TEST_CASE("what cannot be recorded is refused, and the backend works after", "[graph]") {
  const Backend& b = backend();
  SharedTensor<float> x({50}), y({50});
  auto xv = random_values(50), yv = random_values(50);
  put(x, xv);
  put(y, yv);
  const auto y0 = snapshot(y);
  expect_error(
      [&] {
        (void)Graph::record(b, [&] {
          blas::axpy(b, 1.0f, x, y);
          b.synchronize();
        });
      },
      errc::invalid_argument, {"synchronize", "records a graph"});
  expect_error(
      [&] {
        (void)Graph::record(b, [&] {
          blas::axpy(b, 1.0f, x, y);
          (void)y.read();
        });
      },
      errc::invalid_argument, {"host access", "records a graph"});
  expect_error(
      [&] {
        (void)Graph::record(b, [&] {
          blas::axpy(b, 1.0f, x, y);
          throw error(errc::internal, "test", "thrown by the recorded function");
        });
      },
      errc::internal, {"thrown by the recorded function"});
  expect_error([&] { (void)Graph::record(b, [&] { (void)Graph::record(b, [] {}); }); },
               errc::invalid_argument, {"do not nest"});
  // A bad call inside a recording throws as it would outside.
  SharedTensor<float> w({51});
  put(w, random_values(51));
  expect_error([&] { (void)Graph::record(b, [&] { blas::axpy(b, 1.0f, x, w); }); },
               errc::invalid_argument, {"blas.axpy"});
  CHECK(snapshot(y) == y0);  // nothing ran
  blas::axpy(b, 2.0f, x, y); // and the backend works as before
  for (size_t i = 0; i < yv.size(); ++i)
    yv[i] += 2 * xv[i];
  expect_close(y, yv);
  b.synchronize();
}

using test::have_plugin;

TEST_CASE("an op that falls back to another framework cannot be recorded", "[graph]") {
  if (g_framework != "native") return; // one run is enough: the sandbox is the same everywhere
  if (!have_plugin("parenchyma-opencl.so") || !have_plugin("parenchyma-blas-opencl.so")) {
    WARN("no OpenCL plugin built: the fallback case is not exercised");
    return;
  }
  // native without a BLAS bundle: its BLAS ops fall back to OpenCL.
  test::plugin_sandbox s(
      {"parenchyma-native.so", "parenchyma-opencl.so", "parenchyma-blas-opencl.so"},
      R"({"fallback": "allow", "log_level": "off"})");
  Registry reg(s.options());
  const Framework* cl = reg.find_framework("opencl");
  if (cl == nullptr || cl->devices().empty()) {
    WARN("no OpenCL device: the fallback case is not exercised");
    return;
  }
  Backend b(reg, "native");
  SharedTensor<float> x({40}), y({40});
  auto xv = random_values(40), yv = random_values(40);
  put(x, xv);
  put(y, yv);
  expect_error([&] { (void)Graph::record(b, [&] { blas::axpy(b, 1.0f, x, y); }); },
               errc::unsupported, {"blas.axpy", "falls back", "one queue"});
  blas::axpy(b, 1.0f, x, y); // outside a recording the fallback works
  for (size_t i = 0; i < yv.size(); ++i)
    yv[i] += xv[i];
  expect_close(y, yv);
}

TEST_CASE("stress: a long random graph replayed several times", "[graph]") {
  const Backend& b = backend();
  constexpr size_t n = 301, tensors = 4, ops = 400;
  std::vector<SharedTensor<float>> t;
  std::vector<std::vector<double>> v;
  for (size_t i = 0; i < tensors; ++i) {
    t.emplace_back(std::vector<int64_t>{static_cast<int64_t>(n)});
    v.push_back(random_values(n));
    put(t.back(), v.back());
  }
  struct step {
    int kind;
    size_t a, c;
    float s;
  };
  std::vector<step> plan;
  std::uniform_int_distribution<size_t> pick(0, tensors - 1);
  std::uniform_int_distribution<int> which(0, 2);
  for (size_t i = 0; i < ops; ++i) {
    step s{which(rng), pick(rng), pick(rng), 0};
    while (s.c == s.a)
      s.c = pick(rng);
    s.s = s.kind == 1 ? 0.999f : 0.001f; // keeps the values bounded
    plan.push_back(s);
  }
  Graph g = Graph::record(b, [&] {
    for (const step& s : plan) {
      if (s.kind == 0) blas::axpy(b, s.s, t[s.a], t[s.c]);
      if (s.kind == 1) blas::scal(b, s.s, t[s.a]);
      if (s.kind == 2) blas::copy(b, t[s.a], t[s.c]);
    }
  });
  CHECK(g.op_count() == ops);
  for (int round = 0; round < 3; ++round) {
    g.replay();
    for (const step& s : plan)
      for (size_t i = 0; i < n; ++i) {
        if (s.kind == 0) v[s.c][i] += s.s * v[s.a][i];
        if (s.kind == 1) v[s.a][i] *= s.s;
        if (s.kind == 2) v[s.c][i] = v[s.a][i];
      }
  }
  for (size_t i = 0; i < tensors; ++i)
    expect_close(t[i], v[i]);
}

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
      g_framework = argv[++i];
      continue;
    }
    rest.push_back(argv[i]);
  }
  try {
    const Framework* f = Registry::global().find_framework(g_framework);
    if (f == nullptr || f->devices().empty()) {
      std::printf("SKIPPED: %s: %s\n", g_framework.c_str(),
                  f == nullptr ? "the plugin is not loaded here" : f->reason().c_str());
      return 77;
    }
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  return parenchyma_test::run_catch(static_cast<int>(rest.size()), rest.data());
}
