#!/usr/bin/env bash
# parenchyma-info with hostile environment: non-UTF-8 bytes in paths, a config that is a
# directory or a FIFO, a malformed PARENCHYMA_BACKEND. It must report and exit (0; 1 for an
# unusable config file; 3 when no backend would be selected) — never abort (134), crash or hang.
set -u
info="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # <what> <expected rc> <rc> <output file> [grep pattern]
  if [ "$3" != "$2" ]; then echo "FAIL $1: exit code $3, expected $2"; cat "$4"; fails=$((fails + 1)); return; fi
  if [ -n "${5:-}" ] && ! grep -q -- "$5" "$4"; then echo "FAIL $1: output lacks '$5'"; cat "$4"; fails=$((fails + 1)); return; fi
  echo "ok   $1"
}

mkdir -p "$tmp/$(printf 'plug\xff\xfeins')"
PARENCHYMA_PLUGIN_PATH="$tmp/$(printf 'plug\xff\xfeins'):$(printf '/no/such\xc3\x28dir')" \
  timeout 60 "$info" --json >"$tmp/out" 2>&1
check "non-UTF-8 plugin paths, --json" 0 $? "$tmp/out" '"plugins"'
PARENCHYMA_PLUGIN_PATH="$(printf '/no/such\xc3\x28dir')" timeout 60 "$info" --explain >"$tmp/out" 2>&1
check "non-UTF-8 plugin path, --explain" 0 $? "$tmp/out" "does not exist"

PARENCHYMA_CONFIG="$tmp" timeout 60 "$info" >"$tmp/out" 2>&1
check "PARENCHYMA_CONFIG is a directory" 1 $? "$tmp/out" "directory"
mkfifo "$tmp/fifo.json"
PARENCHYMA_CONFIG="$tmp/fifo.json" timeout 60 "$info" --json >"$tmp/out" 2>&1
check "PARENCHYMA_CONFIG is a FIFO" 1 $? "$tmp/out" "FIFO"

PARENCHYMA_BACKEND='stub:x1,,' timeout 60 "$info" >"$tmp/out" 2>&1
check "malformed PARENCHYMA_BACKEND is reported; nothing selected (3)" 3 $? "$tmp/out" "PARENCHYMA_BACKEND"
PARENCHYMA_BACKEND='stub:x1' timeout 60 "$info" --backend native >"$tmp/out" 2>&1
check "an explicit request still selects" 0 $? "$tmp/out" "native:0"
PARENCHYMA_LOG_LEVEL=loudest timeout 60 "$info" >"$tmp/out" 2>&1
check "bad PARENCHYMA_LOG_LEVEL is a notice" 0 $? "$tmp/out" "loudest"

"$info" --help >"$tmp/out" 2>&1
check "--help names the documentation" 0 $? "$tmp/out" "share/doc/parenchyma"
[ $fails -eq 0 ]
