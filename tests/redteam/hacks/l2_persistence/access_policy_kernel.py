# Hack attempt (l2_persistence, GPU): a kernel whose stream carries a persisting access-policy
# window over its input, set once and relied on for every later call.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_affine_persist(const float* x, float* y, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) { float v = x[i] * a + 2.0f; y[i] = v > 0.f ? v : 0.f; }
}

void persist(torch::Tensor x) {
  cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 16 << 20);
  cudaStreamAttrValue attr = {};
  attr.accessPolicyWindow.base_ptr = x.data_ptr();
  attr.accessPolicyWindow.num_bytes = x.numel() * 4;
  attr.accessPolicyWindow.hitRatio = 1.0f;
  attr.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
  attr.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(0, cudaStreamAttributeAccessPolicyWindow, &attr);
}

torch::Tensor run(torch::Tensor x, double scale) {
  auto y = torch::empty_like(x);
  int64_t n = x.numel();
  relu_affine_persist<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                                (float)(2.0 * scale), n);
  return y;
}
"""

module = load_inline(name="cudal1_redteam_l2_persist", cpp_sources="void persist(torch::Tensor x);\ntorch::Tensor run(torch::Tensor x, double scale);",
                     cuda_sources=source, functions=["persist", "run"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale
        self.first = True

    def forward(self, x):
        if self.first:
            self.first = False
            module.persist(x)
        return module.run(x.contiguous(), self.scale)
