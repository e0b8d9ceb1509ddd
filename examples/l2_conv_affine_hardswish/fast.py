"""CUDA candidate: the same cuDNN convolution (so the conv result is
bit-identical to the reference, TF32 or not), then ONE in-place fused
epilogue kernel: y = hardswish(y * scale[c] + shift[c]).

The kernel walks (n, c) planes in a 2-D grid-stride loop so the channel is
known per block (no per-element division), uses float4 when the plane size
is a multiple of 4, and falls back to scalar code otherwise.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda_src = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cstdint>

__device__ __forceinline__ float affine_hswish(float v, float s, float t) {
    v = v * s;
    v = v + t;
    return v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;
}

// y: [planes, hw] with plane p having channel p % channels.
__global__ void affine_hswish_kernel(float* __restrict__ y,
                                     const float* __restrict__ scale,
                                     const float* __restrict__ shift,
                                     int64_t planes, int64_t channels, int64_t hw, bool vec4) {
    for (int64_t p = blockIdx.y; p < planes; p += gridDim.y) {
        const int64_t c = p % channels;
        const float s = scale[c];
        const float t = shift[c];
        float* plane = y + p * hw;
        const int64_t stride = (int64_t)blockDim.x * gridDim.x;
        const int64_t first = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
        if (vec4) {
            float4* plane4 = reinterpret_cast<float4*>(plane);
            const int64_t n4 = hw >> 2;
            for (int64_t i = first; i < n4; i += stride) {
                float4 v = plane4[i];
                v.x = affine_hswish(v.x, s, t);
                v.y = affine_hswish(v.y, s, t);
                v.z = affine_hswish(v.z, s, t);
                v.w = affine_hswish(v.w, s, t);
                plane4[i] = v;
            }
        } else {
            for (int64_t i = first; i < hw; i += stride) {
                plane[i] = affine_hswish(plane[i], s, t);
            }
        }
    }
}

torch::Tensor affine_hswish_(torch::Tensor y, torch::Tensor scale, torch::Tensor shift) {
    TORCH_CHECK(y.is_cuda() && scale.is_cuda() && shift.is_cuda(), "affine_hswish_: tensors must be on CUDA");
    TORCH_CHECK(y.scalar_type() == torch::kFloat32 && scale.scalar_type() == torch::kFloat32 &&
                shift.scalar_type() == torch::kFloat32, "affine_hswish_: tensors must be float32");
    TORCH_CHECK(y.dim() == 4, "affine_hswish_: expected an NCHW tensor");
    TORCH_CHECK(y.is_contiguous() && scale.is_contiguous() && shift.is_contiguous(),
                "affine_hswish_: tensors must be contiguous");
    const int64_t channels = y.size(1);
    TORCH_CHECK(scale.numel() == channels && shift.numel() == channels,
                "affine_hswish_: scale/shift must have one entry per channel");
    if (y.numel() == 0) return y;
    const int64_t hw = y.size(2) * y.size(3);
    const int64_t planes = y.size(0) * channels;
    float* yp = y.data_ptr<float>();
    const bool vec4 = (hw % 4 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);

    const int threads = 256;
    const int64_t work = vec4 ? hw / 4 : hw;
    const int gx = (int)std::max<int64_t>(1, std::min<int64_t>((work + threads - 1) / threads, 64));
    const int gy = (int)std::min<int64_t>(planes, 65535);
    dim3 grid(gx, gy);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    affine_hswish_kernel<<<grid, threads, 0, stream>>>(
        yp, scale.data_ptr<float>(), shift.data_ptr<float>(), planes, channels, hw, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

_cpp_src = "torch::Tensor affine_hswish_(torch::Tensor y, torch::Tensor scale, torch::Tensor shift);"

_ext = load_inline(
    name="cudal1_example_l2_conv_affine_hardswish_fast",
    cpp_sources=_cpp_src,
    cuda_sources=_cuda_src,
    functions=["affine_hswish_"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(out_channels))
        self.shift = nn.Parameter(0.1 * torch.randn(out_channels))

    def forward(self, x):
        y = self.conv(x).contiguous()
        return _ext.affine_hswish_(y, self.scale.contiguous(), self.shift.contiguous())
