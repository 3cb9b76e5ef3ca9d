#!/usr/bin/env bash
# Narrows down the Python interpreter's crash on the GPU machine (docs/python.md): a process that
# loads the OpenCL plugin under Python dies while the registry probes (PoCL 5 loaded), a C++
# program does not. Each variant runs in its own process with a native backtrace on a fatal
# signal (crash_trace.so; Python's faulthandler off, so the trace is the fault's own), with the
# core's fix off (PARENCHYMA_GLOBAL_CXX_RUNTIME=0) except in the "fixed" runs.
#   tools/debug/python-crash.sh BUILD_DIR
set -u
B=$(cd "$1" && pwd)
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d)
cc -shared -fPIC -O1 -o "$W/crash_trace.so" "$SRC/tools/debug/crash_trace.c" || exit 1
echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"; echo "LANG=${LANG:-} LC_ALL=${LC_ALL:-}"
ls -la /etc/OpenCL/vendors/ 2>&1; cat /etc/OpenCL/vendors/*.icd 2>&1
ldconfig -p | grep -E 'libOpenCL|libpocl' ; python3 -c 'import sys; print(sys.version, sys.executable, sys.flags)'
python3 -c 'import sys; print([m for m in sys.modules][:400])' | tr ',' '\n' | grep -vE "^ '(_|enc|codecs|io|abc|site|os|stat|posix|genericpath|sys|builtins|time|zipimport|marshal|warnings)" | tr -d '\n'; echo

cat >"$W/repro.py" <<'PY'
import os, sys
if os.environ.get("PCY_PATH"): sys.path.insert(0, os.environ["PCY_PATH"])
import parenchyma
what = os.environ.get("WHAT", "info")
if what == "info":
    r = parenchyma.info()
    print("frameworks", [(f["name"], len(f["devices"])) for f in r["frameworks"]], flush=True)
else:
    b = parenchyma.Backend(os.environ.get("REQUEST") or None)
    print("backend", b, flush=True)
t = parenchyma.zeros(1000)
print("OK", t.shape, flush=True)
PY
cat >"$W/ctypes_ocl.py" <<'PY'
import ctypes
cl = ctypes.CDLL("libOpenCL.so.1")
n = ctypes.c_uint(0)
print("clGetPlatformIDs ->", cl.clGetPlatformIDs(0, None, ctypes.byref(n)), n.value, flush=True)
ps = (ctypes.c_void_p * n.value)()
cl.clGetPlatformIDs(n.value, ps, None)
for p in ps:
    name = ctypes.create_string_buffer(256)
    cl.clGetPlatformInfo(ctypes.c_void_p(p), 0x0902, 256, name, None)
    d = ctypes.c_uint(0)
    rc = cl.clGetDeviceIDs(ctypes.c_void_p(p), 0xFFFFFFFF, 0, None, ctypes.byref(d))
    print("platform", name.value, "devices", d.value, "rc", rc, flush=True)
print("OK", flush=True)
PY

run() { # name, then: env assignments... -- command...
  local name=$1; shift
  echo "---- $name"
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  ( cd "$W" && env PARENCHYMA_GLOBAL_CXX_RUNTIME=0 "${envs[@]}" PYTHONPATH="$B/python" LD_PRELOAD="$W/crash_trace.so${PRE:+:$PRE}" \
      timeout 120 "$@" ) >"$W/$name.log" 2>&1
  local rc=$?
  echo "rc $rc"
  if [ $rc -ne 0 ]; then
    grep -vE '^[0-9a-f]+-[0-9a-f]+ r-xp' "$W/$name.log" | grep -v '^POCL' | tail -45
    grep -E '^[0-9a-f]+-[0-9a-f]+ r-xp' "$W/$name.log" | awk '{print $1, $3, $6}' | grep -vE 'python3.12/lib-dynload' | head -60
  else
    tail -4 "$W/$name.log"
  fi
  [ -n "${PCY_LOGS:-}" ] && cp "$W/$name.log" "$PCY_LOGS/pycrash-$name.log" 2>/dev/null
}

run info -- python3 repro.py
run fixed PARENCHYMA_GLOBAL_CXX_RUNTIME=1 -- python3 repro.py
run fixed-backend PARENCHYMA_GLOBAL_CXX_RUNTIME=1 WHAT=backend -- python3 repro.py
# Which object each reference to libstdc++'s call_once state binds to (the fault is a call
# through a null pointer in pthread_once, under LLVM: std::call_once's TLS hand-off).
echo "---- bindings"
( cd "$W" && PARENCHYMA_GLOBAL_CXX_RUNTIME=0 PYTHONPATH="$B/python" LD_DEBUG=bindings,files LD_DEBUG_OUTPUT="$W/lddebug" \
    timeout 120 python3 repro.py >/dev/null 2>&1 )
cat "$W"/lddebug.* 2>/dev/null | grep -E "once_call|__once_proxy" | sed 's/^ *[0-9]*: *//' | sort | uniq -c | head -30
cat "$W"/lddebug.* 2>/dev/null | grep -E "file=.*(libstdc|libLLVM|libpocl|libOpenCL|parenchyma-core|_parenchyma).*\[0\];" | sed 's/^ *[0-9]*: *//' | head -20
[ -n "${PCY_LOGS:-}" ] && cat "$W"/lddebug.* 2>/dev/null | grep -E "once|file=|calling init" > "$PCY_LOGS/lddebug-once.txt"
pre() { printf 'import ctypes, os, sys\n%s\nexec(open("repro.py").read())\n' "$1" > "$W/pre-$2.py"; echo "pre-$2.py"; }
run stdcxx-global -- python3 "$(pre 'ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)' stdcxx)"
run dlopen-global -- python3 "$(pre 'sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL)' global)"
run pocl-first -- python3 "$(pre 'cl = ctypes.CDLL("libOpenCL.so.1"); n = ctypes.c_uint(); cl.clGetPlatformIDs(0, None, ctypes.byref(n))' pocl)"
run llvm-first -- python3 "$(pre 'ctypes.CDLL("libLLVM-16.so.1")' llvm)"
run core-global -- python3 "$(pre "ctypes.CDLL(\"$B/lib/libparenchyma-core.so\", mode=ctypes.RTLD_GLOBAL)" core)"
run ctypes-ocl -- python3 ctypes_ocl.py
run backend-native WHAT=backend REQUEST=native -- python3 repro.py

# C++ without Python, but loaded as Python loads us: a shim library linked to the core, opened
# with dlopen(RTLD_LOCAL) by a program that links nothing of ours.
cat >"$W/shim.cpp" <<'CPP'
#include <parenchyma/parenchyma.hpp>
#include <cstdio>
extern "C" int shim_run() {
  parenchyma::Backend b;
  std::printf("shim backend %s\n", b.name().c_str());
  return 0;
}
CPP
cat >"$W/host.c" <<'CC'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char** argv) {
  void* h = dlopen(argv[1], RTLD_NOW | (argc > 2 ? RTLD_GLOBAL : RTLD_LOCAL));
  if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
  int (*f)(void) = (int (*)(void))dlsym(h, "shim_run");
  return f ? f() : 3;
}
CC
if g++ -std=c++20 -O1 -shared -fPIC -I"$SRC/core/include" -I"$SRC/sdk/include" -I"$B/core/include" \
    "$W/shim.cpp" -o "$W/shim.so" -L"$B/lib" -lparenchyma-core -Wl,-rpath,"$B/lib" 2>"$W/cxx.log" &&
   cc -O1 "$W/host.c" -o "$W/host" -ldl 2>>"$W/cxx.log"; then
  run cxx-rtld-local -- ./host "$W/shim.so"
  run cxx-rtld-global -- ./host "$W/shim.so" global
else
  echo "c++ shim did not build"; tail -5 "$W/cxx.log"
fi
