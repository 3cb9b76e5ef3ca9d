#!/usr/bin/env bash
# Narrows down the Python interpreter's crash after a cuda Backend (docs/python.md): the same
# three lines under several plugin sets and allocators, each in its own process with a native
# backtrace on a fatal signal (crash_trace.so) and Python's faulthandler for every thread.
#   tools/debug/python-cuda-crash.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d)
cc -shared -fPIC -O1 -o "$W/crash_trace.so" "$SRC/tools/debug/crash_trace.c" || exit 1
ls "$B/lib/parenchyma/plugins"

# The repro and its variants; REQUEST is the Backend request ("" for the default).
cat >"$W/repro.py" <<'EOF'
import faulthandler, gc, os, sys
faulthandler.enable(all_threads=True)
import parenchyma
if os.environ.get("SHOW"):
    print("plugins:", [e["path"] for e in parenchyma.info()["load_report"]], flush=True)
what = os.environ.get("WHAT", "del")
req = os.environ.get("REQUEST") or None
if what == "info":
    parenchyma.info()
elif what in ("del", "keep"):
    b = parenchyma.Backend(req)
    print("backend", b, flush=True)
    if what == "del":
        del b
        gc.collect()
        print("backend destroyed", flush=True)
t = parenchyma.Tensor((2, 3), "float64")
print("tensor made", flush=True)
print(repr(t), flush=True)
z = parenchyma.zeros(1000)
print("zeros sum", float(z.numpy().sum()), flush=True)
print("OK", flush=True)
EOF

run() { # name, env...
  local name=$1; shift
  echo "---- $name"
  ( cd "$W" && env "$@" PYTHONPATH="$B/python" LD_PRELOAD="$W/crash_trace.so" \
      timeout 120 python3 -X faulthandler repro.py ) >"$W/$name.log" 2>&1
  local rc=$?
  echo "rc $rc"
  if [ $rc -ne 0 ]; then
    grep -v '^[0-9a-f]*-[0-9a-f]* r-xp' "$W/$name.log" | tail -60
    grep -E '^[0-9a-f]+-[0-9a-f]+ r-xp' "$W/$name.log" | grep -E 'parenchyma|cuda|cudnn|cublas|nvrtc|python|pocl|OpenCL|nvidia|dnnl|gomp|openblas' | head -40
  else
    tail -4 "$W/$name.log"
  fi
  [ -n "${PCY_LOGS:-}" ] && cp "$W/$name.log" "$PCY_LOGS/pycrash-$name.log" 2>/dev/null
}

# An isolated core with a chosen subset of the plugins (copies: the core finds its plugin
# directory from its own canonical path).
iso() { # name, plugin globs...
  local name=$1; shift
  local d="$W/iso-$name/lib"
  mkdir -p "$d/parenchyma/plugins"
  cp -a "$B"/lib/libparenchyma-core.so* "$d/"
  for g in "$@"; do cp -a "$B"/lib/parenchyma/plugins/$g "$d/parenchyma/plugins/" 2>/dev/null; done
  echo "$d"
}

run repro WHAT=del
run keep WHAT=keep
run info WHAT=info
run native WHAT=del REQUEST=native
run opencl WHAT=del REQUEST=opencl
run cuda-explicit WHAT=del REQUEST=cuda
run malloc-check WHAT=del PYTHONMALLOC=malloc MALLOC_CHECK_=3 GLIBC_TUNABLES=glibc.malloc.check=3
L=$(iso cuda-only 'parenchyma-cuda*')
run iso-cuda-only WHAT=del LD_LIBRARY_PATH="$L" SHOW=1
L=$(iso cuda-bundles 'parenchyma-cuda*' 'parenchyma-blas-cuda*' 'parenchyma-nn-cuda*')
run iso-cuda-bundles WHAT=del LD_LIBRARY_PATH="$L" SHOW=1
L=$(iso no-opencl 'parenchyma-cuda*' 'parenchyma-blas-cuda*' 'parenchyma-nn-cuda*' 'parenchyma-native*' 'parenchyma-blas-native*' 'parenchyma-nn-native*')
run iso-no-opencl WHAT=del LD_LIBRARY_PATH="$L" SHOW=1
L=$(iso opencl-only 'parenchyma-opencl*' 'parenchyma-blas-opencl*' 'parenchyma-nn-opencl*')
run iso-opencl-only WHAT=del LD_LIBRARY_PATH="$L" SHOW=1

# The same in C++, without Python.
cat >"$W/repro.cpp" <<'EOF'
#include <parenchyma/parenchyma.hpp>
#include <cstdio>
int main() {
  { parenchyma::Backend b; std::printf("backend %s\n", b.name().c_str()); }
  parenchyma::SharedTensor<double> t({2, 3});
  for (auto& v : t.write_only()) v = 1;
  std::printf("OK %g\n", t.read()[0]);
}
EOF
if g++ -std=c++20 -O1 -I"$SRC/core/include" -I"$SRC/sdk/include" -I"$B/core/include" \
    "$W/repro.cpp" -o "$W/repro" -L"$B/lib" -lparenchyma-core -Wl,-rpath,"$B/lib" 2>"$W/cxx.log"; then
  echo "---- c++"; LD_PRELOAD="$W/crash_trace.so" timeout 120 "$W/repro" 2>&1 | tail -30; echo "rc ${PIPESTATUS[0]}"
else
  echo "c++ repro did not build"; tail -5 "$W/cxx.log"
fi
