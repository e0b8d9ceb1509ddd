# Legitimate: the ReLU of an affine map computed with one matrix product whose bias is
# broadcast, and the activation applied in place to the fresh product.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = x @ self.linear.weight.t()
        y += self.linear.bias
        return y.clamp_min_(0)
