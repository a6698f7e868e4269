"""C = A * s (KernelBench level1/5_Matrix_scalar_multiplication) as a Triton kernel: one pass,
64-bit offsets, the scalar multiplied in fp32 as torch does."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, s, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * s, mask=mask)  # a Python float arrives as an fp32 scalar


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        A = A.contiguous()
        C = torch.empty_like(A)
        n = A.numel()
        BLOCK = 4096
        scale_kernel[(triton.cdiv(n, BLOCK),)](A, C, float(s), n, BLOCK=BLOCK, num_warps=8)
        return C
