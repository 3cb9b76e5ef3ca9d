#!/usr/bin/env python3
"""The array extension on the host CPU against NumPy (single-threaded: NumPy's elementwise
operations and reductions use one thread), interleaved: NumPy's cases here, then
bench_array_host's in its own process, `--rounds` times; the median of each side's medians and
the ratio NumPy time / ours (> 1: ours faster).
  python3 tools/bench/array/a_numpy.py <build dir> [--rounds 5] [--n N] [--rows R] [--cols C]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def numpy_cases(n, rows, cols, reps):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, n).astype(np.float32)
    c = rng.uniform(-1, 1, n).astype(np.float32)
    d = rng.uniform(0.5, 2, n).astype(np.float32)
    y = np.empty(n, np.float32)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    half = np.float32(0.5)

    def chain8():
        np.multiply(a, c, out=y)
        y[...] = np.sin(y + d) * half - np.abs(a) / d + c * c

    cases = {
        "chain8": chain8,
        "sum_last": lambda: x.sum(axis=1),
        "sum_first": lambda: x.sum(axis=0),
        "max_last": lambda: x.max(axis=1),
        "argmax_last": lambda: x.argmax(axis=1),
        "var_last": lambda: x.var(axis=1),
        "normal": lambda: rng.standard_normal(n, dtype=np.float32),
    }
    out = {}
    for name, f in cases.items():
        f()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter_ns()
            f()
            t.append(time.perf_counter_ns() - t0)
        out[name] = statistics.median(t)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--rows", type=int, default=1024)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--backend", default="native")
    a = ap.parse_args()
    exe = os.path.join(a.build, "bin", "bench_array_host")
    ours, peer = {}, {}
    for _ in range(a.rounds):
        for k, v in numpy_cases(a.n, a.rows, a.cols, 7).items():
            peer.setdefault(k, []).append(v)
        res = subprocess.run([exe, "--backend", a.backend, "--n", str(a.n), "--rows", str(a.rows),
                              "--cols", str(a.cols), "--reps", "7"], capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr, file=sys.stderr)
            return 1
        for line in res.stdout.splitlines():
            r = json.loads(line)
            ours.setdefault(r["case"], []).append(r["ns"])
    print("numpy %s, %d cores; n = %d, matrix %d x %d, f32; backend %s" %
          (np.__version__, os.cpu_count(), a.n, a.rows, a.cols, a.backend))
    print("%-12s %12s %12s %8s" % ("case", "numpy ms", "ours ms", "ratio"))
    rows = []
    for k in peer:
        p, o = statistics.median(peer[k]), statistics.median(ours[k])
        rows.append({"case": k, "numpy_ns": p, "ours_ns": o, "numpy_over_ours": p / o})
        print("%-12s %12.2f %12.2f %7.2fx" % (k, p / 1e6, o / 1e6, p / o))
    out = os.environ.get("PARENCHYMA_BENCH_OUT", ".")
    with open(os.path.join(out, "a_numpy.json"), "w") as f:
        json.dump({"suite": "a_numpy", "numpy": np.__version__, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
