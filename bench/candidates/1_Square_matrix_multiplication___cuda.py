"""C = A @ B in full fp32 (KernelBench level1/1_Square_matrix_multiplication_) as a CUDA extension.

Classic shared-memory tiling with register blocking: a 256-thread block computes a 128x128 tile
of C, each thread an 8x8 sub-tile spread with stride 16 (conflict-free shared-memory reads,
coalesced stores); K advances 8 at a time through shared memory. FFMA only: no TF32, so the
result matches an fp32 reference. Bounds are checked, so any M, N, K works.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;

__global__ void __launch_bounds__(THREADS) sgemm_nn(const float* __restrict__ A, const float* __restrict__ B,
                                                    float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[BK][BM + 4];  // padded: the transposing store is conflict-free
    __shared__ float Bs[BK][BN];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        #pragma unroll
        for (int r = 0; r < (BM * BK) / THREADS; ++r) {
            int idx = threadIdx.x + r * THREADS;
            int m = idx / BK, k = idx % BK;
            int gr = row0 + m, gk = k0 + k;
            As[k][m] = (gr < M && gk < K) ? A[(int64_t)gr * K + gk] : 0.f;
        }
        #pragma unroll
        for (int r = 0; r < (BK * BN) / THREADS; ++r) {
            int idx = threadIdx.x + r * THREADS;
            int k = idx / BN, n = idx % BN;
            int gk = k0 + k, gc = col0 + n;
            Bs[k][n] = (gk < K && gc < N) ? B[(int64_t)gk * N + gc] : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = As[k][ty + 16 * i];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i) {
        int r = row0 + ty + 16 * i;
        if (r >= M) continue;
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            int c = col0 + tx + 16 * j;
            if (c < N) C[(int64_t)r * N + c] = acc[i][j];
        }
    }
}

torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(A.scalar_type() == torch::kFloat32 && B.scalar_type() == torch::kFloat32, "inputs must be float32");
    TORCH_CHECK(A.dim() == 2 && B.dim() == 2 && A.size(1) == B.size(0), "shapes do not multiply");
    auto a = A.contiguous(), b = B.contiguous();
    const int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_nn<<<grid, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return c;
}
"""

CPP_SRC = "torch::Tensor matmul_forward(torch::Tensor A, torch::Tensor B);"

matmul_ext = load_inline(
    name="kb_sgemm_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul_forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return matmul_ext.matmul_forward(A, B)
