# Raises a Python exception in forward.
import torch.nn as nn


def helper_that_fails(x):
    raise ValueError("deliberate failure inside the candidate")


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return helper_that_fails(x)
