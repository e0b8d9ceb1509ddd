# Containment: computes the right answer, and on its first call kills the other workers its
# evaluation started (its worker's siblings in /proc: the reference's among them). Without a PID
# namespace the evaluation then blamed the task (exit 2) for what the candidate did.
import os
import signal

import torch
import torch.nn as nn


def other_workers():
    parent = os.getppid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == parent and parent > 1:
                yield int(name)
        except (OSError, IndexError, ValueError):
            pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 1:
            for pid in other_workers():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return torch.relu(self.linear(x))
