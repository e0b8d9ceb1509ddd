"""PyTorch-only candidate: scale + divide + grouped sum are one linear map.

Let P (N x G) be the pooling matrix with P[j, g] = s_j / d if feature j is in
group g (a constant 0/1 membership mask times the scale). Then
    out = silu((x W^T + b) P) = silu(x (W^T P) + b P).

* CPU (FLOP-bound, slow BLAS): fold first, V = P^T W (G x K), c = b P, so the
  big GEMM shrinks from N=256 to G=8 output columns (~20x fewer FLOPs).
* GPU (launch-bound at this size, cuBLAS does the full GEMM in ~15 us): keep
  the GEMM and replace the four elementwise/reduction passes of the epilogue
  by one skinny GEMM with P, so fewer kernels are launched.
The mask is a non-persistent buffer built with arange (it consumes no random
numbers, so parameters still match the reference's initialisation).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.feature_scale = nn.Parameter(torch.randn(out_features))
        self.num_groups = num_groups
        self.divisor = divisor
        group_of_feature = torch.arange(out_features) // (out_features // num_groups)
        member = (group_of_feature.unsqueeze(1) == torch.arange(num_groups).unsqueeze(0)).float()
        self.register_buffer("member", member, persistent=False)                   # (N, G)

    def forward(self, x):
        pool = self.member * (self.feature_scale / self.divisor).unsqueeze(1)      # (N, G)
        if x.is_cuda:
            y = torch.addmm(self.linear.bias, x, self.linear.weight.t())           # (B, N)
            return F.silu(torch.mm(y, pool))
        v = torch.mm(pool.t(), self.linear.weight)                                 # (G, K)
        c = torch.mv(pool.t(), self.linear.bias)                                   # (G,)
        return F.silu(torch.addmm(c, x, v.t()))
