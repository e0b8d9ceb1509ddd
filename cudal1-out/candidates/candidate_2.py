import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        parts = []
        for chunk in torch.split(x, 1024):
            y = chunk * self.scale
            y = y + 1.0
            y = torch.relu(y)
            parts.append(y * 2.0)
        return torch.cat(parts)
