#!/usr/bin/env python3
"""N1-N4, N6 peer: the cases of bench_nn_cuda in PyTorch 2.x eager on the GPU, timed with CUDA
events (warm-up, then the median of 21 samples, each a burst of calls lasting about 2 ms), with
the same case names, so tools/bench/nn/compare.py can join both files. fp32 rows are strict
(torch.backends.cudnn.allow_tf32 = False, torch.backends.cuda.matmul.allow_tf32 = False); the
"tf32" convolution rows allow TF32; f16 / bf16 rows run in those dtypes. cudnn.benchmark is on
(PyTorch then measures cuDNN's algorithms once per shape, as the Convolution does).
    python3 tools/bench/nn/n_torch.py [--quick] [--only REGEX]   only the cases whose name matches
    python3 tools/bench/nn/n_torch.py --smoke   every case on the CPU at small sizes, host-timed:
                                                checks the script runs (no figures; no JSON)
Writes $PARENCHYMA_BENCH_OUT/n_torch.json (or ./n_torch.json). Exit 77 with the reason when torch
or a CUDA device is absent."""
import json
import os
import statistics
import sys
import time

SKIP = 77


def main():
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"skipped: PyTorch is not installed ({e})")
        return SKIP
    smoke = "--smoke" in sys.argv
    if not smoke and not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} ({sys.executable}) sees no CUDA device")
        return SKIP
    quick = "--quick" in sys.argv
    only = None
    if "--only" in sys.argv:
        import re
        only = re.compile(sys.argv[sys.argv.index("--only") + 1])
    reps = 3 if smoke else 15 if quick else 21
    dev = "cpu" if smoke else "cuda"

    def small(v, by):  # the smoke run's sizes
        return max(1, v // by) if smoke else v
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    results, failed = [], []
    device_name = "CPU (smoke run)" if smoke else torch.cuda.get_device_name()
    print(f"# N1-N4, N6 PyTorch {torch.__version__} eager on {device_name}, "
          f"cuDNN {torch.backends.cudnn.version()}")

    def time_ns(fn, inner):
        if smoke:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            return (time.perf_counter() - t0) * 1e9 / inner
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e6 / inner

    def case(name, fn):
        if only is not None and not only.search(name):
            return
        try:
            fn()
            if not smoke:
                torch.cuda.synchronize()
            one = time_ns(fn, 1)
            inner = 1 if smoke else max(1, min(200, int(2e6 / max(one, 1.0))))
            for _ in range(2):
                time_ns(fn, inner)
            samples = sorted(time_ns(fn, inner) for _ in range(reps))
            med = statistics.median(samples)
            p10 = samples[int(0.1 * (len(samples) - 1))]
            p90 = samples[int(round(0.9 * (len(samples) - 1)))]
            print(f"{name:<44} torch {med:14.1f} ns  [p10 {p10:.1f} p90 {p90:.1f}]", flush=True)
            results.append({"name": name, "torch_ns": med, "p10_ns": p10, "p90_ns": p90})
        except Exception as e:  # a cell torch cannot run here: say so and go on
            print(f"{name:<44} unavailable: {type(e).__name__}: {e}", flush=True)
            failed.append(name)

    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

    def rand(shape, dt="f32", scale=1.0):
        return ((torch.rand(shape, device=dev) * 2 - 1) * scale).to(dtypes[dt])

    # N1: elementwise and gradients (computed from the forward's output, as autograd does).
    n = small(64 << 20, 64)
    halves = ("bf16",) if smoke else ("f16", "bf16")  # torch's CPU kernels lack many f16 ops
    for dt in ("f32",) + halves:
        x, dy = rand(n, dt), rand(n, dt)
        sz = f" 64M {dt}"
        y = torch.relu(x)
        case("relu" + sz, lambda: torch.relu(x))
        case("relu_grad" + sz, lambda: torch.ops.aten.threshold_backward(dy, y, 0))
        ys = torch.sigmoid(x)
        case("sigmoid" + sz, lambda: torch.sigmoid(x))
        case("sigmoid_grad" + sz, lambda: torch.ops.aten.sigmoid_backward(dy, ys))
        yt = torch.tanh(x)
        case("tanh" + sz, lambda: torch.tanh(x))
        case("tanh_grad" + sz, lambda: torch.ops.aten.tanh_backward(dy, yt))
        del x, dy, y, ys, yt
    x, dy = rand(n), rand(n)
    _, mask = torch.ops.aten.native_dropout(x, 0.5, True)
    case("dropout 64M f32", lambda: torch.ops.aten.native_dropout(x, 0.5, True))
    case("dropout_grad 64M f32", lambda: torch.ops.aten.native_dropout_backward(dy, mask, 2.0))
    del x, dy, mask

    # N2: softmax along the last axis.
    for rows, cols, dts in ((4096, 16384, ("f32",) + halves), (65536, 1000, ("f32",))):
        for dt in dts:
            x = rand((small(rows, 64), cols), dt, 4.0)
            case(f"softmax {rows}x{cols} {dt}", lambda: torch.softmax(x, 1))
            case(f"log_softmax {rows}x{cols} {dt}", lambda: torch.log_softmax(x, 1))
            del x

    # N7: layer_norm and rms_norm over the last axis, and their gradients (aten's backward
    # kernels for layer_norm; autograd of F.rms_norm with its graph kept).
    for rows, cols, dts in ((4096, 4096, ("f32",) + halves), (65536, 768, ("f32",))):
        for dt in dts:
            x, dy = rand((small(rows, 64), cols), dt), rand((small(rows, 64), cols), dt)
            w, b = rand(cols, dt) + 1, rand(cols, dt)
            sz = f" {rows}x{cols} {dt}"
            case("layer_norm" + sz, lambda: torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5))
            _, mu, rs = torch.ops.aten.native_layer_norm(x, [cols], w, b, 1e-5)
            case("layer_norm_grad" + sz, lambda: torch.ops.aten.native_layer_norm_backward(
                dy, x, [cols], mu, rs, w, b, [True, True, True]))
            case("rms_norm" + sz, lambda: F.rms_norm(x, [cols], w, 1e-6))
            xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
            yg = F.rms_norm(xg, [cols], wg, 1e-6)
            case("rms_norm_grad" + sz,
                 lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True))
            del x, dy, w, b, mu, rs, xg, wg, yg

    # N8: batch_norm in training (aten's native_batch_norm and its backward) and embedding
    # (F.embedding; aten's embedding_dense_backward, deterministic off).
    for dt in ("f32",) + halves:
        shp = (small(32, 4), 64, 112, 112)
        x, dy = rand(shp, dt), rand(shp, dt)
        w, b = rand(64, dt) + 1, rand(64, dt)
        st = torch.float32 if dt != "f64" else torch.float64
        rm, rv = torch.zeros(64, device=dev, dtype=st), torch.ones(64, device=dev, dtype=st)
        sz = f" 32x64x112x112 {dt}"
        case("batch_norm" + sz,
             lambda: torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5))
        _, sm, si = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
        # the backward wants the running statistics in x's dtype (training does not read them)
        rmx, rvx = rm.to(x.dtype), rv.to(x.dtype)
        case("batch_norm_grad" + sz, lambda: torch.ops.aten.native_batch_norm_backward(
            dy, x, w, rmx, rvx, sm, si, True, 1e-5, [True, True, True]))
        del x, dy, w, b, rm, rv, sm, si, rmx, rvx
    for dt in ("f32", "f16"):
        V, D, n = 50257, 768, 8192
        w, dy = rand((V, D), dt), rand((n, D), dt)
        idx = torch.randint(0, V, (n,), device=dev)
        sz = f" V={V} D={D} n={n} {dt}"
        case("embedding" + sz, lambda: F.embedding(idx, w))
        case("embedding_grad" + sz,
             lambda: torch.ops.aten.embedding_dense_backward(dy, idx, V, -1, False))
        del w, dy, idx

    # N3: pooling, LRN.
    for dt in ("f32",) + halves:
        x = rand((small(32, 16), 64, 112, 112), dt)
        case(f"max pool 3x3/2 32x64x112x112 {dt}", lambda: F.max_pool2d(x, 3, 2, 1))
        case(f"avg pool 2x2 32x64x112x112 {dt}", lambda: F.avg_pool2d(x, 2))
        del x
    x = rand((small(32, 16), 64, 56, 56)).requires_grad_(True)
    dy = rand(tuple(x.shape))
    case("lrn n=5 32x64x56x56 f32", lambda: F.local_response_norm(x, 5))
    yl = F.local_response_norm(x, 5)
    case("lrn_grad n=5 32x64x56x56 f32",
         lambda: torch.autograd.grad(yl, x, dy, retain_graph=True))
    del x, dy, yl

    # N4: convolution forward and both gradients (the kernels autograd runs).
    shapes = (("3x3 64->64 32x64x56x56", (32, 64, 56, 56), (64, 64, 3, 3), 1),
              ("3x3 128->128 32x128x28x28", (32, 128, 28, 28), (128, 128, 3, 3), 1),
              ("3x3 256->256 32x256x14x14", (32, 256, 14, 14), (256, 256, 3, 3), 1),
              ("1x1 64->256 32x64x56x56", (32, 64, 56, 56), (256, 64, 1, 1), 0))
    for mode in ("f32", "tf32") + halves:
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        dt = "f32" if mode == "tf32" else mode
        for label, xs, ws, pad in shapes:
            x, w = rand((small(xs[0], 16),) + xs[1:], dt), rand(ws, dt, 0.1)
            y = F.conv2d(x, w, padding=pad)
            dy = rand(tuple(y.shape), dt)
            base = f"conv {label} "

            def bwd(which):
                return lambda: torch.ops.aten.convolution_backward(
                    dy, x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, which)
            case(base + "fwd " + mode, lambda: F.conv2d(x, w, padding=pad))
            case(base + "grad_data " + mode, bwd([True, False, False]))
            case(base + "grad_filter " + mode, bwd([False, True, False]))
            del x, w, y, dy
    torch.backends.cudnn.allow_tf32 = False

    # N6: one training step of the demo network at batch 4096 on 8x8 inputs.
    N = small(4096, 16)
    xb = rand((N, 1, 8, 8), scale=0.5)
    labels = torch.arange(N, device=dev) % 10
    params = [rand((8, 1, 3, 3), scale=0.47), torch.zeros(8, device=dev),
              rand((16, 8, 3, 3), scale=0.16), torch.zeros(16, device=dev),
              rand((10, 64), scale=0.17), torch.zeros(10, device=dev)]
    for p in params:
        p.requires_grad_(True)

    def step():
        w1, b1, w2, b2, wd, bd = params
        h = F.max_pool2d(F.relu(F.conv2d(xb, w1, b1, padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)
        logits = F.linear(h.flatten(1), wd, bd)
        loss = F.nll_loss(F.log_softmax(logits, 1), labels)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.add_(g, alpha=-0.05)
    case("train step demo b4096", step)

    if smoke:
        print(f"smoke run: {len(results)} cases ran, {len(failed)} failed: {failed}")
        return 1 if failed else 0
    out = os.path.join(os.environ.get("PARENCHYMA_BENCH_OUT", "."), "n_torch.json")
    with open(out, "w") as f:
        json.dump({"suite": "n_torch", "torch": torch.__version__,
                   "cudnn": str(torch.backends.cudnn.version()),
                   "device": torch.cuda.get_device_name(), "results": results}, f, indent=2)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
