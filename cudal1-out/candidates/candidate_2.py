import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(torch.addcmul(torch.full_like(x, 2.0), x, torch.full_like(x, 2.0 * self.scale)))
