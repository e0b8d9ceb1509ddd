# Legitimate: writes the row means into a preallocated dense output by broadcasting, instead of
# materialising a repeated intermediate.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        out = torch.empty_like(x)
        out.copy_(x.mean(dim=1, keepdim=True))
        return out
