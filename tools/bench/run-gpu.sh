#!/usr/bin/env bash
# parenchyma on a CUDA machine (the lent H200): build everything, run the whole test suite, then
# the GPU benchmarks, and pack the results. Never changes GPU clocks or settings.
#   tools/bench/run-gpu.sh build        configure + build into build-gpu/ (kept between calls)
#   tools/bench/run-gpu.sh test         ctest over the whole suite
#   tools/bench/run-gpu.sh bench        G1 G2 G3 G5/G6 G8-G10 G12, C1, N1-N4/N6 and the Python peers
#   tools/bench/run-gpu.sh nn           only the NN part: N1-N4/N6, PyTorch peer, join, output check
#   tools/bench/run-gpu.sh all          the three in order
# Results go to $OUT (or build-gpu/results): log files and json.tar.gz.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${PARENCHYMA_GPU_BUILD:-$SRC/build-gpu}
RES=${OUT:-$BUILD/results}
mkdir -p "$RES/json"
export PARENCHYMA_BENCH_OUT="$RES/json"
export PARENCHYMA_CACHE_DIR="$BUILD/kernel-cache"
step=${1:-all}

say() { echo "== $*"; }

do_build() {
  say "machine: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(uname -r)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id --format=csv,noheader || true
  (clinfo -l 2>/dev/null || true) | head -20
  g++ --version | head -1; cmake --version | head -1
  if ! cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARENCHYMA_WERROR=ON \
      >"$RES/configure.log" 2>&1; then
    tail -40 "$RES/configure.log"; return 1
  fi
  grep -iE "skipped|not found" "$RES/configure.log" || true
  ninja -C "$BUILD" -j"$(nproc)" -k 0 >"$RES/build.log" 2>&1
  local rc=$?
  grep -E "FAILED|error:|warning:" "$RES/build.log" | head -40
  say "build exit code $rc"
  "$BUILD/bin/parenchyma-info" --ops
  "$BUILD/bin/parenchyma-info" --json >"$RES/json/parenchyma-info.json"
  return $rc
}

do_test() {
  cd "$BUILD" || return 1
  ctest -j8 --timeout 300 --output-on-failure >"$RES/ctest.log" 2>&1
  local rc=$?
  grep -E "Test +#|tests passed|tests failed|Skipped|\*\*\*" "$RES/ctest.log" | tail -80
  say "ctest exit code $rc"
  # The OpenCL tests again with NVIDIA's platform alone, so device 0 is the GPU, not PoCL.
  PARENCHYMA_OPENCL_PLATFORMS=nvidia ctest -j4 --timeout 300 --output-on-failure \
    -R "opencl" -E "opencl_plugin" >"$RES/ctest-nvidia-opencl.log" 2>&1
  local rc2=$?
  grep -E "Test +#|tests passed|tests failed" "$RES/ctest-nvidia-opencl.log" | tail -20
  say "ctest (PARENCHYMA_OPENCL_PLATFORMS=nvidia) exit code $rc2"
  [ $rc -eq 0 ] && rc=$rc2
  return $rc
}

do_bench() {
  cd "$RES/json" || return 1
  local b="$BUILD/bin"
  say "C1 native dispatch";     OPENBLAS_NUM_THREADS=1 timeout 120 "$b/bench_core_dispatch" | tail -4
  say "G1/G2 dispatch";         timeout 180 "$b/bench_cuda_dispatch"
  say "G5/G6 transfers";        timeout 240 "$b/bench_cuda_transfer"
  say "G12 cold start";         timeout 180 "$b/bench_cuda_coldstart"
  say "G8/G9/G10 BLAS vs cuBLAS"; timeout 300 "$b/bench_blas_cuda"
  say "G3 PyTorch/CuPy peers";  PYTHONUNBUFFERED=1 timeout 200 python3 "$SRC/tools/bench/cuda/g3_torch.py"
  say "G10 torch.matmul peer";  PYTHONUNBUFFERED=1 timeout 200 python3 "$SRC/tools/bench/blas/g10_torch.py"
  do_nn
  say "plots of the JSON";      python3 "$SRC/tools/bench/plot.py" "$RES/json" "$RES/plots" \
    --title-suffix " (H200, $(date +%F))" || say "no plots (matplotlib missing?)"
}

# N1-N4/N6: the NN bundle vs cuDNN and the device copy, then PyTorch on the same cases, the joined
# ratio table (targets met / not met), and every op's output compared with PyTorch's.
do_nn() {
  cd "$RES/json" || return 1
  local b="$BUILD/bin" nn="$SRC/tools/bench/nn"
  say "N1-N4/N6 NN vs cuDNN, device copy"; timeout 480 "$b/bench_nn_cuda"
  say "N PyTorch peer";         PYTHONUNBUFFERED=1 timeout 480 python3 "$nn/n_torch.py"
  say "N parenchyma vs PyTorch"; python3 "$nn/compare.py" "$RES/json/n_cuda_nn.json" \
    "$RES/json/n_torch.json" --out "$RES/json/nn_vs_torch.json" | tee "$RES/nn_vs_torch.txt"
  say "NN outputs vs PyTorch (cuda)"; timeout 300 python3 "$nn/torch_check.py" \
    --dump "$b/nn_dump" --backend cuda >"$RES/nn_torch_check.log" 2>&1
  echo "torch_check exit code $?"; grep -E "FAIL|passed|failed|skipped" "$RES/nn_torch_check.log" | tail -30
}

case $step in
  build) do_build ;;
  nn) do_nn ;;
  test) do_test ;;
  bench) do_bench ;;
  all) do_build; do_test; do_bench ;;
  *) echo "usage: $0 build|test|bench|nn|all"; exit 2 ;;
esac
rc=$?
tar czf "$RES/json.tar.gz" -C "$RES" json 2>/dev/null
exit $rc
