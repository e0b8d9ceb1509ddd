# Containment: computes the right answer, and writes a file into the user's home, the task's
# folder, its working directory and /tmp. Without a private mount namespace each of them
# stayed behind.
import os
import sys

import torch
import torch.nn as nn

NAME = "cudal1-wrote-{{MARKER}}"
task = getattr(sys.modules.get("cudal1_task"), "__file__", None) or "."
for folder in (os.path.expanduser("~"), "/root", os.path.dirname(os.path.abspath(task)),
               os.getcwd(), "/tmp", "/var/tmp"):
    try:
        with open(os.path.join(folder, NAME), "w") as f:
            f.write("written by a candidate\n")
    except OSError:
        pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(self.linear(x))
