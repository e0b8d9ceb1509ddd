# Correct on CUDA; besides the real work it runs a long useless loop on a side stream that waits
# for nothing and is never joined. The queued clock must count it (its span covers every stream),
# so the candidate is much slower than the reference, and extra_streams is reported.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.side = None
        self.scratch = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
            self.scratch = torch.ones(1 << 26, device=x.device)  # 256 MB
        with torch.cuda.stream(self.side):
            for _ in range(8):
                self.scratch.mul_(1.0000001)
        return torch.relu(x * (2.0 * self.scale) + 2.0)
