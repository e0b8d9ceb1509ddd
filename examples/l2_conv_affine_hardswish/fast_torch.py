"""PyTorch-only candidate: same convolution call, then the epilogue entirely
in place on the conv output (mul_, add_, library hardswish with inplace=True):
no full-size temporaries and three passes instead of six."""
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
        y.mul_(self.scale.view(1, -1, 1, 1)).add_(self.shift.view(1, -1, 1, 1))
        return F.hardswish(y, inplace=True)
