#!/usr/bin/env python3
"""Compares every NN op's OUTPUT with PyTorch on the same inputs.

    python3 tools/bench/nn/torch_check.py [--dump build/bin/nn_dump] [--backend native|cuda|opencl]
                                          [--seed N] [--keep DIR]

Runs nn_dump (tools/bench/nn/nn_dump.cpp) on the chosen backend: it generates the inputs from a
seed, runs each op through parenchyma/nn.hpp and writes inputs and outputs as raw files with a
manifest. Then computes each output with PyTorch (CPU, float64, from the same f32 inputs) and
compares: relu, sigmoid, tanh, elu and their gradients; softmax and log_softmax along dim 1 and
their gradients; conv2d with stride / padding / dilation / groups and both gradients (autograd);
max_pool2d (values, indices, gradient), avg_pool2d (count_include_pad both ways) and its
gradient; local_response_norm and its gradient; one SGD step of the demo network (every
parameter after the update). Dropout is compared by its mask statistics
(torch's RNG differs), by y and dx against the mask, and by the splitmix64 mask of pcy_nn.h.
Prints one line per case and tensor, PASS or FAIL with the error; exit 0 all pass, 1 a failure,
77 skipped (torch absent, or the backend absent), with the reason.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def find_dump(given):
    if given:
        return given
    for build in ("build", "build-nn", "build-gpu", "build-release"):
        p = os.path.join(ROOT, build, "bin", "nn_dump")
        if os.path.exists(p):
            return p
    return None


def splitmix_keep(seed, i, threshold):
    m = (1 << 64) - 1
    z = (seed + (i + 1) * 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    z ^= z >> 31
    return (z >> 40) >= threshold


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", help="the nn_dump binary (default: build*/bin/nn_dump)")
    ap.add_argument("--backend", default="native")
    ap.add_argument("--seed", default="1")
    ap.add_argument("--keep", help="write the dump here and keep it")
    a = ap.parse_args(argv)

    dump = find_dump(a.dump)
    if not dump or not os.path.exists(dump):
        print("FAIL: nn_dump not found (build the target nn_dump, or pass --dump)")
        return 1
    out = a.keep or tempfile.mkdtemp(prefix="pcy-nn-dump-")
    os.makedirs(out, exist_ok=True)
    try:
        r = subprocess.run([dump, "--out", out, "--backend", a.backend, "--seed", a.seed],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode == SKIP:
            print(r.stdout.strip())
            print(f"skipped: backend {a.backend} is not available here")
            return SKIP
        if r.returncode != 0:
            print(r.stdout)
            print(f"FAIL: nn_dump exited with {r.returncode}")
            return 1
        with open(os.path.join(out, "manifest.json")) as f:
            manifest = json.load(f)
        print(f"nn_dump ran {len(manifest['cases'])} cases on {manifest['backend']}")
        try:
            import torch  # noqa: F401
        except ImportError as e:
            print(f"skipped: PyTorch is not installed for {sys.executable} ({e}); the outputs were "
                  "written but not "
                  "compared (pip install torch, then run again)")
            return SKIP
        return compare(manifest, out)
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)


def compare(manifest, out):
    import torch
    import torch.nn.functional as F

    dtypes = {"f32": torch.float32, "i32": torch.int32, "u8": torch.uint8}

    def load(case, arg):
        t = case["tensors"][arg]
        with open(os.path.join(out, t["file"]), "rb") as f:
            data = bytearray(f.read())
        v = torch.frombuffer(data, dtype=dtypes[t["dtype"]]) if data else \
            torch.empty(0, dtype=dtypes[t["dtype"]])
        return v.reshape(t["shape"]).clone()

    failures = 0
    print(f"torch {torch.__version__}: reference in float64 on the CPU")

    def check(case, arg, ref, rtol=2e-5, atol=2e-6):
        nonlocal failures
        got = load(case, arg).double()
        ref = ref.detach().double()
        if got.shape != ref.shape:
            failures += 1
            print(f"FAIL {case['name']:<32} {arg:<14} shape {list(got.shape)} vs torch "
                  f"{list(ref.shape)}")
            return
        err = (got - ref).abs()
        bound = atol + rtol * ref.abs()
        bad = int((err > bound).sum())
        worst = float((err / (ref.abs() + 1)).max()) if err.numel() else 0.0
        ok = bad == 0 and not bool(torch.isnan(got).any() & ~torch.isnan(ref).any())
        failures += 0 if ok else 1
        print(f"{'PASS' if ok else 'FAIL'} {case['name']:<32} {arg:<14} max rel err {worst:.2e}"
              + ("" if ok else f"  ({bad} of {err.numel()} outside {rtol:g} rel + {atol:g})"))

    def grad_of(fn, inputs, dy):
        leaves = [t.detach().double().requires_grad_(True) for t in inputs]
        y = fn(*leaves)
        grads = torch.autograd.grad(y, leaves, dy.double())
        return y, grads

    for c in manifest["cases"]:
        op, p = c["op"], c["params"]
        if op in ("relu", "sigmoid", "tanh", "elu"):
            fn = {"relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
                  "elu": lambda t: F.elu(t, alpha=p.get("alpha", 1.0))}[op]
            y, (dx,) = grad_of(fn, [load(c, "x")], load(c, "dy"))
            check(c, "y", y)
            check(c, "dx", dx)
        elif op in ("softmax", "log_softmax"):
            fn = (lambda t: torch.softmax(t, p["dim"])) if op == "softmax" else \
                (lambda t: torch.log_softmax(t, p["dim"]))
            y, (dx,) = grad_of(fn, [load(c, "x")], load(c, "dy"))
            check(c, "y", y)
            check(c, "dx", dx)
        elif op == "conv2d":
            def fn(x, w):
                return F.conv2d(x, w, stride=p["stride"], padding=p["padding"],
                                dilation=p["dilation"], groups=p["groups"])
            y, (dx, dw) = grad_of(fn, [load(c, "x"), load(c, "w")], load(c, "dy"))
            check(c, "y", y, 1e-4, 1e-5)
            check(c, "dx", dx, 1e-4, 1e-5)
            check(c, "dw", dw, 1e-4, 1e-5)
        elif op == "max_pool2d":
            x = load(c, "x").double().requires_grad_(True)
            y, idx = F.max_pool2d(x, p["window"], p["stride"], p["padding"], return_indices=True)
            (dx,) = torch.autograd.grad(y, [x], load(c, "dy").double())
            check(c, "y", y, 0, 0)
            got = load(c, "indices").long()
            same = bool((got == idx).all())
            failures += 0 if same else 1
            print(f"{'PASS' if same else 'FAIL'} {c['name']:<32} {'indices':<14} "
                  f"{'equal' if same else str(int((got != idx).sum())) + ' differ'}")
            check(c, "dx", dx)
            check(c, "dx_recomputed", dx)
        elif op == "avg_pool2d":
            def fn(x):
                return F.avg_pool2d(x, p["window"], p["stride"], p["padding"],
                                    count_include_pad=bool(p["include_padding"]))
            y, (dx,) = grad_of(fn, [load(c, "x")], load(c, "dy"))
            check(c, "y", y)
            check(c, "dx", dx)
        elif op == "local_response_norm":
            def fn(x):
                return F.local_response_norm(x, p["size"], alpha=p["alpha"], beta=p["beta"],
                                             k=p["k"])
            y, (dx,) = grad_of(fn, [load(c, "x")], load(c, "dy"))
            check(c, "y", y, 1e-4, 1e-5)
            check(c, "dx", dx, 1e-4, 1e-5)
        elif op == "dropout":
            prob, seed = p["p"], p["seed"]
            x, dy = load(c, "x").double(), load(c, "dy").double()
            mask = load(c, "mask")
            keep = (mask != 0).double()
            n = keep.numel()
            frac = float(keep.mean())
            sigma = math.sqrt(prob * (1 - prob) / n)
            ok = abs(frac - (1 - prob)) <= 5 * sigma
            failures += 0 if ok else 1
            print(f"{'PASS' if ok else 'FAIL'} {c['name']:<32} {'mask stats':<14} kept "
                  f"{frac:.4f}, expected {1 - prob:.4f} +- {5 * sigma:.4f} (5 sigma)")
            # torch's own dropout keeps the same share: its statistics are the reference.
            tkeep = float((F.dropout(torch.ones(n, dtype=torch.float64), prob) != 0)
                          .double().mean())
            print(f"INFO {c['name']:<32} {'torch dropout':<14} kept {tkeep:.4f} of {n}")
            scale = float(torch.tensor(1 / (1 - prob), dtype=torch.float32))
            check(c, "y", x * keep * scale)
            check(c, "dx", dy * keep * scale)
            t = int(prob * 16777216.0 + 0.5)
            flat = mask.reshape(-1).tolist()
            wrong = sum(1 for i in range(n) if (flat[i] != 0) != splitmix_keep(seed, i, t))
            failures += 0 if wrong == 0 else 1
            print(f"{'PASS' if wrong == 0 else 'FAIL'} {c['name']:<32} {'mask exact':<14} "
                  f"{wrong} of {n} differ from pcy_nn.h's splitmix64 mask")
        elif op == "demo_step":
            names = ("w1", "b1", "w2", "b2", "wd", "bd")
            x = load(c, "x").double()
            ps = [load(c, k).double().requires_grad_(True) for k in names]
            w1, b1, w2, b2, wd, bd = ps
            labels = torch.arange(x.shape[0]) % 10
            h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)
            lsm = F.log_softmax(h.flatten(1) @ wd.t() + bd.reshape(1, -1), 1)
            grads = torch.autograd.grad(F.nll_loss(lsm, labels), ps)
            check(c, "lsm", lsm, 1e-4, 1e-5)
            for k, p_, g in zip(names, ps, grads):
                check(c, k + "_after", p_ - p["lr"] * g, 1e-4, 1e-6)
        else:
            failures += 1
            print(f"FAIL {c['name']}: unknown op {op} in the manifest")
    print(f"{'all passed' if failures == 0 else str(failures) + ' failed'} "
          f"({manifest['backend']} vs torch)")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
