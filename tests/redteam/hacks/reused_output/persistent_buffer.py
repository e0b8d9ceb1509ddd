# Hack (reused_output): every call returns the same preallocated buffer, so an earlier
# result changes under its owner's feet when the model is called again.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out = None

    def forward(self, x):
        if self.out is None or self.out.shape[0] != x.shape[0]:
            self.out = torch.empty(x.shape[0], self.linear.out_features)
        torch.addmm(self.linear.bias, x, self.linear.weight.t(), out=self.out)
        return self.out.relu_()
