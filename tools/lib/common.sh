# parenchyma: shared set-up for tools/run-tests and tools/run-demo (sourced, not run).
# Installs the system packages that are missing (apt-get, when root and a registry is reachable),
# then configures and builds with CMake. What cannot be installed is named; CMake decides whether
# it was required (core dependencies) or optional (a plugin or bundle is skipped with a message).

PARENCHYMA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Debian 12 / Ubuntu 24.04 package names. Required: toolchain, Boost, spdlog, JSON, Catch2.
# Optional: OpenBLAS (native BLAS bundle), OpenCL loader/headers and PoCL (OpenCL plugin and a
# real CPU device to test it on), CLBlast (OpenCL BLAS bundle), Google Benchmark (benchmarks),
# zlib and scikit-learn's digits data set (the NN demo, parenchyma-nn-demo).
PARENCHYMA_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libboost-dev libspdlog-dev nlohmann-json3-dev catch2
  libopenblas-dev libdnnl-dev
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libclblast-dev
  libbenchmark-dev
  libdlpack-dev pybind11-dev python3-dev python3-numpy python3-pytest python3-matplotlib
  zlib1g-dev python3-sklearn
)

pa_log() { printf '\033[1m[parenchyma]\033[0m %s\n' "$*"; }

pa_install_packages() {
  if [ -n "${PARENCHYMA_NO_INSTALL:-}" ]; then
    pa_log "PARENCHYMA_NO_INSTALL is set: using the packages that are present"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    pa_log "not a Debian-like system: install the packages listed in README.md yourself"
    return 0
  fi
  local missing=()
  for p in "${PARENCHYMA_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$p")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    pa_log "all system packages present"
    return 0
  fi
  pa_log "missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
      pa_log "not root and no sudo: cannot install them; continuing with what is present"
      return 0
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! timeout 120 $sudo apt-get update -qq >/dev/null 2>&1; then
    pa_log "apt-get update failed (no network?): continuing with what is present"
  fi
  # One by one, so that a package this distribution or mirror lacks does not block the others.
  local failed=()
  for p in "${missing[@]}"; do
    if ! timeout 600 $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1; then
      failed+=("$p")
    fi
  done
  if [ ${#failed[@]} -gt 0 ]; then
    pa_log "could not install: ${failed[*]} — parts that need them are skipped (CMake says which)"
  fi
}

# pa_build <build-dir> [extra cmake args...] -- [targets...]
pa_build() {
  local dir="$1"; shift
  local cmake_args=() targets=() seen_sep=0
  for a in "$@"; do
    if [ "$a" = "--" ]; then seen_sep=1; continue; fi
    if [ $seen_sep -eq 0 ]; then cmake_args+=("$a"); else targets+=("$a"); fi
  done
  local gen=()
  if command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$PARENCHYMA_ROOT" -B "$dir" "${gen[@]}" "${cmake_args[@]}"
  else
    cmake -S "$PARENCHYMA_ROOT" -B "$dir" "${cmake_args[@]}" >/dev/null
  fi
  local jobs
  jobs="$(nproc 2>/dev/null || echo 2)"
  if [ ${#targets[@]} -gt 0 ]; then
    cmake --build "$dir" --parallel "$jobs" --target "${targets[@]}"
  else
    cmake --build "$dir" --parallel "$jobs"
  fi
}
