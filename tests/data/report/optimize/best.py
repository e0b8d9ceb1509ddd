import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        # relu(2 * (x * s + 1)) == relu(x * (2 s) + 2): one multiply-add, one relu.
        return torch.relu(torch.addcmul(torch.full_like(x, 2.0), x, torch.full_like(x, 2.0 * self.scale)))
