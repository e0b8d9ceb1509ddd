#!/usr/bin/env python3
"""The flag lists of the docs against the one flag table (`cudal1 flags --json`).

    flags_doc_test.py --cudal1 build/cudal1 --root REPO

Checked: docs/reward-hacking.md's reject set, informational and task flags; docs/rl.md's reject
set; docs/review.md's list of known hack classes and its table of review flags. A flag added to
the table (src/eval/flags.cpp) and not to the docs, or the other way round, fails here. Also
docs/evaluation.md's list of defenses against the one list (`cudal1 flags --defenses --json`):
the same names in the same order, and a row for each, naming the flags it may raise.
"""

import argparse
import json
import os
import re
import subprocess
import sys


def names(text):
    return re.findall(r"`([a-z][a-z0-9_]*)`", text)


def between(text, start, end, where):
    i = text.find(start)
    if i < 0:
        raise SystemExit(f"FAIL: {where}: '{start}' not found")
    j = text.find(end, i + len(start))
    if j < 0:
        raise SystemExit(f"FAIL: {where}: '{end}' not found after '{start}'")
    return text[i + len(start):j]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    table = json.loads(subprocess.run([args.cudal1, "flags", "--json"], check=True, capture_output=True,
                                      text=True).stdout)
    by_effect = {}
    for f in table:
        by_effect.setdefault(f["effect"], []).append(f["name"])
    classes = [f["name"] for f in table if f["hack_class"]]
    defenses = json.loads(subprocess.run([args.cudal1, "flags", "--defenses", "--json"], check=True,
                                         capture_output=True, text=True).stdout)
    docs = {name: open(os.path.join(args.root, "docs", name)).read()
            for name in ("reward-hacking.md", "rl.md", "review.md", "evaluation.md")}
    problems = []

    def same(found, wanted, where):
        if sorted(found) != sorted(wanted):
            problems.append(f"{where}: lists {sorted(found)}, the table has {sorted(wanted)} "
                            f"(missing {sorted(set(wanted) - set(found))}, extra {sorted(set(found) - set(wanted))})")

    hacking = docs["reward-hacking.md"]
    same(names(between(hacking, "Reject set:", "Informational:", "reward-hacking.md")), by_effect["reject"],
         "reward-hacking.md, reject set")
    info = between(hacking, "Informational:", "Task flag:", "reward-hacking.md")
    same(names(info.replace("`--require-custom-kernel`", "")), by_effect["info"], "reward-hacking.md, informational")
    same(names(between(hacking, "Task flag:", "\n\n", "reward-hacking.md").split("`cudal1 flags`")[0]),
         by_effect["task"], "reward-hacking.md, task flags")
    same(names(between(docs["rl.md"], "The reject set is", "([reward-hacking.md]", "rl.md")), by_effect["reject"],
         "rl.md, reject set")
    known = between(docs["review.md"], "The known classes are", "another name is accepted", "review.md")
    same(names(known), classes, "review.md, known hack classes")
    review_rows = re.findall(r"^\| `([a-z_]+)` \|", docs["review.md"], re.M)
    for flag in ("review_rejected", "review_uncertain", "unreviewed"):
        if flag not in review_rows:
            problems.append(f"review.md: no row for {flag} in its table of flags")
    listed = names(between(docs["evaluation.md"], "Defenses, in the order they run:", "\n\n", "evaluation.md"))
    if listed != [d["name"] for d in defenses]:
        problems.append(f"evaluation.md: lists the defenses {listed}, the engine runs {[d['name'] for d in defenses]}")
    for d in defenses:
        row = re.search(rf"^\| `src/eval/defenses/{d['name']}\.cpp` \|(.*)\|$", docs["evaluation.md"], re.M)
        if not row:
            problems.append(f"evaluation.md: no row for the defense {d['name']}")
        elif sorted(names(row.group(1))) != sorted(d["flags"]):
            problems.append(f"evaluation.md: the row of {d['name']} names {sorted(names(row.group(1)))}, "
                            f"it raises {sorted(d['flags'])}")
    # Every flag is explained somewhere in reward-hacking.md or review.md.
    for f in table:
        if f"`{f['name']}`" not in hacking + docs["review.md"]:
            problems.append(f"{f['name']}: in no doc")
    for p in problems:
        print("FAIL", p)
    if not problems:
        print(f"PASS: {len(table)} flags and {len(defenses)} defenses, docs agree with the engine")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
