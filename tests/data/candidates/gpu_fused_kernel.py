# Correct on CUDA: one fused kernel (scale, bias, ReLU) instead of four PyTorch passes.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale_relu_kernel(const float* __restrict__ x, float* __restrict__ y, float a, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i] * a + 2.0f;
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

torch::Tensor scale_relu(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat, "expects contiguous float32 CUDA");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  const int threads = 256;
  const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
  scale_relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), (float)(2.0 * scale), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

module = load_inline(name="cudal1_test_gpu_scale_relu", cpp_sources="torch::Tensor scale_relu(torch::Tensor x, double scale);",
                     cuda_sources=cuda_source, functions=["scale_relu"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return module.scale_relu(x.contiguous(), self.scale)
