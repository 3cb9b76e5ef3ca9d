#!/usr/bin/env python3
"""G10 peer: torch.matmul sgemm/dgemm 64..8192 (and f16/bf16 "hgemm"/"bgemm" at 256, 1024, 4096,
8192: f32 accumulation, as cuBLAS's default for half matmul) on the GPU, timed with CUDA events, printed in
the same units as bench_blas_cuda (ns per call, GFLOP/s). Run on the GPU machine:
    python3 tools/bench/blas/g10_torch.py [--quick]
Writes $PARENCHYMA_BENCH_OUT/g10_torch.json (or ./g10_torch.json)."""
import json
import os
import statistics
import sys

import torch


def time_ns(fn, inner):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e6 / inner


def main():
    quick = "--quick" in sys.argv
    reps = 15 if quick else 21
    torch.backends.cuda.matmul.allow_tf32 = False  # plain fp32, as cuBLAS sgemm in the C++ bench
    # Half matmul with f32 reductions only, as ours (CUBLAS_COMPUTE_32F, no split-k in 16 bits).
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    results = []
    print(f"# G10 torch.matmul on {torch.cuda.get_device_name()} (torch {torch.__version__})")
    for n in (64, 128, 256, 512, 1024, 2048, 4096, 8192):
        halves = (torch.float16, torch.bfloat16) if n in (256, 1024, 4096, 8192) else ()
        for dtype in (torch.float32, torch.float64) + halves:
            a = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
            b = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
            c = torch.empty(n, n, device="cuda", dtype=dtype)
            inner = 50 if n <= 512 else 5 if n <= 2048 else 1
            fn = lambda: torch.matmul(a, b, out=c)
            for _ in range(3):
                time_ns(fn, inner)
            samples = [time_ns(fn, inner) for _ in range(reps)]
            med = statistics.median(samples)
            name = {torch.float32: "sgemm ", torch.float64: "dgemm ", torch.float16: "hgemm ",
                    torch.bfloat16: "bgemm "}[dtype] + str(n)
            gflops = 2.0 * n ** 3 / med
            print(f"{name:<24} torch {med:14.1f} ns  {gflops:10.1f} GFLOP/s")
            results.append({"name": name, "torch_ns": med, "gflops": gflops})
    out = os.path.join(os.environ.get("PARENCHYMA_BENCH_OUT", "."), "g10_torch.json")
    with open(out, "w") as f:
        json.dump({"suite": "g10_torch", "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(), "results": results}, f, indent=2)
    print("wrote", out)


if __name__ == "__main__":
    main()
