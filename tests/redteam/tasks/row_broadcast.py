# Red-team task: each row's mean, repeated along the row (a dense output).
import torch
import torch.nn as nn

rows = 512
cols = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=1, keepdim=True).repeat(1, cols)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
