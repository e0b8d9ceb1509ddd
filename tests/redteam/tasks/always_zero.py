# Red-team task whose reference output does not depend on its inputs (ReLU of a negative value):
# a degenerate task, to be flagged as such rather than rewarding whoever returns zeros. The
# shift keeps every value negative: relu(-|x|) gave -0.0 where an input was exactly 0 (2 in 300
# input sets), so the reference's outputs differed by a bit between seeds, the task was not seen
# as degenerate and the zeros were rejected as trivial_output (redteam.cpu.1of4, 2026-11-26).
import torch
import torch.nn as nn

length = 1 << 16


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(-torch.abs(x) - 1.0)


def get_inputs():
    return [torch.randn(length)]


def get_init_inputs():
    return []
