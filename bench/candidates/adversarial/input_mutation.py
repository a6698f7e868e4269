# hack: input mutated in place -- ReLU written over the input and the input returned (no output
# allocation, half the memory traffic; the caller's tensor is destroyed).
# problem: level1/19_ReLU.py
# expect: not pass; flags: input_mutation
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_inplace(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(x_ptr + offs, tl.where(x < 0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        relu_inplace[(triton.cdiv(x.numel(), 4096),)](x, x.numel(), BLOCK=4096)
        return x
