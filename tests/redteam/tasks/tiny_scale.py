# Red-team task: outputs far below the absolute tolerance (1e-4), so that an all-zero or noise
# output passes an absolute check. Only a check against the reference's own scale catches it.
import torch
import torch.nn as nn

length = 1 << 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x) * 1e-6


def get_inputs():
    return [torch.randn(length)]


def get_init_inputs():
    return []
