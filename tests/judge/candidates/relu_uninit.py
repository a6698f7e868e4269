"""Hand-written test candidate for the judge tests: the grid covers only half of the elements, so
the other half of the torch.empty output is never written."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        half = x.numel() // 2
        relu_kernel[(triton.cdiv(half, 256),)](x, y, half, BLOCK=256)
        return y
