# Legitimate: the scale applied to the row sums with a fused multiply into a fresh output.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sum(x, dim=1).mul_(0.5)
