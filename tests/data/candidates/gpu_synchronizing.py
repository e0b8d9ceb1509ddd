# Correct on CUDA, but the call waits for the device before it returns (a host-side check of the
# result), so it cannot be queued behind the timer's hold: the evaluation must fall back to the
# window clock and still finish with an honest verdict.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = torch.relu(x * (2.0 * self.scale) + 2.0)
        if not bool(torch.isfinite(y).all()):  # .item()-style read: waits for the device
            raise RuntimeError("non-finite output")
        return y
