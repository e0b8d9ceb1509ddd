# Legitimate: the CUDA-graph pattern on any device: compute into a static buffer, then hand the
# caller a copy it owns (returning the static buffer itself would alias across calls).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.static_out = None

    def forward(self, x):
        shape = (x.shape[0], self.linear.out_features)
        if self.static_out is None or self.static_out.shape != shape:
            self.static_out = torch.empty(shape, device=x.device)
        torch.addmm(self.linear.bias, x, self.linear.weight.t(), out=self.static_out)
        return self.static_out.relu_().clone()
