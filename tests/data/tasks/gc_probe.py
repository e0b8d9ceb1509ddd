# A task whose model answers how many other tensors of its input's shape Python's garbage
# collector lists while it runs (tests/worker/batch_samples.py: unseen input sets are not among
# them, so a candidate cannot find them ahead of its call).
import gc

import torch
import torch.nn as nn

length = 4099


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        seen = sum(1 for obj in gc.get_objects()
                   if isinstance(obj, torch.Tensor) and obj is not x and obj.shape == x.shape)
        return torch.tensor([float(seen)])


def get_inputs():
    return [torch.randn(length)]


def get_init_inputs():
    return []
