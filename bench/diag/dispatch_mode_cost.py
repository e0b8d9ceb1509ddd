#!/usr/bin/env python3
"""What the reference's counted first call costs, in parts (issue 32): bench/diag/first_call_cpu.py
found about 4 CPU-s per process on PyTorch 2.x for cudal1's FLOP counter (a TorchDispatchMode)
whatever the task. Each step below in a fresh process, its CPU seconds: importing the dispatch
mode, cudal1's formula table, the first and second call under the mode on the CPU, then on the
GPU; and the GPU call under the mode in a process that made one CPU call under it before it
touched CUDA (what a zygote could do before it forks).

    bench/diag/dispatch_mode_cost.py [--device cuda]
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
steps = {}
def step(name, f):
    c = time.process_time(); f(); steps[name] = round(time.process_time() - c, 3)
flop = {}
step("import torch", lambda: __import__("torch"))
import torch
step("import _python_dispatch", lambda: __import__("torch.utils._python_dispatch"))
step("flop_count.py", lambda: exec(open(sys.argv[1]).read(), flop))
step("formulas", lambda: flop["_formulas"]())
cls = flop["_counter_class"]()
def under(device):
    def run():
        x = torch.ones(64, 64, device=device)
        with cls():
            torch.mm(x, x) + 1
        if device != "cpu":
            torch.cuda.synchronize()
    return run
device = sys.argv[2]
if sys.argv[3] == "cpu-first":
    step("counted on cpu (1st)", under("cpu"))
    step("counted on cpu (2nd)", under("cpu"))
step("cuda init", lambda: torch.zeros(1, device=device))
step("plain on device", lambda: (torch.mm(torch.ones(64, 64, device=device), torch.ones(64, 64, device=device)), torch.cuda.synchronize()))
step("counted on device (1st)", under(device))
step("counted on device (2nd)", under(device))
print(json.dumps(steps))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    flop_count = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "worker",
                              "python", "flop_count.py")
    for order in ("device-only", "cpu-first"):
        for _ in range(2):
            run = subprocess.run([sys.executable, "-c", CHILD, flop_count, args.device, order],
                                 capture_output=True, text=True, timeout=300)
            print(order, run.stdout.strip() or run.stderr[-600:], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
