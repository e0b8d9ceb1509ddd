# Containment: computes the right answer, and leaves a detached child (a new session) that holds
# 1.5 GiB. With `--memory-limit 1` and a limit that counted only the worker's process group, the
# child held 3 GiB and the candidate was still `ok`.
import os
import subprocess

import torch
import torch.nn as nn

HOLDER = r"""
import sys, time
block = bytearray(1536 << 20)
for i in range(0, len(block), 4096):
    block[i] = 1
open(sys.argv[2], "w").close()
time.sleep(120)
"""
HELD = "/tmp/cudal1-holder-{{MARKER}}"

for python in ("/usr/bin/python3", "python3"):
    try:
        subprocess.Popen([python, "-c", HOLDER, "{{MARKER}}", HELD], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        break
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.calls = 0

    def forward(self, x):
        # The first call waits for the child to have its memory (however busy the machine), and
        # a little more: the limit must see it.
        self.calls += 1
        if self.calls == 1:
            import time
            for _ in range(600):
                if os.path.exists(HELD):
                    break
                time.sleep(0.1)
            time.sleep(1.0)
        return torch.relu(self.linear(x))
