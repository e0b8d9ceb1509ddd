# A PyTorch-only candidate that moves its work to a CUDA device: on the CPU it fails when called,
# and the verdict's error must say that the candidate wants a GPU.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x.cuda() * (2.0 * self.scale) + 2.0).cpu()
