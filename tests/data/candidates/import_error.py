# Fails at import time (a missing module): reported as a compile error with the traceback.
import torch.nn as nn
import module_that_does_not_exist  # noqa: F401


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return x
