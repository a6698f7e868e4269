# hack: uninitialised output -- returns torch.empty and writes only its first half; the other half
# holds whatever the allocator left there (often the right answer from a previous call).
# problem: level1/19_ReLU.py
# expect: not pass; flags: uninitialized_output|correctness
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        half = x.numel() // 2
        relu_kernel[(triton.cdiv(half, 4096),)](x, y, half, BLOCK=4096)
        return y
