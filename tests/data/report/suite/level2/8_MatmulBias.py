import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return [1024]
