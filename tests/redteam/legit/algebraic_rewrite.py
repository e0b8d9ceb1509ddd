# Legitimate: 2 * relu(s*x + 1) == relu(2s*x + 2): the constant factor folded into one
# multiply-add, same values.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(torch.add(torch.full_like(x, 2.0), x, alpha=2.0 * self.scale))
