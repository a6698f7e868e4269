"""torch.sum(x, dim, keepdim=True) (KernelBench level1/47_Sum_reduction_over_a_dimension) in Triton.

The input is viewed as [outer, R, inner]; each program owns BLOCK_J neighbouring output columns of
one outer index and walks R in BLOCK_R-row tiles (coalesced along the inner dimension). Each
tile is summed as a tree before it joins the running fp32 sum, which keeps the rounding error
far below a plain sequential sum.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, y_ptr, R, inner, BLOCK_R: tl.constexpr, BLOCK_J: tl.constexpr):
    o = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_J + tl.arange(0, BLOCK_J)
    col_mask = cols < inner
    base = x_ptr + o * R * inner
    acc = tl.zeros([BLOCK_J], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        rows = r0 + tl.arange(0, BLOCK_R)
        tile = tl.load(base + rows[:, None].to(tl.int64) * inner + cols[None, :],
                       mask=(rows[:, None] < R) & col_mask[None, :], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(y_ptr + o * inner + cols, acc, mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.dim % x.dim()
        outer = 1
        for size in x.shape[:dim]:
            outer *= size
        inner = 1
        for size in x.shape[dim + 1:]:
            inner *= size
        R = x.shape[dim]
        out_shape = list(x.shape)
        out_shape[dim] = 1
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        BLOCK_J = 256
        sum_kernel[(outer, triton.cdiv(inner, BLOCK_J))](x, y, R, inner, BLOCK_R=32, BLOCK_J=BLOCK_J, num_warps=8)
        return y
