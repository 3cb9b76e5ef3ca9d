#!/usr/bin/python3
"""Renders the benchmark JSON files (tools/bench/harness.hpp writes one per suite) as ratio plots.

    tools/bench/plot.py <json dir> <out dir> [--format svg|png] [--title-suffix TEXT]

One figure per suite: a horizontal bar per case, the median ratio ours/peer (time: lower is
better), whiskers from p10 to p90, a line at 1.0 (parity) and green bars where we lead, red where
we trail by more than 5 %. The peer of each case is named on its bar. Uses matplotlib (Debian:
python3-matplotlib) with the Agg backend, so no display is needed. Prints the files it wrote.
"""
import argparse
import json
import os
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{path}: not a benchmark suite (no 'results')")
    return data


def plot_suite(plt, data, out_dir, fmt, suffix):
    results = [r for r in data["results"] if r.get("ratio", 0) > 0]
    if not results:
        return None
    names = [r["name"] for r in results]
    ratios = [r["ratio"] for r in results]
    lo = [max(0.0, r["ratio"] - r.get("ratio_p10", r["ratio"])) for r in results]
    hi = [max(0.0, r.get("ratio_p90", r["ratio"]) - r["ratio"]) for r in results]
    colours = ["#2e7d32" if x <= 1.0 else "#c62828" if x > 1.05 else "#f9a825" for x in ratios]
    height = max(2.0, 0.42 * len(results) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    y = list(range(len(results)))[::-1]
    ax.barh(y, ratios, xerr=[lo, hi], color=colours, alpha=0.85, capsize=3, ecolor="#424242")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    for yi, r in zip(y, results):
        ax.text(max(r["ratio"], r.get("ratio_p90", r["ratio"])), yi,
                f"  {r['ratio']:.3f}x vs {r.get('peer', 'peer')}",
                va="center", fontsize=7)
    top = max(max(r.get("ratio_p90", r["ratio"]) for r in results), 1.1)
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("time ours / peer (median; whiskers p10-p90; < 1 is faster)")
    meta = data.get("meta", {})
    where = ", ".join(f"{k}={v.strip()}" for k, v in meta.items() if k in ("backend", "device", "nproc"))
    ax.set_title(f"{data['suite']}{suffix}" + (f"\n{where}" if where else ""), fontsize=9)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{data['suite']}.{fmt}")
    fig.savefig(path, format=fmt)
    plt.close(fig)
    return path


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json_dir")
    p.add_argument("out_dir")
    p.add_argument("--format", default="svg", choices=["svg", "png"])
    p.add_argument("--title-suffix", default="")
    a = p.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        print("plot.py: matplotlib is missing (Debian: apt install python3-matplotlib)",
              file=sys.stderr)
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = sorted(f for f in os.listdir(a.json_dir) if f.endswith(".json"))
    if not files:
        print(f"plot.py: no .json files in {a.json_dir}", file=sys.stderr)
        return 2
    os.makedirs(a.out_dir, exist_ok=True)
    wrote = 0
    for f in files:
        try:
            data = load(os.path.join(a.json_dir, f))
        except (ValueError, json.JSONDecodeError) as e:
            print(f"plot.py: skipping {f}: {e}", file=sys.stderr)
            continue
        path = plot_suite(plt, data, a.out_dir, a.format, a.title_suffix)
        if path:
            print(path)
            wrote += 1
    return 0 if wrote else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
