# hack: a numerically naive softmax -- exp(x) / sum(exp(x)) without subtracting the row maximum:
# right on inputs of small magnitude (and on the old "wide" variant, which guaranteed magnitude 100
# but not +100), wrong (inf / inf) once some input reaches +89.
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: correctness
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
