#!/usr/bin/env python3
"""The worker's host module (cudal1_host) is its parts joined into one text, in the order of
src/worker/CMakeLists.txt: a name defined at the top level of two parts is one name, and the
later part's definition silently replaces the earlier's for every caller (a helper of the build
step once replaced the source reader's `_is_cuda_device`). No top-level name may be defined twice.

    host_module_test.py REPO_ROOT
"""

import ast
import os
import re
import sys


def parts(root):
    cmake = open(os.path.join(root, "src", "worker", "CMakeLists.txt")).read()
    listed = re.search(r"foreach\(part ([^)]*)\)", cmake).group(1).split()
    return [os.path.join(root, "src", "worker", "python", name) for name in listed]


def top_level_names(path):
    names = set()
    for node in ast.parse(open(path).read(), path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def main():
    files = parts(sys.argv[1])
    if len(files) < 2:
        print("FAIL: the parts of cudal1_host were not found in src/worker/CMakeLists.txt")
        return 1
    seen, clashes = {}, []
    for path in files:
        for name in sorted(top_level_names(path)):
            if name in seen:
                clashes.append("%s: defined in %s and in %s" % (name, os.path.basename(seen[name]),
                                                                os.path.basename(path)))
            seen[name] = path
    for clash in clashes:
        print("FAIL: " + clash)
    if clashes:
        return 1
    print("ok: %d top-level names in %d parts" % (len(seen), len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
