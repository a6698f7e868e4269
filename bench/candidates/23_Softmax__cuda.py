"""Softmax over dim=1 (KernelBench level1/23_Softmax) as a CUDA C++ extension.

Rows are far too long for one pass in registers (393216 floats), so each block owns a row and
reads it twice: pass 1 keeps a running (max, sum of exp) per thread ("online softmax") and
combines them across the block; pass 2 writes exp(x - max) / sum. 16-byte accesses when aligned.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>
#include <cmath>

constexpr int THREADS = 1024;

__device__ __forceinline__ void add_value(float& m, float& s, float v) {
    if (v > m) { s = s * expf(m - v) + 1.f; m = v; }
    else { s += expf(v - m); }
}

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    float M = fmaxf(m, m2);
    if (M == -INFINITY) { m = M; s = 0.f; return; }
    s = s * expf(m - M) + s2 * expf(m2 - M);
    m = M;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int64_t n_cols, bool vec4) {
    const float* row = x + (int64_t)blockIdx.x * n_cols;
    float* out = y + (int64_t)blockIdx.x * n_cols;
    float m = -INFINITY, s = 0.f;
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        for (int64_t i = threadIdx.x; i < n_cols / 4; i += THREADS) {
            float4 v = row4[i];
            add_value(m, s, v.x); add_value(m, s, v.y); add_value(m, s, v.z); add_value(m, s, v.w);
        }
    } else {
        for (int64_t i = threadIdx.x; i < n_cols; i += THREADS) add_value(m, s, row[i]);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, offset);
        float s2 = __shfl_xor_sync(0xffffffff, s, offset);
        combine(m, s, m2, s2);
    }
    __shared__ float warp_m[THREADS / 32], warp_s[THREADS / 32];
    __shared__ float row_m, row_inv_s;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { warp_m[warp] = m; warp_s[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? warp_m[lane] : -INFINITY;
        s = lane < THREADS / 32 ? warp_s[lane] : 0.f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, offset);
            float s2 = __shfl_xor_sync(0xffffffff, s, offset);
            combine(m, s, m2, s2);
        }
        if (lane == 0) { row_m = m; row_inv_s = 1.f / s; }
    }
    __syncthreads();
    const float M = row_m, inv = row_inv_s;
    if (vec4) {
        const float4* row4 = reinterpret_cast<const float4*>(row);
        float4* out4 = reinterpret_cast<float4*>(out);
        for (int64_t i = threadIdx.x; i < n_cols / 4; i += THREADS) {
            float4 v = row4[i];
            v.x = expf(v.x - M) * inv; v.y = expf(v.y - M) * inv;
            v.z = expf(v.z - M) * inv; v.w = expf(v.w - M) * inv;
            out4[i] = v;
        }
    } else {
        for (int64_t i = threadIdx.x; i < n_cols; i += THREADS) out[i] = expf(row[i] - M) * inv;
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2, "x must be a 2-D CUDA tensor");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    if (rows == 0 || cols == 0) return y;
    bool vec4 = cols % 4 == 0 && reinterpret_cast<uintptr_t>(xc.data_ptr<float>()) % 16 == 0
                && reinterpret_cast<uintptr_t>(y.data_ptr<float>()) % 16 == 0;
    softmax_rows<<<(unsigned)rows, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), cols, vec4);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="kb_softmax_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
