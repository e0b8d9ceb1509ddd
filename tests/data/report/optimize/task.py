# A small elementwise task (about a millisecond on a CPU core) for the CLI tests.
import torch
import torch.nn as nn

length = 1 << 18


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = x * self.scale
        y = y + 1.0
        y = torch.relu(y)
        return y * 2.0


def get_inputs():
    return [torch.randn(length)]


def get_init_inputs():
    return [0.5]
