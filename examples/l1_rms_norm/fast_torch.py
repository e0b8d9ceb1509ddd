"""PyTorch-only candidate.

* On GPU with a PyTorch that has it (>= 2.4), the library's RMSNorm
  (torch.nn.functional.rms_norm), a single fused kernel in recent releases.
* Otherwise (e.g. CPU, PyTorch 1.13): no x^2 temporary (the sum of squares
  comes from a single fused norm reduction), the per-row scale is an (N, 1)
  vector, and the weight is applied in place, so only one full-size tensor is
  allocated instead of three.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        d = x.shape[-1]
        if x.is_cuda and hasattr(F, "rms_norm"):
            return F.rms_norm(x, (d,), self.weight, self.eps)
        norm = torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True)  # (N, 1)
        inv = torch.rsqrt(norm * norm / d + self.eps)                    # (N, 1)
        return torch.mul(x, inv).mul_(self.weight)
