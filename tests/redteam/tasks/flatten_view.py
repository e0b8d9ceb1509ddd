# Red-team task whose reference returns a view of its input: an output that shares memory with
# an input is then the task's own behaviour, not a candidate's trick.
import torch
import torch.nn as nn

batch_size = 64
features = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.view(batch_size, -1)


def get_inputs():
    return [torch.randn(batch_size, features // 32, 32)]


def get_init_inputs():
    return []
