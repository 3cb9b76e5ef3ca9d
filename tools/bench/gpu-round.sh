#!/usr/bin/env bash
# One call on the lent GPU machine, planned to fit its 10-minute limit: configure and build only
# what the named phases need (Release, warnings as errors, outside the tree), then run the phases
# in order, each under its own time limit, and copy logs and JSON to $OUT. Never changes GPU
# clocks or settings.
#   tools/bench/gpu-round.sh PHASE...
# Phases:
#   wheel     issue 28 on the machine's own Python: pip wheel . (requirements from a carried .wh/,
#             tools/bench/wheelhouse.sh), the wheel unpacked to a folder, tests/python against it
#   pycrash   tools/debug/python-crash.sh (the Python crash while the OpenCL plugin loads)
#   python    tests/python with pytest (the CUDA interop tests included); PCY_PYTEST_FALLBACK=1:
#             after a crash, again with libstdc++ global and without the OpenCL plugins
#   p1        P1: bench_small_ops alternated with PyTorch eager (tools/bench/core/p1_torch.py)
#   p2        P2: bench_blas_opencl --p2 on NVIDIA's OpenCL (the H200) and on PoCL
#   p3        P3/C1: bench_core_dispatch on the host CPU, 1 thread
#   p6        P6: bench_graph_replay on cuda
#   p6-impl   the same with our BLAS-1 kernels forced, then cuBLAS forced, each op alone (PCY_P6_OPS), n = PCY_P6_SIZES
#   g9        P4: bench_blas_cuda --g9 --quick with our kernels forced (ours and cuBLAS per size)
#   g9-table  the same with the shipped table
#   swap-table swap and copy with the shipped table and grid, 64 MiB-1 GiB
#   swap      swap's share of device-copy bandwidth at 64 MiB-1 GiB for 4, 8 and 16 blocks per SM
#   g10       G10 and the f16/bf16 gemm rows: bench_blas_cuda --quick, then g10_torch.py
#   nn-fast   N1-N3: bench_nn_cuda and n_torch.py on elementwise, dropout, softmax, pooling, LRN
#   nn-find   test_nn_find_cache_cuda alone (with PCY_TARGETS_ONLY=1: the cuda plugin and NN bundle)
#   nn-conv   the CUDA NN bundle's measured algorithms on disk (test_nn_find_cache_cuda), then N4,
#             N6: the convolutions and the demo's training step, both sides
#   nn-norm   the NN conformance suite on cuda (every case; failures listed), then N7: layer_norm
#             and rms_norm with their gradients, bench_nn_cuda and n_torch.py
#   tests     ctest over the whole suite (builds the tests)
#   pdl       P6 and P1 with early launch on and off, our BLAS-1 kernels and cuBLAS's
#   probe     tools/debug/pdl_probe.cu: raw launch, graph and PDL costs
#   conf-blas the BLAS conformance suite on cuda (f16/bf16 gemm cells included)
#   selftest  nn-cuda-selftest and the NN/BLAS conformance suites on cuda
#   demo      parenchyma-nn-demo on every backend
#   pocl      tools/debug/pocl_scan: which NN OpenCL kernel crashes PoCL's kernel compiler
#   array     the array extension: its tests on every backend (cuda, NVIDIA OpenCL, PoCL, native),
#             the NN demo on cuda, then A1-A4 (bench_array_cuda) against a device copy or fill
#   array-quick  the random and repeated-launch GPU tests, then A1-A4, then the reductions' GPU
#             test in the time left
#   coll-nccl the coll extension's NCCL bundle (coll_cuda): where libnccl.so.2 is, the load report,
#             the coll tests on cuda with one rank (coll_cuda_np1: file rendezvous, the matrix and a
#             replayed graph; coll_cuda_mpi_np1 under mpirun where MPI is), then bench_coll_nccl
#             (ncclAllReduce direct vs through parenchyma on the stream, and per op in graphs);
#             on a machine of several GPUs also the matrix with one process a GPU (file
#             rendezvous). libnccl.so.2: PCY_NCCL_LIB (a directory), else the loader's, the
#             toolkit's, or the first found under /opt, /usr/local, /usr/lib (PyTorch's wheel)
#   vulkan    NVIDIA's Vulkan driver: the loader and glvnd from .gl/*.deb (unpacked with dpkg -x;
#             the machine has the ICD only) and .gl/parenchyma-glsl.so; parenchyma-info, the
#             framework, BLAS and NN conformance suites on vulkan, the thread stress test, the NN
#             demo and the GPU array test (CUDA and OpenCL hidden) on vulkan (PCY_VK_SUITES_ONLY=1:
#             parenchyma-info and the three suites only)
#   vulkan-array  test_array_gpu's exact-instruction case (PCY_VK_ARRAY_FILTER: another) on vulkan
#             alone (CUDA and OpenCL hidden), its differences listed
#   vulkan-bench  issue 25's Vulkan figures: bench_blas_vulkan (BLAS-1 vs a device copy, sgemm vs
#             cuBLAS through the cuda backend, small ops vs a raw vkCmdDispatch), then bench_graph_replay
#             on vulkan (a replayed op), set up as `vulkan`
# Environment: PCY_GPU_BUILD (default /tmp/pcy-gpu), PCY_KCACHE (a kernel cache tarball to start
# from, default .device/kcache.tgz; the cache is packed back into $OUT/kcache.tgz after each
# phase), PCY_DEADLINE (seconds from the start after which no further phase begins; default 540),
# PCY_TARGETS_ONLY=1 (build only the native plugins and what the phases name).
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=${PCY_GPU_BUILD:-/tmp/pcy-gpu}
OUT=${OUT:-$B/out}
L=$B/logs # everything comes back as one tarball: $OUT/round.tgz (logs and JSON)
mkdir -p "$OUT" "$B/json" "$L"
export PARENCHYMA_BENCH_OUT="$B/json" PARENCHYMA_CACHE_DIR="$B/kcache" PYTHONUNBUFFERED=1
T0=$SECONDS
say() { echo "== $* (+$((SECONDS - T0)) s)"; }
phases=" $* "
has() { [[ $phases == *" $1 "* ]]; }

kc=${PCY_KCACHE:-$SRC/.device/kcache.tgz}
[ -f "$kc" ] && mkdir -p "$B/kcache" && tar xzf "$kc" -C "$B/kcache" && say "kernel cache from $kc"

# ---- build ------------------------------------------------------------------------------------
targets=(parenchyma-info parenchyma-cuda parenchyma-native parenchyma-opencl parenchyma-blas-cuda
  parenchyma-blas-native parenchyma-blas-opencl parenchyma-nn-cuda parenchyma-nn-native
  parenchyma-nn-opencl)
# PCY_TARGETS_ONLY=1: build only what the named phases add (not the CUDA/OpenCL/NN set above).
[ -n "${PCY_TARGETS_ONLY:-}" ] && targets=(parenchyma-info parenchyma-native parenchyma-blas-native)
tests=ON # configured always (only the targets named are built, unless the tests phase runs)
all=OFF
has pycrash && targets+=(_parenchyma)
has python && targets+=(_parenchyma test_dlpack test_dlpack_versioned)
has pyfix && targets+=(_parenchyma)
has p1 && targets+=(bench_small_ops _parenchyma)
has p3 && targets+=(bench_core_dispatch)
has p2 && targets+=(bench_blas_opencl)
{ has p6 || has p6-impl || has pdl; } && targets+=(bench_graph_replay)
has pdl && targets+=(bench_small_ops _parenchyma)
{ has g9 || has g9-table || has g10 || has swap || has swap-table; } && targets+=(bench_blas_cuda)
{ has nn-fast || has nn-conv; } && targets+=(bench_nn_cuda)
has nn-conv && targets+=(test_nn_find_cache_cuda)
has nn-find && targets+=(parenchyma-cuda parenchyma-nn-cuda test_nn_find_cache_cuda)
has nn-norm && targets+=(bench_nn_cuda parenchyma-conformance)
has selftest && targets+=(nn-cuda-selftest parenchyma-conformance)
has conf-blas && targets+=(parenchyma-conformance)
has pocl && targets+=(parenchyma-conformance)
# The demo's loss, accuracy and optimiser run on the array extension: its bundles too.
has demo && targets+=(parenchyma-nn-demo parenchyma-array-native parenchyma-array-opencl
  parenchyma-array-cuda)
has array && targets+=(bench_array_cuda test_array test_array_gpu test_array_hostile test_array_random
  parenchyma-array-native parenchyma-array-opencl parenchyma-array-cuda parenchyma-nn-demo)
has array-quick && targets+=(bench_array_cuda test_array_gpu test_array_random parenchyma-array-native
  parenchyma-array-opencl parenchyma-array-cuda)
has coll-nccl && targets+=(parenchyma-coll-cuda test_coll_matrix bench_coll_nccl)
has vulkan && targets+=(parenchyma-vulkan parenchyma-blas-vulkan parenchyma-nn-vulkan parenchyma-array-vulkan
  parenchyma-array-native parenchyma-nn-native parenchyma-nn-demo parenchyma-conformance test_stress
  test_array_gpu)
has vulkan-array && targets+=(parenchyma-vulkan parenchyma-array-vulkan parenchyma-array-native
  test_array_gpu)
# The cuda plugin and blas_cuda too (also under PCY_TARGETS_ONLY): the bench's cuBLAS column.
has vulkan-bench && targets+=(parenchyma-vulkan parenchyma-blas-vulkan bench_blas_vulkan parenchyma-cuda
  parenchyma-blas-cuda bench_graph_replay)
has tests && all=ON
if has vulkan || has vulkan-bench || has vulkan-array; then
  # Before configuring: the Vulkan headers and loader (libvulkan-dev, libvulkan1) and the glvnd
  # libraries NVIDIA's ICD loads, from the Debian packages carried in .gl/.
  for d in "$SRC"/.gl/*.deb; do dpkg -x "$d" / 2>>"$L/vulkan-setup.log"; done
  ldconfig 2>/dev/null
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
  say "vulkan: loader $(ls /usr/lib/x86_64-linux-gnu/libvulkan.so.1 2>&1), ICD $VK_DRIVER_FILES"
fi
say "machine: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
# coll-nccl needs nccl.h at configure time: the toolkit's, else the one PyTorch's nvidia-nccl
# wheel carries (its include directory joins CMAKE_INCLUDE_PATH).
if has coll-nccl && [ ! -e /usr/local/cuda/include/nccl.h ]; then
  nh=$(find /opt /usr/include /usr/local -name nccl.h -not -path '*/nccl_device/*' 2>/dev/null | head -1)
  say "coll-nccl: nccl.h ${nh:-not found (the bundle will not be built)}"
  [ -n "$nh" ] && PARENCHYMA_EXTRA_INCLUDE="${PARENCHYMA_EXTRA_INCLUDE:-$SRC/.device/include};$(dirname "$nh")"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
PYB=$(python3 -m pybind11 --cmakedir 2>/dev/null)
if [ ! -f "$B/CMakeCache.txt" ] || [ "$(grep -c "PARENCHYMA_BUILD_TESTS:BOOL=$tests" "$B/CMakeCache.txt")" = 0 ]; then
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARENCHYMA_WERROR=ON \
    -DPARENCHYMA_BUILD_TESTS=$tests -DCMAKE_INCLUDE_PATH="${PARENCHYMA_EXTRA_INCLUDE:-$SRC/.device/include}" \
    ${PYB:+-Dpybind11_DIR=$PYB} -DPython3_EXECUTABLE="$(command -v python3)" >"$L/configure.log" 2>&1 \
    || { tail -30 "$L/configure.log"; exit 1; }
fi
say "configured"
# coll-nccl's targets exist only where CMake found nccl.h (and MPI for parts of the tests): an
# unknown target would stop ninja before it builds anything, so those not configured are dropped.
if has coll-nccl; then
  known=$(ninja -C "$B" -t targets all 2>/dev/null | sed 's/:.*//')
  keep=()
  for t in "${targets[@]}"; do
    case $t in
    parenchyma-coll-cuda | test_coll_matrix | bench_coll_nccl)
      if grep -qx "$t" <<<"$known"; then keep+=("$t"); else say "coll-nccl: target $t not configured here (nccl.h not found? see $L/configure.log)"; fi ;;
    *) keep+=("$t") ;;
    esac
  done
  targets=("${keep[@]}")
fi
if [ $all = ON ]; then ninja -C "$B" -j"$(nproc)" -k 0 >"$L/build.log" 2>&1
else ninja -C "$B" -j"$(nproc)" -k 0 "${targets[@]}" >"$L/build.log" 2>&1; fi
rc=$?
grep -E "FAILED|error:" "$L/build.log" | head -20
say "build exit code $rc"; tar czf "$OUT/round.tgz" -C "$B" logs 2>/dev/null

bin=$B/bin
pack() {
  tar czf "$OUT/round.tgz" -C "$B" logs json 2>/dev/null
  tar czf "$OUT/kcache.tgz" -C "$B/kcache" . 2>/dev/null
}
deadline=${PCY_DEADLINE:-540}

# ---- phases -----------------------------------------------------------------------------------
for p in "$@"; do
  if [ $((SECONDS - T0)) -ge "$deadline" ]; then say "skipped $p: past the deadline"; continue; fi
  case $p in
  pycrash) say pycrash; PCY_LOGS="$L" timeout 240 "$SRC/tools/debug/python-crash.sh" "$B" 2>&1 | tee "$L/pycrash.log" | tail -150 ;;
  pyfix)
    say "toolchain: what our libraries export of the C++ runtime"
    g++ --version | head -1; g++ -print-file-name=libstdc++.so; g++ -print-file-name=libstdc++.a
    for f in "$B"/python/parenchyma/_parenchyma*.so "$B"/lib/libparenchyma-core.so "$B"/lib/parenchyma/plugins/parenchyma-opencl.so; do
      echo "$(basename "$f"): $(nm -D --defined-only "$f" | grep -cE ' (_ZSt9terminatev|__once_proxy|_ZSt11__once_call)$') C++ runtime symbols exported; needs: $(readelf -d "$f" | grep -o 'libstdc++[^]]*' | head -1)"
    done
    say "python tests with the package's preload off (the build fix alone)"
    PARENCHYMA_GLOBAL_CXX_RUNTIME=0 PYTHONPATH="$B/python" timeout 200 python3 -m pytest -q -rs -p no:cacheprovider "$SRC/tests/python" \
      >"$L/pytest-preload-off.log" 2>&1; echo "pytest exit code $?"; tail -6 "$L/pytest-preload-off.log" ;;
  wheel)
    # Issue 28 on another distribution: the machine's own Python (no dlpack.h, no network), pip
    # run from its wheel in .wh/ (tools/bench/wheelhouse.sh fills it), the build requirements from
    # there too (pip's isolated build environment, --no-index), the wheel unpacked into a target
    # folder and tests/python run against it from outside the source tree.
    say "wheel: pip wheel . with $(python3 --version 2>&1), requirements from .wh/ only"
    pipw=$(ls "$SRC"/.wh/pip-*.whl 2>/dev/null | head -1)
    if [ -z "$pipw" ]; then echo "no .wh/pip-*.whl: run tools/bench/wheelhouse.sh and carry .wh"; else
      W=$B/wheel; rm -rf "$W"; mkdir -p "$W"
      (cd "$SRC" && CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 420 python3 "$pipw/pip" wheel . --no-deps --no-index \
        --find-links "$SRC/.wh" -w "$W/dist" --config-settings=build-dir="$W/cmake" >"$L/wheel-build.log" 2>&1)
      echo "pip wheel exit code $?"; grep -iE "dlpack|python package|error" "$L/wheel-build.log" | head -8; ls "$W/dist"
      PIP_BREAK_SYSTEM_PACKAGES=1 python3 "$pipw/pip" install -q --no-index --no-deps --target "$W/site" "$W"/dist/parenchyma-*.whl
      echo "pip install exit code $?"
      (cd "$W" && PYTHONPATH="$W/site" python3 -c "import os, parenchyma as p; print('parenchyma', p.__version__, 'from', os.path.dirname(p.__file__)); print('Backend():', p.Backend(), '; DLPack', p.DLPACK_VERSION)")
      (cd "$W" && PYTHONPATH="$W/site" PARENCHYMA_CACHE_DIR="$W/cache" timeout 240 python3 -m pytest -q -rs -p no:cacheprovider \
        -c "$SRC/tests/python/pytest.ini" --rootdir "$SRC/tests/python" "$SRC/tests/python" >"$L/wheel-pytest.log" 2>&1)
      echo "pytest exit code $?"; tail -25 "$L/wheel-pytest.log"
    fi ;;
  python)
    say "DLPack C++ tests (versioned where dlpack.h >= 1.0)"
    for t in dlpack dlpack_versioned; do (cd "$B" && timeout 60 "bin/test_$t" >"$L/test_$t.log" 2>&1); echo "test_$t exit code $?"; done
    tail -3 "$L/test_dlpack_versioned.log"
    say "python tests"
    PYTHONPATH="$B/python" timeout 200 python3 -m pytest -q -rs -p no:cacheprovider "$SRC/tests/python" \
      >"$L/pytest.log" 2>&1; rc=$?; echo "pytest exit code $rc"; tail -30 "$L/pytest.log"
    if [ $rc -ge 2 ] && [ -n "${PCY_PYTEST_FALLBACK:-}" ]; then
      # A crash: again with libstdc++ in the global scope first, then without the OpenCL plugins.
      say "python tests, libstdc++ made global first"
      PYTHONPATH="$B/python" timeout 200 python3 -c "import ctypes, sys; ctypes.CDLL('libstdc++.so.6', mode=ctypes.RTLD_GLOBAL); import pytest; sys.exit(pytest.main(['-q', '-rs', '-p', 'no:cacheprovider', '$SRC/tests/python']))" \
        >"$L/pytest-global.log" 2>&1; echo "pytest exit code $?"; tail -30 "$L/pytest-global.log"
      iso=$B/iso-no-opencl/lib; mkdir -p "$iso/parenchyma/plugins"; cp -a "$B"/lib/libparenchyma-core.so* "$iso/"
      cp -a "$B"/lib/parenchyma/plugins/*.so "$iso/parenchyma/plugins/"; rm -f "$iso"/parenchyma/plugins/*opencl*
      say "python tests without the OpenCL plugins"
      LD_LIBRARY_PATH="$iso:${LD_LIBRARY_PATH:-}" PYTHONPATH="$B/python" timeout 200 python3 -m pytest -q -rs -p no:cacheprovider "$SRC/tests/python" \
        >"$L/pytest-no-opencl.log" 2>&1; echo "pytest exit code $?"; tail -30 "$L/pytest-no-opencl.log"
    fi ;;
  p1)
    say "P1, BLAS-1 by the shipped table"; timeout 150 python3 "$SRC/tools/bench/core/p1_torch.py" "$B" cuda 2>&1 | tail -8
    mv "$B/json/p1_small_ops.json" "$B/json/p1_small_ops_table.json" 2>/dev/null
    say "P1, our kernels forced"; PARENCHYMA_BLAS_CUDA_IMPL=own timeout 150 python3 "$SRC/tools/bench/core/p1_torch.py" "$B" cuda 2>&1 | tail -8
    mv "$B/json/p1_small_ops.json" "$B/json/p1_small_ops_own.json" 2>/dev/null ;;
  p2)
    for pf in nvidia portable; do
      say "P2 on OpenCL platform '$pf'"
      PARENCHYMA_OPENCL_PLATFORMS=$pf OPENBLAS_NUM_THREADS=1 timeout 120 "$bin/bench_blas_opencl" --p2 --quick 2>&1 | grep -E "P2|#" | tail -4
      mv "$B"/json/p2_opencl_small_ops_default.json "$B/json/p2_opencl_small_ops_$pf.json" 2>/dev/null
    done ;;
  array)
    for t in array array_hostile array_random array_gpu; do
      say "test_$t"; (cd "$B" && timeout 150 "$bin/test_$t" >"$L/test_$t.log" 2>&1); echo "test_$t exit code $?"
      tail -4 "$L/test_$t.log"
    done
    say "test_array_gpu [reduce], the tiled kernel for outer reductions"
    (cd "$B" && PARENCHYMA_ARRAY_OUTER_SLICES=8 timeout 100 "$bin/test_array_gpu" "[reduce]" 2>&1 | tail -3)
    say "NN demo on cuda (the array extension's loss, accuracy and Adam)"
    timeout 120 "$bin/parenchyma-nn-demo" --backend cuda 2>&1 | tail -6
    say "A1-A4 (bench_array_cuda)"; timeout 240 "$bin/bench_array_cuda" 2>&1 | tail -24
    left=$((${PCY_DEADLINE:-540} - (SECONDS - T0) - 10))
    if [ "$left" -gt 30 ]; then
      say "test_array_gpu [reduce] (the reductions' bits against native; ${left} s at most)"
      (cd "$B" && timeout "$left" "$bin/test_array_gpu" "[reduce]" 2>&1 | tail -4)
    fi ;;
  array-quick)
    say "test_array_random"; (cd "$B" && timeout 100 "$bin/test_array_random" 2>&1 | tail -2)
    say "test_array_gpu [random] and the repeated launch"
    (cd "$B" && timeout 150 "$bin/test_array_gpu" "[random],*memo*" 2>&1 | tail -3)
    say "A1-A4 (bench_array_cuda)"; timeout 240 "$bin/bench_array_cuda" 2>&1 | tail -24
    left=$((${PCY_DEADLINE:-540} - (SECONDS - T0) - 10))
    if [ "$left" -gt 30 ]; then
      say "test_array_gpu [reduce] (the reductions' bits against native; ${left} s at most)"
      (cd "$B" && timeout "$left" "$bin/test_array_gpu" "[reduce]" 2>&1 | tail -4)
    fi ;;
  p3) say "P3 (C1 on the host)"; OPENBLAS_NUM_THREADS=1 timeout 120 "$bin/bench_core_dispatch" 2>&1 | tail -8 ;;
  p6) say P6; timeout 120 "$bin/bench_graph_replay" cuda 2>&1 | tail -12 ;;
  p6-impl)
    # Which BLAS-1 implementation makes the cheaper graph node (the table chose by host-bound
    # stream time, where the launch hides the kernel's own time).
    for op in ${PCY_P6_OPS:-axpy scal}; do
      for n in ${PCY_P6_SIZES:-1024 4096 16384 65536 262144 1048576 4194304}; do
        for impl in own cublas; do
          echo "$op n=$n $impl: $(PARENCHYMA_BLAS_CUDA_IMPL=$impl timeout 120 "$bin/bench_graph_replay" --n "$n" --op "$op" cuda 2>&1 | grep -E "replay" | head -1)"
          mv "$B/json/graph_replay.json" "$B/json/graph_node_${op}_${impl}_$n.json" 2>/dev/null
        done
      done
    done; pack ;;
  pdl)
    # Early launch (programmatic dependent launch of kernels that wait for prior work) on and
    # off, our BLAS-1 kernels and cuBLAS's, in a replayed graph (P6) and one by one (P1).
    for early in 1 0; do
      for impl in own cublas; do
        say "P6 early launch $early, BLAS-1 by $impl"
        PARENCHYMA_CUDA_EARLY_LAUNCH=$early PARENCHYMA_BLAS_CUDA_IMPL=$impl timeout 120 "$bin/bench_graph_replay" cuda 2>&1 | tail -4
        mv "$B/json/graph_replay.json" "$B/json/graph_replay_${impl}_early$early.json" 2>/dev/null
      done
    done
    for early in 1 0; do
      say "P1 early launch $early, our kernels"
      PARENCHYMA_CUDA_EARLY_LAUNCH=$early PARENCHYMA_BLAS_CUDA_IMPL=own timeout 150 python3 "$SRC/tools/bench/core/p1_torch.py" "$B" cuda 2>&1 | tail -4
      mv "$B/json/p1_small_ops.json" "$B/json/p1_small_ops_own_early$early.json" 2>/dev/null
    done; pack ;;
  probe)
    say "pdl_probe (raw CUDA runtime)"; nvcc -O2 -arch=sm_90 -o "$B/pdl_probe" "$SRC/tools/debug/pdl_probe.cu" &&
      timeout 60 "$B/pdl_probe" 2>&1 | grep -v "result check: max rel err 1.66e-05 ok" | tee "$L/pdl_probe.txt" ;;
  g9)
    say "P4 g9, ours forced"; PARENCHYMA_BLAS_CUDA_IMPL=own timeout 200 "$bin/bench_blas_cuda" --g9 --quick >"$L/g9-own.log" 2>&1
    echo "exit code $?"; grep -E "CHECK" "$L/g9-own.log" | head -5 ;;
  g9-table)
    say "P4 g9, shipped table"; timeout 200 "$bin/bench_blas_cuda" --g9 --quick >"$L/g9-table.log" 2>&1
    echo "exit code $?"; grep -E "CHECK" "$L/g9-table.log" | head -5 ;;
  swap-table)
    say "swap and copy, the shipped table"
    PARENCHYMA_BENCH_OUT="$L" timeout 60 "$bin/bench_blas_cuda" --g9 --quick --only swap,copy >"$L/swap-table.log" 2>&1
    grep -E "=> .*(64 MiB|256 MiB|1 GiB)" "$L/swap-table.log" ;;
  swap)
    for bps in 4 8 16; do
      say "swap, $bps blocks per SM"
      PARENCHYMA_BLAS_CUDA_IMPL=own PARENCHYMA_BLAS_CUDA_BLOCKS_PER_SM=$bps PARENCHYMA_BENCH_OUT="$L" \
        timeout 60 "$bin/bench_blas_cuda" --g9 --quick --only swap,copy >"$L/swap-$bps.log" 2>&1
      grep -E "=> .*(64 MiB|256 MiB|1 GiB)" "$L/swap-$bps.log"
    done ;;
  g10)
    say "G10 and the f16/bf16 gemm rows"; timeout 240 "$bin/bench_blas_cuda" --quick >"$L/g10.log" 2>&1; echo "exit code $?"
    grep -iE "gemm" "$L/g10.log" | tail -24
    say "G10 torch.matmul peer"; timeout 150 python3 "$SRC/tools/bench/blas/g10_torch.py" --quick 2>&1 | tail -12 ;;
  nn-fast)
    say "N1-N3 ours"; timeout 240 "$bin/bench_nn_cuda" --quick --only elementwise,dropout,softmax,pooling,lrn >"$L/nn-fast.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_cuda_nn.json" "$B/json/n_cuda_nn_fast.json" 2>/dev/null
    say "N1-N3 torch"; timeout 150 python3 "$SRC/tools/bench/nn/n_torch.py" --quick --only "relu|sigmoid|tanh|dropout|softmax|pool|lrn" >"$L/nn-fast-torch.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_torch.json" "$B/json/n_torch_fast.json" 2>/dev/null
    python3 "$SRC/tools/bench/nn/compare.py" "$B/json/n_cuda_nn_fast.json" "$B/json/n_torch_fast.json" \
      --out "$B/json/nn_vs_torch_fast.json" 2>&1 | tail -45 ;;
  nn-find)
    say "the measured algorithms on disk (test_nn_find_cache_cuda)"
    timeout 120 "$bin/test_nn_find_cache_cuda" --durations yes >"$L/nn-find-cache.log" 2>&1
    echo "exit code $?"; tail -25 "$L/nn-find-cache.log" ;;
  nn-conv)
    say "the measured algorithms on disk (test_nn_find_cache_cuda)"
    timeout 120 "$bin/test_nn_find_cache_cuda" >"$L/nn-find-cache.log" 2>&1
    echo "exit code $?"; tail -5 "$L/nn-find-cache.log"
    say "N4/N6 ours"; timeout 200 "$bin/bench_nn_cuda" --quick --only conv,train >"$L/nn-conv.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_cuda_nn.json" "$B/json/n_cuda_nn_conv.json" 2>/dev/null
    say "N4/N6 torch"; timeout 120 python3 "$SRC/tools/bench/nn/n_torch.py" --quick --only "conv|3x3|1x1|train" >"$L/nn-conv-torch.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_torch.json" "$B/json/n_torch_conv.json" 2>/dev/null
    python3 "$SRC/tools/bench/nn/compare.py" "$B/json/n_cuda_nn_conv.json" "$B/json/n_torch_conv.json" \
      --out "$B/json/nn_vs_torch_conv.json" 2>&1 | tail -60 ;;
  tests)
    # PCY_CTEST_ARGS: more ctest arguments (e.g. -R cuda for a subset)
    say tests; (cd "$B" && timeout 400 ctest -j8 --timeout 240 --output-on-failure ${PCY_CTEST_ARGS:-} >"$L/ctest.log" 2>&1)
    echo "ctest exit code $?"; grep -E "tests passed|tests failed|\(Failed|\(SEGFAULT|\(Timeout|\(Subprocess" "$L/ctest.log" | tail -30 ;;
  nn-norm)
    say "conformance nn on cuda"
    timeout 150 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite nn --require-ops >"$L/conf-nn.log" 2>&1
    echo "exit code $?"; grep -E "FAIL|fail:|summary" "$L/conf-nn.log" | head -30
    say "N7 ours"; timeout 120 "$bin/bench_nn_cuda" --quick --only norm >"$L/nn-norm.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_cuda_nn.json" "$B/json/n_cuda_nn_norm.json" 2>/dev/null
    say "N7 torch"; timeout 100 python3 "$SRC/tools/bench/nn/n_torch.py" --quick --only "norm|embedding" >"$L/nn-norm-torch.log" 2>&1
    echo "exit code $?"; mv "$B/json/n_torch.json" "$B/json/n_torch_norm.json" 2>/dev/null
    python3 "$SRC/tools/bench/nn/compare.py" "$B/json/n_cuda_nn_norm.json" "$B/json/n_torch_norm.json" \
      --out "$B/json/nn_vs_torch_norm.json" 2>&1 | tail -20 ;;
  selftest)
    say selftest; timeout 150 "$bin/nn-cuda-selftest" >"$L/selftest.log" 2>&1; echo "selftest exit code $?"
    grep -vE "PASS" "$L/selftest.log" | tail -10
    for s in nn blas; do
      timeout 150 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite $s --require-ops >"$L/conf-$s.log" 2>&1
      echo "conformance $s on cuda exit code $?"; grep -E "passed|failed" "$L/conf-$s.log" | tail -3
    done ;;
  conf-blas)
    say "conformance blas on cuda"
    timeout 150 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite blas --require-ops >"$L/conf-blas.log" 2>&1
    echo "exit code $?"; grep -E "FAIL|fail:|summary|note: gemm" "$L/conf-blas.log" | head -20
    say "conformance blas on NVIDIA's OpenCL (our kernels: no CLBlast there)"
    PARENCHYMA_OPENCL_PLATFORMS=nvidia timeout 150 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework opencl --suite blas >"$L/conf-blas-ocl.log" 2>&1
    echo "exit code $?"; grep -E "FAIL|fail:|summary" "$L/conf-blas-ocl.log" | head -12 ;;
  pocl)
    say "PoCL kernel scan"
    if g++ -std=c++20 -O1 -I"$SRC" "$SRC/tools/debug/pocl_scan.cpp" -o "$B/pocl_scan" -l:libOpenCL.so.1 >"$L/pocl-build.log" 2>&1; then
      timeout 150 "$B/pocl_scan" Portable 2>"$L/pocl-f32.err" | tee "$L/pocl-f32.log" | grep -vE " ok$"
      timeout 100 "$B/pocl_scan" Portable "-DREAL=double -DPCY_FP64 -DSWG=256 -DTS=16" 2>"$L/pocl-f64.err" | grep -vE " ok$"
    else tail -5 "$L/pocl-build.log"; fi
    if [ -x "$bin/parenchyma-conformance" ]; then
      say "NN conformance on PoCL (opencl:0 when PoCL is the only platform)"
      PARENCHYMA_OPENCL_PLATFORMS=portable timeout 200 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework opencl --suite nn --require-ops >"$L/conf-nn-pocl.log" 2>&1
      echo "exit code $?"; grep -E "FAIL|summary|on opencl" "$L/conf-nn-pocl.log" | head -12
    fi ;;
  vulkan)
    mkdir -p "$B/lib/parenchyma/plugins/vulkan"
    cp "$SRC/.gl/parenchyma-glsl.so" "$B/lib/parenchyma/plugins/vulkan/" 2>/dev/null
    say "parenchyma-info (vulkan)"; "$bin/parenchyma-info" 2>&1 | grep -iE "vulkan" | head -8
    PARENCHYMA_LOG_LEVEL=debug "$bin/parenchyma-info" 2>&1 | grep -E "subnormals|denorm" | head -4
    for s in framework blas nn; do
      say "conformance $s on vulkan"
      timeout 200 "$bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework vulkan \
        --suite $s --require-ops >"$L/conf-vk-$s.log" 2>&1
      echo "exit code $?"; grep -E "FAIL|summary|skip " "$L/conf-vk-$s.log" | head -12
    done
    if [ -z "${PCY_VK_SUITES_ONLY:-}" ]; then
    say "thread stress on vulkan"; timeout 100 "$bin/test_stress" vulkan 2>&1 | tail -4
    say "NN demo on vulkan"; timeout 120 "$bin/parenchyma-nn-demo" --backend vulkan 2>&1 | tail -6
    # array_vulkan alone: CUDA hidden and no OpenCL platform matched, so the GPU array test runs
    # its cases on vulkan only.
    say "test_array_gpu on vulkan"
    (cd "$B" && CUDA_VISIBLE_DEVICES= PARENCHYMA_OPENCL_PLATFORMS=none-here timeout 150 \
      "$bin/test_array_gpu" >"$L/array-gpu-vk.log" 2>&1); echo "exit code $?"
    grep -E "FAILED|skipped on vulkan|test cases" "$L/array-gpu-vk.log" | sort | uniq -c | head -20
    fi ;;
  vulkan-array)
    mkdir -p "$B/lib/parenchyma/plugins/vulkan"
    cp "$SRC/.gl/parenchyma-glsl.so" "$B/lib/parenchyma/plugins/vulkan/" 2>/dev/null
    f=${PCY_VK_ARRAY_FILTER:-array gpu: every exact instruction matches the native bundle to the bit}
    say "test_array_gpu on vulkan: $f"
    (cd "$B" && CUDA_VISIBLE_DEVICES= PARENCHYMA_OPENCL_PLATFORMS=none-here timeout 150 \
      "$bin/test_array_gpu" "$f" >"$L/array-gpu-vk-exact.log" 2>&1); echo "exit code $?"
    grep -E "op [0-9]+ on|element [0-9]+:|test cases|assertions" "$L/array-gpu-vk-exact.log" | head -40 ;;
  vulkan-bench)
    mkdir -p "$B/lib/parenchyma/plugins/vulkan"
    cp "$SRC/.gl/parenchyma-glsl.so" "$B/lib/parenchyma/plugins/vulkan/" 2>/dev/null
    say "bench_blas_vulkan (NVIDIA's Vulkan driver; cuBLAS through the cuda backend)"
    timeout 200 "$bin/bench_blas_vulkan" >"$L/vulkan-bench.log" 2>&1; echo "exit code $?"
    grep -E "^# |CHECK" "$L/vulkan-bench.log" | head -8
    sed -n '/^== /,$p' "$L/vulkan-bench.log" | cut -c1-200
    say "bench_graph_replay on vulkan (issue 25: a replayed op <= 1 us)"
    timeout 100 "$bin/bench_graph_replay" vulkan >"$L/vulkan-graph.log" 2>&1; echo "exit code $?"
    tail -8 "$L/vulkan-graph.log" | cut -c1-200
    say "bench_blas_vulkan --parts nn with PARENCHYMA_NN_VULKAN_SUBGROUP=0 (shared-memory trees only)"
    PARENCHYMA_NN_VULKAN_SUBGROUP=0 timeout 100 "$bin/bench_blas_vulkan" --parts nn >"$L/vulkan-bench-nosg.log" 2>&1
    echo "exit code $?"; sed -n '/^== NN/,/^$/p' "$L/vulkan-bench-nosg.log" | cut -c1-200 ;;
  coll-nccl)
    export NCCL_NVLS_ENABLE=0 # the lent machines' rule: NVLink multicast stays off in NCCL
    # libnccl.so.2: PCY_NCCL_LIB, else the loader's path or the toolkit's, else the one the image's
    # PyTorch carries (the nvidia-nccl wheel's lib directory), put on LD_LIBRARY_PATH.
    nl=${PCY_NCCL_LIB:+$PCY_NCCL_LIB/libnccl.so.2}
    [ -z "$nl" ] && nl=$(ldconfig -p | grep -m1 'libnccl.so.2 ' | sed 's/.*=> //')
    [ -z "$nl" ] && [ -e /usr/local/cuda/lib64/libnccl.so.2 ] && nl=/usr/local/cuda/lib64/libnccl.so.2
    [ -z "$nl" ] && nl=$(find /opt /usr/local /usr/lib -name libnccl.so.2 2>/dev/null | head -1)
    [ -n "$nl" ] && export LD_LIBRARY_PATH="$(dirname "$nl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "coll-nccl: libnccl.so.2 ${nl:-not found}"
    "$bin/parenchyma-info" 2>&1 | grep -E "coll_(cuda|native) " | head -4
    say "coll tests on cuda, one rank (ctest -R coll_cuda)"
    (cd "$B" && timeout 300 ctest -R coll_cuda -V --timeout 280 >"$L/coll-nccl-ctest.log" 2>&1); echo "ctest exit code $?"
    grep -E "coll on |SKIPPED|FAIL|passed|recorded|Test +#|tests passed|tests failed" "$L/coll-nccl-ctest.log" | tail -24
    ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
    if [ "${ngpu:-0}" -ge 2 ]; then
      say "coll on cuda, $ngpu ranks: one process a GPU, the id through a file rendezvous"
      id="$B/coll-nccl-$$.id"; rm -f "$id"; pids=()
      for r in $(seq 0 $((ngpu - 1))); do
        CUDA_VISIBLE_DEVICES=$r PARENCHYMA_COLL_RENDEZVOUS=$id PARENCHYMA_COLL_RANK=$r \
          PARENCHYMA_COLL_SIZE=$ngpu PARENCHYMA_COLL_TIMEOUT=60 PARENCHYMA_LOG_LEVEL=warn \
          timeout 280 "$bin/test_coll_matrix" cuda >"$L/coll-nccl-rank$r.log" 2>&1 &
        pids+=($!)
      done
      for r in "${!pids[@]}"; do
        wait "${pids[$r]}"; echo "rank $r exit code $?"; grep -E "FAIL|passed|coll on" "$L/coll-nccl-rank$r.log" | head -8
      done
    fi
    say "bench_coll_nccl (targets: stream <= +1 us per op, graph <= 0.6 us per op)"
    timeout 200 "$bin/bench_coll_nccl" 2>&1 | tee "$L/bench_coll_nccl.log" | tail -10 ;;
  demo) say demo; timeout 150 "$bin/parenchyma-nn-demo" >"$L/demo.log" 2>&1; echo "demo exit code $?"; tail -15 "$L/demo.log" ;;
  *) echo "unknown phase $p" ;;
  esac
  pack
done
say end
