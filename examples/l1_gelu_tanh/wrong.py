"""Plausible but WRONG: uses the sigmoid ("quick GELU") approximation
x * sigmoid(1.702 x) instead of the tanh formula. It looks like GELU but
differs from the tanh approximation by up to ~2e-2, far outside 1e-4."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)
