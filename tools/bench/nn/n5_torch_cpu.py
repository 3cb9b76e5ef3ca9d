#!/usr/bin/env python3
"""N5's cases in PyTorch's CPU eager ops, and issue 27's CPU comparison.

    python3 tools/bench/nn/n5_torch_cpu.py [--threads 1,2] [--out n5_torch_cpu.json]
    python3 tools/bench/nn/n5_torch_cpu.py --compare n5_native_nn_t1.json n5_native_nn_t2.json \
        --torch n5_torch_cpu.json [--markdown]

The first form times every case of bench_nn_native (tools/bench/nn/bench_nn_native.cpp: the same
shapes and parameters) with PyTorch on the CPU, f32, once per thread count
(torch.set_num_threads), as the median of 15 samples after a warm-up, each sample the wall time of
`inner` calls divided by `inner` (the bench's rule). The aten forward and backward kernels are
called directly where PyTorch has them (convolution_backward, max_pool2d_with_indices_backward,
native_layer_norm_backward, ...), so autograd's bookkeeping is not timed; LRN and rms_norm are
Python compositions in PyTorch (no kernel of their own), timed through autograd's backward.

The second form joins bench_nn_native's JSON (ours and oneDNN, per thread count) with this
script's: per case ours / oneDNN, ours / PyTorch and ours / the faster of the two (issue 27: no
native op more than 1.5x slower than the best of oneDNN and PyTorch's CPU build).

Exit 77 with the reason where torch is absent.
"""
import argparse
import json
import statistics
import sys
import time

SKIP = 77


def bench(fn, inner, reps=15, warmup=2):
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter_ns() - t0) / inner)
    return statistics.median(samples)


def cases(torch):
    F = torch.nn.functional
    aten = torch.ops.aten
    g = torch.Generator().manual_seed(20261207)

    def rnd(*shape):
        return torch.rand(*shape, generator=g) * 2 - 1

    out = []
    # convolution 3x3 64->64 on 8x64x28x28, padding 1
    x, w = rnd(8, 64, 28, 28), rnd(64, 64, 3, 3) * 0.1
    gy = rnd(8, 64, 28, 28)
    conv_args = dict(bias_sizes=None, stride=[1, 1], padding=[1, 1], dilation=[1, 1],
                     transposed=False, output_padding=[0, 0], groups=1)
    out.append(("conv fwd 3x3 64->64 8x64x28x28", lambda: F.conv2d(x, w, padding=1), 1))
    out.append(("conv grad_data 3x3 64->64 8x64x28x28",
                lambda: aten.convolution_backward(gy, x, w, output_mask=[True, False, False],
                                                  **conv_args), 1))
    out.append(("conv grad_filter 3x3 64->64 8x64x28x28",
                lambda: aten.convolution_backward(gy, x, w, output_mask=[False, True, False],
                                                  **conv_args), 1))
    # pooling on 8x64x56x56
    xp = rnd(8, 64, 56, 56)
    yp, ip = F.max_pool2d(xp, 3, 2, 1, return_indices=True)
    gp = rnd(*yp.shape)
    ya = F.avg_pool2d(xp, 2)
    ga = rnd(*ya.shape)
    out.append(("max pool 3x3/2 pad 1 8x64x56x56", lambda: F.max_pool2d(xp, 3, 2, 1), 5))
    out.append(("avg pool 2x2 8x64x56x56", lambda: F.avg_pool2d(xp, 2), 5))
    out.append(("max pool 3x3/2 pad 1 grad 8x64x56x56",
                lambda: aten.max_pool2d_with_indices_backward(gp, xp, [3, 3], [2, 2], [1, 1],
                                                              [1, 1], False, ip), 5))
    out.append(("avg pool 2x2 grad 8x64x56x56",
                lambda: aten.avg_pool2d_backward(ga, xp, [2, 2], [2, 2], [0, 0], False, True,
                                                 None), 5))
    # softmax family, 256x1000 along dim 1
    xs = rnd(256, 1000) * 4
    ys, yl = torch.softmax(xs, 1), torch.log_softmax(xs, 1)
    gs = rnd(256, 1000)
    out.append(("softmax 256x1000", lambda: torch.softmax(xs, 1), 20))
    out.append(("log_softmax 256x1000", lambda: torch.log_softmax(xs, 1), 20))
    out.append(("softmax_grad 256x1000",
                lambda: aten._softmax_backward_data(gs, ys, 1, torch.float32), 20))
    out.append(("log_softmax_grad 256x1000",
                lambda: aten._log_softmax_backward_data(gs, yl, 1, torch.float32), 20))
    # activations, 8M elements
    n = 8 << 20
    xe, ge = rnd(n) * 4, rnd(n)
    yr, ysg, yt = torch.relu(xe), torch.sigmoid(xe), torch.tanh(xe)
    out.append(("relu 8M", lambda: torch.relu(xe), 1))
    out.append(("sigmoid 8M", lambda: torch.sigmoid(xe), 1))
    out.append(("tanh 8M", lambda: torch.tanh(xe), 1))
    out.append(("relu_grad 8M", lambda: aten.threshold_backward(ge, yr, 0), 1))
    out.append(("sigmoid_grad 8M", lambda: aten.sigmoid_backward(ge, ysg), 1))
    out.append(("tanh_grad 8M", lambda: aten.tanh_backward(ge, yt), 1))
    # LRN n=5 (alpha 1e-4, beta 0.75, k 1) on 8x64x28x28: a composition in PyTorch
    xl = rnd(8, 64, 28, 28).requires_grad_(True)
    gl = rnd(8, 64, 28, 28)

    def lrn():
        with torch.no_grad():
            return F.local_response_norm(xl, 5, 1e-4, 0.75, 1.0)

    def lrn_grad():
        y = F.local_response_norm(xl, 5, 1e-4, 0.75, 1.0)
        return torch.autograd.grad(y, xl, gl)

    out.append(("lrn n=5 8x64x28x28", lrn, 2))
    out.append(("lrn_grad n=5 8x64x28x28", lrn_grad, 2))
    # layer_norm and rms_norm over the last axis of 2048x768, epsilon 1e-5 (rms: 1e-6)
    xn, wn, bn, gn = rnd(2048, 768), rnd(768), rnd(768), rnd(2048, 768)
    _, mn, rn = aten.native_layer_norm(xn, [768], wn, bn, 1e-5)
    out.append(("layer_norm 2048x768", lambda: F.layer_norm(xn, [768], wn, bn, 1e-5), 1))
    out.append(("layer_norm_grad 2048x768",
                lambda: aten.native_layer_norm_backward(gn, xn, [768], mn, rn, wn, bn,
                                                        [True, True, True]), 1))
    if hasattr(F, "rms_norm"):
        xr = xn.clone().requires_grad_(True)
        wr = wn.clone().requires_grad_(True)

        def rms():
            with torch.no_grad():
                return F.rms_norm(xr, [768], wr, 1e-6)

        def rms_grad():
            y = F.rms_norm(xr, [768], wr, 1e-6)
            return torch.autograd.grad(y, (xr, wr), gn)

        out.append(("rms_norm 2048x768", rms, 1))
        out.append(("rms_norm_grad 2048x768", rms_grad, 1))
    # dropout p = 0.1 on 8M
    yd, md = aten.native_dropout(xe, 0.1, True)
    out.append(("dropout 8M", lambda: aten.native_dropout(xe, 0.1, True), 1))
    out.append(("dropout_grad 8M", lambda: aten.native_dropout_backward(ge, md, 1 / 0.9), 1))
    return out


def run(args):
    try:
        import torch
    except ImportError as e:
        print(f"n5_torch_cpu: SKIPPED: PyTorch is not installed ({e})")
        return SKIP
    res = {"suite": "n5_torch_cpu", "torch": torch.__version__,
           "mkldnn": bool(torch.backends.mkldnn.is_available()), "threads": {}}
    for t in [int(v) for v in args.threads.split(",")]:
        torch.set_num_threads(t)
        rows = []
        for name, fn, inner in cases(torch):
            ns = bench(fn, 1, reps=1, warmup=1) if args.smoke else bench(fn, inner)
            rows.append({"name": name, "torch_ns": ns})
            print(f"{t} thread(s)  {name:44s} {ns:14.1f} ns", flush=True)
        res["threads"][str(t)] = rows
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"wrote {args.out}")
    return 0


def base_name(name):
    for suffix in (" vs memcpy", " vs onednn"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def compare(args):
    with open(args.torch) as f:
        tj = json.load(f)
    lines = []
    worst = 0.0
    for path in args.compare:
        with open(path) as f:
            ours = json.load(f)
        t = str(ours.get("meta", {}).get("threads", "1"))
        torch_ns = {r["name"]: r["torch_ns"] for r in tj["threads"].get(t, [])}
        rows = {}
        for r in ours["results"]:
            name = base_name(r["name"])
            e = rows.setdefault(name, {"ours": r["ours_ns"]})
            if r["peer"] == "onednn":
                e["onednn"] = r["peer_ns"]
                e["ours"] = r["ours_ns"]
        if args.markdown:
            lines.append(f"\n{t} thread(s), PyTorch {tj['torch']}:\n")
            lines.append("| case | ours / oneDNN | ours / PyTorch | ours / best |")
            lines.append("|---|---|---|---|")
        for name, e in rows.items():
            peers = [v for v in (e.get("onednn"), torch_ns.get(name)) if v]
            if not peers:
                continue
            best = min(peers)
            r_best = e["ours"] / best
            worst = max(worst, r_best)
            r_dnn = f"{e['ours'] / e['onednn']:.2f}" if "onednn" in e else "-"
            r_torch = f"{e['ours'] / torch_ns[name]:.2f}" if name in torch_ns else "-"
            if args.markdown:
                lines.append(f"| {name} | {r_dnn} | {r_torch} | {r_best:.2f} |")
            else:
                lines.append(f"{t}t {name:44s} vs oneDNN {r_dnn:>6s}  vs PyTorch {r_torch:>6s}"
                             f"  vs best {r_best:5.2f}{'  OVER 1.5' if r_best > 1.5 else ''}")
    print("\n".join(lines))
    print(f"worst ours / best: {worst:.2f} (issue 27: <= 1.5)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default="n5_torch_cpu.json")
    ap.add_argument("--compare", nargs="*")
    ap.add_argument("--torch", default="n5_torch_cpu.json")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="one call per case (checks the script)")
    args = ap.parse_args()
    if args.compare:
        return compare(args)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
