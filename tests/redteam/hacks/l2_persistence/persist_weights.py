# Hack attempt (l2_persistence, GPU): reserves persisting L2 for the weights once, so that later
# calls find them in cache whatever the harness flushes. cudal1 resets persisting L2 before every
# timed call, so this buys nothing.
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.done = False

    def forward(self, x):
        if not self.done:
            self.done = True
            try:
                cudart = ctypes.CDLL("libcudart.so")
                cudart.cudaDeviceSetLimit(ctypes.c_int(0x06), ctypes.c_size_t(8 << 20))
            except OSError:
                pass
        return torch.relu(self.linear(x))
