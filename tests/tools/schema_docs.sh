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
# Ops only some builds serve (a bundle that needs a vendor header or a device, e.g. coll's NCCL
# ops): named on a line `<!-- parenchyma-info --ops --markdown: optional: op1 op2 -->`, their
# documented rows are left out of the comparison where no bundle built here serves them.
optional=$(sed -n 's/^<!-- parenchyma-info --ops --markdown: optional: \(.*\) -->$/\1/p' "$doc")
for op in $optional; do
  if ! printf '%s\n' "$out" | grep -qF "| \`$op\` |"; then
    documented=$(printf '%s\n' "$documented" | grep -vF "| \`$op\` |")
  fi
done
if [ "$out" != "$documented" ]; then
  echo "$doc differs from parenchyma-info --ops --markdown; paste this between the markers:"
  printf '%s\n' "$out"
  diff <(printf '%s\n' "$documented") <(printf '%s\n' "$out")
  exit 1
fi
echo "ok: $doc matches parenchyma-info --ops --markdown ($(printf '%s\n' "$out" | grep -c '^| `') ops)"
