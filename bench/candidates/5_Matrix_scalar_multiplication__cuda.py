"""C = A * s (KernelBench level1/5_Matrix_scalar_multiplication) as a CUDA C++ extension.

One pass over memory with 16-byte loads and stores in a grid-stride loop; the scalar arrives as a
double and multiplies in fp32, as torch does for a float tensor times a Python float.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void scale_vec4(const float4* __restrict__ x, float4* __restrict__ y, float s, int64_t n4) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        y[i] = v;
    }
}

__global__ void scale_scalar(const float* __restrict__ x, float* __restrict__ y, float s, int64_t start, int64_t n) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) y[i] = x[i] * s;
}

torch::Tensor scale_forward(torch::Tensor x, double s) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    const float sf = (float)s;
    auto stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    int device = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int max_blocks = sms * 16;
    bool aligned = reinterpret_cast<uintptr_t>(xp) % 16 == 0 && reinterpret_cast<uintptr_t>(yp) % 16 == 0;
    int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
        scale_vec4<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), sf, n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    if (n - n4 * 4 > 0) {
        int blocks = (int)std::min<int64_t>((n - n4 * 4 + threads - 1) / threads, max_blocks);
        scale_scalar<<<blocks, threads, 0, stream>>>(xp, yp, sf, n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor scale_forward(torch::Tensor x, double s);"

scale_ext = load_inline(
    name="kb_scale_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["scale_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return scale_ext.scale_forward(A, float(s))
