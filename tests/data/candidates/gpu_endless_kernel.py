# Never finishes on CUDA: every thread spins on a flag nothing ever sets.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void spin_forever(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  volatile const float* first = x;
  // True for every finite input (only NaN differs from itself); the compiler cannot prove the
  // loop ends, so it stays.
  while (first[0] == first[0]) {
  }
  if (i < n) y[i] = x[i];
}

torch::Tensor endless(torch::Tensor x) {
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  spin_forever<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

module = load_inline(name="cudal1_test_gpu_endless", cpp_sources="torch::Tensor endless(torch::Tensor x);",
                     cuda_sources=cuda_source, functions=["endless"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, x):
        return module.endless(x.contiguous())
