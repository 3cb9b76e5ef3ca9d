"""After a ctest run (tools/run-tests): each skipped test with the reason it printed, then the
slowest tests. Reads the JUnit file ctest wrote (--output-junit)."""
import re
import sys
import xml.etree.ElementTree as ET

# The lines our tests print when they skip: "SKIPPED: ...", "skipped: ...", or the conformance
# program's "  skip  <case>: <reason>".
REASON = re.compile(r"^\s*(skip(?:ped)?\b:?)\s*(.*)$", re.IGNORECASE)


def reason_of(output):
    lines = [l.strip() for l in (output or "").splitlines() if l.strip()]
    for line in lines:
        m = REASON.match(line)
        if m and m.group(2):
            return m.group(2)
    return lines[-1] if lines else "(the test printed no reason)"


def main(path):
    cases = ET.parse(path).getroot().iter("testcase")
    skipped, timed = [], []
    for c in cases:
        name = c.get("name", "?")
        timed.append((float(c.get("time", "0") or 0), name))
        if c.find("skipped") is not None or c.get("status") == "notrun":
            out = c.findtext("system-out") or ""
            skipped.append((name, reason_of(out)))
    if skipped:
        print(f"[parenchyma] {len(skipped)} tests skipped, with their reasons:")
        width = max(len(n) for n, _ in skipped)
        for name, why in sorted(skipped):
            print(f"  {name:<{width}}  {why}")
    timed.sort(reverse=True)
    total = sum(t for t, _ in timed)
    print(f"[parenchyma] slowest tests (of {len(timed)}; {total:.0f} s summed over all):")
    for t, name in timed[:8]:
        print(f"  {t:7.1f} s  {name}")


if __name__ == "__main__":
    main(sys.argv[1])
