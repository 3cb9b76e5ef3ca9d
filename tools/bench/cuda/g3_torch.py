#!/usr/bin/env python3
"""G3 peer: PyTorch eager (and CuPy, when installed) small-op rate on the same ops as
bench_cuda_dispatch's G3: 10k alternating axpy (y += a*x) and scal (x *= s) on 1024 float32,
then one synchronize; prints the median time per op over 15 samples and writes JSON to
$PARENCHYMA_BENCH_OUT/cuda_g3_peers.json."""
import json
import os
import statistics
import time

OPS, N, REPS = 10000, 1024, 15


def sample(step, sync):
    sync()
    t0 = time.perf_counter_ns()
    for _ in range(OPS // 2):
        step()
    sync()
    return (time.perf_counter_ns() - t0) / OPS


def measure(name, step, sync):
    for _ in range(2):
        sample(step, sync)
    xs = [sample(step, sync) for _ in range(REPS)]
    xs.sort()
    med = statistics.median(xs)
    print(f"G3 {name:<28} {med:9.1f} ns/op  [p10 {xs[len(xs) // 10]:.1f}  p90 {xs[(9 * len(xs)) // 10]:.1f}]",
          flush=True)
    return {"name": name, "ns_per_op": med, "p10": xs[len(xs) // 10], "p90": xs[(9 * len(xs)) // 10]}


def main():
    results, meta = [], {}
    try:
        import torch
        meta["torch"] = torch.__version__
        meta["device"] = torch.cuda.get_device_name(0)
        x = torch.randn(N, device="cuda")
        y = torch.randn(N, device="cuda")

        def step():
            y.add_(x, alpha=1.0001)
            x.mul_(0.9999)

        results.append(measure("pytorch eager", step, torch.cuda.synchronize))
    except Exception as e:  # noqa: BLE001 - report and go on to CuPy
        print(f"PyTorch not measured: {e}")
    try:
        import cupy
        meta["cupy"] = cupy.__version__
        cx = cupy.random.standard_normal(N, dtype=cupy.float32)
        cy = cupy.random.standard_normal(N, dtype=cupy.float32)
        a = cupy.float32(1.0001)
        s = cupy.float32(0.9999)

        def cstep():
            cupy.add(cy, a * cx, out=cy)  # two kernels: CuPy has no fused axpy in eager mode
            cupy.multiply(cx, s, out=cx)

        results.append(measure("cupy (3 kernels / 2 ops)", cstep,
                               cupy.cuda.runtime.deviceSynchronize))
    except Exception as e:  # noqa: BLE001
        print(f"CuPy not measured: {e}")
    out = os.environ.get("PARENCHYMA_BENCH_OUT", ".")
    with open(os.path.join(out, "cuda_g3_peers.json"), "w") as f:
        json.dump({"suite": "cuda_g3_peers", "meta": meta, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
