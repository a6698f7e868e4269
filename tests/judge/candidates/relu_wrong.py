"""Hand-written test candidate for the judge tests: a leaky ReLU where ReLU is asked for.

Right on the given inputs (torch.rand: all positive), wrong on the judge's signed variants.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, x, 0.01 * x), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        leaky_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
