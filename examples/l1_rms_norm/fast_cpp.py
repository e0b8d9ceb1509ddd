"""CPU C++ candidate (load_inline with cpp_sources only, no CUDA).

One fused loop per row: sum of squares with 16 independent accumulators (so
g++ -O3 can vectorise it without -ffast-math), then a second sweep over the
row (still in L1/L2) writing x * inv_rms * weight. Rows are split across
threads with at::parallel_for. Only the output tensor is allocated, versus
three full-size temporaries in the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cpp_src = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <cmath>

torch::Tensor rms_norm_cpu(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(), "rms_norm_cpu: tensors must be on CPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "rms_norm_cpu: tensors must be float32");
    TORCH_CHECK(x.dim() >= 1, "rms_norm_cpu: input must have at least one dimension");
    x = x.contiguous();
    weight = weight.contiguous();
    const int64_t cols = x.size(-1);
    TORCH_CHECK(weight.numel() == cols, "rms_norm_cpu: weight size must match the last dimension");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / cols;
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const float feps = static_cast<float>(eps);

    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* __restrict__ xr = xp + r * cols;
            float* __restrict__ yr = yp + r * cols;
            float acc[16] = {0.f};
            int64_t j = 0;
            for (; j + 16 <= cols; j += 16) {
                for (int k = 0; k < 16; ++k) acc[k] += xr[j + k] * xr[j + k];
            }
            float total = 0.f;
            for (int k = 0; k < 16; ++k) total += acc[k];
            for (; j < cols; ++j) total += xr[j] * xr[j];
            const float inv = 1.0f / std::sqrt(total / static_cast<float>(cols) + feps);
            for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv * wp[c];
        }
    });
    return y;
}
"""

_ext = load_inline(
    name="cudal1_example_l1_rms_norm_fast_cpp",
    cpp_sources=_cpp_src,
    functions=["rms_norm_cpu"],
    extra_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        return _ext.rms_norm_cpu(x, self.weight, float(self.eps))
