"""Plausible but WRONG: normalises correctly but forgets to multiply by the
learned weight (which is 1 + 0.1*randn, not ones), so outputs are off by ~10%."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
