# Red-team task: tanh_chain.py at 64x64, the CPU's size (a call of about a millisecond, so that
# timing goes through its input sets many times even on a loaded machine: at 128x128, under
# `make test` on 2 cores, a call took 45 ms, 2 s gave 14 pairs, and a cache never hit). Its time is
# arithmetic: the speed-of-light floor (moving 32 KB once) is far below any honest call.
import math

import torch
import torch.nn as nn

size = 64
depth = 8


class Model(nn.Module):
    def __init__(self, size, depth):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(size, size) / math.sqrt(size))
        self.depth = depth

    def forward(self, x):
        for _ in range(self.depth):
            x = torch.tanh(x @ self.weight)
        return x


def get_inputs():
    return [torch.randn(size, size)]


def get_init_inputs():
    return [size, depth]
