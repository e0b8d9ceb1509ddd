# Correct: the first call allocates on the device, then spends 3 s on the host before its first
# kernel, as a load_inline or torch.compile inside forward does while it compiles. With the
# device gate the worker holds the device only around its device work, not through the pause.
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.compiled = False

    def forward(self, x):
        if not self.compiled:
            scratch = torch.zeros(16, device=x.device)  # device work before the "compilation"
            scratch += 1
            torch.cuda.synchronize()
            time.sleep(3.0)
            self.compiled = True
        return torch.relu(x * self.scale + 1.0) * 2.0
