#!/usr/bin/env bash
# parenchyma-info's output and exit status as a script sees them: a request that cannot be met
# exits 3 with the reason (text and --json alike), --help documents the exit codes, --ops prints
# names whole (columns sized to the content), device memory reads in binary units in the text
# and stays in bytes in --json, and a mis-cased PARENCHYMA_BACKEND gets a "did you mean".
set -u
info="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL $1"; [ -n "${2:-}" ] && cat "$2"; fails=$((fails + 1)); }
ok() { echo "ok   $1"; }

timeout 60 "$info" --backend native >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q "native:0" "$tmp/out" && ok "a request that can be met exits 0" \
  || fail "a request that can be met exits 0" "$tmp/out"

timeout 60 "$info" --backend nosuchframework >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 3 ]; then fail "a request that cannot be met exits 3 (got $rc)" "$tmp/out"
elif ! grep -q "nosuchframework" "$tmp/err"; then fail "the reason goes to stderr" "$tmp/err"
else ok "a request that cannot be met exits 3 with the reason"; fi

timeout 60 "$info" --json --backend nosuchframework >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 3 ]; then fail "--json: a request that cannot be met exits 3 (got $rc)" "$tmp/out"
elif ! python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["selected"]["backend"] is None and "nosuchframework" in j["selected"]["error"]' "$tmp/out"; then
  fail "--json still prints the document with the error" "$tmp/out"
else ok "--json: exits 3, the document names the error"; fi

PARENCHYMA_BACKEND=OpenCL timeout 60 "$info" >"$tmp/out" 2>&1
rc=$?
[ $rc -eq 3 ] && grep -qi 'did you mean "opencl"' "$tmp/out" \
  && ok "PARENCHYMA_BACKEND=OpenCL: exit 3, did you mean \"opencl\"" \
  || fail "PARENCHYMA_BACKEND=OpenCL: exit 3 (got $rc), did you mean \"opencl\"" "$tmp/out"

"$info" --help >"$tmp/out" 2>&1
grep -q "Exit status" "$tmp/out" && grep -q "3 no backend" "$tmp/out" \
  && ok "--help documents the exit codes" || fail "--help documents the exit codes" "$tmp/out"

# --ops: every op and implementation name of the JSON appears whole in the text table.
PARENCHYMA_LOG_LEVEL=off timeout 120 "$info" --ops >"$tmp/ops" 2>/dev/null
PARENCHYMA_LOG_LEVEL=off timeout 120 "$info" --ops --json >"$tmp/ops.json" 2>/dev/null
if python3 - "$tmp/ops" "$tmp/ops.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
ops = json.load(open(sys.argv[2]))["ops"]
if not ops:
    print("no bundle loaded: nothing to compare")
    sys.exit(0)
table = text.split("\nOps (")[1]
missing = [o for o in ops
           if f'{o["extension"]}.{o["op"]} {o["dtype"]}' not in table or o["implementation"] not in table]
for o in missing[:5]:
    print("cut or missing:", o["extension"], o["op"], o["dtype"], o["implementation"])
longest = max(len(o["implementation"]) for o in ops)
print(f"{len(ops)} cells, longest implementation {longest} characters")
sys.exit(1 if missing or "..." in table else 0)
PY
then ok "--ops prints op and implementation names whole"
else fail "--ops prints op and implementation names whole" "$tmp/ops"; fi

# Memory: binary units in the text, bytes in --json.
timeout 60 "$info" --json >"$tmp/all.json" 2>/dev/null
timeout 60 "$info" >"$tmp/all" 2>/dev/null
if python3 - "$tmp/all" "$tmp/all.json" <<'PY'
import json, re, sys
text = open(sys.argv[1]).read()
j = json.load(open(sys.argv[2]))
mem = [d["properties"]["global_memory"] for f in j["frameworks"] for d in f["devices"]
       if isinstance(d["properties"].get("global_memory"), int)]
if not mem:
    print("no device with global_memory: nothing to check")
    sys.exit(0)
lines = [l for l in text.splitlines() if l.strip().startswith("global_memory")]
bad = [l for l in lines if not re.search(r"\d(\.\d)? (bytes|KiB|MiB|GiB|TiB)$", l)]
raw = [l for l in lines if re.search(r" \d{7,}$", l)]
print("\n".join(lines))
sys.exit(1 if bad or raw or not lines else 0)
PY
then ok "memory in binary units (text), bytes (--json)"
else fail "memory in binary units (text), bytes (--json)" "$tmp/all"; fi
[ $fails -eq 0 ]
