#!/usr/bin/env python3
"""No circle among native/ files (include or call) and none among pylowbit/ modules.

    python tools/check_cycles.py                      # includes and imports
    python tools/check_cycles.py --objects BUILD_DIR  # + calls, from a build's object files

Edges:
  include  file A includes file B (`#include "B"`, resolved as the compiler does: A's directory,
           then native/src, native/include);
  call     liblowbit's source A references a symbol that source B defines (`nm` on the object
           files of liblowbit in BUILD_DIR: an undefined symbol of A's object, defined in B's);
           code an -inl.h holds counts for the .c that includes it;
  import   module A imports module B (every `import` / `from ... import` statement, at module
           level or inside a function: a deferred import still makes a circle); `from pkg import
           name` is an edge to pkg.name when that is a module, else to pkg.
Plus the layering rule of the scalar reference: an object of native/src/ref/ references only
ref/, the format table (types.c) and the platform layer (platform*.c).

Exits 1 and prints each circle (its files and the edges that close it), else prints a summary.
"""
from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"
INCLUDE_DIRS = [NATIVE / "src", NATIVE / "include"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# What a reference source may call besides ref/ itself: the format facts and the platform layer.
REF_MAY_USE = re.compile(r"^(ref/.*|types\.c|platform.*\.c)$")


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node or a self-edge (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    nodes = set(graph) | {b for bs in graph.values() for b in bs}

    def visit(v: str) -> None:  # iterative, so a deep graph cannot exhaust the recursion limit
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1 or node in graph.get(node, ()):
                        out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def include_graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = defaultdict(set)
    for path in sorted(NATIVE.rglob("*")):
        if path.suffix not in (".c", ".h", ".inc") or not path.is_file():
            continue
        src = path.relative_to(ROOT).as_posix()
        for name in INCLUDE_RE.findall(path.read_text(errors="replace")):
            for base in [path.parent, *INCLUDE_DIRS]:
                target = (base / name).resolve()
                if target.is_file():
                    g[src].add(target.relative_to(ROOT).as_posix())
                    break
    return g


def call_graph(build: Path, nm: str = "nm") -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Sources of liblowbit (relative to native/src) and the symbols that link them."""
    objdir = build / "CMakeFiles" / "lowbit.dir"
    objects = sorted(objdir.rglob("*.o")) + sorted(objdir.rglob("*.obj"))
    if not objects:
        raise SystemExit(f"no object files of liblowbit under {objdir}")
    defined: dict[str, str] = {}
    undefined: dict[str, set[str]] = defaultdict(set)
    for obj in objects:
        rel = obj.relative_to(objdir).as_posix()
        src = re.sub(r"\.(o|obj)$", "", rel).removeprefix("native/src/")
        out = subprocess.run([nm, "-P", str(obj)], check=True, capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) < 2:
                continue
            sym, kind = parts[0], parts[1]
            if kind == "U":
                undefined[src].add(sym)
            elif kind in "TDBRCVWG":  # global definitions (functions, data, common)
                defined[sym] = src
    g: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], str] = {}
    for src, syms in undefined.items():
        for sym in sorted(syms):
            dst = defined.get(sym)
            if dst and dst != src:
                g[src].add(dst)
                why.setdefault((src, dst), sym)
    return g, why


def python_modules() -> dict[str, Path]:
    mods = {}
    pkg = ROOT / "pylowbit"
    for path in pkg.rglob("*"):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    mods = python_modules()
    g: dict[str, set[str]] = defaultdict(set)
    for name, path in sorted(mods.items()):
        if path.suffix != ".py":  # Cython modules import no pylowbit module
            continue
        is_pkg = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    frm = ".".join(base + ([node.module] if node.module else []))
                else:
                    frm = node.module or ""
                targets = [f"{frm}.{a.name}" if f"{frm}.{a.name}" in mods else frm
                           for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:  # `import pylowbit.x.y` names a module or its parent
                    t = t.rpartition(".")[0]
                if t and t != name:
                    g[name].add(t)
    return g


def report(kind: str, g: dict[str, set[str]], why=None) -> int:
    found = cycles(g)
    for comp in found:
        members = set(comp)
        print(f"{kind} circle among {len(comp)}: {' '.join(comp)}")
        for a in comp:
            for b in sorted(g.get(a, ())):
                if b in members:
                    print(f"    {a} -> {b}" + (f"  ({why[(a, b)]})" if why else ""))
    n_edges = sum(len(v) for v in g.values())
    if not found:
        print(f"{kind}: no circle ({len(g)} files, {n_edges} edges)")
    return len(found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--objects", type=Path, help="a CMake build dir of liblowbit: check calls too")
    ap.add_argument("--nm", default="nm", help="the nm that reads those objects")
    args = ap.parse_args(argv)
    bad = report("include", include_graph())
    bad += report("import", import_graph())
    if args.objects:
        g, why = call_graph(args.objects, args.nm)
        bad += report("call", g, why)
        for src in sorted(g):
            if src.startswith("ref/"):
                for dst in sorted(g[src]):
                    if not REF_MAY_USE.match(dst):
                        print(f"ref/ is a leaf, but {src} -> {dst}  ({why[(src, dst)]})")
                        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
