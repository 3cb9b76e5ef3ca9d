#!/usr/bin/env bash
# tools/run-tests lists each skipped test with the reason it printed (ctest shows only
# "***Skipped"): a small ctest project whose tests skip the ways ours do, run through ctest's
# JUnit output and tools/lib/ctest_summary.py; every reason must come out whole.
#   skip_summary.sh <ctest_summary.py> <cmake> <ctest>
set -u
summary="$1" cmake="$2" ctest="$3"
command -v python3 >/dev/null 2>&1 || { echo "skipped: no python3 (tools/run-tests prints no skip list without it)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.21)
project(skips NONE)
enable_testing()
add_test(NAME catch_style COMMAND sh -c "echo 'some output first'; echo 'SKIPPED: cuda: libcuda.so.1 not found (no NVIDIA driver)'; exit 77")
add_test(NAME conformance_style COMMAND sh -c "echo 'framework opencl'; echo '  skip  opencl/*: 0 devices: no OpenCL platform'; echo 'summary: 0 passed'; exit 77")
add_test(NAME placeholder COMMAND sh -c "echo \"skipped: $0\"; exit 77" "a reason in one argument; with a semicolon")
add_test(NAME silent COMMAND sh -c "exit 77")
add_test(NAME passes COMMAND sh -c "echo fine")
set_tests_properties(catch_style conformance_style placeholder silent PROPERTIES SKIP_RETURN_CODE 77)
CM
"$cmake" -S "$dir" -B "$dir/b" >/dev/null || { echo "FAIL: configure"; exit 1; }
(cd "$dir/b" && "$ctest" --output-junit "$dir/j.xml" >/dev/null 2>&1)
out=$(python3 "$summary" "$dir/j.xml") || { echo "FAIL: ctest_summary.py failed"; exit 1; }
echo "$out"
rc=0
expect() {
  if ! printf '%s\n' "$out" | grep -qF -- "$1"; then echo "FAIL: expected a line with: $1"; rc=1; fi
}
expect "4 tests skipped, with their reasons:"
expect "catch_style        cuda: libcuda.so.1 not found (no NVIDIA driver)"
expect "conformance_style  opencl/*: 0 devices: no OpenCL platform"
expect "placeholder        a reason in one argument; with a semicolon"
expect "silent             (the test printed no reason)"
if printf '%s\n' "$out" | grep -q "^  passes "; then echo "FAIL: a passing test listed as skipped"; rc=1; fi
exit $rc
