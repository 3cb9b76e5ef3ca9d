#!/usr/bin/env python3
"""Joins bench_nn_cuda's JSON (n_cuda_nn.json) with n_torch.py's (n_torch.json) into the ratio
table "parenchyma vs PyTorch", marking each target of docs/nn.md met or not met:
  N1 elementwise + grads (f32, 64M): >= 1.0x PyTorch and >= 0.95x device-copy bandwidth
  N2 softmax / log_softmax: >= 1.25x PyTorch on 4096x16384, >= 1.0x on 65536x1000
  N3 pooling >= 1.5x, LRN >= 5x, dropout >= 1.0x PyTorch
  N4 convolution >= 0.98x cuDNN (same algorithm) and >= 1.0x PyTorch
  N6 the demo network's training step >= 1.0x PyTorch
"x" is a speed-up: the peer's time / ours (> 1: we are faster). Rows without a target (half
types, gradients of LRN) are printed for information.
    tools/bench/nn/compare.py [n_cuda_nn.json] [n_torch.json] [--out nn_vs_torch.json] [--markdown]
Defaults: the files in $PARENCHYMA_BENCH_OUT (or .). The joined file uses the harness's layout
(peer torch, ratio ours/torch time), so tools/bench/plot.py plots it. Exit 0 (also when targets
are not met: this is a report), 2 on missing input, 77 when a file is absent (with the reason).
"""
import argparse
import json
import os
import sys

SKIP = 77


def target_of(name):
    """(id, minimum speed-up vs torch, minimum speed-up vs the in-process peer) or None."""
    f32 = name.endswith(" f32")
    if any(name.startswith(a) for a in ("relu", "sigmoid", "tanh")) and f32:
        return ("N1", 1.0, 0.95)
    if name.startswith("dropout"):
        return ("N3", 1.0, None)
    if name.startswith(("softmax ", "log_softmax ")) and f32:
        return ("N2", 1.25 if "4096x16384" in name else 1.0, None)
    if name.startswith(("max pool", "avg pool")) and f32:
        return ("N3", 1.5, None)
    if name.startswith("lrn n="):
        return ("N3", 5.0, None)
    if name.startswith("conv "):
        return ("N4", 1.0, 0.98)
    if name.startswith("train step"):
        return ("N6", 1.0, None)
    return None


def load(path):
    with open(path) as f:
        return json.load(f)


def main(argv):
    here = os.environ.get("PARENCHYMA_BENCH_OUT", ".")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours", nargs="?", default=os.path.join(here, "n_cuda_nn.json"))
    ap.add_argument("torch", nargs="?", default=os.path.join(here, "n_torch.json"))
    ap.add_argument("--out", default=os.path.join(here, "nn_vs_torch.json"))
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    a = ap.parse_args(argv)
    for p, what in ((a.ours, "bench_nn_cuda"), (a.torch, "n_torch.py")):
        if not os.path.exists(p):
            print(f"skipped: {p} is absent (run {what} first)")
            return SKIP
    ours, torch = load(a.ours), load(a.torch)
    t = {r["name"]: r for r in torch.get("results", [])}
    rows, joined = [], []
    met = missed = 0
    for r in ours.get("results", []):
        name, ns = r["name"], r.get("ours_ns", 0)
        if ns <= 0:
            continue
        tr = t.get(name)
        vs_torch = tr["torch_ns"] / ns if tr else None
        peer = r.get("peer", "none")
        vs_peer = r["peer_ns"] / ns if r.get("peer_ns", 0) > 0 else None
        tgt = target_of(name)
        verdict = "info"
        if tgt:
            _, need_torch, need_peer = tgt
            checks = []
            if vs_torch is not None:
                checks.append(vs_torch >= need_torch)
            if need_peer is not None and vs_peer is not None:
                checks.append(vs_peer >= need_peer)
            if not checks:
                verdict = "no peer data"
            elif all(checks):
                verdict, met = "met", met + 1
            else:
                verdict, missed = "NOT met", missed + 1
        rows.append((name, ns, tr["torch_ns"] if tr else None, vs_torch, peer, vs_peer, tgt,
                     verdict))
        if tr:
            joined.append({"name": name, "peer": "torch", "ours": "parenchyma",
                           "peer_ns": tr["torch_ns"], "ours_ns": ns, "ratio": ns / tr["torch_ns"],
                           "ratio_p10": ns / tr.get("p90_ns", tr["torch_ns"]),
                           "ratio_p90": ns / tr.get("p10_ns", tr["torch_ns"]),
                           "delta_ns": ns - tr["torch_ns"], "bytes": r.get("bytes", 0),
                           "flops": r.get("flops", 0)})
    missing = sorted(set(t) - {r[0] for r in rows})

    def fx(v):
        return f"{v:.2f}x" if v is not None else "-"

    def tg(tgt):
        if not tgt:
            return "-"
        s = f"{tgt[0]} >= {tgt[1]:g}x torch"
        return s + (f", >= {tgt[2]:g}x peer" if tgt[2] is not None else "")

    if a.markdown:
        print("| case | parenchyma µs | PyTorch µs | vs PyTorch | peer | vs peer | target | |")
        print("|---|---:|---:|---:|---|---:|---|---|")
        for name, ns, tns, vt, peer, vp, tgt, verdict in rows:
            print(f"| {name} | {ns / 1e3:.1f} | {tns / 1e3:.1f} | {fx(vt)} | {peer} | {fx(vp)} | "
                  f"{tg(tgt)} | {verdict} |" if tns else
                  f"| {name} | {ns / 1e3:.1f} | - | - | {peer} | {fx(vp)} | {tg(tgt)} | "
                  f"{verdict} |")
    else:
        print(f"# parenchyma ({ours.get('meta', {}).get('device', '?')}) vs PyTorch "
              f"{torch.get('torch', '?')}; x = peer time / ours (> 1: parenchyma faster)")
        print(f"{'case':<44} {'ours us':>10} {'torch us':>10} {'vs torch':>9} {'peer':>7} "
              f"{'vs peer':>8}  target")
        for name, ns, tns, vt, peer, vp, tgt, verdict in rows:
            tcol = f"{tns / 1e3:10.1f}" if tns else f"{'-':>10}"
            print(f"{name:<44} {ns / 1e3:10.1f} {tcol} {fx(vt):>9} "
                  f"{peer:>7} {fx(vp):>8}  {tg(tgt)}: {verdict}")
    for name in missing:
        print(f"{name:<44} only in the torch file (parenchyma: unavailable)")
    for u in ours.get("unavailable", []):
        print(f"{u['name']:<44} parenchyma unavailable: {u['reason']}")
    print(f"targets met: {met}, not met: {missed}")
    with open(a.out, "w") as f:
        json.dump({"suite": "nn_vs_torch",
                   "meta": {"device": ours.get("meta", {}).get("device", ""),
                            "torch": torch.get("torch", ""), "targets_met": str(met),
                            "targets_not_met": str(missed)},
                   "results": joined}, f, indent=2)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
