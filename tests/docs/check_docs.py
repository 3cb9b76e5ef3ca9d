#!/usr/bin/env python3
"""The documentation tests (ctest label `docs`): the docs are part of the product.

  check_docs.py links DIR|FILE...      every relative link and image of every .md under DIR
                                       (or of FILE) resolves (file, and #anchor where it names a
                                       heading), and every plot under DIR is shown by a page
  check_docs.py examples FLAGS SRC     every example marked in SRC's pages compiles and runs
  check_docs.py claims SRC             the versions and the checkable claims in the docs agree
                                       with their sources of truth (headers, CMake, config)

Examples. A fenced ```cpp or ```python block in docs/*.md or README.md is preceded by a marker
line saying what it is (an HTML comment, invisible when the page is rendered):

  <!-- example: run -->                a complete program: compiled (C++) and run, exit 0
  <!-- example: run needs=opencl -->   the same, run only where Backend("opencl") can be made
  <!-- example: compile -->            a complete program that is compiled only (it needs a
                                       device this machine may lack, e.g. cuda)
  <!-- example: fragment -->           an excerpt (a declaration, part of a plugin), not checked

A cpp or python block without a marker is a failure: each example states what it is.
Exit status: 0 pass, 1 fail, 77 skipped (with the reason printed).
"""
import concurrent.futures
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

SKIP = 77


def fail(msgs):
    for m in msgs:
        print("FAIL: " + m)
    print("%d problem(s)" % len(msgs))
    return 1


# ---- markdown scanning -----------------------------------------------------------------------

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([A-Za-z0-9_+-]*)")


def strip_code(lines):
    """The lines with fenced code blocks and inline code blanked (links there are not links)."""
    out, fence = [], None
    for line in lines:
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
            out.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"`+[^`]*`+", "", line))
    return out


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    h = heading.strip().lower()
    h = re.sub(r"[`*_]", "", h)
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        names, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            for line in strip_code(f.read().splitlines()):
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    names.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = names
    return cache[path]


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_REF = re.compile(r"<(?:img|a)\s[^>]*(?:src|href)=\"([^\"]+)\"")


def links(roots):
    """Also: every plot (.svg, .png outside api/, Doxygen's) is shown by some page."""
    problems, count, pages, shown = [], 0, 0, set()
    for root in roots:
        if os.path.isfile(root):
            walk = [(os.path.dirname(os.path.abspath(root)), [], [os.path.basename(root)])]
        else:
            walk = list(os.walk(root))
        if not walk or not os.path.exists(root):
            problems.append("%s: no such directory (were the docs installed?)" % root)
            continue
        for dirpath, _, files in walk:
            for name in sorted(files):
                if not name.endswith(".md"):
                    continue
                page = os.path.join(dirpath, name)
                pages += 1
                with open(page, encoding="utf-8") as f:
                    text = f.read().splitlines()
                for no, line in enumerate(strip_code(text), 1):
                    for target in LINK.findall(line) + HTML_REF.findall(line):
                        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                            continue
                        count += 1
                        where = "%s:%d: link %s" % (page, no, target)
                        path, _, anchor = target.partition("#")
                        dest = os.path.normpath(os.path.join(dirpath, path)) if path else page
                        shown.add(dest)
                        if not os.path.exists(dest):
                            problems.append(where + ": %s does not exist" % dest)
                        elif anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                            problems.append(where + ": no heading with the anchor #" + anchor)
        for dirpath, dirs, files in os.walk(root) if os.path.isdir(root) else []:
            dirs[:] = [d for d in dirs if d != "api"]
            for name in files:
                path = os.path.normpath(os.path.join(dirpath, name))
                if name.endswith((".svg", ".png")) and path not in shown:
                    problems.append("%s: a plot no page shows (show it in results.md or delete "
                                    "it)" % path)
    if pages == 0:
        problems.append("no .md page under %s" % " ".join(roots))
    if problems:
        return fail(problems)
    print("ok: %d links in %d pages resolve" % (count, pages))
    return 0


# ---- examples --------------------------------------------------------------------------------

MARKER = re.compile(r"^<!--\s*example:\s*(run|compile|fragment)((?:\s+\w+=\S+)*)\s*-->\s*$")


def examples_of(src):
    pages = [os.path.join(src, "README.md")] + sorted(
        os.path.join(src, "docs", n) for n in os.listdir(os.path.join(src, "docs"))
        if n.endswith(".md"))
    found, problems = [], []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            lines = f.read().splitlines()
        i = 0
        while i < len(lines):
            m = FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            lang, start = m.group(3), i
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith(m.group(2)):
                j += 1
            if lang in ("cpp", "c++", "python"):
                where = "%s:%d" % (os.path.relpath(page, src), start + 1)
                mk = MARKER.match(lines[start - 1].strip()) if start > 0 else None
                if mk is None:
                    problems.append(where + ": a ```%s block without a marker line before it "
                                    "(<!-- example: run|compile|fragment -->)" % lang)
                else:
                    opts = dict(o.split("=", 1) for o in mk.group(2).split())
                    found.append({"where": where, "lang": "python" if lang == "python" else "cpp",
                                  "kind": mk.group(1), "needs": opts.get("needs"),
                                  "code": "\n".join(lines[start + 1:j]) + "\n"})
            i = j + 1
    return found, problems


def run(cmd, env=None, timeout=120):
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return -1, "timed out after %d s" % timeout


def examples(flags_file, src):
    with open(flags_file) as f:
        cfg = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    found, problems = examples_of(src)
    # A fixed directory beside the flags file (in the build tree), so a compiler cache sees the
    # same paths from one run to the next.
    work = os.path.join(os.path.dirname(os.path.abspath(flags_file)), "examples")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ)
    env.setdefault("PARENCHYMA_CACHE_DIR", os.path.join(work, "cache"))
    env.pop("PARENCHYMA_BACKEND", None)
    cxx = shlex.split(cfg["cxx"])
    # A cross build's programs run under its emulator (qemu-aarch64); empty natively.
    emulator = shlex.split(cfg.get("emulator", ""))
    implicit = set(cfg.get("implicit", "").split(";"))  # the compiler's own: not as -I
    incs = ["-I" + d for d in dict.fromkeys(cfg["includes"].split(";")) if d and d not in implicit]
    defs = ["-D" + d for d in dict.fromkeys(cfg["defines"].split(";")) if d]
    libdir = os.path.dirname(cfg["core"])
    compile_flags = (["-std=c++20", "-O0", "-Wall", "-Wextra", "-Werror"] +
                     shlex.split(cfg.get("cxxflags", "")) + incs + defs)
    cfg_link = shlex.split(cfg.get("cxxflags", ""))
    py_missing = None
    if not cfg.get("python"):
        py_missing = ("a sanitizer build: the interpreter would need the sanitizer runtime "
                      "preloaded")
    elif not cfg.get("pythonpath"):
        py_missing = "the Python package is not built here (PARENCHYMA_PYTHON off or no pybind11)"
    elif run([cfg["python"], "-c", "import numpy"])[0] != 0:
        py_missing = "%s cannot import numpy (install python3-numpy)" % cfg["python"]
    usable = {}

    def can_use(backend):
        # A probe program: can a Backend of this framework be made here?
        if backend not in usable:
            probe = os.path.join(work, "probe.cpp")
            with open(probe, "w") as f:
                f.write("#include <parenchyma/parenchyma.hpp>\nint main(int, char** argv) {\n"
                        "  try { parenchyma::Backend b(argv[1]); return 0; } catch (...) {}\n"
                        "  return 1;\n}\n")
            exe = os.path.join(work, "probe")
            if not os.path.exists(exe):
                rc, out = run(cxx + compile_flags + [probe, "-o", exe, cfg["core"],
                                                     "-Wl,-rpath," + libdir])
                if rc != 0:
                    problems.append("the probe program does not compile:\n" + out)
                    return False
            usable[backend] = run(emulator + [exe, backend], env=env)[0] == 0
        return usable[backend]

    # The C++ examples compile side by side (most of this test's time), then run one by one.
    def build(n):
        ex = found[n]
        path = os.path.join(work, "example%d.cpp" % n)
        page, line = ex["where"].split(":")
        with open(path, "w") as f:
            f.write("#line 1 \"%s\"\n" % page + "\n" * int(line) + ex["code"])
        # Compile and link apart: a compiler cache keeps only the compile.
        rc, out = run(cxx + compile_flags + ["-c", path, "-o", path[:-4] + ".o"])
        if rc == 0:
            rc, out = run(cxx + cfg_link + [path[:-4] + ".o", "-o", path[:-4], cfg["core"],
                                            "-Wl,-rpath," + libdir])
        return path[:-4], (rc, out)

    cpp = [n for n, ex in enumerate(found) if ex["lang"] == "cpp" and ex["kind"] != "fragment"]
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        built = dict(zip(cpp, pool.map(build, cpp)))

    ran = skipped = 0
    for n, ex in enumerate(found):
        if ex["kind"] == "fragment":
            continue
        where = ex["where"]
        if ex["lang"] == "cpp":
            exe, (rc, out) = built[n]
            if rc != 0:
                problems.append(where + ": the C++ example does not compile:\n" + out)
                continue
            cmd = emulator + [exe]
        else:
            if py_missing:
                print("skip  %s: %s" % (where, py_missing))
                skipped += 1
                continue
            path = os.path.join(work, "example%d.py" % n)
            with open(path, "w") as f:
                f.write(ex["code"])
            if ex["kind"] == "compile":
                rc, out = run([cfg["python"], "-m", "py_compile", path])
                if rc != 0:
                    problems.append(where + ": the Python example does not parse:\n" + out)
                else:
                    print("ok    %s (compiled; not run: marked compile)" % where)
                continue
            cmd = [cfg["python"], path]
            env["PYTHONPATH"] = cfg["pythonpath"]
        if ex["kind"] == "compile":
            print("ok    %s (compiled; not run: marked compile)" % where)
            continue
        if ex["needs"] and not can_use(ex["needs"]):
            print("skip  %s: needs a %s backend, which this machine cannot make" %
                  (where, ex["needs"]))
            skipped += 1
            continue
        rc, out = run(cmd, env=env)
        if rc != 0:
            problems.append(where + ": the example exits with %d:\n%s" % (rc, out))
        else:
            ran += 1
            print("ok    %s: %s" % (where, out.strip().splitlines()[-1] if out.strip() else ""))
    if problems:
        return fail(problems)
    print("ok: %d examples ran, %d skipped (reasons above)" % (ran, skipped))
    return 0


# ---- claims ----------------------------------------------------------------------------------

def read(src, rel):
    with open(os.path.join(src, rel), encoding="utf-8") as f:
        return f.read()


def claims(src):
    problems = []
    base = read(src, "sdk/include/parenchyma/abi/pcy_base.h")
    major = re.search(r"#define PCY_ABI_VERSION_MAJOR (\d+)", base).group(1)
    minor = re.search(r"#define PCY_ABI_VERSION_MINOR (\d+)", base).group(1)
    abi = "%s.%s" % (major, minor)
    project = re.search(r"project\(parenchyma VERSION ([0-9.]+)", read(src, "CMakeLists.txt"))
    version = project.group(1)
    pages = {"README.md": read(src, "README.md"), "CHANGELOG.md": read(src, "CHANGELOG.md"),
             "CONTRIBUTING.md": read(src, "CONTRIBUTING.md")}
    for n in sorted(os.listdir(os.path.join(src, "docs"))):
        if n.endswith(".md"):
            pages["docs/" + n] = read(src, "docs/" + n)

    # The ABI version abi.md names as current, and the changelog's section for it.
    m = re.search(r"Current version: \*\*(\d+\.\d+)\*\* \(`PCY_ABI_VERSION_MAJOR` (\d+), "
                  r"`PCY_ABI_VERSION_MINOR` (\d+)\)", pages["docs/abi.md"])
    if not m:
        problems.append("docs/abi.md: no 'Current version: **X.Y** (...)' line")
    elif (m.group(1), m.group(2), m.group(3)) != (abi, major, minor):
        problems.append("docs/abi.md says the current ABI is %s (%s, %s); pcy_base.h says %s" %
                        (m.group(1), m.group(2), m.group(3), abi))
    if not re.search(r"^## %s\b" % re.escape(abi), pages["docs/abi-changelog.md"], re.M):
        problems.append("docs/abi-changelog.md has no section '## %s'" % abi)
    # Program output quoted in the docs: "parenchyma-<tool> <version> (ABI X.Y)".
    for page, text in pages.items():
        for m in re.finditer(r"parenchyma-[a-z]+ (\d+\.\d+\.\d+)(?: \(ABI (\d+\.\d+)\))?", text):
            if m.group(1) != version:
                problems.append("%s quotes '%s': the project version is %s" %
                                (page, m.group(0), version))
            if m.group(2) and m.group(2) != abi:
                problems.append("%s quotes '%s': the ABI is %s" % (page, m.group(0), abi))
        for m in re.finditer(r"core speaks (\d+\.\d+)", text):  # the load report's words
            if m.group(1) != abi:
                problems.append("%s quotes '%s': the ABI is %s" % (page, m.group(0), abi))
    if not re.search(r"^## .*\b%s\b" % re.escape(version), pages["CHANGELOG.md"], re.M):
        problems.append("CHANGELOG.md has no section for the project version %s" % version)

    # The default ranking: config.md shows the shipped config's ranking, and no page or
    # docstring claims an order the ranking code does not give (OpenCL before native on a CPU).
    shipped = json.loads(read(src, "config/parenchyma.json"))["ranking"]
    m = re.search(r"The shipped config.*?```json\n(.*?)```", pages["docs/config.md"], re.S)
    if not m or json.loads(m.group(1)).get("ranking") != shipped:
        problems.append("docs/config.md's shipped-config block differs from "
                        "config/parenchyma.json's ranking %s" % json.dumps(shipped))
    if shipped.get("cpu", [None])[0] != "native":
        problems.append("config/parenchyma.json no longer ranks native first on a CPU: fix "
                        "docs/config.md, docs/opencl.md and this test together")
    wrong = re.compile(r"OpenCL\s*>\s*native|opencl`?\s+above\s+`?native|OpenCL\s+(?:ranks\s+)?"
                       r"(?:above|before)\s+native", re.I)
    sources = dict(pages)
    for rel in ("python/src/backend.cpp", "core/include/parenchyma/backend.hpp",
                "python/parenchyma/__init__.py", "python/parenchyma/_parenchyma.pyi"):
        if os.path.exists(os.path.join(src, rel)):
            sources[rel] = read(src, rel)
    for page, text in sources.items():
        for m in wrong.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            problems.append("%s:%d: '%s': by default native ranks before OpenCL's CPU device "
                            "(config/parenchyma.json)" % (page, line, m.group(0)))
    if problems:
        return fail(problems)
    print("ok: ABI %s, version %s, ranking %s agree with the docs" %
          (abi, version, json.dumps(shipped)))
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "links":
        return links(argv[2:])
    if len(argv) == 4 and argv[1] == "examples":
        return examples(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "claims":
        return claims(argv[2])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
