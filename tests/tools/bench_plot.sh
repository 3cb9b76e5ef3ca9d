#!/usr/bin/env bash
# tools/bench/plot.py renders benchmark JSON as ratio plots: one SVG per suite, a suite with a
# malformed file beside it skipped with a message, an empty directory refused. Exit 77 (skipped,
# with the reason) without matplotlib.
set -u
plot="$1"
py=/usr/bin/python3
[ -x "$py" ] || py=python3
if ! "$py" -c "import matplotlib" 2>/dev/null; then
  echo "skipped: $py has no matplotlib (Debian: apt install python3-matplotlib)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/in" "$dir/empty"
cat >"$dir/in/sample_suite.json" <<'JSON'
{
  "suite": "sample_suite",
  "meta": {"nproc": "2", "backend": "native:0"},
  "results": [
    {"name": "faster", "peer": "cblas", "ours": "blas", "peer_ns": 10, "ours_ns": 8, "ratio": 0.8, "ratio_p10": 0.75, "ratio_p90": 0.9, "delta_ns": -2, "bytes": 0, "flops": 0},
    {"name": "slower", "peer": "cblas", "ours": "blas", "peer_ns": 10, "ours_ns": 20, "ratio": 2.0, "ratio_p10": 1.8, "ratio_p90": 2.5, "delta_ns": 10, "bytes": 0, "flops": 0}
  ]
}
JSON
echo '{"suite": ' >"$dir/in/broken.json"
fail=0
out=$("$py" "$plot" "$dir/in" "$dir/out" 2>"$dir/err")
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc"; cat "$dir/err"; fail=1; }
[ "$out" = "$dir/out/sample_suite.svg" ] || { echo "FAIL: printed '$out'"; fail=1; }
grep -q "<svg" "$dir/out/sample_suite.svg" 2>/dev/null || { echo "FAIL: no SVG written"; fail=1; }
grep -q "skipping broken.json" "$dir/err" || { echo "FAIL: the broken file was not reported"; fail=1; }
"$py" "$plot" "$dir/empty" "$dir/out2" 2>"$dir/err2"
rc=$?
[ $rc -eq 2 ] && grep -q "no .json files" "$dir/err2" || { echo "FAIL: empty dir gave exit $rc"; fail=1; }
[ $fail -eq 0 ] && echo "bench_plot: ok"
exit $fail
