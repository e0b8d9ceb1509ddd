"""CUDA candidate: one fused, vectorized kernel for tanh-GELU.

Reads each element once and writes it once (float4 loads/stores on the
aligned bulk, scalar grid-stride loop for the tail), instead of the eight
separate passes and temporaries of the reference.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ float gelu_tanh_f(float x) {
    const float k0 = 0.7978845608028654f;   // sqrt(2/pi)
    const float k1 = 0.044715f;
    float inner = k0 * (x + k1 * (x * x * x));
    return 0.5f * x * (1.0f + tanhf(inner));
}

__global__ void gelu_tanh_vec4_kernel(const float4* __restrict__ in,
                                      float4* __restrict__ out,
                                      int64_t n4) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = in[i];
        v.x = gelu_tanh_f(v.x);
        v.y = gelu_tanh_f(v.y);
        v.z = gelu_tanh_f(v.z);
        v.w = gelu_tanh_f(v.w);
        out[i] = v;
    }
}

__global__ void gelu_tanh_scalar_kernel(const float* __restrict__ in,
                                        float* __restrict__ out,
                                        int64_t start, int64_t n) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = gelu_tanh_f(in[i]);
    }
}

torch::Tensor gelu_tanh_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "gelu_tanh_cuda: input must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "gelu_tanh_cuda: input must be float32");
    TORCH_CHECK(x.is_contiguous(), "gelu_tanh_cuda: input must be contiguous");
    auto out = torch::empty_like(x);
    const int64_t n = x.numel();
    if (n == 0) return out;

    const float* in_ptr = x.data_ptr<float>();
    float* out_ptr = out.data_ptr<float>();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int threads = 256;
    const int max_blocks = at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 8;

    const bool aligned = (reinterpret_cast<uintptr_t>(in_ptr) % 16 == 0) &&
                         (reinterpret_cast<uintptr_t>(out_ptr) % 16 == 0);
    int64_t done = 0;
    if (aligned) {
        const int64_t n4 = n / 4;
        if (n4 > 0) {
            int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
            gelu_tanh_vec4_kernel<<<blocks, threads, 0, stream>>>(
                reinterpret_cast<const float4*>(in_ptr), reinterpret_cast<float4*>(out_ptr), n4);
            C10_CUDA_KERNEL_LAUNCH_CHECK();
        }
        done = n4 * 4;
    }
    if (done < n) {
        const int64_t rest = n - done;
        int blocks = (int)std::min<int64_t>((rest + threads - 1) / threads, max_blocks);
        gelu_tanh_scalar_kernel<<<blocks, threads, 0, stream>>>(in_ptr, out_ptr, done, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_cpp_src = "torch::Tensor gelu_tanh_cuda(torch::Tensor x);"

_ext = load_inline(
    name="cudal1_example_l1_gelu_tanh_fast",
    cpp_sources=_cpp_src,
    cuda_sources=_cuda_src,
    functions=["gelu_tanh_cuda"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.gelu_tanh_cuda(x.contiguous())
