# Right answer, but the call changes the last element of its second input in place: an element
# past the last whole 8-byte word of the tensor's memory.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = x * 2 + y
        y[-1] = y[-1] + 1
        return out
