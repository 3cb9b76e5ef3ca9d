#!/bin/sh
# Data-parallel training against one process: nn_data_parallel.sh <run_mpi.sh> <np> <tolerance>
# <parenchyma-nn-demo> [demo args...]. Trains the digits network once in this process (--curve)
# and once across <np> MPI ranks (--data-parallel, through run_mpi.sh), both with the same global
# batch, then compares the per-epoch losses (the "curve ... loss=X" lines, printed by rank 0):
# every epoch's relative difference must be at most <tolerance>. The held-out and training
# counts are printed beside them, not compared (an argmax near-tie may go either way).
# Exit 77 with "SKIPPED: <reason>" when either run skips (no mpirun, no data set, no coll bundle).
runner=$1
np=$2
tolerance=$3
demo=$4
shift 4

out=$(mktemp -d "${TMPDIR:-/tmp}/nn_data_parallel.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

"$demo" --curve "$@" >"$out/single.txt" 2>&1
rc=$?
if [ $rc -eq 77 ]; then
  echo "SKIPPED: the single-process run skipped: $(tail -n 1 "$out/single.txt")"
  exit 77
fi
if [ $rc -ne 0 ]; then
  cat "$out/single.txt"
  echo "FAIL: the single-process run ended with status $rc"
  exit 1
fi

"$runner" "$np" "$demo" --data-parallel --curve "$@" >"$out/parallel.txt" 2>&1
rc=$?
if [ $rc -eq 77 ] || grep -q '^SKIPPED: ' "$out/parallel.txt"; then
  echo "SKIPPED: the $np-rank run skipped: $(grep -m 1 -i 'skipped' "$out/parallel.txt")"
  exit 77
fi
if [ $rc -ne 0 ]; then
  cat "$out/parallel.txt"
  echo "FAIL: the $np-rank run ended with status $rc"
  exit 1
fi
grep '^parallel:' "$out/parallel.txt"

# "curve <backend> epoch=E loss=X train_right=N test_right=N": the fields after the backend.
grep '^curve ' "$out/single.txt" | cut -d' ' -f3- | tr '=' ' ' >"$out/a"
grep '^curve ' "$out/parallel.txt" | cut -d' ' -f3- | tr '=' ' ' >"$out/b"
paste -d' ' "$out/a" "$out/b" | awk -v tol="$tolerance" -v np="$np" '
  function abs(v) { return v < 0 ? -v : v }
  BEGIN { printf "epoch  single-process loss   %d-rank loss          rel. diff  train right  held-out right\n", np }
  {
    # $1 epoch $2 E $3 loss $4 X $5 train_right $6 N $7 test_right $8 N, then the same for b
    if ($2 != $10) { print "FAIL: the epochs differ: " $0; bad = 1; next }
    a = $4 + 0; b = $12 + 0
    rel = abs(a - b) / (abs(a) > 1e-30 ? abs(a) : 1e-30)
    if (rel > worst) { worst = rel; worst_epoch = $2 }
    if (!(rel <= tol)) bad = 1
    printf "%5d  %.9e  %.9e  %.2e  %4d / %-4d  %4d / %-4d%s\n", $2, a, b, rel, $6, $14, $8, $16,
      rel <= tol ? "" : "  > tolerance"
    n++
  }
  END {
    if (n == 0) { print "FAIL: no curve lines"; exit 1 }
    printf "largest relative difference %.2e (epoch %d) over %d epochs; tolerance %g\n", worst,
      worst_epoch, n, tol
    exit bad ? 1 : 0
  }'
rc=$?
a_lines=$(wc -l <"$out/a")
b_lines=$(wc -l <"$out/b")
if [ "$a_lines" -ne "$b_lines" ]; then
  echo "FAIL: $a_lines single-process epochs but $b_lines data-parallel ones"
  exit 1
fi
if [ $rc -ne 0 ]; then
  echo "FAIL: the $np-rank loss curve is not the single-process one within $tolerance"
  exit 1
fi
echo "PASS: $np ranks, the loss curve within $tolerance of one process"
