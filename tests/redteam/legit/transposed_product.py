# Legitimate: computes the transposed product and returns its transpose: a dense but
# non-contiguous output, which is still a plain tensor with its own storage.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        yt = torch.addmm(self.linear.bias.unsqueeze(1), self.linear.weight, x.t())
        return yt.relu_().t()
