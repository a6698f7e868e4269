"""Hand-written bench candidate (rules, strict): the GEMM in Triton on the tensor cores with 3xTF32
(`input_precision="tf32x3"`: float32 accuracy from three TF32 products), grouped program order for L2
reuse, and the whole epilogue -- bias, add_value, Swish, tanh, GELU (erf form), Hardtanh -- applied to
the accumulator tile before the only store. Every compute op is the candidate's own."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_epilogue_kernel(x_ptr, w_ptr, bias_ptr, add_ptr, y_ptr, M, N, K,
                         BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m, grid_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    group = pid // (GROUP_M * grid_n)
    first_m = group * GROUP_M
    rows = min(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * grid_n)) % rows
    pid_n = (pid % (GROUP_M * grid_n)) // rows
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    x_tile = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_tile = w_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]  # W is (N, K): its transpose, K-contiguous
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(x_tile, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(w_tile, mask=(rn[None, :] < N) & (rk[:, None] + k < K), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        x_tile += BK
        w_tile += BK
    cols = rn < N
    v = acc + tl.load(bias_ptr + rn, mask=cols, other=0.0)[None, :] + tl.load(add_ptr + rn, mask=cols, other=0.0)[None, :]
    v = v * tl.sigmoid(v)  # Swish
    v = 1.0 - 2.0 / (tl.exp(2.0 * v) + 1.0)  # tanh
    v = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))  # GELU, erf form
    v = tl.minimum(tl.maximum(v, -1.0), 1.0)  # Hardtanh(-1, 1)
    tl.store(y_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], v, mask=(rm[:, None] < M) & cols[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.matmul.out_features
        y = torch.empty(M, N, device=x.device, dtype=torch.float32)
        big = x.is_cuda  # GPU tiles; the CPU interpreter (smoke tests) gets small ones
        bm, bn, bk = (128, 128, 32) if big else (16, 16, 16)
        grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
        gemm_epilogue_kernel[grid](x, self.matmul.weight, self.matmul.bias, self.add_value, y, M, N, K,
                                   BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=8 if big else 4,
                                   num_stages=3 if big else 1)
        return y
