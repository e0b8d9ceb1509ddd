# Legitimate: a contiguous transposed copy of the weight, refreshed when the weight changes. This
# caches a function of the parameters, never of the inputs.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self._version = None
        self._wt = None

    def forward(self, x):
        w = self.linear.weight
        if self._version != w._version or self._wt is None:
            self._wt = w.t().contiguous()
            self._version = w._version
        return torch.relu(torch.addmm(self.linear.bias, x, self._wt))
