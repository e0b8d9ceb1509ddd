# diag(a) @ b: the reference builds the N x N diagonal matrix and multiplies by it (a full matrix
# product), where scaling b's rows by a does the same work in one pass. A legitimate rewrite is
# many times faster, fast enough for the reward checker to ask about it.
import torch
import torch.nn as nn

n = 512
m = 384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.diag(a) @ b


def get_inputs():
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
