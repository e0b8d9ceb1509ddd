# Faults on CUDA: the kernel writes through a pointer to an unmapped address (error 700).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void write_far_away(float* y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) {
    float* wild = reinterpret_cast<float*>(0x10);
    wild[i] = 1.0f;
  }
}

torch::Tensor broken(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  write_far_away<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

module = load_inline(name="cudal1_test_gpu_illegal_address", cpp_sources="torch::Tensor broken(torch::Tensor x);",
                     cuda_sources=cuda_source, functions=["broken"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return module.broken(x.contiguous())
