# Containment: computes the right answer, and on its first call kills its parent (the cudal1
# process that started its worker) and that process's whole group. Without a PID namespace
# this ended `cudal1 eval` (exit 137, no verdict) and `cudal1 serve`.
import os
import signal

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 1:
            parent = os.getppid()
            for attempt in (lambda: os.kill(parent, signal.SIGKILL),
                            lambda: os.killpg(os.getpgid(parent), signal.SIGKILL)):
                try:
                    attempt()
                except OSError:
                    pass
        return torch.relu(self.linear(x))
