import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
torch::Tensor conv(torch::Tensor x) { return x.undefined_function(); }
"""
module = load_inline(name="conv3d_fixture", cpp_sources=source, functions=["conv"])


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()

    def forward(self, x):
        return module.conv(x)
