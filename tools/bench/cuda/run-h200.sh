#!/usr/bin/env bash
# Builds and runs every CUDA test and benchmark on a GPU machine, then prints one table.
#   tools/bench/cuda/run-h200.sh [build_dir]      results: $OUT (or <build_dir>/results)
# Needs cmake, ninja, a C++20 compiler, the CUDA toolkit headers, an NVIDIA driver; python3 with
# torch (and cupy) for the G3 peer. Never changes GPU clocks or settings.
set -u
SRC=$(cd "$(dirname "$0")/../../.." && pwd)
BUILD=${1:-/tmp/pcy-cuda-h200}
RES=${OUT:-$BUILD/results}
mkdir -p "$RES"
LOG="$RES/log.txt"
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }

say "== machine: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader 2>&1 | tee -a "$LOG"
export PARENCHYMA_BENCH_OUT="$RES"

say "== configure + build"
if ! cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARENCHYMA_WERROR=OFF \
     >>"$LOG" 2>&1; then
  say "configure failed"; tail -40 "$LOG"; exit 1
fi
want="parenchyma-cuda test_cuda_probe test_cuda_offline test_cuda_plugin test_cuda_core
      bench_cuda_dispatch bench_cuda_transfer bench_cuda_coldstart parenchyma-native
      parenchyma-opencl test_conformance_stub"
have=$(ninja -C "$BUILD" -t targets all 2>/dev/null | cut -d: -f1)
targets=""
for t in $want; do grep -qx "$t" <<<"$have" && targets="$targets $t"; done
if ! ninja -C "$BUILD" -j"$(nproc)" $targets >>"$LOG" 2>&1; then
  say "build failed"; grep -E "error|FAILED" "$LOG" | head -40; exit 1
fi

declare -A status
run_test() { # name, command...
  local name=$1; shift
  say "== $name"
  (cd "$BUILD" && PARENCHYMA_CACHE_DIR="$BUILD/cache-$name" timeout 300 "$@") >>"$LOG" 2>&1
  local rc=$?
  case $rc in 0) status[$name]=passed ;; 77) status[$name]=skipped ;; *) status[$name]="FAILED ($rc)" ;; esac
  say "   -> ${status[$name]}"
  [ $rc -ne 0 ] && [ $rc -ne 77 ] && tail -60 "$LOG" | grep -vE "^\s*$" | tail -40
}
run_test cuda_probe bin/test_cuda_probe
run_test cuda_offline bin/test_cuda_offline
run_test cuda_plugin bin/test_cuda_plugin
run_test cuda_core bin/test_cuda_core
[ -x "$BUILD/bin/test_conformance" ] && run_test conformance_cuda bin/test_conformance cuda --built

say "== benchmarks"
for b in dispatch transfer coldstart; do
  (cd "$RES" && timeout 400 "$BUILD/bin/bench_cuda_$b") 2>&1 | tee -a "$LOG"
done
say "== G3 peers (PyTorch eager, CuPy)"
PYTHONUNBUFFERED=1 timeout 200 python3 "$SRC/tools/bench/cuda/g3_torch.py" 2>&1 | tee -a "$LOG"

say "== summary"
{
  for k in "${!status[@]}"; do echo "test $k: ${status[$k]}"; done | sort
  python3 - "$RES" <<'PY'
import json, os, sys
res = sys.argv[1]
def load(n):
    p = os.path.join(res, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
print("| id | measurement | peer | peer | ours | ratio (p10-p90) | target |")
print("|---|---|---|---|---|---|---|")
targets = {"G1": "<= 1.10x or <= +300 ns", "G2": "<= 1.10x", "G12": "<= raw + 20 ms"}
for suite in ("cuda_dispatch", "cuda_transfer", "cuda_coldstart"):
    d = load(suite)
    if not d: continue
    for r in d["results"]:
        gid = r["name"].split()[0]
        unit = lambda ns: (f"{ns/1e6:.2f} ms" if ns > 1e6 else f"{ns/1e3:.2f} us")
        extra = ""
        if r["bytes"]:
            extra = f" ({r['bytes']/r['peer_ns']:.1f} / {r['bytes']/r['ours_ns']:.1f} GB/s)"
        tgt = targets.get(gid, "")
        if gid in ("G5", "G6"):
            tgt = ">= 0.95x pinned at >= 64 MiB" if "pinned" in r["name"] else "pageable: >= 2x faster"
        print(f"| {gid} | {r['name'][len(gid)+1:]}{extra} | {r['peer']} | {unit(r['peer_ns'])} | "
              f"{unit(r['ours_ns'])} | {r['ratio']:.3f} ({r['ratio_p10']:.3f}-{r['ratio_p90']:.3f}) "
              f"| {tgt} |")
    if suite == "cuda_coldstart":
        print(f"| G12 | plugin load (dlopen + entry), median | | | {d['meta'].get('plugin_load_ms_median','?')} ms | | <= 1 ms |")
g3 = load("cuda_g3_peers")
d = load("cuda_dispatch")
if g3 and d:
    ours = [r for r in d["results"] if r["name"].startswith("G3")]
    for p in g3["results"]:
        if ours:
            o = ours[0]["ours_ns"]
            print(f"| G3 | 10k small ops vs {p['name']} | {p['name']} | {p['ns_per_op']/1e3:.2f} us/op | "
                  f"{o/1e3:.2f} us/op | {o/p['ns_per_op']:.3f} | <= 0.5x PyTorch |")
PY
} | tee "$RES/summary.md" | tee -a "$LOG"
