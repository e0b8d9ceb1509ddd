#!/usr/bin/env python3
"""Checks the shape of src/: file and function sizes, and the include graph between its folders.

  scripts/check_structure.py            # report and fail (exit 1) on any breach
  scripts/check_structure.py --list N   # also list the N longest functions

Rules (issue 30):
  * no source file in src/ over FILE_LIMIT lines, data tables aside (EXEMPT_FILES);
  * no function over FUNCTION_LIMIT lines (C++ and Python; a lambda counts towards the
    function it is written in);
  * folder-level includes: no folder includes one it must not (FORBIDDEN), and the graph
    between src/ folders has no cycle;
  * docs/evaluation.md's "Where things are" map names every source file of src/eval/, and
    every file it names exists.

It needs nothing but Python 3; the C++ scanner reads braces, not a full grammar, which is
enough for the code style here (clang-format, one definition per block).
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import re
import sys

FILE_LIMIT = 600
FUNCTION_LIMIT = 120
SOURCE_SUFFIXES = {".cpp", ".hpp", ".h", ".cu", ".py"}
# Files and functions that are data, not logic: their length is the table's length.
EXEMPT_FILES: dict[str, str] = {}
EXEMPT_FUNCTIONS = {
    "src/review/api_features.cpp:rules": "the table of API families the reviewer's features count",
}
# Folder pairs (from, to) that must never appear: serving, search and the queue do not
# depend on the benchmark runner.
FORBIDDEN = {("serve", "bench"), ("search", "bench"), ("queue", "bench")}

ROOT = pathlib.Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def blank_out_literals(text: str) -> str:
    """Comments, string and character literals replaced by spaces (newlines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and not (i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            close = ")" + m.group(1) + '"'
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


CONTAINER = re.compile(r"\b(namespace|class|struct|union|enum)\b|extern\s*$")


def cpp_functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of each function body at namespace or class scope."""
    code = blank_out_literals(text)
    line_of = [0] * (len(code) + 1)
    line = 1
    for k, ch in enumerate(code):
        line_of[k] = line
        if ch == "\n":
            line += 1
    line_of[len(code)] = line

    found = []
    stack: list[tuple[str, int, str]] = []  # (kind, start offset, name)
    head_start = 0  # where the text before the next '{' begins
    for k, ch in enumerate(code):
        if ch in ";":
            if not any(kind == "function" for kind, _, _ in stack):
                head_start = k + 1
        elif ch == "{":
            if any(kind in ("function", "other") for kind, _, _ in stack):
                stack.append(("other", k, ""))
                continue
            head = code[head_start:k]
            flat = " ".join(head.split())
            if CONTAINER.search(flat) and "(" not in flat.split("=")[0].split(":")[0] or flat.endswith('extern') or flat == "":
                stack.append(("container", k, ""))
            elif ")" in flat and not flat.rstrip().endswith("="):
                name = re.findall(r"([~\w:]+|operator\s*\S+)\s*\(", flat)
                stack.append(("function", k, name[0] if name else "?"))
            else:
                stack.append(("other", k, ""))
            head_start = k + 1
        elif ch == "}":
            if not stack:
                continue
            kind, start, name = stack.pop()
            if kind == "function":
                rest = code[k + 1:k + 40].lstrip()
                # A brace initialiser in a constructor's member list, not a body.
                if not rest.startswith((",", "{")):
                    found.append((name, line_of[start], line_of[k]))
            if not any(kind == "function" for kind, _, _ in stack):
                head_start = k + 1
    return found


def python_functions(text: str) -> list[tuple[str, int, int]]:
    found = []

    def visit(node, inside: bool):
        for child in ast.iter_child_nodes(node):
            is_function = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and not inside:
                found.append((child.name, child.lineno, child.end_lineno))
            visit(child, inside or is_function)

    visit(ast.parse(text), False)
    return found


INCLUDE = re.compile(r'^\s*#\s*include\s*"cudal1/([a-z_]+)/', re.M)


def folder_of(path: pathlib.Path) -> str | None:
    rel = path.relative_to(SRC).parts
    if rel[0] == "include" and len(rel) > 2:
        return rel[2]
    return rel[0] if len(rel) > 1 else None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components = []
    counter = [0]

    def connect(v: str):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return components


MAP_DOC = ROOT / "docs" / "evaluation.md"
MAP_HEADING = "## Where things are"


def map_problems() -> list[str]:
    """The evaluation guide's map of src/eval/ against the files there."""
    text = MAP_DOC.read_text(encoding="utf-8")
    start = text.find(MAP_HEADING)
    if start < 0:
        return [f"{MAP_DOC.relative_to(ROOT)}: no '{MAP_HEADING}' section"]
    end = text.find("\n## ", start + len(MAP_HEADING))
    section = text[start:] if end < 0 else text[start:end]
    named = set(re.findall(r"`(src/[\w./-]+\.(?:cpp|hpp|py))`", section))
    present = {str(p.relative_to(ROOT)) for p in (SRC / "eval").rglob("*") if p.suffix in (".cpp", ".hpp")}
    problems = [f"{MAP_DOC.relative_to(ROOT)}: the map does not name {f}" for f in sorted(present - named)]
    problems += [f"{MAP_DOC.relative_to(ROOT)}: the map names {f}, which does not exist"
                 for f in sorted(named) if not (ROOT / f).is_file()]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", type=int, default=0, metavar="N", help="also list the N longest functions")
    args = parser.parse_args()

    problems = []
    functions = []
    graph: dict[str, set[str]] = {}
    edges: dict[tuple[str, str], list[str]] = {}
    files = sorted(p for p in SRC.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file())
    for path in files:
        rel = str(path.relative_to(ROOT))
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > FILE_LIMIT and rel not in EXEMPT_FILES:
            problems.append(f"{rel}: {lines} lines (limit {FILE_LIMIT})")
        found = python_functions(text) if path.suffix == ".py" else cpp_functions(text)
        for name, first, last in found:
            length = last - first + 1
            functions.append((length, rel, first, name))
            exempt = rel in EXEMPT_FILES or f"{rel}:{name}" in EXEMPT_FUNCTIONS
            if length > FUNCTION_LIMIT and not exempt:
                problems.append(f"{rel}:{first}: function {name} is {length} lines (limit {FUNCTION_LIMIT})")
        source = folder_of(path)
        if source is None or path.suffix == ".py":
            continue
        for target in INCLUDE.findall(text):
            if target == source:
                continue
            graph.setdefault(source, set()).add(target)
            edges.setdefault((source, target), []).append(rel)

    for source, target in sorted(FORBIDDEN):
        if (source, target) in edges:
            problems.append(f"{source} includes {target}: " + ", ".join(sorted(set(edges[(source, target)]))))
    for component in find_cycles(graph):
        inside = [f"{a}->{b} ({edges[(a, b)][0]})" for a in component for b in sorted(graph.get(a, ())) if b in component]
        problems.append("folder cycle " + " <-> ".join(component) + ": " + "; ".join(inside))

    problems += map_problems()

    if args.list:
        for length, rel, first, name in sorted(functions, reverse=True)[: args.list]:
            print(f"{length:5d}  {rel}:{first}  {name}")
    print(f"checked {len(files)} files, {len(functions)} functions, {sum(len(v) for v in graph.values())} folder edges")
    for problem in problems:
        print("FAIL " + problem)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print("structure ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
