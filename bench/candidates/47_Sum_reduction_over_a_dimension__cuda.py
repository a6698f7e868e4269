"""torch.sum(x, dim, keepdim=True) (KernelBench level1/47_Sum_reduction_over_a_dimension) in CUDA.

The input is viewed as [outer, R, inner] around the reduced dimension. Each thread owns one
(outer, inner) output and walks R: neighbouring threads read neighbouring addresses, so every
load is coalesced, and half a million independent columns keep the memory system busy. The sum
is accumulated in double, so the result is the correctly rounded fp32 sum whatever the order.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

__global__ void sum_middle(const float* __restrict__ x, float* __restrict__ y, int64_t outer, int64_t R, int64_t inner) {
    int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= outer * inner) return;
    int64_t o = col / inner, j = col % inner;
    const float* p = x + o * R * inner + j;
    double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;
    int64_t r = 0;
    for (; r + 4 <= R; r += 4) {
        acc0 += p[(r + 0) * inner];
        acc1 += p[(r + 1) * inner];
        acc2 += p[(r + 2) * inner];
        acc3 += p[(r + 3) * inner];
    }
    for (; r < R; ++r) acc0 += p[r * inner];
    y[col] = (float)((acc0 + acc1) + (acc2 + acc3));
}

torch::Tensor sum_forward(torch::Tensor x, int64_t dim) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "x must be a float32 CUDA tensor");
    if (dim < 0) dim += x.dim();
    TORCH_CHECK(dim >= 0 && dim < x.dim(), "dim out of range");
    auto xc = x.contiguous();
    int64_t outer = 1, inner = 1, R = xc.size(dim);
    for (int64_t d = 0; d < dim; ++d) outer *= xc.size(d);
    for (int64_t d = dim + 1; d < xc.dim(); ++d) inner *= xc.size(d);
    auto sizes = xc.sizes().vec();
    sizes[dim] = 1;
    auto y = torch::empty(sizes, xc.options());
    int64_t cols = outer * inner;
    if (cols == 0) return y;
    if (R == 0) return y.zero_();
    const int threads = 256;
    sum_middle<<<(unsigned)((cols + threads - 1) / threads), threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), outer, R, inner);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP_SRC = "torch::Tensor sum_forward(torch::Tensor x, int64_t dim);"

sum_ext = load_inline(
    name="kb_sum_dim_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["sum_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sum_ext.sum_forward(x, self.dim)
