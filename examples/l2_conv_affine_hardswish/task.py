"""Level 2: Conv2d followed by a per-channel affine (scale, shift) and a
hard-swish written out by hand.

y = conv(x); y = y * scale[c] + shift[c]; y = y * clamp(y + 3, 0, 6) / 6

The epilogue is six separate elementwise ops, each producing a full-size
temporary of the (large) conv output.
"""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 8
out_channels = 32
height = 96
width = 128
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels))
        self.shift = nn.Parameter(0.1 * torch.randn(out_channels))

    def forward(self, x):
        y = self.conv(x)
        y = y * self.scale.view(1, -1, 1, 1)
        y = y + self.shift.view(1, -1, 1, 1)
        y = y * torch.clamp(y + 3.0, min=0.0, max=6.0) / 6.0
        return y


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width) * 2.0]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
