"""ReLU (KernelBench level1/19_ReLU) as a CUDA C++ extension.

One pass over memory: 16-byte (float4) loads and stores in a grid-stride loop, a scalar loop for
a misaligned or ragged tail. NaN is kept (x < 0 is false for NaN), as torch.relu keeps it.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__device__ __forceinline__ float relu1(float v) { return v < 0.f ? 0.f : v; }

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = relu1(v.x); v.y = relu1(v.y); v.z = relu1(v.z); v.w = relu1(v.w);
        y[i] = v;
    }
}

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = relu1(x[i]);
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    const float* xp = xc.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    auto stream = c10::cuda::getCurrentCUDAStream();
    const int threads = 256;
    int device = 0, sms = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int max_blocks = sms * 16;
    bool aligned = (reinterpret_cast<uintptr_t>(xp) % 16 == 0) && (reinterpret_cast<uintptr_t>(yp) % 16 == 0);
    int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int blocks = (int)std::min<int64_t>((n4 + threads - 1) / threads, max_blocks);
        relu_vec4<<<blocks, threads, 0, stream>>>(reinterpret_cast<const float4*>(xp), reinterpret_cast<float4*>(yp), n4);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    int64_t rest = n - n4 * 4;
    if (rest > 0) {
        int blocks = (int)std::min<int64_t>((rest + threads - 1) / threads, max_blocks);
        relu_scalar<<<blocks, threads, 0, stream>>>(xp, yp, n4 * 4, n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CPP_SRC = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="kb_relu_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["relu_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x)
