"""Level 1: RMSNorm over the last dimension, written the naive way.

y = x / sqrt(mean(x^2, dim=-1) + eps) * weight

The reference materialises x^2, the normalised tensor and the weighted tensor
as separate full-size temporaries (three full passes plus a reduction pass).
"""
import torch
import torch.nn as nn

batch_size = 8192
hidden_size = 1024
eps = 1e-5


class Model(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        sq = x.pow(2)
        ms = sq.mean(dim=-1, keepdim=True)
        rms = torch.sqrt(ms + self.eps)
        y = x / rms
        return y * self.weight


def get_inputs():
    return [torch.randn(batch_size, hidden_size)]


def get_init_inputs():
    return [hidden_size, eps]
