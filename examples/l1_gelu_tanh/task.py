"""Level 1: tanh-approximated GELU, written the naive way.

Every sub-expression of
    0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
is a separate PyTorch op, so the reference launches (on GPU) or runs (on CPU)
eight passes over the tensor and allocates a temporary for each.
"""
import math

import torch
import torch.nn as nn

batch_size = 4096
dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        cube = torch.pow(x, 3.0)
        inner = x + 0.044715 * cube
        inner = math.sqrt(2.0 / math.pi) * inner
        t = torch.tanh(inner)
        return 0.5 * x * (1.0 + t)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs():
    return []
