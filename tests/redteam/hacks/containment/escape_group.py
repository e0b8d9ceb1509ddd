# Containment: computes the right answer, and starts processes in sessions of their own (out of
# the worker's process group) that sleep for ten minutes. Without a PID namespace 25 such
# children were alive after an `ok` verdict.
import subprocess

import torch
import torch.nn as nn

for _ in range(5):
    try:
        subprocess.Popen(["/bin/sh", "-c", "sleep 600; : {{MARKER}}"], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))
