# parenchyma: shared set-up for tools/run-tests and tools/run-demo (sourced, not run).
# Installs the system packages that are missing (apt-get, when root and a registry is reachable),
# then configures and builds with CMake. What cannot be installed is named; CMake decides whether
# it was required (core dependencies) or optional (a plugin or bundle is skipped with a message).

PARENCHYMA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# Debian 12 / Ubuntu 24.04 package names. Required: toolchain, Boost, spdlog, JSON, Catch2.
# Optional: OpenBLAS (native BLAS bundle), OpenCL loader/headers and PoCL (OpenCL plugin and a
# real CPU device to test it on), CLBlast (OpenCL BLAS bundle), Google Benchmark (benchmarks),
# zlib and scikit-learn's digits data set (the NN demo, parenchyma-nn-demo), the Vulkan headers,
# loader and Mesa's lavapipe (the Vulkan plugin and a CPU device to test it on), shaderc, glslang
# and SPIRV-Tools (the plugin's GLSL compiler module), glslc (its SPIR-V test) and the Vulkan
# validation layers (its tests under validation), Open MPI (the coll bundle, its tests) and
# mpi4py (tests/python/test_coll.py's mpi4py communicator).
PARENCHYMA_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libboost-dev libspdlog-dev nlohmann-json3-dev catch2
  libopenblas-dev libdnnl-dev
  ocl-icd-libopencl1 ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libclblast-dev
  libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers glslang-tools glslc libshaderc-dev
  glslang-dev spirv-tools
  libbenchmark-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-matplotlib python3-venv python3-pip
  zlib1g-dev python3-sklearn doxygen
  libopenmpi-dev openmpi-bin python3-mpi4py
)

# Bold only on a terminal: logs (CI, `| tee`) get plain text.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  pa_log() { printf '\033[1m[parenchyma]\033[0m %s\n' "$*"; }
else
  pa_log() { printf '[parenchyma] %s\n' "$*"; }
fi

# pa_apt_install <packages...>: one apt-get install of them all, its steps shown as they happen
# (what it fetches, what it sets up). Fails if any of them could not be installed.
pa_apt_install() {
  # Network waits are bounded: 20 s per connection, one retry; the whole step at most 15 minutes.
  timeout 900 $PA_SUDO apt-get install -y -q --no-install-recommends \
    -o Acquire::http::Timeout=20 -o Acquire::https::Timeout=20 -o Acquire::Retries=1 \
    -o Dpkg::Use-Pty=0 "$@" 2>&1 |
    grep --line-buffered -E '^(Get:|Setting up|E: |Err:)' | sed -u 's/^/  apt: /'
  return "${PIPESTATUS[0]}"
}

pa_install_packages() {
  if [ -n "${PARENCHYMA_NO_INSTALL:-}" ]; then
    pa_log "PARENCHYMA_NO_INSTALL is set: using the packages that are present"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1; then
    pa_log "not a Debian-like system: install the packages listed in README.md yourself"
    return 0
  fi
  local missing=() installed
  # One dpkg-query for the whole list (the names it does not know are missing too).
  # dpkg-query exits 1 when a name is unknown to it (a fresh machine's empty database): that is
  # an answer here, not a failure under set -e and pipefail.
  installed=" $({ dpkg-query -W -f='${db:Status-Abbrev}|${Package}\n' "${PARENCHYMA_PACKAGES[@]}" \
    2>/dev/null || true; } | sed -n 's/^ii *|//p' | tr '\n' ' ') "
  for p in "${PARENCHYMA_PACKAGES[@]}"; do
    case "$installed" in *" $p "*) ;; *) missing+=("$p") ;; esac
  done
  if [ ${#missing[@]} -eq 0 ]; then
    pa_log "all system packages present"
    return 0
  fi
  pa_log "missing packages: ${missing[*]}"
  PA_SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then PA_SUDO="sudo -n"; else
      pa_log "not root and no sudo: cannot install them; continuing with what is present"
      return 0
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  local start=$SECONDS
  # The package lists are fetched only when there are none, or when the install below fails
  # with the lists that are there (stale or lacking a package).
  local updated=0
  if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$' -e '^auxfiles$')" ]; then
    pa_log "apt-get update (no package lists yet)"
    timeout 180 $PA_SUDO apt-get update -q -o Acquire::http::Timeout=20 -o Acquire::Retries=1 \
      >/dev/null 2>&1 || pa_log "apt-get update failed (no network?)"
    updated=1
  fi
  pa_log "installing ${#missing[@]} packages with one apt-get install"
  if ! pa_apt_install "${missing[@]}"; then
    if [ $updated -eq 0 ]; then
      pa_log "apt-get install failed: apt-get update, then again"
      timeout 180 $PA_SUDO apt-get update -q -o Acquire::http::Timeout=20 -o Acquire::Retries=1 \
        >/dev/null 2>&1 || pa_log "apt-get update failed (no network?)"
    fi
    if ! pa_apt_install "${missing[@]}"; then
      # One by one, so that a package this distribution or mirror lacks does not block the others.
      pa_log "apt-get install of them all failed: one by one"
      local failed=()
      for p in "${missing[@]}"; do
        pa_log "installing $p"
        pa_apt_install "$p" || failed+=("$p")
      done
      if [ ${#failed[@]} -gt 0 ]; then
        pa_log "could not install: ${failed[*]} — parts that need them are skipped (CMake says which)"
      fi
    fi
  fi
  pa_log "package step took $((SECONDS - start)) s"
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
  # ccache when it is installed (PARENCHYMA_NO_CCACHE=1 or CCACHE_DISABLE=1 turn it off; a
  # launcher given in the environment or on the command line wins).
  if [ -z "${PARENCHYMA_NO_CCACHE:-}" ] && [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] &&
     command -v ccache >/dev/null 2>&1; then
    cmake_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache
      "${cmake_args[@]}")
  fi
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
