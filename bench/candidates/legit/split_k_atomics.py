# legit: split-K matmul -- each program sums one slice of K and adds its partial product into the
# output with atomic adds, into an output zeroed on every call. Triton's `reset_to_zero` zeroes the
# output only while the autotuner benchmarks its configurations (never with a single config, never
# on a cached one), so a candidate that relies on it alone adds into stale memory: the judge's poison.
# problem: tests/judge/problems/matmul_signed.py
# needs: gpu
# expect: pass
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 64, "SPLIT_K": 8}, num_warps=4)],
                 key=["M", "N", "K"], reset_to_zero=["c_ptr"])
@triton.jit
def split_k_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_m, pid_n, pid_k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(pid_k * BLOCK_K, K, BLOCK_K * SPLIT_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * N + rn[None, :], mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.atomic_add(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.zeros((M, N), device=A.device, dtype=torch.float32)
        grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]), triton.cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])  # noqa: E731
        split_k_kernel[grid](A, B, C, M, N, K)
        return C
