#!/usr/bin/env bash
# parenchyma for Windows x86-64: installs mingw-w64 and wine (apt), cross-builds into
# build-windows/ with tools/toolchains/windows-mingw.cmake, runs the tests under wine64, then
# builds an out-of-tree plugin against the installed SDK and runs parenchyma-conformance on it.
#   tools/cross/windows.sh [ctest arguments...]       (tools/run-tests --target windows does this)
# Environment: PARENCHYMA_JOBS (build jobs, default: the number of CPUs), PARENCHYMA_WIN_TARGETS
# (the targets to build, default: those ported so far, below; "all" for everything; set, it
# leaves the out-of-tree step out), PARENCHYMA_WIN_TESTS (a ctest -R regex, default: the tests
# of those targets; set, it leaves the validation pass out), PARENCHYMA_WIN_VALIDATE=0 (no pass
# of the native suites with the validation layer on), PARENCHYMA_WIN_OOT=0 (no out-of-tree
# step), PARENCHYMA_WIN_BUILD_DIR (the build tree's real folder; by default build-windows/, or a
# private folder when others may write the checkout's folder or one above it, as /tmp: below).
# docs/platforms.md says what runs and what does not yet.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
log() { printf '\n== %s\n' "$*"; }

need=()
command -v x86_64-w64-mingw32-g++-posix >/dev/null || need+=(g++-mingw-w64-x86-64-posix gcc-mingw-w64-x86-64-posix)
[ -x /usr/lib/wine/wine64 ] || need+=(wine64)
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
# The header-only libraries the cross build takes from the host (tools/toolchains/windows-mingw/).
[ -d /usr/include/boost ] || need+=(libboost-dev)
[ -d /usr/include/nlohmann ] || need+=(nlohmann-json3-dev)
[ -d /usr/include/spdlog ] || need+=(libspdlog-dev)
[ -d /usr/include/fmt ] || need+=(libfmt-dev)
[ -f /usr/include/catch2/catch.hpp ] || need+=(catch2)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get -o DPkg::Lock::Timeout=900 update
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get -o DPkg::Lock::Timeout=900 install -y \
    --no-install-recommends "${need[@]}"
fi

# What is ported so far (docs/platforms.md, "Status"): built and run by default.
default_targets="parenchyma-info parenchyma-native parenchyma-mock parenchyma-opencl parenchyma-cuda
  parenchyma-blas-mock parenchyma-blas-native parenchyma-blas-opencl parenchyma-nn-native parenchyma-array-native
  parenchyma-conformance test_loader_variants test_loader_selection
  test_loader_foreign_pe test_unit_error test_unit_config test_unit_schema
  test_unit_tensor test_unit_backend test_unit_opkey test_mock_core test_abi_c99 test_abi_c11
  test_dlpack parenchyma-demo"
default_tests='^(unit_(tensor|backend|error|config|opkey|schema)|loader_(variants|selection|foreign_pe)|abi_c99|abi_c11|conformance_(stub|native|opencl|cuda|refused_.*|bundle_suite_.*|cli_.*)|mock_.*|blas_conformance_(native|opencl)|nn_conformance_native|dlpack)$'
targets="${PARENCHYMA_WIN_TARGETS:-$default_targets}"
[ "$targets" = all ] && targets=""
tests="${PARENCHYMA_WIN_TESTS:-$default_tests}"

# Where to build. wine gives a Unix file or folder the access list of its owner and mode bits;
# a folder that others may write (/tmp: 1777, the sticky bit has no Windows meaning) shows as
# writable by Everyone, and the core's trusted-path check then refuses, as it must, every plugin
# below it. A checkout below such a folder (a CI clone in /tmp) therefore builds in a private
# folder, PARENCHYMA_WIN_BUILD_DIR or one per checkout under ~/.cache/parenchyma/build-windows/,
# with build-windows in the checkout a link to it. The compiled-in paths of the tests name the
# real folder, so the test programs see the same trusted path. A tree whose checkout is gone or
# no longer links to it is removed on the next run.
others_may_write() { # the first folder from $1 up to / that group or others may write
  local d="$1"
  while :; do
    if [ -n "$(find "$d" -maxdepth 0 -perm /022 2>/dev/null)" ]; then
      printf '%s\n' "$d"
      return 0
    fi
    [ "$d" = / ] && return 1
    d="$(dirname "$d")"
  done
}
dir="$root/build-windows"
open=""
if [ -n "${PARENCHYMA_WIN_BUILD_DIR:-}" ] || open="$(others_may_write "$(pwd -P)")"; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/parenchyma/build-windows"
  if [ -z "${PARENCHYMA_WIN_BUILD_DIR:-}" ]; then
    mkdir -p "$cache"
    cache="$(cd "$cache" && pwd -P)"
  fi
  real="${PARENCHYMA_WIN_BUILD_DIR:-$cache/$(printf '%s' "$root" | sha256sum | cut -c1-16)}"
  mkdir -p "$real"
  real="$(cd "$real" && pwd -P)"
  if bad="$(others_may_write "$real")"; then
    echo "windows.sh: $bad may be written by other users, so wine shows it as writable by" \
      "Everyone and the plugins below it are refused: set PARENCHYMA_WIN_BUILD_DIR to a" \
      "private folder" >&2
    exit 2
  fi
  if [ -e "$dir" ] && [ ! -L "$dir" ]; then
    echo "windows.sh: $dir is a folder; remove it, the build moves to $real (a build" \
      "below a folder that other users may write has its plugins refused under wine)" >&2
    exit 2
  fi
  ln -sfn "$real" "$dir"
  printf '%s\n' "$root" >"$real/.checkout"
  if [ -z "${PARENCHYMA_WIN_BUILD_DIR:-}" ]; then
    for old in "$cache"/*/; do
      old="${old%/}"
      [ "$old" = "$real" ] || [ ! -f "$old/.checkout" ] && continue
      co="$(cat "$old/.checkout")"
      if [ "$(readlink "$co/build-windows" 2>/dev/null)" != "$old" ]; then
        log "removing $old (its checkout $co is gone)"
        rm -rf "$old"
      fi
    done
  fi
  log "building in $real ($dir links to it)${open:+: other users may write $open}"
  dir="$real"
fi
jobs="${PARENCHYMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"
log "cross build (mingw-w64, posix threads) in $dir"
start=$(date +%s)
cmake -S "$root" -B "$dir" -G Ninja --toolchain "$root/tools/toolchains/windows-mingw.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARENCHYMA_WERROR=ON -DPARENCHYMA_TEST_FLAGS="-O1 -g1" \
  -DPARENCHYMA_BUILD_BENCH=OFF -DPARENCHYMA_BUILD_PYTHON=OFF \
  -DPARENCHYMA_CUDA_BUNDLES=OFF # cuBLAS/cuDNN headers: none for mingw here (docs/platforms.md)
# shellcheck disable=SC2086
cmake --build "$dir" -j "$jobs" ${targets:+--target $targets}
# The C++ runtime DLLs beside the programs and the core DLL (the toolchain links them shared).
for f in libstdc++-6.dll libgcc_s_seh-1.dll; do
  cp -u "$(x86_64-w64-mingw32-g++-posix -print-file-name=$f)" "$dir/bin/"
done
cp -u "$(x86_64-w64-mingw32-g++-posix -print-file-name=libwinpthread-1.dll)" "$dir/bin/"
log "cross build: $(( $(date +%s) - start )) s"

# wine: its own prefix in the build tree, initialised once; console programs need no X.
export WINEPREFIX="$dir/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  log "initialising the wine prefix $WINEPREFIX"
  /usr/lib/wine/wine64 wineboot --init >/dev/null 2>&1 || true
  /usr/lib/wine/wineserver -w || true
fi
# One wine server for all the programs below, stopped at the end: else each test program starts
# one (about 2.5 s each) and it exits with the program (ctest -j1: 138 s for 43 tests, against
# 26 s with one persistent server, on a loaded machine).
/usr/lib/wine/wineserver -p
trap '/usr/lib/wine/wineserver -k 2>/dev/null || true' EXIT

log "parenchyma-info.exe --json under wine"
/usr/lib/wine/wine64 "$dir/bin/parenchyma-info.exe" --json >"$dir/info.json"
grep -q '"name": "native"' "$dir/info.json"

log "tests under wine64"
start=$(date +%s)
rc=0
(cd "$dir" && ctest --output-on-failure -j "$jobs" -R "$tests" "$@") || rc=$?
log "tests under wine: $(( $(date +%s) - start )) s (rc $rc)"
# The validation layer on Windows: the native suites again with PARENCHYMA_VALIDATE=1 (every
# plugin call checked; a finding fails the test). PARENCHYMA_WIN_VALIDATE=0 leaves it out.
if [ "${PARENCHYMA_WIN_VALIDATE:-1}" != 0 ] && [ -z "${PARENCHYMA_WIN_TESTS:-}" ]; then
  log "the native suites under wine with the validation layer on"
  start=$(date +%s)
  (cd "$dir" && PARENCHYMA_VALIDATE=1 ctest --output-on-failure -j "$jobs" \
    -R '^(conformance_native|blas_conformance_native|nn_conformance_native)$') || rc=$?
  log "validation pass under wine: $(( $(date +%s) - start )) s (rc $rc)"
fi

# An out-of-tree plugin against the installed SDK alone (issue 24's last criterion; on Linux
# tests/install/run.sh does this and more): cmake --install into a prefix (oot/prefix), build
# the installed example share/parenchyma/examples/oot_plugin with the mingw toolchain and
# find_package of that prefix, then the installed parenchyma-conformance.exe must load the DLL
# into the installed core and pass it. PARENCHYMA_WIN_OOT=0 leaves this step out.
oot_step() {
  local work="$dir/oot" prefix out exports
  prefix="$work/prefix"
  rm -rf "$work"
  mkdir -p "$work"
  # The core, headers, CMake package, programs and examples; not the plugins component, which
  # holds plugins configured here but not built by default (docs/platforms.md, "Status").
  for component in Unspecified examples; do
    cmake --install "$dir" --prefix "$prefix" --component $component >>"$work/install.log" 2>&1 \
      || { cat "$work/install.log"; echo "FAILED: cmake --install $dir"; return 1; }
  done
  # The C++ runtime DLLs beside the installed programs, as in bin/ of the build tree.
  cp "$dir"/bin/libstdc++-6.dll "$dir"/bin/libgcc_s_seh-1.dll "$dir"/bin/libwinpthread-1.dll \
    "$prefix/bin/" || return 1
  # find_package through parenchyma_DIR: the toolchain searches packages only below its roots.
  if ! { cmake -S "$prefix/share/parenchyma/examples/oot_plugin" -B "$work/build" -G Ninja \
    --toolchain "$root/tools/toolchains/windows-mingw.cmake" -DCMAKE_BUILD_TYPE=Release \
    -Dparenchyma_DIR="$prefix/lib/cmake/parenchyma" >"$work/oot.log" 2>&1 \
    && cmake --build "$work/build" -j "$jobs" >>"$work/oot.log" 2>&1; }; then
    cat "$work/oot.log"
    echo "FAILED: building the out-of-tree plugin"
    return 1
  fi
  [ -f "$work/build/plugins/parenchyma-oot.dll" ] \
    || { echo "FAILED: no $work/build/plugins/parenchyma-oot.dll"; return 1; }
  # Its export table names the entry symbol and nothing else.
  exports=$(x86_64-w64-mingw32-objdump -p "$work/build/plugins/parenchyma-oot.dll" \
    | sed -n '/\[Ordinal\/Name Pointer\] Table/,/^$/s/^[[:space:]]*\[ *[0-9]*\] //p')
  [ "$exports" = pcy_framework_entry ] \
    || { echo "FAILED: the plugin exports '$exports', not only pcy_framework_entry"; return 1; }
  out=$(/usr/lib/wine/wine64 "$prefix/bin/parenchyma-conformance.exe" "$work/build/plugins" \
    --required 2>&1) || { printf '%s\n' "$out"; echo "FAILED: parenchyma-conformance"; return 1; }
  printf '%s\n' "$out" | tail -n 3
  printf '%s\n' "$out" | grep -q '^oot: [0-9]* passed, 0 failed' \
    || { printf '%s\n' "$out"; echo "FAILED: oot was not tested"; return 1; }
  echo "PASSED: an out-of-tree plugin (installed SDK) under the installed parenchyma-conformance"
}
if [ "${PARENCHYMA_WIN_OOT:-1}" != 0 ] && [ -z "${PARENCHYMA_WIN_TARGETS:-}" ]; then
  log "out-of-tree plugin against the installed SDK (under wine)"
  start=$(date +%s)
  oot_rc=0
  oot_step || oot_rc=$?
  log "out-of-tree plugin: $(( $(date +%s) - start )) s (rc $oot_rc)"
  [ $rc -ne 0 ] || rc=$oot_rc
fi
exit $rc
