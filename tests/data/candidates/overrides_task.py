# Correct, but redefines the task's sizes and get_inputs: they must be ignored (and flagged).
import torch
import torch.nn as nn

length = 16


def get_inputs():
    return [torch.randn(length)]


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x * (2.0 * self.scale) + 2.0)
