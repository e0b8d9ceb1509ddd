# The running sum of tests/data/tasks/running_sum.py, kept the same way (a correct candidate with
# state).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.register_buffer("total", torch.zeros(features))

    def forward(self, x):
        torch.add(self.total, x.sum(dim=0), out=self.total)
        return self.total.clone()
