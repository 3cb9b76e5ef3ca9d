#!/usr/bin/env bash
# parenchyma for aarch64 Linux, from an x86-64 Debian 12 machine: installs the cross compiler,
# qemu-user and Debian's arm64 libraries (multiarch), cross-builds into build-aarch64/ (preset
# linux-aarch64, toolchain tools/toolchains/linux-aarch64.cmake) and runs the CPU test suite
# under qemu-aarch64. docs/platforms.md says what is built and tested.
#   tools/cross/aarch64.sh [ctest arguments...]     (also: tools/run-tests --target aarch64)
# Environment: PARENCHYMA_NO_INSTALL=1 uses what is installed; PARENCHYMA_JOBS sets the build's
# and ctest's parallelism (default: the number of cores); PARENCHYMA_CROSS_NO_TESTS=1 builds only.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib/common.sh"
cd "$PARENCHYMA_ROOT"

dir="$PARENCHYMA_ROOT/build-aarch64"
deps="$dir/deps"
jobs="${PARENCHYMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"

# Host tools, and headers the arm64 build can take from the host's packages: their arm64 twins
# cannot be installed beside them (catch2: Multi-Arch: foreign), and their content does not
# depend on the CPU (Catch2 v2 is header-only, JSON is Architecture: all). DLPack needs no
# package: the project declares its structs (core/include/parenchyma/dlpack_abi.h).
host_packages=(g++-aarch64-linux-gnu qemu-user cmake ninja-build pkg-config
  catch2 nlohmann-json3-dev)
# Debian's arm64 libraries, installed beside the amd64 ones (Multi-Arch: same).
arm64_packages=(libboost-dev:arm64 libspdlog-dev:arm64 libfmt-dev:arm64
  libopenblas-dev:arm64 zlib1g-dev:arm64 libdnnl2:arm64)
# oneDNN's -dev package is Multi-Arch: same, but its dnnl_config.h differs from amd64's (that
# one enables the OpenCL GPU runtime), so dpkg refuses to install both: its files are unpacked
# under build-aarch64/deps instead (the preset's CMAKE_PREFIX_PATH), the library from apt.
unpacked_packages=(libdnnl-dev:arm64 libdnnl2:arm64)

apt_get() {
  timeout 1800 apt-get -o DPkg::Lock::Timeout=900 -o Acquire::http::Timeout=20 \
    -o Acquire::Retries=1 -q "$@"
}

install_packages() {
  if [ -n "${PARENCHYMA_NO_INSTALL:-}" ]; then
    pa_log "PARENCHYMA_NO_INSTALL is set: using the packages that are present"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    pa_log "not root: install these yourself: ${host_packages[*]} ${arm64_packages[*]}"
    return 0
  fi
  export DEBIAN_FRONTEND=noninteractive
  local start=$SECONDS missing=() p
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    pa_log "dpkg --add-architecture arm64"
    dpkg --add-architecture arm64
  fi
  for p in "${host_packages[@]}" "${arm64_packages[@]}"; do
    dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    # The arm64 package lists are fetched when apt knows no arm64 package yet.
    if ! apt-cache show libc6:arm64 >/dev/null 2>&1; then
      pa_log "apt-get update (arm64 package lists)"
      apt_get update >/dev/null
    fi
    pa_log "installing: ${missing[*]}"
    if ! apt_get install -y --no-install-recommends "${missing[@]}" >"$dir/apt.log" 2>&1; then
      pa_log "apt-get install failed; apt-get update, then again (log: $dir/apt.log)"
      apt_get update >/dev/null
      apt_get install -y --no-install-recommends "${missing[@]}" >"$dir/apt.log" 2>&1 ||
        { tail -20 "$dir/apt.log"; return 1; }
    fi
  fi
  if [ ! -f "$deps/usr/include/oneapi/dnnl/dnnl_config.h" ]; then
    pa_log "unpacking ${unpacked_packages[*]} under $deps"
    rm -rf "$deps" && mkdir -p "$deps/debs"
    (cd "$deps/debs" && apt-get -q download "${unpacked_packages[@]}" >/dev/null 2>&1) ||
      { pa_log "could not download ${unpacked_packages[*]}: nn_native runs on its own loops"; }
    for p in "$deps"/debs/*.deb; do
      [ -f "$p" ] && dpkg-deb -x "$p" "$deps"
    done
  fi
  pa_log "package step took $((SECONDS - start)) s"
}

mkdir -p "$dir"
install_packages

pa_log "cross build (aarch64) in $dir, $jobs jobs; not built for this target (preset" \
  "linux-aarch64): the OpenCL and CUDA plugins and bundles, the Python package"
start=$SECONDS
cmake --preset linux-aarch64 >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
grep -E "not built|not found|skipped|: off" "$dir/configure.log" | sed 's/^-- /  cmake: /' || true
cmake --build "$dir" --parallel "$jobs"
pa_log "cross build took $((SECONDS - start)) s"

[ -n "${PARENCHYMA_CROSS_NO_TESTS:-}" ] && exit 0

pa_log "parenchyma-info under qemu-aarch64:"
qemu-aarch64 "$dir/bin/parenchyma-info" || true
pa_log "running the test suite under qemu-aarch64"
start=$SECONDS
cd "$dir"
junit="$dir/Testing/run-tests.xml"
rm -f "$junit"
rc=0
ctest --output-on-failure -j "$jobs" --output-junit "$junit" "$@" || rc=$?
pa_log "tests under qemu took $((SECONDS - start)) s"
if [ -f "$junit" ] && command -v python3 >/dev/null 2>&1; then
  python3 "$PARENCHYMA_ROOT/tools/lib/ctest_summary.py" "$junit" || true
fi
exit $rc
