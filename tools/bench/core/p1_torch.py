#!/usr/bin/env python3
"""P1 peers in one GPU run: 10k alternating axpy (y += a*x) / scal (x *= s) on 1024 float32,
then one synchronize, time per op. Rounds alternate: bench_small_ops (parenchyma's C++ public
path, blas::axpy / blas::scal on SharedTensors), PyTorch eager, and parenchyma's Python binding
(parenchyma.blas.axpy / scal on the same backend). Medians over the rounds; the ratio is ours /
PyTorch's time per op (target P1: <= 0.4). Writes $PARENCHYMA_BENCH_OUT/p1_small_ops.json.
  p1_torch.py BUILD_DIR [backend, default cuda]"""
import json
import os
import statistics
import subprocess
import sys
import time

OPS, N, REPS, ROUNDS = 10000, 1024, 15, 3


def per_op(step, sync):
    sync()
    t0 = time.perf_counter_ns()
    for _ in range(OPS // 2):
        step()
    sync()
    return (time.perf_counter_ns() - t0) / OPS


def samples(step, sync):
    for _ in range(2):
        per_op(step, sync)
    return [per_op(step, sync) for _ in range(REPS)]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    backend = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    out = os.environ.get("PARENCHYMA_BENCH_OUT", ".")
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch has no CUDA device")
    except Exception as e:  # noqa: BLE001
        print(f"SKIPPED: PyTorch with CUDA is not available: {e}")
        return 77
    x = torch.randn(N, device="cuda")
    y = torch.randn(N, device="cuda")

    def tstep():
        y.add_(x, alpha=1.0001)
        x.mul_(0.9999)

    py = None
    try:
        sys.path.insert(0, os.path.join(build, "python"))
        import numpy as np
        import parenchyma
        pb = parenchyma.Backend(backend)
        px = parenchyma.from_dlpack(np.ones(N, dtype=np.float32), backend=pb)
        pyy = parenchyma.from_dlpack(np.full(N, 0.5, dtype=np.float32), backend=pb)

        def pstep():
            parenchyma.blas.axpy(pb, 1.0001, px, pyy)
            parenchyma.blas.scal(pb, 0.9999, px)
        py = (pstep, pb.synchronize)
    except Exception as e:  # noqa: BLE001
        print(f"parenchyma's Python binding not measured: {e}")
    cpp, tor, pyb = [], [], []
    env = dict(os.environ, PARENCHYMA_BENCH_OUT="/tmp")
    for r in range(ROUNDS):
        res = subprocess.run([os.path.join(build, "bin", "bench_small_ops"), backend], env=env,
                             capture_output=True, text=True, timeout=300)
        if res.returncode != 0:
            print(res.stdout, res.stderr)
            return res.returncode
        with open("/tmp/small_ops_public.json") as f:
            cpp.append(json.load(f)["results"][0]["ours_ns"])
        tor.append(statistics.median(samples(tstep, torch.cuda.synchronize)))
        if py:
            pyb.append(statistics.median(samples(*py)))
        print(f"round {r + 1}: C++ public path {cpp[-1]:.0f} ns/op, PyTorch eager {tor[-1]:.0f}"
              + (f", parenchyma Python {pyb[-1]:.0f}" if py else ""), flush=True)
    c, t = statistics.median(cpp), statistics.median(tor)
    rows = [{"name": f"P1 C++ public path ({backend}) vs PyTorch eager", "ours_ns": c,
             "peer_ns": t, "ratio": c / t, "rounds_ours": cpp, "rounds_peer": tor}]
    if py:
        p = statistics.median(pyb)
        rows.append({"name": f"P1 Python binding ({backend}) vs PyTorch eager", "ours_ns": p,
                     "peer_ns": t, "ratio": p / t, "rounds_ours": pyb, "rounds_peer": tor})
    for row in rows:
        print(f"{row['name']}: {row['ours_ns']:.0f} vs {row['peer_ns']:.0f} ns/op = "
              f"{row['ratio']:.2f}x (target <= 0.4)")
    meta = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
            "date": time.strftime("%Y-%m-%d")}
    with open(os.path.join(out, "p1_small_ops.json"), "w") as f:
        json.dump({"suite": "p1_small_ops", "meta": meta, "results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
