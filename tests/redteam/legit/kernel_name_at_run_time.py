# Legitimate (GPU): the fused affine + ReLU kernel whose name is put together at run time (an
# f-string) and defined through a macro. No reading of the text finds its name; the worker reads
# it off the launch stub of the library the candidate built, so no no_custom_kernel flag.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

stem = "".join(["fused", "_affine"])
cuda_source = f"""
#include <torch/extension.h>

#define AFFINE_RELU_KERNEL(NAME) \\
  __global__ void NAME(const float* __restrict__ x, float* __restrict__ y, float a, int64_t n) {{ \\
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;                                 \\
    if (i < n) {{ float v = fmaf(x[i], a, 2.0f); y[i] = v > 0.f ? v : 0.f; }}                    \\
  }}

AFFINE_RELU_KERNEL({stem}_relu_kernel)

torch::Tensor affine_relu(torch::Tensor x, double scale) {{
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  {stem}_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                               (float)(2.0 * scale), n);
  return y;
}}
"""

module = load_inline(name="cudal1_redteam_kernel_name_at_run_time",
                     cpp_sources="torch::Tensor affine_relu(torch::Tensor x, double scale);",
                     cuda_sources=cuda_source, functions=["affine_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return module.affine_relu(x.contiguous(), self.scale)
