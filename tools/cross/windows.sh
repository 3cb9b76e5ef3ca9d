#!/usr/bin/env bash
# parenchyma for Windows x86-64: installs mingw-w64 and wine (apt), cross-builds into
# build-windows/ with tools/toolchains/windows-mingw.cmake and runs the tests under wine64.
#   tools/cross/windows.sh [ctest arguments...]       (tools/run-tests --target windows does this)
# Environment: PARENCHYMA_JOBS (build jobs, default: the number of CPUs), PARENCHYMA_WIN_TARGETS
# (build only these targets, default: all). docs/platforms.md says what runs and what does not.
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
[ -f /usr/include/dlpack/dlpack.h ] || need+=(libdlpack-dev)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  sudo_=""
  [ "$(id -u)" = 0 ] || sudo_=sudo
  $sudo_ apt-get -o DPkg::Lock::Timeout=900 update
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get -o DPkg::Lock::Timeout=900 install -y \
    --no-install-recommends "${need[@]}"
fi

dir="$root/build-windows"
jobs="${PARENCHYMA_JOBS:-$(nproc 2>/dev/null || echo 2)}"
log "cross build (mingw-w64, posix threads) in $dir"
start=$(date +%s)
cmake -S "$root" -B "$dir" -G Ninja --toolchain "$root/tools/toolchains/windows-mingw.cmake" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPARENCHYMA_WERROR=ON -DPARENCHYMA_TEST_FLAGS="-O1 -g1" \
  -DPARENCHYMA_BUILD_BENCH=OFF -DPARENCHYMA_BUILD_PYTHON=OFF \
  -DPARENCHYMA_CUDA_BUNDLES=OFF # cuBLAS/cuDNN headers: none for mingw here (docs/platforms.md)
# shellcheck disable=SC2086
cmake --build "$dir" -j "$jobs" ${PARENCHYMA_WIN_TARGETS:+--target $PARENCHYMA_WIN_TARGETS}
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

log "parenchyma-info.exe --json under wine"
/usr/lib/wine/wine64 "$dir/bin/parenchyma-info.exe" --json >"$dir/info.json"
grep -q '"name": "native"' "$dir/info.json"

log "tests under wine64"
start=$(date +%s)
rc=0
(cd "$dir" && ctest --output-on-failure -j "$jobs" "$@") || rc=$?
log "tests under wine: $(( $(date +%s) - start )) s (rc $rc)"
exit $rc
