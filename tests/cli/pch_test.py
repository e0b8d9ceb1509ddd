#!/usr/bin/env python3
"""A candidate's extension builds: made once, cached, and with PyTorch's extension header
precompiled (CUDAL1_PCH). The candidate builds in its model's constructor, a failing build first
(it falls back to a second, good one):

- the build step constructs the model: the good library is built there, once, and the failure
  is recorded (build.construction), at nice 10 where the kernel has autogroups;
- the evaluation's workers rebuild nothing (build.rebuilt_on_load is empty) and raise the
  recorded failure without compiling it again (build.replayed_failures);
- with CUDAL1_PCH=on the first build waits for the precompiled header, which cudal1 makes in the
  cache's pch/ folder (ready.json, one variant per optimisation level) and reports in
  phases.build_pch;
- the build's main.cpp, compiled with the flags its build.ninja recorded, uses the file (GCC's -H
  marks a used precompiled header with "!"): checked here, outside cudal1;
- a second evaluation of the same candidate loads the cached build without rebuilding it (the
  include folder is offered the same way every time, so the flags do not change);
- a bad CUDAL1_PCH (or CUDAL1_CUDA_HEADERS) value is refused with a message that names the
  values allowed;
- a candidate whose import-time build fails is a compile_error with the compiler's log, and the
  failure is cached (with the header ready, that failing build is cheap).

    pch_test.py --cudal1 BIN --root REPO

Standard library only.
"""

import argparse
import glob
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


class Failure(Exception):
    pass


def check(condition, what):
    if not condition:
        raise Failure(what)
    print("ok: " + what, flush=True)


def evaluate(binary, root, cache, policy, out, candidate="cpp_extension_in_constructor.py", **variables):
    command = [binary, "eval", "--task", os.path.join(root, "tests/fixtures/tasks/scale_relu.py"),
               "--candidate", os.path.join(root, "tests/fixtures/candidates", candidate),
               "--device", "cpu", "--time-budget", "1", "-q", "--cache-dir", cache,
               "--json", out, "--format", "text"]
    env = dict(os.environ, CUDAL1_PCH=policy, **variables)
    print("$ CUDAL1_PCH=%s %s" % (policy, " ".join(command)), flush=True)
    result = subprocess.run(command, capture_output=True, text=True, timeout=1500, env=env)
    sys.stdout.write(result.stdout[-1500:] + result.stderr[-3000:])
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cudal1", required=True)
    parser.add_argument("--root", required=True)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cudal1-pch-test-") as tmp:
        cache = os.path.join(tmp, "cache")

        bad = evaluate(options.cudal1, options.root, cache, "sometimes", os.path.join(tmp, "x.json"))
        check(bad.returncode == 2 and "CUDAL1_PCH" in bad.stderr and "auto" in bad.stderr,
              "CUDAL1_PCH=sometimes is refused (exit 2), naming the values allowed")
        bad = evaluate(options.cudal1, options.root, cache, "on", os.path.join(tmp, "x.json"),
                       CUDAL1_CUDA_HEADERS="some")
        check(bad.returncode == 2 and "CUDAL1_CUDA_HEADERS" in bad.stderr and "light" in bad.stderr,
              "CUDAL1_CUDA_HEADERS=some is refused (exit 2), naming the values allowed")

        first = evaluate(options.cudal1, options.root, cache, "on", os.path.join(tmp, "1.json"))
        check(first.returncode == 0, "the evaluation with CUDAL1_PCH=on ran")
        with open(os.path.join(tmp, "1.json"), encoding="utf-8") as f:
            verdict = json.load(f)
        check(verdict["status"] == "ok", "the candidate is ok")
        build = verdict["build"]
        check(not build["cached"], "it was built")
        construction = build.get("construction") or {}
        check(len(construction.get("built", [])) == 1 and
              construction["built"][0].startswith("cudal1_test_ctor_scale_relu"),
              "the build step built the constructor's good library: %s" % construction)
        check(construction.get("failed") == ["cudal1_test_ctor_broken"] and not construction.get("error"),
              "and recorded its failed build, the model constructed: %s" % construction)
        check(build["rebuilt_on_load"] == [] and build.get("replayed_failures") == ["cudal1_test_ctor_broken"],
              "the worker rebuilt nothing and raised the recorded failure without compiling: %s" % build)
        cpu = verdict["phases"].get("worker_cpu_s", {})
        check(all(cpu.get(role, {}).get("workers", 0) >= 1 and cpu[role].get("load", 0) > 0
                  for role in ("build", "reference", "candidate")),
              "the workers reported where their CPU went: %s" % cpu)
        if os.path.exists("/proc/self/autogroup"):
            check(verdict["phases"].get("build_autogroup_nice") == 10,
                  "the build ran at nice 10 in its autogroup")
        pch = verdict["phases"].get("build_pch", {})
        check(pch.get("policy") == "on" and pch.get("ready") is True,
              "the build had the precompiled header ready: %s" % pch)
        check(set(pch.get("variants", [])) == {"O0", "O2"},
              "both variants were made: %s" % pch.get("variants"))
        folders = glob.glob(os.path.join(cache, "pch", "*", "ready.json"))
        check(len(folders) == 1, "one toolchain folder with ready.json under the cache's pch/")
        folder = os.path.dirname(folders[0])
        for variant in ("O0", "O2"):
            path = os.path.join(folder, "torch", "extension.h.gch", variant + ".gch")
            check(os.path.isfile(path) and os.stat(path).st_mode & 0o222 == 0,
                  "%s.gch is there, read-only" % variant)

        # The build's own main.cpp and flags, the sandbox's path to the folder made real.
        ninja_files = glob.glob(os.path.join(cache, "builds", verdict["build"]["key"],
                                             "torch_extensions", "cudal1_test_ctor_scale_relu",
                                             "build.ninja"))
        check(len(ninja_files) == 1, "the good build's build.ninja is in the cache")
        with open(ninja_files[0], encoding="utf-8") as f:
            text = f.read()
        cflags = re.search(r"^cflags = (.*)$", text, re.M).group(1)
        check(os.path.basename(folder) in cflags,
              "the build's flags offer the toolchain's folder: %s" % cflags[:300])
        cflags = re.sub(r"-I\S*/" + re.escape(os.path.basename(folder)), "-I" + folder, cflags)
        compile_ = subprocess.run(["c++"] + shlex.split(cflags) +
                                  ["-H", "-fsyntax-only", "main.cpp"],
                                  cwd=os.path.dirname(ninja_files[0]), capture_output=True,
                                  text=True, timeout=600)
        used = [line for line in compile_.stderr.splitlines()
                if line.startswith("! ") and line.endswith(".gch")]
        check(compile_.returncode == 0 and used,
              "main.cpp with its recorded flags uses the precompiled header: %s" %
              (used or compile_.stderr[:800]))

        second = evaluate(options.cudal1, options.root, cache, "on", os.path.join(tmp, "2.json"))
        check(second.returncode == 0, "the second evaluation ran")
        with open(os.path.join(tmp, "2.json"), encoding="utf-8") as f:
            again = json.load(f)
        check(again["status"] == "ok" and again["build"]["cached"] and
              again["build"]["rebuilt_on_load"] == [] and
              again["build"].get("replayed_failures") == ["cudal1_test_ctor_broken"],
              "the second loads the cached build without rebuilding it: %s" % again["build"])

        for run, cached in (("3", False), ("4", True)):
            failed = evaluate(options.cudal1, options.root, cache, "on", os.path.join(tmp, run + ".json"),
                              "compile_error_cpp.py")
            with open(os.path.join(tmp, run + ".json"), encoding="utf-8") as f:
                broken = json.load(f)
            check(failed.returncode != 0 or broken["status"] == "compile_error", "the broken candidate was evaluated")
            check(broken["status"] == "compile_error" and "error building extension" in broken["error"].lower()
                  and "error" in broken.get("log", "").lower() and broken["build"]["cached"] is cached,
                  "a failing import-time build is a compile_error with its log (cached: %s)" % cached)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print("FAILED: " + str(e), flush=True)
        sys.exit(1)
