"""Example candidate (hand-written for kernelwright's examples): Triton matmul with the bias add
and ReLU fused into its epilogue.

`input_precision="ieee"` keeps the products in true fp32: Triton's default for fp32 dot is TF32,
which the judge (like the fp32 reference) does not accept.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_ym, stride_yn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        x = tl.load(x_ptr + rm[:, None] * stride_xm + (k + rk)[None, :] * stride_xk,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        # W is (N, K): load a (BLOCK_K, BLOCK_N) tile of its transpose
        w = tl.load(w_ptr + rn[None, :] * stride_wn + (k + rk)[:, None] * stride_wk,
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K), other=0.0)
        acc += tl.dot(x, w, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, y,
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters, same init as Model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w, b = self.linear.weight, self.linear.bias
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
        linear_relu_kernel[grid](x, w, b, y, M, N, K, x.stride(0), x.stride(1), w.stride(0), w.stride(1),
                                 y.stride(0), y.stride(1), BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return y
