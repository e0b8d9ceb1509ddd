# Correct for linear_tanh: the same layer built the same way, with a fused addmm.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.tanh(torch.addmm(self.linear.bias, x, self.linear.weight.t()))
