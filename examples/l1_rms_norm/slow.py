"""Correct but slow: normalises one row at a time in a Python loop (one small
reduction + several tiny elementwise ops per row, thousands of launches)."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1])
        out = torch.empty_like(x2)
        for i in range(x2.shape[0]):
            row = x2[i]
            rms = torch.sqrt(row.pow(2).mean() + self.eps)
            out[i] = row / rms * self.weight
        return out.view_as(x)
