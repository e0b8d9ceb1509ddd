# Red-team task whose reference output does not depend on its inputs (ReLU of a non-positive
# value): a degenerate task, to be flagged as such rather than rewarding whoever returns zeros.
import torch
import torch.nn as nn

length = 1 << 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(-torch.abs(x))


def get_inputs():
    return [torch.randn(length)]


def get_init_inputs():
    return []
