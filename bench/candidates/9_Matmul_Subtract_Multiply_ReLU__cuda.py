"""relu((x @ W.T + b - sub) * mul) (KernelBench level2/9_Matmul_Subtract_Multiply_ReLU) in CUDA.

One kernel: a shared-memory tiled fp32 GEMM (128x128 tile per 256-thread block, 8x8 per thread,
FFMA only, no TF32) with bias, subtract, multiply and ReLU applied to the accumulators before
the single store, so the [batch, out] intermediate never goes through memory. The weight stays
an nn.Linear, so it is initialised exactly like the reference's.
"""
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8, THREADS = 256;

// C[m, n] = epilogue(sum_k X[m, k] * W[n, k] + bias[n])
__global__ void __launch_bounds__(THREADS) linear_sub_mul_relu(
        const float* __restrict__ X, const float* __restrict__ W, const float* __restrict__ bias,
        float* __restrict__ C, int M, int N, int K, float sub, float mul) {
    __shared__ float Xs[BK][BM + 4];
    __shared__ float Ws[BK][BN + 4];
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
            Xs[k][m] = (row0 + m < M && k0 + k < K) ? X[(int64_t)(row0 + m) * K + k0 + k] : 0.f;
        }
        #pragma unroll
        for (int r = 0; r < (BN * BK) / THREADS; ++r) {
            int idx = threadIdx.x + r * THREADS;
            int n = idx / BK, k = idx % BK;
            Ws[k][n] = (col0 + n < N && k0 + k < K) ? W[(int64_t)(col0 + n) * K + k0 + k] : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[TM], b[TN];
            #pragma unroll
            for (int i = 0; i < TM; ++i) a[i] = Xs[k][ty + 16 * i];
            #pragma unroll
            for (int j = 0; j < TN; ++j) b[j] = Ws[k][tx + 16 * j];
            #pragma unroll
            for (int i = 0; i < TM; ++i)
                #pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    #pragma unroll
    for (int j = 0; j < TN; ++j) {
        int c = col0 + tx + 16 * j;
        if (c >= N) continue;
        float bj = bias[c];
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            int r = row0 + ty + 16 * i;
            if (r >= M) continue;
            float v = ((acc[i][j] + bj) - sub) * mul;
            C[(int64_t)r * N + c] = v < 0.f ? 0.f : v;
        }
    }
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double sub, double mul) {
    TORCH_CHECK(x.is_cuda() && weight.is_cuda() && bias.is_cuda(), "tensors must be on the GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && weight.scalar_type() == torch::kFloat32, "float32 only");
    auto X = x.contiguous(), Wc = weight.contiguous(), B = bias.contiguous();
    const int M = X.size(0), K = X.size(1), N = Wc.size(0);
    TORCH_CHECK(Wc.size(1) == K, "weight has the wrong in_features");
    auto C = torch::empty({M, N}, X.options());
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    linear_sub_mul_relu<<<grid, THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
        X.data_ptr<float>(), Wc.data_ptr<float>(), B.data_ptr<float>(), C.data_ptr<float>(), M, N, K,
        (float)sub, (float)mul);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return C;
}
"""

CPP_SRC = "torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double sub, double mul);"

fused_ext = load_inline(
    name="kb_linear_sub_mul_relu_cuda",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, subtract_value, multiply_value):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.subtract_value = subtract_value
        self.multiply_value = multiply_value

    def forward(self, x):
        return fused_ext.forward(x, self.linear.weight, self.linear.bias,
                                 float(self.subtract_value), float(self.multiply_value))
