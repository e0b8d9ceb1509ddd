import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # Wrong on purpose: the exact GELU is not the tanh approximation within tolerance <here>.
        return F.gelu(x) * 1.01
