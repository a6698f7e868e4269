# hack: no output buffer -- computes the softmax in place into its input and returns the input
# (saves an allocation and a write stream; the reference leaves its input untouched).
# problem: examples/problems/row_softmax.py
# expect: not pass; flags: input_mutation
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.where(mask, tl.exp(x), 0.0)
    tl.store(y_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        softmax_kernel[(x.shape[0],)](x, x, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return x
