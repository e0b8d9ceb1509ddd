# Hack under --require-custom-kernel (no_custom_kernel): presented as an optimisation, but only
# calls the same library operators as the reference.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.relu(torch.addmm(self.linear.bias, x, self.linear.weight.t()))
