import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = "torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha);"

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

template <typename scalar_t, typename acc_t>
__global__ void scaled_add_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ y,
                                  scalar_t* __restrict__ out, acc_t alpha, int64_t n) {
    // grid-stride loop with 64-bit indices: correct for any n and any grid size
    int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        acc_t v = static_cast<acc_t>(x[i]) + alpha * static_cast<acc_t>(y[i]);
        out[i] = static_cast<scalar_t>(v);
    }
}

torch::Tensor scaled_add(torch::Tensor x, torch::Tensor y, double alpha) {
    TORCH_CHECK(x.is_cuda() && y.is_cuda(), "scaled_add: inputs must be CUDA tensors");
    TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: shapes differ");
    TORCH_CHECK(x.scalar_type() == y.scalar_type(), "scaled_add: dtypes differ");
    const c10::cuda::CUDAGuard device_guard(x.device());
    auto xc = x.contiguous();
    auto yc = y.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int64_t max_blocks = (int64_t)at::cuda::getCurrentDeviceProperties()->multiProcessorCount * 32;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, max_blocks);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), "scaled_add", [&] {
        using acc_t = at::opmath_type<scalar_t>;  // float for half/bfloat16/float, double for double
        scaled_add_kernel<scalar_t, acc_t><<<blocks, threads, 0, stream>>>(
            xc.data_ptr<scalar_t>(), yc.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
            static_cast<acc_t>(alpha), n);
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

# Compiled once, when the module is imported. No -arch flag: the judge sets TORCH_CUDA_ARCH_LIST.
scaled_add_ext = load_inline(
    name="scaled_add_ext",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["scaled_add"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    """out = x + alpha * y in one pass over memory (the reference reads and writes twice)."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return scaled_add_ext.scaled_add(x, y, float(self.alpha))
