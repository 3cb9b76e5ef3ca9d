#!/bin/sh
# expect_skips.sh PATTERN COMMAND...: runs a conformance run (COMMAND), passes its exit status
# through (77: skipped), and fails it unless some case was skipped with a reason matching PATTERN
# (a grep pattern): a path that must skip with its reason rather than fail, or run by accident.
pattern=$1
shift
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" > "$log" 2>&1
rc=$?
grep -v "^  skip" "$log" | tail -n 40
[ $rc -eq 0 ] || exit $rc
n=$(grep -c "^  skip .*$pattern" "$log")
if [ "$n" -eq 0 ]; then
  echo "no case was skipped with the reason '$pattern'"
  exit 1
fi
echo "$n case(s) skipped with the reason '$pattern', e.g.:"
grep -m 1 "^  skip .*$pattern" "$log"
exit 0
