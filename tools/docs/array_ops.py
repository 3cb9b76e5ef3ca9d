#!/usr/bin/env python3
"""The op tables of docs/array.md, made from the array extension's header (pcy_array.h): the
instruction set (PCY_ARRAY_OPS), the reduce kinds (PCY_ARRAY_REDUCE_KINDS) and the sort kinds
(PCY_ARRAY_SORT_KINDS), each line's comment its meaning. Writes the tables between the page's
markers, or with --check fails (exit 1) when the page differs from what the header gives.
  tools/docs/array_ops.py [--check] [--root DIR]"""
import argparse
import pathlib
import re
import sys

BEGIN, END = "<!-- array-ops: begin (tools/docs/array_ops.py) -->", "<!-- array-ops: end -->"


def entries(header, macro, fields):
    body = re.search(r"#define %s\(X\)(.*?)\n\n" % macro, header, re.S).group(1)
    pat = r"X\(" + r",\s*".join([r"(\w+)"] * fields) + r"\)\s*/\*\s*(.*?)\s*\*/"
    return re.findall(pat, body)


def tables(header):
    arity = {"0": "source", "1": "a", "2": "a, b", "3": "a, b, c"}
    out = ["| instruction | code | reads | value |", "|---|---|---|---|"]
    for name, code, n, doc in entries(header, "PCY_ARRAY_OPS", 3):
        out.append("| `%s` | %s | %s | %s |" % (name, code, arity[n], doc.replace("|", "\\|")))
    out += ["", "| reduce kind | code | result |", "|---|---|---|"]
    for name, code, doc in entries(header, "PCY_ARRAY_REDUCE_KINDS", 2):
        out.append("| `%s` | %s | %s |" % (name, code, doc.replace("|", "\\|")))
    out += ["", "| sort kind | code | result |", "|---|---|---|"]
    for name, code, doc in entries(header, "PCY_ARRAY_SORT_KINDS", 2):
        out.append("| `%s` | %s | %s |" % (name, code, doc.replace("|", "\\|")))
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[2]))
    a = ap.parse_args()
    root = pathlib.Path(a.root)
    header = (root / "sdk/include/parenchyma/abi/ext/pcy_array.h").read_text()
    page_path = root / "docs/array.md"
    page = page_path.read_text()
    if BEGIN not in page or END not in page:
        print("docs/array.md: the markers %s ... %s are missing" % (BEGIN, END))
        return 1
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + tables(header) + "\n" + END + tail
    if a.check:
        if new != page:
            print("docs/array.md: the op tables differ from pcy_array.h; run tools/docs/array_ops.py")
            return 1
        print("docs/array.md: the op tables match pcy_array.h")
        return 0
    page_path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
