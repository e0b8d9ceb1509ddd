# Legitimate: a preallocated workspace for the intermediate product; the returned output is a
# new tensor on every call.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.workspace = None

    def forward(self, x):
        shape = (x.shape[0], self.linear.out_features)
        if self.workspace is None or self.workspace.shape != shape:
            self.workspace = torch.empty(shape)
        torch.mm(x, self.linear.weight.t(), out=self.workspace)
        return torch.relu(self.workspace + self.linear.bias)
