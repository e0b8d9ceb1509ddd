"""Correct but slow: evaluates the same formula one row at a time in a Python
loop, so every op is issued `batch_size` times on tiny tensors (thousands of
kernel launches on GPU, per-op overhead dominated on CPU)."""
import math

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        c = math.sqrt(2.0 / math.pi)
        rows = []
        for i in range(x.shape[0]):
            r = x[i]
            inner = c * (r + 0.044715 * torch.pow(r, 3.0))
            rows.append(0.5 * r * (1.0 + torch.tanh(inner)))
        return torch.stack(rows, dim=0)
