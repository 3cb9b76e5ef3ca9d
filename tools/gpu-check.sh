#!/usr/bin/env bash
# parenchyma on the lent GPU machine: a quick check of what only a GPU can run — the NN
# extension on cuda (nn-cuda-selftest, the NN conformance suite on cuda and on NVIDIA's OpenCL),
# the Python package with PyTorch/CuPy (tests/python, CUDA interop included) and the NN demo.
# Run from the tree root; results under $OUT. PCY_GPU_TESTS="test_a test_b": also build those
# ctest programs (tests on) and run them (e.g. the imported-array and fork tests on cuda). Headers the machine lacks can be carried in
# (PARENCHYMA_EXTRA_INCLUDE, default .device/include; DLPack needs none: parenchyma/dlpack_abi.h).
set -u
SRC=$(pwd); B=/tmp/b; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PARENCHYMA_CACHE_DIR=/tmp/kcache
say() { echo "== $* ($(date +%T))"; }
say machine; nvidia-smi -L; nproc
python3 -c "import torch, numpy; print('torch', torch.__version__, 'numpy', numpy.__version__)" 2>&1 | tail -1
python3 -c "import cupy; print('cupy', cupy.__version__)" 2>&1 | tail -1
python3 -c "import pytest; print('pytest', pytest.__version__)" 2>&1 | tail -1
python3 -c "import sklearn, os; print('sklearn', os.path.dirname(sklearn.__file__))" 2>&1 | tail -1
PYB=$(python3 -m pybind11 --cmakedir 2>/dev/null); echo "pybind11 cmakedir: $PYB"
ls /usr/include/python3*/Python.h 2>&1 | head -2
ldconfig -p | grep -E "libcudnn.so|libdnnl" | head -4
say configure
cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPARENCHYMA_WERROR=ON \
  -DPARENCHYMA_BUILD_TESTS=$([ -n "${PCY_GPU_TESTS:-}" ] && echo ON || echo OFF) -DCMAKE_INCLUDE_PATH="${PARENCHYMA_EXTRA_INCLUDE:-$SRC/.device/include}" \
  ${PYB:+-Dpybind11_DIR=$PYB} -DPython3_EXECUTABLE="$(command -v python3)" >"$OUT/configure.log" 2>&1 \
  || { tail -30 "$OUT/configure.log"; exit 1; }
grep -iE "python|dlpack|cudnn|nn[_-]|dnnl|skipped|not found|without" "$OUT/configure.log" | head -30
say build
ninja -C "$B" -j16 -k 0 >"$OUT/build.log" 2>&1; echo "build rc $?"
grep -E "FAILED|error:" "$OUT/build.log" | head -30
ls "$B/bin" "$B/lib/parenchyma/plugins" | tr '\n' ' '; echo
"$B/bin/parenchyma-info" --ops >"$OUT/info-ops.txt" 2>&1; grep -E "nn|cuda" "$OUT/info-ops.txt" | head -60
say selftest
timeout 150 "$B/bin/nn-cuda-selftest" >"$OUT/selftest.log" 2>&1; echo "selftest rc $?"
grep -vE "PASS" "$OUT/selftest.log" | head -60
say "conformance nn cuda"
timeout 150 "$B/bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite nn --require-ops >"$OUT/conf-nn-cuda.log" 2>&1; echo "rc $?"
grep -E "FAIL|fail|passed|skipped" "$OUT/conf-nn-cuda.log" | head -40
say "conformance framework cuda"
timeout 150 "$B/bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite framework --required >"$OUT/conf-fw-cuda.log" 2>&1; echo "rc $?"
grep -E "FAIL|fail|passed|skipped" "$OUT/conf-fw-cuda.log" | head -20
say "conformance blas cuda"
timeout 150 "$B/bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework cuda --suite blas --require-ops >"$OUT/conf-blas-cuda.log" 2>&1; echo "rc $?"
grep -E "FAIL|fail|passed|skipped" "$OUT/conf-blas-cuda.log" | head -40
say "conformance nn opencl (NVIDIA)"
PARENCHYMA_OPENCL_PLATFORMS=nvidia timeout 100 "$B/bin/parenchyma-conformance" "$B/lib/parenchyma/plugins" --framework opencl --suite nn --require-ops >"$OUT/conf-nn-nvcl.log" 2>&1; echo "rc $?"
grep -E "FAIL|fail|passed|skipped" "$OUT/conf-nn-nvcl.log" | head -30
say python
PYTHONPATH="$B/python" timeout 120 python3 -m pytest -q -rs "$SRC/tests/python" >"$OUT/pytest.log" 2>&1; echo "pytest rc $?"
tail -25 "$OUT/pytest.log"
say demo
ls "$B/bin" | grep -i demo
timeout 90 "$B/bin/parenchyma-nn-demo" >"$OUT/demo.log" 2>&1; echo "demo rc $?"; tail -25 "$OUT/demo.log"
if [ -n "${PCY_GPU_TESTS:-}" ]; then
  say "tests: $PCY_GPU_TESTS"
  ninja -C "$B" -j16 $PCY_GPU_TESTS >"$OUT/tests-build.log" 2>&1; echo "tests build rc $?"
  grep -E "FAILED|error:" "$OUT/tests-build.log" | head -20
  for t in $PCY_GPU_TESTS; do
    timeout 200 "$B/bin/$t" >"$OUT/$t.log" 2>&1; echo "$t rc $?"; tail -6 "$OUT/$t.log"
  done
fi
say end
