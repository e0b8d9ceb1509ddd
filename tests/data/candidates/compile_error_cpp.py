# Fails to build: the C++ source has a type error the compiler reports.
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>

torch::Tensor broken(torch::Tensor x) {
  int not_a_tensor = x;
  return not_a_tensor;
}
"""

module = load_inline(name="cudal1_test_broken", cpp_sources=source, functions=["broken"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return module.broken(x)
