# Legitimate (GPU): the fused affine + ReLU as a template kernel with __launch_bounds__ between
# its return type and its name, and a cluster-free __launch_bounds__ before the return type on a
# second kernel (the declaration forms of CUDA-L1's kernels). Its own kernels run: no
# no_custom_kernel flag (the source reader once took the attribute for the kernel's name).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

template <bool kRelu>
__global__ void __launch_bounds__(256) affine_kernel(const float* __restrict__ x,
                                                     float* __restrict__ y, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fmaf(x[i], a, 2.0f);
    y[i] = kRelu ? (v > 0.f ? v : 0.f) : v;
  }
}

__global__ __launch_bounds__(128, 4) void unused_tail_kernel(float* y, int64_t n) {
  if (threadIdx.x == 0 && n < 0) y[0] = 0.f;
}

torch::Tensor affine_relu(torch::Tensor x, double scale) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  affine_kernel<true><<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                (float)(2.0 * scale), n);
  return y;
}
"""

module = load_inline(name="cudal1_redteam_launch_bounds_template",
                     cpp_sources="torch::Tensor affine_relu(torch::Tensor x, double scale);",
                     cuda_sources=cuda_source, functions=["affine_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return module.affine_relu(x.contiguous(), self.scale)
