"""CUDA candidate: one thread block per row (grid-stride over rows).

Pass 1 accumulates the sum of squares with float4 loads and a warp-shuffle
block reduction; pass 2 re-reads the (L1/L2-resident) row and writes
x * rsqrt(mean + eps) * weight. One read + one write of the tensor in total,
versus ~4 full passes and 3 full-size temporaries in the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

constexpr int kThreads = 256;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Sum over the block; every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* smem) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    __syncthreads();                 // smem may still be read from a previous call
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    const int nwarps = (blockDim.x + 31) >> 5;
    float t = (threadIdx.x < nwarps) ? smem[threadIdx.x] : 0.0f;
    if (warp == 0) {
        t = warp_sum(t);
        if (lane == 0) smem[32] = t;
    }
    __syncthreads();
    return smem[32];
}

__global__ void rms_norm_kernel(const float* __restrict__ x,
                                const float* __restrict__ w,
                                float* __restrict__ y,
                                int64_t rows, int64_t cols, float eps, bool vec4) {
    __shared__ float smem[33];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float acc = 0.0f;
        if (vec4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            const int64_t c4 = cols >> 2;
            for (int64_t i = threadIdx.x; i < c4; i += blockDim.x) {
                float4 v = xr4[i];
                acc += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
            }
        } else {
            for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
                float v = xr[i];
                acc += v * v;
            }
        }
        const float total = block_sum(acc, smem);
        const float inv = rsqrtf(total / (float)cols + eps);
        if (vec4) {
            const float4* xr4 = reinterpret_cast<const float4*>(xr);
            const float4* w4 = reinterpret_cast<const float4*>(w);
            float4* yr4 = reinterpret_cast<float4*>(yr);
            const int64_t c4 = cols >> 2;
            for (int64_t i = threadIdx.x; i < c4; i += blockDim.x) {
                float4 v = xr4[i];
                float4 g = w4[i];
                v.x = v.x * inv * g.x;
                v.y = v.y * inv * g.y;
                v.z = v.z * inv * g.z;
                v.w = v.w * inv * g.w;
                yr4[i] = v;
            }
        } else {
            for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
                yr[i] = xr[i] * inv * w[i];
            }
        }
    }
}

torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor weight, double eps) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda(), "rms_norm_cuda: tensors must be on CUDA");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32,
                "rms_norm_cuda: tensors must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous(), "rms_norm_cuda: tensors must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "rms_norm_cuda: input must have at least one dimension");
    const int64_t cols = x.size(-1);
    TORCH_CHECK(weight.numel() == cols, "rms_norm_cuda: weight size must match the last dimension");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int64_t rows = x.numel() / cols;

    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const bool vec4 = (cols % 4 == 0) &&
                      (reinterpret_cast<uintptr_t>(xp) % 16 == 0) &&
                      (reinterpret_cast<uintptr_t>(wp) % 16 == 0) &&
                      (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    const int max_blocks = at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 16;
    const int blocks = (int)std::min<int64_t>(rows, max_blocks);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    rms_norm_kernel<<<blocks, kThreads, 0, stream>>>(xp, wp, yp, rows, cols, (float)eps, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_cpp_src = "torch::Tensor rms_norm_cuda(torch::Tensor x, torch::Tensor weight, double eps);"

_ext = load_inline(
    name="cudal1_example_l1_rms_norm_fast",
    cpp_sources=_cpp_src,
    cuda_sources=_cuda_src,
    functions=["rms_norm_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden_size))

    def forward(self, x):
        return _ext.rms_norm_cuda(x.contiguous(), self.weight.contiguous(), float(self.eps))
