"""Plausible but WRONG: applies the affine in the wrong order,
(y + shift) * scale instead of y * scale + shift. The results differ by
shift * (scale - 1) (~1e-2 here), far outside tolerance."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels))
        self.shift = nn.Parameter(0.1 * torch.randn(out_channels))

    def forward(self, x):
        y = self.conv(x)
        y.add_(self.shift.view(1, -1, 1, 1)).mul_(self.scale.view(1, -1, 1, 1))
        return F.hardswish(y, inplace=True)
