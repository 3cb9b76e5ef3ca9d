#!/usr/bin/env bash
# The op-schema tables in the docs are parenchyma-info's output: docs/<ext>.md holds, between
# its markers, exactly the table of extension <ext> that `parenchyma-info --ops --markdown` prints
# for the bundles built here.
#   schema_docs.sh <parenchyma-info> <docs file> <ext>
set -u
info=$1 doc=$2 ext=$3
begin='<!-- parenchyma-info --ops --markdown: begin -->'
end='<!-- parenchyma-info --ops --markdown: end -->'
all=$("$info" --ops --markdown) || { echo "parenchyma-info --ops --markdown failed"; exit 1; }
# The extension's table: from its header line to the blank line after it.
out=$(printf '%s\n' "$all" | awk -v h="| $ext op |" 'index($0, h) == 1 {p = 1} p && $0 == "" {exit} p {print}')
if [ -z "$out" ]; then
  echo "skipped: no bundle of extension '$ext' with op schemas was built here"; exit 77
fi
grep -qxF "$begin" "$doc" && grep -qxF "$end" "$doc" || { echo "$doc lacks the markers"; exit 1; }
documented=$(sed -n "\\|^$begin\$|,\\|^$end\$|p" "$doc" | sed '1d;$d')
if [ "$out" != "$documented" ]; then
  echo "$doc differs from parenchyma-info --ops --markdown; paste this between the markers:"
  printf '%s\n' "$out"
  diff <(printf '%s\n' "$documented") <(printf '%s\n' "$out")
  exit 1
fi
echo "ok: $doc matches parenchyma-info --ops --markdown ($(printf '%s\n' "$out" | grep -c '^| `') ops)"
