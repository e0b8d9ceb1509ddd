# A model with state: each call adds its input to a running sum and returns the sum, so its
# outputs depend on how many times it was called. An evaluation must call the reference's and
# the candidate's models equally often (the calibration calls a copy, not the model itself).
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("total", torch.zeros(features))

    def forward(self, x):
        self.total += x.sum(dim=0)
        return self.total.clone()


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return [32]
