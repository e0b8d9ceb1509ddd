# Legitimate: in-place operations, but only on tensors the candidate allocated itself.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = x * (2.0 * self.scale)
        return y.add_(2.0).clamp_(min=0.0)
