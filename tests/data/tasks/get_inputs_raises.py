# A task whose get_inputs fails (after the first call): the task's fault, never the candidate's.
import torch
import torch.nn as nn

calls = 0


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x * self.scale + 1.0) * 2.0


def get_inputs():
    global calls
    calls += 1
    if calls > 1:
        raise ValueError("get_inputs is broken on purpose")
    return [torch.randn(1024)]


def get_init_inputs():
    return [0.5]
