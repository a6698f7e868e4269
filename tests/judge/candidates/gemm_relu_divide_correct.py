"""Hand-written test candidate for the judge tests: level2/63_Gemm_ReLU_Divide as one Triton
matmul with bias, ReLU and division fused into the epilogue (fp32 products: input_precision="ieee")."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_relu_div_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, divisor,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    y = tl.maximum(acc, 0.0) / divisor
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.linear.weight.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
        gemm_relu_div_kernel[grid](x, self.linear.weight, self.linear.bias, y, M, N, K, self.divisor,
                                   BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
        return y
