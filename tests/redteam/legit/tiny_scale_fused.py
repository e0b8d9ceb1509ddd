# Legitimate: the same tiny-valued result, computed in place on a fresh tensor.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.tanh(x).mul_(1e-6)
